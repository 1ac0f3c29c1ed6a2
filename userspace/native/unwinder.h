// --native: a sample's user stack unwound from what BPF copied (registers and a slice of the
// stack from sp up), with the DWARF call-frame information of the process's files (libdwfl;
// its x86_64 backend falls back to frame pointers where a function has no CFI). Nothing is
// read from the process itself: what is not in the copy ends the unwind.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "native/process_modules.h"
#include "pybpfprof/abi.h"

namespace pbp::native {

struct UnwoundStack {
    // Leaf first. pcs[0] is where the sample hit; the others are return addresses minus one,
    // inside the call instruction (the right line and function for a call at a function's end).
    std::vector<uint64_t> pcs;
    // The unwind reached the stack's outermost frame (no caller left); false: it stopped on
    // something it could not read (the copy's end, a file without unwind information).
    bool complete = false;
};

// Deepest native stack kept.
constexpr size_t kMaxNativeFrames = 256;

class Unwinder {
public:
    explicit Unwinder(ProcessModules& modules) : modules_(modules) {}
    // ev holds size bytes (its ustack cut to ustack_len).
    UnwoundStack unwind(const pbp_native_event& ev, size_t size);

    // libdwfl's callbacks (public for the C callback table only).
    struct Current {
        const pbp_native_event* ev = nullptr;
        uint64_t len = 0;  // valid bytes of ev->ustack
    };
    Current& current() { return cur_; }

private:
    bool attach();
    ProcessModules& modules_;
    Current cur_;
    uint32_t attached_epoch_ = 0;
};

}  // namespace pbp::native
