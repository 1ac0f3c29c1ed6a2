// A wall-mode profile with GIL states, for the exporters' wall and GIL tests (pprof,
// speedscope, folded, svg, the HTML report's GIL lanes, the raw format): what a --mode wall
// run of two processes would give.
// - pid 10 (a GIL build), over one second (run [kStart, kStart + 1 s]):
//   thread 10 "MainThread": spin holds the GIL 0-500 ms (50 on-CPU samples), waits for it
//   500-800 ms (one off-CPU interval, [waiting for the GIL]), sleeps 800-1000 ms ([sleeping]).
//   thread 11 "worker": waits for the GIL 0-500 ms, holds it 500-800 ms (30 samples of
//   crunch), then 800-900 ms hashes without it (10 samples, gil neither), and a 100 ms
//   aggregate of short I/O waits ending at 1000 ms ([waiting for I/O]).
//   GIL utilisation: (500 + 300) ms held / 1000 ms = 80%.
// - pid 20 (free-threaded: every sample's GIL state is n/a): thread 20 computes 0-200 ms
//   (20 samples), sleeps 200-1000 ms.
// Every sample ends at its ts and covers the weight before it, as the engine's do.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "engine/profile.h"

namespace pbp::test {

struct WallProfile {
    static constexpr uint64_t kStart = 7'000'000'000ULL;
    static constexpr uint64_t kMs = 1'000'000ULL;
    static constexpr uint64_t kPeriod = 10 * kMs;  // 100 Hz

    Profile profile;
    std::map<std::string, uint64_t> cpu_ns, off_cpu_ns;  // leaf frame name -> summed weight
    std::map<std::string, uint64_t> samples;             // leaf frame name -> samples
    std::map<uint32_t, uint64_t> held_ns, waiting_ns;    // tid -> weight with gil held / waiting
    uint64_t total_samples = 0;

    uint64_t weight_ns(const std::string& leaf) const {
        auto get = [&](const std::map<std::string, uint64_t>& m) {
            auto it = m.find(leaf);
            return it == m.end() ? uint64_t{0} : it->second;
        };
        return get(cpu_ns) + get(off_cpu_ns);
    }

    WallProfile() {
        Profile& p = profile;
        p.run.target = "python3 gil.py";
        p.run.start_mono_ns = kStart;
        p.run.end_mono_ns = kStart + 1000 * kMs;
        p.run.start_unix_ns = 1'795'260'680'000'000'000LL;
        p.run.rate_hz = 100;
        p.run.period_ns = kPeriod;
        p.run.version = "0.1.0";
        p.run.mode = ProfileMode::Wall;
        p.run.min_block_ns = 1 * kMs;
        auto fr = [&](const char* name, int line) { return p.frames.intern(Frame{name, "/app/gil.py", line, false}); };
        auto leaf = [&](WaitReason w) { return p.frames.intern(Frame{wait_leaf(w), "", 0, true}); };
        const uint32_t main_ = fr("main", 1), spin = fr("spin", 10), crunch = fr("crunch", 20),
                       hashing = fr("hashing", 30), reader = fr("read_file", 40), nap = fr("nap", 50);
        auto thread = [&](uint32_t pid, uint32_t tid, const char* name) -> ThreadProfile& {
            ProcessProfile& pr = p.processes[pid];
            pr.pid = pr.ns_pid = pid;
            pr.comm = "python3";
            pr.cmdline = "python3 gil.py " + std::to_string(pid);
            pr.python = pid == 20 ? "3.13.1t (free-threaded)" : "3.11.7";
            pr.first_sample_ns = kStart;
            pr.last_sample_ns = kStart + 1000 * kMs;
            ThreadProfile& t = pr.threads[tid];
            t.tid = t.ns_tid = tid;
            t.name = name;
            return t;
        };
        auto add = [&](ThreadProfile& t, std::vector<uint32_t> stack, uint64_t end_ms, uint64_t w, GilState gil,
                       WaitReason wait = WaitReason::None, bool aggregate = false) {
            const SampleKind kind = wait == WaitReason::None ? SampleKind::Cpu : SampleKind::OffCpu;
            if (wait != WaitReason::None) stack.push_back(leaf(wait));
            Sample s{kStart + end_ms * kMs, p.stacks.intern(stack), 0, kind, w, gil, wait, aggregate};
            t.samples.push_back(s);
            const std::string name = p.frames.at(stack.back()).name;
            (kind == SampleKind::Cpu ? cpu_ns : off_cpu_ns)[name] += w;
            samples[name]++;
            total_samples++;
            if (gil == GilState::Held) held_ns[t.tid] += w;
            if (gil == GilState::Waiting) waiting_ns[t.tid] += w;
        };
        ThreadProfile& t10 = thread(10, 10, "MainThread");
        for (uint64_t k = 1; k <= 50; k++) add(t10, {main_, spin}, 10 * k, kPeriod, GilState::Held);
        add(t10, {main_, spin}, 800, 300 * kMs, GilState::Waiting, WaitReason::Gil);
        add(t10, {main_, nap}, 1000, 200 * kMs, GilState::Neither, WaitReason::Sleep);

        ThreadProfile& t11 = thread(10, 11, "worker");
        add(t11, {main_, crunch}, 500, 500 * kMs, GilState::Waiting, WaitReason::Gil);
        for (uint64_t k = 1; k <= 30; k++) add(t11, {main_, crunch}, 500 + 10 * k, kPeriod, GilState::Held);
        for (uint64_t k = 1; k <= 10; k++) add(t11, {main_, hashing}, 800 + 10 * k, kPeriod, GilState::Neither);
        add(t11, {main_, reader}, 1000, 100 * kMs, GilState::Neither, WaitReason::Io, true);

        ThreadProfile& t20 = thread(20, 20, "MainThread");
        for (uint64_t k = 1; k <= 20; k++) add(t20, {main_, spin}, 10 * k, kPeriod, GilState::NA);
        add(t20, {main_, nap}, 1000, 800 * kMs, GilState::NA, WaitReason::Sleep);
    }
};

}  // namespace pbp::test
