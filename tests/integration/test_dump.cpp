// `pybpfprof dump` on real processes: five named threads asleep in five blocking calls, on every
// interpreter of the matrix, as text and as JSON; and a CPU-bound process dumped in a loop that
// finishes with the same result in about the same time (it is never stopped).
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace pbp::test {
namespace {

// The line (1-based) of file holding marker.
int line_of(const std::string& text, const std::string& marker) {
    std::istringstream in(text);
    std::string l;
    for (int n = 1; std::getline(in, l); n++)
        if (l.find(marker) != std::string::npos) return n;
    return -1;
}

// "Condition.wait" (3.11+ qualified names) and "wait" (before) are both "wait".
std::string last_part(const std::string& name) {
    auto dot = name.rfind('.');
    return dot == std::string::npos ? name : name.substr(dot + 1);
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

struct TextFrame {
    std::string function, file;
    int line = 0;
    std::string text;  // as printed
};
struct TextThread {
    uint32_t ns_tid = 0;  // "(N in its namespace)", 0 when not printed
    std::string header, state;
    std::vector<TextFrame> frames;
};

// The text output's threads by host tid: "Thread TID [(N in its namespace)] "NAME" STATE[, ...]"
// then one "    FUNCTION (FILE:LINE)" line per frame, innermost first.
std::map<uint32_t, TextThread> parse_text(const std::string& out) {
    std::map<uint32_t, TextThread> threads;
    std::istringstream in(out);
    std::string l;
    TextThread* cur = nullptr;
    while (std::getline(in, l)) {
        if (l.rfind("Thread ", 0) == 0) {
            uint32_t tid = static_cast<uint32_t>(std::strtoul(l.c_str() + 7, nullptr, 10));
            cur = &threads[tid];
            cur->header = l;
            if (auto ns = l.find(" ("); ns != std::string::npos && l.find(" in its namespace)") != std::string::npos)
                cur->ns_tid = static_cast<uint32_t>(std::strtoul(l.c_str() + ns + 2, nullptr, 10));
            auto q = l.rfind('"');
            std::string rest = q == std::string::npos ? "" : l.substr(q + 2);
            cur->state = rest.substr(0, rest.find(','));
        } else if (cur && l.rfind("    ", 0) == 0) {
            TextFrame f;
            f.text = l.substr(4);
            auto open = f.text.rfind(" (");
            auto colon = f.text.rfind(':');
            if (open != std::string::npos && colon != std::string::npos && colon > open) {
                f.function = f.text.substr(0, open);
                f.file = f.text.substr(open + 2, colon - open - 2);
                f.line = std::atoi(f.text.c_str() + colon + 1);
            } else {
                f.function = f.text;
            }
            cur->frames.push_back(f);
        } else if (l.empty()) {
            cur = nullptr;
        }
    }
    return threads;
}

struct Expect {
    std::string thread;    // its threading.Thread name
    std::string innermost; // the innermost frame's function (last part of the name)
    std::string in_file;   // ... in a file ending so
    std::string ours;      // the workload's function, with the BLOCK line
};
const std::vector<Expect> kExpect = {
    {"sleeper", "in_sleep", "dump_blocked.py", "in_sleep"},
    {"waiter", "wait", "threading.py", "in_event_wait"},
    {"selector", "in_select", "dump_blocked.py", "in_select"},
    {"acceptor", "accept", "socket.py", "in_accept"},
    {"getter", "wait", "threading.py", "in_queue_get"},
};

// What is wrong with thread t (tid, named name) of a dump, "" when nothing.
std::string check_thread(const TextThread& t, const Expect& e, int block_line) {
    if (t.state != "sleeping") return "state '" + t.state + "', not sleeping";
    if (t.frames.empty()) return "no frames";
    const TextFrame& in = t.frames.front();
    if (last_part(in.function) != e.innermost || !ends_with(in.file, e.in_file))
        return "innermost frame " + in.text + ", not " + e.innermost + " in " + e.in_file;
    for (const TextFrame& f : t.frames)
        if (last_part(f.function) == e.ours)
            return f.line == block_line ? "" : "frame " + f.text + ": not at line " + std::to_string(block_line);
    return "no frame of " + e.ours;
}

class Dump : public ::testing::TestWithParam<Interpreter> {
protected:
    void SetUp() override { PBP_REQUIRE(geteuid() == 0, "reading another process's memory needs root"); }
};

TEST_P(Dump, FiveNamedThreadsAsleepInFiveCallsAsTextAndJson) {
    const Interpreter& in = GetParam();
    const std::string script = read_file(workload("dump_blocked.py"));
    Reporter py(python_running(in, "dump_blocked.py"));
    auto lines = py.read_lines(6, 60);
    ASSERT_EQ(lines.size(), 6u) << py.out() << py.err();
    ASSERT_EQ(lines.back(), "ready") << py.out();
    std::map<std::string, uint32_t> tid_of;
    for (size_t i = 0; i + 1 < lines.size(); i++) {
        std::istringstream l(lines[i]);
        std::string name;
        uint32_t tid = 0;
        l >> name >> tid;
        tid_of[name] = tid;
    }
    ASSERT_EQ(tid_of.size(), 5u) << py.out();
    for (auto& [name, tid] : tid_of) ASSERT_GT(tid, 0u) << name << ": no tid (" << py.out() << ")";

    // "ready" comes just before each thread enters its call: dump until all five are in it.
    const std::string pid = std::to_string(py.pid());
    CmdResult text;
    std::map<uint32_t, TextThread> threads;
    std::string wrong;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);;) {
        text = run({pybpfprof_bin(), "dump", "--pid", pid});
        ASSERT_EQ(text.status, 0) << text.err;
        threads = parse_text(text.out);
        wrong.clear();
        for (const Expect& e : kExpect) {
            auto it = threads.find(tid_of[e.thread]);
            std::string why = it == threads.end() ? "not listed"
                                                  : check_thread(it->second, e, line_of(script, "# BLOCK " + e.ours));
            if (!why.empty()) wrong += e.thread + ": " + why + "; ";
        }
        if (wrong.empty() || std::chrono::steady_clock::now() > until) break;
        usleep(100000);
    }
    EXPECT_EQ(wrong, "") << text.out;
    EXPECT_EQ(text.out.rfind("Process " + pid + ": ", 0), 0u) << text.out;
    EXPECT_NE(text.out.find("\nPython " + in.version), std::string::npos) << text.out;

    // --json: the same threads, states and frames.
    CmdResult js = run({pybpfprof_bin(), "dump", "--pid", pid, "--json"});
    ASSERT_EQ(js.status, 0) << js.err;
    nlohmann::json doc = nlohmann::json::parse(js.out);
    ASSERT_EQ(doc["processes"].size(), 1u);
    const auto& p = doc["processes"][0];
    EXPECT_EQ(p["pid"], py.pid());
    EXPECT_EQ(p["python_version"].get<std::string>().rfind(in.version, 0), 0u) << p["python_version"];
    EXPECT_NE(p["command"].get<std::string>().find("dump_blocked.py"), std::string::npos);
    std::map<uint32_t, nlohmann::json> by_tid;
    for (const auto& t : p["threads"]) by_tid[t["tid"].get<uint32_t>()] = t;
    EXPECT_EQ(by_tid.size(), threads.size()) << js.out;
    for (const Expect& e : kExpect) {
        SCOPED_TRACE(e.thread);
        const uint32_t tid = tid_of[e.thread];
        ASSERT_TRUE(by_tid.count(tid)) << js.out;
        const auto& t = by_tid[tid];
        EXPECT_EQ(t["state"], "sleeping");
        EXPECT_TRUE(t["python"].get<bool>());
        EXPECT_FALSE(t["stack_changed_while_read"].get<bool>());
        // Asleep in a call that released the GIL: none of them holds it (unknown: free-threaded).
        if (p["gil_unknown"].is_null()) EXPECT_EQ(t["gil"], false);
        else EXPECT_TRUE(t["gil"].is_null());
        std::vector<std::string> from_json, from_text;
        for (const auto& f : t["frames"])
            from_json.push_back(f.value("synthetic", false)
                                    ? f["function"].get<std::string>()
                                    : f["function"].get<std::string>() + " (" + f["file"].get<std::string>() + ":" +
                                          std::to_string(f["line"].get<int>()) + ")");
        for (const auto& f : threads[tid].frames) from_text.push_back(f.text);
        EXPECT_EQ(from_json, from_text);
    }
}

INSTANTIATE_TEST_SUITE_P(Interpreters, Dump, ::testing::ValuesIn(all_interpreters()), interpreter_test_name);

// A thread whose stack never stops changing, dumped again and again while it runs: every dump
// works, and each of its stacks is either whole (every frame one of the workload's functions,
// named, with a line) or marked as changed while read.
TEST(DumpRunning, StacksReadWhileChangingAreWholeOrMarked) {
    PBP_REQUIRE(geteuid() == 0, "dump needs root");
    const Interpreter in = host_python();
    Reporter py(python_running(in, "dump_churn.py"));
    ASSERT_TRUE(py.read_until("ready", 60)) << py.err();
    // "<module>": the code exec() runs to define gen_N.
    const std::set<std::string> known = {"a", "b", "churn", "run", "_bootstrap_inner", "_bootstrap", "<module>"};
    int dumps = 0, whole = 0, marked = 0;
    for (int i = 0; i < 300; i++) {
        CmdResult r = run({pybpfprof_bin(), "dump", "--pid", std::to_string(py.pid()), "--json"});
        ASSERT_EQ(r.status, 0) << r.err;
        dumps++;
        const nlohmann::json doc = nlohmann::json::parse(r.out);
        for (const auto& t : doc["processes"][0]["threads"]) {
            if (t["tid"] == py.pid()) continue;  // the main thread, in join()
            if (t["stack_changed_while_read"].get<bool>()) {
                marked++;
                continue;
            }
            whole++;
            ASSERT_FALSE(t["frames"].empty()) << t.dump();
            for (const auto& f : t["frames"]) {
                const std::string name = last_part(f["function"].get<std::string>());
                EXPECT_FALSE(f.value("synthetic", false)) << t.dump();
                EXPECT_TRUE(known.count(name) || name.rfind("gen_", 0) == 0) << name << " in " << t.dump();
                // A module's first instruction (3.11+: RESUME) has no line.
                if (name != "<module>") {
                    EXPECT_GT(f.value("line", 0), 0) << t.dump();
                }
            }
        }
    }
    std::cout << dumps << " dumps of a thread that runs: " << whole << " stacks whole, " << marked
              << " marked as changed while read\n";
    EXPECT_GT(whole, 0);
}

// In its own PID namespace (unshare --pid): threads are told by their tid there too.
TEST(DumpNamespace, ThreadsOfAProcessInAPidNamespaceShowTheirTidThere) {
    PBP_REQUIRE(geteuid() == 0, "dump and unshare --pid need root");
    const Interpreter in = host_python();
    const std::string script = read_file(workload("dump_blocked.py"));
    // --kill-child: the Python process, init of the new namespace, dies with unshare (which the
    // Reporter kills), else it would outlive the test.
    std::vector<std::string> argv = {"unshare", "--pid", "--fork", "--kill-child", "--mount-proc"};
    for (auto& a : python_running(in, "dump_blocked.py")) argv.push_back(a);
    Reporter u(argv);
    auto lines = u.read_lines(6, 60);
    ASSERT_EQ(lines.size(), 6u) << u.out() << u.err();
    std::map<std::string, uint32_t> ns_tid_of;  // as the workload sees its tids: in its namespace
    for (size_t i = 0; i + 1 < lines.size(); i++) {
        std::istringstream l(lines[i]);
        std::string name;
        uint32_t tid = 0;
        l >> name >> tid;
        ns_tid_of[name] = tid;
    }
    // The Python process is unshare's child, PID 1 in the new namespace.
    std::string children = read_file("/proc/" + std::to_string(u.pid()) + "/task/" + std::to_string(u.pid()) + "/children");
    const pid_t py = static_cast<pid_t>(std::atoi(children.c_str()));
    ASSERT_GT(py, 0) << "no child of unshare";
    CmdResult text;
    std::string wrong;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);;) {
        text = run({pybpfprof_bin(), "dump", "--pid", std::to_string(py)});
        ASSERT_EQ(text.status, 0) << text.err;
        std::map<uint32_t, const TextThread*> by_ns;
        auto threads = parse_text(text.out);
        for (auto& [tid, t] : threads) {
            EXPECT_NE(t.ns_tid, tid) << t.header;
            by_ns[t.ns_tid] = &t;
        }
        wrong.clear();
        for (const Expect& e : kExpect) {
            auto it = by_ns.find(ns_tid_of[e.thread]);
            std::string why = it == by_ns.end() ? "not listed"
                                                : check_thread(*it->second, e, line_of(script, "# BLOCK " + e.ours));
            if (!why.empty()) wrong += e.thread + ": " + why + "; ";
        }
        if (wrong.empty() || std::chrono::steady_clock::now() > until) break;
        usleep(100000);
    }
    EXPECT_EQ(wrong, "") << text.out;
    EXPECT_EQ(text.out.rfind("Process " + std::to_string(py) + " (PID 1 in its namespace): ", 0), 0u) << text.out;
}

// --cgroup: the Python processes in it, not one outside; --all-python: both.
TEST(DumpCgroup, CgroupGivesItsPythonProcessesAndAllPythonGivesEveryOne) {
    PBP_REQUIRE(geteuid() == 0, "dump and cgroups need root");
    const std::string mount = cgroup2_mount();
    ASSERT_FALSE(mount.empty()) << "no cgroup2 mount with root / in /proc/self/mountinfo";
    const std::string rel = "/pbp-dump-test-" + std::to_string(getpid());
    const std::string cg = mount + rel;
    ASSERT_EQ(mkdir(cg.c_str(), 0755), 0) << cg << ": " << strerror(errno);
    struct Cleanup {
        std::string dir;
        ~Cleanup() { rmdir(dir.c_str()); }
    } cleanup{cg};
    const Interpreter in = host_python();
    std::vector<std::string> argv = {"sh", "-c", "echo $$ > '" + cg + "/cgroup.procs' && exec \"$@\"", "sh"};
    for (auto& a : python_running(in, "dump_blocked.py")) argv.push_back(a);
    {
        Reporter inside(argv);
        Reporter outside(python_running(in, "dump_blocked.py"));
        ASSERT_EQ(inside.read_lines(6, 60).size(), 6u) << inside.err();
        ASSERT_EQ(outside.read_lines(6, 60).size(), 6u) << outside.err();
        auto pids = [](const CmdResult& r) {
            std::set<int> v;
            const nlohmann::json doc = nlohmann::json::parse(r.out);
            for (const auto& p : doc["processes"]) v.insert(p["pid"].get<int>());
            return v;
        };
        CmdResult by_cg = run({pybpfprof_bin(), "dump", "--cgroup", rel, "--json"});
        ASSERT_EQ(by_cg.status, 0) << by_cg.err;
        EXPECT_EQ(pids(by_cg), std::set<int>{inside.pid()}) << by_cg.out;
        CmdResult all = run({pybpfprof_bin(), "dump", "--all-python", "--json"});
        ASSERT_EQ(all.status, 0) << all.err;
        EXPECT_TRUE(pids(all).count(inside.pid()));
        EXPECT_TRUE(pids(all).count(outside.pid()));
    }  // both killed and reaped: the cgroup can go
    CmdResult empty = run({pybpfprof_bin(), "dump", "--cgroup", rel});
    EXPECT_EQ(empty.status, 2);
    EXPECT_EQ(empty.err, "pybpfprof dump: no CPython process in the given cgroup; check the cgroup, or dump them all "
                         "with --all-python\n");
}

TEST(DumpErrors, NotPythonMissingPidAndNoTargetAreOneLineBadInput) {
    PBP_REQUIRE(geteuid() == 0, "dump needs root");
    Child sleeper({"sleep", "60"}, temp_dir());
    usleep(100000);
    CmdResult not_py = run({pybpfprof_bin(), "dump", "--pid", std::to_string(sleeper.pid())});
    EXPECT_EQ(not_py.status, 2);
    EXPECT_NE(not_py.err.find("is not a CPython process"), std::string::npos) << not_py.err;
    // (A PID no process has now below pid_max: 4194304 is at or above any machine's pid_max.)
    const std::string absent = std::to_string(unused_pid());
    CmdResult missing = run({pybpfprof_bin(), "dump", "--pid", absent});
    EXPECT_EQ(missing.status, 2);
    EXPECT_EQ(missing.err, "pybpfprof dump: no process with PID " + absent + "; check it with: ps -p " + absent + "\n");
    CmdResult none = run({pybpfprof_bin(), "dump"});
    EXPECT_EQ(none.status, 2);
    EXPECT_EQ(std::count(none.err.begin(), none.err.end(), '\n'), 1) << none.err;
    // Not root: reading other processes' memory needs it.
    CmdResult user = run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", pybpfprof_bin(), "dump",
                          "--pid", std::to_string(sleeper.pid())});
    EXPECT_EQ(user.status, 1) << user.err;
    EXPECT_NE(user.err.find("needs root"), std::string::npos) << user.err;
    EXPECT_EQ(std::count(user.err.begin(), user.err.end(), '\n'), 1) << user.err;
}

// The target is unharmed: a fixed computation dumped again and again gives the same result, and
// its computing thread is never stopped: the time it spends neither running nor waiting for a
// CPU (the kernel's schedstat, measured by the workload itself) stays that of a twin started
// beside it and left alone. A dump that stopped the target for 1 ms (a ptrace attach and detach
// costs about that) would add 1 s over 1000 dumps. Its time is compared with the twin's too,
// loosely (the machine's load falls on both, but not always alike). The two share one CPU and
// the dumps run on another (below): ratios of 0.998-1.004 in 6 runs here, against 0.90-1.46
// when the scheduler placed them. Their slowest chunks are printed with the times.
// (Before 2026-11-27 only the time was compared, with runs made before and after dumping another
// process: CI's machine, whose load changes from one run to the next, put the dumped run 1-20%
// over its bound in three CI runs so far, e.g. 11.2 s against 8.3 s and 9.4 s.)
TEST(DumpUnharmed, CpuBoundProcessDumpedInALoopFinishesTheSameInAboutTheSameTime) {
    PBP_REQUIRE(geteuid() == 0, "dump needs root");
    const Interpreter in = host_python();
    const std::vector<std::string> args = {"6000", "10000"};
    struct Run {
        std::string result;
        double elapsed_s = 0, max_chunk_ms = 0, stopped_ms = -1;
    };
    struct Pair {
        Run dumped, twin;
        int dumps = 0, failed = 0;
        int running_with_gil = 0;  // dumps showing the computing thread running and holding the GIL
    };
    auto result_of = [](Reporter& py) {
        Run r;
        auto lines = py.read_lines(2, 120);  // "ready" and the result
        EXPECT_EQ(lines.size(), 2u) << py.err();
        if (lines.size() < 2) return r;
        std::istringstream l(lines[1]);
        std::string w;
        l >> w >> r.result >> w >> r.elapsed_s >> w >> r.max_chunk_ms >> w >> r.stopped_ms;
        EXPECT_EQ(py.wait(10), 0);
        return r;
    };
    // The dumped process and its twin share one CPU, and the dumps run on another: on a 2-CPU
    // machine, left to the scheduler, the dumps (a process each, 1000 of them) shared a CPU with
    // one of the two and not the other, and the dumped run took 1.4x its twin's time in runs
    // where nothing was stopped (stopped 0.6-3.6 ms for both).
    std::vector<int> cpus;
    {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof set, &set) == 0)
            for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; c++)
                if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
    auto on_cpu = [&](size_t i, std::vector<std::string> argv) {
        if (cpus.size() < 2) return argv;  // one CPU: nothing to separate
        argv.insert(argv.begin(), {"taskset", "-c", std::to_string(cpus[i])});
        return argv;
    };
    auto measure = [&]() {
        Pair p;
        Reporter a(on_cpu(0, python_running(in, "dump_cpu.py", args)));
        Reporter b(on_cpu(0, python_running(in, "dump_cpu.py", args)));
        EXPECT_TRUE(a.read_until("ready", 60)) << a.err();
        EXPECT_TRUE(b.read_until("ready", 60)) << b.err();
        const std::string pid = std::to_string(a.pid());
        while (p.dumps < 1000 && a.running()) {
            CmdResult d = run(on_cpu(1, {pybpfprof_bin(), "dump", "--pid", pid}));
            if (d.status != 0 || d.out.find("    work (") == std::string::npos) {
                // Its work over, the target prints its result and ends: a dump taken while its
                // interpreter finalizes has no Python frame (and no other thread state), and
                // one taken as it exits fails. That ends the loop (a machine slower than this
                // one does not reach 1000 dumps first: CI's 706); in the work it is a failure.
                if (a.read_lines(2, 1).size() >= 2) {
                    std::cout << "dump " << p.dumps + 1 << " caught the target after its work (exit "
                              << d.status << "):\n" << d.out << d.err;
                    break;
                }
                if (d.status != 0) {
                    if (!a.running()) break;
                    p.failed++;
                    ADD_FAILURE() << d.err;
                    continue;
                }
                ADD_FAILURE() << "a dump in the middle of the work shows no work frame:\n" << d.out;
            }
            p.dumps++;
            if (d.out.find("\" running, holds the GIL\n") != std::string::npos) p.running_with_gil++;
        }
        p.dumped = result_of(a);
        p.twin = result_of(b);
        return p;
    };
    Pair p = measure();
    // A harm done by the dumps is in every pair; a burst of load that falls on one of the two
    // is not: over the time bound, the pair is made once more and the one with the lower ratio
    // kept.
    auto bound = [](const Pair& q) { return 1.25 * q.twin.elapsed_s + 0.3; };
    if (p.dumped.elapsed_s > bound(p)) {
        Pair again = measure();
        std::cout << "dumped run over the bound (" << p.dumped.elapsed_s << " s against its twin's "
                  << p.twin.elapsed_s << " s), made again: " << again.dumped.elapsed_s << " s against "
                  << again.twin.elapsed_s << " s\n";
        if (!again.dumped.result.empty() && !again.twin.result.empty() &&
            again.dumped.elapsed_s / again.twin.elapsed_s < p.dumped.elapsed_s / p.twin.elapsed_s)
            p = again;
    }
    std::cout << "dumped " << p.dumps << " times: " << p.dumped.elapsed_s << " s (slowest chunk "
              << p.dumped.max_chunk_ms << " ms, stopped " << p.dumped.stopped_ms << " ms); its twin, not dumped: "
              << p.twin.elapsed_s << " s (slowest chunk " << p.twin.max_chunk_ms << " ms, stopped "
              << p.twin.stopped_ms << " ms); " << p.running_with_gil << " dumps show it running with the GIL\n";
    EXPECT_FALSE(p.twin.result.empty());
    EXPECT_EQ(p.dumped.result, p.twin.result);
    EXPECT_EQ(p.failed, 0);
    EXPECT_GE(p.dumps, 300) << "too few dumps to say anything";
    // The thread that computes holds the GIL (3.11's is known): most dumps catch it running so.
    EXPECT_GT(p.running_with_gil, p.dumps / 4) << "of " << p.dumps;
    // Never stopped: schedstat's run time lags by up to a tick at each end, hence the 50 ms.
    ASSERT_GE(p.dumped.stopped_ms, -50.0);
    ASSERT_GE(p.twin.stopped_ms, -50.0);
    EXPECT_LE(p.dumped.stopped_ms, p.twin.stopped_ms + 50.0);
    EXPECT_LE(p.dumped.elapsed_s, bound(p));
}

// Holding and waiting for the GIL (wall_gil.py "held"): hold_b keeps the GIL through 200 ms C
// calls, so loop_a sleeps in take_gil nearly all the time. Most dumps show hold_b holding it
// and loop_a waiting for it; the text and the JSON say so.
class DumpGilWait : public ::testing::TestWithParam<Interpreter> {};

TEST_P(DumpGilWait, AThreadAsleepForTheGilIsWaitingForIt) {
    PBP_REQUIRE(geteuid() == 0, "dump needs root");
    const Interpreter& in = GetParam();
    Reporter py(python_running(in, "wall_gil.py", {"held", "30"}));
    std::map<std::string, uint32_t> tid_of;
    for (const auto& line : py.read_lines(2, 60)) {
        std::istringstream l(line);
        std::string name;
        uint32_t tid = 0;
        l >> name >> tid;
        tid_of[name] = tid;
    }
    ASSERT_TRUE(tid_of.count("loop_a") && tid_of.count("hold_b")) << py.out() << py.err();
    const std::string pid = std::to_string(py.pid());
    usleep(300000);  // both in their loops (loop_a printed its tid before it contends)
    int dumps = 0, a_waiting = 0, b_held = 0, both_held = 0;
    std::string last;
    for (int i = 0; i < 20; i++) {
        CmdResult d = run({pybpfprof_bin(), "dump", "--pid", pid, "--json"});
        ASSERT_EQ(d.status, 0) << d.err;
        last = d.out;
        const auto doc = nlohmann::json::parse(d.out);
        int held = 0;
        for (const auto& t : doc["processes"][0]["threads"]) {
            const uint32_t tid = t["tid"].get<uint32_t>();
            if (t["gil"] == true) held++;
            if (tid == tid_of["loop_a"] && t["waiting_for_gil"] == true) a_waiting++;
            if (tid == tid_of["hold_b"] && t["gil"] == true) b_held++;
            if (t["waiting_for_gil"] == true && t["gil"] == true) ADD_FAILURE() << "held and waiting: " << t.dump();
        }
        both_held += held > 1;
        dumps++;
        usleep(50000);
    }
    EXPECT_EQ(both_held, 0) << "one holder at a time";
    // hold_b gives the GIL up between its calls for a switch interval (5 ms) of 200 ms; a
    // dump can also land while the hand-over is under way (seen: 14 of 20 once, under load).
    EXPECT_GE(a_waiting, dumps * 3 / 5) << last;
    EXPECT_GE(b_held, dumps * 3 / 5) << last;
    // The text says it (within a few dumps).
    const std::string want = "\nThread " + std::to_string(tid_of["loop_a"]) + " \"loop_a\" sleeping, waiting for the GIL\n";
    CmdResult text;
    for (int i = 0; i < 10; i++) {
        text = run({pybpfprof_bin(), "dump", "--pid", pid});
        ASSERT_EQ(text.status, 0) << text.err;
        if (text.out.find(want) != std::string::npos) break;
        usleep(50000);
    }
    EXPECT_NE(text.out.find(want), std::string::npos) << text.out;
}

// 3.6's GIL is its static variables; 3.12+ keep it in the interpreter.
INSTANTIATE_TEST_SUITE_P(Interpreters, DumpGilWait,
                         ::testing::ValuesIn([] {
                             std::vector<Interpreter> v;
                             for (auto& i : all_interpreters())
                                 if (i.name == "host-3.11" || i.name.rfind("pyenv-3.6", 0) == 0 ||
                                     i.name.rfind("pyenv-3.12", 0) == 0 || i.name == "sid-3.14")
                                     v.push_back(i);
                             return v;
                         }()),
                         interpreter_test_name);

}  // namespace
}  // namespace pbp::test
