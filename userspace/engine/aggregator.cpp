#include "engine/aggregator.h"

#include "engine/abi_names.h"
#include "sys/procfs.h"

namespace pbp {

Aggregator::Aggregator(Profile& profile, Symbolizer& symbolizer, StackLookup lookup)
    : profile_(profile), symbolizer_(symbolizer), lookup_(std::move(lookup)), buf_(new pbp_stack()) {}

void Aggregator::add_process(const PythonTarget& t) {
    auto& p = profile_.processes[static_cast<uint32_t>(t.pid)];
    p.pid = static_cast<uint32_t>(t.pid);
    p.comm = procfs::comm(t.pid);
    p.cmdline = procfs::cmdline(t.pid);
    p.exe = procfs::exe(t.pid);
    p.python = t.describe();
    p.exited = false;
    p.ns_pid = p.pid;
    if (auto st = procfs::read_status(t.pid); st && !st->nspid.empty()) p.ns_pid = static_cast<uint32_t>(st->nspid.back());
    stack_ids_[t.pid].clear();
}

void Aggregator::mark_exited(pid_t pid) {
    auto it = profile_.processes.find(static_cast<uint32_t>(pid));
    if (it != profile_.processes.end()) it->second.exited = true;
    stack_ids_.erase(pid);
}

ThreadProfile& Aggregator::thread(ProcessProfile& p, uint32_t tid) {
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

uint32_t Aggregator::synthetic_stack(const std::string& name) {
    Frame f;
    f.name = "[" + name + "]";
    f.synthetic = true;
    uint32_t idx = profile_.stacks.intern({profile_.frames.intern(f)});
    if (stack_problem_.size() <= idx) stack_problem_.resize(idx + 1);
    stack_problem_[idx] = name;
    return idx;
}

bool Aggregator::resolve(pid_t pid, uint64_t stack_id, BaseStack& b) {
    if (!lookup_(stack_id, *buf_)) return false;
    std::map<std::string, uint64_t> problems;
    b.frames = symbolizer_.symbolize_into(pid, *buf_, profile_.frames, problems);
    b.problem = problems.empty() ? "" : problems.begin()->first;
    return true;
}

uint32_t Aggregator::variant_stack(BaseStack& b, uint32_t variant) {
    auto v = b.variants.find(variant);
    if (v != b.variants.end()) return v->second;
    std::string problem = b.problem;
    std::vector<uint32_t> frames;
    if (variant) {
        Frame marker;
        marker.synthetic = true;
        if (variant >= 2) {
            marker.name = std::string("[partial stack: ") + reason_label(variant - 2) + "]";
            problem = std::string("partial stack: ") + reason_label(variant - 2);
        } else {
            marker.name = "[truncated]";
        }
        frames.push_back(profile_.frames.intern(marker));
    }
    frames.insert(frames.end(), b.frames.begin(), b.frames.end());
    uint32_t idx = profile_.stacks.intern(frames);
    if (stack_problem_.size() <= idx) stack_problem_.resize(idx + 1);
    stack_problem_[idx] = problem;
    b.variants.emplace(variant, idx);
    return idx;
}

void Aggregator::retry(pid_t pid, uint64_t stack_id, BaseStack& b) {
    b.retries++;
    BaseStack fresh;
    if (!resolve(pid, stack_id, fresh) || !fresh.problem.empty()) return;
    // The same id again proves the same code objects are alive (the id hashes their addresses
    // and checksums), so the first read hit a transient state: re-point the samples so far.
    std::unordered_map<uint32_t, uint32_t> remap;
    for (auto& [variant, old_idx] : b.variants) remap[old_idx] = variant_stack(fresh, variant);
    b = std::move(fresh);
    auto pit = profile_.processes.find(static_cast<uint32_t>(pid));
    if (pit == profile_.processes.end() || remap.empty()) return;
    for (auto& [_, t] : pit->second.threads)
        for (auto& s : t.samples) {
            auto r = remap.find(s.stack);
            if (r == remap.end()) continue;
            auto u = profile_.run.unresolved.find(stack_problem_[s.stack]);
            if (u != profile_.run.unresolved.end() && u->second && !--u->second) profile_.run.unresolved.erase(u);
            s.stack = r->second;
            if (!stack_problem_[s.stack].empty()) profile_.run.unresolved[stack_problem_[s.stack]]++;
        }
}

uint32_t Aggregator::sample_stack(const pbp_event& e) {
    if (!e.stack_id) return synthetic_stack(reason_label(e.reason));
    const pid_t pid = static_cast<pid_t>(e.pid);
    auto& ids = stack_ids_[pid];
    auto it = ids.find(e.stack_id);
    if (it == ids.end()) {
        BaseStack b;
        if (!resolve(pid, e.stack_id, b)) return synthetic_stack("stack evicted before it was read");
        it = ids.emplace(e.stack_id, std::move(b)).first;
    } else if (Symbolizer::transient(it->second.problem) && it->second.retries < kMaxRetries) {
        retry(pid, e.stack_id, it->second);
    }
    uint32_t variant = (e.flags & PBP_F_PARTIAL) ? 2 + e.reason : (e.flags & PBP_F_TRUNCATED) ? 1 : 0;
    return variant_stack(it->second, variant);
}

void Aggregator::on_sample(const pbp_event& e) {
    auto& proc = profile_.processes[e.pid];
    if (!proc.pid) {
        proc.pid = e.pid;
        proc.ns_pid = e.pid;
        proc.comm = procfs::comm(static_cast<pid_t>(e.pid));
    }
    uint32_t stack_idx = sample_stack(e);
    if (!stack_problem_[stack_idx].empty()) profile_.run.unresolved[stack_problem_[stack_idx]]++;
    if (e.flags & PBP_F_TRUNCATED) profile_.run.truncated++;
    ThreadProfile& t = thread(proc, e.tid);
    t.samples.push_back({e.ts_ns, stack_idx, static_cast<uint16_t>(e.cpu), static_cast<SampleKind>(e.kind),
                         e.weight_ns});
    if (!proc.first_sample_ns || e.ts_ns < proc.first_sample_ns) proc.first_sample_ns = e.ts_ns;
    if (e.ts_ns > proc.last_sample_ns) proc.last_sample_ns = e.ts_ns;
}

void Aggregator::refresh_thread_names(bool active_only) {
    for (auto& [pid, p] : profile_.processes) {
        if (p.exited) continue;
        for (auto& [tid, t] : p.threads) {
            size_t& seen = named_at_[(static_cast<uint64_t>(pid) << 32) | tid];
            if (active_only && seen == t.samples.size()) continue;
            seen = t.samples.size();
            std::string n = procfs::thread_comm(static_cast<pid_t>(pid), static_cast<pid_t>(tid));
            if (!n.empty()) t.name = n;
        }
    }
}

}  // namespace pbp
