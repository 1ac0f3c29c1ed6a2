#include "engine/aggregator.h"

#include <algorithm>
#include <iterator>
#include <tuple>
#include <unordered_map>

#include "engine/decimate.h"

namespace pbp {

void Aggregator::add_process(pid_t pid) {
    auto& p = profile_.processes[static_cast<uint32_t>(pid)];
    p.pid = static_cast<uint32_t>(pid);
}

void Aggregator::retire(uint32_t pid, uint32_t key) {
    auto it = profile_.processes.find(pid);
    if (it == profile_.processes.end() || it->second.threads.empty()) return;
    auto node = profile_.processes.extract(it);
    node.key() = key;
    profile_.processes.insert(std::move(node));
    // Its stacks are forgotten with the program (StackStore::forget_process): none will move.
    transient_.erase(pid);
}

void Aggregator::fold_fork(uint32_t child, uint32_t parent) {
    auto c = profile_.processes.find(child);
    auto p = profile_.processes.find(parent);
    if (c == profile_.processes.end() || p == profile_.processes.end() || child == parent) return;
    ThreadProfile& to = p->second.threads[kForkedChildrenTid];
    to.tid = kForkedChildrenTid;
    for (auto& [tid, t] : c->second.threads)
        to.samples.insert(to.samples.end(), std::make_move_iterator(t.samples.begin()),
                          std::make_move_iterator(t.samples.end()));
    // In time order, as every thread's (children interleave; a bucket keeps its start).
    std::stable_sort(to.samples.begin(), to.samples.end(),
                     [](const Sample& a, const Sample& b) { return a.ts_ns < b.ts_ns; });
    const ProcessProfile& cp = c->second;
    ProcessProfile& pp = p->second;
    if (cp.first_sample_ns && (!pp.first_sample_ns || cp.first_sample_ns < pp.first_sample_ns))
        pp.first_sample_ns = cp.first_sample_ns;
    pp.last_sample_ns = std::max(pp.last_sample_ns, cp.last_sample_ns);
    if (to.samples.empty()) p->second.threads.erase(kForkedChildrenTid);
    profile_.processes.erase(c);
    // Its stacks are forgotten with the program (StackStore::forget_process): none will move.
    transient_.erase(child);
}

void Aggregator::forget_if_unsampled(uint32_t pid) {
    if (auto it = profile_.processes.find(pid); it != profile_.processes.end() && it->second.threads.empty())
        profile_.processes.erase(it);
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
    // Once per bucket width, the samples that left the window are folded into buckets.
    newest_ns_ = std::max<uint64_t>(newest_ns_, e.ts_ns);
    if (window_.window_ns && newest_ns_ > window_.window_ns) {
        const uint64_t cutoff = (newest_ns_ - window_.window_ns) / bucket_ns_ * bucket_ns_;
        if (cutoff > cutoff_) compact(cutoff);
    }
}

namespace {

// Buckets sort by end, then by what they are keyed by; equal keys are one bucket.
auto bucket_key(const Sample& s) {
    return std::tuple(s.ts_ns, s.stack, static_cast<uint8_t>(s.kind), static_cast<uint8_t>(s.gil),
                      static_cast<uint8_t>(s.wait), s.aggregate);
}
bool bucket_less(const Sample& a, const Sample& b) { return bucket_key(a) < bucket_key(b); }

// Sorted buckets with equal keys made one (counts and weights summed), in place.
void combine(std::vector<Sample>& v) {
    size_t w = 0;
    for (size_t i = 0; i < v.size(); i++) {
        if (w && bucket_key(v[w - 1]) == bucket_key(v[i])) {
            v[w - 1].count += v[i].count;
            v[w - 1].weight_ns += v[i].weight_ns;
        } else {
            v[w++] = v[i];
        }
    }
    v.resize(w);
}

bool is_bucket(const Sample& s) { return s.span_ns != 0; }

}  // namespace

void Aggregator::compact(uint64_t cutoff) {
    cutoff_ = cutoff;
    for (auto& [pid, p] : profile_.processes)
        for (auto& [tid, t] : p.threads) compact_thread(pid, t, cutoff);
    if (buckets_ > limit_) coarsen();
}

void Aggregator::compact_thread(uint32_t pid, ThreadProfile& t, uint64_t cutoff) {
    auto& v = t.samples;
    const size_t nb = static_cast<size_t>(std::partition_point(v.begin(), v.end(), is_bucket) - v.begin());
    size_t end = nb;
    while (end < v.size() && v[end].ts_ns < cutoff) end++;
    if (end == nb) return;
    const uint64_t w = bucket_ns_;
    std::vector<Sample> fresh;
    auto part = [&](const Sample& s, uint64_t bucket, uint64_t weight, uint32_t count) {
        Sample b = s;
        b.ts_ns = (bucket + 1) * w;
        b.span_ns = w;
        b.weight_ns = weight;
        b.count = count;
        fresh.push_back(b);
    };
    for (size_t i = nb; i < end; i++) {
        const Sample& s = v[i];
        const uint64_t last = s.ts_ns / w;
        if (s.kind == SampleKind::OffCpu && !s.aggregate && s.weight_ns > s.ts_ns % w) {
            // An interval reaching into earlier buckets: each gets the part it covers (count
            // 0), the sample's own bucket the rest, so timelines show the wait where it was.
            const uint64_t start = s.ts_ns > s.weight_ns ? s.ts_ns - s.weight_ns : 0;
            uint64_t given = 0;
            for (uint64_t k = start / w; k < last; k++) {
                const uint64_t ns = (k + 1) * w - std::max(start, k * w);
                part(s, k, ns, 0);
                given += ns;
            }
            part(s, last, s.weight_ns - given, s.count);
        } else {
            part(s, last, s.weight_ns, s.count);
        }
    }
    std::sort(fresh.begin(), fresh.end(), bucket_less);
    combine(fresh);
    // Merged with the buckets from the first one this batch touches (the newest ones, but for
    // a late sample or a long interval).
    Sample probe;
    probe.ts_ns = fresh.front().ts_ns;
    const size_t pos = static_cast<size_t>(
        std::lower_bound(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(nb), probe,
                         [](const Sample& a, const Sample& b) { return a.ts_ns < b.ts_ns; }) -
        v.begin());
    std::vector<Sample> merged;
    merged.reserve(nb - pos + fresh.size());
    std::merge(v.begin() + static_cast<std::ptrdiff_t>(pos), v.begin() + static_cast<std::ptrdiff_t>(nb), fresh.begin(),
               fresh.end(), std::back_inserter(merged), bucket_less);
    combine(merged);
    v.erase(v.begin() + static_cast<std::ptrdiff_t>(pos), v.begin() + static_cast<std::ptrdiff_t>(end));
    v.insert(v.begin() + static_cast<std::ptrdiff_t>(pos), merged.begin(), merged.end());
    buckets_ = buckets_ - (nb - pos) + merged.size();
    // Transient samples now in a bucket stay on the stack they had; the others moved.
    if (auto tr = transient_.find(pid); tr != transient_.end()) {
        auto& list = tr->second;
        for (size_t i = 0; i < list.size();) {
            Transient& x = list[i];
            if (x.tid != t.tid) {
                i++;
            } else if (x.index < end) {
                list[i] = list.back();
                list.pop_back();
            } else {
                x.index = x.index - end + pos + merged.size();
                i++;
            }
        }
    }
}

void Aggregator::coarsen() {
    for (;;) {
        const size_t before = buckets_;
        bucket_ns_ *= 2;
        const uint64_t w = bucket_ns_;
        buckets_ = 0;
        for (auto& [pid, p] : profile_.processes)
            for (auto& [tid, t] : p.threads) {
                auto& v = t.samples;
                const size_t nb = static_cast<size_t>(std::partition_point(v.begin(), v.end(), is_bucket) - v.begin());
                std::vector<Sample> b(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(nb));
                for (Sample& s : b) {
                    s.ts_ns = ((s.ts_ns - 1) / w + 1) * w;  // the end of the wider bucket holding it
                    s.span_ns = w;
                }
                std::sort(b.begin(), b.end(), bucket_less);
                combine(b);
                v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(nb));
                v.insert(v.begin(), b.begin(), b.end());
                buckets_ += b.size();
                // Indices of the window's samples shift by the buckets removed.
                if (auto tr = transient_.find(pid); tr != transient_.end())
                    for (Transient& x : tr->second)
                        if (x.tid == t.tid) x.index = x.index - nb + b.size();
            }
        if (buckets_ <= window_.max_buckets) {
            limit_ = window_.max_buckets;
            return;
        }
        // Doubling is worth it while it merges: when it no longer saves a quarter, the distinct
        // stacks (not the run's length) fill the buckets, and the limit follows them.
        if (buckets_ * 4 > before * 3) {
            limit_ = 2 * buckets_;
            return;
        }
    }
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
