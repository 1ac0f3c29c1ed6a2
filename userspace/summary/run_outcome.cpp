#include "summary/run_outcome.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "summary/bpf_summary.h"
#include "summary/text_summary.h"

namespace pbp {

std::string run_seconds_text(double s) {
    if (!(s > 0)) return "0";
    const int decimals = std::clamp(1 - static_cast<int>(std::floor(std::log10(s))), 0, 3);
    char b[64];
    snprintf(b, sizeof b, "%.*f", decimals, s);
    std::string t = b;
    if (t.find('.') != std::string::npos) {
        while (t.back() == '0') t.pop_back();
        if (t.back() == '.') t.pop_back();
    }
    return t;
}

// The CPU time a process used over its resource readings (the first is a baseline), -1 when
// fewer than two readings were made.
double cpu_seconds(const std::vector<ResourcePoint>& points) {
    double s = 0;
    bool any = false;
    for (size_t i = 1; i < points.size(); i++)
        if (points[i].cpu_pct >= 0) {
            s += points[i].cpu_pct / 100 * static_cast<double>(points[i].mono_ns - points[i - 1].mono_ns) / 1e9;
            any = true;
        }
    return any ? s : -1;
}

namespace {

std::string seconds_or_ms(double s) {
    if (s >= 1) return run_seconds_text(s) + " s";
    char b[32];
    snprintf(b, sizeof b, "%.0f ms", s * 1000);
    return b;
}

}  // namespace

std::string not_sampled_why(double cpu_s, double rate_hz) {
    const std::string less = "it used less than one sample period of CPU";
    if (!(rate_hz > 0) || cpu_s < 0) return less;
    const double period = 1 / rate_hz;
    char r[32];
    snprintf(r, sizeof r, "%g", rate_hz);
    // /proc counts CPU time in 10 ms ticks: below one, "under 10 ms" (which says nothing
    // against a shorter period).
    if (cpu_s < period) {
        if (cpu_s < 0.01 && period <= 0.01) return less;
        return less + ": " + (cpu_s < 0.01 ? std::string("under 10 ms") : seconds_or_ms(cpu_s)) + ", against " +
               seconds_or_ms(period) + " at -r " + r;
    }
    return "it used " + seconds_or_ms(cpu_s) + " of CPU, about " + run_seconds_text(cpu_s / period) +
           " sample periods of " + seconds_or_ms(period) + " at -r " + r +
           ", and no sample fell in them; a higher -r or a longer -d samples it";
}

RunOutcome run_outcome(const Profile& profile, const RunFacts& facts, const std::vector<uint64_t>& bpf_stats,
                       int debug, bool with_bpf_cost) {
    RunOutcome o;
    const RunInfo& run = profile.run;
    // A run that reached the duration asked lasted it: the clock's few more milliseconds are the
    // time to notice the deadline and stop (a poll: up to 100 ms), not what was asked or sampled.
    o.duration_s = facts.duration_s > 0 && run.duration_s() >= facts.duration_s ? facts.duration_s : run.duration_s();
    // A command, a machine or a cgroup with no CPython process in it: nothing to write, and
    // no empty file left behind.
    if (facts.targets_ever == 0 && (facts.launched || facts.all_python || facts.cgroups)) {
        o.nothing_found = "no CPython process was found " +
                          (facts.launched ? std::string("in the launched command")
                           : facts.cgroups ? "in " + run.target
                                           : "on this machine") +
                          " during the " + run_seconds_text(o.duration_s) + " s run" +
                          (facts.first_refusal.empty() ? "" : " (" + facts.first_refusal + ")") + "; nothing was written";
        return o;
    }
    const std::string line = summary_line(profile, "");
    o.counts = line.substr(std::string("Wrote ").size());
    o.truncated = run.truncated;
    o.max_depth = run.max_depth;
    if (with_bpf_cost) o.bpf_cost = bpf_cost_lines(run, bpf_stats, debug);
    // (A merged profile's keys are not pids, and a process that exec'd has an entry per
    // program it ran, with its pid and labels: ProcessRegistry::retire.)
    std::map<uint32_t, uint64_t> samples_of;
    std::set<std::pair<uint32_t, std::map<std::string, std::string>>> sampled;
    for (auto& [_, p] : profile.processes)
        for (auto& [__, t] : p.threads) {
            samples_of[p.pid] += t.sample_count();
            sampled.emplace(p.pid, p.labels);
        }
    o.rate_hz = run.rate_hz;
    for (auto& [_, p] : profile.processes)
        if (p.threads.empty() && !facts.all_python && !sampled.count({p.pid, p.labels}))
            o.not_sampled.push_back({static_cast<pid_t>(p.pid), p.comm, cpu_seconds(p.resources)});
    for (pid_t pid : facts.exited_early) {
        auto it = samples_of.find(static_cast<uint32_t>(pid));
        o.exited_early.emplace_back(pid, it == samples_of.end() ? 0 : it->second);
    }
    o.top = top_functions(profile) + top_threads(profile);
    o.mode = mode_totals(profile);
    return o;
}

std::string RunOutcome::text(const std::string& written) const {
    std::string s;
    const std::string dur = run_seconds_text(duration_s);
    for (auto& [pid, comm, cpu_s] : not_sampled) {
        if (mode.mode == ProfileMode::Gil) {
            // Its samples may all have been left out: not holding the GIL, or (said in the
            // mode lines' warning) no known GIL state at all.
            if (mode.gil_unknown.count(static_cast<uint32_t>(pid))) continue;
            s += "pybpfprof: PID " + std::to_string(pid) + " (" + comm + ") had no sample holding the GIL during the " +
                 dur + " s run; its profile is empty\n";
            continue;
        }
        s += "pybpfprof: PID " + std::to_string(pid) + " (" + comm + ") was not sampled during the " + dur + " s run (" +
             not_sampled_why(cpu_s, rate_hz) + "); its profile is empty\n";
    }
    for (auto& [pid, n] : exited_early) {
        const std::string kept = n == 0   ? std::string("it had no samples")
                                 : n == 1 ? "its 1 sample is kept in " + written
                                          : "its " + std::to_string(n) + " samples are kept in " + written;
        s += "pybpfprof: PID " + std::to_string(pid) + " exited during the run; " + kept + "\n";
    }
    s += "Wrote " + written + counts + "\n";
    s += mode_lines(mode);
    if (truncated)
        s += "  " + std::to_string(truncated) + " samples were deeper than " + std::to_string(max_depth) +
             " frames: their innermost " + std::to_string(max_depth) +
             " frames are kept, under a [truncated] frame where the outer ones were\n";
    s += bpf_cost;
    return s;
}

nlohmann::json to_json(const RunOutcome& o) {
    nlohmann::json j;
    j["nothing_found"] = o.nothing_found;
    j["counts"] = o.counts;
    j["truncated"] = o.truncated;
    j["max_depth"] = o.max_depth;
    j["bpf_cost"] = o.bpf_cost;
    j["duration_s"] = o.duration_s;
    j["not_sampled"] = nlohmann::json::array();
    for (auto& [pid, comm, cpu_s] : o.not_sampled)
        j["not_sampled"].push_back({{"pid", pid}, {"comm", comm}, {"cpu_s", cpu_s}});
    j["rate_hz"] = o.rate_hz;
    j["exited_early"] = nlohmann::json::array();
    for (auto& [pid, n] : o.exited_early) j["exited_early"].push_back({{"pid", pid}, {"samples", n}});
    j["top"] = o.top;
    j["mode"] = mode_name(o.mode.mode);
    j["on_cpu_ns"] = o.mode.on_cpu_ns;
    j["off_cpu_ns"] = o.mode.off_cpu_ns;
    j["min_block_ns"] = o.mode.min_block_ns;
    j["aggregate_ns"] = o.mode.aggregate_ns;
    j["gil_ns"] = nlohmann::json::object();
    for (auto& [g, ns] : o.mode.gil_ns) j["gil_ns"][gil_name(g)] = ns;
    j["gil_left_out_ns"] = nlohmann::json::object();
    for (auto& [g, ns] : o.mode.left_out_ns) j["gil_left_out_ns"][gil_name(g)] = ns;
    j["gil_left_out_samples"] = o.mode.left_out_samples;
    j["gil_unknown"] = nlohmann::json::array();
    for (auto& [pid, why] : o.mode.gil_unknown) j["gil_unknown"].push_back({{"pid", pid}, {"reason", why}});
    return j;
}

bool from_json(const nlohmann::json& j, RunOutcome& o, std::string& error) {
    try {
        o.nothing_found = j.at("nothing_found").get<std::string>();
        o.counts = j.at("counts").get<std::string>();
        o.truncated = j.at("truncated").get<uint64_t>();
        o.max_depth = j.at("max_depth").get<int>();
        o.bpf_cost = j.at("bpf_cost").get<std::string>();
        o.duration_s = j.at("duration_s").get<double>();
        for (auto& x : j.at("not_sampled"))
            o.not_sampled.push_back(
                {x.at("pid").get<pid_t>(), x.at("comm").get<std::string>(), x.value("cpu_s", -1.0)});
        // (Not from an agent older than them: the line then says less.)
        o.rate_hz = j.value("rate_hz", 0.0);
        for (auto& x : j.at("exited_early")) o.exited_early.emplace_back(x.at("pid").get<pid_t>(), x.at("samples").get<uint64_t>());
        o.top = j.at("top").get<std::string>();
        if (!parse_mode(j.at("mode").get<std::string>(), o.mode.mode)) {
            error = "the agent's run summary is malformed (an unknown mode)";
            return false;
        }
        o.mode.on_cpu_ns = j.at("on_cpu_ns").get<uint64_t>();
        o.mode.off_cpu_ns = j.at("off_cpu_ns").get<uint64_t>();
        o.mode.min_block_ns = j.at("min_block_ns").get<uint64_t>();
        o.mode.aggregate_ns = j.at("aggregate_ns").get<uint64_t>();
        auto by_state = [&](const nlohmann::json& obj, std::map<GilState, uint64_t>& out) {
            for (auto& [name, ns] : obj.items()) {
                GilState g = GilState::NA;
                bool found = false;
                for (GilState c : {GilState::NA, GilState::Held, GilState::Waiting, GilState::Neither})
                    if (name == gil_name(c)) g = c, found = true;
                if (!found) {
                    error = "the agent's run summary is malformed (an unknown GIL state)";
                    return false;
                }
                out[g] = ns.get<uint64_t>();
            }
            return true;
        };
        if (!by_state(j.at("gil_ns"), o.mode.gil_ns)) return false;
        // (Absent from an older agent's summary.)
        if (j.contains("gil_left_out_ns") && !by_state(j.at("gil_left_out_ns"), o.mode.left_out_ns)) return false;
        o.mode.left_out_samples = j.value("gil_left_out_samples", uint64_t{0});
        if (j.contains("gil_unknown"))
            for (auto& x : j.at("gil_unknown"))
                o.mode.gil_unknown[x.at("pid").get<uint32_t>()] = x.at("reason").get<std::string>();
        return true;
    } catch (const nlohmann::json::exception& e) {
        error = std::string("the agent's run summary is malformed (") + e.what() + ")";
        return false;
    }
}

}  // namespace pbp
