// --mode wall --native for a thread already asleep when its wall session begins: BPF captures a
// thread's machine state when it blocks (native_capture_switch), which such a thread did before
// anything was attached. Its state is read instead, without stopping it: the user sp and pc it
// entered the kernel with (/proc/PID/task/TID/syscall; its rbp too where BPF can read it,
// task_regs.h), its kernel stack's function names
// (/proc/PID/task/TID/stack, when readable: CAP_SYS_ADMIN), and its user stack from its memory,
// as wide as an off-CPU capture's. It stands for the interval pending since, as a capture does.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pbp::native {

struct BlockedState {
    // A pbp_native_event record (PBP_NATIVE_F_OFFCPU; ts_ns: the caller's): its header and
    // ustack_len bytes of stack. bp is 0 where the kernel cannot say it (task_regs.h): frames
    // whose CFA rule needs it end the unwind there, marked incomplete.
    std::vector<uint8_t> record;
    std::vector<std::string> kernel;  // "[k] name", innermost first (scheduler functions aside)
};

// The state of thread tid of pid, blocked in a system call, as of ts_ns; none when it is not
// (running, or in no system call), cannot be read, or ran while it was read.
std::optional<BlockedState> read_blocked_state(pid_t pid, pid_t tid, uint64_t ts_ns);

// The function names of /proc/PID/task/TID/stack's lines ("[<0>] do_nanosleep+0x71/0x130"),
// as "[k] do_nanosleep".
std::vector<std::string> parse_kernel_stack(const std::string& text);

}  // namespace pbp::native
