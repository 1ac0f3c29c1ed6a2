#include "engine/process_registry.h"

#include "sys/procfs.h"

namespace pbp {

void ProcessRegistry::add(const PythonTarget& t, std::map<std::string, std::string> labels) {
    auto& p = meta_.processes[static_cast<uint32_t>(t.pid)];
    p.pid = static_cast<uint32_t>(t.pid);
    p.comm = procfs::comm(t.pid);
    p.cmdline = procfs::cmdline(t.pid);
    p.exe = procfs::exe(t.pid);
    p.python = t.describe();
    p.exited = false;
    p.ns_pid = p.pid;
    if (auto st = procfs::read_status(t.pid); st && !st->nspid.empty()) p.ns_pid = static_cast<uint32_t>(st->nspid.back());
    p.labels = std::move(labels);
}

ThreadProfile& ProcessRegistry::thread(ProcessProfile& p, uint32_t tid) {
    auto it = p.threads.find(tid);
    if (it != p.threads.end()) return it->second;
    ThreadProfile& t = p.threads[tid];
    t.tid = tid;
    t.ns_tid = tid;
    t.name = procfs::thread_comm(static_cast<pid_t>(p.pid), static_cast<pid_t>(tid));
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
    thread(p, tid);
    it->second.named_at = it->second.samples;
}

void ProcessRegistry::refresh_thread_names(bool active_only) {
    for (auto& [pid, p] : meta_.processes) {
        if (p.exited) continue;
        for (auto& [tid, t] : p.threads) {
            Seen& s = seen_[(static_cast<uint64_t>(pid) << 32) | tid];
            if (active_only && s.named_at == s.samples) continue;
            s.named_at = s.samples;
            std::string n = procfs::thread_comm(static_cast<pid_t>(pid), static_cast<pid_t>(tid));
            if (!n.empty()) t.name = n;
        }
    }
}

void ProcessRegistry::forget(pid_t pid) {
    auto it = meta_.processes.find(static_cast<uint32_t>(pid));
    if (it == meta_.processes.end()) return;
    for (const auto& [tid, t] : it->second.threads) seen_.erase((static_cast<uint64_t>(pid) << 32) | tid);
    meta_.processes.erase(it);
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

const ProcessProfile* ProcessRegistry::find(uint32_t pid) const {
    auto it = meta_.processes.find(pid);
    return it == meta_.processes.end() ? nullptr : &it->second;
}

void ProcessRegistry::fill(ProcessProfile& out) const {
    const ProcessProfile* m = find(out.pid);
    if (!m) return;
    out.ns_pid = m->ns_pid;
    out.comm = m->comm;
    out.cmdline = m->cmdline;
    out.exe = m->exe;
    out.python = m->python;
    out.exited = m->exited;
    out.labels = m->labels;
    out.resources = m->resources;
    for (auto& [tid, t] : out.threads) {
        auto mt = m->threads.find(tid);
        if (mt == m->threads.end()) continue;
        t.name = mt->second.name;
        t.ns_tid = mt->second.ns_tid;
    }
}

}  // namespace pbp
