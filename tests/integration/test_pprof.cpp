// End-to-end pprof output: the real BPF program profiling a real CPython process with
// `-f pprof`, then the file read by our own parser and by the real consumer, `go tool pprof`.
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "pprof_reader.h"
#include "test_support.h"

namespace pbp::test {
namespace {


int64_t unix_now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

class PprofOutput : public ::testing::Test {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
        PBP_REQUIRE(have_go(), "go is not installed (Debian golang-go; tools/install-deps)");
        dir = temp_dir();
    }
    // pybpfprof -q -f pprof EXTRA -o OUT -- host python SCRIPT ARGS; returns its stderr.
    std::string profile(const std::string& out, const std::string& script, std::vector<std::string> args,
                        std::vector<std::string> extra) {
        std::vector<std::string> cmd{pybpfprof_bin(), "-q", "-f", "pprof"};
        cmd.insert(cmd.end(), extra.begin(), extra.end());
        cmd.insert(cmd.end(), {"-o", out, "--"});
        for (auto& a : host_python().argv) cmd.push_back(a);
        cmd.push_back(workload(script));
        cmd.insert(cmd.end(), args.begin(), args.end());
        auto r = run(cmd, 120);
        EXPECT_EQ(r.status, 0) << r.err;
        return r.err;
    }
    std::string dir;
};

TEST_F(PprofOutput, CpuSplitReadByGoToolPprof) {
    const std::string out = dir + "/out.pb.gz";
    const int64_t before = unix_now_ns();
    const std::string err = profile(out, "cpu_split.py", {"2"}, {"-r", "499"});
    const int64_t after = unix_now_ns();

    // pybpfprof's own count, from its summary line.
    std::smatch m;
    ASSERT_TRUE(std::regex_search(err, m, std::regex(R"(Wrote (\S+): (\d+) samples)"))) << err;
    EXPECT_EQ(m[1].str(), out);
    const int64_t n = std::stoll(m[2].str());
    ASSERT_GT(n, 300) << "2 s at 499 Hz, on a possibly busy machine\n" << err;
    EXPECT_NE(err.find("go tool pprof -http=: " + out), std::string::npos) << err;

    // Our parse: gzip's CRC and length check the bytes on disk, then the protobuf.
    pprof::Profile p;
    try {
        p = parse_pprof(read_file(out));
    } catch (const std::exception& e) {
        FAIL() << out << ": " << e.what();
    }
    ASSERT_EQ(p.sample_type_size(), 2);
    EXPECT_EQ(static_cast<int64_t>(pprof_total(p, 0)), n);
    ASSERT_GT(p.period(), 0);
    EXPECT_NEAR(static_cast<double>(p.period()), 1e9 / 499, 1.0);
    EXPECT_EQ(static_cast<int64_t>(pprof_total(p, 1)), n * p.period());
    EXPECT_GE(p.time_nanos(), before);
    EXPECT_LE(p.time_nanos(), after);
    EXPECT_GE(p.duration_nanos(), 1'900'000'000LL);
    EXPECT_LE(p.duration_nanos(), after - before);
    // Each sample says its GIL state (cpu mode: held or neither on CPU, n/a when not known).
    for (const auto& s : p.sample()) {
        std::map<std::string, int> keys;
        std::string gil;
        for (const auto& l : s.label()) {
            keys[p.string_table(static_cast<int>(l.key()))]++;
            if (p.string_table(static_cast<int>(l.key())) == "gil") gil = p.string_table(static_cast<int>(l.str()));
        }
        EXPECT_EQ(keys, (std::map<std::string, int>{{"pid", 1}, {"tid", 1}, {"thread_name", 1}, {"process", 1}, {"gil", 1}}));
        EXPECT_TRUE(gil == "held" || gil == "neither" || gil == "n/a") << gil;
    }

    // The real consumer: the same totals.
    auto raw = go_pprof({"-raw"}, out);
    ASSERT_EQ(raw.status, 0) << raw.err;
    GoRaw g = parse_go_raw(raw.out);
    EXPECT_EQ(g.values.size(), static_cast<size_t>(p.sample_size()));
    EXPECT_EQ(g.total(0), n) << "go tool pprof -raw sample count vs pybpfprof's";
    EXPECT_EQ(g.total(1), n * p.period());
    bool hot = false;
    for (auto& [id, text] : g.location_text) hot |= text.rfind("Splitter.hot_seventy " + workload("cpu_split.py") + ":", 0) == 0;
    EXPECT_TRUE(hot) << raw.out.substr(0, 4000);

    // ... and the 70/30 split as `go tool pprof -top` reports it: the samples under each
    // method (cum), as a share of the two (startup and the loop itself are outside both).
    auto top = go_pprof({"-top", "-sample_index=samples", "-nodecount=50"}, out);
    ASSERT_EQ(top.status, 0) << top.err;
    double seventy = -1, thirty = -1;
    for (auto& row : parse_go_top(top.out)) {
        if (row.name == "Splitter.hot_seventy") seventy = std::stod(row.cum);
        if (row.name == "Splitter.hot_thirty") thirty = std::stod(row.cum);
    }
    ASSERT_GT(seventy, 0) << top.out;
    ASSERT_GT(thirty, 0) << top.out;
    EXPECT_NEAR(100.0 * seventy / (seventy + thirty), 70.0, 5.0) << top.out;
    EXPECT_GT(seventy + thirty, 0.8 * n) << "nearly all samples are in the two methods\n" << top.out;
    EXPECT_NE(top.out.find("of " + std::to_string(n) + " total"), std::string::npos) << top.out;
}

}  // namespace
}  // namespace pbp::test
