#include "summary/text_summary.h"

#include <algorithm>
#include <cstdio>

#include "export/common.h"

namespace pbp {

std::string summary_line(const Profile& p, const std::string& path) {
    size_t procs = 0;
    for (auto& [_, pr] : p.processes)
        if (!pr.threads.empty()) procs++;
    auto count = [](uint64_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); };
    std::string s = "Wrote " + path + ": " + count(p.total_samples(), "sample", "samples") + ", " +
                    count(procs, "process", "processes") + ", " + count(p.total_threads(), "thread", "threads") + ", " +
                    std::to_string(p.run.lost) + " lost, " + std::to_string(p.unresolved_total()) + " unresolved";
    if (!p.run.unresolved.empty()) {
        s += " (";
        bool first = true;
        for (auto& [why, n] : p.run.unresolved) {
            s += (first ? "" : ", ") + std::to_string(n) + " " + why;
            first = false;
        }
        s += ")";
    }
    return s;
}

std::string top_functions(const Profile& p, size_t n) {
    // One entry per function (name + file): its lines add up. Times are summed weights.
    const FunctionTable fns(p.frames);
    const FunctionTimes times = function_times(p, fns, stack_weights(p));
    const uint64_t all = times.all_ns;
    std::vector<uint32_t> v;
    for (uint32_t f = 0; f < fns.size(); f++)
        if (times.total_ns[f]) v.push_back(f);
    std::sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) {
        return times.self_ns[a] != times.self_ns[b] ? times.self_ns[a] > times.self_ns[b]
                                                    : times.total_ns[a] > times.total_ns[b];
    });
    std::string out;
    if (!all) return out;
    char line[1024];
    snprintf(line, sizeof line, "Top functions by self time (%llu samples):\n  %6s %6s  %s\n",
             (unsigned long long)p.total_samples(), "self", "total", "function (file:line)");
    out += line;
    for (size_t i = 0; i < v.size() && i < n; i++) {
        const Function& fn = fns.at(v[i]);
        std::string where = fn.file.empty() ? "" : " (" + fn.file + ":" + std::to_string(times.hot_line[v[i]]) + ")";
        snprintf(line, sizeof line, "  %5.1f%% %5.1f%%  %s%s\n", 100.0 * times.self_ns[v[i]] / all,
                 100.0 * times.total_ns[v[i]] / all, fn.name.c_str(), where.c_str());
        out += line;
    }
    return out;
}

}  // namespace pbp
