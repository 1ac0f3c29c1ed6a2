// The "pbp" exporter: pybpfprof's own, lossless profile format (export/raw.h,
// docs/raw-format.md), written as gzip-compressed JSON.
//
// Compactness: frames are columns (name, file index, line, synthetic) over a table of file
// names; a thread's samples are parallel arrays (timestamps as differences from the previous
// sample, stack indices, CPUs), and its kinds and weights a single number when every sample
// has the same (the usual on-CPU profile), else arrays too; so are, in version 3, their GIL
// states, wait reasons and aggregate marks.
// Exactness: every integer is written in full (JSON numbers up to 2^64 - 1); a string that
// is not valid UTF-8 (a command line or thread name is any bytes) is {"base64": "..."}; a
// map whose keys are not all valid UTF-8 is an array of [key, value] pairs.

#include <charconv>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "export/exporter.h"
#include "export/raw.h"
#include "export/common.h"

namespace pbp {

namespace {

using nlohmann::json;

// RFC 3629 UTF-8 (no surrogates, no overlong forms, at most U+10FFFF): what a JSON parser
// accepts in a string.
bool valid_utf8(std::string_view s) {
    const auto* b = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    for (size_t i = 0; i < n;) {
        unsigned char c = b[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        if (!len || i + len > n) return false;
        uint32_t cp = c & (0x7f >> len);
        for (size_t k = 1; k < len; k++) {
            if ((b[i + k] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (b[i + k] & 0x3f);
        }
        static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += len;
    }
    return true;
}

class Writer {
public:
    std::string text;
    // When set, the text is handed to it in pieces as it grows (the last byte is kept: key()
    // looks at it), so a long run is never all in memory twice.
    std::function<void(std::string_view)> sink;
    bool execd = false;    // version 6: processes' execd (implies kinds)
    bool kinds = false;    // version 5: frames' kind and library (implies buckets)
    bool buckets = false;  // version 4: samples' count and span_ns (implies wall)
    bool wall = false;  // version 3: the run's mode and min-block, samples' GIL state and wait
    void drain() {
        if (sink && text.size() > (1u << 20)) {
            sink(std::string_view(text.data(), text.size() - 1));
            text.erase(0, text.size() - 1);
        }
    }

    void raw(std::string_view s) { text.append(s); }
    void u(uint64_t v) {
        char buf[24];
        auto r = std::to_chars(buf, buf + sizeof buf, v);
        text.append(buf, r.ptr);
    }
    void i(int64_t v) {
        char buf[24];
        auto r = std::to_chars(buf, buf + sizeof buf, v);
        text.append(buf, r.ptr);
    }
    // A finite double as the shortest text that reads back as the same double ("99" for
    // 99.0: the reader takes an integer for a double field); null for NaN and infinities,
    // which JSON lacks (read back as NaN).
    void d(double v) {
        if (!std::isfinite(v)) return raw("null");
        char buf[32];
        auto r = std::to_chars(buf, buf + sizeof buf, v);
        text.append(buf, r.ptr);
    }
    void b(bool v) { raw(v ? "true" : "false"); }
    void str(const std::string& s) {
        if (valid_utf8(s)) {
            text += json(s).dump(-1, ' ', false, json::error_handler_t::strict);
        } else {
            raw("{\"base64\":\"");
            raw(base64(s));
            raw("\"}");
        }
    }
    void key(const char* k) {
        if (!text.empty() && text.back() != '{' && text.back() != '\n') raw(",");
        raw("\"");
        raw(k);
        raw("\":");
    }
    template <class V, class F>
    void map(const std::map<std::string, V>& m, F put_value) {
        bool keys_ok = true;
        for (const auto& [k, _] : m) keys_ok &= valid_utf8(k);
        raw(keys_ok ? "{" : "[");
        bool first = true;
        for (const auto& [k, v] : m) {
            if (!first) raw(",");
            first = false;
            if (keys_ok) {
                str(k);
                raw(":");
            } else {
                raw("[");
                str(k);
                raw(",");
            }
            put_value(v);
            if (!keys_ok) raw("]");
        }
        raw(keys_ok ? "}" : "]");
    }
    void labels(const std::map<std::string, std::string>& m) {
        map(m, [this](const std::string& v) { str(v); });
    }
    template <class T, class F>
    void array(const std::vector<T>& v, F put) {
        raw("[");
        for (size_t k = 0; k < v.size(); k++) {
            if (k) raw(",");
            put(v[k]);
            if ((k & 0xffff) == 0xffff) drain();
        }
        raw("]");
    }
    void run(const RunInfo& r);
};

void Writer::run(const RunInfo& r) {
    raw("{");
    key("target"), str(r.target);
    key("command"), array(r.command, [this](const std::string& s) { str(s); });
    key("start_mono_ns"), u(r.start_mono_ns);
    key("end_mono_ns"), u(r.end_mono_ns);
    key("start_unix_ns"), i(r.start_unix_ns);
    key("rate_hz"), d(r.rate_hz);
    key("period_ns"), u(r.period_ns);
    key("kernel"), str(r.kernel);
    key("host"), str(r.host);
    key("version"), str(r.version);
    key("lost"), u(r.lost);
    key("truncated"), u(r.truncated);
    key("unresolved"), map(r.unresolved, [this](uint64_t v) { u(v); });
    key("bpf_run_time_ns"), u(r.bpf_run_time_ns);
    key("bpf_run_cnt"), u(r.bpf_run_cnt);
    key("max_depth"), i(r.max_depth);
    key("bpf_loop"), b(r.bpf_loop);
    if (wall) {
        key("mode"), str(mode_name(r.mode));
        key("min_block_ns"), u(r.min_block_ns);
    }
    raw("}");
}

class RawExporter : public Exporter {
public:
    std::string name() const override { return "pbp"; }
    std::vector<std::string> extensions() const override { return {"pbp"}; }
    std::string how_to_open(const std::string& path) const override {
        return "merge it with others or turn it into any format: pybpfprof merge " + path + " ... -o report.html";
    }
    void write(const Profile& profile, const ExportOptions&, std::ostream& out) const override {
        write_raw(profile, out);
    }
};

// True when p has something only version 3 holds: a mode other than cpu, a min-block, or a
// sample with a GIL state, a wait reason or the aggregate mark.
bool needs_wall_fields(const Profile& p) {
    auto run = [](const RunInfo& r) { return r.mode != ProfileMode::Cpu || r.min_block_ns != 0; };
    if (run(p.run)) return true;
    for (const auto& m : p.merged_from)
        if (run(m.run)) return true;
    for (const auto& [_, pr] : p.processes)
        for (const auto& [__, t] : pr.threads)
            for (const Sample& s : t.samples)
                if (s.gil != GilState::NA || s.wait != WaitReason::None || s.aggregate) return true;
    return false;
}

// True when p has a bucket (a sample standing for older samples, Sample::span_ns): version 4.
bool needs_bucket_fields(const Profile& p) {
    for (const auto& [_, pr] : p.processes)
        for (const auto& [__, t] : pr.threads)
            for (const Sample& s : t.samples)
                if (s.span_ns != 0 || s.count != 1) return true;
    return false;
}

// True when p has a frame that is not a plain Python frame (a native or kernel frame, or a
// frame with a library): version 5.
bool needs_frame_kinds(const Profile& p) {
    for (const Frame& f : p.frames.all())
        if (f.kind != FrameKind::Python || !f.library.empty()) return true;
    return false;
}

// True when a process of p was replaced by an exec (ProcessProfile::execd): version 6.
bool needs_execd(const Profile& p) {
    for (const auto& [_, pr] : p.processes)
        if (pr.execd) return true;
    return false;
}

void write_json(const Profile& p, Writer& w) {
    w.raw("{\"format\":\"");
    w.raw(kRawFormatName);
    // The oldest layout that holds everything: version 6 for a profile with a process replaced
    // by an exec, 5 for one with native or kernel frames, 4 for one with buckets, 3 for one with wall/GIL fields, 2 for one with task spans,
    // else 1 (so an older pybpfprof reads what it can read whole). Each version holds all the
    // fields of the ones before it.
    w.execd = needs_execd(p);
    w.kinds = w.execd || needs_frame_kinds(p);
    w.buckets = w.kinds || needs_bucket_fields(p);
    w.wall = w.buckets || needs_wall_fields(p);
    w.raw("\",\"version\":");
    w.i(w.execd ? 6 : w.kinds ? 5 : w.buckets ? 4 : w.wall ? 3 : p.tasks.empty() ? 1 : 2);
    w.raw(",\n");
    w.key("run"), w.run(p.run);
    w.raw(",\n");
    w.key("merged_from");
    w.raw("[");
    for (size_t k = 0; k < p.merged_from.size(); k++) {
        w.raw(k ? ",\n{" : "\n{");
        w.key("labels"), w.labels(p.merged_from[k].labels);
        w.key("run"), w.run(p.merged_from[k].run);
        w.raw("}");
    }
    w.raw("],\n");

    // Frames: columns over a table of file names (in version 5 the libraries' paths too,
    // each once: a native library's path repeats in every frame of it).
    std::map<std::string, uint32_t> file_index;
    std::vector<const std::string*> files;
    auto add_file = [&](const std::string& name) {
        auto [it, added] = file_index.emplace(name, static_cast<uint32_t>(files.size()));
        if (added) files.push_back(&it->first);
    };
    for (const Frame& f : p.frames.all()) {
        add_file(f.file);
        if (w.kinds) add_file(f.library);
    }
    w.key("files"), w.array(files, [&](const std::string* s) { w.str(*s); });
    w.raw(",\n");
    const auto& frames = p.frames.all();
    w.key("frames");
    w.raw("{");
    w.key("name"), w.array(frames, [&](const Frame& f) { w.str(f.name); });
    w.key("file"), w.array(frames, [&](const Frame& f) { w.u(file_index.at(f.file)); });
    w.key("line"), w.array(frames, [&](const Frame& f) { w.i(f.line); });
    w.key("synthetic"), w.array(frames, [&](const Frame& f) { w.b(f.synthetic); });
    if (w.kinds) {
        w.key("kind"), w.array(frames, [&](const Frame& f) { w.u(static_cast<uint64_t>(f.kind)); });
        w.key("library"), w.array(frames, [&](const Frame& f) { w.u(file_index.at(f.library)); });
    }
    w.raw("},\n");
    w.key("stacks");
    w.raw("[");
    for (uint32_t s = 0; s < p.stacks.size(); s++) {
        if (s) w.raw(",");
        w.array(p.stacks.at(s), [&](uint32_t f) { w.u(f); });
    }
    w.raw("],\n");

    w.key("processes");
    w.raw("[");
    bool first_proc = true;
    for (const auto& [key, pr] : p.processes) {
        w.raw(first_proc ? "\n{" : ",\n{");
        first_proc = false;
        w.key("key"), w.u(key);
        w.key("pid"), w.u(pr.pid);
        w.key("ns_pid"), w.u(pr.ns_pid);
        w.key("comm"), w.str(pr.comm);
        w.key("cmdline"), w.str(pr.cmdline);
        w.key("exe"), w.str(pr.exe);
        w.key("python"), w.str(pr.python);
        w.key("first_sample_ns"), w.u(pr.first_sample_ns);
        w.key("last_sample_ns"), w.u(pr.last_sample_ns);
        w.key("exited"), w.b(pr.exited);
        if (w.execd) w.key("execd"), w.b(pr.execd);
        w.key("labels"), w.labels(pr.labels);
        w.key("resources");
        w.raw("{");
        w.key("mono_ns"), w.array(pr.resources, [&](const ResourcePoint& r) { w.u(r.mono_ns); });
        w.key("cpu_pct"), w.array(pr.resources, [&](const ResourcePoint& r) { w.d(r.cpu_pct); });
        w.key("rss_bytes"), w.array(pr.resources, [&](const ResourcePoint& r) { w.u(r.rss_bytes); });
        w.raw("}");
        w.key("threads");
        w.raw("[");
        bool first_thread = true;
        for (const auto& [tid, t] : pr.threads) {
            w.raw(first_thread ? "\n{" : ",\n{");
            first_thread = false;
            w.key("tid"), w.u(t.tid);
            w.key("ns_tid"), w.u(t.ns_tid);
            w.key("name"), w.str(t.name);
            const auto& v = t.samples;
            w.key("ts_ns");
            w.raw("[");
            uint64_t prev = 0;
            for (size_t k = 0; k < v.size(); k++) {
                if (k) {
                    w.raw(",");
                    w.i(static_cast<int64_t>(v[k].ts_ns - prev));  // wraps: read back exactly
                } else {
                    w.u(v[k].ts_ns);
                }
                prev = v[k].ts_ns;
                if ((k & 0xffff) == 0xffff) w.drain();
            }
            w.raw("]");
            w.key("stack"), w.array(v, [&](const Sample& s) { w.u(s.stack); });
            w.key("cpu"), w.array(v, [&](const Sample& s) { w.u(s.cpu); });
            bool one_kind = true, one_weight = true;
            for (const Sample& s : v) {
                one_kind &= s.kind == v.front().kind;
                one_weight &= s.weight_ns == v.front().weight_ns;
            }
            w.key("kind");
            if (one_kind) w.u(v.empty() ? static_cast<uint64_t>(SampleKind::Cpu) : static_cast<uint64_t>(v.front().kind));
            else w.array(v, [&](const Sample& s) { w.u(static_cast<uint64_t>(s.kind)); });
            w.key("weight_ns");
            if (one_weight) w.u(v.empty() ? 0 : v.front().weight_ns);
            else w.array(v, [&](const Sample& s) { w.u(s.weight_ns); });
            if (w.wall) {
                // Like kind: one number when every sample has the same, else a column.
                auto column = [&](const char* name, auto get) {
                    bool one = true;
                    for (const Sample& s : v) one &= get(s) == get(v.front());
                    w.key(name);
                    if (one) w.u(v.empty() ? 0 : get(v.front()));
                    else w.array(v, [&](const Sample& s) { w.u(get(s)); });
                };
                column("gil", [](const Sample& s) { return static_cast<uint64_t>(s.gil); });
                column("wait", [](const Sample& s) { return static_cast<uint64_t>(s.wait); });
                column("aggregate", [](const Sample& s) { return static_cast<uint64_t>(s.aggregate); });
                if (w.buckets) {
                    column("count", [](const Sample& s) { return static_cast<uint64_t>(s.count); });
                    column("span_ns", [](const Sample& s) { return s.span_ns; });
                }
            }
            w.raw("}");
            w.drain();
        }
        w.raw("]}");
    }
    w.raw("]");
    // Task spans (engine/tasks.h), when the profile has them: columns, the texts over tables.
    if (!p.tasks.empty()) {
        w.raw(",\n");
        std::map<std::string, uint32_t> text_index;
        std::vector<const std::string*> texts;
        auto text_of = [&](const std::string& t) {
            auto [it, added] = text_index.emplace(t, static_cast<uint32_t>(texts.size()));
            if (added) texts.push_back(&it->first);
            return it->second;
        };
        std::vector<uint32_t> key(p.tasks.size()), prefix(p.tasks.size()), action(p.tasks.size());
        for (size_t k = 0; k < p.tasks.size(); k++) {
            key[k] = text_of(p.tasks[k].key);
            prefix[k] = text_of(p.tasks[k].prefix);
            action[k] = text_of(p.tasks[k].action);
        }
        const auto& t = p.tasks;
        w.key("tasks");
        w.raw("{");
        w.key("texts"), w.array(texts, [&](const std::string* x) { w.str(*x); });
        w.key("process"), w.array(t, [&](const TaskSpan& x) { w.u(x.process); });
        w.key("tid"), w.array(t, [&](const TaskSpan& x) { w.u(x.tid); });
        w.key("start_ns"), w.array(t, [&](const TaskSpan& x) { w.u(x.start_ns); });
        w.key("stop_ns"), w.array(t, [&](const TaskSpan& x) { w.u(x.stop_ns); });
        w.key("key"), w.array(key, [&](uint32_t x) { w.u(x); });
        w.key("prefix"), w.array(prefix, [&](uint32_t x) { w.u(x); });
        w.key("action"), w.array(action, [&](uint32_t x) { w.u(x); });
        w.raw("}");
    }
    w.raw("}\n");
}

}  // namespace

std::string raw_json(const Profile& p) {
    Writer w;
    write_json(p, w);
    return std::move(w.text);
}

void write_raw(const Profile& p, std::ostream& out) {
    GzipStream gz(out);
    Writer w;
    w.sink = [&gz](std::string_view piece) { gz.write(piece.data(), static_cast<std::streamsize>(piece.size())); };
    write_json(p, w);
    gz.write(w.text.data(), static_cast<std::streamsize>(w.text.size()));
    gz.finish();
}

std::unique_ptr<Exporter> make_raw_exporter() { return std::make_unique<RawExporter>(); }

}  // namespace pbp
