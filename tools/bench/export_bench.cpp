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
#include "engine/profile.h"
#include "synthetic_profile.h"

using namespace pbp;
using pbp::test::synthetic_profile;

namespace {

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
            ex->write(p, {}, f);
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
