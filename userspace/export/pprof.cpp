// pprof's profile.proto (userspace/export/proto/profile.proto), gzip-compressed: what
// `go tool pprof`, Pyroscope, Parca, Grafana and Cloud Profiler read.
//
// - Sample types say what the values are. A cpu or gil mode run without off-CPU samples:
//   samples/count (1 per sample) and cpu/nanoseconds (the summed weight_ns), default cpu.
//   A wall mode run, or any profile with off-CPU samples: samples/count (either kind),
//   wall/nanoseconds (every weight: on- plus off-CPU), cpu/nanoseconds (the on-CPU samples'),
//   off_cpu/nanoseconds (the off-CPU samples', the intervals waited), default wall.
//   period_type cpu/nanoseconds, period = the sampling period.
//   time_nanos is the wall-clock start of the run, duration_nanos its length; comments say
//   the mode (and min-block in wall mode).
// - One Function per distinct (name, file) of the frame table (export/common.h's
//   FunctionTable; start_line = the smallest line sampled in it, at or after the real def
//   line, exact when the entry (RESUME, 3.11+) was sampled); one Location per frame-table
//   entry (a frame is name + file + sampled line), with one Line {function, line}, all in
//   mapping 1 ("python") marked as already symbolized. With --native (issue 17) a native
//   frame's location is in its library's mapping (one per library path) and a kernel
//   frame's in the "[kernel]" mapping; their functions are the symbol ("[k] name" for the
//   kernel) with the source file when debug information gave one (docs/native-frames.md).
//   Synthetic frames ("[truncated]", ...) are functions without a file name and lines 0.
// - system_name is left unset: pprof "demangles" a function whose system_name equals its name
//   and cuts anything between '<' and '>' out of it, so `<module>` would lose its name.
// - Samples are aggregated: one pprof Sample per (process, thread, stack) with the values
//   summed, location ids leaf first (pprof's order; our stacks are root first). Per-thread
//   identity lives in the labels of every sample: pid, tid (numbers), thread_name, process
//   (strings), ns_pid / ns_tid when they differ from the host ids, and the process's
//   container/pod labels as strings. Samples of one stack are split by GIL state and wait
//   reason: label gil ("held", "waiting", "neither", "n/a": not known or free-threaded),
//   written when the run is in wall or gil mode or any sample's GIL state is known, and
//   label wait ("sleep", "io", "gil", "runnable") on off-CPU samples, so
//   `-tagfocus gil=held` or `-tagfocus wait=io` select them. Per-sample timestamps are therefore not written
//   (pprof has no timestamp field; a per-sample "time" label would defeat the aggregation
//   and multiply the file size); the speedscope output keeps the timeline.
// - Ids start at 1 and string_table[0] is "". Output is deterministic for a given Profile.
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "export/common.h"
#include "export/exporter.h"
#include "profile.pb.h"

#ifndef PYBPFPROF_VERSION
#define PYBPFPROF_VERSION "unknown"
#endif

namespace pbp {

namespace {

namespace pp = perftools::profiles;

// s with every invalid UTF-8 sequence replaced by U+FFFD: string_table is a proto3 `string`,
// which protobuf refuses to parse (and warns about when writing) unless it is valid UTF-8.
std::string as_valid_utf8(const std::string& s) {
    std::string r;
    r.reserve(s.size());
    const auto* b = reinterpret_cast<const unsigned char*>(s.data());
    size_t n = s.size(), i = 0;
    while (i < n) {
        unsigned char c = b[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        bool ok = len && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) ok = (b[i + k] & 0xc0) == 0x80;
        if (ok && len > 1) {
            uint32_t cp = c & (0x7f >> len);
            for (size_t k = 1; k < len; k++) cp = (cp << 6) | (b[i + k] & 0x3f);
            static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
            ok = cp >= kMin[len] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
        }
        if (ok) {
            r.append(s, i, len);
            i += len;
        } else {
            r += "\xEF\xBF\xBD";
            i++;
        }
    }
    return r;
}

class StringTable {
public:
    explicit StringTable(pp::Profile& p) : p_(p) { id(""); }
    int64_t id(const std::string& raw) {
        std::string s = as_valid_utf8(raw);
        auto it = index_.find(s);
        if (it != index_.end()) return it->second;
        int64_t i = p_.string_table_size();
        p_.add_string_table(s);
        index_.emplace(std::move(s), i);
        return i;
    }

private:
    pp::Profile& p_;
    std::unordered_map<std::string, int64_t> index_;
};

class PprofExporter : public Exporter {
public:
    std::string name() const override { return "pprof"; }
    std::vector<std::string> extensions() const override { return {"pb.gz", "pprof"}; }
    std::string how_to_open(const std::string& path) const override {
        return "open it with: go tool pprof -http=: " + path +
               "  (or load it into Pyroscope, Parca or Grafana)";
    }
    void write(const Profile& profile, const ExportOptions& options, std::ostream& out) const override;
};

void PprofExporter::write(const Profile& prof, const ExportOptions&, std::ostream& out) const {
    const RunInfo& run = prof.run;
    const int64_t period = static_cast<int64_t>(sampling_period_ns(run));
    const bool wall = run.mode == ProfileMode::Wall || has_off_cpu(prof);
    bool gil_known = run.mode != ProfileMode::Cpu;
    for (const auto& [_, pr] : prof.processes)
        for (const auto& [__, t] : pr.threads)
            for (const Sample& s : t.samples) gil_known |= s.gil != GilState::NA;

    pp::Profile p;
    StringTable st(p);

    auto sample_type = [&](const char* type, const char* unit) {
        auto* t = p.add_sample_type();
        t->set_type(st.id(type));
        t->set_unit(st.id(unit));
    };
    sample_type("samples", "count");
    if (wall) sample_type("wall", "nanoseconds");
    sample_type("cpu", "nanoseconds");
    if (wall) sample_type("off_cpu", "nanoseconds");
    p.mutable_period_type()->set_type(st.id("cpu"));
    p.mutable_period_type()->set_unit(st.id("nanoseconds"));
    p.set_period(period);
    p.set_default_sample_type(st.id(wall ? "wall" : "cpu"));
    p.set_time_nanos(run.start_unix_ns);
    p.set_duration_nanos(run.end_mono_ns > run.start_mono_ns
                             ? static_cast<int64_t>(run.end_mono_ns - run.start_mono_ns)
                             : 0);

    p.add_comment(st.id(std::string("pybpfprof ") + PYBPFPROF_VERSION));
    if (!run.target.empty()) p.add_comment(st.id("target: " + run.target));
    if (!run.kernel.empty()) p.add_comment(st.id("kernel: " + run.kernel));
    if (run.rate_hz > 0) {
        char rate[32];
        std::snprintf(rate, sizeof rate, "%g", run.rate_hz);
        p.add_comment(st.id(std::string("rate: ") + rate + " Hz"));
    }
    p.add_comment(st.id(std::string("mode: ") + mode_name(run.mode)));
    if (run.mode == ProfileMode::Wall && run.min_block_ns)
        p.add_comment(st.id("min block: " + std::to_string(run.min_block_ns) + " ns"));
    if (run.lost) p.add_comment(st.id("lost samples: " + std::to_string(run.lost)));
    if (run.truncated)
        p.add_comment(st.id("truncated stacks: " + std::to_string(run.truncated)));

    const auto& frames = prof.frames.all();
    const FunctionTable functions(prof.frames);
    for (const Function& f : functions.all()) {  // ids start at 1
        auto* fn = p.add_function();
        fn->set_id(static_cast<uint64_t>(p.function_size()));
        fn->set_name(st.id(f.name));
        if (!f.file.empty()) fn->set_filename(st.id(f.file));
        if (f.first_line > 0) fn->set_start_line(f.first_line);
    }
    // Mapping 1 is Python's (and the synthetic markers'), marked as symbolized (functions,
    // files and lines known): pprof then neither tries to symbolize the locations nor warns
    // "Main binary filename not available"; its file name is what pprof's header shows as
    // "File:". Then one mapping per native library (its path) and one for the kernel
    // ("[kernel]"), in order of first appearance in the frame table, also marked as
    // symbolized (the names are known; files and lines when every frame of it had them), so
    // that pprof does not open the libraries of the machine it runs on to symbolize them.
    // Frames carry no addresses, so the mappings have no address range.
    auto add_mapping = [&](const std::string& file) {
        auto* m = p.add_mapping();
        m->set_id(static_cast<uint64_t>(p.mapping_size()));
        m->set_filename(st.id(file));
        m->set_has_functions(true);
        m->set_has_filenames(true);
        m->set_has_line_numbers(true);
        return m;
    };
    add_mapping("python");
    std::map<std::string, pp::Mapping*> library_mapping;
    std::vector<uint64_t> mapping_of(frames.size(), 1);
    for (size_t i = 0; i < frames.size(); i++) {
        const Frame& f = frames[i];
        if (f.kind == FrameKind::Python || f.synthetic) continue;
        const std::string lib = f.library.empty() ? std::string(f.kind == FrameKind::Kernel ? "[kernel]" : "[unknown]")
                                                  : f.library;
        auto [it, added] = library_mapping.emplace(lib, nullptr);
        if (added) it->second = add_mapping(lib);
        if (f.file.empty()) it->second->set_has_filenames(false);
        if (f.line <= 0) it->second->set_has_line_numbers(false);
        mapping_of[i] = it->second->id();
    }

    // Locations: frame-table index i is location id i + 1.
    for (size_t i = 0; i < frames.size(); i++) {
        auto* loc = p.add_location();
        loc->set_id(i + 1);
        loc->set_mapping_id(mapping_of[i]);
        auto* line = loc->add_line();
        line->set_function_id(functions.of_frame(static_cast<uint32_t>(i)) + 1);
        if (!frames[i].synthetic && frames[i].line > 0) line->set_line(frames[i].line);
    }

    // pprof drops samples without locations from some views (-raw, flame graphs) while
    // counting them in totals, so a sample whose stack is empty (the aggregator always
    // gives one, but a Profile may lack it) gets one synthetic frame: "[no stack]".
    uint64_t empty_loc = 0;
    auto empty_stack_location = [&]() {
        if (empty_loc) return empty_loc;
        auto* fn = p.add_function();
        fn->set_id(static_cast<uint64_t>(p.function_size()));
        fn->set_name(st.id("[no stack]"));
        auto* loc = p.add_location();
        empty_loc = static_cast<uint64_t>(frames.size()) + 1;
        loc->set_id(empty_loc);
        loc->set_mapping_id(1);
        loc->add_line()->set_function_id(fn->id());
        return empty_loc;
    };

    static const char* const kReserved[] = {"pid", "tid", "ns_pid", "ns_tid", "thread_name",
                                            "process", "gil", "wait"};
    for (const auto& [pid, pr] : prof.processes) {
        const std::string process = pr.display_name();
        for (const auto& [tid, t] : pr.threads) {
            if (t.samples.empty()) continue;
            std::vector<pp::Label> labels;
            auto num = [&](const std::string& k, int64_t v) {
                pp::Label l;
                l.set_key(st.id(k));
                l.set_num(v);
                labels.push_back(l);
            };
            // A string label's value cannot be "" (index 0 reads as a numeric label):
            // an unknown thread name is "?", an empty container/pod label is left out.
            auto str = [&](const std::string& k, const std::string& v) {
                if (v.empty()) return;
                pp::Label l;
                l.set_key(st.id(k));
                l.set_str(st.id(v));
                labels.push_back(l);
            };
            num("pid", pr.pid);
            num("tid", t.tid);
            if (pr.ns_pid && pr.ns_pid != pr.pid) num("ns_pid", pr.ns_pid);
            if (t.ns_tid && t.ns_tid != t.tid) num("ns_tid", t.ns_tid);
            str("thread_name", t.name.empty() ? std::string("?") : t.name);
            str("process", process);
            for (const auto& [k, v] : pr.labels) {
                bool clash = false;
                for (const char* r : kReserved) clash |= k == r;
                str(clash ? "label_" + k : k, v);
            }

            // One pprof sample per (stack, GIL state, wait reason), in that order: stable output.
            std::map<std::tuple<uint32_t, GilState, WaitReason>, StackTotal> totals;
            for (const Sample& smp : t.samples) totals[{smp.stack, smp.gil, smp.wait}].add(smp);
            for (const auto& [key, total] : totals) {
                const auto& [stack, gil, wait] = key;
                auto* s = p.add_sample();
                if (stack < prof.stacks.size()) {
                    const auto& root_first = prof.stacks.at(stack);
                    for (auto it = root_first.rbegin(); it != root_first.rend(); ++it)
                        if (*it < frames.size()) s->add_location_id(*it + 1);
                }
                if (s->location_id_size() == 0) s->add_location_id(empty_stack_location());
                s->add_value(static_cast<int64_t>(total.samples));
                if (wall) s->add_value(static_cast<int64_t>(total.weight_ns()));
                s->add_value(static_cast<int64_t>(total.cpu_ns));
                if (wall) s->add_value(static_cast<int64_t>(total.off_cpu_ns));
                for (const auto& l : labels) *s->add_label() = l;
                auto* gl = gil_known ? s->add_label() : nullptr;
                if (gl) {
                    gl->set_key(st.id("gil"));
                    gl->set_str(st.id(gil_name(gil)));
                }
                if (wait != WaitReason::None) {
                    auto* wl = s->add_label();
                    wl->set_key(st.id("wait"));
                    wl->set_str(st.id(wait_name(wait)));
                }
            }
        }
    }

    std::string bytes;
    if (!p.SerializeToString(&bytes)) throw std::runtime_error("pprof: cannot serialize the profile");
    const std::string gz = gzip(bytes);
    out.write(gz.data(), static_cast<std::streamsize>(gz.size()));
}

}  // namespace

std::unique_ptr<Exporter> make_pprof_exporter() { return std::make_unique<PprofExporter>(); }

}  // namespace pbp
