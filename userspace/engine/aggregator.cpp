#include "engine/aggregator.h"

#include <unordered_map>

#include "engine/decimate.h"

namespace pbp {

void Aggregator::add_process(pid_t pid) {
    auto& p = profile_.processes[static_cast<uint32_t>(pid)];
    p.pid = static_cast<uint32_t>(pid);
}

void Aggregator::on_sample(const pbp_event& e, uint32_t stack) {
    uint64_t weight = e.weight_ns;
    if (interval_ns_ && e.kind == PBP_KIND_CPU) {  // off-CPU intervals are never decimated
        if (!keeps_sample(e.cpu_clock_ns, e.weight_ns, interval_ns_)) return;
        weight = kept_weight(e.weight_ns, interval_ns_);
    }
    auto& proc = profile_.processes[e.pid];
    proc.pid = e.pid;
    ThreadProfile& t = proc.threads[e.tid];
    t.tid = e.tid;
    if (const std::string& problem = store_.problem(stack); !problem.empty()) {
        profile_.run.unresolved[problem]++;
        if (store_.transient(stack)) transient_[e.pid].push_back({e.tid, t.samples.size(), e.stack_id});
    }
    if (e.flags & PBP_F_TRUNCATED) profile_.run.truncated++;
    Sample smp;
    smp.ts_ns = e.ts_ns;
    smp.stack = stack;
    smp.cpu = static_cast<uint16_t>(e.cpu);
    smp.kind = static_cast<SampleKind>(e.kind);
    smp.gil = e.gil <= PBP_GIL_NEITHER ? static_cast<GilState>(e.gil) : GilState::NA;
    smp.wait = e.wait < PBP_WAIT_COUNT ? static_cast<WaitReason>(e.wait) : WaitReason::None;
    smp.aggregate = e.flags & PBP_F_AGGREGATE;
    smp.weight_ns = weight;
    t.samples.push_back(smp);
    if (!proc.first_sample_ns || e.ts_ns < proc.first_sample_ns) proc.first_sample_ns = e.ts_ns;
    if (e.ts_ns > proc.last_sample_ns) proc.last_sample_ns = e.ts_ns;
    count_++;
}

size_t Aggregator::memory_bytes() const {
    size_t n = 0;
    for (const auto& [pid, p] : profile_.processes)
        for (const auto& [tid, t] : p.threads) n += sizeof t + t.samples.capacity() * sizeof(Sample);
    for (const auto& [pid, list] : transient_) n += list.capacity() * sizeof(Transient);
    return n;
}

void Aggregator::apply(const std::vector<StackMove>& moves) {
    auto& unresolved = profile_.run.unresolved;
    for (const StackMove& m : moves) {
        auto tr = transient_.find(static_cast<uint32_t>(m.pid));
        auto pit = profile_.processes.find(static_cast<uint32_t>(m.pid));
        if (tr == transient_.end() || pit == profile_.processes.end()) continue;
        auto& list = tr->second;
        for (size_t i = 0; i < list.size();) {
            const Transient& x = list[i];
            Sample* s = nullptr;
            if (x.stack_id == m.stack_id)
                if (auto t = pit->second.threads.find(x.tid); t != pit->second.threads.end() && x.index < t->second.samples.size())
                    s = &t->second.samples[x.index];
            if (!s || s->stack != m.from) {
                i++;
                continue;
            }
            auto u = unresolved.find(store_.problem(m.from));
            if (u != unresolved.end() && u->second && !--u->second) unresolved.erase(u);
            s->stack = m.to;
            if (const std::string& p = store_.problem(m.to); !p.empty()) unresolved[p]++;
            list[i] = list.back();  // moved: resolved for good
            list.pop_back();
        }
    }
}

}  // namespace pbp
