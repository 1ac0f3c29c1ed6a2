// The GIL of a profiled process, as userspace sees it: where its struct is (for the engine,
// e.g. to tell whether a thread already blocked in a futex waits for the GIL, from
// /proc/PID/task/TID/syscall) and what it holds. BPF reads the same fields (bpf/gil.bpf.h)
// through pbp_py_offsets.gil_* and pbp_proc.gil_addr.
#pragma once
#include <cstdint>
#include <optional>

#include <map>
#include <string>
#include <vector>

#include "cpython/layout.h"
#include "sys/elf_file.h"
#include "sys/target_memory.h"

namespace pbp::cpython {

// Where a GIL is: the address range take_gil's futexes (its cond and mutex) lie in (the
// GIL struct, or 3.6's static variables), and its 'locked' and 'last_holder' fields.
struct GilRange {
    uint64_t addr = 0;
    uint64_t size = 0;
    uint64_t locked_at = 0, holder_at = 0;
    bool contains(uint64_t a) const { return a - addr < size; }
};

// ---- 3.6: the GIL in static variables ----------------------------------------------------
// 3.6's Python/ceval_gil.h keeps its one GIL in static variables of ceval.c: gil_locked,
// gil_last_holder, and gil_cond, gil_mutex, switch_cond, switch_mutex, which take_gil and
// drop_gil sleep on. They are local symbols, in .symtab only (unstripped builds).
struct GilStatics {
    uint64_t locked = 0, last_holder = 0;  // addresses in the process
    uint64_t wait_addr = 0, wait_size = 0; // the futexes: one range covering the four
};
// The symbols to look up (with their sizes) in the ELF file that holds the interpreter.
const std::vector<std::string>& gil_static_symbols();
// For a layout whose GIL is in static variables (bpf.gil_where == PBP_GIL_WHERE_STATICS):
// their addresses from syms (link-time values and sizes) and the file's load bias. When they
// are not all there (a stripped build) or not laid out as expected, nullopt, 'why' says why
// in a few words, and layout.bpf.gil_where becomes PBP_GIL_WHERE_NONE: every sample GIL n/a.
// Other layouts: nullopt, layout and 'why' untouched.
std::optional<GilStatics> locate_gil_statics(Layout& layout, const std::map<std::string, ElfFile::Symbol>& syms,
                                             uint64_t bias, std::string& why);

// Why the GIL of a process with this layout is not known (every sample n/a), for people;
// "" when it is known. statics_why: what locate_gil_statics() said.
std::string gil_unknown_reason(const Layout& layout, const std::string& statics_why);

// The GIL's address when it is at a fixed place (3.7 .. 3.11: inside _PyRuntime), for
// pbp_proc.gil_addr; 0 when it is not (3.12+ find it through the interpreter) or not known.
uint64_t gil_fixed_address(const Layout& layout, uint64_t runtime_addr);

// The main interpreter's GIL in a running process: the fixed address, or (3.12+) the pointer
// in the first interpreter (interp_head_addr: PythonTarget::interp_head_addr), or 3.6's
// static variables. nullopt when the layout has no GIL (free-threaded, a 3.6 without its
// symbols) or the interpreter has none yet (starting).
// statics: 3.6's (locate_gil_statics), else nullptr.
std::optional<GilRange> gil_range(const Layout& layout, uint64_t runtime_addr, uint64_t interp_head_addr,
                                  const GilStatics* statics, MemoryReader& mem);

// What the GIL says now: 'locked' (1 taken, 0 free, -1 not created yet) and the thread state
// that holds it or held it last.
struct GilSnapshot {
    int32_t locked = 0;
    uint64_t last_holder = 0;
};
std::optional<GilSnapshot> read_gil(const GilRange& gil, MemoryReader& mem);

}  // namespace pbp::cpython
