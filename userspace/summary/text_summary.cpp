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

ModeTotals mode_totals(const Profile& p) {
    ModeTotals t;
    t.mode = p.run.mode;
    t.min_block_ns = p.run.mode == ProfileMode::Wall ? p.run.min_block_ns : 0;
    for (auto& [_, pr] : p.processes)
        for (auto& [__, th] : pr.threads)
            for (const Sample& s : th.samples) {
                (s.kind == SampleKind::OffCpu ? t.off_cpu_ns : t.on_cpu_ns) += s.weight_ns;
                if (s.kind == SampleKind::OffCpu && s.aggregate) t.aggregate_ns += s.weight_ns;
                t.gil_ns[s.gil] += s.weight_ns;
            }
    return t;
}

std::string mode_lines(const ModeTotals& t) {
    auto secs = [](uint64_t ns) {
        char b[32];
        snprintf(b, sizeof b, "%.3f s", ns / 1e9);
        return std::string(b);
    };
    auto duration = [](uint64_t ns) {  // the --min-block as the user would write it
        char b[32];
        if (ns % 1'000'000'000 == 0) snprintf(b, sizeof b, "%llu s", (unsigned long long)(ns / 1'000'000'000));
        else if (ns >= 1'000'000) snprintf(b, sizeof b, "%g ms", ns / 1e6);
        else snprintf(b, sizeof b, "%g us", ns / 1e3);
        return std::string(b);
    };
    std::string s = std::string("  mode ") + mode_name(t.mode) + ": ";
    switch (t.mode) {
        case ProfileMode::Cpu:
            s += secs(t.on_cpu_ns) + " on CPU (time off CPU is not sampled in this mode; --mode wall adds it)\n";
            break;
        case ProfileMode::Wall:
            s += secs(t.on_cpu_ns) + " on CPU, " + secs(t.off_cpu_ns) + " off CPU";
            if (t.min_block_ns)
                s += " (" + secs(t.aggregate_ns) + " of it in intervals shorter than the " + duration(t.min_block_ns) +
                     " --min-block, summed per thread and reason)";
            s += "\n";
            break;
        case ProfileMode::Gil:
            // The engine drops the samples that do not hold the GIL: what was kept is all there is.
            s += secs(t.on_cpu_ns) + " on CPU holding the GIL kept (samples not holding it are left out)\n";
            break;
    }
    bool known = false;
    for (auto& [g, ns] : t.gil_ns)
        if (g != GilState::NA && ns) known = true;
    if (known) {
        s += "  GIL:";
        bool first = true;
        for (GilState g : {GilState::Held, GilState::Waiting, GilState::Neither, GilState::NA}) {
            auto it = t.gil_ns.find(g);
            if (it == t.gil_ns.end() || !it->second) continue;
            s += std::string(first ? " " : ", ") + secs(it->second) + " " +
                 (g == GilState::NA ? "n/a (not known)" : gil_name(g));
            first = false;
        }
        s += "\n";
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
