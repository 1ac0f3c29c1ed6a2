// --native: the engine's part for native frames. Keeps each sample's machine state (the
// PBP_EV_NATIVE record that precedes its sample record) until the sample comes, unwinds it,
// names its frames and merges them with the sample's Python frames (merge.h) into a stack of
// the StackStore. One per engine, per process state inside.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/stack_store.h"
#include "native/native_symbols.h"
#include "native/process_modules.h"
#include "native/unwinder.h"
#include "pybpfprof/abi.h"
#include "sys/kallsyms.h"

namespace pbp::native {

class NativeStacks {
public:
    explicit NativeStacks(StackStore& store);
    ~NativeStacks();

    // A machine-state record (size bytes of it): kept for the sample record that follows it.
    void on_capture(const pbp_native_event& ev, size_t size);
    // The mixed stack of sample e, whose Python-only stack is plain; plain when it has no
    // machine state (BPF could not send it, or not asked for this process). version_hex: the
    // process's PY_VERSION_HEX (how its eval-loop calls map to Python frames).
    uint32_t stack_for(const pbp_event& e, uint32_t plain, uint32_t version_hex);
    void forget_process(pid_t pid);

    // For the debug line and the benchmarks: samples unwound, exactly merged, ns spent.
    uint64_t unwound() const { return unwound_; }
    uint64_t exact() const { return exact_; }
    uint64_t unwind_ns() const { return unwind_ns_; }

private:
    struct Proc {
        explicit Proc(pid_t pid) : modules(pid), unwinder(modules), symbols(modules) {}
        ProcessModules modules;
        Unwinder unwinder;
        NativeSymbols symbols;
        // interned frame index per distinct native frame, in the StackStore's table
        std::unordered_map<const Frame*, uint32_t> interned;
    };
    Proc& proc(pid_t pid);
    uint32_t intern_native(Proc& p, const Frame& f);

    StackStore& store_;
    std::unique_ptr<KernelSymbols> kernel_;  // /proc/kallsyms, read at the first kernel frame
    std::unordered_map<uint64_t, uint32_t> kernel_frames_;  // address -> interned frame
    std::map<pid_t, std::unique_ptr<Proc>> procs_;
    // tid -> the last machine state, waiting for its sample record
    std::unordered_map<uint32_t, std::vector<uint8_t>> pending_;
    uint32_t incomplete_ = 0;  // the interned "[native stack incomplete]"
    uint64_t unwound_ = 0, exact_ = 0, unwind_ns_ = 0;
};

}  // namespace pbp::native
