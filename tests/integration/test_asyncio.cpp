// --async on real processes: three named asyncio tasks that compute in turn appear under their
// own names, each with its share of the samples within 5 points of the CPU time it measured
// itself, in every mode (cpu, wall, gil), on 3.14 and 3.15; `dump --async` shows the await
// graph of a gather of gathers as JSON edges and as pstree's text tree; an older interpreter
// keeps its frames as without --async and is told that task names need 3.14+.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/profile.h"
#include "export/raw.h"
#include "test_support.h"

namespace pbp::test {
namespace {

std::vector<Interpreter> pick(std::initializer_list<const char*> names) {
    std::vector<Interpreter> v, all = all_interpreters();
    for (const char* n : names)
        for (auto& i : all)
            if (i.name == n) v.push_back(i);
    return v;
}

int marker_line(const std::string& script, const std::string& marker) {
    std::ifstream f(workload(script));
    std::string line;
    for (int n = 1; std::getline(f, line); n++)
        if (line.find(marker) != std::string::npos) return n;
    return -1;
}

struct Recorded {
    CmdResult r;
    Profile p;
    bool ok = false;
};

Recorded record(const std::string& dir, const std::vector<std::string>& options) {
    static int n = 0;
    Recorded rec;
    std::string out = dir + "/async" + std::to_string(n++) + ".pbp";
    std::vector<std::string> cmd{pybpfprof_bin(), "-q", "-o", out};
    cmd.insert(cmd.end(), options.begin(), options.end());
    rec.r = run(cmd, 120);
    std::string error;
    rec.ok = rec.r.status == 0 && read_raw(read_file(out), rec.p, error);
    EXPECT_TRUE(rec.ok) << "exit " << rec.r.status << ": " << error << "\n" << rec.r.err;
    return rec;
}

std::vector<std::string> names_of(const Profile& p, const Sample& s) {
    std::vector<std::string> v;
    for (uint32_t f : p.stacks.at(s.stack)) v.push_back(p.frames.at(f).name);
    return v;
}

std::string describe(const Profile& p, size_t n = 10) {
    std::map<std::string, uint64_t> by;
    uint64_t all = 0;
    for (auto& [_, pr] : p.processes)
        for (auto& [__, t] : pr.threads)
            for (auto& s : t.samples) {
                std::string k;
                for (auto& name : names_of(p, s)) k += (k.empty() ? "" : ";") + name;
                by[k + (s.kind == SampleKind::OffCpu ? " {off-cpu}" : "")] += s.weight_ns;
                all += s.weight_ns;
            }
    std::vector<std::pair<uint64_t, std::string>> v;
    for (auto& [k, w] : by) v.push_back({w, k});
    std::sort(v.rbegin(), v.rend());
    std::ostringstream os;
    for (size_t i = 0; i < v.size() && i < n; i++)
        os << "  " << 100.0 * v[i].first / std::max<uint64_t>(all, 1) << "% " << v[i].second << "\n";
    return os.str();
}

class AsyncTasks : public ::testing::TestWithParam<Interpreter> {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
        dir = temp_dir();
    }
    std::string dir;
};

// Per mode: the on-CPU samples under "<task main>" -> "<task NAME>" -> worker (the event loop's
// frames left out), their shares per task against the workload's own thread_time() measurement.
TEST_P(AsyncTasks, ThreeNamedTasksEachWithItsShareOfCpuInEveryMode) {
    const Interpreter& in = GetParam();
    const int compute_line = marker_line("asyncio_tasks.py", "# COMPUTE");
    const std::vector<std::string> tasks{"alpha", "beta", "gamma"};
    for (const char* mode : {"cpu", "wall", "gil"}) {
        SCOPED_TRACE(std::string("--mode ") + mode);
        std::vector<std::string> opts{"--async", "--mode", mode, "-r", "999", "--"};
        for (auto& a : python_running(in, "asyncio_tasks.py", {"3"})) opts.push_back(a);
        Recorded rec = record(dir, opts);
        ASSERT_TRUE(rec.ok);
        double truth[3] = {0, 0, 0};
        ASSERT_EQ(sscanf(rec.r.out.c_str(), "cpu alpha=%lf beta=%lf gamma=%lf", &truth[0], &truth[1], &truth[2]), 3)
            << "the workload's own measurement, on stdout: " << rec.r.out;
        EXPECT_EQ(rec.r.err.find("--async"), std::string::npos) << "no note on 3.14+: " << rec.r.err;

        uint64_t under[3] = {0, 0, 0}, compute = 0, compute_in_task = 0;
        for (auto& [_, pr] : rec.p.processes)
            for (auto& [__, t] : pr.threads)
                for (auto& s : t.samples) {
                    if (s.kind != SampleKind::Cpu) continue;
                    const auto names = names_of(rec.p, s);
                    const auto& ids = rec.p.stacks.at(s.stack);
                    const bool computing = !ids.empty() && rec.p.frames.at(ids.back()).name == "compute" &&
                                           rec.p.frames.at(ids.back()).line == compute_line;
                    if (computing) compute += s.weight_ns;
                    if (names.size() < 3 || names[0] != "<task main>" || names[2] != "worker") continue;
                    for (int i = 0; i < 3; i++)
                        if (names[1] == "<task " + tasks[i] + ">") {
                            under[i] += s.weight_ns;
                            if (computing) compute_in_task += s.weight_ns;
                        }
                }
        const double sum_under = double(under[0] + under[1] + under[2]), sum_truth = truth[0] + truth[1] + truth[2];
        ASSERT_GT(sum_under, 0.0) << describe(rec.p);
        ASSERT_GT(sum_truth, 0.0) << rec.r.out;
        // Every compute() sample is in a task, whole from the root: "<task main>;<task X>;worker;..".
        EXPECT_GE(double(compute_in_task), 0.97 * double(compute)) << describe(rec.p);
        for (int i = 0; i < 3; i++)
            EXPECT_NEAR(100.0 * under[i] / sum_under, 100.0 * truth[i] / sum_truth, 5.0)
                << tasks[i] << "; the workload measured " << rec.r.out << describe(rec.p);
    }
}

INSTANTIATE_TEST_SUITE_P(Interpreters, AsyncTasks, ::testing::ValuesIn(pick({"sid-3.14", "sid-3.15"})),
                         interpreter_test_name);

// ---- dump --async --------------------------------------------------------------------------

class AsyncDump : public ::testing::TestWithParam<Interpreter> {
protected:
    void SetUp() override { PBP_REQUIRE(geteuid() == 0, "reading another process's memory needs root"); }
};

std::vector<std::string> functions(const nlohmann::json& frames) {
    std::vector<std::string> v;
    for (auto& f : frames) v.push_back(f["function"].get<std::string>());
    return v;
}

TEST_P(AsyncDump, GatherOfGathersAsJsonEdgesAndAsPstreeText) {
    const Interpreter& in = GetParam();
    Reporter py(python_running(in, "asyncio_gather.py"));
    ASSERT_TRUE(py.read_until("ready", 60)) << py.out() << py.err();
    const std::string pid = std::to_string(py.pid());
    const std::string file = workload_for(in, "asyncio_gather.py");
    const int leaf_line = marker_line("asyncio_gather.py", "# LEAF_WAIT");
    const int outer_line = marker_line("asyncio_gather.py", "# OUTER_GATHER");
    const int main_line = marker_line("asyncio_gather.py", "# MAIN_GATHER");

    CmdResult js = run({pybpfprof_bin(), "dump", "--pid", pid, "--async", "--json"});
    ASSERT_EQ(js.status, 0) << js.err;
    nlohmann::json doc = nlohmann::json::parse(js.out);
    ASSERT_EQ(doc["processes"].size(), 1u);
    const auto& a = doc["processes"][0]["asyncio"];
    ASSERT_TRUE(a["note"].is_null()) << a["note"];
    std::map<std::string, std::string> name_of;  // id -> name
    std::map<std::string, nlohmann::json> by_name;
    for (auto& t : a["tasks"]) {
        name_of[t["id"].get<std::string>()] = t["name"].get<std::string>();
        by_name[t["name"].get<std::string>()] = t;
    }
    // The edges, by name: who awaits whom.
    std::set<std::pair<std::string, std::string>> edges;  // (awaiter, awaited)
    for (auto& t : a["tasks"])
        for (auto& by : t["awaited_by"]) {
            ASSERT_TRUE(name_of.count(by.get<std::string>())) << "an awaiter not listed: " << by;
            edges.insert({name_of[by.get<std::string>()], t["name"].get<std::string>()});
        }
    const std::set<std::pair<std::string, std::string>> want{
        {"main", "outer-0"},      {"main", "outer-1"},      {"outer-0", "leaf-0-0"},
        {"outer-0", "leaf-0-1"},  {"outer-1", "leaf-1-0"},  {"outer-1", "leaf-1-1"}};
    EXPECT_EQ(edges, want) << js.out;
    // Every task pending, each where it waits; the unnamed one is Task-N.
    for (auto& [name, t] : by_name) EXPECT_EQ(t["state"], "pending") << name;
    ASSERT_TRUE(by_name.count("main")) << js.out;
    EXPECT_EQ(functions(by_name["main"]["coroutine_stack"]), std::vector<std::string>{"main"});
    EXPECT_EQ(by_name["main"]["coroutine_stack"][0]["line"], main_line);
    for (const char* o : {"outer-0", "outer-1"}) {
        ASSERT_TRUE(by_name.count(o)) << js.out;
        EXPECT_EQ(functions(by_name[o]["coroutine_stack"]), std::vector<std::string>{"outer"});
        EXPECT_EQ(by_name[o]["coroutine_stack"][0]["line"], outer_line);
    }
    for (const char* l : {"leaf-0-0", "leaf-0-1", "leaf-1-0", "leaf-1-1"}) {
        ASSERT_TRUE(by_name.count(l)) << js.out;
        const auto fns = functions(by_name[l]["coroutine_stack"]);
        ASSERT_EQ(fns.size(), 3u) << by_name[l];
        EXPECT_EQ(fns[0], "Event.wait");
        EXPECT_EQ(fns[1], "wait_here");
        EXPECT_EQ(by_name[l]["coroutine_stack"][1]["line"], leaf_line);
        EXPECT_EQ(fns[2], "leaf");
        EXPECT_EQ(by_name[l]["thread"], py.pid());
    }
    size_t unnamed = 0;
    for (auto& [name, t] : by_name)
        if (std::regex_match(name, std::regex("Task-[0-9]+"))) {
            unnamed++;
            EXPECT_TRUE(t["awaited_by"].empty());
            EXPECT_EQ(functions(t["coroutine_stack"]), std::vector<std::string>{"sleep"});
        }
    EXPECT_EQ(unnamed, 1u) << js.out;
    EXPECT_EQ(a["tasks"].size(), 8u) << "main, 2 outer, 4 leaves, 1 unnamed; the finished task is gone: " << js.out;

    // Text: pstree's tree, main's subtree line by line.
    CmdResult text = run({pybpfprof_bin(), "dump", "--pid", pid, "--async"});
    ASSERT_EQ(text.status, 0) << text.err;
    const std::string f = " " + file + ":";
    const int leaf_call = marker_line("asyncio_gather.py", "await wait_here(ev)");
    const std::string leaf_stack_0 = "        │       │   └──  leaf" + f + std::to_string(leaf_call) + "\n";
    const std::string expect =
        "└── (T) main\n"
        "    └──  main" + f + std::to_string(main_line) + "\n"
        "        ├── (T) outer-0\n"
        "        │   └──  outer" + f + std::to_string(outer_line) + "\n"
        "        │       ├── (T) leaf-0-0\n" +
        leaf_stack_0 +
        "        │       │       └──  wait_here" + f + std::to_string(leaf_line) + "\n";
    EXPECT_NE(text.out.find(expect), std::string::npos) << "want:\n" << expect << "in:\n" << text.out;
    EXPECT_NE(text.out.find("        └── (T) outer-1\n"), std::string::npos) << text.out;
    EXPECT_TRUE(std::regex_search(text.out, std::regex("\n└── \\(T\\) Task-[0-9]+\n    └──  sleep "))) << text.out;
}

// The text is what CPython's own `python -m asyncio pstree PID` prints for the same process, line
// for line. pstree runs in the chroot, in a mount namespace of its own (nothing changes for
// anyone else) where it finds /proc and the interpreter at the path the process's maps name
// (the chroots live under /var/cache: that path is made on a tmpfs over the chroot's /var/cache).
TEST_P(AsyncDump, TextIsWhatCpythonsPstreePrints) {
    const Interpreter& in = GetParam();
    ASSERT_FALSE(in.root.empty()) << "a chroot interpreter";
    Reporter py(python_running(in, "asyncio_gather.py"));
    ASSERT_TRUE(py.read_until("ready", 60)) << py.err();
    const std::string pid = std::to_string(py.pid()), root = in.root;
    const std::string script = "mount --bind /proc " + root + "/proc && mount -t tmpfs none " + root +
                               "/var/cache && mkdir -p " + root + root + " && mount --bind " + root + " " + root + root +
                               " && chroot " + root + " " + in.argv.back() + " -m asyncio pstree " + pid;
    CmdResult theirs = run({"unshare", "-m", "--propagation", "private", "sh", "-c", script});
    ASSERT_EQ(theirs.status, 0) << theirs.err << theirs.out;
    ASSERT_NE(theirs.out.find("(T) main"), std::string::npos) << theirs.out;
    CmdResult ours = run({pybpfprof_bin(), "dump", "--pid", pid, "--async"});
    ASSERT_EQ(ours.status, 0) << ours.err;
    const std::string head = "\nasyncio tasks (8), who awaits whom:\n";
    auto at = ours.out.find(head);
    ASSERT_NE(at, std::string::npos) << ours.out;
    EXPECT_EQ(ours.out.substr(at + head.size()), theirs.out);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, AsyncDump, ::testing::ValuesIn(pick({"sid-3.14", "sid-3.15"})),
                         interpreter_test_name);

// ---- before 3.14 -----------------------------------------------------------------------------

TEST(AsyncOld, FramesAsTodayAndANoteOn311) {
    PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
    const Interpreter in = host_python();
    const std::string dir = temp_dir();
    std::vector<std::string> opts{"--async", "-r", "499", "--"};
    for (auto& a : python_running(in, "asyncio_tasks.py", {"1"})) opts.push_back(a);
    Recorded rec = record(dir, opts);
    ASSERT_TRUE(rec.ok);
    // The note: one line, on stderr.
    const std::string note = "asyncio task names need CPython 3.14+";
    ASSERT_NE(rec.r.err.find(note), std::string::npos) << rec.r.err;
    EXPECT_EQ(rec.r.err.find(note), rec.r.err.rfind(note)) << "once: " << rec.r.err;
    // Frames as without --async: no task frame, compute() under worker() under the event loop.
    uint64_t compute = 0, under_loop = 0;
    for (auto& [_, pr] : rec.p.processes)
        for (auto& [__, t] : pr.threads)
            for (auto& s : t.samples) {
                const auto names = names_of(rec.p, s);
                for (auto& n : names) ASSERT_NE(n.rfind("<task", 0), 0u) << n;
                if (names.empty() || names.back() != "compute") continue;
                compute += s.weight_ns;
                if (std::find(names.begin(), names.end(), "BaseEventLoop._run_once") != names.end() &&
                    std::find(names.begin(), names.end(), "worker") != names.end())
                    under_loop += s.weight_ns;
            }
    ASSERT_GT(compute, 0u) << describe(rec.p);
    EXPECT_GE(double(under_loop), 0.97 * double(compute)) << describe(rec.p);

    // dump --async says the same.
    Reporter py(python_running(in, "asyncio_gather.py"));
    ASSERT_TRUE(py.read_until("ready", 60)) << py.err();
    CmdResult text = run({pybpfprof_bin(), "dump", "--pid", std::to_string(py.pid()), "--async"});
    ASSERT_EQ(text.status, 0) << text.err;
    EXPECT_NE(text.out.find("asyncio tasks: not read (asyncio tasks need CPython 3.14+"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace pbp::test
