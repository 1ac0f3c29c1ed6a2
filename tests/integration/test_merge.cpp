// `pybpfprof merge` end to end: two real runs of hot_lines.py recorded to pybpfprof's own
// format 2 s apart, merged into one profile, one HTML report and one speedscope file, in
// which the second run's samples sit where the wall clock says they were; the report loads
// in headless Chromium.
//
// The reference is independent of pybpfprof: the workload prints its wall-clock time
// (time.time_ns) when it starts and when it ends, so the gap between the first run's last
// sample and the second run's first sample on the merged timeline is checked against the
// gap the processes themselves saw (the 2 s sleep, plus the first run's exit and the second
// pybpfprof's start, which the test measures rather than guesses).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "export/raw.h"
#include "sys/preflight.h"
#include "test_support.h"

namespace pbp::test {
namespace {

using nlohmann::json;


// The report's base64 varint sequences (as report.js decodes them).
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

json report_data(const std::string& path) {
    std::string html = read_file(path);
    const std::string open = "<script type=\"application/json\" id=\"pbp-data\">";
    size_t at = html.find(open);
    if (at == std::string::npos) return json();
    at += open.size();
    return json::parse(html.substr(at, html.find("</script>", at) - at), nullptr, false);
}

// "start 1795...\nend 1795...\n" -> {start, end}.
std::pair<int64_t, int64_t> printed_times(const std::string& out) {
    int64_t start = 0, end = 0;
    std::istringstream in(out);
    std::string word;
    int64_t v = 0;
    while (in >> word >> v) (word == "start" ? start : end) = v;
    return {start, end};
}

// The first and last sample of the processes labelled role=ROLE (of all, for "").
std::pair<uint64_t, uint64_t> sample_span(const Profile& p, const std::string& role) {
    uint64_t first = UINT64_MAX, last = 0;
    for (const auto& [_, pr] : p.processes) {
        auto it = pr.labels.find("role");
        if (!role.empty() && (it == pr.labels.end() || it->second != role)) continue;
        for (const auto& [__, t] : pr.threads)
            for (const Sample& s : t.samples) first = std::min(first, s.ts_ns), last = std::max(last, s.ts_ns);
    }
    return {first, last};
}

class MergeRuns : public ::testing::Test {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
        dir = temp_dir();
    }
    // hot_lines.py for 1.5 s under pybpfprof -o NAME, wrapped to print its wall clock.
    CmdResult record(const std::string& name) {
        static const std::string wrapper =
            "import runpy, sys, time\n"
            "print('start', time.time_ns(), flush=True)\n"
            "sys.argv = sys.argv[1:]\n"
            "runpy.run_path(sys.argv[0], run_name='__main__')\n"
            "print('end', time.time_ns(), flush=True)\n";
        std::vector<std::string> cmd{pybpfprof_bin(), "-q", "--no-summary", "-d", "5", "-o", dir + "/" + name, "--"};
        for (auto& a : host_python().argv) cmd.push_back(a);
        for (auto a : {std::string("-c"), wrapper, workload("hot_lines.py"), std::string("1.5")}) cmd.push_back(a);
        return run(cmd, 120);
    }
    std::string dir;
};

TEST_F(MergeRuns, TwoRunsTwoSecondsApartLineUp) {
    auto ra = record("a.pbp");
    ASSERT_EQ(ra.status, 0) << ra.err;
    std::this_thread::sleep_for(std::chrono::seconds(2));
    auto rb = record("b.pbp");
    ASSERT_EQ(rb.status, 0) << rb.err;
    auto [a_start, a_end] = printed_times(ra.out);
    auto [b_start, b_end] = printed_times(rb.out);
    ASSERT_TRUE(a_start && a_end && b_start && b_end) << ra.out << rb.out;
    const double real_gap = (b_start - a_end) / 1e9;  // as the workloads saw it
    EXPECT_GE(real_gap, 2.0);

    const std::string a = dir + "/a.pbp", b = dir + "/b.pbp";
    auto merge = [&](const std::string& out) {
        auto r = run({pybpfprof_bin(), "merge", a, b, "--label", "1:role=first", "--label", "2:role=second", "-o",
                      dir + "/" + out},
                     120);
        EXPECT_EQ(r.status, 0) << r.err;
        EXPECT_NE(r.err.find("Wrote " + dir + "/" + out + ": "), std::string::npos) << r.err;
        return r;
    };
    merge("m.pbp");
    merge("m.html");
    merge("m.speedscope.json");

    // The merged profile, read back: both processes, labelled, with the host; the second
    // run's first sample after the first run's last by the gap the workloads saw.
    Profile m, pa, pb;
    std::string error;
    ASSERT_TRUE(read_raw(read_file(dir + "/m.pbp"), m, error)) << error;
    ASSERT_TRUE(read_raw(read_file(a), pa, error)) << error;
    ASSERT_TRUE(read_raw(read_file(b), pb, error)) << error;
    EXPECT_EQ(pa.run.host, host_name());
    size_t labelled = 0;
    for (const auto& [_, pr] : m.processes) {
        EXPECT_EQ(pr.labels.at("host"), host_name());
        labelled += pr.labels.count("role");
        EXPECT_NE(pr.cmdline.find("hot_lines.py"), std::string::npos) << pr.cmdline;
    }
    EXPECT_EQ(labelled, m.processes.size());
    auto [a_first, a_last] = sample_span(m, "first");
    auto [b_first, b_last] = sample_span(m, "second");
    ASSERT_NE(a_first, UINT64_MAX) << "the first run's process has samples";
    ASSERT_NE(b_first, UINT64_MAX) << "the second run's process has samples";
    const double merged_gap = (static_cast<double>(b_first) - static_cast<double>(a_last)) / 1e9;
    std::cout << "workloads' gap " << real_gap << " s, merged timeline's gap " << merged_gap << " s (first run "
              << (a_last - a_first) / 1e9 << " s of samples, second starts at " << (b_first - m.run.start_mono_ns) / 1e9
              << " s)\n";
    EXPECT_NEAR(merged_gap, real_gap, 0.3);
    // 2 s of sleep, plus the first pybpfprof's exit, the second's start and Python's (about
    // 0.5 s here): the gap is the wall clock's, not the sleep's.
    EXPECT_GE(merged_gap, 2.0);
    EXPECT_LT(merged_gap, 4.0);
    EXPECT_EQ(m.run.start_unix_ns, pa.run.start_unix_ns);
    EXPECT_EQ(m.run.unix_ns(b_first), pb.run.unix_ns(sample_span(pb, "").first))
        << "exactly the wall-clock time the second run gave it";

    // The HTML report's timeline: the second process's first bin is where its first sample is.
    json d = report_data(dir + "/m.html");
    ASSERT_TRUE(d.is_object());
    ASSERT_EQ(d["run"]["merged_from"].size(), 2u);
    const double fine_s = d["bins"]["fine_ns"].get<double>() / 1e9;
    int64_t a_last_bin = -1, b_first_bin = INT64_MAX;
    for (auto& p : d["procs"]) {
        const std::string role = p["labels"].value("role", "");
        EXPECT_EQ(p["labels"].value("host", ""), host_name());
        for (auto& th : p["threads"]) {
            auto v = varints(th["fine"]);  // [bin delta, count, hottest function]...
            int64_t bin = -1;
            for (size_t i = 0; i + 2 < v.size(); i += 3) {
                bin += static_cast<int64_t>(v[i]);
                if (role == "first") a_last_bin = std::max(a_last_bin, bin);
                if (role == "second") b_first_bin = std::min(b_first_bin, bin);
            }
        }
    }
    ASSERT_GE(a_last_bin, 0);
    ASSERT_NE(b_first_bin, INT64_MAX);
    const double html_gap = (b_first_bin - a_last_bin) * fine_s;
    EXPECT_NEAR(html_gap, merged_gap, fine_s + 0.001) << "bins of " << fine_s << " s";
    EXPECT_NEAR((b_first - m.run.start_mono_ns) / 1e9, b_first_bin * fine_s, fine_s + 0.001);

    // speedscope: the profiles' start and end values (seconds since the merged start).
    json ss = json::parse(read_file(dir + "/m.speedscope.json"));
    double a_end_value = -1, b_start_value = -1;
    for (auto& p : ss["profiles"]) {
        const std::string name = p["name"];
        if (name.find("role=first") != std::string::npos) a_end_value = std::max(a_end_value, p["endValue"].get<double>());
        if (name.find("role=second") != std::string::npos && (b_start_value < 0 || p["startValue"].get<double>() < b_start_value))
            b_start_value = p["startValue"].get<double>();
        EXPECT_NE(name.find("host " + host_name()), std::string::npos) << name;
    }
    ASSERT_GE(a_end_value, 0);
    ASSERT_GE(b_start_value, 0);
    const double period_s = ss["pybpfprof"]["period_ns"].get<double>() / 1e9;
    EXPECT_NEAR(b_start_value - a_end_value, merged_gap - period_s, 1e-6);
    EXPECT_NEAR(b_start_value - a_end_value, real_gap, 0.3);

    // The merged report in its consumer.
    PBP_REQUIRE(access((source_dir() + "/tests/js/node_modules/playwright-core/package.json").c_str(), F_OK) == 0 &&
                    access("/usr/bin/chromium", X_OK) == 0,
                "tests/js/node_modules or /usr/bin/chromium missing (tools/install-deps)");
    std::ofstream(dir + "/expect.json") << json{{"functions", {"two_loops"}},
                                                {"min_processes", 2},
                                                {"proc_text", {"role=first", "role=second", "host " + host_name()}},
                                                {"raw", true}}
                                               .dump();
    auto c = run({"node", source_dir() + "/tests/js/check_report.mjs", dir + "/m.html", dir + "/expect.json"}, 300);
    EXPECT_EQ(c.status, 0) << c.out << c.err;
    EXPECT_NE(c.out.find("ok " + dir + "/m.html"), std::string::npos) << c.out << c.err;
}

}  // namespace
}  // namespace pbp::test
