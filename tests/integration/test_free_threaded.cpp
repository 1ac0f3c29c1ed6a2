// Free-threaded CPython (3.13t, built with --disable-gil from Debian's source package by
// tools/provision-free-threaded): the GIL is really off, threads run Python at the same
// time, and each is sampled by its own CPU time with its own stack.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "speedscope_reader.h"
#include "test_support.h"

namespace pbp::test {
namespace {

std::vector<Interpreter> free_threaded() {
    std::vector<Interpreter> v;
    for (auto& i : all_interpreters())
        if (i.name.rfind("sid-ft-", 0) == 0) v.push_back(i);
    return v;
}

class FreeThreaded : public ::testing::TestWithParam<Interpreter> {};

TEST_P(FreeThreaded, ThreadsWithoutGilEachSampledByTheirCpuTime) {
    PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
    PBP_REQUIRE(sysconf(_SC_NPROCESSORS_ONLN) >= 2, "needs 2 CPUs to run threads in parallel");
    const Interpreter& in = GetParam();
    std::string dir = temp_dir();
    const double secs = 3, rate = 499;
    std::string out = dir + "/out.json";
    std::vector<std::string> cmd{pybpfprof_bin(), "-o", out, "-r", "499", "--"};
    for (auto& a : in.argv) cmd.push_back(a);
    cmd.push_back(workload_for(in, "ft_parallel.py"));
    cmd.push_back("3");
    auto r = run(cmd, 120);
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_NE(r.out.find("gil False"), std::string::npos) << "not a free-threaded interpreter: " << r.out;
    EXPECT_NE(r.err.find("t ("), std::string::npos) << "the version should say free-threaded (3.13.Nt): " << r.err;
    auto prof = read_speedscope(out);
    // Each thread's samples match its own CPU time (thread_time, measured by the thread).
    std::map<std::string, double> cpu;
    std::istringstream lines(r.out);
    for (std::string w, name; lines >> w;)
        if (w == "cpu" && lines >> name) lines >> cpu[name];
    ASSERT_EQ(cpu.size(), 2u) << r.out;
    for (auto& [fn, secs_cpu] : cpu) {
        size_t n = prof.count([&](auto& s) { return !s.empty() && s.back().name == fn; });
        EXPECT_NEAR(n / rate, secs_cpu, 0.15 * secs_cpu + 0.05) << fn << ": " << n << " samples\n" << r.err;
        EXPECT_GT(secs_cpu, 0.2 * secs) << fn << " hardly ran: " << r.out;
    }
    // With both CPUs free the threads overlap; on a loaded machine they may not, so this is
    // reported, not asserted.
    std::cerr << r.out;
    // And they are two threads, each with its own stack: spin_a never under spin_b's thread.
    for (auto& t : prof.threads) {
        size_t ta = 0, tb = 0;
        for (auto& s : t.samples) {
            if (has_frame(s, "spin_a")) ta++;
            if (has_frame(s, "spin_b")) tb++;
        }
        EXPECT_TRUE(ta == 0 || tb == 0) << t.profile_name << ": " << ta << " / " << tb;
    }
}

INSTANTIATE_TEST_SUITE_P(Interpreters, FreeThreaded, ::testing::ValuesIn(free_threaded()),
                         interpreter_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FreeThreaded);

}  // namespace
}  // namespace pbp::test
