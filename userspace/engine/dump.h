// `pybpfprof dump`: every thread's current Python stack of running processes, asleep or not,
// gathered from userspace (cpython::read_thread_stacks: process_vm_readv, the walk BPF does):
// no BPF, no signal, no ptrace stop, no write to the target. Frames are named by the same
// Symbolizer and StackStore as samples. Prints nothing; the CLI renders it (cli/dump_output.h).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/dump_asyncio.h"
#include "engine/engine.h"
#include "engine/profile.h"

namespace pbp {

struct DumpRequest {
    std::vector<pid_t> pids;           // --pid
    bool all_python = false;           // --all-python (with cgroups: only theirs)
    std::vector<std::string> cgroups;  // --cgroup: paths, pod UIDs, namespace/name, container IDs
    std::string node_root = "/";
    int max_depth = 0;                 // 0 = PBP_MAX_DEPTH, as BPF
    bool async_tasks = false;          // --async: every asyncio task too (engine/dump_asyncio.h)
    // Which processes may be dumped (the agent: the caller's own, agent/access.h); empty: any.
    // Asked before a process is read and again after: a --pid refused is an error, a process
    // of --all-python or --cgroup refused is left out.
    AdmitRule admit;
};

// Whether a thread holds the GIL, read once per process right after its stacks.
enum class DumpGil {
    Unknown,  // no GIL known for this build (free-threaded, a 3.6 without symbols) or not readable
    Held,
    NotHeld,
    // Not held, and asleep waiting for it: in a futex wait on the GIL's mutex or condition
    // variable (the thread's current system call, /proc/PID/task/TID/syscall, as wall mode's
    // switch-out check reads it from the registers).
    Waiting,
};
const char* dump_gil_name(DumpGil g);  // "unknown", "held", "not held", "waiting"

struct DumpThread {
    uint32_t tid = 0;     // host tid; 0 = a thread state whose thread was not found in /proc
    uint32_t ns_tid = 0;  // tid in the process's own pid namespace; 0 = the same namespace as ours
    std::string name;     // the Python name (threading), else the OS name
    std::string os_name;  // the OS thread name (/proc/PID/task/TID/comm); "" without a thread
    char state = '?';     // /proc/PID/task/TID/stat: R, S, D, ...
    bool python = false;  // has a Python thread state (else a native thread)
    DumpGil gil = DumpGil::Unknown;
    // The stack changed while it was read (it ran): read again up to a few times; when it
    // never read whole, what was read is kept, marked.
    bool changed = false;
    std::string problem;        // "" or why the stack is empty or partial (e.g. "no Python frame")
    std::vector<Frame> frames;  // innermost first; synthetic "[...]" markers as in samples
};
// "running", "sleeping", "waiting for I/O", "stopped", ... from the /proc state letter.
std::string dump_state_name(char state);

struct DumpProcess {
    pid_t pid = 0;
    pid_t ns_pid = 0;        // PID in its own namespace; 0 = the same namespace as ours
    std::string command;     // its command line
    std::string exe;         // /proc/PID/exe ("" when it cannot be read)
    std::string version;     // "3.11.2", "3.13.1t"
    std::string python;      // PythonTarget::describe(): version and the ELF holding the runtime
    std::string gil_note;    // why no thread's GIL state is known; "" when it is
    std::vector<DumpThread> threads;  // in /proc/PID/task order, then thread states without a thread
    std::optional<DumpAsyncio> asyncio;  // --async only
};

struct DumpResult {
    std::vector<DumpProcess> processes;
    std::vector<std::string> warnings;  // e.g. a process that exited while it was read
};

// Needs root (reading another process's memory). A --pid that is missing or not Python, an
// unknown cgroup, no Python process at all: bad input, with the fix.
Status gather_dump(const DumpRequest& req, DumpResult& out);

}  // namespace pbp
