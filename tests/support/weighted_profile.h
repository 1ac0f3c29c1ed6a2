// A profile whose samples weigh different amounts, for the exporters' weight tests
// (tests/unit/test_exporters.cpp, test_pprof.cpp, test_html_report.cpp): an exporter that
// counts one period per sample gets every total here wrong. By sample count cpu_cold
// (5 samples) beats cpu_hot (1 sample) and waits (2 samples); by weight waits (off CPU,
// 253 ms) beats cpu_hot (6 periods), which beats cpu_cold (5 periods).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "engine/profile.h"

namespace pbp::test {

struct WeightedProfile {
    static constexpr uint64_t kStart = 3'000'000'000ULL;
    static constexpr uint64_t kPeriod = 10'101'010;  // 99 Hz
    static constexpr uint64_t kLongWait = 250'000'000, kShortWait = 3'000'007;

    Profile profile;
    std::map<std::string, uint64_t> cpu_ns, off_cpu_ns;  // leaf function -> summed weight
    std::map<std::string, uint64_t> samples;             // leaf function -> samples

    uint64_t weight_ns(const std::string& leaf) const {
        auto get = [&](const std::map<std::string, uint64_t>& m) {
            auto it = m.find(leaf);
            return it == m.end() ? uint64_t{0} : it->second;
        };
        return get(cpu_ns) + get(off_cpu_ns);
    }

    WeightedProfile() {
        Profile& p = profile;
        p.run.target = "python3 w.py";
        p.run.start_mono_ns = kStart;
        p.run.end_mono_ns = kStart + 2'000'000'000ULL;
        p.run.start_unix_ns = 1'795'260'680'000'000'000LL;
        p.run.rate_hz = 99;
        p.run.period_ns = kPeriod;
        p.run.version = "0.1.0";
        const uint32_t main_ = p.frames.intern(Frame{"main", "/app/w.py", 1, false});
        const uint32_t hot = p.frames.intern(Frame{"cpu_hot", "/app/w.py", 10, false});
        const uint32_t cold = p.frames.intern(Frame{"cpu_cold", "/app/w.py", 20, false});
        const uint32_t wait = p.frames.intern(Frame{"waits", "/app/w.py", 30, false});
        auto add = [&](uint32_t pid, uint32_t leaf, const char* name, uint64_t at_ms, SampleKind kind, uint64_t w) {
            ProcessProfile& pr = p.processes[pid];
            pr.pid = pr.ns_pid = pid;
            pr.comm = "python3";
            pr.cmdline = "python3 w.py " + std::to_string(pid);
            ThreadProfile& t = pr.threads[pid];
            t.tid = t.ns_tid = pid;
            t.name = "MainThread";
            t.samples.push_back({kStart + at_ms * 1'000'000ULL, p.stacks.intern({main_, leaf}), 0, kind, w});
            (kind == SampleKind::Cpu ? cpu_ns : off_cpu_ns)[name] += w;
            samples[name]++;
        };
        for (uint64_t k = 0; k < 4; k++) add(10, cold, "cpu_cold", 100 + 11 * k, SampleKind::Cpu, kPeriod);
        add(10, hot, "cpu_hot", 200, SampleKind::Cpu, 6 * kPeriod);
        add(10, wait, "waits", 500, SampleKind::OffCpu, kLongWait);
        add(10, wait, "waits", 950, SampleKind::OffCpu, kShortWait);
        add(20, cold, "cpu_cold", 300, SampleKind::Cpu, kPeriod);
    }
};

}  // namespace pbp::test
