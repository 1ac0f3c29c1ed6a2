// --mode wall --native, a thread asleep since before its session began (blocked_state.h): its
// user registers as it entered the kernel, frame pointer included, read by a BPF iter/task
// program run over that one thread (bpf/task_regs.bpf.c). /proc gives sp and pc only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace pbp::native {

struct TaskRegs {
    uint64_t ip = 0, sp = 0, bp = 0;
};

// Thread tid of process pid (host ids): its registers at its kernel entry. None when the
// kernel cannot run the program (before 6.1: no per-thread iterator; before 5.15: no
// bpf_task_pt_regs), it cannot be loaded (no CAP_BPF), or the thread is gone. The program is
// loaded at the first call, once per process; calls may come from any thread.
// every_task: iterate every task, as a kernel before 6.1 does whatever it is asked (tests).
std::optional<TaskRegs> read_task_regs(pid_t pid, pid_t tid, bool every_task = false);

}  // namespace pbp::native
