#include "engine/process_registry.h"

#include <algorithm>

#include "sys/clock.h"
#include "sys/procfs.h"

namespace pbp {

void ProcessRegistry::add(const PythonTarget& t, std::map<std::string, std::string> labels) {
    auto& p = meta_.processes[static_cast<uint32_t>(t.pid)];
    p.pid = static_cast<uint32_t>(t.pid);
    // The program found (t.exe), and its name and command line read before its executable is
    // read again: an exec switches the executable (and the memory the command line is read
    // from) before the name, so when the executable is still the one found, both reads were
    // of that program. When not (a forked child of Python that exec'd uname meanwhile), they
    // may be the next program's: the name is then the file's, the command line unknown.
    // (A target whose executable could not be read when found has it read now.)
    p.exe = t.exe.empty() ? procfs::exe(t.pid) : t.exe;
    p.comm = procfs::comm(t.pid);
    p.cmdline = procfs::cmdline(t.pid);
    if (!t.exe.empty() && procfs::exe(t.pid) != t.exe) {
        p.comm = t.exe.substr(t.exe.rfind('/') + 1).substr(0, 15);
        p.cmdline.clear();
    }
    p.python = t.describe();
    p.exited = false;
    p.ns_pid = p.pid;
    if (auto st = procfs::read_status(t.pid); st && !st->nspid.empty()) p.ns_pid = static_cast<uint32_t>(st->nspid.back());
    p.labels = std::move(labels);
    Names& n = names_[p.pid] = Names{};  // anew: after an exec it is another interpreter
    pace_.erase(p.pid);
    n.proc = t.bpf_config(0, 0);
    n.layout = t.layout.obj;
}

bool ProcessRegistry::read_python_names(uint32_t pid, const std::set<uint32_t>& tids, bool force) {
    auto it = names_.find(pid);
    if (it == names_.end() || it->second.failed || tids.empty()) return true;
    Names& n = it->second;
    const uint64_t now = mono_ns();
    // A burst of new threads costs one read: they are named by the next one otherwise.
    if (!force && n.read_ns && now - n.read_ns < 200000000ULL) return false;
    n.read_ns = now;
    std::string err;
    std::map<uint32_t, std::string> names;
    if (cpython::read_thread_names_by_tid(static_cast<pid_t>(pid), n.proc, n.layout, n.cache, names, err, &tids)) {
        for (uint32_t tid : tids) n.by_tid.erase(tid);  // (a process that could not be read keeps the last names)
        n.by_tid.merge(names);
    } else if (n.layout.interp_modules == PBP_OFF_NONE) {
        n.failed = true;
    }
    return true;
}

// Whether p may have exec'd another program since it was added (its exec record is still
// queued behind its last samples): what /proc says of it now would be the new program's, not
// what its samples ran. (A forked child of Python that execs uname at once: its samples are
// Python's.) A process already gone (a zombie has no exe) cannot say: the name it had when
// added is the safe one.
bool ProcessRegistry::exec_since_added(const ProcessProfile& p) {
    if (p.exe.empty()) return false;
    return procfs::exe(static_cast<pid_t>(p.pid)) != p.exe;
}

ThreadProfile& ProcessRegistry::thread(ProcessProfile& p, uint32_t tid) {
    auto it = p.threads.find(tid);
    if (it != p.threads.end()) return it->second;
    ThreadProfile& t = p.threads[tid];
    t.tid = tid;
    t.ns_tid = tid;
    // Its name before the executable is checked (see add): read after an exec, it would be the
    // next program's.
    t.name = procfs::thread_comm(static_cast<pid_t>(p.pid), static_cast<pid_t>(tid));
    if (exec_since_added(p)) t.name = p.comm;
    if (auto st = procfs::read_task_status(static_cast<pid_t>(p.pid), static_cast<pid_t>(tid)); st && !st->nspid.empty())
        t.ns_tid = static_cast<uint32_t>(st->nspid.back());
    if (t.name.empty()) t.name = "thread";
    return t;
}

void ProcessRegistry::on_sample(uint32_t pid, uint32_t tid) {
    auto [it, fresh] = seen_.try_emplace((static_cast<uint64_t>(pid) << 32) | tid);
    it->second.samples++;
    if (!fresh) return;
    auto& p = meta_.processes[pid];
    if (!p.pid) {  // sampled before it was registered (BPF knew it first): what /proc says now
        p.pid = pid;
        p.ns_pid = pid;
        p.comm = procfs::comm(static_cast<pid_t>(pid));
    }
    ThreadProfile& t = thread(p, tid);
    it->second.named_at = it->second.samples;
    if (auto n = names_.find(pid); n != names_.end()) {
        // A thread started since. Not read now (a burst): the next refresh reads it, as if
        // sampled since.
        if (!n->second.by_tid.count(tid) && !read_python_names(pid, {tid}, false)) it->second.named_at = 0;
        if (auto pn = n->second.by_tid.find(tid); pn != n->second.by_tid.end()) {
            t.name = pn->second;
            it->second.python_named = true;
        } else if (it->second.named_at) {  // read now, and not found
            unnamed(pid, it->second);
        }
    }
}

void ProcessRegistry::unnamed(uint32_t pid, Seen& s) {
    const auto n = names_.find(pid);
    s.retry = n != names_.end() && !n->second.failed && s.retries < kNameRetries;
    s.retries += s.retry;
}

std::set<uint32_t> ProcessRegistry::threads_to_name(uint32_t pid, const ProcessProfile& p, Due due) const {
    // Reading a name from the interpreter costs about twenty reads: all threads only at the end.
    std::set<uint32_t> want;
    for (const auto& [tid, t] : p.threads) {
        auto s = seen_.find((static_cast<uint64_t>(pid) << 32) | tid);
        const bool unseen = s == seen_.end();
        if (due == Due::All ||
            (due == Due::SampledSince && (unseen || s->second.named_at != s->second.samples || s->second.retry)) ||
            (due == Due::PutOff && !unseen && s->second.named_at == 0 && s->second.samples))
            want.insert(tid);
    }
    return want;
}

bool ProcessRegistry::rename_threads(uint32_t pid, ProcessProfile& p, const std::set<uint32_t>& want) {
    if (want.empty()) return false;
    bool changed = false;
    read_python_names(pid, want, true);
    const auto n = names_.find(pid);
    for (uint32_t tid : want) {
        ThreadProfile& t = p.threads[tid];
        Seen& s = seen_[(static_cast<uint64_t>(pid) << 32) | tid];
        s.named_at = s.samples;
        const std::string before = t.name;
        if (n != names_.end()) {
            if (auto pn = n->second.by_tid.find(tid); pn != n->second.by_tid.end()) {
                t.name = pn->second;
                s.python_named = true;
                s.retry = false;
                changed |= t.name != before;
                continue;
            }
        }
        if (s.python_named) {  // gone from threading._active: it is ending
            s.retry = false;
            continue;
        }
        unnamed(pid, s);
        // Read before the executable is checked (see add).
        std::string name = procfs::thread_comm(static_cast<pid_t>(pid), static_cast<pid_t>(tid));
        if (exec_since_added(p)) continue;  // its name now is the next program's
        if (!name.empty()) t.name = name;
        changed |= t.name != before;
    }
    return changed;
}

void ProcessRegistry::refresh_thread_names() {
    for (auto& [pid, p] : meta_.processes)
        if (!p.exited) rename_threads(pid, p, threads_to_name(pid, p, Due::All));
}

void ProcessRegistry::refresh_due_thread_names(uint64_t now_ns) {
    for (auto& [pid, p] : meta_.processes) {
        if (p.exited) continue;
        Pace& pace = pace_[pid];
        if (now_ns < pace.next_ns) {
            rename_threads(pid, p, threads_to_name(pid, p, Due::PutOff));
            continue;
        }
        std::set<uint32_t> want = threads_to_name(pid, p, Due::SampledSince);
        if (want.empty()) continue;  // nothing sampled since: its turn waits for a sample
        const bool changed = rename_threads(pid, p, want);
        bool retrying = false;  // (a thread to read again: its next turn in 1 s)
        for (uint32_t tid : want) retrying |= seen_[(static_cast<uint64_t>(pid) << 32) | tid].retry;
        pace.interval_ns = changed || retrying ? 1000000000ULL : std::min<uint64_t>(pace.interval_ns * 2, 16000000000ULL);
        pace.next_ns = now_ns + pace.interval_ns;
    }
}

void ProcessRegistry::refresh_thread_names_of(pid_t pid) {
    auto it = meta_.processes.find(static_cast<uint32_t>(pid));
    if (it != meta_.processes.end() && !it->second.exited)
        rename_threads(it->first, it->second, threads_to_name(it->first, it->second, Due::SampledSince));
}

void ProcessRegistry::on_thread_exit(uint32_t pid, uint32_t tid, const std::string& comm) {
    auto p = meta_.processes.find(pid);
    if (p == meta_.processes.end() || comm.empty()) return;
    auto t = p->second.threads.find(tid);
    if (t == p->second.threads.end()) return;  // never sampled: no profile to name
    auto s = seen_.find((static_cast<uint64_t>(pid) << 32) | tid);
    if (s != seen_.end() && s->second.python_named) return;
    t->second.name = comm;
}

void ProcessRegistry::retire(uint32_t pid, uint32_t key) {
    auto it = meta_.processes.find(pid);
    if (it == meta_.processes.end()) return;
    ProcessProfile& p = it->second;
    ProcessProfile& old = retired_[key] = p;
    old.exited = true;  // the program did end: exec replaced it
    old.execd = true;
    for (const auto& [tid, t] : p.threads) seen_.erase((static_cast<uint64_t>(pid) << 32) | tid);
    p.threads.clear();
    p.resources.clear();
    pace_.erase(pid);
}

void ProcessRegistry::forget(uint32_t key) {
    if (retired_.erase(key)) return;
    const pid_t pid = static_cast<pid_t>(key);
    auto it = meta_.processes.find(key);
    if (it == meta_.processes.end()) return;
    for (const auto& [tid, t] : it->second.threads) seen_.erase((static_cast<uint64_t>(pid) << 32) | tid);
    meta_.processes.erase(it);
    names_.erase(static_cast<uint32_t>(pid));
    pace_.erase(static_cast<uint32_t>(pid));
    resources_.forget(pid);
}

void ProcessRegistry::mark_exited(pid_t pid) {
    auto it = meta_.processes.find(static_cast<uint32_t>(pid));
    if (it != meta_.processes.end()) it->second.exited = true;
}

void ProcessRegistry::mark_gone_exited() {
    for (auto& [pid, p] : meta_.processes)
        if (!p.exited && !procfs::exists(static_cast<pid_t>(pid))) p.exited = true;
}

const ProcessProfile* ProcessRegistry::find(uint32_t key) const {
    if (auto it = meta_.processes.find(key); it != meta_.processes.end()) return &it->second;
    auto it = retired_.find(key);
    return it == retired_.end() ? nullptr : &it->second;
}

void ProcessRegistry::fill(uint32_t key, ProcessProfile& out) const {
    const ProcessProfile* m = find(key);
    if (!m) return;
    out.ns_pid = m->ns_pid;
    out.comm = m->comm;
    out.cmdline = m->cmdline;
    out.exe = m->exe;
    out.python = m->python;
    out.exited = m->exited;
    out.execd = m->execd;
    out.labels = m->labels;
    out.resources = m->resources;
    for (auto& [tid, t] : out.threads) {
        if (tid == kForkedChildrenTid) t.name = kForkedChildrenName;
        auto mt = m->threads.find(tid);
        if (mt == m->threads.end()) continue;
        t.name = mt->second.name;
        t.ns_tid = mt->second.ns_tid;
    }
}

}  // namespace pbp
