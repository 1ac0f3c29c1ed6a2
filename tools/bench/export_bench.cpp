// Output cost: the time and size to write a long multi-process profile in each format.
//
// The profile is synthetic (built here, not sampled), with the shape of a real --all-python
// run of one application: per process a main thread busy 90% of the time and two helper
// threads (10% and 3%); ~400 functions in 40 files; a pool of 6000 distinct stacks (depth
// 6-40) drawn with a Zipf-like weight that shifts every 5 minutes; CPU/RSS readings at 1 Hz.
// Each exporter is the one pybpfprof runs at the end of a session, writing to a real file.
//
//   pbp_bench_export [--procs 8] [--seconds 600] [--rate 99] [--dir /tmp] [--formats speedscope,html]
// Prints one JSON object per format on stdout:
//   {"format":..., "samples":..., "stacks":..., "seconds":..., "bytes":..., "peak_rss_kb":...}
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "export/exporter.h"
#include "profile.h"

using namespace pbp;

namespace {

constexpr uint64_t kStart = 1'000'000'000'000ULL;
constexpr int64_t kStartUnix = 1'795'000'000'000'000'000LL;

Profile synthetic_profile(int procs, double seconds, double rate) {
    Profile p;
    const uint64_t period = static_cast<uint64_t>(std::llround(1e9 / rate));
    const uint64_t n_ticks = static_cast<uint64_t>(seconds * rate);
    p.run.target = "all-python";
    p.run.start_mono_ns = kStart;
    p.run.end_mono_ns = kStart + n_ticks * period;
    p.run.start_unix_ns = kStartUnix;
    p.run.rate_hz = rate;
    p.run.period_ns = period;
    p.run.version = "bench";
    p.run.kernel = "bench";
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
                t.samples.push_back({kStart + k * period, pool[std::min(i, pool.size() - 1)], 0});
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

long peak_rss_kb() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

}  // namespace

int main(int argc, char** argv) {
    int procs = 8;
    double seconds = 600, rate = 99;
    std::string dir = "/tmp", formats = "speedscope,html";
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i], v = argv[i + 1];
        if (a == "--procs") procs = std::stoi(v);
        else if (a == "--seconds") seconds = std::stod(v);
        else if (a == "--rate") rate = std::stod(v);
        else if (a == "--dir") dir = v;
        else if (a == "--formats") formats = v;
        else {
            std::cerr << "usage: pbp_bench_export [--procs N] [--seconds S] [--rate HZ] [--dir DIR] [--formats a,b]\n";
            return 2;
        }
    }
    auto t0 = std::chrono::steady_clock::now();
    Profile p = synthetic_profile(procs, seconds, rate);
    double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << "pbp_bench_export: " << p.total_samples() << " samples, " << p.processes.size() << " processes, "
              << p.total_threads() << " threads, " << p.stacks.size() << " stacks, generated in " << gen_s << " s\n";

    std::stringstream fs(formats);
    std::string fmt;
    while (std::getline(fs, fmt, ',')) {
        auto ex = make_exporter(fmt);
        if (!ex) {
            std::cerr << "pbp_bench_export: unknown format " << fmt << "\n";
            return 2;
        }
        std::string path = dir + "/pbp-bench-export." + ex->extension();
        auto w0 = std::chrono::steady_clock::now();
        {
            std::ofstream f(path, std::ios::binary | std::ios::trunc);
            ex->write(p, f);
            f.flush();
            if (!f) {
                std::cerr << "pbp_bench_export: cannot write " << path << ": " << strerror(errno) << "\n";
                return 1;
            }
        }
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
        auto bytes = std::filesystem::file_size(path);
        std::filesystem::remove(path);
        std::printf("{\"format\":\"%s\",\"procs\":%d,\"duration_s\":%g,\"rate_hz\":%g,\"samples\":%llu,"
                    "\"stacks\":%zu,\"seconds\":%.3f,\"bytes\":%llu,\"peak_rss_kb\":%ld}\n",
                    fmt.c_str(), procs, seconds, rate, static_cast<unsigned long long>(p.total_samples()),
                    p.stacks.size(), secs, static_cast<unsigned long long>(bytes), peak_rss_kb());
        std::fflush(stdout);
    }
    return 0;
}
