// speedscope file format (https://www.speedscope.app/file-format-schema.json).
//
// One `sampled` profile per (process, thread) that has samples, all sharing one frame
// table. Each sample's weight is its Sample::weight_ns in seconds: the sampling period for
// an on-CPU sample, the time waited for an off-CPU one (a thread's off-CPU samples, if any,
// are in the same profile as its on-CPU ones). startValue and endValue are seconds since
// the run start, so every profile uses the same time base.
// In wall mode a thread's off-CPU intervals are samples like the others, ending in their wait
// leaf ("[sleeping]", "[waiting for the GIL]", ...) and weighing the time waited, so the
// flame graph and the sandwich view show where time went off CPU too. The "pybpfprof"
// metadata says the mode, min-block and the on-CPU and off-CPU totals (cpu_ns, off_cpu_ns).
// Note: speedscope itself lays the samples of a sampled profile out back to back from
// startValue (it has no per-sample timestamps); the time base is there for tools and for the
// width of the time-order view (speedscope uses max(endValue - startValue, sum of weights)).
//
// Native and kernel frames (--native): kernel frames are named "[k] name"; a native or
// kernel frame's "file" is its library ("[kernel]"), with the source file:line in
// parentheses when debug information gave one.
//
// speedscope refuses a file with no profiles ("Successfully imported profile, but it's
// empty!"), so an idle run still gets one empty profile per seen process (or one for the run).
#include "export/speedscope.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "export/common.h"

#ifndef PYBPFPROF_VERSION
#define PYBPFPROF_VERSION "unknown"
#endif

namespace pbp {

namespace {

constexpr const char* kSchema = "https://www.speedscope.app/file-format-schema.json";

// JSON string literal; invalid UTF-8 is replaced with U+FFFD rather than throwing.
std::string jstr(const std::string& s) {
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string labels_suffix(const ProcessProfile& p) {
    std::string where = p.where();
    return where.empty() ? "" : " [" + where + "]";
}

std::string thread_profile_name(const ProcessProfile& p, const ThreadProfile& t) {
    std::string s = p.display_name() + " ";
    if (!t.name.empty()) s += t.name + " ";
    s += "(tid " + std::to_string(t.tid);
    if (t.ns_tid && t.ns_tid != t.tid) s += ", ns tid " + std::to_string(t.ns_tid);
    s += ")";
    return s + labels_suffix(p);
}

class SpeedscopeExporter : public Exporter {
public:
    std::string name() const override { return "speedscope"; }
    std::vector<std::string> extensions() const override { return {"speedscope.json", "json"}; }
    std::string how_to_open(const std::string& path) const override {
        return "open it at https://www.speedscope.app or run: npx speedscope " + path;
    }
    void write(const Profile& profile, const ExportOptions& options, std::ostream& out) const override {
        write_speedscope(profile, options, out);
    }
};

}  // namespace

void write_speedscope(const Profile& prof, const ExportOptions& options, std::ostream& out) {
    const RunInfo& run = prof.run;
    const uint64_t period = sampling_period_ns(run);
    const std::string start_iso = iso8601_utc_ms(run.start_unix_ns);
    auto rel = [&](uint64_t mono_ns) {
        return static_cast<int64_t>(mono_ns - run.start_mono_ns);
    };

    std::string file_name = "pybpfprof ";
    if (!run.target.empty()) file_name += run.target + " ";
    file_name += start_iso;

    out << "{\"$schema\":" << jstr(kSchema) << ",\n";
    out << "\"name\":" << jstr(file_name) << ",\n";
    out << "\"exporter\":" << jstr(std::string("pybpfprof ") + PYBPFPROF_VERSION) << ",\n";

    // Extra metadata: the schema allows additional top-level properties and speedscope
    // ignores them. Absolute times let other tools line the profiles up with wall clock.
    {
        nlohmann::json meta = {
            {"start_time", start_iso},
            {"start_unix_ns", run.start_unix_ns},
            {"start_mono_ns", run.start_mono_ns},
            {"end_mono_ns", run.end_mono_ns},
            {"duration_s", run.end_mono_ns >= run.start_mono_ns ? run.duration_s() : 0.0},
            {"period_ns", period},
            {"rate_hz", run.rate_hz},
            {"target", run.target},
            {"version", run.version},
            {"kernel", run.kernel},
            {"max_depth", run.max_depth},
            {"bpf_loop", run.bpf_loop},
            {"total_samples", prof.total_samples()},
            {"lost", run.lost},
            {"mode", mode_name(run.mode)},
            {"min_block_ns", run.min_block_ns},
            {"cpu_ns", prof.total_weight_ns(SampleKind::Cpu)},
            {"off_cpu_ns", prof.total_weight_ns(SampleKind::OffCpu)},
        };
        out << "\"pybpfprof\":"
            << meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << ",\n";
    }

    // Shared frame table: our FrameTable indices are used as-is.
    out << "\"shared\":{\"frames\":[";
    const auto& frames = prof.frames.all();
    for (size_t i = 0; i < frames.size(); i++) {
        const Frame& f = frames[i];
        if (i) out << ",";
        out << "\n{\"name\":" << jstr(frame_display_name(f));
        if (f.synthetic) {
        } else if (f.kind != FrameKind::Python) {
            // A native or kernel frame's file is its library; when debug information gave a
            // source file, "library (source:line)" (no "line": speedscope would show it after
            // the parenthesis). docs/native-frames.md.
            std::string file = f.library.empty() ? std::string("?") : f.library;
            if (!f.file.empty()) {
                file += " (" + f.file;
                if (f.line > 0) file += ":" + std::to_string(f.line);
                file += ")";
            }
            out << ",\"file\":" << jstr(file);
        } else {
            if (!f.file.empty()) out << ",\"file\":" << jstr(f.file);
            if (f.line > 0) out << ",\"line\":" << f.line;
        }
        out << "}";
    }
    out << "]},\n";

    out << "\"profiles\":[";
    size_t index = 0, active = 0;
    uint64_t active_ns = 0;
    auto sep = [&]() {
        if (index) out << ",";
        out << "\n";
    };
    // One sampled profile per thread; with --group-by pod, one per pod (all its processes'
    // threads, in time order) and one per thread of the processes in no pod.
    struct Group {
        std::string name;
        std::vector<const ThreadProfile*> threads;
    };
    std::vector<Group> groups;
    std::map<std::string, size_t> pod_group;
    std::map<std::string, std::set<uint32_t>> pod_pids;
    for (const auto& [pid, p] : prof.processes) {
        const std::string pod = options.group_by == "pod" ? p.pod_name() : "";
        for (const auto& [tid, t] : p.threads) {
            if (t.samples.empty()) continue;
            if (pod.empty()) {
                groups.push_back({thread_profile_name(p, t), {&t}});
                continue;
            }
            auto [it, fresh] = pod_group.emplace(pod, groups.size());
            if (fresh) groups.push_back({"pod " + pod, {}});
            groups[it->second].threads.push_back(&t);
            pod_pids[pod].insert(pid);
        }
    }
    for (const auto& [pod, gi] : pod_group) {
        size_t np = pod_pids[pod].size(), nt = groups[gi].threads.size();
        groups[gi].name += " (" + std::to_string(np) + " process" + (np == 1 ? "" : "es") + ", " +
                           std::to_string(nt) + " thread" + (nt == 1 ? "" : "s") + ")";
    }
    for (const auto& g : groups) {
        {
            // Samples are documented to be in time order; be robust if they are not.
            std::vector<const Sample*> order;
            for (const ThreadProfile* t : g.threads)
                for (const auto& s : t->samples) order.push_back(&s);
            std::stable_sort(order.begin(), order.end(),
                             [](const Sample* a, const Sample* b) { return a->ts_ns < b->ts_ns; });
            const int64_t first = rel(order.front()->ts_ns);
            const int64_t last = rel(order.back()->ts_ns);
            sep();
            out << "{\"type\":\"sampled\",\"name\":" << jstr(g.name)
                << ",\"unit\":\"seconds\",\"startValue\":" << decimal_seconds(first)
                << ",\"endValue\":" << decimal_seconds(last + static_cast<int64_t>(period))
                << ",\n\"samples\":[";
            bool first_sample = true;
            for (const Sample* s : order) {
                out << (first_sample ? "[" : ",[");
                first_sample = false;
                if (s->stack < prof.stacks.size()) {
                    const auto& st = prof.stacks.at(s->stack);
                    for (size_t k = 0; k < st.size(); k++) {
                        if (k) out << ",";
                        out << st[k];
                    }
                }
                out << "]";
            }
            out << "],\n\"weights\":[";
            uint64_t last_ns = 0, sum_ns = 0;
            std::string weight = "0";
            for (size_t k = 0; k < order.size(); k++) {
                if (k) out << ",";
                if (order[k]->weight_ns != last_ns) {  // most samples weigh what the one before did
                    last_ns = order[k]->weight_ns;
                    weight = decimal_seconds(static_cast<int64_t>(last_ns));
                }
                out << weight;
                sum_ns += last_ns;
            }
            out << "]}";
            if (sum_ns > active_ns || index == 0) {  // the busiest profile opens first
                active_ns = sum_ns;
                active = index;
            }
            index++;
        }
    }
    if (index == 0) {
        // Idle target: speedscope rejects a file without profiles, so emit one empty profile
        // per seen process (or one for the whole run), spanning the run.
        const int64_t end = run.end_mono_ns > run.start_mono_ns ? rel(run.end_mono_ns) : 0;
        auto empty_profile = [&](const std::string& name) {
            sep();
            out << "{\"type\":\"sampled\",\"name\":" << jstr(name + " (no samples)")
                << ",\"unit\":\"seconds\",\"startValue\":0,\"endValue\":" << decimal_seconds(end)
                << ",\"samples\":[],\"weights\":[]}";
            index++;
        };
        for (const auto& [pid, p] : prof.processes) empty_profile(p.display_name() + labels_suffix(p));
        if (index == 0) empty_profile(file_name);
    }
    out << "],\n\"activeProfileIndex\":" << active << "}\n";
}

std::unique_ptr<Exporter> make_speedscope_exporter() {
    return std::make_unique<SpeedscopeExporter>();
}

}  // namespace pbp
