#include "engine/dump.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "cpython/gil.h"
#include "cpython/thread_names.h"
#include "cpython/thread_stacks.h"
#include "engine/abi_names.h"
#include "engine/find_targets.h"
#include "engine/stack_store.h"
#include "engine/symbolizer.h"
#include "sys/procfs.h"
#include "sys/target_memory.h"
#include "targets/cgroup_target.h"
#include "targets/cgroups.h"
#include "targets/kube.h"

namespace pbp {

namespace {

// Whether thread tid is asleep in a futex wait on an address inside the GIL (its mutex or
// condition variable: take_gil), from its /proc/PID/task/TID/syscall.
bool waits_on(pid_t pid, pid_t tid, const cpython::GilRange& gil) {
    auto sc = procfs::read_syscall(pid, tid);
    return sc && sc->nr == SYS_futex && gil.contains(sc->args[0]);
}

// A running thread read mid-change: the walk stopped on a frame or code object that was being
// replaced, or (3.11/3.12) the eval loop was being entered. A thread asleep never gives these.
bool changed_while_read(const cpython::ThreadStack& t) {
    return t.reason == PBP_ERR_CFRAME_STALE ||
           ((t.flags & PBP_F_PARTIAL) && (t.reason == PBP_ERR_READ_FRAME || t.reason == PBP_ERR_READ_CODE));
}

// Reads after the first one, for stacks that changed while read: a thread that runs Python
// keeps changing, so a few tries, then what was read is shown, marked.
constexpr int kRereads = 3;

// The thread state each host tid runs, from several reads: the first read whole wins. A thread
// with thread states in several interpreters has the active one (as BPF takes it).
struct Picked {
    cpython::ThreadStack stack;
    bool changed = false;
};

void pick(std::map<uint32_t, Picked>& by_tid, std::vector<Picked>& no_tid, const std::vector<cpython::ThreadStack>& read,
          bool first_read) {
    for (const auto& t : read) {
        const bool changed = changed_while_read(t);
        if (!t.tid) {
            if (first_read) no_tid.push_back({t, changed});
            continue;
        }
        auto it = by_tid.find(t.tid);
        if (it == by_tid.end()) {
            by_tid[t.tid] = {t, changed};
        } else if (it->second.changed && !changed && it->second.stack.tstate == t.tstate) {
            it->second = {t, false};
        } else if (first_read && !it->second.stack.active && t.active) {
            it->second = {t, changed};
        }
    }
}

// A cgroup resolution's fix for a dump, which looks once: without the advice to wait for the
// cgroup with -d (a recording's).
std::string fix_now(const std::string& fix) {
    const std::string wait = "pass -d SECONDS to wait for";
    if (fix.rfind(wait, 0) == 0) return "check that it exists, or dump every Python process with --all-python";
    auto at = fix.find(", or " + wait);
    return at == std::string::npos ? fix : fix.substr(0, at);
}

// One process's threads into out; false (gone says why) when its thread list cannot be read.
bool dump_process(const PythonTarget& t, int max_depth, bool async_tasks, DumpProcess& out, std::string& gone) {
    out.pid = t.pid;
    out.command = procfs::cmdline(t.pid);
    out.exe = procfs::exe(t.pid);
    out.version = t.layout.version.str() + (t.layout.free_threaded ? "t" : "");
    out.python = t.describe();
    out.gil_note = t.gil_unknown;
    if (auto st = procfs::read_status(t.pid); st && st->nspid.size() > 1) out.ns_pid = st->nspid.back();

    const pbp_proc proc = t.bpf_config(max_depth > 0 ? static_cast<uint32_t>(max_depth) : PBP_MAX_DEPTH, 1);
    std::vector<cpython::ThreadStack> read;
    std::string err;
    if (!cpython::read_thread_stacks(t.pid, proc, read, err)) {
        gone = err;
        return false;
    }
    // The GIL right after the stacks: which thread state holds it.
    ProcessMemory mem(t.pid);
    std::optional<uint64_t> holder;
    std::optional<cpython::GilRange> gil;
    if (t.gil_unknown.empty()) {
        gil = cpython::gil_range(t.layout, t.runtime_addr, t.interp_head_addr, t.gil_statics ? &*t.gil_statics : nullptr,
                                 mem);
        if (auto g = gil ? cpython::read_gil(*gil, mem) : std::nullopt) holder = g->locked == 1 ? g->last_holder : 0;
    }
    // Python names by ident, read after the stacks too (one more pass over the threads).
    std::map<uint64_t, std::string> py_names;
    cpython::ThreadNameCache name_cache;
    if (std::string nerr; !cpython::read_thread_names(mem, proc, t.layout.obj, name_cache, py_names, nerr))
        py_names.clear();  // OS names only
    std::map<uint32_t, Picked> by_tid;
    std::vector<Picked> no_tid;
    pick(by_tid, no_tid, read, true);
    for (int i = 0; i < kRereads; i++) {
        if (std::none_of(by_tid.begin(), by_tid.end(), [](auto& kv) { return kv.second.changed; })) break;
        if (!cpython::read_thread_stacks(t.pid, proc, read, err)) break;
        pick(by_tid, no_tid, read, false);
    }

    Symbolizer sym;
    sym.add_process(t.pid, t.layout, t.code_type_addr);
    // No BPF stack map here: every stack comes from stack_for_frames.
    StackStore store(sym, [](uint64_t, pbp_stack&) { return false; });
    auto fill = [&](const Picked& p, DumpThread& d) {
        const auto& s = p.stack;
        d.python = true;
        d.changed = p.changed;
        if (auto n = py_names.find(s.thread_id); n != py_names.end()) d.name = n->second;
        if (holder) d.gil = *holder && *holder == s.tstate ? DumpGil::Held : DumpGil::NotHeld;
        if (s.reason != PBP_OK) d.problem = reason_label(s.reason);
        if (s.frames.empty()) return;  // the problem says why; no "[reason]" frame
        const uint32_t stack = store.stack_for_frames(t.pid, s.frames, s.flags, s.reason);
        // A code object freed or renamed between the walk and its naming: read while changing too.
        if (store.transient(stack)) d.changed = true;
        const auto& ids = store.stacks().at(stack);
        for (auto it = ids.rbegin(); it != ids.rend(); ++it) d.frames.push_back(store.frames().at(*it));
    };
    for (pid_t tid : procfs::tids(t.pid)) {
        DumpThread d;
        d.tid = static_cast<uint32_t>(tid);
        d.name = d.os_name = procfs::thread_comm(t.pid, tid);
        if (auto st = procfs::read_task_status(t.pid, tid)) {
            d.state = st->state;
            if (st->nspid.size() > 1) d.ns_tid = static_cast<uint32_t>(st->nspid.back());
        } else {
            continue;  // exited meanwhile
        }
        if (auto it = by_tid.find(d.tid); it != by_tid.end()) fill(it->second, d);
        if (d.gil == DumpGil::NotHeld && d.state == 'S' && gil && waits_on(t.pid, tid, *gil)) d.gil = DumpGil::Waiting;
        out.threads.push_back(std::move(d));
    }
    for (const Picked& p : no_tid) {  // a thread state whose thread could not be told
        DumpThread d;
        fill(p, d);
        out.threads.push_back(std::move(d));
    }
    if (async_tasks) out.asyncio = dump_asyncio(t, proc, read, store, proc.max_depth);
    return true;
}

}  // namespace

const char* dump_gil_name(DumpGil g) {
    switch (g) {
        case DumpGil::Held: return "held";
        case DumpGil::NotHeld: return "not held";
        case DumpGil::Waiting: return "waiting";
        default: return "unknown";
    }
}

std::string dump_state_name(char state) {
    switch (state) {
        case 'R': return "running";
        case 'S': return "sleeping";
        case 'D': return "waiting for I/O";
        case 'T': return "stopped";
        case 't': return "traced";
        case 'Z': return "zombie";
        case 'X': return "dead";
        case 'I': return "idle";
        default: return std::string("state ") + state;
    }
}

Status gather_dump(const DumpRequest& req, DumpResult& out) {
    out = {};
    // process_vm_readv of other users' processes: root (CAP_SYS_PTRACE), as for profiling.
    if (geteuid() != 0)
        return Status::cannot_profile("reading other processes' Python stacks needs root; run pybpfprof dump with sudo");
    Discoverer d;
    std::vector<PythonTarget> targets;
    std::set<pid_t> have;
    for (pid_t pid : req.pids) {
        // Asked before anything of the process is read, as a session's --pid.
        if (std::string why; req.admit && !req.admit(pid, why)) return Status::forbidden(why);
        std::optional<PythonTarget> t;
        if (Status st = discover_pid(d, pid, t); !st.ok()) return st;
        if (have.insert(pid).second) targets.push_back(*t);
    }
    std::vector<pid_t> scan;
    if (!req.cgroups.empty()) {
        std::string mount;
        if (Status st = cgroup_mount(req.node_root, mount); !st.ok()) return st;
        kube::Node node(req.node_root);
        for (const auto& spec : req.cgroups) {
            auto r = resolve_cgroup(spec, mount, node);
            if (r.status != CgroupResolve::Found) return Status::bad_input(r.cause + "; " + fix_now(r.fix));
            for (pid_t pid : cgroups::procs_under(r.target.abs_path)) scan.push_back(pid);
        }
    } else if (req.all_python) {
        scan = procfs::all_pids();
    }
    for (pid_t pid : scan) {
        if (pid == getpid() || have.count(pid)) continue;
        if (std::string why; req.admit && !req.admit(pid, why)) continue;
        auto r = d.discover(pid);
        if (r.status == Discovery::Python && have.insert(pid).second) targets.push_back(*r.target);
    }
    if (targets.empty()) {
        if (req.admit)
            return Status::bad_input("no CPython process of yours is running" +
                                     std::string(req.cgroups.empty() ? "" : " in the given cgroup") +
                                     " (the agent dumps only your own processes); start one, or pass its PID with --pid");
        if (!req.cgroups.empty())
            return Status::bad_input("no CPython process in the given cgroup; check the cgroup, or dump them all with "
                                     "--all-python");
        return Status::bad_input("no CPython process is running; start one, or pass its PID with --pid");
    }
    for (const PythonTarget& t : targets) {
        DumpProcess p;
        std::string gone;
        if (!dump_process(t, req.max_depth, req.async_tasks, p, gone)) {
            out.warnings.push_back("PID " + std::to_string(t.pid) + ": not dumped: " + gone);
            continue;
        }
        // Asked again once read: the process may have exited and its PID gone to someone
        // else's, or changed its ids, while it was read. What was read is then dropped.
        if (std::string why; req.admit && !req.admit(t.pid, why)) {
            const bool asked = std::find(req.pids.begin(), req.pids.end(), t.pid) != req.pids.end();
            if (asked) return Status::forbidden(why);
            out.warnings.push_back("PID " + std::to_string(t.pid) + ": not dumped: it is no longer yours to dump");
            continue;
        }
        out.processes.push_back(std::move(p));
    }
    if (out.processes.empty()) return Status::bad_input("no process could be read: " + out.warnings.front());
    return {};
}

}  // namespace pbp
