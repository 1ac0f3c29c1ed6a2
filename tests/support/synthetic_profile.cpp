// tests/support/synthetic_profile.h's profile (compiled with -O2: see there).
#include "synthetic_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace pbp::test {

Profile synthetic_profile(int procs, double seconds, double rate, uint64_t start_mono_ns) {
    const uint64_t kStart = start_mono_ns;
    Profile p;
    const uint64_t period = static_cast<uint64_t>(std::llround(1e9 / rate));
    const uint64_t n_ticks = static_cast<uint64_t>(seconds * rate);
    p.run.target = "all-python";
    p.run.start_mono_ns = kStart;
    p.run.end_mono_ns = kStart + n_ticks * period;
    p.run.start_unix_ns = 1'795'000'000'000'000'000LL;
    p.run.rate_hz = rate;
    p.run.period_ns = period;
    p.run.version = "synthetic";
    p.run.kernel = "synthetic";
    p.run.max_depth = 1024;

    std::mt19937_64 rng(42);
    const int nfn = 400, nfiles = 40;
    std::vector<std::string> fn_name(nfn), fn_file(nfn);
    std::vector<int> fn_line(nfn);
    for (int i = 0; i < nfn; i++) {
        fn_name[i] = "Module" + std::to_string(i % 37) + ".function_" + std::to_string(i);
        fn_file[i] = "/srv/app/pkg" + std::to_string(i % nfiles) + "/module_" + std::to_string(i % 37) + ".py";
        fn_line[i] = 10 + (i * 7) % 500;
    }
    auto frame = [&](const std::string& n, const std::string& f, int line) {
        return p.frames.intern(Frame{n, f, line, false});
    };
    uint32_t mod = frame("<module>", "/srv/app/main.py", 1);
    std::vector<uint32_t> pool;
    for (int s = 0; s < 6000; s++) {
        std::vector<uint32_t> st{mod};
        int depth = 6 + static_cast<int>(rng() % 35);
        int f = static_cast<int>(rng() % 20);
        for (int d = 1; d < depth; d++) {
            int line = fn_line[f] + static_cast<int>(rng() % (d + 1 == depth ? 6 : 2));
            st.push_back(frame(fn_name[f], fn_file[f], line));
            f = (f * 31 + 7 + static_cast<int>(rng() % 13)) % nfn;
        }
        pool.push_back(p.stacks.intern(st));
    }
    const int phases = std::max(1, static_cast<int>(seconds / 300));
    std::vector<std::vector<double>> cdf(phases);
    for (int ph = 0; ph < phases; ph++) {
        double acc = 0;
        for (size_t i = 0; i < pool.size(); i++) {
            size_t rank = (i + ph * 997) % pool.size();
            acc += 1.0 / std::pow(1.0 + rank, 1.1);
            cdf[ph].push_back(acc);
        }
    }
    std::uniform_real_distribution<double> u(0, 1);
    const uint64_t ticks_per_phase = static_cast<uint64_t>(300 * rate);
    for (int pi = 0; pi < procs; pi++) {
        uint32_t pid = 10000 + pi;
        auto& pr = p.processes[pid];
        pr.pid = pr.ns_pid = pid;
        pr.comm = "python3";
        pr.cmdline = "python3 -m worker --shard " + std::to_string(pi);
        pr.exe = "/usr/bin/python3.11";
        pr.python = "3.11.2 (static /usr/bin/python3.11)";
        for (int ti = 0; ti < 3; ti++) {
            auto& t = pr.threads[pid + ti];
            t.tid = t.ns_tid = pid + ti;
            t.name = ti == 0 ? "MainThread" : "helper-" + std::to_string(ti);
            double busy = ti == 0 ? 0.9 : ti == 1 ? 0.1 : 0.03;
            t.samples.reserve(static_cast<size_t>(n_ticks * busy * 1.05));
            for (uint64_t k = 0; k < n_ticks; k++) {
                if (u(rng) >= busy) continue;
                int ph = std::min<int>(phases - 1, static_cast<int>(k / ticks_per_phase));
                const auto& c = cdf[ph];
                size_t i = std::lower_bound(c.begin(), c.end(), u(rng) * c.back()) - c.begin();
                t.samples.push_back({kStart + k * period, pool[std::min(i, pool.size() - 1)], 0, SampleKind::Cpu, period});
            }
        }
        pr.first_sample_ns = kStart;
        pr.last_sample_ns = kStart + n_ticks * period;
        for (int s = 0; s <= static_cast<int>(seconds); s++)
            pr.resources.push_back({kStart + s * 1'000'000'000ULL, s ? 90.0 + (s * pi) % 30 : -1.0,
                                    (200ULL + (s / 60) + pi) << 20});
    }
    return p;
}

}  // namespace pbp::test
