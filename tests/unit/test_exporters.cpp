// Exporters: registry, speedscope JSON (structure + the real speedscope app in headless
// Chromium via tests/js/check_speedscope.mjs) and collapsed stacks (flamegraph.pl input).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "summary/text_summary.h"
#include "export/common.h"
#include "export/exporter.h"
#include "engine/profile.h"
#include "test_support.h"
#include "mixed_profile.h"
#include "wall_profile.h"
#include "weighted_profile.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace pbp {
namespace {

constexpr uint64_t kStart = 5'000'000'000ULL;                // CLOCK_MONOTONIC at start
constexpr int64_t kStartUnix = 1'795'260'680'123'456'789LL;  // 2026-11-21T11:31:20.123456789Z
constexpr const char* kStartIso = "2026-11-21T11:31:20.123Z";
constexpr uint64_t kPeriod = 10'101'010;  // 99 Hz
#ifdef PYBPFPROF_VERSION
constexpr const char* kVersion = PYBPFPROF_VERSION;
#else
constexpr const char* kVersion = "unknown";  // speedscope.cpp's fallback
#endif

// Builds synthetic profiles.
struct Builder {
    Profile p;

    Builder() {
        p.run.target = "python3 app.py";
        p.run.start_mono_ns = kStart;
        p.run.end_mono_ns = kStart + 2'000'000'000ULL;
        p.run.start_unix_ns = kStartUnix;
        p.run.rate_hz = 99;
        p.run.period_ns = kPeriod;
        p.run.version = "0.1.0";
    }
    uint32_t frame(const std::string& name, const std::string& file, int line) {
        return p.frames.intern(Frame{name, file, line, false});
    }
    uint32_t synthetic(const std::string& name) {
        return p.frames.intern(Frame{name, "", 0, true});
    }
    ProcessProfile& process(uint32_t pid, const std::string& cmdline, uint32_t ns_pid = 0) {
        auto& pr = p.processes[pid];
        pr.pid = pid;
        pr.ns_pid = ns_pid ? ns_pid : pid;
        pr.comm = "python3";
        pr.cmdline = cmdline;
        return pr;
    }
    ThreadProfile& thread(uint32_t pid, uint32_t tid, const std::string& name, uint32_t ns_tid = 0) {
        auto& t = p.processes.at(pid).threads[tid];
        t.tid = tid;
        t.ns_tid = ns_tid ? ns_tid : tid;
        t.name = name;
        return t;
    }
    // Adds `n` on-CPU samples of `stack` (root first) at `at_ms` + k*period, each weighing
    // weight_ns (default: one period).
    void add(uint32_t pid, uint32_t tid, const std::vector<uint32_t>& stack, uint64_t at_ms,
             int n = 1, uint64_t weight_ns = kPeriod) {
        uint32_t s = p.stacks.intern(stack);
        auto& pr = p.processes.at(pid);
        auto& t = pr.threads.at(tid);
        for (int k = 0; k < n; k++) {
            uint64_t ts = kStart + at_ms * 1'000'000ULL + k * kPeriod;
            t.samples.push_back({ts, s, 0, SampleKind::Cpu, weight_ns});
            if (!pr.first_sample_ns || ts < pr.first_sample_ns) pr.first_sample_ns = ts;
            pr.last_sample_ns = std::max(pr.last_sample_ns, ts);
        }
    }
};

// Several processes and threads, synthetic frames, unicode, hostile characters, an idle
// process and an idle thread.
Profile multi_profile() {
    Builder b;
    uint32_t mod = b.frame("<module>", "/app/app.py", 1);
    uint32_t run = b.frame("Worker.run", "/app/app.py", 12);
    uint32_t hot = b.frame("hot_loop", "/app/app.py", 20);
    uint32_t hot2 = b.frame("hot_loop", "/app/app.py", 21);
    uint32_t uni = b.frame("grüße_λ", "/app/ünï.py", 7);
    uint32_t semi = b.frame("weird;name\nwith newline", "/app/x;y.py", 3);
    uint32_t noline = b.frame("noline", "/app/lib.py", 0);
    uint32_t trunc = b.synthetic("[truncated]");
    uint32_t native = b.synthetic("[native]");

    b.process(100, "python3 app.py --workers 2");
    b.thread(100, 100, "python3");
    b.thread(100, 101, "worker-1");
    b.thread(100, 102, "idle-thread");  // no samples
    b.add(100, 100, {mod, hot}, 0, 5);
    b.add(100, 100, {mod, hot2}, 60, 3);
    b.add(100, 100, {mod, uni}, 100, 2);
    b.add(100, 100, {mod, hot}, 150, 1);  // same stack again: aggregated in collapsed
    b.add(100, 101, {run, semi}, 200, 1);  // out of time order on purpose
    b.add(100, 101, {run, hot}, 10, 4);
    b.add(100, 101, {trunc, run, hot}, 300, 2);

    auto& pr = b.process(200, "python3 -c 'print(1)'", 7);
    pr.labels["container"] = "abc123";
    b.thread(200, 200, "python3", 1);
    b.thread(200, 201, "grüße-thread", 9);
    b.add(200, 200, {mod, noline}, 50, 12);  // the busiest thread: activeProfileIndex 2
    b.add(200, 201, {native}, 400, 1);
    b.add(200, 201, {}, 500, 1);  // empty stack

    b.process(300, "python3 idle.py");
    b.thread(300, 300, "python3");  // idle process
    return b.p;
}

// Processes were seen, but none ran.
Profile idle_profile() {
    Builder b;
    b.process(10, "python3 sleeper.py");
    b.thread(10, 10, "python3");
    auto& pr = b.process(11, "python3 other.py");
    pr.labels["pod"] = "web-1";
    pr.labels["namespace"] = "shop";
    return b.p;
}

Profile empty_profile() {
    Builder b;
    b.p.run.target = "all-python";
    return b.p;
}

std::string export_to_string(const std::string& format, const Profile& p, const ExportOptions& options = {}) {
    auto e = make_exporter(format);
    EXPECT_NE(e, nullptr) << format;
    if (!e) return "";
    std::ostringstream out;
    e->write(p, options, out);
    return out.str();
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& data) {
    std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << data;
    return path;
}

// --------------------------------------------------------------------------- registry

TEST(ExporterRegistry, NamesAndConstruction) {
    auto names = exporter_names();
    EXPECT_NE(std::find(names.begin(), names.end(), "speedscope"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "collapsed"), names.end());
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
    for (const auto& n : names) {
        auto e = make_exporter(n);
        ASSERT_NE(e, nullptr) << n;
        EXPECT_EQ(e->name(), n);
        ASSERT_FALSE(e->extensions().empty()) << n;
        EXPECT_EQ(e->extension(), e->extensions().front());
        for (const auto& ext : e->extensions()) {
            EXPECT_FALSE(ext.empty());
            EXPECT_NE(ext.front(), '.') << "extension without dot";
            EXPECT_EQ(format_for_path("/tmp/out." + ext), n) << ext;
        }
        std::string how = e->how_to_open("/tmp/out.x");
        EXPECT_NE(how.find("/tmp/out.x"), std::string::npos) << how;
        EXPECT_EQ(how.find('\n'), std::string::npos) << "one line";
    }
    EXPECT_EQ(make_exporter("nope"), nullptr);
    EXPECT_EQ(make_exporter(""), nullptr);
    EXPECT_EQ(make_exporter("speedscope")->extension(), "speedscope.json");
    EXPECT_EQ(make_exporter("collapsed")->extension(), "folded");
    EXPECT_EQ(make_exporter("speedscope")->how_to_open("p.json"),
              "open it at https://www.speedscope.app or run: npx speedscope p.json");
    EXPECT_EQ(make_exporter("collapsed")->how_to_open("p.folded"),
              "flamegraph.pl p.folded > flame.svg");
}

// The format guessed from -o: each exporter's own extensions, in any case; "" for none (the
// CLI then asks for -f).
TEST(ExporterRegistry, FormatForPath) {
    for (auto [path, format] : std::vector<std::pair<std::string, std::string>>{
             {"r.html", "html"}, {"/x/r.htm", "html"}, {"a.folded", "collapsed"}, {"a.collapsed", "collapsed"},
             {"o.pb.gz", "pprof"}, {"o.pprof", "pprof"}, {"o.speedscope.json", "speedscope"}, {"o.json", "speedscope"},
             {"o.gz", ""}, {"html", ""}, {"out.HTML", "html"}, {"x.svg", "svg"}, {"X.SVG", "svg"}, {"x.svgz", ""},
             {"x.pb", ""}, {"", ""}})
        EXPECT_EQ(format_for_path(path), format) << path;
}

// ------------------------------------------------------------------------- speedscope

json parse_speedscope(const Profile& p) {
    std::string text = export_to_string("speedscope", p);
    json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(doc.is_discarded()) << "not JSON:\n" << text.substr(0, 2000);
    return doc;
}

// Checks what every speedscope file must satisfy; returns total samples.
size_t check_common(const json& doc, const Profile& p) {
    EXPECT_EQ(doc.value("$schema", ""), "https://www.speedscope.app/file-format-schema.json");
    EXPECT_EQ(doc.value("exporter", ""), std::string("pybpfprof ") + kVersion);
    std::string name = doc.value("name", "");
    EXPECT_EQ(name, "pybpfprof " + p.run.target + " " + kStartIso);
    EXPECT_EQ(doc["pybpfprof"].value("start_time", ""), kStartIso);
    EXPECT_EQ(doc["pybpfprof"].value("start_unix_ns", int64_t{0}), kStartUnix);
    // The depth the run walked and whether the kernel had bpf_loop: tests on kernels
    // without it read their expected depth from here.
    EXPECT_EQ(doc["pybpfprof"].value("max_depth", -1), p.run.max_depth);
    EXPECT_EQ(doc["pybpfprof"].value("bpf_loop", !p.run.bpf_loop), p.run.bpf_loop);

    const json& frames = doc["shared"]["frames"];
    EXPECT_TRUE(frames.is_array());
    EXPECT_EQ(frames.size(), p.frames.size());
    for (size_t i = 0; i < frames.size() && i < p.frames.size(); i++) {
        const Frame& f = p.frames.at(i);
        EXPECT_EQ(frames[i].value("name", ""), frame_display_name(f));
        if (f.synthetic) {
            EXPECT_FALSE(frames[i].contains("file")) << f.name;
            EXPECT_FALSE(frames[i].contains("line")) << f.name;
        } else if (f.kind != FrameKind::Python) {  // the library, then the source in parentheses
            EXPECT_EQ(frames[i].value("file", "").rfind(f.library, 0), 0u) << f.name;
            EXPECT_FALSE(frames[i].contains("line")) << f.name;
        } else {
            EXPECT_EQ(frames[i].value("file", ""), f.file);
            if (f.line > 0)
                EXPECT_EQ(frames[i].value("line", 0), f.line);
            else
                EXPECT_FALSE(frames[i].contains("line"));
        }
    }

    const json& profiles = doc["profiles"];
    EXPECT_TRUE(profiles.is_array());
    EXPECT_GE(profiles.size(), 1u) << "speedscope rejects a file without profiles";
    size_t total = 0, most = 0, most_i = 0;
    for (size_t i = 0; i < profiles.size(); i++) {
        const json& pr = profiles[i];
        EXPECT_EQ(pr.value("type", ""), "sampled");
        EXPECT_EQ(pr.value("unit", ""), "seconds");
        const json& samples = pr["samples"];
        const json& weights = pr["weights"];
        EXPECT_EQ(samples.size(), weights.size()) << pr.value("name", "");
        double wsum = 0;
        for (const auto& w : weights) {
            EXPECT_NEAR(w.get<double>(), kPeriod / 1e9, 1e-15);
            wsum += w.get<double>();
        }
        EXPECT_NEAR(wsum, samples.size() * (kPeriod / 1e9), 1e-9);
        for (const auto& s : samples)
            for (const auto& idx : s) {
                EXPECT_TRUE(idx.is_number_unsigned());
                EXPECT_LT(idx.get<uint64_t>(), frames.size());
            }
        double sv = pr["startValue"].get<double>(), ev = pr["endValue"].get<double>();
        EXPECT_LE(sv, ev);
        EXPECT_GE(sv, 0);
        EXPECT_LE(ev, (p.run.end_mono_ns - p.run.start_mono_ns) / 1e9 + kPeriod / 1e9 + 1e-9);
        total += samples.size();
        if (samples.size() > most) most = samples.size(), most_i = i;
    }
    EXPECT_EQ(doc.value("activeProfileIndex", size_t{999}), most_i);
    EXPECT_EQ(total, p.total_samples());
    return total;
}


TEST(Speedscope, MultiProcessStructure) {
    Profile p = multi_profile();
    json doc = parse_speedscope(p);
    ASSERT_FALSE(doc.is_discarded());
    EXPECT_EQ(check_common(doc, p), 32u);

    // One profile per (process, thread) with samples, in pid/tid order; idle ones left out.
    std::vector<std::string> names;
    for (const auto& pr : doc["profiles"]) names.push_back(pr.value("name", ""));
    std::vector<std::string> want = {
        "python3 app.py --workers 2 (pid 100) python3 (tid 100)",
        "python3 app.py --workers 2 (pid 100) worker-1 (tid 101)",
        "python3 -c 'print(1)' (pid 200, ns pid 7) python3 (tid 200, ns tid 1) [container abc123]",
        "python3 -c 'print(1)' (pid 200, ns pid 7) grüße-thread (tid 201, ns tid 9) "
        "[container abc123]",
    };
    EXPECT_EQ(names, want);
    EXPECT_EQ(doc["activeProfileIndex"], 2);

    // Samples are root-first frame-index lists, in time order.
    const auto& frames = doc["shared"]["frames"];
    auto stacks = [&](const json& prof) {  // "root>...>leaf:line" per sample
        std::vector<std::string> v;
        for (const auto& s : prof["samples"]) {
            std::string t;
            for (const auto& i : s) {
                const json& f = frames[i.get<size_t>()];
                t += (t.empty() ? "" : ">") + f.value("name", "");
                if (f.contains("line")) t += ":" + std::to_string(f.value("line", 0));
            }
            v.push_back(t);
        }
        return v;
    };
    std::vector<std::string> want100;
    for (int i = 0; i < 5; i++) want100.push_back("<module>:1>hot_loop:20");
    for (int i = 0; i < 3; i++) want100.push_back("<module>:1>hot_loop:21");
    for (int i = 0; i < 2; i++) want100.push_back("<module>:1>grüße_λ:7");
    want100.push_back("<module>:1>hot_loop:20");
    EXPECT_EQ(stacks(doc["profiles"][0]), want100);
    std::vector<std::string> want101 = {
        "Worker.run:12>hot_loop:20", "Worker.run:12>hot_loop:20", "Worker.run:12>hot_loop:20",
        "Worker.run:12>hot_loop:20", "Worker.run:12>weird;name\nwith newline:3",
        "[truncated]>Worker.run:12>hot_loop:20", "[truncated]>Worker.run:12>hot_loop:20"};
    EXPECT_EQ(stacks(doc["profiles"][1]), want101);
    EXPECT_EQ(stacks(doc["profiles"][2]), std::vector<std::string>(12, "<module>:1>noline"));
    EXPECT_EQ(stacks(doc["profiles"][3]), (std::vector<std::string>{"[native]", ""}));
    EXPECT_EQ(doc["profiles"][3]["samples"][1].size(), 0u) << "empty stack stays an empty sample";

    // One time base: seconds since run start, first sample .. last sample + one period.
    EXPECT_DOUBLE_EQ(doc["profiles"][0]["startValue"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(doc["profiles"][0]["endValue"].get<double>(), 0.15 + kPeriod / 1e9);
    EXPECT_DOUBLE_EQ(doc["profiles"][1]["startValue"].get<double>(), 0.010);
    EXPECT_DOUBLE_EQ(doc["profiles"][1]["endValue"].get<double>(), 0.3 + 2 * kPeriod / 1e9);
    EXPECT_DOUBLE_EQ(doc["profiles"][3]["startValue"].get<double>(), 0.4);
    EXPECT_DOUBLE_EQ(doc["profiles"][3]["endValue"].get<double>(), 0.5 + kPeriod / 1e9);

    // Unicode survives as UTF-8.
    bool found = false;
    for (const auto& f : frames)
        if (f.value("name", "") == "grüße_λ" && f.value("file", "") == "/app/ünï.py") found = true;
    EXPECT_TRUE(found);
    EXPECT_EQ(doc["pybpfprof"].value("period_ns", uint64_t{0}), kPeriod);
    EXPECT_EQ(doc["pybpfprof"].value("total_samples", uint64_t{0}), 32u);
}

// --group-by pod: one speedscope profile per pod (its processes' threads merged in time
// order), per-thread profiles for processes in no pod; folded stacks get a pod root.
Profile pod_profile() {
    Builder b;
    uint32_t hot = b.frame("hot", "/app/a.py", 3);
    uint32_t cold = b.frame("cold", "/app/a.py", 9);
    for (uint32_t pid : {100u, 200u}) {
        auto& pr = b.process(pid, "python3 worker.py");
        pr.labels = {{"namespace", "dask"}, {"pod", "worker-0"}, {"pod_uid", "u"}, {"container", "worker"}};
    }
    b.process(300, "python3 tool.py");
    b.thread(100, 100, "MainThread");
    b.thread(100, 101, "compute");
    b.thread(200, 200, "MainThread");
    b.thread(300, 300, "MainThread");
    b.add(100, 100, {hot}, 30, 2);
    b.add(100, 101, {hot}, 0, 3);
    b.add(200, 200, {cold}, 10, 4);
    b.add(300, 300, {cold}, 0, 1);
    return b.p;
}

TEST(Speedscope, GroupByPodMergesAPodsProcesses) {
    auto doc = json::parse(export_to_string("speedscope", pod_profile(), {"pod"}));
    ASSERT_EQ(doc["profiles"].size(), 2u) << doc["profiles"].dump();
    EXPECT_EQ(doc["profiles"][0]["name"], "pod dask/worker-0 (2 processes, 3 threads)");
    EXPECT_EQ(doc["profiles"][0]["samples"].size(), 9u);
    EXPECT_EQ(doc["profiles"][1]["name"], "python3 tool.py (pid 300) MainThread (tid 300)");
    // in time order across the merged threads (samples are one 10.1 ms period apart):
    // hot 0, cold 10.0, hot 10.1, cold 20.1, hot 20.2, hot 30.0, cold 30.2, hot 40.1, cold 40.3
    std::vector<std::string> order;
    for (auto& smp : doc["profiles"][0]["samples"]) order.push_back(doc["shared"]["frames"][smp[0].get<int>()]["name"]);
    EXPECT_EQ(order, (std::vector<std::string>{"hot", "cold", "hot", "cold", "hot", "hot", "cold", "hot", "cold"}));
    auto by_process = json::parse(export_to_string("speedscope", pod_profile(), {"process"}));
    EXPECT_EQ(by_process["profiles"].size(), 4u);
    EXPECT_EQ(by_process["profiles"][0]["name"],
              "python3 worker.py (pid 100) MainThread (tid 100) [pod dask/worker-0, container worker]");
}

TEST(Collapsed, GroupByPodPutsThePodAtTheRoot) {
    std::string text = export_to_string("collapsed", pod_profile(), {"pod"});
    EXPECT_EQ(export_to_string("collapsed", pod_profile()).find("pod dask/worker-0;"), std::string::npos)
        << "grouped by process unless asked";
    EXPECT_NE(text.find("pod dask/worker-0;python3 worker.py (pid 200) [pod dask/worker-0, container worker];MainThread (tid 200);cold (/app/a.py:9) 4\n"),
              std::string::npos) << text;
    EXPECT_NE(text.find("\npython3 tool.py (pid 300);MainThread (tid 300);cold (/app/a.py:9) 1\n"), std::string::npos) << text;
}

TEST(Speedscope, MaxDepthAndBpfLoopInMetadata) {
    for (auto [depth, loop] : {std::pair{1024, true}, std::pair{256, false}, std::pair{128, false}}) {
        Profile p = multi_profile();
        p.run.max_depth = depth;
        p.run.bpf_loop = loop;
        json doc = parse_speedscope(p);
        ASSERT_FALSE(doc.is_discarded());
        EXPECT_EQ(doc["pybpfprof"]["max_depth"], depth);
        EXPECT_EQ(doc["pybpfprof"]["bpf_loop"], loop);
    }
}

TEST(Speedscope, IdleProcessesGetOneEmptyProfileEach) {
    Profile p = idle_profile();
    json doc = parse_speedscope(p);
    ASSERT_FALSE(doc.is_discarded());
    EXPECT_EQ(check_common(doc, p), 0u);
    ASSERT_EQ(doc["profiles"].size(), 2u);
    EXPECT_EQ(doc["profiles"][0]["name"], "python3 sleeper.py (pid 10) (no samples)");
    EXPECT_EQ(doc["profiles"][1]["name"], "python3 other.py (pid 11) [pod shop/web-1] (no samples)");
    for (const auto& pr : doc["profiles"]) {
        EXPECT_TRUE(pr["samples"].empty());
        EXPECT_TRUE(pr["weights"].empty());
        EXPECT_DOUBLE_EQ(pr["startValue"].get<double>(), 0.0);
        EXPECT_DOUBLE_EQ(pr["endValue"].get<double>(), 2.0);  // the run's duration
    }
    EXPECT_EQ(doc["activeProfileIndex"], 0);
}

TEST(Speedscope, EmptyProfileStillHasOneProfile) {
    Profile p = empty_profile();
    json doc = parse_speedscope(p);
    ASSERT_FALSE(doc.is_discarded());
    EXPECT_EQ(check_common(doc, p), 0u);
    ASSERT_EQ(doc["profiles"].size(), 1u);
    EXPECT_EQ(doc["profiles"][0]["name"],
              std::string("pybpfprof all-python ") + kStartIso + " (no samples)");
    EXPECT_TRUE(doc["shared"]["frames"].empty());
}

TEST(Speedscope, InvalidUtf8IsReplacedNotFatal) {
    Builder b;
    uint32_t f = b.frame("bad\xff\xfename", "/app/\xc3.py", 3);
    b.process(1, "python3 \xff.py");
    b.thread(1, 1, "py\xff");
    b.add(1, 1, {f}, 0, 2);
    std::string text;
    ASSERT_NO_THROW(text = export_to_string("speedscope", b.p));
    json doc = json::parse(text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded());
    EXPECT_EQ(doc["shared"]["frames"][0]["name"], "bad\xef\xbf\xbd\xef\xbf\xbdname");
}

// Weights are the samples' own; the period (metadata, the end of a profile's time span)
// falls back to the rate when unknown.
TEST(Speedscope, UnknownPeriodFallsBackToRate) {
    Builder b;
    b.p.run.period_ns = 0;
    b.p.run.rate_hz = 100;
    uint32_t f = b.frame("f", "/a.py", 1);
    b.process(1, "python3 a.py");
    b.thread(1, 1, "python3");
    b.add(1, 1, {f}, 0, 3, 10'000'000);
    json doc = parse_speedscope(b.p);
    ASSERT_FALSE(doc.is_discarded());
    for (const auto& w : doc["profiles"][0]["weights"]) EXPECT_DOUBLE_EQ(w.get<double>(), 0.01);
    EXPECT_EQ(doc["pybpfprof"]["period_ns"], 10'000'000u);
    EXPECT_DOUBLE_EQ(doc["profiles"][0]["endValue"].get<double>(), 2 * kPeriod / 1e9 + 0.01);
}

// A bigger, randomized profile: many threads, deep stacks, shared frames.
Profile big_profile() {
    Builder b;
    b.p.run.end_mono_ns = kStart + 17'000'000'000ULL;
    std::vector<uint32_t> fr;
    for (int i = 0; i < 300; i++)
        fr.push_back(b.frame("mod" + std::to_string(i % 17) + ".func_" + std::to_string(i),
                             "/srv/pkg/mod" + std::to_string(i % 17) + ".py", 1 + i));
    fr.push_back(b.synthetic("[truncated]"));
    uint64_t x = 12345;
    auto rnd = [&]() { return x = x * 6364136223846793005ULL + 1442695040888963407ULL, x >> 33; };
    for (uint32_t pid = 1000; pid < 1003; pid++) {
        b.process(pid, "python3 service.py --shard " + std::to_string(pid));
        for (uint32_t tid = pid; tid < pid + 4; tid++) {
            b.thread(pid, tid, "worker");
            for (int s = 0; s < 1500; s++) {
                std::vector<uint32_t> st;
                int depth = 1 + rnd() % 60;
                for (int d = 0; d < depth; d++) st.push_back(fr[(d * 5 + rnd() % 5) % fr.size()]);
                b.add(pid, tid, st, s * 11);
            }
        }
    }
    return b.p;
}

// Each sample weighs its own weight_ns (tests/support/weighted_profile.h): per leaf, the
// weights add up to the profile's, not to one period per sample.
TEST(Speedscope, ExportsSampleWeights) {
    test::WeightedProfile w;
    json doc = parse_speedscope(w.profile);
    ASSERT_FALSE(doc.is_discarded());
    const json& frames = doc["shared"]["frames"];
    std::map<std::string, double> seconds;
    std::map<std::string, uint64_t> samples;
    for (const auto& pr : doc["profiles"]) {
        ASSERT_EQ(pr["samples"].size(), pr["weights"].size());
        for (size_t i = 0; i < pr["samples"].size(); i++) {
            std::string leaf = frames[pr["samples"][i].back().get<size_t>()]["name"];
            seconds[leaf] += pr["weights"][i].get<double>();
            samples[leaf]++;
        }
    }
    EXPECT_EQ(samples, w.samples);
    for (const auto& [leaf, n] : w.samples) EXPECT_NEAR(seconds[leaf], w.weight_ns(leaf) / 1e9, 1e-12) << leaf;
    EXPECT_EQ(doc["profiles"][0]["weights"][4], 6 * test::WeightedProfile::kPeriod / 1e9) << "cpu_hot, exact";
}

TEST(Speedscope, BigProfileStructure) {
    Profile p = big_profile();
    json doc = parse_speedscope(p);
    ASSERT_FALSE(doc.is_discarded());
    EXPECT_EQ(check_common(doc, p), 3u * 4u * 1500u);
    EXPECT_EQ(doc["profiles"].size(), 12u);
}

bool js_checker_available(std::string& why) {
    const std::string js = test::source_dir() + "/tests/js";
    for (const char* m : {"speedscope/dist/release/index.html",
                          "speedscope/dist/release/file-format-schema.json", "ajv/package.json",
                          "playwright-core/package.json"})
        if (!fs::exists(js + "/node_modules/" + m)) {
            why = std::string("tests/js/node_modules/") + m + " missing: run npm ci in tests/js";
            return false;
        }
    if (!fs::exists("/usr/bin/chromium")) {
        why = "/usr/bin/chromium missing: apt-get install -y chromium";
        return false;
    }
    if (test::run({"node", "--version"}, 30).status != 0) {
        why = "node not found";
        return false;
    }
    return true;
}

test::CmdResult run_checker(const std::vector<std::string>& files) {
    std::vector<std::string> argv = {"node", test::source_dir() + "/tests/js/check_speedscope.mjs"};
    argv.insert(argv.end(), files.begin(), files.end());
    return test::run(argv, 600);
}

// The real speedscope app in headless Chromium loads every file we write.
TEST(Speedscope, LoadsInRealSpeedscopeApp) {
    std::string why;
    PBP_REQUIRE(js_checker_available(why), why);
    std::string dir = test::temp_dir();
    std::vector<std::string> files = {
        write_file(dir, "multi.speedscope.json", export_to_string("speedscope", multi_profile())),
        write_file(dir, "idle.speedscope.json", export_to_string("speedscope", idle_profile())),
        write_file(dir, "empty.speedscope.json", export_to_string("speedscope", empty_profile())),
        write_file(dir, "big.speedscope.json", export_to_string("speedscope", big_profile())),
        write_file(dir, "multi.folded", export_to_string("collapsed", multi_profile())),
        write_file(dir, "weighted.json", export_to_string("speedscope", test::WeightedProfile().profile)),
        write_file(dir, "weighted.folded", export_to_string("collapsed", test::WeightedProfile().profile)),
        write_file(dir, "wall.json", export_to_string("speedscope", test::WallProfile().profile)),
        write_file(dir, "wall.folded", export_to_string("collapsed", test::WallProfile().profile)),
    };
    PBP_SKIP_BROWSER_CHECK();
    auto r = run_checker(files);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    for (const auto& f : files) EXPECT_NE(r.out.find("ok " + f + ":"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
    // The title the app shows is the file's name, which carries the absolute start time.
    EXPECT_NE(r.out.find(std::string("\"pybpfprof python3 app.py ") + kStartIso + "\""),
              std::string::npos)
        << r.out;
}

// --native frames: a kernel frame is "[k] name" with the file "[kernel]"; a native frame's
// file is its library, with its source file:line in parentheses when debug information gave
// one; Python frames unchanged.
TEST(Speedscope, NativeAndKernelFramesNameTheirLibrary) {
    test::MixedProfile m;
    Profile& p = m.profile;
    p.run.start_unix_ns = kStartUnix;
    json doc = parse_speedscope(p);
    ASSERT_FALSE(doc.is_discarded());
    EXPECT_EQ(check_common(doc, p), 140u);
    const json& frames = doc["shared"]["frames"];
    EXPECT_EQ(frames[m.k_vfs_read], json::parse(R"({"name":"[k] vfs_read","file":"[kernel]"})"));
    EXPECT_EQ(frames[m.libc_read], json::parse(R"({"name":"read","file":"/usr/lib/x86_64-linux-gnu/libc.so.6"})"));
    EXPECT_EQ(frames[m.ext_b], json::parse(
        R"X({"name":"b","file":"/opt/app/lib/_ext.cpython-311-x86_64-linux-gnu.so (/src/ext/ext.c:7)"})X"));
    EXPECT_EQ(frames[m.outer], json::parse(R"({"name":"outer","file":"/opt/app/main.py","line":12})"));
    // A name that already carries the "[k] " of the kernel symbol reader keeps one.
    Frame k{"[k] do_syscall_64", "", 0, false};
    k.kind = FrameKind::Kernel;
    EXPECT_EQ(frame_display_name(k), "[k] do_syscall_64");
}

// The real app loads a profile of the three kinds and finds the kernel and native functions.
TEST(Speedscope, NativeAndKernelFramesLoadInRealSpeedscopeApp) {
    std::string why;
    PBP_REQUIRE(js_checker_available(why), why);
    std::string dir = test::temp_dir();
    const std::string file = write_file(dir, "mixed.json", export_to_string("speedscope", test::MixedProfile().profile));
    const std::string folded = write_file(dir, "mixed.folded", export_to_string("collapsed", test::MixedProfile().profile));
    PBP_SKIP_BROWSER_CHECK();
    auto r = test::run({"node", test::source_dir() + "/tests/js/check_speedscope.mjs", "--expect-frame", "[k] vfs_read",
                        "--expect-frame", "b", "--expect-frame", "outer", file},
                       600);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("ok " + file + ":"), std::string::npos) << r.out;
    // The folded file too (the checker's --expect-frame is for speedscope JSON only).
    auto rf = run_checker({folded});
    EXPECT_EQ(rf.status, 0) << rf.out << rf.err;
    EXPECT_NE(rf.out.find("ok " + folded + ":"), std::string::npos) << rf.out;
    // And it can fail: a function that is not in the profile.
    auto bad = test::run({"node", test::source_dir() + "/tests/js/check_speedscope.mjs", "--expect-frame",
                          "[k] no_such_function", file},
                         600);
    EXPECT_NE(bad.status, 0) << bad.out;
}

// The checker must be able to fail: broken files are reported, with a non-zero exit.
TEST(Speedscope, RealAppCheckerRejectsBrokenFiles) {
    std::string why;
    PBP_REQUIRE(js_checker_available(why), why);
    std::string dir = test::temp_dir();
    json doc = json::parse(export_to_string("speedscope", multi_profile()));
    json mismatch = doc;
    mismatch["profiles"][0]["weights"].erase(0);  // schema-valid, the importer rejects it
    json bad_index = doc;
    bad_index["profiles"][1]["samples"][0].push_back(doc["shared"]["frames"].size() + 5);
    json no_profiles = doc;
    no_profiles["profiles"] = json::array();
    json bad_schema = doc;
    bad_schema["profiles"][0]["unit"] = "parsecs";
    std::vector<std::string> files = {
        write_file(dir, "mismatch.json", mismatch.dump()),
        write_file(dir, "bad_index.json", bad_index.dump()),
        write_file(dir, "no_profiles.json", no_profiles.dump()),
        write_file(dir, "bad_schema.json", bad_schema.dump()),
    };
    PBP_SKIP_BROWSER_CHECK();
    auto r = run_checker(files);
    EXPECT_NE(r.status, 0) << r.out << r.err;
    for (const auto& f : files) EXPECT_NE(r.out.find("FAIL " + f + ":"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Failed to load format"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("empty!"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("schema:"), std::string::npos) << r.out;
}

// -------------------------------------------------------------------------- collapsed

struct Folded {
    std::vector<std::pair<std::string, uint64_t>> lines;  // stack, count (in file order)
    uint64_t total = 0;
    std::string unit_line;  // the first line when it is a comment ("# pybpfprof folded stacks: ...")
};

// Parses the way flamegraph.pl does (/^(.*)\s+?(\d+(?:\.\d*)?)$/), but strictly: one
// space, an integer count, no empty frame.
Folded parse_folded(const std::string& text) {
    Folded f;
    if (!text.empty()) {
        EXPECT_EQ(text.back(), '\n');
    }
    static const std::regex re(R"(^(.+) (\d+)$)");
    std::istringstream in(text);
    std::string line;
    bool first = true;
    while (std::getline(in, line)) {
        if (std::exchange(first, false) && line.rfind("# ", 0) == 0) {
            f.unit_line = line;
            continue;
        }
        std::smatch m;
        EXPECT_TRUE(std::regex_match(line, m, re)) << "bad line: " << line;
        if (m.empty()) continue;
        std::string stack = m[1];
        uint64_t n = std::stoull(m[2]);
        EXPECT_GT(n, 0u);
        EXPECT_EQ(stack.find("\r"), std::string::npos);
        EXPECT_EQ(stack.find(";;"), std::string::npos) << line;
        EXPECT_NE(stack.front(), ';');
        EXPECT_NE(stack.back(), ';');
        f.lines.emplace_back(stack, n);
        f.total += n;
    }
    return f;
}

TEST(Collapsed, MultiProcessExactLines) {
    Profile p = multi_profile();
    Folded f = parse_folded(export_to_string("collapsed", p));
    EXPECT_EQ(f.total, p.total_samples());

    const std::string p100 = "python3 app.py --workers 2 (pid 100)";
    const std::string p200 = "python3 -c 'print(1)' (pid 200, ns pid 7) [container abc123]";
    std::vector<std::pair<std::string, uint64_t>> want = {
        {p100 + ";python3 (tid 100);<module> (/app/app.py:1);hot_loop (/app/app.py:20)", 6},
        {p100 + ";python3 (tid 100);<module> (/app/app.py:1);hot_loop (/app/app.py:21)", 3},
        {p100 + ";python3 (tid 100);<module> (/app/app.py:1);grüße_λ (/app/ünï.py:7)", 2},
        {p100 + ";worker-1 (tid 101);Worker.run (/app/app.py:12);hot_loop (/app/app.py:20)", 4},
        {p100 + ";worker-1 (tid 101);Worker.run (/app/app.py:12);"
                "weird:name with newline (/app/x:y.py:3)", 1},
        {p100 + ";worker-1 (tid 101);[truncated];Worker.run (/app/app.py:12);"
                "hot_loop (/app/app.py:20)", 2},
        {p200 + ";python3 (tid 200);<module> (/app/app.py:1);noline (/app/lib.py)", 12},
        {p200 + ";grüße-thread (tid 201);[native]", 1},
        {p200 + ";grüße-thread (tid 201)", 1},
    };
    std::sort(want.begin(), want.end());
    EXPECT_EQ(f.lines, want);  // sorted, aggregated, exact text
}

// --native frames: "symbol [library basename]" (with "(source:line)" when known) and
// "name_[k]", perf's kernel annotation, which flamegraph.pl --color=java colours as kernel.
TEST(Collapsed, NativeAndKernelFrames) {
    Profile p = test::MixedProfile().profile;
    Folded f = parse_folded(export_to_string("collapsed", p));
    EXPECT_EQ(f.total, 140u);
    const std::string proc = "python3 main.py (pid 4242)";
    std::vector<std::pair<std::string, uint64_t>> want = {
        {proc + ";MainThread (tid 4242);<module> (/opt/app/main.py:30);outer (/opt/app/main.py:12);"
                "a (/src/ext/ext.c:14) [_ext.cpython-311-x86_64-linux-gnu.so];"
                "b (/src/ext/ext.c:7) [_ext.cpython-311-x86_64-linux-gnu.so]", 60},
        {proc + ";MainThread (tid 4242);<module> (/opt/app/main.py:30);outer (/opt/app/main.py:12);"
                "read_loop (/opt/app/main.py:20);_Py_read [libpython3.11.so.1.0];read [libc.so.6];"
                "ksys_read_[k];vfs_read_[k]", 25},
        {proc + ";MainThread (tid 4242);<module> (/opt/app/main.py:30);outer (/opt/app/main.py:12)", 15},
        {proc + ";Worker (tid 4243);worker (/opt/app/work.py:5);dgemm_kernel_HASWELL [libopenblas.so.0];"
                "asm_exc_page_fault_[k]", 40},
    };
    std::sort(want.begin(), want.end());
    EXPECT_EQ(f.lines, want);
}

// A library named in brackets, as /proc/PID/maps names the vDSO, keeps its one pair of brackets.
TEST(Collapsed, VdsoFrameNamesItsLibraryOnce) {
    Frame f;
    f.kind = FrameKind::Native;
    f.name = "__vdso_clock_gettime";
    f.library = "[vdso]";
    EXPECT_EQ(frame_label(f), "__vdso_clock_gettime [vdso]");
    f.library = "/usr/lib/x86_64-linux-gnu/libc.so.6";
    EXPECT_EQ(frame_label(f), "__vdso_clock_gettime [libc.so.6]");
    f.library.clear();
    EXPECT_EQ(frame_label(f), "__vdso_clock_gettime [?]");
}

TEST(Collapsed, SortedUniqueAndDeterministic) {
    Profile p = big_profile();
    std::string a = export_to_string("collapsed", p);
    EXPECT_EQ(a, export_to_string("collapsed", p));
    Folded f = parse_folded(a);
    EXPECT_EQ(f.total, p.total_samples());
    for (size_t i = 1; i < f.lines.size(); i++)
        EXPECT_LT(f.lines[i - 1].first, f.lines[i].first) << "sorted and unique";
    // Every line starts with process;thread and has one frame per stack level.
    for (const auto& [stack, n] : f.lines) {
        EXPECT_EQ(stack.rfind("python3 service.py --shard ", 0), 0u) << stack;
        EXPECT_NE(stack.find(";worker (tid "), std::string::npos) << stack;
    }
}

// Samples of different weights: each line's value is its summed weight in ns (a count
// only when every sample weighs one period, as in MultiProcessExactLines).
TEST(Collapsed, ExportsSampleWeights) {
    test::WeightedProfile w;
    Folded f = parse_folded(export_to_string("collapsed", w.profile));
    std::map<std::string, uint64_t> per_leaf;
    for (const auto& [stack, value] : f.lines) {
        std::string leaf = stack.substr(stack.rfind(';') + 1);
        per_leaf[leaf.substr(0, leaf.find(" ("))] += value;
    }
    EXPECT_EQ(per_leaf, (std::map<std::string, uint64_t>{{"cpu_cold", w.weight_ns("cpu_cold")},
                                                         {"cpu_hot", w.weight_ns("cpu_hot")},
                                                         {"waits", w.weight_ns("waits")}}));
    EXPECT_EQ(f.total, w.profile.total_weight_ns(SampleKind::Cpu) + w.profile.total_weight_ns(SampleKind::OffCpu));
}

// The weighted file states its unit in a first comment line; a cpu mode profile of one period
// per sample stays a file of sample counts without it (MultiProcessExactLines).
TEST(Collapsed, StatesTheUnitOfWeights) {
    Folded weighted = parse_folded(export_to_string("collapsed", test::WeightedProfile().profile));
    EXPECT_EQ(weighted.unit_line, "# pybpfprof folded stacks: values in nanoseconds (mode cpu, on-CPU and off-CPU time)");
    Folded counts = parse_folded(export_to_string("collapsed", multi_profile()));
    EXPECT_EQ(counts.unit_line, "");
}

// Wall mode: nanoseconds, off-CPU stacks end in their wait leaf, every thread sums to its
// wall time.
TEST(Collapsed, WallModeWeighsOffCpuLeaves) {
    test::WallProfile w;
    Folded f = parse_folded(export_to_string("collapsed", w.profile));
    EXPECT_EQ(f.unit_line, "# pybpfprof folded stacks: values in nanoseconds (mode wall, on-CPU and off-CPU time)");
    std::map<std::string, uint64_t> per_leaf;
    for (const auto& [stack, value] : f.lines) {
        std::string leaf = stack.substr(stack.rfind(';') + 1);
        per_leaf[leaf.substr(0, leaf.find(" ("))] += value;
    }
    EXPECT_EQ(per_leaf["[waiting for the GIL]"], 800 * test::WallProfile::kMs);
    EXPECT_EQ(per_leaf["[sleeping]"], 1000 * test::WallProfile::kMs);
    EXPECT_EQ(per_leaf["[waiting for I/O]"], 100 * test::WallProfile::kMs);
    for (const auto& [leaf, ns] : per_leaf) EXPECT_EQ(ns, w.weight_ns(leaf)) << leaf;
    EXPECT_EQ(f.total, 3000 * test::WallProfile::kMs) << "three threads, one second of wall time each";
    // A gil mode run keeps on-CPU samples of one period, yet says its unit: nanoseconds.
    Profile gil = w.profile;
    gil.run.mode = ProfileMode::Gil;
    for (auto& [_, pr] : gil.processes)
        for (auto& [__, t] : pr.threads) std::erase_if(t.samples, [](const Sample& s) { return s.gil != GilState::Held; });
    Folded g = parse_folded(export_to_string("collapsed", gil));
    EXPECT_EQ(g.unit_line, "# pybpfprof folded stacks: values in nanoseconds (mode gil, on-CPU time)");
    EXPECT_EQ(g.total, 800 * test::WallProfile::kMs);
}

TEST(Speedscope, WallModeWeightsAndMetadata) {
    test::WallProfile w;
    json doc = json::parse(export_to_string("speedscope", w.profile));
    EXPECT_EQ(doc["pybpfprof"]["mode"], "wall");
    EXPECT_EQ(doc["pybpfprof"]["min_block_ns"], 1'000'000u);
    EXPECT_EQ(doc["pybpfprof"]["cpu_ns"], w.profile.total_weight_ns(SampleKind::Cpu));
    EXPECT_EQ(doc["pybpfprof"]["off_cpu_ns"], w.profile.total_weight_ns(SampleKind::OffCpu));
    const auto& frames = doc["shared"]["frames"];
    std::map<std::string, double> per_leaf;
    double total = 0;
    for (const auto& p : doc["profiles"]) {
        EXPECT_EQ(p["unit"], "seconds");
        for (size_t i = 0; i < p["samples"].size(); i++) {
            const auto& st = p["samples"][i];
            double wt = p["weights"][i].get<double>();
            per_leaf[frames[st.back().get<size_t>()]["name"].get<std::string>()] += wt;
            total += wt;
        }
    }
    EXPECT_NEAR(total, 3.0, 1e-9) << "three threads, one second each";
    for (const auto& [leaf, s] : per_leaf) EXPECT_NEAR(s, w.weight_ns(leaf) / 1e9, 1e-9) << leaf;
    EXPECT_NEAR(per_leaf["[waiting for the GIL]"], 0.8, 1e-9);
}

TEST(Collapsed, EmptyProfileGivesEmptyFile) {
    EXPECT_EQ(export_to_string("collapsed", empty_profile()), "");
    EXPECT_EQ(export_to_string("collapsed", idle_profile()), "");
}

TEST(Collapsed, SanitizesSeparatorsEverywhere) {
    Builder b;
    uint32_t f = b.frame("a;b\r\nc", "/x;y\n.py", 0);
    b.process(1, "python3 -c 'a;b\nc'");
    b.thread(1, 1, "th;r\ne");
    b.add(1, 1, {f}, 0, 2);
    Folded out = parse_folded(export_to_string("collapsed", b.p));
    ASSERT_EQ(out.lines.size(), 1u);
    EXPECT_EQ(out.lines[0].first, "python3 -c 'a:b c' (pid 1);th:r e (tid 1);a:b  c (/x:y .py)");
    EXPECT_EQ(out.lines[0].second, 2u);
}

// ------------------------------------------------------------------------ text summary

// The end-of-run top functions rank and weigh by time, not by sample count.
TEST(TextSummary, TopFunctionsByWeight) {
    test::WeightedProfile w;
    std::string text = top_functions(w.profile);
    const double all = w.weight_ns("waits") + w.weight_ns("cpu_hot") + w.weight_ns("cpu_cold");
    auto row = [&](const char* fn, int line) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "  %5.1f%% %5.1f%%  %s (/app/w.py:%d)\n", 100.0 * w.weight_ns(fn) / all,
                      100.0 * w.weight_ns(fn) / all, fn, line);
        return std::string(buf);
    };
    EXPECT_EQ(text, "Top functions by self time (8 samples):\n    self  total  function (file:line)\n" +
                        row("waits", 30) + row("cpu_hot", 10) + row("cpu_cold", 20) +
                        "    0.0% 100.0%  main (/app/w.py:1)\n")
        << text;
}

// --native: a native function is "symbol [library basename]" (with its source when known), a
// kernel one "[k] name"; ranked with the Python ones by self time.
TEST(TextSummary, TopFunctionsShowNativeLibraries) {
    const std::string text = top_functions(test::MixedProfile().profile, 5);
    EXPECT_EQ(text,
              "Top functions by self time (140 samples):\n    self  total  function (file:line)\n"
              "   42.9%  42.9%  b [_ext.cpython-311-x86_64-linux-gnu.so] (/src/ext/ext.c:7)\n"
              "   28.6%  28.6%  [k] asm_exc_page_fault\n"
              "   17.9%  17.9%  [k] vfs_read\n"
              "   10.7%  71.4%  outer (/opt/app/main.py:12)\n"
              "    0.0%  71.4%  <module> (/opt/app/main.py:30)\n")
        << text;
    const std::string all = top_functions(test::MixedProfile().profile, 20);
    EXPECT_NE(all.find("  read [libc.so.6]\n"), std::string::npos) << all;
    EXPECT_NE(all.find("  dgemm_kernel_HASWELL [libopenblas.so.0]\n"), std::string::npos) << all;
}

}  // namespace
}  // namespace pbp
