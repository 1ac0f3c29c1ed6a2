#include "cli/text_summary.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

namespace pbp {

std::string summary_line(const Profile& p, const std::string& path) {
    size_t procs = 0;
    for (auto& [_, pr] : p.processes)
        if (!pr.threads.empty()) procs++;
    std::string s = "Wrote " + path + ": " + std::to_string(p.total_samples()) + " samples, " +
                    std::to_string(procs) + " processes, " + std::to_string(p.total_threads()) + " threads, " +
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
    // One entry per function (name + file): its lines add up.
    struct Fn {
        std::string name, file;
        int line = 0;            // the line with the most self samples
        uint64_t self = 0, total = 0, line_self = 0;
    };
    std::vector<Fn> fns;
    std::unordered_map<std::string, uint32_t> fn_index;
    std::vector<uint32_t> fn_of_frame(p.frames.size());
    for (uint32_t i = 0; i < p.frames.size(); i++) {
        const Frame& f = p.frames.at(i);
        auto [it, added] = fn_index.emplace(f.name + "\x1f" + f.file, static_cast<uint32_t>(fns.size()));
        if (added) fns.push_back({f.name, f.file, f.line, 0, 0, 0});
        fn_of_frame[i] = it->second;
    }
    std::vector<uint64_t> per_stack(p.stacks.size(), 0);
    for (auto& [_, pr] : p.processes)
        for (auto& [__, t] : pr.threads)
            for (auto& s : t.samples) per_stack[s.stack]++;
    std::unordered_map<uint32_t, uint64_t> line_self;  // frame -> self samples
    uint64_t all = 0;
    for (uint32_t i = 0; i < per_stack.size(); i++) {
        uint64_t c = per_stack[i];
        if (!c) continue;
        all += c;
        auto& st = p.stacks.at(i);
        if (st.empty()) continue;
        std::unordered_set<uint32_t> seen;  // recursion counts once per sample
        for (uint32_t f : st)
            if (seen.insert(fn_of_frame[f]).second) fns[fn_of_frame[f]].total += c;
        fns[fn_of_frame[st.back()]].self += c;
        line_self[st.back()] += c;
    }
    for (auto& [fi, c] : line_self) {
        Fn& fn = fns[fn_of_frame[fi]];
        if (c > fn.line_self) {
            fn.line_self = c;
            fn.line = p.frames.at(fi).line;
        }
    }
    std::vector<const Fn*> v;
    for (auto& f : fns)
        if (f.total) v.push_back(&f);
    std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->self != b->self ? a->self > b->self : a->total > b->total; });
    std::string out;
    if (!all) return out;
    char line[1024];
    snprintf(line, sizeof line, "Top functions by self time (%llu samples):\n  %6s %6s  %s\n",
             (unsigned long long)all, "self", "total", "function (file:line)");
    out += line;
    for (size_t i = 0; i < v.size() && i < n; i++) {
        std::string where = v[i]->file.empty() ? "" : " (" + v[i]->file + ":" + std::to_string(v[i]->line) + ")";
        snprintf(line, sizeof line, "  %5.1f%% %5.1f%%  %s%s\n", 100.0 * v[i]->self / all, 100.0 * v[i]->total / all,
                 v[i]->name.c_str(), where.c_str());
        out += line;
    }
    return out;
}

}  // namespace pbp
