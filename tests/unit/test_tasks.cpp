// Task spans (engine/tasks.h): the task file pybpfprof.dask writes, attached to a profile
// (process by worker label or pid, thread by its tid in the process's namespace, wall-clock
// seconds onto the profile's clock), and what the HTML report makes of them: lanes of
// compute spans, and per thread the samples inside each key prefix's spans (exactly those),
// checked in headless Chromium with tests/js/check_report.mjs.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <sstream>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/merge.h"
#include "engine/profile.h"
#include "engine/tasks.h"
#include "export/html_report.h"
#include "export/raw.h"
#include "test_support.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace pbp {
namespace {

constexpr uint64_t kStart = 9'000'000'000ULL;                // CLOCK_MONOTONIC at the start
constexpr int64_t kStartUnix = 1'700'000'000'000'000'000LL;  // 2023-11-14T22:13:20Z
constexpr double kStartS = 1'700'000'000.0;
constexpr uint64_t kPeriod = 10'101'010;  // 99 Hz

// A merged-looking Dask run: the scheduler (pid 10) and two workers (pids 20, 30), each
// worker with an executor thread whose tid in its namespace differs from the host tid.
struct DaskRun {
    Profile p;
    uint32_t hot = 0, agg = 0, loop = 0;
    DaskRun() {
        p.run.target = "dask";
        p.run.start_mono_ns = kStart;
        p.run.end_mono_ns = kStart + 6'000'000'000ULL;
        p.run.start_unix_ns = kStartUnix;
        p.run.rate_hz = 99;
        p.run.period_ns = kPeriod;
        p.run.version = "0.1.0";
        p.run.kernel = "6.1.0-test";
        uint32_t mod = p.frames.intern({"<module>", "/app/job.py", 1, false});
        uint32_t f_hot = p.frames.intern({"hot_loop", "/app/job.py", 12, false});
        uint32_t f_agg = p.frames.intern({"DataFrameGroupBy.agg", "/usr/lib/python3/dist-packages/pandas/core/groupby/generic.py", 900, false});
        uint32_t f_loop = p.frames.intern({"Scheduler.transitions", "/usr/lib/python3/dist-packages/distributed/scheduler.py", 7000, false});
        hot = p.stacks.intern({mod, f_hot});
        agg = p.stacks.intern({mod, f_agg});
        loop = p.stacks.intern({mod, f_loop});
        proc(1, 10, "role", "scheduler", "");
        proc(2, 20, "worker", "tcp://127.0.0.1:4001", "");
        proc(3, 30, "worker", "tcp://127.0.0.1:4002", "");
        thread(1, 10, 10, "MainThread");
        thread(2, 25, 5, "Dask-Default-Threads-1");  // host tid 25, tid 5 in its namespace
        thread(3, 35, 35, "Dask-Default-Threads-1");
        // Samples: the scheduler all along; worker 20: hot 0.5-2.5 s, agg 3-4 s, idle samples
        // of its loop in between; worker 30: hot 1-3 s.
        add(1, 10, loop, 0, 500);
        add(2, 25, hot, 500, 198);
        add(2, 25, loop, 2600, 20);
        add(2, 25, agg, 3000, 99);
        add(3, 35, hot, 1000, 198);
    }
    void proc(uint32_t key, uint32_t pid, const std::string& k, const std::string& v, const std::string& host) {
        auto& pr = p.processes[key];
        pr.pid = pr.ns_pid = pid;
        pr.comm = "python3";
        pr.cmdline = "python3 -m distributed.cli";
        pr.labels[k] = v;
        if (k == "worker") pr.labels["role"] = "worker";
        if (!host.empty()) pr.labels["host"] = host;
    }
    void thread(uint32_t key, uint32_t tid, uint32_t ns_tid, const std::string& name) {
        auto& t = p.processes.at(key).threads[tid];
        t.tid = tid;
        t.ns_tid = ns_tid;
        t.name = name;
    }
    void add(uint32_t key, uint32_t tid, uint32_t stack, uint64_t at_ms, int n) {
        auto& t = p.processes.at(key).threads.at(tid);
        for (int k = 0; k < n; k++) t.samples.push_back({kStart + at_ms * 1'000'000ULL + k * kPeriod, stack, 0, SampleKind::Cpu, kPeriod});
    }
};

json task(const std::string& key, const std::string& prefix, const std::string& worker, int pid, int tid,
          double start_s, double stop_s) {
    return {{"key", key}, {"prefix", prefix}, {"worker", worker}, {"pid", pid}, {"tid", tid},
            {"startstops", {{{"action", "compute"}, {"start", kStartS + start_s}, {"stop", kStartS + stop_s}}}}};
}

// The Dask run's task file: two hot tasks per worker, one groupby-agg task on worker 1, a
// transfer, and a task of a worker that was not profiled.
json task_file() {
    json tasks = json::array();
    tasks.push_back(task("hot-a", "hot", "tcp://127.0.0.1:4001", 20, 5, 0.5, 1.5));
    tasks.push_back(task("hot-b", "hot", "tcp://127.0.0.1:4001", 20, 5, 1.5, 2.5));
    tasks.push_back(task("('groupby-agg-1f', 0)", "groupby-agg", "tcp://127.0.0.1:4001", 20, 5, 3.0, 4.0));
    tasks.push_back(task("hot-c", "hot", "tcp://127.0.0.1:4002", 30, 35, 1.0, 2.0));
    tasks.push_back(task("hot-d", "hot", "tcp://127.0.0.1:4002", 30, 35, 2.0, 3.0));
    json transfer = json::object({{"action", "transfer"}, {"start", kStartS + 1.9}, {"stop", kStartS + 2.0},
                                  {"source", "tcp://127.0.0.1:4001"}});
    tasks.back()["startstops"].insert(tasks.back()["startstops"].begin(), transfer);
    tasks.push_back(task("lost-x", "lost", "tcp://127.0.0.1:4999", 99, 99, 1.0, 1.2));
    return {{"format", "pybpfprof-tasks"}, {"version", 1}, {"source", "dask"}, {"tasks", tasks}};
}

TEST(TaskFile, AttachesSpansToTheWorkersThreadsOnTheProfilesClock) {
    DaskRun r;
    AttachedTasks got;
    std::string error;
    ASSERT_TRUE(attach_tasks(r.p, task_file().dump(), got, error)) << error;
    EXPECT_EQ(got.tasks, 6u);
    EXPECT_EQ(got.spans, 7u);
    EXPECT_EQ(got.attached, 6u);
    EXPECT_EQ(got.unmatched, 1u);
    ASSERT_EQ(got.warnings.size(), 1u);
    EXPECT_NE(got.warnings[0].find("tcp://127.0.0.1:4999"), std::string::npos) << got.warnings[0];
    ASSERT_EQ(r.p.tasks.size(), 6u);
    // Sorted by (process, tid, start); worker 1's tid 5 (its namespace) is host tid 25.
    const TaskSpan& a = r.p.tasks[0];
    EXPECT_EQ(a.process, 2u);
    EXPECT_EQ(a.tid, 25u);
    EXPECT_EQ(a.key, "hot-a");
    EXPECT_EQ(a.prefix, "hot");
    EXPECT_EQ(a.action, "compute");
    EXPECT_NEAR(static_cast<double>(a.start_ns), static_cast<double>(kStart + 500'000'000ULL), 1000.0);
    EXPECT_NEAR(static_cast<double>(a.stop_ns), static_cast<double>(kStart + 1'500'000'000ULL), 1000.0);
    EXPECT_EQ(r.p.tasks[2].prefix, "groupby-agg");
    EXPECT_EQ(r.p.tasks[3].process, 3u);
    EXPECT_EQ(r.p.tasks[3].tid, 35u);
    EXPECT_EQ(r.p.tasks[4].action, "transfer");
    EXPECT_EQ(r.p.tasks[5].key, "hot-d");
}

TEST(TaskFile, MatchesByPidWhenNoProcessHasWorkerLabels) {
    DaskRun r;
    for (auto& [_, pr] : r.p.processes) pr.labels.clear();
    AttachedTasks got;
    std::string error;
    ASSERT_TRUE(attach_tasks(r.p, task_file().dump(), got, error)) << error;
    EXPECT_EQ(got.attached, 6u);
    EXPECT_EQ(r.p.tasks[0].process, 2u);
    EXPECT_EQ(r.p.tasks[0].tid, 25u);
    // Two machines with the same pid: ambiguous without a host, placed with one.
    r.p.processes[4] = r.p.processes.at(2);
    r.p.processes.at(2).labels["host"] = "node-a";
    r.p.processes.at(4).labels["host"] = "node-b";
    r.p.tasks.clear();
    json f = task_file();
    ASSERT_TRUE(attach_tasks(r.p, f.dump(), got, error)) << error;
    EXPECT_EQ(got.attached, 3u) << "worker 30's only (a transfer and two computes)";
    for (auto& t : f["tasks"]) t["host"] = "node-b";
    r.p.tasks.clear();
    ASSERT_TRUE(attach_tasks(r.p, f.dump(), got, error)) << error;
    EXPECT_EQ(got.attached, 6u);
    EXPECT_EQ(r.p.tasks[0].process, 3u);
    EXPECT_EQ(r.p.tasks[3].process, 4u);
    EXPECT_EQ(r.p.tasks[3].key, "hot-a");
}

TEST(TaskFile, RefusesWhatIsNotATaskFile) {
    auto refuse = [](const std::string& text, const std::string& why) {
        DaskRun r;
        AttachedTasks got;
        std::string error;
        EXPECT_FALSE(attach_tasks(r.p, text, got, error)) << text;
        EXPECT_NE(error.find(why), std::string::npos) << error;
        EXPECT_TRUE(r.p.tasks.empty());
    };
    refuse("not json", "not JSON");
    refuse("{\"format\": \"speedscope\"}", "not a task file");
    refuse("{\"format\": \"pybpfprof-tasks\", \"version\": 2, \"tasks\": []}", "version 2");
    refuse("{\"format\": \"pybpfprof-tasks\", \"version\": 1}", "no \"tasks\"");
    json f = task_file();
    f["tasks"][1]["startstops"][0]["stop"] = kStartS;  // before its start
    refuse(f.dump(), "stops before it starts");
    f = task_file();
    f["tasks"][0].erase("key");
    refuse(f.dump(), "has no \"key\"");
    f = task_file();
    f["tasks"][0]["startstops"][0]["start"] = "soon";
    refuse(f.dump(), "needs numbers");
    f = task_file();
    f["tasks"][0]["tid"] = -3;
    refuse(f.dump(), "thread id");
    f = task_file();
    f["tasks"][0]["key"] = std::string(5000, 'k');
    refuse(f.dump(), "longer than");
    DaskRun r;
    AttachedTasks got;
    std::string error;
    TaskLimits small;
    small.max_spans = 3;
    EXPECT_FALSE(attach_tasks(r.p, task_file().dump(), got, error, small));
    EXPECT_NE(error.find("more than 3 spans"), std::string::npos) << error;
    r.p.run.start_unix_ns = 0;
    EXPECT_FALSE(attach_tasks(r.p, task_file().dump(), got, error));
    EXPECT_NE(error.find("wall-clock"), std::string::npos) << error;
}

// ---- the lossless format (pbp) and the merge ---------------------------------------------

TEST(TaskFile, SpansRoundTripThroughPbp) {
    DaskRun r;
    AttachedTasks got;
    std::string error;
    ASSERT_TRUE(attach_tasks(r.p, task_file().dump(), got, error)) << error;
    std::ostringstream os;
    write_raw(r.p, os);
    Profile back;
    ASSERT_TRUE(read_raw(os.str(), back, error)) << error;
    EXPECT_EQ(back.tasks, r.p.tasks);
    EXPECT_TRUE(back == r.p);
    // A profile without tasks has no "tasks" field (as files written before tasks existed).
    DaskRun plain;
    EXPECT_EQ(raw_json(plain.p).find("\"tasks\""), std::string::npos);
}

TEST(TaskFile, ThePbpReaderChecksTheSpans) {
    DaskRun r;
    AttachedTasks got;
    std::string error;
    ASSERT_TRUE(attach_tasks(r.p, task_file().dump(), got, error)) << error;
    const json good = json::parse(raw_json(r.p));
    auto refused = [&](const std::function<void(json&)>& damage, const std::string& why) {
        json j = good;
        damage(j);
        Profile out;
        std::string e;
        EXPECT_FALSE(read_raw(j.dump(), out, e)) << why;
        EXPECT_NE(e.find(why), std::string::npos) << e;
    };
    refused([](json& j) { j["tasks"]["process"][0] = 77; }, "is not the key of a process");
    refused([](json& j) { j["tasks"]["key"][0] = 999; }, "is not a text index");
    refused([](json& j) { j["tasks"]["tid"].erase(0); }, "must be as long as each other");
    refused([](json& j) { j["tasks"]["stop_ns"][0] = 0; }, "stops before it starts");
    refused([](json& j) { std::swap(j["tasks"]["start_ns"][0], j["tasks"]["start_ns"][1]);
                          std::swap(j["tasks"]["stop_ns"][0], j["tasks"]["stop_ns"][1]); }, "not sorted");
    refused([](json& j) { j["tasks"]["colour"] = json::array(); }, "unknown field");
}

TEST(TaskFile, MergingMovesSpansWithTheirProcesses) {
    // Two inputs: the task file attached to each; the second started 2 s later (wall clock)
    // on a machine whose monotonic clock is 100 s ahead.
    DaskRun a, b;
    b.p.run.start_mono_ns += 100'000'000'000ULL;
    b.p.run.end_mono_ns += 100'000'000'000ULL;
    b.p.run.start_unix_ns += 2'000'000'000LL;
    for (auto& [_, pr] : b.p.processes)
        for (auto& [__, t] : pr.threads)
            for (Sample& s : t.samples) s.ts_ns += 100'000'000'000ULL;
    AttachedTasks got;
    std::string error;
    json f = task_file();
    ASSERT_TRUE(attach_tasks(a.p, f.dump(), got, error)) << error;
    for (auto& t : f["tasks"])
        for (auto& ss : t["startstops"]) ss["start"] = ss["start"].get<double>() + 2, ss["stop"] = ss["stop"].get<double>() + 2;
    ASSERT_TRUE(attach_tasks(b.p, f.dump(), got, error)) << error;
    const uint64_t a0 = a.p.tasks[0].start_ns, b0 = b.p.tasks[0].start_ns;
    EXPECT_NEAR(static_cast<double>(b0 - a0), 100e9, 1e4);  // b's clock is 100 s ahead; its tasks started 2 s after its run, as a's
    Profile m = merge_profiles({a.p, b.p}, MergeOptions{}, error);
    ASSERT_TRUE(error.empty()) << error;
    ASSERT_EQ(m.tasks.size(), 12u);
    EXPECT_EQ(m.tasks[0].process, 2u);  // a's worker 20
    EXPECT_EQ(m.tasks[6].process, 5u);  // b's worker 20
    EXPECT_EQ(m.tasks[6].tid, 25u);
    // On one clock: b's first span 2 s after a's, as on the wall clock.
    EXPECT_NEAR(static_cast<double>(m.tasks[6].start_ns - m.tasks[0].start_ns), 2e9, 1e4);
    EXPECT_EQ(m.run.unix_ns(m.tasks[0].start_ns), a.p.run.unix_ns(a0));
}

TEST(TaskFile, MergeCommandAttachesATaskFile) {
    DaskRun r;
    std::string dir = test::temp_dir();
    {
        std::ofstream f(dir + "/w.pbp", std::ios::binary);
        write_raw(r.p, f);
    }
    std::ofstream(dir + "/tasks.json") << task_file().dump();
    auto res = test::run({PBP_BIN, "merge", dir + "/w.pbp", "-o", dir + "/out.pbp", "--no-summary", "--tasks",
                          dir + "/tasks.json"});
    ASSERT_EQ(res.status, 0) << res.out << res.err;
    EXPECT_NE(res.err.find("1 task spans of tcp://127.0.0.1:4999 are left out"), std::string::npos) << res.err;
    std::ifstream in(dir + "/out.pbp", std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Profile out;
    std::string error;
    ASSERT_TRUE(read_raw(data, out, error)) << error;
    EXPECT_EQ(out.tasks.size(), 6u);
    // A file that is not a task file is bad input (2), and says which.
    std::ofstream(dir + "/bad.json") << "{\"format\": \"speedscope\"}";
    res = test::run({PBP_BIN, "merge", dir + "/w.pbp", "-o", dir + "/out2.html", "--tasks", dir + "/bad.json"});
    EXPECT_EQ(res.status, 2) << res.out << res.err;
    EXPECT_NE(res.err.find("bad.json: not a task file"), std::string::npos) << res.err;
    EXPECT_FALSE(fs::exists(dir + "/out2.html"));
}

// ---- the report ---------------------------------------------------------------------

json embedded(const std::string& html) {
    const std::string a = "<script type=\"application/json\" id=\"pbp-data\">";
    size_t i = html.find(a);
    EXPECT_NE(i, std::string::npos);
    size_t j = html.find("</script>", i);
    return json::parse(html.substr(i + a.size(), j - i - a.size()));
}

std::vector<uint64_t> varints(const std::string& b64) {
    static const std::string tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : b64) {
        if (c == '=') break;
        acc = (acc << 6) | static_cast<uint32_t>(tbl.find(c));
        bits += 6;
        if (bits >= 8) bits -= 8, bytes.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
    std::vector<uint64_t> out;
    uint64_t v = 0;
    int shift = 0;
    for (unsigned char x : bytes) {
        v |= uint64_t(x & 0x7f) << shift;
        if (x & 0x80) shift += 7;
        else out.push_back(v), v = 0, shift = 0;
    }
    return out;
}

uint64_t cells_total(const std::string& b64) {
    auto c = varints(b64);
    uint64_t total = 0;
    for (size_t i = 0; i < c.size();) {
        i++;
        uint64_t n = c[i++];
        for (uint64_t j = 0; j < n; j++) i++, total += c[i++];
    }
    return total;
}

// Samples of a thread whose timestamp lies in [a, b] seconds after the start.
uint64_t samples_in(const Profile& p, uint32_t key, uint32_t tid, double a, double b) {
    uint64_t n = 0;
    for (const Sample& s : p.processes.at(key).threads.at(tid).samples) {
        double t = (s.ts_ns - kStart) / 1e9;
        n += t >= a && t <= b;
    }
    return n;
}

TEST(TaskReport, EmbedsLanesAndTheSamplesInsideEachPrefixsSpans) {
    DaskRun r;
    AttachedTasks got;
    std::string error;
    ASSERT_TRUE(attach_tasks(r.p, task_file().dump(), got, error)) << error;
    json d = embedded(render_html_report(r.p));
    ASSERT_TRUE(d["tasks"].is_object()) << d["tasks"];
    const json& t = d["tasks"];
    // Prefixes by compute time: hot (4 s), groupby-agg (1 s); the transfer is not a lane span.
    ASSERT_EQ(t["prefixes"].size(), 2u) << t["prefixes"];
    EXPECT_EQ(t["prefixes"][0]["name"], "hot");
    EXPECT_EQ(t["prefixes"][0]["tasks"], 4);
    EXPECT_NEAR(t["prefixes"][0]["compute_ns"].get<double>(), 4e9, 1e4);
    EXPECT_EQ(t["prefixes"][1]["name"], "groupby-agg");
    EXPECT_EQ(t["other_spans"], 1);
    EXPECT_EQ(t["whole_only"], false);
    ASSERT_EQ(t["lanes"].size(), 2u);
    EXPECT_EQ(t["lanes"][0]["proc"], 1);  // worker 20 is the second process
    EXPECT_EQ(t["lanes"][0]["tid"], 25);
    EXPECT_EQ(t["lanes"][0]["n"], 3);
    auto v = varints(t["lanes"][0]["spans"]);
    ASSERT_EQ(v.size(), 12u);
    EXPECT_EQ(v[0], 500'000u);   // starts 0.5 s in (µs)
    EXPECT_EQ(v[1], 1'000'000u); // lasts 1 s
    EXPECT_EQ(v[2], 0u);         // hot
    EXPECT_EQ(t["keys"][v[3] - 1], "hot-a");
    EXPECT_EQ(v[8], 1'500'000u);  // the groupby-agg task starts 1.5 s after the second hot one
    EXPECT_EQ(v[10], 1u);
    EXPECT_EQ(t["keys"][v[11] - 1], "('groupby-agg-1f', 0)");
    // Per thread, each prefix's cells hold exactly the samples inside its spans.
    std::map<std::pair<uint32_t, int>, uint64_t> got_cells;
    const json& procs = d["procs"];
    for (size_t pi = 0; pi < procs.size(); pi++)
        for (const auto& th : procs[pi]["threads"])
            if (th.contains("pcells"))
                for (const auto& pc : th["pcells"]) got_cells[{th["tid"].get<uint32_t>(), pc[0].get<int>()}] = cells_total(pc[1]);
    EXPECT_EQ(got_cells.size(), 3u);
    EXPECT_EQ((got_cells[{25, 0}]), samples_in(r.p, 2, 25, 0.5, 2.5));
    EXPECT_EQ((got_cells[{25, 1}]), samples_in(r.p, 2, 25, 3.0, 4.0));
    EXPECT_EQ((got_cells[{35, 0}]), samples_in(r.p, 3, 35, 1.0, 3.0));
    EXPECT_EQ((got_cells[{25, 0}]), 198u);
    EXPECT_EQ((got_cells[{25, 1}]), 99u);
    // A report without tasks has none.
    DaskRun plain;
    EXPECT_TRUE(embedded(render_html_report(plain.p))["tasks"].is_null());
}

TEST(TaskReport, PrefixCellsFallBackToTheWholeRunOverBudget) {
    DaskRun r;
    AttachedTasks got;
    std::string error;
    ASSERT_TRUE(attach_tasks(r.p, task_file().dump(), got, error)) << error;
    HtmlReportLimits lim;
    lim.max_cells = 8;  // a quarter: 2 prefix cells, fewer than the three threads' prefixes need
    json d = embedded(render_html_report(r.p, {}, lim));
    EXPECT_EQ(d["tasks"]["whole_only"], true);
    EXPECT_NE(d["tasks"]["note"].get<std::string>().find("whole run only"), std::string::npos);
    uint64_t hot = 0;
    for (const auto& pr : d["procs"])
        for (const auto& th : pr["threads"])
            if (th.contains("pcells"))
                for (const auto& pc : th["pcells"]) {
                    auto c = varints(pc[1]);
                    EXPECT_EQ(c[0], 1u) << "one bin: 0";
                    if (pc[0] == 0) hot += cells_total(pc[1]);
                }
    EXPECT_EQ(hot, 396u);
}

TEST(TaskReport, LanesAndPrefixScopingWorkInHeadlessChromium) {
    const std::string js = test::source_dir() + "/tests/js";
    PBP_REQUIRE(fs::exists(js + "/node_modules/playwright-core/package.json") && fs::exists("/usr/bin/chromium"),
                "tests/js/node_modules or /usr/bin/chromium missing (tools/install-deps)");
    DaskRun r;
    AttachedTasks got;
    std::string error;
    ASSERT_TRUE(attach_tasks(r.p, task_file().dump(), got, error)) << error;
    std::string dir = test::temp_dir();
    std::string file = dir + "/dask.html";
    std::ofstream(file) << render_html_report(r.p);
    if (const char* keep = getenv("PBP_REPORT_KEEP"))
        fs::copy_file(file, std::string(keep) + "/dask.html", fs::copy_options::overwrite_existing);
    std::ofstream(dir + "/expect.json") << json{{"functions", {"hot_loop", "Scheduler.transitions"}},
                                                 {"min_processes", 3},
                                                 {"task_lanes", 2},
                                                 {"prefixes", {"hot", "groupby-agg"}},
                                                 {"scope_prefix", "hot"}}
                                                .dump();
    PBP_SKIP_BROWSER_CHECK();
    auto res = test::run({"node", js + "/check_report.mjs", file, dir + "/expect.json"}, 600);
    EXPECT_EQ(res.status, 0) << res.out << res.err;
    EXPECT_NE(res.out.find("ok " + file), std::string::npos) << res.out << res.err;
    EXPECT_NE(res.out.find("2 task lanes drawn"), std::string::npos) << res.out;
    EXPECT_NE(res.out.find("prefix hot: totals 1015 -> 396 units"), std::string::npos) << res.out;
}

}  // namespace
}  // namespace pbp
