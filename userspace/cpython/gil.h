// The GIL of a profiled process, as userspace sees it: where its struct is (for the engine,
// e.g. to tell whether a thread already blocked in a futex waits for the GIL, from
// /proc/PID/task/TID/syscall) and what it holds. BPF reads the same fields (bpf/gil.bpf.h)
// through pbp_py_offsets.gil_* and pbp_proc.gil_addr.
#pragma once
#include <cstdint>
#include <optional>

#include "cpython/layout.h"
#include "sys/target_memory.h"

namespace pbp::cpython {

// A GIL struct's address range: take_gil's futexes (its cond and mutex) lie inside.
struct GilRange {
    uint64_t addr = 0;
    uint64_t size = 0;
    bool contains(uint64_t a) const { return a - addr < size; }
};

// The GIL's address when it is at a fixed place (3.7 .. 3.11: inside _PyRuntime), for
// pbp_proc.gil_addr; 0 when it is not (3.12+ find it through the interpreter) or not known.
uint64_t gil_fixed_address(const Layout& layout, uint64_t runtime_addr);

// The main interpreter's GIL in a running process: the fixed address, or (3.12+) the pointer
// in the first interpreter (interp_head_addr: PythonTarget::interp_head_addr). nullopt when
// the layout has no GIL (3.6, free-threaded) or the interpreter has none yet (starting).
std::optional<GilRange> gil_range(const Layout& layout, uint64_t runtime_addr,
                                  uint64_t interp_head_addr, MemoryReader& mem);

// What the GIL says now: 'locked' (1 taken, 0 free, -1 not created yet) and the thread state
// that holds it or held it last.
struct GilSnapshot {
    int32_t locked = 0;
    uint64_t last_holder = 0;
};
std::optional<GilSnapshot> read_gil(const Layout& layout, const GilRange& gil, MemoryReader& mem);

}  // namespace pbp::cpython
