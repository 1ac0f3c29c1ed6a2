#include "engine/merge.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "engine/tasks.h"

namespace pbp {

namespace {

using Wide = __int128;

// Calls f(uint64_t& t) for every timestamp of p's processes: samples, first/last sample
// (when known: 0 is none), resource readings. (The run's end: end_of.)
template <class F>
void for_each_time(Profile& p, F f) {
    for (auto& [_, pr] : p.processes) {
        if (pr.first_sample_ns) f(pr.first_sample_ns);
        if (pr.last_sample_ns) f(pr.last_sample_ns);
        for (ResourcePoint& r : pr.resources) f(r.mono_ns);
        for (auto& [__, t] : pr.threads)
            for (Sample& s : t.samples) f(s.ts_ns);
    }
    for (TaskSpan& t : p.tasks) {
        f(t.start_ns);
        f(t.stop_ns);
    }
}

// An input's end: its run's end, or its last sample if that is later (or the end unknown).
uint64_t end_of(const Profile& p) {
    uint64_t end = std::max(p.run.end_mono_ns, p.run.start_mono_ns);
    for (const auto& [_, pr] : p.processes)
        for (const auto& [__, t] : pr.threads)
            for (const Sample& s : t.samples) end = std::max(end, s.ts_ns);
    return end;
}

std::string join_distinct(const std::vector<Profile>& in, std::string RunInfo::*field) {
    std::vector<std::string> seen;
    for (const Profile& p : in) {
        const std::string& v = p.run.*field;
        if (!v.empty() && std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
    }
    std::string s;
    for (const auto& v : seen) s += (s.empty() ? "" : ", ") + v;
    return s;
}

std::string describe(const Profile& p, const std::map<std::string, std::string>& labels) {
    std::string s;
    for (const auto& [k, v] : labels) s += (s.empty() ? "" : " ") + k + "=" + v;
    if (s.empty()) s = p.run.target.empty() ? "profile" : p.run.target;
    if (!p.run.host.empty() && p.merged_from.empty()) s += " on " + p.run.host;
    return s;
}

// The checks a profile read from a file passed already, for one built in memory: every
// index in range.
bool check_indices(const Profile& p, size_t n, std::string& error) {
    const std::string which = "profile " + std::to_string(n);
    for (uint32_t s = 0; s < p.stacks.size(); s++)
        for (uint32_t f : p.stacks.at(s))
            if (f >= p.frames.size()) {
                error = which + ": stack " + std::to_string(s) + " refers to frame " + std::to_string(f) + " of " +
                        std::to_string(p.frames.size());
                return false;
            }
    for (const auto& [_, pr] : p.processes)
        for (const auto& [tid, t] : pr.threads)
            for (const Sample& s : t.samples)
                if (s.stack >= p.stacks.size()) {
                    error = which + ": a sample of pid " + std::to_string(pr.pid) + " tid " + std::to_string(tid) +
                            " refers to stack " + std::to_string(s.stack) + " of " + std::to_string(p.stacks.size());
                    return false;
                }
    return true;
}

}  // namespace

Profile merge_profiles(std::vector<Profile> in, const MergeOptions& o, std::string& error) {
    error.clear();
    auto fail = [&](const std::string& message) {
        error = message;
        return Profile{};
    };
    if (in.empty()) return fail("nothing to merge: give at least one profile");
    if (o.labels.size() > in.size())
        return fail("labels for profile " + std::to_string(o.labels.size()) + ", but there are only " +
                    std::to_string(in.size()) + " profiles");
    for (size_t i = 0; i < in.size(); i++) {
        if (in.size() > 1 && in[i].run.start_unix_ns == 0)
            return fail("profile " + std::to_string(i + 1) +
                        " has no wall-clock start time (run.start_unix_ns): it cannot be lined up with the others");
        if (!check_indices(in[i], i + 1, error)) return Profile{};
    }
    static const std::map<std::string, std::string> kNoLabels;
    auto labels_of = [&](size_t i) -> const std::map<std::string, std::string>& {
        return i < o.labels.size() ? o.labels[i] : kNoLabels;
    };

    // The clock: the input that started first keeps its timestamps; every other input's
    // are moved by the difference of the starts, in wall-clock time.
    size_t ref = 0;
    for (size_t i = 1; i < in.size(); i++)
        if (in[i].run.start_unix_ns < in[ref].run.start_unix_ns) ref = i;
    const int64_t ref_unix = in[ref].run.start_unix_ns;  // (inputs are freed as they are merged)
    std::vector<uint64_t> ends(in.size());
    for (size_t i = 0; i < in.size(); i++) ends[i] = end_of(in[i]);
    auto rel = [&](size_t i, uint64_t t) {  // ns since the merged start, on the common clock
        return Wide(t) - Wide(in[i].run.start_mono_ns) + (Wide(in[i].run.start_unix_ns) - Wide(ref_unix));
    };
    Wide lowest = 0, highest = 0;
    for (size_t i = 0; i < in.size(); i++) {
        for_each_time(in[i], [&](uint64_t& t) {
            lowest = std::min(lowest, rel(i, t));
            highest = std::max(highest, rel(i, t));
        });
        highest = std::max(highest, rel(i, ends[i]));
    }
    // A timestamp before the reference's clock began (a reading taken before its start on
    // a machine that booted earlier) moves the base up rather than below zero.
    const Wide base = std::max(Wide(in[ref].run.start_mono_ns), -lowest);
    if (base + highest > Wide(std::numeric_limits<uint64_t>::max()))
        return fail("the profiles' start times are too far apart to be put on one clock");

    Profile out;
    RunInfo& run = out.run;
    run.start_mono_ns = static_cast<uint64_t>(base);
    run.start_unix_ns = ref_unix;
    run.end_mono_ns = run.start_mono_ns;
    bool same_rate = true, same_period = true, same_command = true;
    uint64_t shortest_period = 0;
    int max_depth = 0;
    run.bpf_loop = true;
    for (size_t i = 0; i < in.size(); i++) {
        const RunInfo& r = in[i].run;
        same_rate &= r.rate_hz == in[0].run.rate_hz;
        same_period &= r.period_ns == in[0].run.period_ns;
        same_command &= r.command == in[0].run.command;
        run.rate_hz = std::max(run.rate_hz, r.rate_hz);
        const uint64_t period = r.period_ns ? r.period_ns : r.rate_hz > 0 ? static_cast<uint64_t>(1e9 / r.rate_hz + 0.5) : 0;
        if (period && (!shortest_period || period < shortest_period)) shortest_period = period;
        if (r.max_depth > 0 && (!max_depth || r.max_depth < max_depth)) max_depth = r.max_depth;
        run.bpf_loop &= r.bpf_loop;
        run.lost += r.lost;
        run.truncated += r.truncated;
        for (const auto& [reason, n] : r.unresolved) run.unresolved[reason] += n;
        run.bpf_run_time_ns += r.bpf_run_time_ns;
        run.bpf_run_cnt += r.bpf_run_cnt;
        run.end_mono_ns = std::max(run.end_mono_ns, static_cast<uint64_t>(base + rel(i, ends[i])));
    }
    // The mode: the inputs' own when they agree; else wall if one input is (the merged profile
    // holds its off-CPU samples), else cpu (every input kept on-CPU samples). min_block_ns: the
    // largest, the bound under which an interval may have been counted in aggregate. Each
    // input's own run stays in merged_from.
    bool same_mode = true, any_wall = false;
    for (const Profile& p : in) {
        same_mode &= p.run.mode == in[0].run.mode;
        any_wall |= p.run.mode == ProfileMode::Wall;
        run.min_block_ns = std::max(run.min_block_ns, p.run.min_block_ns);
    }
    run.mode = same_mode ? in[0].run.mode : any_wall ? ProfileMode::Wall : ProfileMode::Cpu;
    run.rate_hz = same_rate ? in[0].run.rate_hz : run.rate_hz;
    run.period_ns = same_period ? in[0].run.period_ns : shortest_period;
    run.command = same_command ? in[0].run.command : std::vector<std::string>{};
    run.max_depth = max_depth;
    run.kernel = join_distinct(in, &RunInfo::kernel);
    run.version = join_distinct(in, &RunInfo::version);
    run.host = join_distinct(in, &RunInfo::host);
    if (!o.target.empty()) {
        run.target = o.target;
    } else if (in.size() == 1) {
        run.target = in[0].run.target;
    } else {
        constexpr size_t kNamed = 4;
        for (size_t i = 0; i < in.size() && i < kNamed; i++)
            run.target += (i ? " + " : "") + describe(in[i], labels_of(i));
        if (in.size() > kNamed) run.target += " + " + std::to_string(in.size() - kNamed) + " more";
    }

    uint32_t next_key = 1;
    for (size_t i = 0; i < in.size(); i++) {
        Profile& p = in[i];
        const auto& given = labels_of(i);
        if (p.merged_from.empty()) {
            out.merged_from.push_back({p.run, given});
        } else {
            for (MergedInput m : p.merged_from) {
                for (const auto& [k, v] : given) m.labels[k] = v;
                out.merged_from.push_back(std::move(m));
            }
        }
        std::vector<uint32_t> frame_map(p.frames.size()), stack_map(p.stacks.size());
        for (uint32_t f = 0; f < p.frames.size(); f++) frame_map[f] = out.frames.intern(p.frames.at(f));
        std::vector<uint32_t> st;
        for (uint32_t s = 0; s < p.stacks.size(); s++) {
            st.clear();
            for (uint32_t f : p.stacks.at(s)) st.push_back(frame_map[f]);
            stack_map[s] = out.stacks.intern(st);
        }
        const Wide shift = base - Wide(p.run.start_mono_ns) + (Wide(p.run.start_unix_ns) - Wide(ref_unix));
        auto move = [shift](uint64_t& t) { t = static_cast<uint64_t>(Wide(t) + shift); };
        std::map<uint32_t, uint32_t> key_of;  // the input's process key -> the merged one
        for (auto& [key, pr] : p.processes) {
            key_of[key] = next_key;
            if (pr.first_sample_ns) move(pr.first_sample_ns);
            if (pr.last_sample_ns) move(pr.last_sample_ns);
            for (ResourcePoint& r : pr.resources) move(r.mono_ns);
            for (auto& [__, t] : pr.threads)
                for (Sample& s : t.samples) {
                    move(s.ts_ns);
                    s.stack = stack_map[s.stack];
                }
            for (const auto& [k, v] : given) pr.labels[k] = v;
            if (o.host_label && !p.run.host.empty()) pr.labels.emplace("host", p.run.host);
            out.processes.emplace(next_key++, std::move(pr));
        }
        for (TaskSpan& t : p.tasks) {
            auto k = key_of.find(t.process);
            if (k == key_of.end()) continue;  // (the reader and attach_tasks never make one)
            move(t.start_ns);
            move(t.stop_ns);
            t.process = k->second;
            out.tasks.push_back(std::move(t));
        }
        p = Profile{};  // its samples are in out now; free the rest as we go
    }
    sort_tasks(out);
    return out;
}

}  // namespace pbp
