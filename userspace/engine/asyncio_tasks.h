// --async: the asyncio task a sample ran (BPF records the thread state's asyncio_running_task
// pointer with it, pbp_event.async_task) named, with the chain of tasks that await it, read from
// the process's memory when the record is drained.
//
// Why userspace and not BPF: a name is a str or an int, an awaiter is one task or a set, and the
// chain has no fixed length; BPF reads one pointer per sample (cheap, and exact: the task that
// ran then), and userspace follows it while the task lives. Tasks end, and their memory is
// reused: the read comes at the next drain (within ~100 ms of the sample), once per task and
// drain turn. A task that ended meanwhile reads as no task (its sample keeps its plain frames).
#pragma once
#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cpython/asyncio.h"
#include "cpython/layout.h"
#include "pybpfprof/abi.h"
#include "sys/target_memory.h"

namespace pbp {

class AsyncioTasks {
public:
    struct Chain {
        std::vector<std::string> names;  // "<task main>" .. "<task fetch-42>": outermost awaiter first
        uint64_t coro_code = 0;          // code object of the sampled task's coroutine frame (0: unknown)
    };

    // A process to name tasks of: its asyncio offsets (3.14+). nullopt when it has none; why says
    // why (older CPython, no AsyncioDebug section).
    std::optional<cpython::AsyncioOffsets> add_process(pid_t pid, const cpython::Layout& layout,
                                                       const std::string& interp_path, const pbp_proc& proc,
                                                       std::string& why);
    void remove_process(pid_t pid);
    bool has(pid_t pid) const { return procs_.count(pid) != 0; }
    // offsetof(_PyThreadStateImpl, asyncio_running_task) of pid (pbp_py_offsets.tstate_async_task).
    uint16_t task_offset(pid_t pid) const {
        auto it = procs_.find(pid);
        return it == procs_.end() ? 0 : it->second.proc.off.tstate_async_task;
    }

    // The chain of task (of pid), read now or earlier in this turn; nullptr when it does not read
    // as a task.
    const Chain* chain(pid_t pid, uint64_t task);
    // A new drain turn: what was read before may have changed (read again when asked).
    void new_turn();

    static constexpr size_t kMaxChain = 64;

private:
    struct Proc {
        cpython::Layout layout;
        cpython::AsyncioOffsets ao;
        pbp_proc proc;
        std::unique_ptr<ProcessMemory> mem;
    };
    std::map<pid_t, Proc> procs_;
    std::map<std::pair<pid_t, uint64_t>, std::optional<Chain>> cache_;  // this turn's reads
    // The last chain read of each task, for the records drained after the task or its process
    // ended (the last batch before an exit): used when a read fails, up to kKeepNs after it.
    struct Known {
        Chain chain;
        uint64_t read_ns;
    };
    std::map<std::pair<pid_t, uint64_t>, Known> known_;
    uint64_t last_prune_ns_ = 0;
    static constexpr uint64_t kKeepNs = 2'000'000'000ULL;
};

}  // namespace pbp
