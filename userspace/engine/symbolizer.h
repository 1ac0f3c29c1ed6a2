// symbolize: BPF stacks of (code address, instruction offset, checksum) -> Frames.
// Names code objects from the copies BPF captured of them (add_captured), else reads them
// from the live target with process_vm_readv. The cache is keyed by
// address and checked against the checksum BPF computed at sample time, so a code object
// freed and replaced at the same address is never mislabelled.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpython/layout.h"
#include "engine/profile.h"
#include "pybpfprof/abi.h"
#include "sys/target_memory.h"

namespace pbp {

class Symbolizer {
public:
    // code_type_addr: &PyCode_Type in the target, 0 when unknown (no type check).
    void add_process(pid_t pid, const cpython::Layout& layout, uint64_t code_type_addr = 0);
    // The same, reading the process through mem (tests: memory that changes between reads).
    void add_process(pid_t pid, const cpython::Layout& layout, uint64_t code_type_addr,
                     std::unique_ptr<MemoryReader> mem);
    void remove_process(pid_t pid);
    // A code object's identity as BPF captured it (PBP_EV_CODE, before the first stack that
    // holds it): its frames are named from the copy, so one freed before they are read keeps its
    // name, file and lines. A copy it cannot name from (a str or line table longer than BPF
    // copies) is completed from the live process when it can. False when nothing was learned.
    bool add_captured(pid_t pid, const pbp_code_event& e);

    // Frames of one BPF stack, ROOT FIRST (BPF records leaf first). Frames that cannot be
    // resolved become synthetic frames; each such problem is counted in 'problems'.
    std::vector<Frame> symbolize(pid_t pid, const pbp_stack& stack, std::map<std::string, uint64_t>& problems);
    // The same frames interned into 'table', as indices, root first. A resolved frame is
    // remembered per (code object, instruction), so a new stack made of frames seen before
    // costs no string work (the agent's steady state: new stacks, known frames).
    std::vector<uint32_t> symbolize_into(pid_t pid, const pbp_stack& stack, FrameTable& table,
                                         std::map<std::string, uint64_t>& problems);

    // Checksum of a code object as BPF computes it, from a window read at its address (and,
    // for the str slots of csum_str_mask, the str hashes read through mem).
    static uint32_t code_checksum(const pbp_py_offsets& off, const uint8_t* window, size_t len,
                                  MemoryReader* mem = nullptr);

    size_t cached_code_objects() const;
    // Where debug lines go (Knobs::debug); none by default: the symbolizer prints nothing.
    void set_debug_log(std::function<void(const std::string&)> log) { debug_log_ = std::move(log); }

    // Problems a later read of the same code object can clear: it was read while changing
    // (its checksum or name did not match what BPF saw), not after its process was gone.
    static constexpr const char* kFreed = "code object freed before symbolization";
    static constexpr const char* kNameUnreadable = "code object name unreadable";
    // Whether the object header read at a code object's address (win, len bytes) is a live
    // object's: the checksum's fields outlive a free (the allocator writes only the first
    // words), so a freed code object can still match it, then yield a half-freed name, file
    // and lines. code_type_addr: &PyCode_Type, 0 = unknown.
    static bool looks_alive(const cpython::Layout& layout, uint64_t code_type_addr, uint64_t addr,
                            const uint8_t* win, size_t len);
    static bool transient(const std::string& problem) { return problem == kFreed || problem == kNameUnreadable; }

private:
    struct CodeInfo {
        uint32_t csum = 0;
        std::string name, file, linetable;
        int firstlineno = 0;
        bool shim = false;  // cpython::is_init_cleanup_shim: not a Python frame, left out of stacks
        std::unordered_map<uint32_t, int> lines;  // instr -> line
        std::unordered_map<uint32_t, uint32_t> frame_ids;  // instr -> index in ids_table_
    };
    struct Proc {
        cpython::Layout layout;
        uint64_t code_type_addr = 0;
        std::unique_ptr<MemoryReader> mem;
        std::unordered_map<uint64_t, CodeInfo> code;  // by address
    };
    // The code object at addr with checksum csum, read through mem (the process, or a copy).
    std::optional<CodeInfo> read_code(const Proc& p, MemoryReader& mem, uint64_t addr, uint32_t csum,
                                      std::string& problem) const;
    CodeInfo* code_info(Proc& p, uint64_t addr, uint32_t csum, std::string& problem);
    // Resolves one BPF frame; nullopt for a shim frame (left out). 'ci' is set when resolved.
    std::optional<Frame> frame(Proc* p, const pbp_frame& f, std::map<std::string, uint64_t>& problems,
                               CodeInfo*& ci);
    // Calls each(proc or nullptr, frame, out) for the frames of st, root first (BPF records
    // them leaf first); returns what it appended to out.
    template <typename Out, typename Fn>
    std::vector<Out> root_first(pid_t pid, const pbp_stack& st, Fn each);

    std::unordered_map<pid_t, Proc> procs_;
    const FrameTable* ids_table_ = nullptr;  // the table CodeInfo::frame_ids index into
    std::function<void(const std::string&)> debug_log_;
};

}  // namespace pbp
