// Profiles compared field by field, for tests: the first difference, named by its path
// ("processes[1234].threads[1235].samples[17].weight_ns: 10101010 != 0"), or "" when the
// profiles are equal (and then a == b).
#pragma once
#include <sstream>
#include <string>

#include "engine/profile.h"

namespace pbp::test {

namespace diff_detail {

template <class T>
std::string show(const T& v) {
    std::ostringstream s;
    s << v;
    return s.str();
}
inline std::string show(const std::string& v) { return "\"" + v + "\""; }
inline std::string show(SampleKind k) { return kind_name(k); }
inline std::string show(FrameKind k) { return std::to_string(static_cast<int>(k)); }
inline std::string show(uint16_t v) { return std::to_string(v); }
inline std::string show(bool v) { return v ? "true" : "false"; }

#define PBP_DIFF_FIELD(path, a, b, f)                                                                 \
    if (!((a).f == (b).f)) {                                                                           \
        if constexpr (requires { ::pbp::test::diff_detail::show((a).f); })                             \
            return std::string(path) + "." #f ": " + ::pbp::test::diff_detail::show((a).f) + " != " +  \
                   ::pbp::test::diff_detail::show((b).f);                                              \
        else                                                                                           \
            return std::string(path) + "." #f " differs";                                              \
    }

inline std::string run_difference(const std::string& path, const RunInfo& a, const RunInfo& b) {
    PBP_DIFF_FIELD(path, a, b, target)
    PBP_DIFF_FIELD(path, a, b, start_mono_ns)
    PBP_DIFF_FIELD(path, a, b, end_mono_ns)
    PBP_DIFF_FIELD(path, a, b, start_unix_ns)
    PBP_DIFF_FIELD(path, a, b, rate_hz)
    PBP_DIFF_FIELD(path, a, b, period_ns)
    PBP_DIFF_FIELD(path, a, b, kernel)
    PBP_DIFF_FIELD(path, a, b, host)
    PBP_DIFF_FIELD(path, a, b, version)
    PBP_DIFF_FIELD(path, a, b, lost)
    PBP_DIFF_FIELD(path, a, b, truncated)
    PBP_DIFF_FIELD(path, a, b, bpf_run_time_ns)
    PBP_DIFF_FIELD(path, a, b, bpf_run_cnt)
    PBP_DIFF_FIELD(path, a, b, max_depth)
    PBP_DIFF_FIELD(path, a, b, bpf_loop)
    if (a.command != b.command) return path + ".command differs";
    if (a.unresolved != b.unresolved) return path + ".unresolved differs";
    if (!(a == b)) return path + " differs (a field this helper does not know)";
    return "";
}

}  // namespace diff_detail

inline std::string profile_difference(const Profile& a, const Profile& b) {
    using namespace diff_detail;
    if (std::string d = run_difference("run", a.run, b.run); !d.empty()) return d;
    if (a.merged_from.size() != b.merged_from.size()) return "merged_from: sizes differ";
    for (size_t i = 0; i < a.merged_from.size(); i++) {
        const std::string p = "merged_from[" + std::to_string(i) + "]";
        if (std::string d = run_difference(p + ".run", a.merged_from[i].run, b.merged_from[i].run); !d.empty()) return d;
        if (a.merged_from[i].labels != b.merged_from[i].labels) return p + ".labels differ";
    }
    if (a.frames.size() != b.frames.size())
        return "frames: " + std::to_string(a.frames.size()) + " != " + std::to_string(b.frames.size());
    for (uint32_t i = 0; i < a.frames.size(); i++) {
        const std::string p = "frames[" + std::to_string(i) + "]";
        PBP_DIFF_FIELD(p, a.frames.at(i), b.frames.at(i), name)
        PBP_DIFF_FIELD(p, a.frames.at(i), b.frames.at(i), file)
        PBP_DIFF_FIELD(p, a.frames.at(i), b.frames.at(i), line)
        PBP_DIFF_FIELD(p, a.frames.at(i), b.frames.at(i), synthetic)
        PBP_DIFF_FIELD(p, a.frames.at(i), b.frames.at(i), kind)
        PBP_DIFF_FIELD(p, a.frames.at(i), b.frames.at(i), library)
    }
    if (a.stacks.size() != b.stacks.size())
        return "stacks: " + std::to_string(a.stacks.size()) + " != " + std::to_string(b.stacks.size());
    for (uint32_t i = 0; i < a.stacks.size(); i++)
        if (a.stacks.at(i) != b.stacks.at(i)) return "stacks[" + std::to_string(i) + "] differs";
    if (a.processes.size() != b.processes.size())
        return "processes: " + std::to_string(a.processes.size()) + " != " + std::to_string(b.processes.size());
    for (auto ia = a.processes.begin(), ib = b.processes.begin(); ia != a.processes.end(); ++ia, ++ib) {
        if (ia->first != ib->first) return "processes: key " + std::to_string(ia->first) + " != " + std::to_string(ib->first);
        const std::string p = "processes[" + std::to_string(ia->first) + "]";
        const ProcessProfile &x = ia->second, &y = ib->second;
        PBP_DIFF_FIELD(p, x, y, pid)
        PBP_DIFF_FIELD(p, x, y, ns_pid)
        PBP_DIFF_FIELD(p, x, y, comm)
        PBP_DIFF_FIELD(p, x, y, cmdline)
        PBP_DIFF_FIELD(p, x, y, exe)
        PBP_DIFF_FIELD(p, x, y, python)
        PBP_DIFF_FIELD(p, x, y, first_sample_ns)
        PBP_DIFF_FIELD(p, x, y, last_sample_ns)
        PBP_DIFF_FIELD(p, x, y, exited)
        PBP_DIFF_FIELD(p, x, y, execd)
        if (x.labels != y.labels) return p + ".labels differ";
        if (x.resources.size() != y.resources.size()) return p + ".resources: sizes differ";
        for (size_t i = 0; i < x.resources.size(); i++) {
            const std::string r = p + ".resources[" + std::to_string(i) + "]";
            PBP_DIFF_FIELD(r, x.resources[i], y.resources[i], mono_ns)
            PBP_DIFF_FIELD(r, x.resources[i], y.resources[i], cpu_pct)
            PBP_DIFF_FIELD(r, x.resources[i], y.resources[i], rss_bytes)
        }
        if (x.threads.size() != y.threads.size()) return p + ".threads: sizes differ";
        for (auto ta = x.threads.begin(), tb = y.threads.begin(); ta != x.threads.end(); ++ta, ++tb) {
            if (ta->first != tb->first) return p + ".threads: tid " + std::to_string(ta->first) + " != " + std::to_string(tb->first);
            const std::string t = p + ".threads[" + std::to_string(ta->first) + "]";
            PBP_DIFF_FIELD(t, ta->second, tb->second, tid)
            PBP_DIFF_FIELD(t, ta->second, tb->second, ns_tid)
            PBP_DIFF_FIELD(t, ta->second, tb->second, name)
            const auto &sa = ta->second.samples, &sb = tb->second.samples;
            if (sa.size() != sb.size()) return t + ".samples: " + std::to_string(sa.size()) + " != " + std::to_string(sb.size());
            for (size_t i = 0; i < sa.size(); i++) {
                const std::string s = t + ".samples[" + std::to_string(i) + "]";
                PBP_DIFF_FIELD(s, sa[i], sb[i], ts_ns)
                PBP_DIFF_FIELD(s, sa[i], sb[i], stack)
                PBP_DIFF_FIELD(s, sa[i], sb[i], cpu)
                PBP_DIFF_FIELD(s, sa[i], sb[i], kind)
                PBP_DIFF_FIELD(s, sa[i], sb[i], weight_ns)
            }
        }
    }
    if (!(a == b)) return "the profiles differ in a field this helper does not know";
    return "";
}

#undef PBP_DIFF_FIELD

}  // namespace pbp::test
