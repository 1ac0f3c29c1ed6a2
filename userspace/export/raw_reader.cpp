// The reader of pybpfprof's own format (export/raw.h, docs/raw-format.md). Its input comes
// from other machines and other versions of pybpfprof, so it trusts nothing: the gzip
// stream is inflated up to a limit, the JSON parsed by the strict iterative parser the
// agent uses for requests (no duplicate keys, bounded depth), every field must be there
// with its type and range, no unknown field is taken (a newer layout bumps the version),
// and every index is checked against its table before it is used.
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include "agent/protocol.h"
#include "engine/tasks.h"
#include "engine/tasks.h"
#include "export/raw.h"

namespace pbp {

namespace {

using nlohmann::json;

constexpr size_t kMaxDepth = 8;  // root{processes[{labels[[k,{"base64"}]]}]}: 6 deep

// What read_raw throws internally: the failure and its one-line message.
struct Bad {
    RawFailure failure;
    std::string message;
};

[[noreturn]] void bad(const std::string& message, RawFailure f = RawFailure::Invalid) { throw Bad{f, message}; }

// A value for a message: its JSON text, cut short.
std::string shown(const json& v) {
    std::string s = v.dump(-1, ' ', true, json::error_handler_t::replace);
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
}
std::string got(const json& v) { return " (got " + shown(v) + ")"; }

std::string idx(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// ---- gzip ---------------------------------------------------------------------------

bool is_gzip(std::string_view d) { return d.size() >= 2 && uint8_t(d[0]) == 0x1f && uint8_t(d[1]) == 0x8b; }

std::string gunzip(std::string_view in, size_t max_bytes) {
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 16) != Z_OK) bad("cannot start zlib to decompress the file");
    std::string out;
    char buf[1 << 16];
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    size_t left = in.size();
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        if (zs.avail_in == 0 && left) {
            uInt n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
            zs.avail_in = n;
            left -= n;
        }
        zs.next_out = reinterpret_cast<Bytef*>(buf);
        zs.avail_out = sizeof buf;
        rc = inflate(&zs, Z_NO_FLUSH);
        const size_t produced = sizeof buf - zs.avail_out;
        if (rc != Z_OK && rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && produced)) {
            const bool truncated = rc == Z_BUF_ERROR && zs.avail_in == 0 && left == 0;
            std::string why = zs.msg ? zs.msg : "error " + std::to_string(rc);
            inflateEnd(&zs);
            bad(truncated ? "the file is truncated (the gzip data ends early)" : "the gzip data is corrupt (" + why + ")");
        }
        if (out.size() + produced > max_bytes) {
            inflateEnd(&zs);
            bad("the profile is larger than " + std::to_string(max_bytes >> 20) + " MiB once decompressed",
                RawFailure::TooLarge);
        }
        out.append(buf, produced);
    }
    const bool trailing = zs.avail_in != 0 || left != 0;
    inflateEnd(&zs);
    if (trailing) bad("bytes follow the gzip data: the file is corrupt or two files were joined");
    return out;
}

// ---- what a file that is not ours is -------------------------------------------------

std::string_view trim_left(std::string_view s) {
    while (!s.empty() && (s[0] == ' ' || s[0] == '\n' || s[0] == '\r' || s[0] == '\t')) s.remove_prefix(1);
    return s;
}

bool starts_with_ci(std::string_view s, std::string_view p) {
    if (s.size() < p.size()) return false;
    for (size_t i = 0; i < p.size(); i++)
        if (tolower(static_cast<unsigned char>(s[i])) != p[i]) return false;
    return true;
}

// The kind of a text that is not JSON.
std::string not_json_kind(std::string_view text, bool was_gzip) {
    std::string_view t = trim_left(text);
    if (starts_with_ci(t, "<!doctype html") || starts_with_ci(t, "<html")) return "an HTML file (a report?)";
    // Folded stacks: "frame;frame;frame COUNT" lines, after the comment that states the unit
    // of a weighted file (export/collapsed.cpp).
    if (t.substr(0, 30) == "# pybpfprof folded stacks: val") return "folded (collapsed) stacks";
    std::string_view line = t.substr(0, t.find('\n'));
    if (!line.empty() && line.find(';') != std::string_view::npos) {
        size_t sp = line.rfind(' ');
        if (sp != std::string_view::npos && sp + 1 < line.size() &&
            std::all_of(line.begin() + static_cast<long>(sp) + 1, line.end(),
                        [](char c) { return c >= '0' && c <= '9'; }))
            return "folded (collapsed) stacks";
    }
    if (was_gzip) return "gzip-compressed data that is not JSON (a pprof profile?)";
    return "not JSON";
}

// ---- fields -------------------------------------------------------------------------

const json& field(const json& obj, const char* key, const std::string& path) {
    auto it = obj.find(key);
    if (it == obj.end()) bad(path + "." + key + " is missing");
    return *it;
}

void only_fields(const json& obj, std::initializer_list<const char*> keys, const std::string& path) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
        const std::string& k = it.key();
        if (std::none_of(keys.begin(), keys.end(), [&k](const char* x) { return k == x; }))
            bad(path + ": unknown field " + json(k).dump(-1, ' ', true, json::error_handler_t::replace) +
                " (a newer pybpfprof's? this one reads format version " + std::to_string(kRawFormatVersion) + ")");
    }
}

const json& object(const json& j, const std::string& path) {
    if (!j.is_object()) bad(path + " must be an object" + got(j));
    return j;
}

const json::array_t& array(const json& j, const std::string& path) {
    if (!j.is_array()) bad(path + " must be an array" + got(j));
    return j.get_ref<const json::array_t&>();
}

// A whole number in [0, max]; false (no throw) when j is not one.
bool as_u64(const json& j, uint64_t max, uint64_t& out) {
    if (j.is_number_unsigned()) out = j.get<uint64_t>();
    else if (j.is_number_integer() && j.get<int64_t>() >= 0) out = static_cast<uint64_t>(j.get<int64_t>());
    else return false;
    return out <= max;
}

uint64_t u64(const json& j, const std::string& path, uint64_t max = std::numeric_limits<uint64_t>::max()) {
    uint64_t v = 0;
    if (!as_u64(j, max, v)) bad(path + " must be a whole number from 0 to " + std::to_string(max) + got(j));
    return v;
}

int64_t i64(const json& j, const std::string& path, int64_t lo = std::numeric_limits<int64_t>::min(),
            int64_t hi = std::numeric_limits<int64_t>::max()) {
    int64_t v = 0;
    bool ok = false;
    if (j.is_number_integer() && !j.is_number_unsigned()) v = j.get<int64_t>(), ok = true;
    else if (j.is_number_unsigned() && j.get<uint64_t>() <= static_cast<uint64_t>(hi)) v = static_cast<int64_t>(j.get<uint64_t>()), ok = true;
    if (!ok || v < lo || v > hi)
        bad(path + " must be a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) + got(j));
    return v;
}

uint32_t u32(const json& j, const std::string& path) {
    return static_cast<uint32_t>(u64(j, path, std::numeric_limits<uint32_t>::max()));
}

double f64(const json& j, const std::string& path) {
    if (j.is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (!j.is_number()) bad(path + " must be a number" + got(j));
    return j.get<double>();
}

bool boolean(const json& j, const std::string& path) {
    if (!j.is_boolean()) bad(path + " must be true or false" + got(j));
    return j.get<bool>();
}

bool unbase64(std::string_view in, std::string& out) {
    if (in.size() % 4) return false;
    out.clear();
    out.reserve(in.size() / 4 * 3);
    auto val = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    for (size_t i = 0; i < in.size(); i += 4) {
        const bool last = i + 4 == in.size();
        const int pad = last ? (in[i + 3] == '=') + (in[i + 2] == '=') : 0;
        if (pad == 1 && in[i + 2] == '=') return false;  // "x=y=" is not base64
        int v[4];
        for (int k = 0; k < 4; k++) {
            v[k] = k >= 4 - pad ? 0 : val(in[i + static_cast<size_t>(k)]);
            if (v[k] < 0) return false;
        }
        uint32_t n = static_cast<uint32_t>(v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3]);
        out.push_back(static_cast<char>(n >> 16));
        if (pad < 2) out.push_back(static_cast<char>((n >> 8) & 0xff));
        if (pad < 1) out.push_back(static_cast<char>(n & 0xff));
    }
    return true;
}

// A string: a JSON string, or {"base64": "..."} for bytes that are not UTF-8.
std::string str(const json& j, const std::string& path) {
    if (j.is_string()) return j.get<std::string>();
    if (j.is_object() && j.size() == 1 && j.contains("base64") && j["base64"].is_string()) {
        std::string out;
        if (!unbase64(j["base64"].get_ref<const std::string&>(), out)) bad(path + ".base64 is not base64" + got(j));
        return out;
    }
    bad(path + " must be a string (or {\"base64\": \"...\"})" + got(j));
}

// A map: an object, or an array of [key, value] pairs (keys that are not UTF-8).
template <class V, class F>
std::map<std::string, V> str_map(const json& j, const std::string& path, F value) {
    std::map<std::string, V> m;
    if (j.is_object()) {
        for (const auto& [k, v] : j.items()) m.emplace(k, value(v, path + "." + k));
        return m;
    }
    if (!j.is_array()) bad(path + " must be an object (or an array of [key, value] pairs)" + got(j));
    const auto& a = j.get_ref<const json::array_t&>();
    for (size_t i = 0; i < a.size(); i++) {
        const std::string p = idx(path, i);
        if (!a[i].is_array() || a[i].size() != 2) bad(p + " must be a [key, value] pair" + got(a[i]));
        std::string k = str(a[i][0], p + "[0]");
        if (!m.emplace(k, value(a[i][1], p + "[1]")).second) bad(p + ": key " + json(k).dump(-1, ' ', true, json::error_handler_t::replace) + " repeats");
    }
    return m;
}

std::map<std::string, std::string> labels(const json& j, const std::string& path) {
    return str_map<std::string>(j, path, [](const json& v, const std::string& p) { return str(v, p); });
}

RunInfo run_info(const json& j, const std::string& path, uint64_t version) {
    object(j, path);
    if (version >= 3)
        only_fields(j,
                    {"target", "command", "start_mono_ns", "end_mono_ns", "start_unix_ns", "rate_hz", "period_ns",
                     "kernel", "host", "version", "lost", "truncated", "unresolved", "bpf_run_time_ns", "bpf_run_cnt",
                     "max_depth", "bpf_loop", "mode", "min_block_ns"},
                    path);
    else
        only_fields(j,
                    {"target", "command", "start_mono_ns", "end_mono_ns", "start_unix_ns", "rate_hz", "period_ns",
                     "kernel", "host", "version", "lost", "truncated", "unresolved", "bpf_run_time_ns", "bpf_run_cnt",
                     "max_depth", "bpf_loop"},
                    path);
    auto f = [&](const char* k) -> const json& { return field(j, k, path); };
    auto p = [&](const char* k) { return path + "." + k; };
    RunInfo r;
    r.target = str(f("target"), p("target"));
    const auto& cmd = array(f("command"), p("command"));
    for (size_t i = 0; i < cmd.size(); i++) r.command.push_back(str(cmd[i], idx(p("command"), i)));
    r.start_mono_ns = u64(f("start_mono_ns"), p("start_mono_ns"));
    r.end_mono_ns = u64(f("end_mono_ns"), p("end_mono_ns"));
    r.start_unix_ns = i64(f("start_unix_ns"), p("start_unix_ns"));
    r.rate_hz = f64(f("rate_hz"), p("rate_hz"));
    r.period_ns = u64(f("period_ns"), p("period_ns"));
    r.kernel = str(f("kernel"), p("kernel"));
    r.host = str(f("host"), p("host"));
    r.version = str(f("version"), p("version"));
    r.lost = u64(f("lost"), p("lost"));
    r.truncated = u64(f("truncated"), p("truncated"));
    r.unresolved = str_map<uint64_t>(f("unresolved"), p("unresolved"),
                                     [](const json& v, const std::string& q) { return u64(v, q); });
    r.bpf_run_time_ns = u64(f("bpf_run_time_ns"), p("bpf_run_time_ns"));
    r.bpf_run_cnt = u64(f("bpf_run_cnt"), p("bpf_run_cnt"));
    r.max_depth = static_cast<int>(i64(f("max_depth"), p("max_depth"), std::numeric_limits<int>::min(),
                                       std::numeric_limits<int>::max()));
    r.bpf_loop = boolean(f("bpf_loop"), p("bpf_loop"));
    if (version >= 3) {  // older files are cpu mode runs
        const json& m = f("mode");
        if (!m.is_string() || !parse_mode(m.get_ref<const std::string&>(), r.mode))
            bad(p("mode") + " must be \"cpu\", \"wall\" or \"gil\"" + got(m));
        r.min_block_ns = u64(f("min_block_ns"), p("min_block_ns"));
    }
    return r;
}

// A column of a thread's samples: an array of n values, or one number for all of them
// (allowed when 'scalar_ok').
const json::array_t* column(const json& j, size_t n, bool scalar_ok, const std::string& path) {
    if (scalar_ok && j.is_number()) return nullptr;
    const auto& a = array(j, path);
    if (a.size() != n)
        bad(path + " has " + std::to_string(a.size()) + " values, ts_ns " + std::to_string(n) +
            ": a thread's sample columns must be as long as each other");
    return &a;
}

void thread_samples(const json& t, ThreadProfile& out, size_t nstacks, const std::string& path, uint64_t version) {
    const std::string ts_path = path + ".ts_ns";
    const auto& ts = array(field(t, "ts_ns", path), ts_path);
    const size_t n = ts.size();
    const auto* stack = column(field(t, "stack", path), n, false, path + ".stack");
    const auto* cpu = column(field(t, "cpu", path), n, false, path + ".cpu");
    const json& kind_j = field(t, "kind", path);
    const json& weight_j = field(t, "weight_ns", path);
    const auto* kind = column(kind_j, n, true, path + ".kind");
    const auto* weight = column(weight_j, n, true, path + ".weight_ns");
    auto kind_of = [&](const json& v, const std::string& p) {
        uint64_t k = 0;
        if (!as_u64(v, 2, k) || k < 1) bad(p + " must be 1 (on CPU) or 2 (off CPU)" + got(v));
        return static_cast<SampleKind>(k);
    };
    const SampleKind one_kind = kind ? SampleKind::Cpu : kind_of(kind_j, path + ".kind");
    const uint64_t one_weight = weight ? 0 : u64(weight_j, path + ".weight_ns");
    out.samples.resize(n);
    uint64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        Sample& s = out.samples[i];
        uint64_t v = 0;
        if (i == 0) {
            if (!as_u64(ts[0], std::numeric_limits<uint64_t>::max(), v)) s.ts_ns = u64(ts[0], idx(ts_path, 0));
            s.ts_ns = v;
        } else {
            const json& d = ts[i];
            if (d.is_number_integer() && !d.is_number_unsigned()) s.ts_ns = prev + static_cast<uint64_t>(d.get<int64_t>());
            else if (d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()))
                s.ts_ns = prev + d.get<uint64_t>();
            else
                i64(d, idx(ts_path, i));  // throws with the message
        }
        prev = s.ts_ns;
        if (!as_u64((*stack)[i], std::numeric_limits<uint32_t>::max(), v) || v >= nstacks) {
            const std::string p = idx(path + ".stack", i);
            if (!as_u64((*stack)[i], std::numeric_limits<uint64_t>::max(), v)) u32((*stack)[i], p);
            bad(p + ": " + std::to_string(v) + " is not a stack index (the file has " + std::to_string(nstacks) +
                " stacks)");
        }
        s.stack = static_cast<uint32_t>(v);
        if (!as_u64((*cpu)[i], std::numeric_limits<uint16_t>::max(), v)) u64((*cpu)[i], idx(path + ".cpu", i), 65535);
        s.cpu = static_cast<uint16_t>(v);
        s.kind = kind ? kind_of((*kind)[i], idx(path + ".kind", i)) : one_kind;
        if (weight) {
            if (!as_u64((*weight)[i], std::numeric_limits<uint64_t>::max(), v)) u64((*weight)[i], idx(path + ".weight_ns", i));
            s.weight_ns = v;
        } else {
            s.weight_ns = one_weight;
        }
    }
    if (version < 3) return;  // older files know no GIL state nor wait: n/a, none
    // gil, wait and aggregate: one number for every sample, or a column.
    auto small_column = [&](const char* name, uint64_t max, const char* what, auto set) {
        const std::string cp = path + "." + name;
        const json& j = field(t, name, path);
        const auto* col = column(j, n, true, cp);
        auto value = [&](const json& v, const std::string& p) {
            uint64_t k = 0;
            if (!as_u64(v, max, k)) bad(p + " must be " + what + got(v));
            return k;
        };
        if (!col) {
            const uint64_t one = value(j, cp);
            for (Sample& s : out.samples) set(s, one);
        } else {
            for (size_t i = 0; i < n; i++) set(out.samples[i], value((*col)[i], idx(cp, i)));
        }
    };
    small_column("gil", 3, "0 (n/a), 1 (held), 2 (waiting) or 3 (neither)",
                 [](Sample& s, uint64_t v) { s.gil = static_cast<GilState>(v); });
    small_column("wait", 4, "0 (none), 1 (sleep), 2 (I/O), 3 (GIL) or 4 (runnable)",
                 [](Sample& s, uint64_t v) { s.wait = static_cast<WaitReason>(v); });
    small_column("aggregate", 1, "0 or 1", [](Sample& s, uint64_t v) { s.aggregate = v != 0; });
    if (version < 4) return;  // older files have no buckets: every sample is one, at its time
    small_column("count", std::numeric_limits<uint32_t>::max(), "a number of samples (0 to 2^32 - 1)",
                 [](Sample& s, uint64_t v) { s.count = static_cast<uint32_t>(v); });
    small_column("span_ns", std::numeric_limits<uint64_t>::max(), "a span in ns",
                 [](Sample& s, uint64_t v) { s.span_ns = v; });
}

ProcessProfile process(const json& j, size_t nstacks, const std::string& path, uint32_t& key, uint64_t version) {
    object(j, path);
    if (version >= 6)  // adds execd
        only_fields(j,
                    {"key", "pid", "ns_pid", "comm", "cmdline", "exe", "python", "first_sample_ns", "last_sample_ns",
                     "exited", "execd", "labels", "resources", "threads"},
                    path);
    else
        only_fields(j,
                    {"key", "pid", "ns_pid", "comm", "cmdline", "exe", "python", "first_sample_ns", "last_sample_ns",
                     "exited", "labels", "resources", "threads"},
                    path);
    auto f = [&](const char* k) -> const json& { return field(j, k, path); };
    auto p = [&](const char* k) { return path + "." + k; };
    ProcessProfile pr;
    key = u32(f("key"), p("key"));
    pr.pid = u32(f("pid"), p("pid"));
    pr.ns_pid = u32(f("ns_pid"), p("ns_pid"));
    pr.comm = str(f("comm"), p("comm"));
    pr.cmdline = str(f("cmdline"), p("cmdline"));
    pr.exe = str(f("exe"), p("exe"));
    pr.python = str(f("python"), p("python"));
    pr.first_sample_ns = u64(f("first_sample_ns"), p("first_sample_ns"));
    pr.last_sample_ns = u64(f("last_sample_ns"), p("last_sample_ns"));
    pr.exited = boolean(f("exited"), p("exited"));
    if (version >= 6) pr.execd = boolean(f("execd"), p("execd"));
    pr.labels = labels(f("labels"), p("labels"));

    const std::string rp = p("resources");
    const json& res = object(f("resources"), rp);
    only_fields(res, {"mono_ns", "cpu_pct", "rss_bytes"}, rp);
    const auto& mono = array(field(res, "mono_ns", rp), rp + ".mono_ns");
    const auto& cpu = array(field(res, "cpu_pct", rp), rp + ".cpu_pct");
    const auto& rss = array(field(res, "rss_bytes", rp), rp + ".rss_bytes");
    if (cpu.size() != mono.size() || rss.size() != mono.size())
        bad(rp + ": mono_ns, cpu_pct and rss_bytes must be as long as each other (" + std::to_string(mono.size()) +
            ", " + std::to_string(cpu.size()) + ", " + std::to_string(rss.size()) + ")");
    pr.resources.resize(mono.size());
    for (size_t i = 0; i < mono.size(); i++) {
        pr.resources[i].mono_ns = u64(mono[i], idx(rp + ".mono_ns", i));
        pr.resources[i].cpu_pct = f64(cpu[i], idx(rp + ".cpu_pct", i));
        pr.resources[i].rss_bytes = u64(rss[i], idx(rp + ".rss_bytes", i));
    }

    const auto& threads = array(f("threads"), p("threads"));
    for (size_t i = 0; i < threads.size(); i++) {
        const std::string tp = idx(p("threads"), i);
        const json& t = object(threads[i], tp);
        if (version >= 4)
            only_fields(t,
                        {"tid", "ns_tid", "name", "ts_ns", "stack", "cpu", "kind", "weight_ns", "gil", "wait", "aggregate",
                         "count", "span_ns"},
                        tp);
        else if (version >= 3)
            only_fields(t, {"tid", "ns_tid", "name", "ts_ns", "stack", "cpu", "kind", "weight_ns", "gil", "wait", "aggregate"},
                        tp);
        else
            only_fields(t, {"tid", "ns_tid", "name", "ts_ns", "stack", "cpu", "kind", "weight_ns"}, tp);
        ThreadProfile th;
        th.tid = u32(field(t, "tid", tp), tp + ".tid");
        th.ns_tid = u32(field(t, "ns_tid", tp), tp + ".ns_tid");
        th.name = str(field(t, "name", tp), tp + ".name");
        thread_samples(t, th, nstacks, tp, version);
        const uint32_t tid = th.tid;
        if (!pr.threads.emplace(tid, std::move(th)).second)
            bad(tp + ".tid: thread " + std::to_string(tid) + " appears twice in the process");
    }
    return pr;
}

// The task spans (optional: a profile without tasks has no "tasks"): columns as long as
// each other, texts by index, each span's process one of the file's, stop >= start.
void tasks(const json& j, Profile& out) {
    const std::string path = "tasks";
    object(j, path);
    only_fields(j, {"texts", "process", "tid", "start_ns", "stop_ns", "key", "prefix", "action"}, path);
    const auto& texts_j = array(field(j, "texts", path), "tasks.texts");
    std::vector<std::string> texts;
    texts.reserve(texts_j.size());
    for (size_t i = 0; i < texts_j.size(); i++) texts.push_back(str(texts_j[i], idx("tasks.texts", i)));
    const auto& proc = array(field(j, "process", path), "tasks.process");
    const size_t n = proc.size();
    auto col = [&](const char* k) -> const json::array_t& {
        const std::string cp = path + "." + k;
        const auto& a = array(field(j, k, path), cp);
        if (a.size() != n)
            bad(cp + " has " + std::to_string(a.size()) + " values, tasks.process " + std::to_string(n) +
                ": the task columns must be as long as each other");
        return a;
    };
    const auto& tid = col("tid");
    const auto& start = col("start_ns");
    const auto& stop = col("stop_ns");
    const auto& key = col("key");
    const auto& prefix = col("prefix");
    const auto& action = col("action");
    auto text = [&](const json& v, const std::string& p) -> const std::string& {
        uint64_t t = u64(v, p);
        if (t >= texts.size())
            bad(p + ": " + std::to_string(t) + " is not a text index (tasks.texts has " + std::to_string(texts.size()) +
                ")");
        return texts[t];
    };
    out.tasks.reserve(n);
    for (size_t i = 0; i < n; i++) {
        TaskSpan t;
        t.process = u32(proc[i], idx("tasks.process", i));
        if (!out.processes.count(t.process))
            bad(idx("tasks.process", i) + ": " + std::to_string(t.process) + " is not the key of a process of the file");
        t.tid = u32(tid[i], idx("tasks.tid", i));
        t.start_ns = u64(start[i], idx("tasks.start_ns", i));
        t.stop_ns = u64(stop[i], idx("tasks.stop_ns", i));
        if (t.stop_ns < t.start_ns) bad(idx("tasks", i) + " stops before it starts");
        t.key = text(key[i], idx("tasks.key", i));
        t.prefix = text(prefix[i], idx("tasks.prefix", i));
        t.action = text(action[i], idx("tasks.action", i));
        out.tasks.push_back(std::move(t));
    }
    const auto before = out.tasks;
    sort_tasks(out);
    if (out.tasks != before) bad("tasks: the spans are not sorted by (process, tid, start_ns, stop_ns)");
}

void read_profile(const json& root, uint64_t version, Profile& out) {
    const std::string path = "profile";
    object(root, "the file");
    if (version >= 2)
        only_fields(root, {"format", "version", "run", "merged_from", "files", "frames", "stacks", "processes", "tasks"},
                    path);
    else
        only_fields(root, {"format", "version", "run", "merged_from", "files", "frames", "stacks", "processes"}, path);
    out.run = run_info(field(root, "run", path), "run", version);

    const auto& merged = array(field(root, "merged_from", path), "merged_from");
    for (size_t i = 0; i < merged.size(); i++) {
        const std::string mp = idx("merged_from", i);
        object(merged[i], mp);
        only_fields(merged[i], {"labels", "run"}, mp);
        MergedInput m;
        m.labels = labels(field(merged[i], "labels", mp), mp + ".labels");
        m.run = run_info(field(merged[i], "run", mp), mp + ".run", version);
        out.merged_from.push_back(std::move(m));
    }

    const auto& files_j = array(field(root, "files", path), "files");
    std::vector<std::string> files;
    files.reserve(files_j.size());
    for (size_t i = 0; i < files_j.size(); i++) files.push_back(str(files_j[i], idx("files", i)));

    const json& fr = object(field(root, "frames", path), "frames");
    if (version >= 5) only_fields(fr, {"name", "file", "line", "synthetic", "kind", "library"}, "frames");
    else only_fields(fr, {"name", "file", "line", "synthetic"}, "frames");
    const auto& name = array(field(fr, "name", "frames"), "frames.name");
    const auto& file = array(field(fr, "file", "frames"), "frames.file");
    const auto& line = array(field(fr, "line", "frames"), "frames.line");
    const auto& synth = array(field(fr, "synthetic", "frames"), "frames.synthetic");
    if (file.size() != name.size() || line.size() != name.size() || synth.size() != name.size())
        bad("frames: name, file, line and synthetic must be as long as each other (" + std::to_string(name.size()) +
            ", " + std::to_string(file.size()) + ", " + std::to_string(line.size()) + ", " +
            std::to_string(synth.size()) + ")");
    // Version 5: each frame's kind and library (older files hold Python frames only).
    const json::array_t* kind = nullptr;
    const json::array_t* library = nullptr;
    if (version >= 5) {
        kind = &array(field(fr, "kind", "frames"), "frames.kind");
        library = &array(field(fr, "library", "frames"), "frames.library");
        if (kind->size() != name.size() || library->size() != name.size())
            bad("frames: kind and library must be as long as name (" + std::to_string(name.size()) + ", " +
                std::to_string(kind->size()) + ", " + std::to_string(library->size()) + ")");
    }
    auto file_name = [&](const json& v, const std::string& p) -> const std::string& {
        uint64_t fi = 0;
        if (!as_u64(v, std::numeric_limits<uint64_t>::max(), fi) || fi >= files.size()) {
            u64(v, p);
            bad(p + ": " + std::to_string(fi) + " is not a file index (the file has " + std::to_string(files.size()) +
                " file names)");
        }
        return files[fi];
    };
    for (size_t i = 0; i < name.size(); i++) {
        Frame f;
        f.name = str(name[i], idx("frames.name", i));
        f.file = file_name(file[i], idx("frames.file", i));
        f.line = static_cast<int>(i64(line[i], idx("frames.line", i), std::numeric_limits<int>::min(),
                                      std::numeric_limits<int>::max()));
        f.synthetic = boolean(synth[i], idx("frames.synthetic", i));
        if (kind) {
            uint64_t k = 0;
            if (!as_u64((*kind)[i], 2, k))
                bad(idx("frames.kind", i) + " must be 0 (Python), 1 (native) or 2 (kernel)" + got((*kind)[i]));
            f.kind = static_cast<FrameKind>(k);
            f.library = file_name((*library)[i], idx("frames.library", i));
        }
        if (uint32_t got_index = out.frames.intern(f); got_index != i)
            bad(idx("frames", i) + " is the same frame as frames[" + std::to_string(got_index) + "]");
    }

    const auto& stacks = array(field(root, "stacks", path), "stacks");
    std::vector<uint32_t> st;
    for (size_t i = 0; i < stacks.size(); i++) {
        const std::string sp = idx("stacks", i);
        const auto& a = array(stacks[i], sp);
        st.clear();
        st.reserve(a.size());
        for (size_t k = 0; k < a.size(); k++) {
            uint64_t v = 0;
            if (!as_u64(a[k], std::numeric_limits<uint64_t>::max(), v) || v >= out.frames.size()) {
                u64(a[k], idx(sp, k));
                bad(idx(sp, k) + ": " + std::to_string(v) + " is not a frame index (the file has " +
                    std::to_string(out.frames.size()) + " frames)");
            }
            st.push_back(static_cast<uint32_t>(v));
        }
        if (uint32_t got_index = out.stacks.intern(st); got_index != i)
            bad(sp + " is the same stack as stacks[" + std::to_string(got_index) + "]");
    }

    const auto& procs = array(field(root, "processes", path), "processes");
    for (size_t i = 0; i < procs.size(); i++) {
        const std::string pp = idx("processes", i);
        uint32_t key = 0;
        ProcessProfile pr = process(procs[i], out.stacks.size(), pp, key, version);
        if (!out.processes.emplace(key, std::move(pr)).second)
            bad(pp + ".key: " + std::to_string(key) + " is the key of another process too");
    }
    if (root.contains("tasks")) tasks(root["tasks"], out);
}

void read_or_throw(std::string_view data, Profile& out, const RawLimits& limits) {
    const bool gz = is_gzip(data);
    std::string inflated;
    if (gz) inflated = gunzip(data, limits.max_bytes);
    else if (data.size() > limits.max_bytes)
        bad("the profile is larger than " + std::to_string(limits.max_bytes >> 20) + " MiB", RawFailure::TooLarge);
    const std::string_view text = gz ? std::string_view(inflated) : data;
    if (trim_left(text).empty()) bad(gz ? "the file holds no data once decompressed" : "the file is empty", RawFailure::NotRaw);

    // Ours if it starts as ours do: then a parse error means a truncated or corrupt file.
    static constexpr std::string_view kOurStart = "{\"format\":\"pybpfprof\"";
    const bool ours = text.substr(0, kOurStart.size()) == kOurStart;
    const char first = trim_left(text)[0];
    if (!ours && first != '{' && first != '[') bad(not_json_kind(text, gz), RawFailure::NotRaw);

    // The parsed document takes ~16 bytes per value, whatever the text: bound the values
    // (each but the last of an array or object is followed by a comma).
    if (size_t commas = static_cast<size_t>(std::count(text.begin(), text.end(), ',')); commas > limits.max_values)
        bad("the profile has more than " + std::to_string(limits.max_values) + " values", RawFailure::TooLarge);
    json root;
    std::string error;
    if (!agent::parse_json_strict(text, kMaxDepth, root, error)) {
        if (ours) bad("the file is truncated or corrupt: " + error);
        bad("not a pybpfprof profile: " + error, RawFailure::NotRaw);
    }
    if (!root.is_object()) bad("JSON that is not a pybpfprof profile (not an object)", RawFailure::NotRaw);
    auto fmt = root.find("format");
    if (fmt == root.end() || *fmt != kRawFormatName) {
        if (auto schema = root.find("$schema");
            schema != root.end() && schema->is_string() && schema->get_ref<const std::string&>().find("speedscope") != std::string::npos)
            bad("speedscope JSON, not pybpfprof's own format", RawFailure::NotRaw);
        if (fmt != root.end() && *fmt == "pybpfprof-report") bad("an HTML report's data, not a profile", RawFailure::NotRaw);
        bad(std::string("JSON that is not a pybpfprof profile (") +
                (fmt == root.end() ? "no \"format\" field" : "\"format\" is " + shown(*fmt)) + ")",
            RawFailure::NotRaw);
    }
    auto ver = root.find("version");
    if (ver == root.end()) bad("profile.version is missing");
    uint64_t v = 0;
    if (!as_u64(*ver, std::numeric_limits<uint64_t>::max(), v) || v < 1)
        bad("profile.version must be a whole number from 1" + got(*ver));
    if (v > static_cast<uint64_t>(kRawFormatVersion))
        bad("the file is in format version " + std::to_string(v) + ", from a newer pybpfprof; this one reads version " +
                std::to_string(kRawFormatVersion) + ": upgrade pybpfprof to read it",
            RawFailure::TooNew);
    read_profile(root, v, out);
}

}  // namespace

bool read_raw(std::string_view data, Profile& out, std::string& error, const RawLimits& limits, RawFailure* failure) {
    out = Profile{};
    error.clear();
    if (failure) *failure = RawFailure::None;
    try {
        read_or_throw(data, out, limits);
        return true;
    } catch (const Bad& b) {
        error = b.message;
        if (failure) *failure = b.failure;
    } catch (const std::bad_alloc&) {
        throw;
    } catch (const std::exception& e) {  // nlohmann's, on a path not checked above
        error = std::string("the file is corrupt: ") + e.what();
        if (failure) *failure = RawFailure::Invalid;
    }
    out = Profile{};
    return false;
}

bool read_raw(std::string_view data, Profile& out, std::string& error) {
    return read_raw(data, out, error, RawLimits{});
}

}  // namespace pbp
