// asyncio tasks of CPython 3.14+, read from another process's memory (--async, dump --async).
//
// CPython 3.14 publishes where its C Task objects keep what a debugger needs, in the
// AsyncioDebug section (Py_AsyncioModuleDebugOffsets, Modules/_asynciomodule.c): a task's
// name, coroutine, awaiter(s) and list node; the thread state's running loop, running task and
// task list head; the interpreter's task list head (tasks of threads that exited). Together with
// _Py_DebugOffsets (AsyncObjectLayout) that is every fact needed; CPython's own readers are
// Modules/_remote_debugging/asyncio.c and Lib/asyncio/tools.py (`python -m asyncio pstree`).
//
// Every read here is bounded and checked: a task that ends while it is read, or memory that is
// not what it should be, gives a shorter answer or none, never a loop or a crash.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "cpython/layout.h"
#include "pybpfprof/abi.h"
#include "sys/target_memory.h"

namespace pbp::cpython {

// The AsyncioDebug section, field by field (3.14 and 3.15 share its shape: 13 u64, 104 bytes).
struct AsyncioOffsets {
    uint64_t task_size = 0, task_name = 0, task_awaited_by = 0, task_is_task = 0,
             task_awaited_by_is_set = 0, task_coro = 0, task_node = 0;
    uint64_t interp_size = 0, interp_tasks_head = 0;
    uint64_t tstate_size = 0, tstate_running_loop = 0, tstate_running_task = 0, tstate_tasks_head = 0;
};
constexpr size_t kAsyncioDebugSize = 13 * 8;

// Decodes the section's bytes; nullopt (err says why) when a field lies outside its struct.
std::optional<AsyncioOffsets> decode_asyncio_offsets(std::span<const uint8_t> raw, std::string& err);

// Finds the section of process pid, whose interpreter (3.14+) lives in interp_path (as the
// process sees it): in that ELF (3.15 builds _asyncio into the interpreter), else in the
// _asyncio extension module the process has mapped, else in the one its interpreter would load
// (lib-dynload next to /proc/PID/exe: asyncio not imported yet). Read from the file, not the
// process: the section holds constants of the build. nullopt: why says why.
std::optional<AsyncioOffsets> find_asyncio_offsets(pid_t pid, const std::string& interp_path, Version v,
                                                   std::string& why);

// What one task is now.
struct TaskInfo {
    uint64_t addr = 0;
    std::string name;                 // the str name, or "Task-N" for the int a task is named by
    uint64_t coro = 0;                // its coroutine object (0: none, the task is done)
    std::vector<uint64_t> awaited_by; // the tasks (or futures) that await it
    bool running = false;             // some thread's asyncio_running_task (set by read_tasks)
    bool done = false;                // its coroutine finished (or was cleared)
};

class AsyncioReader {
public:
    AsyncioReader(MemoryReader& mem, const Layout& layout, const AsyncioOffsets& ao, const pbp_proc& proc)
        : mem_(mem), lay_(layout), ao_(ao), proc_(proc) {}

    // One task; nullopt when it is not readable as a task (gone, reused, not a task).
    std::optional<TaskInfo> task(uint64_t addr);
    // The task's name: its str, or "Task-N" for an int (how asyncio names unnamed tasks).
    std::optional<std::string> task_name(uint64_t addr);
    // The tasks that await it, at most kMaxAwaiters (task_awaited_by: one object or a set).
    std::vector<uint64_t> awaited_by(uint64_t addr);
    // The code object of the frame of the task's coroutine (tag bits cleared); 0 if unknown.
    uint64_t coro_code(uint64_t task);
    // The coroutine's frame chain, leaf (innermost) first as in pbp_stack: the coroutine's own
    // frame, and, while it awaits another coroutine, that one's frames, and so on (as
    // _remote_debugging's parse_coro_chain). Bounded by max_depth.
    std::vector<pbp_frame> coroutine_stack(uint64_t coro, uint32_t max_depth = PBP_MAX_DEPTH);
    // The running task of a thread state (0: none, or no loop running in it).
    uint64_t running_task(uint64_t tstate);
    // Every task in the task rings of these thread states and interpreters (a task is its node
    // minus task_node), each once, at most kMaxTasks.
    std::vector<uint64_t> list_tasks(const std::vector<uint64_t>& tstates, const std::vector<uint64_t>& interps);

    static constexpr size_t kMaxAwaiters = 256;
    static constexpr size_t kMaxTasks = 65536;

private:
    bool rd(uint64_t addr, uint64_t& v) { return mem_.read(addr, &v, sizeof v); }
    std::optional<int64_t> read_small_int(uint64_t addr);
    bool is_coroutine_like(uint64_t obj, uint64_t type);
    void ring(uint64_t head, std::vector<uint64_t>& out, std::unordered_set<uint64_t>& seen_nodes);

    MemoryReader& mem_;
    const Layout& lay_;
    const AsyncioOffsets& ao_;
    const pbp_proc& proc_;
};

}  // namespace pbp::cpython
