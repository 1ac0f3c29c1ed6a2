// The copy BPF took of a code object and the objects naming it (a PBP_EV_CODE record), served
// as the memory they were copied from: the symbolizer names the code object from it exactly as
// from the live process, after the code object is freed (module bodies, exec'd code).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cpython/layout.h"
#include "pybpfprof/abi.h"
#include "sys/target_memory.h"

namespace pbp {

class CapturedCode final : public MemoryReader {
public:
    // obj: the process's object layout (where a bytes object keeps its size and contents).
    CapturedCode(const pbp_code_event& e, const cpython::ObjectLayout& obj);
    // False for a record that cannot be one BPF made: a region longer than its room, or no copy
    // of the code object itself.
    bool valid() const { return valid_; }
    // Reads exactly n bytes at addr when they lie inside one region copied; false otherwise.
    bool read(uint64_t addr, void* buf, size_t n) override;
    // The line table was longer than BPF copies (PBP_CODE_LINES): the copy serves it cut short
    // (its size field lowered to what was copied), so its lines cover the first instructions.
    bool linetable_cut() const { return linetable_cut_; }

private:
    struct Region {
        uint64_t addr = 0;
        std::string bytes;
    };
    std::vector<Region> regions_;
    bool valid_ = false, linetable_cut_ = false;
};

}  // namespace pbp
