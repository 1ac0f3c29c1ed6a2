// Small readers for /proc: maps, status, comm, cmdline, task lists.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pbp::procfs {

struct Mapping {
    uint64_t start = 0, end = 0, offset = 0;
    std::string perms;  // "r-xp"
    uint64_t inode = 0;
    std::string dev;    // "fd:01"
    std::string path;   // as the target sees it (inside its mount namespace)
};

std::optional<std::vector<Mapping>> read_maps(pid_t pid);

struct Status {
    std::string name;
    char state = '?';  // State: R running, S sleeping, D disk wait, Z zombie, ...
    pid_t tgid = 0, ppid = 0;
    int threads = 0;  // Threads: the live ones, and the main thread until reaped
    std::vector<pid_t> nspid;  // NSpid: host first, innermost last
    uid_t uid = 0;
    // voluntary_ctxt_switches + nonvoluntary_ctxt_switches: unchanged between two reads of a
    // thread asleep at both, it slept all along.
    uint64_t switches = 0;
};
std::optional<Status> read_status(pid_t pid);
std::optional<Status> read_task_status(pid_t pid, pid_t tid);

// /proc/PID/task/TID/syscall of a thread in a system call: "NR ARG0 .. ARG5 SP PC" (NR in
// decimal, the others in hex: the user sp and pc it entered the kernel with). Reading it needs
// what reading the memory needs (ptrace access), no stop. None for "running", "-1 SP PC"
// (blocked outside a system call) or anything else.
struct SyscallLine {
    long nr = -1;
    uint64_t args[6] = {};
    uint64_t sp = 0, pc = 0;
    bool operator==(const SyscallLine&) const = default;
};
std::optional<SyscallLine> parse_syscall(const std::string& text);
std::optional<SyscallLine> read_syscall(pid_t pid, pid_t tid);

// The CPU time a thread has run, in ns: the first field of /proc/PID/task/TID/schedstat (the
// scheduler's se.sum_exec_runtime, what BPF reads at a switch-out). None if it cannot be read.
std::optional<uint64_t> parse_schedstat(const std::string& text);
std::optional<uint64_t> read_task_cpu_ns(pid_t pid, pid_t tid);

// A whole (small, /proc or /sys) file; "" if it cannot be read.
std::string read_text(const std::string& path);

std::string comm(pid_t pid);
std::string thread_comm(pid_t pid, pid_t tid);
std::string cmdline(pid_t pid);  // argv joined by spaces
std::string exe(pid_t pid);      // readlink /proc/PID/exe ("" if unreadable)
bool exists(pid_t pid);
// The kernel's pid_max (/proc/sys/kernel/pid_max): every PID on this machine is below it; 0
// when it cannot be read.
long pid_max();
// It exists and has not exited: not a zombie its parent has yet to reap, nor dead.
bool alive(pid_t pid);
std::vector<pid_t> all_pids();
std::vector<pid_t> tids(pid_t pid);  // its threads' ids (/proc/PID/task)
std::vector<pid_t> tids_in(const std::string& dir);  // the numeric names in dir
// How a mapped file of pid can be opened from here: /proc/PID/map_files/<range>, or
// /proc/PID/root/<path>, whichever works.
std::string openable_path(pid_t pid, const Mapping& m);

}  // namespace pbp::procfs
