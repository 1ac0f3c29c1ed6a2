// The sample window (engine/aggregator.h): samples older than the window are folded into
// buckets per thread. Totals (counts and weights, per stack and kind) stay exact, buckets sit
// on their span, the window's samples keep their own timestamps, and memory stops growing.
#include <cstring>
#include <fstream>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "engine/aggregator.h"
#include "engine/profile.h"
#include "engine/stack_store.h"
#include "engine/symbolizer.h"

using pbp::Aggregator;
using pbp::Profile;
using pbp::Sample;
using pbp::SampleKind;
using pbp::SampleWindow;
using pbp::StackStore;
using pbp::Symbolizer;

namespace {

constexpr uint64_t kMs = 1'000'000, kS = 1'000'000'000;

uint32_t absent_pid() {
    long pid_max = 4194304;
    std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
    return static_cast<uint32_t>(pid_max + 11);
}

// A StackStore over a fake stacks map holding `n` distinct stacks (ids 1..n) of one process;
// stack(i) is the store's index of id i.
struct Stacks {
    Symbolizer sym;
    std::map<uint64_t, pbp_stack> map;
    StackStore store{sym, [this](uint64_t id, pbp_stack& out) {
                         auto it = map.find(id);
                         if (it == map.end()) return false;
                         out = it->second;
                         return true;
                     }};
    std::vector<uint32_t> index;

    Stacks(uint32_t pid, int n) {
        for (int i = 1; i <= n; i++) {
            pbp_stack& s = map[static_cast<uint64_t>(i)];
            std::memset(&s, 0, sizeof s);
            s.pid = pid;
            // Without the process every frame is the same "[unknown ...]": the depth tells them apart.
            s.depth = static_cast<uint32_t>(i);
            for (int k = 0; k < i; k++) s.frames[k] = {0x1000u + static_cast<uint64_t>(k) * 0x100, 1, 11};
            pbp_event e{};
            e.pid = pid, e.tid = pid, e.stack_id = static_cast<uint64_t>(i);
            index.push_back(store.stack_for(e));
        }
        if (std::set<uint32_t>(index.begin(), index.end()).size() != index.size()) throw std::logic_error("stacks not distinct");
    }
    uint32_t stack(int i) const { return index[static_cast<size_t>(i - 1)]; }
};

pbp_event record(uint32_t pid, uint32_t tid, uint64_t ts, int stack_id, uint64_t weight, uint32_t kind = PBP_KIND_CPU) {
    pbp_event e{};
    e.type = PBP_EV_SAMPLE;
    e.pid = pid, e.tid = tid, e.ts_ns = ts, e.cpu = tid % 2;
    e.stack_id = static_cast<uint64_t>(stack_id);
    e.kind = static_cast<uint16_t>(kind);
    e.weight_ns = weight;
    return e;
}

// What every exporter sums, per (thread, stack, kind): samples and weight.
using Totals = std::map<std::tuple<uint32_t, uint32_t, int>, std::pair<uint64_t, uint64_t>>;
Totals totals(const Profile& p) {
    Totals t;
    for (const auto& [pid, pr] : p.processes)
        for (const auto& [tid, th] : pr.threads)
            for (const Sample& s : th.samples) {
                auto& [n, w] = t[{tid, s.stack, static_cast<int>(s.kind)}];
                n += s.count;
                w += s.weight_ns;
            }
    return t;
}

}  // namespace

// Two threads, 10 s of 1 ms on-CPU samples over 5 stacks, an off-CPU interval of 700 ms ending
// every 1.3 s (it spans bucket edges) and an aggregate one; a 2 s window of 0.5 s buckets.
TEST(SampleWindow, BucketsKeepTotalsKindsAndTheirSpans) {
    const uint32_t pid = absent_pid();
    Stacks S(pid, 6);
    const SampleWindow win{2 * kS, kS / 2, 1'000'000};
    Aggregator agg(S.store, 0, win);
    Totals want;
    std::vector<std::pair<uint32_t, pbp_event>> fed;  // (stack index, record)
    const uint64_t t0 = 1000 * kS + 123;              // not on a bucket edge
    for (uint64_t ms = 0; ms < 10'000; ms++)
        for (uint32_t tid : {pid, pid + 1}) {
            const uint64_t ts = t0 + ms * kMs + tid % 7;
            const int id = 1 + static_cast<int>((ms / 3 + tid) % 5);
            fed.push_back({S.stack(id), record(pid, tid, ts, id, kMs)});
            if (tid == pid && ms % 1300 == 1299) {
                fed.push_back({S.stack(6), record(pid, tid, ts + 1, 6, 700 * kMs, PBP_KIND_OFF_CPU)});
                pbp_event agg_off = record(pid, tid, ts + 2, 6, 3 * kMs, PBP_KIND_OFF_CPU);
                agg_off.flags = PBP_F_AGGREGATE;
                fed.push_back({S.stack(6), agg_off});
            }
        }
    for (auto& [stack, e] : fed) {
        agg.on_sample(e, stack);
        auto& [n, w] = want[{e.tid, stack, static_cast<int>(e.kind)}];
        n++, w += e.weight_ns;
    }
    const Profile& P = agg.samples();
    EXPECT_EQ(totals(P), want);
    EXPECT_EQ(P.total_samples(), fed.size());
    EXPECT_GT(agg.bucket_entries(), 0u);
    EXPECT_EQ(agg.bucket_ns(), kS / 2);  // far below the budget: never doubled

    // The window's boundary: the last sample's time - 2 s, down to a bucket edge. Every record
    // after it is there as it came; none before it is.
    const uint64_t newest = fed.back().second.ts_ns;
    const uint64_t cutoff = (newest - win.window_ns) / win.bucket_ns * win.bucket_ns;
    std::multiset<std::tuple<uint32_t, uint64_t, uint32_t, uint64_t>> raw_want, raw_got;
    for (auto& [stack, e] : fed)
        if (e.ts_ns >= cutoff) raw_want.insert({e.tid, e.ts_ns, stack, e.weight_ns});
    for (const auto& [tid, th] : P.processes.at(pid).threads) {
        bool in_buckets = true;
        uint64_t last_end = 0;
        for (const Sample& s : th.samples) {
            if (s.span_ns) {
                ASSERT_TRUE(in_buckets) << "a bucket after a raw sample";
                EXPECT_EQ(s.span_ns, win.bucket_ns);
                EXPECT_EQ(s.ts_ns % win.bucket_ns, 0u);
                EXPECT_LE(s.ts_ns, cutoff);
                EXPECT_GE(s.ts_ns, last_end);  // buckets in time order
                last_end = s.ts_ns;
            } else {
                in_buckets = false;
                EXPECT_EQ(s.count, 1u);
                raw_got.insert({tid, s.ts_ns, s.stack, s.weight_ns});
            }
        }
    }
    EXPECT_EQ(raw_got, raw_want);

    // Each bucket holds what was taken in [end - span, end): per (thread, bucket end, stack,
    // kind, aggregate), on-CPU counts and weights exactly; off-CPU intervals split by overlap.
    using Key = std::tuple<uint32_t, uint64_t, uint32_t, int, bool>;
    std::map<Key, std::pair<uint64_t, uint64_t>> bw, bg;
    const uint64_t w = win.bucket_ns;
    for (auto& [stack, e] : fed) {
        if (e.ts_ns >= cutoff) continue;
        const bool aggregate = e.flags & PBP_F_AGGREGATE;
        const uint64_t last = e.ts_ns / w;
        if (e.kind == PBP_KIND_OFF_CPU && !aggregate) {
            const uint64_t start = e.ts_ns - e.weight_ns;
            for (uint64_t k = start / w; k <= last; k++) {
                const uint64_t a = std::max<uint64_t>(start, k * w), b = std::min<uint64_t>(e.ts_ns, (k + 1) * w);
                auto& [n, ns] = bw[{e.tid, (k + 1) * w, stack, e.kind, false}];
                n += k == last, ns += b - a;
            }
        } else {
            auto& [n, ns] = bw[{e.tid, (last + 1) * w, stack, e.kind, aggregate}];
            n++, ns += e.weight_ns;
        }
    }
    for (const auto& [tid, th] : P.processes.at(pid).threads)
        for (const Sample& s : th.samples)
            if (s.span_ns) {
                auto& [n, ns] = bg[{tid, s.ts_ns, s.stack, static_cast<int>(s.kind), s.aggregate}];
                n += s.count, ns += s.weight_ns;
            }
    EXPECT_EQ(bg, bw);
    // An on-CPU bucket of one thread never weighs more than its span.
    for (const auto& [k, v] : bg) {
        if (std::get<3>(k) == PBP_KIND_CPU) {
            EXPECT_LE(v.second, w);
        }
    }
}

// Over the budget, the bucket width doubles and older buckets merge pairwise: totals exact,
// every bucket on the new width, and the entries back under the limit.
TEST(SampleWindow, OverTheBudgetBucketsDoubleAndMergeExactly) {
    const uint32_t pid = absent_pid();
    Stacks S(pid, 20);
    const SampleWindow win{kS, 100 * kMs, 400};
    Aggregator agg(S.store, 0, win);
    Totals want;
    uint64_t n = 0;
    for (uint64_t ms = 0; ms < 60'000; ms++) {
        const int id = 1 + static_cast<int>((ms * 7) % 20);
        pbp_event e = record(pid, pid, 5 * kS + ms * kMs, id, kMs);
        agg.on_sample(e, S.stack(id));
        auto& [c, w] = want[{pid, S.stack(id), PBP_KIND_CPU}];
        c++, w += kMs, n++;
    }
    const Profile& P = agg.samples();
    EXPECT_EQ(totals(P), want);
    EXPECT_EQ(P.total_samples(), n);
    // 59 s of buckets x 20 stacks = 11,800 entries at 100 ms wide; 400 allowed (or twice what a
    // doubling left, when the stacks alone need more): 20 stacks x 59 s / width <= ~800.
    EXPECT_GE(agg.bucket_ns(), 1600 * kMs);
    EXPECT_LE(agg.bucket_entries(), 800u);
    size_t buckets = 0;
    for (const Sample& s : P.processes.at(pid).threads.at(pid).samples)
        if (s.span_ns) {
            buckets++;
            EXPECT_EQ(s.span_ns, agg.bucket_ns());
            EXPECT_EQ(s.ts_ns % agg.bucket_ns(), 0u);
            EXPECT_LE(s.weight_ns, s.span_ns);
            EXPECT_EQ(s.weight_ns, s.count * kMs);  // on CPU: a bucket weighs its samples' periods
        }
    EXPECT_EQ(buckets, agg.bucket_entries());
}

// A window of 0 keeps every sample with its own timestamp (as before the window existed).
TEST(SampleWindow, ZeroKeepsEverySample) {
    const uint32_t pid = absent_pid();
    Stacks S(pid, 3);
    Aggregator agg(S.store, 0, SampleWindow{0, kS, 10});
    for (uint64_t ms = 0; ms < 5000; ms++) agg.on_sample(record(pid, pid, kS + ms * kMs, 1, kMs), S.stack(1));
    EXPECT_EQ(agg.bucket_entries(), 0u);
    EXPECT_EQ(agg.samples().processes.at(pid).threads.at(pid).samples.size(), 5000u);
}

// Tens of millions of samples (4 threads at 999 Hz on 2 CPUs' worth of time, ~2.8 hours):
// the session's memory stops growing once the window and the bucket budget are full, and the
// totals are still exact.
TEST(SampleWindow, MemoryIsFlatAfterTheWindow) {
    const uint32_t pid = absent_pid();
    Stacks S(pid, 300);  // a few hundred distinct stacks, like tools/bench/workloads/busy.py
    const SampleWindow win{};  // the defaults: 60 s, 1 s buckets, 262144 entries
    Aggregator agg(S.store, 0, win);
    const uint64_t period = 1'001'001;  // 999 Hz
    const uint64_t total = 20'000'000;
    std::vector<size_t> mem;  // memory_bytes() every 1M samples
    uint64_t weight = 0, x = 12345;
    for (uint64_t i = 0; i < total; i++) {
        const uint32_t tid = pid + static_cast<uint32_t>(i % 4);
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const int id = 1 + static_cast<int>((x >> 33) % 300);
        // Two CPUs: 4 threads share them, each sampled every 2 periods.
        agg.on_sample(record(pid, tid, 10 * kS + (i / 2) * period, id, period), S.stack(id));
        weight += period;
        if (i % 1'000'000 == 999'999) mem.push_back(agg.memory_bytes());
    }
    const Profile& P = agg.samples();
    EXPECT_EQ(P.total_samples(), total);
    EXPECT_EQ(P.total_weight_ns(SampleKind::Cpu), weight);
    for (size_t i = 0; i < mem.size(); i++) std::printf("  after %zuM samples: %.1f MiB\n", i + 1, mem[i] / 1048576.0);
    // The window holds ~120,000 samples (the vectors' capacity up to twice that); the buckets
    // at most twice the budget's entries: everything well under 40 MiB.
    const size_t bound = (2 * 120'000 + 2 * win.max_buckets) * sizeof(Sample) + (1u << 20);
    for (size_t m : mem) EXPECT_LE(m, bound);
    // Flat: the second half of the run holds no more than the middle did.
    const size_t middle = mem[mem.size() / 2 - 1];
    for (size_t i = mem.size() / 2; i < mem.size(); i++) EXPECT_LE(mem[i], middle) << "after " << i + 1 << "M samples";
}
