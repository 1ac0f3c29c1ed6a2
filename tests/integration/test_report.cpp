// End-to-end HTML report: the real BPF program profiling real CPython processes with
// `-f html` (and `--report FILE` next to another format), then the page checked in its real
// consumer, headless Chromium (tests/js/check_report.mjs).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "export/raw.h"
#include "pprof_reader.h"
#include "speedscope_reader.h"
#include "test_support.h"

namespace pbp::test {
namespace {


std::string between(const std::string& s, const std::string& a, const std::string& b) {
    size_t i = s.find(a);
    if (i == std::string::npos) return "";
    i += a.size();
    size_t j = s.find(b, i);
    return j == std::string::npos ? "" : s.substr(i, j - i);
}

// The report's base64 varint sequences.
std::vector<uint64_t> varints(const std::string& b64) {
    static const std::string tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::vector<uint64_t> v;
    uint32_t acc = 0;
    int bits = 0, shift = 0;
    uint64_t cur = 0;
    for (char ch : b64) {
        if (ch == '=') break;
        acc = (acc << 6) | static_cast<uint32_t>(tbl.find(ch));
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            unsigned x = (acc >> bits) & 0xff;
            cur |= uint64_t(x & 0x7f) << shift;
            if (x & 0x80) shift += 7;
            else v.push_back(cur), cur = 0, shift = 0;
        }
    }
    return v;
}

nlohmann::json report_data(const std::string& path) {
    std::string html = read_file(path);
    return nlohmann::json::parse(between(html, "<script type=\"application/json\" id=\"pbp-data\">", "</script>"),
                                 nullptr, false);
}

bool report_checker_available(std::string& why) {
    if (access((source_dir() + "/tests/js/node_modules/playwright-core/package.json").c_str(), F_OK) != 0) {
        why = "tests/js/node_modules missing: run tools/install-deps (npm ci in tests/js)";
        return false;
    }
    if (access("/usr/bin/chromium", X_OK) != 0) {
        why = "/usr/bin/chromium missing: apt-get install -y chromium";
        return false;
    }
    return true;
}

class Report : public ::testing::Test {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
        dir = temp_dir();
    }
    std::vector<std::string> python() { return host_python().argv; }
    std::string dir;
};

// cpu_split.py and threads.py side by side (children of one Python parent), 2 s, -f html:
// the page loads offline without errors, the flame graph shows their functions, search
// highlights, clicking a process changes the top table and a dragged time range changes
// the totals; CPU/RSS readings and the speedscope download are in.
TEST_F(Report, HtmlOfARealRunWorksInChromium) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    std::string out = dir + "/run.html";
    std::string parent =
        "import subprocess, sys\n"
        "ps = [subprocess.Popen([sys.executable, a, '2']) for a in sys.argv[1:]]\n"
        "sys.exit(max(p.wait() for p in ps))\n";
    std::vector<std::string> cmd{pybpfprof_bin(), "-q", "-f", "html", "-o", out, "--"};
    for (auto& a : python()) cmd.push_back(a);
    for (auto a : {std::string("-c"), parent, workload("cpu_split.py"), workload("threads.py")}) cmd.push_back(a);
    auto r = run(cmd, 120);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("Wrote " + out + ": "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("file://" + out), std::string::npos) << "how to open it: " << r.err;
    EXPECT_NE(r.err.find("Top functions"), std::string::npos) << "the terminal summary stays: " << r.err;

    auto d = report_data(out);
    ASSERT_FALSE(d.is_discarded());
    EXPECT_GE(d["procs"].size(), 3u) << "parent, cpu_split.py and threads.py";
    EXPECT_GT(d["run"]["samples"].get<uint64_t>(), 60u);
    size_t with_cpu = 0;
    for (auto& p : d["procs"])
        for (auto& c : p["res"]["cpu"]) with_cpu += !c.is_null();
    EXPECT_GT(with_cpu, 0u) << "CPU % readings from /proc";

    std::ofstream(dir + "/expect.json") << nlohmann::json{
        {"functions", {"Splitter.hot_seventy", "Splitter.hot_thirty", "busy_0", "busy_3"}},
        {"search", "hot_"},
        {"min_processes", 2},
        {"resources", true},
        {"raw", true}}.dump();
    auto c = run({"node", source_dir() + "/tests/js/check_report.mjs", "--screenshot", dir + "/run.png", out,
                  dir + "/expect.json"},
                 300);
    EXPECT_EQ(c.status, 0) << c.out << c.err;
    EXPECT_NE(c.out.find("ok " + out), std::string::npos) << c.out << c.err;
}

// GIL lanes from real BPF: two threads spinning in pure Python share the GIL and a third
// hashes big buffers (hashlib releases the GIL). The report's data has each thread's held
// time, the process's GIL utilisation is the spinners' (the GIL is held nearly all the run),
// and Chromium draws a held and a waiting lane per thread.
TEST_F(Report, GilLanesOfARealRunInChromium) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    const std::string out = dir + "/gil.html";
    const std::string script =
        "import hashlib, threading, time\n"
        "def spin():\n"
        "    end = time.time() + 3\n"
        "    while time.time() < end: pass\n"
        "def hashing():\n"
        "    buf = b'x' * (32 << 20)\n"
        "    end = time.time() + 3\n"
        "    while time.time() < end: hashlib.sha256(buf).digest()\n"
        "ts = [threading.Thread(target=f) for f in (spin, spin, hashing)]\n"
        "for t in ts: t.start()\n"
        "for t in ts: t.join()\n";
    std::vector<std::string> cmd{pybpfprof_bin(), "-q", "-f", "html", "-o", out, "--"};
    for (auto& a : python()) cmd.push_back(a);
    cmd.push_back("-c");
    cmd.push_back(script);
    auto r = run(cmd, 120);
    ASSERT_EQ(r.status, 0) << r.err;
    auto d = report_data(out);
    ASSERT_FALSE(d.is_discarded());
    ASSERT_EQ(d["procs"].size(), 1u);
    const auto& p = d["procs"][0];
    ASSERT_TRUE(p["gil"].is_object()) << "the GIL state of " << p["python"] << " is known: " << p.dump().substr(0, 400);
    const double util = p["gil"]["share"].get<double>();
    EXPECT_GT(util, 0.5) << "two spinners hold the GIL most of the run";
    EXPECT_LE(util, 1.05);
    size_t spinners = 0, lanes = 0;
    for (const auto& t : p["threads"]) {
        if (!t["gil"].is_object()) continue;
        lanes += 2;
        spinners += t["gil"]["held_ns"].get<uint64_t>() >= 500'000'000u;
    }
    EXPECT_GE(spinners, 2u) << p.dump().substr(0, 2000);
    std::ofstream(dir + "/expect.json") << nlohmann::json{{"functions", {"spin", "hashing"}},
                                                          {"gil", {{"lanes", lanes}}}}.dump();
    auto c = run({"node", source_dir() + "/tests/js/check_report.mjs", "--screenshot", dir + "/gil.png", out,
                  dir + "/expect.json"},
                 300);
    EXPECT_EQ(c.status, 0) << c.out << c.err;
    EXPECT_NE(c.out.find(std::to_string(lanes) + " GIL lanes drawn"), std::string::npos) << c.out << c.err;
}

// 120 pool threads named in Python only (tests/workloads/named_pool.py: their OS name is the
// interpreter's), taking turns at the GIL, profiled with --mode wall, launched with a command
// line holding a 188-character word. In Chromium at 1400x1000 and 1000x800: the GIL section
// is grouped by process as the timeline is (one group, which closes and opens), every thread
// has its row (none left out), labelled with the Python name the workload printed for its tid
// and with the same label as in the timeline; the rows scroll in a box at most 300 px high,
// so the flame graph starts within 1.5 window heights; and nothing makes the page scroll
// sideways (the title is cut, not widened).
TEST_F(Report, GilLanesOfManyNamedThreadsStayBoundedAndGrouped) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    const std::string out = dir + "/pool.html";
    std::string word = "--run_id=pybpfprof_report_layout_check";
    for (int i = 0; i < 5; i++) word += "_pybpfprof_report_layout_check";
    ASSERT_EQ(word.size(), 188u);
    std::vector<std::string> cmd{pybpfprof_bin(), "-q", "--mode", "wall", "-f", "html", "-o", out, "--"};
    for (auto& a : python()) cmd.push_back(a);
    for (auto a : {workload("named_pool.py"), std::string("120"), std::string("3"), word}) cmd.push_back(a);
    auto r = run(cmd, 180);
    ASSERT_EQ(r.status, 0) << r.err;
    // What the workload says each thread is: "thread NAME TID".
    nlohmann::json names = nlohmann::json::object();
    std::smatch m;
    for (auto it = r.out.cbegin(); std::regex_search(it, r.out.cend(), m, std::regex(R"(thread (pool-\d+) (\d+)\n)")); it = m.suffix().first)
        names[m[2].str()] = m[1].str();
    ASSERT_EQ(names.size(), 120u) << r.out;

    auto d = report_data(out);
    ASSERT_FALSE(d.is_discarded());
    ASSERT_EQ(d["procs"].size(), 1u);
    EXPECT_NE(d["run"]["target"].get<std::string>().find(word), std::string::npos) << d["run"]["target"];
    size_t lanes = 0, rows = 0;
    for (const auto& t : d["procs"][0]["threads"]) {
        rows += t["n"].get<uint64_t>() > 0 || t["gil"].is_object();
        if (t["gil"].is_object()) lanes += 2;
        const std::string tid = std::to_string(t["tid"].get<uint32_t>());
        if (names.contains(tid)) {
            EXPECT_EQ(t["name"], names[tid]) << "the report's name of tid " << tid;
        }
    }
    EXPECT_GE(rows, 121u) << "the pool and the main thread";
    EXPECT_GE(lanes, 240u) << "the GIL state of every pool thread is known";

    std::ofstream(dir + "/expect.json") << nlohmann::json{
        {"functions", {"main.<locals>.body", "[sleeping]"}},
        {"gil", {{"lanes", lanes}, {"groups", 1}, {"threads", rows}, {"thread_names", names}, {"scrolls", true},
                 {"max_box_h", 300}, {"flame_within_screens", 1.5}}},
        {"timeline", {{"groups", 1}, {"thread_names", names}}},
        {"layout", {{"dir", dir}, {"min_columns", 10}}}}.dump();
    auto c = run({"node", source_dir() + "/tests/js/check_report.mjs", "--screenshot", dir + "/pool.png", out,
                  dir + "/expect.json"},
                 300);
    EXPECT_EQ(c.status, 0) << c.out << c.err;
    EXPECT_NE(c.out.find(std::to_string(lanes) + " GIL lanes drawn"), std::string::npos) << c.out << c.err;
    EXPECT_NE(c.out.find("GIL rows: " + std::to_string(rows + 1) + " (1 process groups, " + std::to_string(rows) + " threads"),
              std::string::npos) << c.out;
    if (const char* keep = getenv("PBP_REPORT_KEEP"))  // the temp dir goes with the test
        for (const char* png : {"pool.png", "report-1400x1000.png", "report-1000x800.png"})
            run({"cp", dir + "/" + png, std::string(keep) + "/pool-" + png}, 30);
    std::cout << c.out << "screenshots in " << dir << "\n";
}

// A real --mode wall run (real BPF: two threads contending for the GIL, one sleeping) saved as
// .pbp and exported by `pybpfprof merge` to every format, each read by its real consumer:
// go tool pprof's totals per sample type equal ours, the speedscope app loads the JSON (with a
// [sleeping] frame) and the folded file (adding up to our nanoseconds), and the report works in
// Chromium with a held and a waiting GIL lane per contending thread.
TEST_F(Report, RealWallRunThroughEveryConsumer) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    PBP_REQUIRE(have_go(), "go is not installed (Debian golang-go; tools/install-deps)");
    const std::string script =
        "import threading, time\n"
        "def spin():\n"
        "    end = time.time() + 2\n"
        "    while time.time() < end: pass\n"
        "def nap():\n"
        "    end = time.time() + 2\n"
        "    while time.time() < end: time.sleep(0.05)\n"
        "ts = [threading.Thread(target=f) for f in (spin, spin, nap)]\n"
        "for t in ts: t.start()\n"
        "for t in ts: t.join()\n";
    const std::string pbp = dir + "/wall.pbp";
    std::vector<std::string> cmd{pybpfprof_bin(), "-q", "--mode", "wall", "-r", "199", "-o", pbp, "--"};
    for (auto& a : python()) cmd.push_back(a);
    cmd.push_back("-c");
    cmd.push_back(script);
    auto r = run(cmd, 120);
    ASSERT_EQ(r.status, 0) << r.err;
    Profile p;
    std::string error;
    ASSERT_TRUE(read_raw(read_file(pbp), p, error)) << error;
    const int64_t cpu = static_cast<int64_t>(p.total_weight_ns(SampleKind::Cpu));
    const int64_t off = static_cast<int64_t>(p.total_weight_ns(SampleKind::OffCpu));
    ASSERT_GT(cpu, 1'000'000'000) << "two spinners for 2 s";
    ASSERT_GT(off, 1'500'000'000) << "a napper for 2 s, and GIL waits";
    for (const char* out : {"wall.pb.gz", "wall.json", "wall.folded", "wall.html"}) {
        auto m = run({pybpfprof_bin(), "merge", pbp, "-o", dir + "/" + out, "--no-summary"}, 120);
        ASSERT_EQ(m.status, 0) << m.err;
    }
    auto g = go_pprof({"-raw"}, dir + "/wall.pb.gz");
    ASSERT_EQ(g.status, 0) << g.err;
    auto raw = parse_go_raw(g.out);
    ASSERT_EQ(raw.sample_types,
              (std::vector<std::string>{"samples/count", "wall/nanoseconds[dflt]", "cpu/nanoseconds", "off_cpu/nanoseconds"}));
    EXPECT_EQ(raw.total(1), cpu + off);
    EXPECT_EQ(raw.total(2), cpu);
    EXPECT_EQ(raw.total(3), off);
    const std::string js = source_dir() + "/tests/js";
    auto j = run({"node", js + "/check_speedscope.mjs", "--expect-frame", "[sleeping]", dir + "/wall.json"}, 300);
    EXPECT_EQ(j.status, 0) << j.out << j.err;
    auto f = run({"node", js + "/check_speedscope.mjs", dir + "/wall.folded"}, 300);
    EXPECT_EQ(f.status, 0) << f.out << f.err;
    EXPECT_NE(f.out.find(std::to_string(cpu + off) + " samples"), std::string::npos) << f.out;
    auto d = report_data(dir + "/wall.html");
    ASSERT_FALSE(d.is_discarded());
    ASSERT_EQ(d["procs"].size(), 1u);
    size_t lanes = 0, waiting = 0;
    for (const auto& t : d["procs"][0]["threads"]) {
        if (!t["gil"].is_object()) continue;
        lanes += 2;
        waiting += t["gil"].value("waiting_ns", uint64_t(0)) > 100'000'000u;
    }
    EXPECT_GE(waiting, 2u) << "the spinners wait for the GIL: " << d["procs"][0].dump().substr(0, 2000);
    std::ofstream(dir + "/expect.json") << nlohmann::json{{"functions", {"spin", "nap"}}, {"gil", {{"lanes", lanes}}}}.dump();
    auto c = run({"node", js + "/check_report.mjs", dir + "/wall.html", dir + "/expect.json"}, 300);
    EXPECT_EQ(c.status, 0) << c.out << c.err;
    EXPECT_NE(c.out.find(std::to_string(lanes) + " GIL lanes drawn"), std::string::npos) << c.out << c.err;
}

// A run longer than its sample window (PYBPFPROF_SAMPLE_WINDOW=1,0.25: timestamps for the last
// second, 250 ms buckets before): the .pbp holds buckets, and every output made from it holds
// exactly the samples taken. go tool pprof's sample count and weight, speedscope's weights
// (the app loads the file) and the report's samples and timeline (which still starts at the
// run's start, its first second as full as the rest; the page works in Chromium).
TEST_F(Report, RunLongerThanTheSampleWindowThroughEveryConsumer) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    PBP_REQUIRE(have_go(), "go is not installed (Debian golang-go; tools/install-deps)");
    const std::string pbp = dir + "/long.pbp";
    std::vector<std::string> cmd{pybpfprof_bin(), "-r", "499", "-o", pbp, "--"};
    for (auto& a : python()) cmd.push_back(a);
    cmd.push_back(workload("cpu_split.py"));
    cmd.push_back("5");
    setenv("PYBPFPROF_SAMPLE_WINDOW", "1,0.25", 1);
    auto r = run(cmd, 120);
    unsetenv("PYBPFPROF_SAMPLE_WINDOW");
    ASSERT_EQ(r.status, 0) << r.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.err, m, std::regex(R"(Wrote \S+: (\d+) samples)"))) << r.err;
    const uint64_t n = std::stoull(m[1].str());
    ASSERT_GT(n, 1000u) << "5 s at 499 Hz\n" << r.err;

    Profile p;
    std::string error;
    ASSERT_TRUE(read_raw(read_file(pbp), p, error)) << error;
    EXPECT_EQ(p.total_samples(), n);
    const uint64_t period = p.run.period_ns;
    ASSERT_GT(period, 0u);
    EXPECT_EQ(p.total_weight_ns(SampleKind::Cpu), n * period);
    size_t buckets = 0, raw_samples = 0;
    uint64_t oldest_raw = UINT64_MAX;
    for (const auto& [_, pr] : p.processes)
        for (const auto& [__, t] : pr.threads)
            for (const Sample& s : t.samples) {
                if (s.span_ns) {
                    buckets++;
                    EXPECT_EQ(s.span_ns, 250'000'000u);
                    EXPECT_EQ(s.weight_ns, s.count * period);
                } else {
                    raw_samples++;
                    oldest_raw = std::min(oldest_raw, s.ts_ns);
                }
            }
    EXPECT_GT(buckets, 0u) << "4 s of the run are older than the window";
    EXPECT_GT(raw_samples, 0u);
    EXPECT_GE(p.run.end_mono_ns - oldest_raw, 1'000'000'000u) << "the last second keeps its timestamps";
    EXPECT_LE(p.run.end_mono_ns - oldest_raw, 2'000'000'000u) << "and not much more";

    for (const char* out : {"long.pb.gz", "long.json", "long.html"}) {
        auto mm = run({pybpfprof_bin(), "merge", pbp, "-o", dir + "/" + out, "--no-summary"}, 120);
        ASSERT_EQ(mm.status, 0) << mm.err;
    }
    auto g = go_pprof({"-raw"}, dir + "/long.pb.gz");
    ASSERT_EQ(g.status, 0) << g.err;
    auto raw = parse_go_raw(g.out);
    EXPECT_EQ(raw.total(0), static_cast<int64_t>(n)) << "go tool pprof's sample count";
    EXPECT_EQ(raw.total(1), static_cast<int64_t>(n * period));

    const std::string js = source_dir() + "/tests/js";
    auto j = run({"node", js + "/check_speedscope.mjs", "--expect-frame", "Splitter.hot_seventy", dir + "/long.json"}, 300);
    EXPECT_EQ(j.status, 0) << j.out << j.err;
    auto ss = nlohmann::json::parse(read_file(dir + "/long.json"));
    double weight_s = 0;
    for (const auto& prof : ss["profiles"])
        for (const auto& w : prof["weights"]) weight_s += w.get<double>();
    EXPECT_NEAR(weight_s, static_cast<double>(n * period) / 1e9, 1e-6 * static_cast<double>(n));

    auto d = report_data(dir + "/long.html");
    ASSERT_FALSE(d.is_discarded());
    EXPECT_EQ(d["run"]["samples"].get<uint64_t>(), n);
    // The timeline: per thread (bin delta, units, function) triples. Summed over the threads,
    // the run's first second holds samples about as the last second does.
    const uint64_t fine_ns = d["bins"]["fine_ns"].get<uint64_t>();
    const uint64_t nfine = d["bins"]["nfine"].get<uint64_t>();
    std::vector<uint64_t> per_bin(nfine, 0);
    uint64_t units = 0;
    for (const auto& pr : d["procs"])
        for (const auto& t : pr["threads"]) {
            auto v = varints(t["fine"].get<std::string>());
            int64_t bin = -1;
            for (size_t i = 0; i + 2 < v.size(); i += 3) {
                bin += static_cast<int64_t>(v[i]);
                ASSERT_LT(static_cast<uint64_t>(bin), nfine);
                per_bin[bin] += v[i + 1];
                units += v[i + 1];
            }
        }
    EXPECT_EQ(units, d["run"]["weight_units"].get<uint64_t>());
    auto second = [&](uint64_t from_ns) {
        uint64_t u = 0;
        for (uint64_t b = from_ns / fine_ns; b < std::min(nfine, (from_ns + 1'000'000'000) / fine_ns); b++) u += per_bin[b];
        return u;
    };
    const uint64_t span = static_cast<uint64_t>(d["run"]["span_s"].get<double>() * 1e9);
    const uint64_t first = second(500'000'000), last = second(span - 1'500'000'000);
    EXPECT_GT(first, last / 2) << "the bucketed part of the timeline is drawn: " << first << " vs " << last;
    EXPECT_LT(first, last * 2) << first << " vs " << last;
    std::ofstream(dir + "/expect.json") << nlohmann::json{{"functions", {"Splitter.hot_seventy", "Splitter.hot_thirty"}}, {"buckets", true}}.dump();
    auto c = run({"node", js + "/check_report.mjs", dir + "/long.html", dir + "/expect.json"}, 300);
    EXPECT_EQ(c.status, 0) << c.out << c.err;
}

// --report writes the HTML next to the main output; both hold the same samples, and the
// report has the process's CPU and RSS over time.
TEST_F(Report, ReportNextToSpeedscope) {
    std::string json_out = dir + "/run.json", html_out = dir + "/run.html";
    std::vector<std::string> cmd{pybpfprof_bin(), "-q", "-o", json_out, "--report", html_out, "--"};
    for (auto& a : python()) cmd.push_back(a);
    cmd.push_back(workload("cpu_split.py"));
    cmd.push_back("2.5");
    auto r = run(cmd, 120);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("report " + html_out + ": open it in a web browser"), std::string::npos) << r.err;
    auto prof = read_speedscope(json_out);
    auto d = report_data(html_out);
    ASSERT_FALSE(d.is_discarded());
    EXPECT_EQ(d["run"]["samples"].get<size_t>(), prof.total());
    ASSERT_EQ(d["procs"].size(), 1u);
    const auto& res = d["procs"][0]["res"];
    ASSERT_GE(res["t"].size(), 2u) << res.dump();
    // CPU seconds from /proc (CPU % x interval) agree with the sampled CPU time over the
    // same span (cpu_split.py spins; how much CPU it gets depends on the machine's load).
    double proc_cpu_s = 0, sampled_s = 0;
    const double period_s = d["run"]["period_ns"].get<double>() / 1e9;
    for (size_t i = 1; i < res["t"].size(); i++)
        if (!res["cpu"][i].is_null())
            proc_cpu_s += res["cpu"][i].get<double>() / 100 * (res["t"][i].get<double>() - res["t"][i - 1].get<double>());
    const double t_first = res["t"][0].get<double>(), t_last = res["t"].back().get<double>();
    size_t in_span = 0;  // samples between the first and the last reading (fine bins)
    const double bin_s = d["bins"]["fine_ns"].get<double>() / 1e9;
    for (auto& th : d["procs"][0]["threads"]) {
        auto v = varints(th["fine"]);  // [bin delta, samples, hottest function]...
        int64_t bin = -1;
        for (size_t i = 0; i + 2 < v.size(); i += 3) {
            bin += static_cast<int64_t>(v[i]);
            double t = (bin + 0.5) * bin_s;
            if (t >= t_first && t <= t_last) in_span += v[i + 1];
        }
    }
    sampled_s = in_span * period_s;
    EXPECT_GT(proc_cpu_s, 0.2) << res.dump();
    EXPECT_NEAR(proc_cpu_s, sampled_s, 0.35 * sampled_s + 0.15) << res.dump();
    uint64_t max_rss = 0;  // (the first reading may come right after exec, before the image is paged in)
    for (auto& v : res["rss_kib"]) max_rss = std::max(max_rss, v.get<uint64_t>());
    EXPECT_GT(max_rss, 1000u) << res.dump();
    // The first reading is taken soon after the process is found (a baseline).
    EXPECT_LT(res["t"][0].get<double>(), 0.8) << res.dump();
}

TEST_F(Report, ReportInAMissingDirectoryIsBadInput) {
    std::vector<std::string> cmd{pybpfprof_bin(), "-q", "-o", dir + "/x.json", "--report", "/nonexistent-dir/r.html",
                                 "--"};
    for (auto& a : python()) cmd.push_back(a);
    cmd.push_back(workload("cpu_split.py"));
    cmd.push_back("1");
    auto r = run(cmd, 60);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("cannot write the report /nonexistent-dir/r.html"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace pbp::test
