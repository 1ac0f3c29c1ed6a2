// Kernels without bpf_loop (5.8 .. 5.16): the fallback program walks a fixed number of frames
// per run and continues through tail calls. Forced here with PYBPFPROF_FORCE_NO_BPF_LOOP=1,
// so the fallback is checked on every run of the suite, on one interpreter of each frame
// layout (frame objects <= 3.10, cframe 3.11/3.12, 3.13+ debug offsets); tools/vmtest runs
// it on a real 5.10 kernel.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <regex>

#include "gen_resume_check.h"
#include "pybpfprof/abi.h"
#include "speedscope_reader.h"
#include "test_support.h"

namespace pbp::test {
namespace {

std::vector<Interpreter> one_per_layout() {
    std::vector<Interpreter> v;
    for (auto& i : all_interpreters())
        if (i.name == "host-3.11" || i.name.rfind("pyenv-3.6", 0) == 0 || i.name.rfind("pyenv-3.10", 0) == 0 ||
            i.name.rfind("pyenv-3.12", 0) == 0 || i.name == "sid-3.14")
            v.push_back(i);
    return v;
}

class NoBpfLoop : public ::testing::TestWithParam<Interpreter> {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
        dir = temp_dir();
    }
    RProfile profile(const std::string& script, std::vector<std::string> args, int rate = 199) {
        const Interpreter& in = GetParam();
        const std::string path = workload_for(in, script);
        workload_path = path;
        std::string out = dir + "/out.json";
        std::vector<std::string> cmd{"env", "PYBPFPROF_FORCE_NO_BPF_LOOP=1", "PYBPFPROF_DEBUG=1", pybpfprof_bin(), "-o", out, "-r",
                                     std::to_string(rate), "--"};
        for (auto& a : in.argv) cmd.push_back(a);
        cmd.push_back(path);
        for (auto& a : args) cmd.push_back(a);
        auto r = run(cmd, 120);
        err = r.err;
        EXPECT_EQ(r.status, 0) << r.err;
        std::smatch m;
        EXPECT_TRUE(std::regex_search(r.err, m, std::regex("max depth (\\d+) \\(no bpf_loop on this kernel\\)"))) << r.err;
        if (!m.empty()) depth = std::stoi(m[1]);
        return read_speedscope(out);
    }
    std::string dir, err, workload_path;
    int depth = 0;
};

TEST_P(NoBpfLoop, ShallowerThanTheLimitSeenWhole) {
    // 240 recursions + <module>, main and spin: 243 frames, within the 256 reported (and
    // beyond the 128 that 4 frames a run reached).
    auto prof = profile("deep_recursion.py", {"2", "240"});
    ASSERT_EQ(depth, PBP_MAX_DEPTH_NO_LOOP);
    size_t whole = 0, total = 0;
    for (auto& t : prof.threads)
        for (auto& s : t.samples) {
            if (s.empty() || s.back().name != "spin") continue;
            total++;
            size_t rec = 0;
            for (auto& f : s) rec += f.name == "recurse";
            if (rec == 240 && s.front().name == "<module>" && s[1].name == "main") whole++;
        }
    ASSERT_GT(total, 100u) << err;
    EXPECT_EQ(whole, total);
}

TEST_P(NoBpfLoop, DeeperThanTheLimitIsTruncatedAtIt) {
    auto prof = profile("deep_recursion.py", {"2", "900"});
    size_t total = 0, exact = 0;
    for (auto& t : prof.threads)
        for (auto& s : t.samples) {
            if (s.empty() || s.back().name != "spin") continue;
            total++;
            // The innermost `depth` frames, under a [truncated] marker at the root.
            size_t real = 0;
            for (auto& f : s) real += f.name == "recurse" || f.name == "spin";
            if (s.front().name == "[truncated]" && real == static_cast<size_t>(depth)) exact++;
        }
    ASSERT_GT(total, 100u) << err;
    EXPECT_EQ(exact, total) << "samples whose stack is exactly the innermost " << depth << " frames";
    EXPECT_NE(err.find("frames are kept, under a [truncated] frame"), std::string::npos) << err;
}

TEST_P(NoBpfLoop, CpuSplitSeventyThirty) {
    auto prof = profile("cpu_split.py", {"3"});
    std::string q = std::stoi(GetParam().version.substr(2)) >= 11 ? "Splitter." : "";
    size_t a = prof.count([&](auto& s) { return has_frame(s, q + "hot_seventy"); });
    size_t b = prof.count([&](auto& s) { return has_frame(s, q + "hot_thirty"); });
    ASSERT_GT(a + b, 200u) << err;
    EXPECT_NEAR(100.0 * a / (a + b), 70.0, 5.0) << a << " vs " << b;
}

// 3.11/3.12: the check of tstate->cframe at the eval loop's entry holds across tail calls too
// (see Language.GeneratorsResumedFromCKeepTheirChain).
TEST_P(NoBpfLoop, GeneratorsResumedFromCKeepTheirChain) {
    auto prof = profile("lang_gen_resume.py", {"2"}, 4999);
    const std::string src = source_dir() + "/tests/workloads/lang_gen_resume.py";
    std::ifstream f(src);
    std::set<int> gen_lines;
    std::string l;
    for (int n = 1; std::getline(f, l); n++)
        if (l.find("GEN-DEF") != std::string::npos || l.find("# GEN-LOOP") != std::string::npos ||
            l.find("# HOT-GEN") != std::string::npos)
            gen_lines.insert(n);
    ASSERT_EQ(gen_lines.size(), 3u);
    auto r = check_gen_resume(prof, workload_path, gen_lines);
    std::cerr << "[ info ] " << GetParam().name << ": " << r.total << " samples in the loop, " << r.gens
              << " in a generator, " << r.marked << " marked\n";
    EXPECT_GT(r.gens, 150u) << err;
    EXPECT_EQ(r.wrong, 0u) << r.bad_stacks();
    EXPECT_LE(r.marked, max_marked(r.total)) << "too many samples marked";
}

// Code objects that die young keep their identity without bpf_loop too: module bodies run once
// at import and are freed before pybpfprof reads them, so the capture (capture_nolp, through tail
// calls) must have copied them. 300 generated modules: every module-body sample is a <module> of
// its own file (none "[unknown: code object freed ...]"), and fewer than 1% of all are unresolved.
TEST_P(NoBpfLoop, ModuleBodiesFreedAtOnceAreNamed) {
    auto prof = profile("import_tree.py", {"300", "20000"}, 999);
    size_t total = 0, unknown = 0, bodies = 0;
    std::string example;
    const std::regex mod_file(".*/pbp_tree_pkg[0-9]+/mod[0-9]+\\.py");
    for (auto& t : prof.threads)
        for (auto& s : t.samples) {
            total++;
            for (auto& f : s)
                if (f.name.rfind("[unknown", 0) == 0 || f.name.rfind("[partial", 0) == 0) {
                    if (unknown++ == 0) example = f.name;
                    break;
                }
            if (!s.empty() && s.back().name == "<module>" && std::regex_match(s.back().file, mod_file)) bodies++;
        }
    std::cerr << "[ info ] " << GetParam().name << ": " << total << " samples, " << bodies
              << " in generated module bodies, " << unknown << " with an unknown frame\n";
    ASSERT_GT(bodies, total / 5) << err;
    EXPECT_LT(unknown, total / 100 + 1) << "e.g. " << example << "\n" << err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(err, m, std::regex("code_sent=(\\d+)"))) << err;
    EXPECT_GE(std::stoul(m[1]), 300u) << "at least the 300 module bodies captured";
}

INSTANTIATE_TEST_SUITE_P(Interpreters, NoBpfLoop, ::testing::ValuesIn(one_per_layout()), interpreter_test_name);

TEST(NoBpfLoopSetup, EveryLayoutPresentUnderCI) {
    PBP_REQUIRE(one_per_layout().size() == 5, "an interpreter of each frame layout (tools/provision-pythons, pyenv)");
}

}  // namespace
}  // namespace pbp::test
