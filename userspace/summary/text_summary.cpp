#include "summary/text_summary.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "export/common.h"

namespace pbp {

std::string summary_line(const Profile& p, const std::string& path) {
    // Processes, not programs: one that exec'd Python again has an entry per program
    // (ProcessRegistry::retire), both with its pid and labels (a merged profile's inputs differ
    // in theirs: host, role).
    std::set<std::pair<uint32_t, std::map<std::string, std::string>>> procs_seen;
    for (auto& [_, pr] : p.processes)
        if (!pr.threads.empty()) procs_seen.emplace(pr.pid, pr.labels);
    const size_t procs = procs_seen.size();
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
    if (p.run.mode == ProfileMode::Gil) {
        t.left_out_ns = p.run.gil_left_out_ns;
        t.left_out_samples = p.run.gil_left_out_samples;
        t.gil_unknown = p.run.gil_unknown;
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
        case ProfileMode::Gil: {
            // The engine drops the samples that do not hold the GIL, and counts them.
            uint64_t left_ns = 0;
            for (auto& [_, ns] : t.left_out_ns) left_ns += ns;
            s += secs(t.on_cpu_ns) + " on CPU holding the GIL kept; " + secs(left_ns) + " on CPU not holding it left out (" +
                 std::to_string(t.left_out_samples) + (t.left_out_samples == 1 ? " sample" : " samples") + ")\n";
            break;
        }
    }
    // In gil mode the GIL states of the samples left out count too: the line then says how
    // the on-CPU time divided.
    std::map<GilState, uint64_t> gil = t.gil_ns;
    for (auto& [g, ns] : t.left_out_ns) gil[g] += ns;
    bool known = false;
    for (auto& [g, ns] : gil)
        if (g != GilState::NA && ns) known = true;
    if (known) {
        s += "  GIL:";
        bool first = true;
        for (GilState g : {GilState::Held, GilState::Waiting, GilState::Neither, GilState::NA}) {
            auto it = gil.find(g);
            if (it == gil.end() || !it->second) continue;
            s += std::string(first ? " " : ", ") + secs(it->second) + " " +
                 (g == GilState::NA ? "n/a (not known)" : gil_name(g));
            first = false;
        }
        s += "\n";
    }
    if (t.mode == ProfileMode::Gil && !t.gil_unknown.empty()) {
        const size_t n = t.gil_unknown.size();
        s += "  warning: " + std::to_string(n) + (n == 1 ? " process has" : " processes have") +
             " no known GIL state and --mode gil keeps none of " + (n == 1 ? "its" : "their") + " samples (";
        bool first = true;
        for (auto& [pid, why] : t.gil_unknown) {
            s += std::string(first ? "" : "; ") + "PID " + std::to_string(pid) + ": " + why;
            first = false;
        }
        s += "); use --mode cpu or --mode wall for " + std::string(n == 1 ? "it" : "them") + "\n";
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
        // A native function: "symbol [libc.so.6]", its library's base name (the full path is
        // in the outputs); a kernel one is "[k] name" already.
        std::string name = fn.name;
        if (fn.kind == FrameKind::Native) name += " [" + (fn.library.empty() ? std::string("?") : library_basename(fn.library)) + "]";
        std::string where = fn.file.empty() ? "" : " (" + fn.file + ":" + std::to_string(times.hot_line[v[i]]) + ")";
        snprintf(line, sizeof line, "  %5.1f%% %5.1f%%  %s%s\n", 100.0 * times.self_ns[v[i]] / all,
                 100.0 * times.total_ns[v[i]] / all, name.c_str(), where.c_str());
        out += line;
    }
    return out;
}

std::string top_threads(const Profile& p, size_t n) {
    struct Row {
        uint64_t ns;
        const ProcessProfile* pr;
        const ThreadProfile* t;
    };
    std::vector<Row> rows;
    uint64_t all = 0;
    size_t procs = 0;
    for (auto& [_, pr] : p.processes) {
        procs += !pr.threads.empty();
        for (auto& [__, t] : pr.threads) {
            uint64_t ns = 0;
            for (const Sample& s : t.samples) ns += s.weight_ns;
            if (!ns) continue;
            rows.push_back({ns, &pr, &t});
            all += ns;
        }
    }
    if (rows.size() < 2) return "";
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.ns > b.ns; });
    // (Not two percentages: the Python API reads those lines of 'top' as functions.)
    std::string out = "Threads by time (" + std::to_string(rows.size()) + " threads):\n";
    char line[1024];
    for (size_t i = 0; i < rows.size() && i < n; i++) {
        const Row& r = rows[i];
        std::string who = (r.t->name.empty() ? std::string("thread") : r.t->name) + " (tid " + std::to_string(r.t->tid);
        if (procs > 1) who += ", pid " + std::to_string(r.pr->pid);
        snprintf(line, sizeof line, "  %5.1f%% %8.3f s  %s)\n", 100.0 * r.ns / all, r.ns / 1e9, who.c_str());
        out += line;
    }
    if (rows.size() > n) out += "  ... and " + std::to_string(rows.size() - n) + " more\n";
    return out;
}

}  // namespace pbp
