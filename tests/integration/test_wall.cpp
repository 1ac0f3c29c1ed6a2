// Wall mode and the GIL (issue 15), end to end: the real BPF programs (perf event and
// scheduler) against real Python processes, read back through pybpfprof's own format (.pbp,
// export/raw_reader.cpp), which carries every sample's weight, kind, wait reason and GIL
// state, and its stack with the synthetic wait leaf ("[sleeping]", ...).
//
// The references are independent of pybpfprof: the workloads' own timing (20 ms computing,
// 20 ms asleep), the kernel's view of a thread's state (/proc/PID/task/TID/stat: D while a
// FUSE read waits), the run's own duration, and the scheduler's fairness between three
// processes pinned to one CPU.
//
// Interpreters (CI must stay within its time: every run here is 3-4 s):
// - HalfSleeping runs on every interpreter of the matrix (all_interpreters(), ~15: static
//   and shared libpython, 3.6 to 3.15, chroots, free-threaded): the off-CPU stack is
//   walked in a different BPF program (the scheduler's) than the on-CPU one, so each
//   version's frame layout must work there too.
// - The idle tests take one interpreter per way of finding the thread state and frames:
//   the oldest (pyenv 3.6), the static Debian 3.11, the shared 3.12 and a chroot's 3.14 (the
//   stack of a thread asleep since before the run is read from userspace, with the same
//   offsets).
// - The GIL takes one interpreter per way its state is found (wall-design.md): 3.9
//   (_PyRuntime.ceval.gil, embedded), the static 3.11 (the same through a static binary),
//   3.12 (interp->ceval.gil, a pointer), 3.13 and 3.14 (_Py_DebugOffsets).
// - I/O wait and preemption are the kernel's business: the wait reason comes from the
//   task's state at the switch, whatever the interpreter; the static 3.11 and a shared 3.13.
//   (The FUSE mount is outside the chroots, so no chroot interpreter here.)
// - Free-threaded: the builds present (3.13t, 3.14t).
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/profile.h"
#include "export/raw.h"
#include "test_support.h"

namespace pbp::test {
namespace {

namespace fs = std::filesystem;


int marker_line(const std::string& script, const std::string& marker) {
    std::ifstream f(workload(script));
    std::string line;
    for (int n = 1; std::getline(f, line); n++)
        if (line.find(marker) != std::string::npos) return n;
    return -1;
}

int minor_of(const Interpreter& i) { return std::stoi(i.version.substr(2)); }
bool free_threaded(const Interpreter& i) { return i.name.rfind("sid-ft-", 0) == 0; }
// Where a single-threaded process's GIL state is known (wall-design.md): 3.7+ with a GIL.
// 3.6 (its GIL in static variables of ceval.c, found by their symbols) creates its GIL only
// when a first thread starts: a process that never starts one has none (n/a on CPU).
// WallGil's processes start threads: there 3.6 is checked like the others.
bool gil_known(const Interpreter& i) { return !free_threaded(i) && minor_of(i) >= 7; }

// The interpreters of the matrix whose name starts with one of prefixes ("pyenv-3.12" picks
// pyenv-3.12.1), in the order given.
std::vector<Interpreter> pick(std::initializer_list<const char*> prefixes) {
    std::vector<Interpreter> v, all = all_interpreters();
    for (const char* p : prefixes)
        for (auto& i : all)
            if (i.name.rfind(p, 0) == 0 && (i.name.size() == strlen(p) || i.name[strlen(p)] == '.')) {
                v.push_back(i);
                break;
            }
    return v;
}

// ---- reading a profile ------------------------------------------------------------------

struct Recorded {
    CmdResult r;
    Profile p;
    bool ok = false;
    double duration_ns() const { return double(p.run.end_mono_ns - p.run.start_mono_ns); }
};

const Frame& leaf_of(const Profile& p, const Sample& s) {
    static const Frame none;
    const auto& st = p.stacks.at(s.stack);
    return st.empty() ? none : p.frames.at(st.back());
}

// Whether s's stack has function fn (at line, when line > 0).
bool has(const Profile& p, const Sample& s, const std::string& fn, int line = 0) {
    for (uint32_t f : p.stacks.at(s.stack)) {
        const Frame& fr = p.frames.at(f);
        if (fr.name == fn && (line <= 0 || fr.line == line)) return true;
    }
    return false;
}

// Weight (ns) of a thread's samples that satisfy pred.
uint64_t weight(const ThreadProfile& t, const std::function<bool(const Sample&)>& pred) {
    uint64_t w = 0;
    for (auto& s : t.samples)
        if (pred(s)) w += s.weight_ns;
    return w;
}
uint64_t total(const ThreadProfile& t) {
    return weight(t, [](const Sample&) { return true; });
}

// The heaviest stacks of a thread, leaf last, with their share: for failure messages.
std::string describe(const Profile& p, const ThreadProfile& t, size_t n = 8) {
    std::map<std::string, uint64_t> by;
    for (auto& s : t.samples) {
        std::string k;
        for (uint32_t f : p.stacks.at(s.stack)) {
            const Frame& fr = p.frames.at(f);
            k += (k.empty() ? "" : ";") + fr.name + (fr.line ? ":" + std::to_string(fr.line) : "");
        }
        k += std::string(" {") + kind_name(s.kind) + ", gil " + gil_name(s.gil) + "}";
        by[k] += s.weight_ns;
    }
    std::vector<std::pair<uint64_t, std::string>> v;
    for (auto& [k, w] : by) v.push_back({w, k});
    std::sort(v.rbegin(), v.rend());
    const double all = double(total(t));
    std::ostringstream os;
    os << "thread " << t.tid << " (" << t.name << "): " << t.samples.size() << " samples, " << all / 1e6 << " ms\n";
    for (size_t i = 0; i < v.size() && i < n; i++)
        os << "  " << 100.0 * v[i].first / std::max(1.0, all) << "% " << v[i].second << "\n";
    return os.str();
}

const ProcessProfile* process(const Profile& p, pid_t pid) {
    for (auto& [k, pr] : p.processes)
        if (pr.pid == uint32_t(pid)) return &pr;
    return nullptr;
}
const ThreadProfile* thread(const Profile& p, pid_t pid, pid_t tid) {
    const ProcessProfile* pr = process(p, pid);
    if (!pr) return nullptr;
    auto it = pr->threads.find(uint32_t(tid));
    return it == pr->threads.end() ? nullptr : &it->second;
}

// The one-letter state of a thread (/proc/PID/task/TID/stat), '?' if gone.
char thread_state(pid_t pid, pid_t tid) {
    std::string s = read_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
    size_t at = s.rfind(')');
    return at == std::string::npos || at + 2 >= s.size() ? '?' : s[at + 2];
}

// "NAME TID" lines a workload printed.
std::map<std::string, pid_t> named_tids(const std::string& out) {
    std::map<std::string, pid_t> m;
    std::istringstream in(out);
    std::string name;
    long tid;
    while (in >> name >> tid) m[name] = pid_t(tid);
    return m;
}

class Wall : public ::testing::TestWithParam<Interpreter> {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
        dir = temp_dir();
    }
    // A workload as the interpreter sees it (a copy inside a chroot's root).
    std::string target_path(const std::string& script) { return workload_for(GetParam(), script); }
    std::vector<std::string> py(const std::string& script, std::vector<std::string> args = {}) {
        return python_running(GetParam(), script, args);
    }
    // pybpfprof -q -o DIR/N.pbp OPTIONS..., read back; it is to exit with status (3: a --pid
    // target exited during the run, its samples kept).
    Recorded record(const std::vector<std::string>& options, int status = 0) {
        Recorded run;
        std::string out = dir + "/run" + std::to_string(n_++) + ".pbp";
        std::vector<std::string> cmd{pybpfprof_bin(), "-q", "-o", out};
        cmd.insert(cmd.end(), options.begin(), options.end());
        run.r = run_cmd(cmd);
        EXPECT_EQ(run.r.status, status) << run.r.err;
        std::string error;
        run.ok = run.r.status == status && read_raw(read_file(out), run.p, error);
        EXPECT_TRUE(run.ok) << error << "\n" << run.r.err;
        return run;
    }
    // The launched command's run: pybpfprof OPTIONS -- <interpreter> script args.
    Recorded launch(std::vector<std::string> options, const std::string& script, std::vector<std::string> args) {
        options.push_back("--");
        for (auto& a : py(script, args)) options.push_back(a);
        return record(options);
    }
    static CmdResult run_cmd(const std::vector<std::string>& cmd) { return run(cmd, 120); }
    std::string dir;

private:
    int n_ = 0;
};

// ---- half sleeping ------------------------------------------------------------------------

class WallHalfSleeping : public Wall {};

TEST_P(WallHalfSleeping, FiftyFiftyInWallAllComputeInCpu) {
    const Interpreter& in = GetParam();
    const int compute_line = marker_line("wall_half_sleep.py", "# COMPUTE");
    const int sleep_line = marker_line("wall_half_sleep.py", "# SLEEP");
    // 999 Hz: 2 s on CPU is ~2000 samples, so the on-CPU half is known to about 1%.
    Recorded wall = launch({"--mode", "wall", "-r", "999"}, "wall_half_sleep.py", {"3"});
    ASSERT_TRUE(wall.ok);
    EXPECT_EQ(wall.p.run.mode, ProfileMode::Wall);
    ASSERT_EQ(wall.p.processes.size(), 1u) << wall.r.err;
    const ProcessProfile& pr = wall.p.processes.begin()->second;
    const ThreadProfile* t = thread(wall.p, pr.pid, pr.pid);
    ASSERT_NE(t, nullptr) << "no samples of the main thread";
    // The compute line: its on-CPU samples, and its preempted intervals (part of its 20 ms of
    // wall time on a busy machine); the sleep call: its intervals asleep.
    const uint64_t compute = weight(*t, [&](const Sample& s) { return has(wall.p, s, "compute", compute_line); });
    const uint64_t asleep = weight(*t, [&](const Sample& s) {
        return s.kind == SampleKind::OffCpu && has(wall.p, s, "rest", sleep_line) &&
               leaf_of(wall.p, s).name == "[sleeping]" && leaf_of(wall.p, s).synthetic && s.wait == WaitReason::Sleep;
    });
    const uint64_t all = total(*t);
    ASSERT_GT(compute + asleep, 0u) << describe(wall.p, *t);
    // The truth is what the workload measured itself: 50/50 on a quiet machine, but a
    // compute() preempted at its deadline overruns it (CI saw 53.9% on a loaded host).
    double truth_compute = 0, truth_rest = 0;
    ASSERT_EQ(sscanf(wall.r.out.c_str(), "measured compute_ms=%lf rest_ms=%lf", &truth_compute, &truth_rest), 2)
        << "the workload's own measurement, on stdout: " << wall.r.out;
    const double truth = 100.0 * truth_compute / (truth_compute + truth_rest);
    EXPECT_NEAR(truth, 50.0, 8.0) << "the workload itself: " << wall.r.out;
    // The wall split against the measured one: within the issue's 3 points. It was 5 while
    // 3.13 and 3.13t put 3.8-4.6% of the thread's time on the compute line as "runnable"
    // beyond what compute() measured, the sleep line that much short: a switch back to the
    // thread that sched_switch never reported (this machine's guest kernel, when a thread of
    // PID 1 preempts it: in ftrace too) left its preemption's interval open through its next
    // run and sleep (20-100 ms of it in 4 of 8 runs); a CPU sample of the thread now ends it
    // (offcpu_running), or its next switch-out, whichever comes first. On a loaded machine the runnable intervals are real: compute() is
    // preempted inside its 20 ms (with two CPU hogs running, within 2 points).
    const double share = 100.0 * compute / double(compute + asleep);
    EXPECT_NEAR(share, truth, 3.0) << "the workload measured " << wall.r.out << describe(wall.p, *t);
    // The two lines have the time the workload measured in them (the rest of the thread's
    // time is start-up, which a loaded machine makes long).
    const double truth_ns = (truth_compute + truth_rest) * 1e6;
    EXPECT_NEAR(double(compute + asleep), truth_ns, 0.03 * truth_ns) << wall.r.out << describe(wall.p, *t);
    // ... and that time is the run's: a thread that lives the whole run has all of it.
    EXPECT_NEAR(double(all), wall.duration_ns(), 0.05 * wall.duration_ns()) << describe(wall.p, *t);

    // The GIL: known (3.7+, with a GIL): held while computing, neither while asleep (a
    // single thread never waits for it); free-threaded: n/a on every sample.
    size_t na = 0, n = 0, cpu_held = 0, cpu = 0, off_neither = 0, off = 0;
    for (auto& s : t->samples) {
        n++;
        na += s.gil == GilState::NA;
        if (s.kind == SampleKind::Cpu && has(wall.p, s, "compute", compute_line)) {
            cpu++;
            cpu_held += s.gil == GilState::Held;
        }
        if (s.kind == SampleKind::OffCpu && s.wait == WaitReason::Sleep) {
            off++;
            off_neither += s.gil == GilState::Neither;
        }
    }
    if (free_threaded(in)) {
        EXPECT_EQ(na, n) << "a free-threaded build has no GIL: n/a on every sample";
    } else if (gil_known(in)) {
        EXPECT_GT(cpu_held, cpu * 95 / 100) << "samples computing that hold the GIL, of " << cpu;
        EXPECT_EQ(off_neither, off) << "samples asleep that neither hold nor wait for the GIL";
    }

    // cpu mode: the same workload is on CPU only in compute(); nothing off CPU.
    Recorded cpu_run = launch({"--mode", "cpu", "-r", "999"}, "wall_half_sleep.py", {"3"});
    ASSERT_TRUE(cpu_run.ok);
    EXPECT_EQ(cpu_run.p.run.mode, ProfileMode::Cpu);
    ASSERT_EQ(cpu_run.p.processes.size(), 1u);
    const ProcessProfile& cp = cpu_run.p.processes.begin()->second;
    const ThreadProfile* ct = thread(cpu_run.p, cp.pid, cp.pid);
    ASSERT_NE(ct, nullptr);
    const uint64_t c_compute = weight(*ct, [&](const Sample& s) { return has(cpu_run.p, s, "compute"); });
    // The interpreter's own start-up and finalization, and the process's exit, are on CPU too
    // (CI: 1-2% of a 1.5 s run, pyenv 3.11); they are named so, and are not the workload's body.
    const uint64_t c_phases = weight(*ct, [&](const Sample& s) {
        return has(cpu_run.p, s, "[interpreter start-up]") || has(cpu_run.p, s, "[interpreter finalization]") ||
               has(cpu_run.p, s, "[thread exiting]");
    });
    const uint64_t c_all = total(*ct) - c_phases;
    ASSERT_GT(c_all, 0u);
    EXPECT_GE(100.0 * c_compute / c_all, 95.0) << describe(cpu_run.p, *ct);
    EXPECT_EQ(weight(*ct, [](const Sample& s) { return s.kind != SampleKind::Cpu; }), 0u)
        << "off-CPU samples in cpu mode\n" << describe(cpu_run.p, *ct);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, WallHalfSleeping, ::testing::ValuesIn(all_interpreters()),
                         interpreter_test_name);

// ---- idle ---------------------------------------------------------------------------------

class WallIdle : public Wall {
protected:
    // >= 95% of the process's weight off CPU asleep under the select call, less its
    // interpreter's named start-up, finalization and exit (as in WallHalfSleeping: not the
    // workload's body; a process woken to exit under TCG on 5.10 spent 80 ms, 5.6% of a 1.44 s
    // run, in them), and its weight is the run's duration +-5% (or, given, the run's duration
    // less up to 'exit_ns': a process that exits during the run is gone before the run notices).
    void check_idle(const Recorded& run, pid_t pid, double exit_ns = 0) {
        const int select_line = marker_line("wall_idle_select.py", "# SELECT");
        const ProcessProfile* pr = process(run.p, pid);
        ASSERT_NE(pr, nullptr) << "no samples of PID " << pid << "\n" << run.r.err;
        ASSERT_EQ(pr->threads.size(), 1u) << run.r.err;
        const ThreadProfile& t = pr->threads.begin()->second;
        const uint64_t all = total(t);
        const uint64_t in_select = weight(t, [&](const Sample& s) {
            return s.kind == SampleKind::OffCpu && has(run.p, s, "wait_here", select_line) &&
                   leaf_of(run.p, s).name == "[sleeping]" && s.wait == WaitReason::Sleep;
        });
        const uint64_t phases = weight(t, [&](const Sample& s) {
            return has(run.p, s, "[interpreter start-up]") || has(run.p, s, "[interpreter finalization]") ||
                   has(run.p, s, "[thread exiting]");
        });
        ASSERT_GT(all, phases);
        EXPECT_GE(100.0 * in_select / (all - phases), 95.0) << describe(run.p, t);
        if (exit_ns > 0) {
            EXPECT_LE(double(all), run.duration_ns() + 25e6) << describe(run.p, t);  // + an on-CPU sample's period
            EXPECT_GE(double(all), run.duration_ns() - exit_ns) << describe(run.p, t);
        } else {
            EXPECT_NEAR(double(all), run.duration_ns(), 0.05 * run.duration_ns()) << describe(run.p, t);
        }
    }
};

TEST_P(WallIdle, LaunchedIdleProcessShowsWhereItWaits) {
    Recorded run = launch({"--mode", "wall"}, "wall_idle_select.py", {"3"});
    ASSERT_TRUE(run.ok);
    ASSERT_EQ(run.p.processes.size(), 1u) << run.r.err;
    check_idle(run, pid_t(run.p.processes.begin()->second.pid));
}

// Asleep since before the run began and still asleep at its end: never switched in or out
// during it, so everything comes from the seeded entry and the end-of-run flush.
TEST_P(WallIdle, AlreadyIdleProcessGivenByPid) {
    Child idle(py("wall_idle_select.py"), dir);
    ASSERT_TRUE(idle.wait_for_out("ready", 60)) << idle.err();
    // Until the kernel has it asleep in select.
    for (int i = 0; i < 200 && thread_state(idle.pid(), idle.pid()) != 'S'; i++) usleep(10000);
    ASSERT_EQ(thread_state(idle.pid(), idle.pid()), 'S');
    usleep(200000);
    Recorded run = record({"--mode", "wall", "-p", std::to_string(idle.pid()), "-d", "3"});
    ASSERT_TRUE(run.ok);
    check_idle(run, idle.pid());
}

// Asleep when it became a target, then woken to exit during the run: its one record comes as it
// wakes, when its code objects are about to be freed. Its stack, read from its memory when it
// was seeded, is named then too (it was named at the record, "code object unreadable" when the
// process was gone by then: every time here, and 1 in 7 processes when 20 started at once).
TEST_P(WallIdle, AlreadyIdleProcessThatWakesToExit) {
    // Woken through a FIFO 3 s after pybpfprof says it profiles it (was a 12 s sleep, long enough
    // for pybpfprof's start: about 1.5 s, over 4 s on a machine busy building, over 7 s in the
    // 5.10 guest under TCG beside a busy host; a shorter sleep had it exit first: "it is a
    // zombie", exit 2). In a chroot, the FIFO is where its interpreter sees it.
    const Interpreter& in = GetParam();
    const std::string fifo = "/tmp/pbp-wall-wake-" + std::to_string(getpid());
    fs::create_directories(in.root + "/tmp");
    ::unlink((in.root + fifo).c_str());
    ASSERT_EQ(mkfifo((in.root + fifo).c_str(), 0600), 0) << strerror(errno);
    struct Unlink {
        std::string path;
        ~Unlink() { ::unlink(path.c_str()); }
    } unlink_fifo{in.root + fifo};
    Child idle(py("wall_idle_select.py", {"600", fifo}), dir);
    ASSERT_TRUE(idle.wait_for_out("ready", 60)) << idle.err();
    for (int i = 0; i < 200 && thread_state(idle.pid(), idle.pid()) != 'S'; i++) usleep(10000);
    ASSERT_EQ(thread_state(idle.pid(), idle.pid()), 'S');
    usleep(200000);
    // As record() does, but not waited for: woken once the run has begun.
    const std::string out = dir + "/wakes.pbp";
    Child prof({pybpfprof_bin(), "-o", out, "--mode", "wall", "-p", std::to_string(idle.pid()), "-d", "20"}, dir);
    ASSERT_TRUE(prof.wait_for_err("profiling PID", 120)) << prof.err();
    usleep(3'000'000);
    ASSERT_EQ(thread_state(idle.pid(), idle.pid()), 'S') << "asleep until woken";
    {
        const int fd = ::open((in.root + fifo).c_str(), O_WRONLY | O_NONBLOCK);
        ASSERT_GE(fd, 0) << strerror(errno);
        ASSERT_EQ(::write(fd, "x", 1), 1) << strerror(errno);
        ::close(fd);
    }
    timespec woke{};
    clock_gettime(CLOCK_MONOTONIC, &woke);
    const uint64_t woke_ns = uint64_t(woke.tv_sec) * 1'000'000'000ull + uint64_t(woke.tv_nsec);
    Recorded run;
    run.r.status = prof.wait(120);
    run.r.err = prof.err();
    ASSERT_EQ(run.r.status, 3) << "a --pid target exited during the run\n" << run.r.err;
    std::string error;
    run.ok = read_raw(read_file(out), run.p, error);
    ASSERT_TRUE(run.ok) << error << "\n" << run.r.err;
    // The run ends when its target exits (unreaped), not at -d 20: within 3 s of its wake, as
    // the 12 s sleep's run had to end within 13 s of the target's start.
    EXPECT_LT(run.p.run.end_mono_ns, woke_ns + 3'000'000'000ull) << "the run ends when its target exits (unreaped)";
    // (sid's 3.14 takes about 100 ms from its wake to its exit)
    check_idle(run, idle.pid(), 500e6);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, WallIdle,
                         ::testing::ValuesIn(pick({"pyenv-3.6", "host-3.11", "pyenv-3.12", "sid-3.14"})),
                         interpreter_test_name);

// ---- the place check -------------------------------------------------------------------------

// Two functions blocked at one place of the C code (wall_same_place.py: os.read on the same pipe
// from the same Python depth, 100 quick reads then one 40 ms read a round): each keeps its own
// off-CPU time. The place check (bpf/offcpu.bpf.h) takes a place's last stack only after reading
// its leaf and caller where they were; were that read skipped, every slow() wait would go under
// quick(), the stack the place had just before. The debug line shows the check at work (most
// switch-outs of the quick reads reuse a stack through it). One interpreter per way of finding
// frames, as the idle tests.
class WallSamePlace : public Wall {};

TEST_P(WallSamePlace, EachFunctionKeepsItsOwnWaitsAtOnePlace) {
    const int slow_line = marker_line("wall_same_place.py", "# SLOW READ");
    const int quick_line = marker_line("wall_same_place.py", "# QUICK READ");
    std::string out = dir + "/same_place.pbp";
    std::vector<std::string> cmd{"env", "PYBPFPROF_DEBUG=1", pybpfprof_bin(), "-o", out, "--mode", "wall", "-r", "99", "--"};
    for (auto& a : py("wall_same_place.py", {"3"})) cmd.push_back(a);
    Recorded wall;
    wall.r = run_cmd(cmd);
    ASSERT_EQ(wall.r.status, 0) << wall.r.err;
    std::string error;
    ASSERT_TRUE(read_raw(read_file(out), wall.p, error)) << error;
    double slow_ms = 0, quick_ms = 0;
    int rounds = 0;
    ASSERT_EQ(sscanf(wall.r.out.c_str(), "measured slow_ms=%lf quick_ms=%lf rounds=%d", &slow_ms, &quick_ms, &rounds), 3)
        << wall.r.out;
    ASSERT_GE(rounds, 20) << wall.r.out;
    ASSERT_EQ(wall.p.processes.size(), 1u) << wall.r.err;
    const ProcessProfile& pr = wall.p.processes.begin()->second;
    const ThreadProfile* t = thread(wall.p, pr.pid, pr.pid);
    ASSERT_NE(t, nullptr) << "no samples of the main thread";
    const uint64_t slow = weight(*t, [&](const Sample& s) {
        return s.kind == SampleKind::OffCpu && has(wall.p, s, "slow", slow_line);
    });
    // The quick reads wait tens of microseconds: summed (aggregate records). A 30 ms interval
    // there would be one of slow()'s.
    size_t quick_long = 0;
    for (auto& s : t->samples)
        quick_long += s.kind == SampleKind::OffCpu && !s.aggregate && s.weight_ns >= 30'000'000 &&
                      has(wall.p, s, "quick", quick_line);
    EXPECT_NEAR(double(slow), slow_ms * 1e6, 0.1 * slow_ms * 1e6) << wall.r.out << describe(wall.p, *t);
    EXPECT_LE(quick_long, 2u) << "slow()'s waits under quick(), of " << rounds << " rounds\n" << describe(wall.p, *t);
    // The check was made: "... reused (identity; N of them by the place check) ..." (not on
    // kernels without bpf_task_pt_regs, 5.15+, where there is no place).
    std::smatch m;
    ASSERT_TRUE(std::regex_search(wall.r.err, m, std::regex(R"(switch-outs (\d+) walked, (\d+) reused \(identity; (\d+) of them by the place check\))")))
        << wall.r.err;
    const double reused = std::stod(m[2]), by_place = std::stod(m[3]);
    if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, nullptr) == 1) {
        EXPECT_GE(by_place, 0.5 * reused) << m[0];
    }
}

INSTANTIATE_TEST_SUITE_P(Interpreters, WallSamePlace,
                         ::testing::ValuesIn(pick({"pyenv-3.6", "host-3.11", "pyenv-3.12", "sid-3.14"})),
                         interpreter_test_name);

// ---- threads sharing a home slot -----------------------------------------------------------

// The off-CPU entries of threads whose home slot another thread holds (bpf/offcpu_table.bpf.h):
// a table of 16 slots (PYBPFPROF_OFFCPU_SLOTS), and two threads whose tids are the main
// thread's modulo 16 (wall_shared_slot.py), each asleep in its own function. Both are tracked
// for all of their time, each with its own stack, whether their entries were made by BPF (the
// threads born during the run) or by userspace (the threads there before, --pid). One
// interpreter: the table does not depend on it.
class WallSharedSlot : public Wall {
protected:
    // PYBPFPROF_OFFCPU_SLOTS=16 PYBPFPROF_DEBUG=1 pybpfprof -o DIR/shared.pbp --mode wall OPTIONS.
    Recorded record_small_table(const std::vector<std::string>& options) {
        Recorded run;
        std::string out = dir + "/shared" + std::to_string(runs_++) + ".pbp";
        std::vector<std::string> cmd{"env", "PYBPFPROF_OFFCPU_SLOTS=16", "PYBPFPROF_DEBUG=1", pybpfprof_bin(),
                                     "-o", out, "--mode", "wall"};
        cmd.insert(cmd.end(), options.begin(), options.end());
        run.r = run_cmd(cmd);
        EXPECT_EQ(run.r.status, 0) << run.r.err;
        std::string error;
        run.ok = run.r.status == 0 && read_raw(read_file(out), run.p, error);
        EXPECT_TRUE(run.ok) << error << "\n" << run.r.err;
        return run;
    }
    // Each napping thread: >= 90% of span_ns in its profile, >= 95% of it asleep under its own
    // function, in at least half as many records as it took 50 ms naps (each one an interval
    // BPF saw: not one pending interval from userspace's seed to the end); and none of the
    // process's threads went untracked for want of a slot.
    void check(const Recorded& run, pid_t pid, const std::map<std::string, pid_t>& tids, double span_ns) {
        ASSERT_EQ(tids.size(), 2u);
        for (auto& [name, tid] : tids) {
            const ThreadProfile* t = thread(run.p, pid, tid);
            ASSERT_NE(t, nullptr) << name << " (tid " << tid << ") has no samples\n" << run.r.err;
            const uint64_t all = total(*t);
            const uint64_t napping = weight(*t, [&](const Sample& s) {
                return s.kind == SampleKind::OffCpu && has(run.p, s, name) && leaf_of(run.p, s).name == "[sleeping]";
            });
            EXPECT_GE(double(all), 0.9 * span_ns) << name << "\n" << describe(run.p, *t);
            EXPECT_GE(100.0 * napping / all, 95.0) << name << "\n" << describe(run.p, *t);
            size_t naps = 0;
            for (auto& s : t->samples) naps += s.kind == SampleKind::OffCpu && has(run.p, s, name);
            EXPECT_GE(double(naps), 0.5 * span_ns / 50e6) << name << "\n" << describe(run.p, *t);
        }
        std::smatch m;
        ASSERT_TRUE(std::regex_search(run.r.err, m, std::regex(R"((\d+) threads' entries away from their home slot, (\d+) threads not tracked)")))
            << run.r.err;
        EXPECT_GE(std::stoi(m[1]), 2) << m[0];
        EXPECT_EQ(std::stoi(m[2]), 0) << m[0];
    }

private:
    int runs_ = 0;
};

// Born during the run: their entries are made by the fork tracepoint's program.
TEST_P(WallSharedSlot, ThreadsBornDuringTheRun) {
    std::vector<std::string> options{"-r", "99", "--"};
    for (auto& a : py("wall_shared_slot.py", {"16", "2", "3"})) options.push_back(a);
    Recorded run = record_small_table(options);
    ASSERT_TRUE(run.ok);
    ASSERT_EQ(run.p.processes.size(), 1u) << run.r.err;
    check(run, pid_t(run.p.processes.begin()->second.pid), named_tids(run.r.out), 3e9);
}

// There before the run: their entries are made by userspace as the process becomes a target.
TEST_P(WallSharedSlot, ThreadsThereBeforeTheRun) {
    Child w(py("wall_shared_slot.py", {"16", "2", "60"}), dir);
    ASSERT_TRUE(w.wait_for_out("ready", 60)) << w.err();
    Recorded run = record_small_table({"-r", "99", "-p", std::to_string(w.pid()), "-d", "2"});
    ASSERT_TRUE(run.ok);
    check(run, w.pid(), named_tids(w.out().substr(0, w.out().find("ready"))), 2e9);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, WallSharedSlot, ::testing::ValuesIn(pick({"host-3.11"})),
                         interpreter_test_name);

// ---- I/O wait -----------------------------------------------------------------------------

#ifdef PBP_SLOW_FUSE
// tests/hosts/slow_fuse.c mounted on a fresh directory (every read 50 ms), unmounted
// (SIGTERM: the server unmounts; a lazy umount if it could not) when done.
class SlowFuse {
public:
    explicit SlowFuse(const std::string& dir) : mnt_(dir + "/mnt") {
        fs::create_directories(mnt_);
        server_ = Child({PBP_SLOW_FUSE, mnt_, "50"}, dir);
        struct stat st;
        for (int i = 0; i < 500 && !mounted(); i++) usleep(10000);
        ok_ = mounted() && stat(file().c_str(), &st) == 0;
    }
    ~SlowFuse() {
        server_.signal(SIGTERM);
        if (server_.wait(10) < 0 || mounted()) umount2(mnt_.c_str(), MNT_DETACH);
    }
    bool ok() const { return ok_; }
    std::string file() const { return mnt_ + "/slow"; }
    std::string err() const { return server_.err(); }

private:
    bool mounted() const { return read_file("/proc/self/mounts").find(" " + mnt_ + " fuse") != std::string::npos; }
    std::string mnt_;
    Child server_;
    bool ok_ = false;
};
#endif

class WallIo : public Wall {};

TEST_P(WallIo, UninterruptibleReadIsWaitingForIo) {
#ifndef PBP_SLOW_FUSE
    PBP_REQUIRE(false, "tests/hosts/slow_fuse.c was not built (libfuse3-dev: tools/install-deps)");
#else
    PBP_REQUIRE(read_file("/proc/filesystems").find("\tfuse\n") != std::string::npos,
                "the kernel has no FUSE (CONFIG_FUSE_FS)");
    SlowFuse fuse(dir);
    ASSERT_TRUE(fuse.ok()) << "the FUSE server did not mount: " << fuse.err();
    const int read_line = marker_line("wall_slow_read.py", "# READ");
    Child reader(py("wall_slow_read.py", {fuse.file(), "3600"}), dir);
    ASSERT_TRUE(reader.wait_for_out("\n", 60)) << reader.err();
    const pid_t tid = named_tids(reader.out())["reader"];
    ASSERT_GT(tid, 0) << reader.out();
    // The setup does what the test needs: the kernel has the reader in D, not S.
    int d = 0, seen = 0;
    for (int i = 0; i < 50; i++, usleep(7000)) {
        char st = thread_state(reader.pid(), tid);
        seen += st != '?';
        d += st == 'D';
    }
    ASSERT_GT(d, seen / 2) << "the reader of the FUSE file should be in D most of the time: " << d << " of " << seen;

    Recorded run = record({"--mode", "wall", "-p", std::to_string(reader.pid()), "-d", "3"});
    ASSERT_TRUE(run.ok);
    const ThreadProfile* t = thread(run.p, reader.pid(), tid);
    ASSERT_NE(t, nullptr) << "no samples of the reader thread";
    const uint64_t io = weight(*t, [&](const Sample& s) {
        return s.kind == SampleKind::OffCpu && s.wait == WaitReason::Io && has(run.p, s, "read_slowly", read_line) &&
               leaf_of(run.p, s).name == "[waiting for I/O]";
    });
    const uint64_t all = total(*t);
    ASSERT_GT(all, 0u);
    // The thread does nothing but wait for the server (50 ms a read, microseconds of CPU).
    EXPECT_GE(100.0 * io / all, 90.0) << describe(run.p, *t);
    // The kernel's FUSE path itself sleeps interruptibly now and then between the long D waits
    // (seen: 80-140 us of 3 s), so "none" is too strict; a D wait shown as sleeping would be
    // tens of ms per read.
    const uint64_t sleeping = weight(*t, [&](const Sample& s) { return s.wait == WaitReason::Sleep; });
    EXPECT_LE(100.0 * sleeping / all, 1.0) << "a D wait shown as sleeping\n" << describe(run.p, *t);
#endif
}

INSTANTIATE_TEST_SUITE_P(Interpreters, WallIo, ::testing::ValuesIn(pick({"host-3.11", "pyenv-3.13"})),
                         interpreter_test_name);

// ---- preemption ---------------------------------------------------------------------------

class WallPreemption : public Wall {};

// Three CPU-bound processes pinned to one CPU: the scheduler gives each a third of it, so
// each waits runnable 2/3 of its wall time. Tolerance: each share within 2/3 +- 8 points.
// EEVDF shares one CPU between three equal tasks within a slice (3 ms) of fair, which over
// 3 s is under a point; at 999 Hz the on-CPU third is ~1000 samples (+-3%, 1 point of
// the whole); what remains is other load on that CPU: a process of another taking 10% of
// it moves each share up by 3 points (the sum over the three of the on-CPU shares stays at
// most one CPU, which is asserted too).
TEST_P(WallPreemption, ThreeOnOneCpuEachRunnableTwoThirds) {
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const std::string cpu = std::to_string(ncpu > 1 ? ncpu - 1 : 0);
    std::vector<Child> spinners;
    std::vector<std::string> options{"--mode", "wall", "-r", "999", "-d", "3"};
    for (int i = 0; i < 3; i++) {
        std::vector<std::string> argv{"taskset", "-c", cpu};
        for (auto& a : py("wall_spin.py", {"30"})) argv.push_back(a);
        spinners.emplace_back(argv, dir);
        options.push_back("-p");
        options.push_back(std::to_string(spinners.back().pid()));
    }
    usleep(300000);  // Python started: the three compete from here on
    for (auto& s : spinners) ASSERT_TRUE(s.running()) << s.err();
    Recorded run = record(options);
    ASSERT_TRUE(run.ok);
    const int spin_line = marker_line("wall_spin.py", "# SPIN");
    double on_cpu_sum = 0;
    for (auto& s : spinners) {
        const ThreadProfile* t = thread(run.p, s.pid(), s.pid());
        ASSERT_NE(t, nullptr) << "no samples of PID " << s.pid();
        const uint64_t all = total(*t);
        const uint64_t runnable = weight(*t, [&](const Sample& x) {
            return x.kind == SampleKind::OffCpu && x.wait == WaitReason::Runnable && has(run.p, x, "spin", spin_line) &&
                   leaf_of(run.p, x).name == "[runnable, waiting for a CPU]";
        });
        const uint64_t on_cpu = weight(*t, [](const Sample& x) { return x.kind == SampleKind::Cpu; });
        ASSERT_GT(all, 0u);
        EXPECT_NEAR(100.0 * runnable / all, 200.0 / 3, 8.0) << describe(run.p, *t);
        EXPECT_NEAR(double(all), run.duration_ns(), 0.05 * run.duration_ns()) << describe(run.p, *t);
        on_cpu_sum += double(on_cpu) / run.duration_ns();
    }
    EXPECT_LT(on_cpu_sum, 1.05) << "three processes on one CPU used more than it";
}

INSTANTIATE_TEST_SUITE_P(Interpreters, WallPreemption, ::testing::ValuesIn(pick({"host-3.11", "pyenv-3.13"})),
                         interpreter_test_name);

// ---- the GIL ------------------------------------------------------------------------------

class WallGil : public Wall {
protected:
    // wall_gil.py KIND 3 launched under options; the thread ids it printed.
    Recorded gil_run(const std::vector<std::string>& options, const std::string& kind, std::map<std::string, pid_t>& tids) {
        // The launched workload's stdout (its thread ids) is pybpfprof's; -q keeps
        // pybpfprof's own lines on stderr.
        Recorded run = launch(options, "wall_gil.py", {kind, "3"});
        tids = named_tids(run.r.out);
        return run;
    }
    // The run's one process and two of the workload's threads, by the names it printed
    // (a null profile fails the test).
    struct Two {
        const ThreadProfile* a = nullptr;
        const ThreadProfile* b = nullptr;
    };
    static Two two_threads(const Recorded& run, std::map<std::string, pid_t>& tids, const std::string& a,
                           const std::string& b) {
        Two t;
        EXPECT_EQ(run.p.processes.size(), 1u) << run.r.err;
        EXPECT_TRUE(tids.count(a) && tids.count(b)) << run.r.out;
        if (run.p.processes.size() != 1 || !tids.count(a) || !tids.count(b)) return t;
        const pid_t pid = pid_t(run.p.processes.begin()->second.pid);
        t.a = thread(run.p, pid, tids[a]);
        t.b = thread(run.p, pid, tids[b]);
        EXPECT_TRUE(t.a && t.b) << "no samples of " << a << " or " << b;
        return t;
    }
    struct Share {
        double held = 0, waiting = 0;  // % of the thread's wall time
        uint64_t all = 0;
    };
    static Share share(const Profile& p, const ThreadProfile& t) {
        Share s;
        s.all = total(t);
        const double all = double(std::max<uint64_t>(1, s.all));
        // Held: on CPU holding it, or preempted while holding it (waiting for a CPU, which the
        // other thread, blocked on the GIL, cannot use).
        s.held = 100.0 * weight(t, [](const Sample& x) {
            return x.gil == GilState::Held &&
                   (x.kind == SampleKind::Cpu || (x.kind == SampleKind::OffCpu && x.wait == WaitReason::Runnable));
        }) / all;
        s.waiting = 100.0 * weight(t, [&](const Sample& x) {
            return x.kind == SampleKind::OffCpu && x.gil == GilState::Waiting && x.wait == WaitReason::Gil &&
                   leaf_of(p, x).name == "[waiting for the GIL]";
        }) / all;
        return s;
    }
};

TEST_P(WallGil, TwoPythonThreadsShareTheGil) {
    PBP_REQUIRE(sysconf(_SC_NPROCESSORS_ONLN) >= 2, "needs 2 CPUs for the threads to contend");
    std::map<std::string, pid_t> tids;
    Recorded run = gil_run({"--mode", "wall", "-r", "999"}, "python", tids);
    ASSERT_TRUE(run.ok);
    ASSERT_EQ(run.p.processes.size(), 1u);
    const pid_t pid = pid_t(run.p.processes.begin()->second.pid);
    for (const char* name : {"loop_a", "loop_b"}) {
        ASSERT_TRUE(tids.count(name)) << run.r.out;
        const ThreadProfile* t = thread(run.p, pid, tids[name]);
        ASSERT_NE(t, nullptr) << "no samples of " << name;
        Share s = share(run.p, *t);
        EXPECT_NEAR(s.held, 50.0, 10.0) << name << "\n" << describe(run.p, *t);
        // "About half": what is neither held nor waited for (the hand-over itself, being
        // preempted by other load) comes out of the waiting half.
        EXPECT_NEAR(s.waiting, 50.0, 15.0) << name << "\n" << describe(run.p, *t);
    }
}

TEST_P(WallGil, HashingThreadMostlyWithoutTheGil) {
    std::map<std::string, pid_t> tids;
    Recorded run = gil_run({"--mode", "wall", "-r", "999"}, "hash", tids);
    ASSERT_TRUE(run.ok);
    const auto [a, h] = two_threads(run, tids, "loop_a", "hash_b");
    ASSERT_TRUE(h && a);
    const uint64_t h_cpu = weight(*h, [](const Sample& x) { return x.kind == SampleKind::Cpu; });
    const uint64_t h_held = weight(*h, [](const Sample& x) { return x.kind == SampleKind::Cpu && x.gil == GilState::Held; });
    const uint64_t h_neither =
        weight(*h, [](const Sample& x) { return x.kind == SampleKind::Cpu && x.gil == GilState::Neither; });
    ASSERT_GT(h_cpu, 0u) << describe(run.p, *h);
    // sha256 over 8 MiB runs with the GIL released; the thread takes it back between calls.
    EXPECT_LT(100.0 * h_held / h_cpu, 25.0) << describe(run.p, *h);
    EXPECT_GT(100.0 * h_neither / h_cpu, 75.0) << describe(run.p, *h);
    // ... which leaves it to loop_a, which then holds it far more than half the time.
    EXPECT_GT(share(run.p, *a).held, 70.0) << describe(run.p, *a);
}

// A thread that wants the GIL while another keeps it through a 200 ms C call (usleep through
// ctypes.PyDLL) waits for it nearly all the time: it gets it for a switch interval (5 ms)
// between the calls. Unlike the two loops sharing it, this does not depend on how fast the
// machine is (tools/vmtest runs it under TCG), and it is the test of the futex check on
// kernels without bpf_task_pt_regs (5.10).
TEST_P(WallGil, WaitingForAGilKeptThroughACall) {
    PBP_REQUIRE(!free_threaded(GetParam()), "a free-threaded build has no GIL");
    std::map<std::string, pid_t> tids;
    Recorded run = gil_run({"--mode", "wall", "-r", "999"}, "held", tids);
    ASSERT_TRUE(run.ok);
    const auto [a, h] = two_threads(run, tids, "loop_a", "hold_b");
    ASSERT_TRUE(a && h);
    // (Its first wait is in say(), before the loop: under loop_a, at any line.) Seen on the
    // host: 93-98%; 78% once under load (5 CPU-bound processes of others on its 2 CPUs), with
    // 19% runnable: woken for the GIL, then preempted.
    const uint64_t waiting = weight(*a, [&](const Sample& x) {
        return x.kind == SampleKind::OffCpu && x.gil == GilState::Waiting && x.wait == WaitReason::Gil &&
               leaf_of(run.p, x).name == "[waiting for the GIL]" && has(run.p, x, "loop_a");
    });
    ASSERT_GT(total(*a), 0u);
    EXPECT_GE(100.0 * waiting / total(*a), 70.0) << describe(run.p, *a);
    // The holder sleeps in the call (and waits for the GIL only while loop_a has it between
    // calls: seen 4-10% on the host, 23% under load).
    const int hold_line = marker_line("wall_gil.py", "# HOLD");
    const uint64_t asleep = weight(*h, [&](const Sample& x) {
        return x.kind == SampleKind::OffCpu && x.wait == WaitReason::Sleep && has(run.p, x, "hold_b", hold_line);
    });
    ASSERT_GT(total(*h), 0u);
    EXPECT_GE(100.0 * asleep / total(*h), 70.0) << describe(run.p, *h);
}

TEST_P(WallGil, GilModeKeepsOnlyHoldingSamples) {
    std::map<std::string, pid_t> tids;
    Recorded run = gil_run({"--mode", "gil", "-r", "999"}, "python", tids);
    ASSERT_TRUE(run.ok);
    EXPECT_EQ(run.p.run.mode, ProfileMode::Gil);
    ASSERT_EQ(run.p.processes.size(), 1u);
    const ProcessProfile& pr = run.p.processes.begin()->second;
    size_t n = 0, bad = 0;
    for (auto& [tid, t] : pr.threads)
        for (auto& s : t.samples) {
            n++;
            bad += s.kind != SampleKind::Cpu || s.gil != GilState::Held;
        }
    EXPECT_EQ(bad, 0u) << "samples not holding the GIL in --mode gil, of " << n;
    // Both threads held it, about half the run each: ~1.5 s of samples each at 999 Hz.
    for (const char* name : {"loop_a", "loop_b"}) {
        const ThreadProfile* t = thread(run.p, pid_t(pr.pid), tids[name]);
        ASSERT_NE(t, nullptr) << name;
        EXPECT_GT(double(total(*t)), 0.3 * run.duration_ns()) << describe(run.p, *t);
    }
}

// What --mode gil leaves out is counted and said: the hashing thread is on CPU mostly without
// the GIL, so most of its time is left out, and the summary's line says how much.
TEST_P(WallGil, GilModeSaysWhatItLeftOut) {
    std::map<std::string, pid_t> tids;
    Recorded run = gil_run({"--mode", "gil", "-r", "999"}, "hash", tids);
    ASSERT_TRUE(run.ok);
    const std::regex line("  mode gil: ([0-9.]+) s on CPU holding the GIL kept; ([0-9.]+) s on CPU not holding it "
                          "left out \\(([0-9]+) samples?\\)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(run.r.err, m, line)) << run.r.err;
    const double kept_s = std::stod(m[1]), left_s = std::stod(m[2]);
    const uint64_t left_n = std::stoull(m[3]);
    std::cout << "  " << GetParam().name << ": kept " << kept_s << " s, left out " << left_s << " s (" << left_n
              << " samples)\n";
    // The kept time is the profile's; what was left out is at least most of hash_b's time on CPU
    // (~2.5 s of the 3 s run unless the machine is loaded): well over a second, 1 ms a sample.
    uint64_t kept_ns = 0;
    for (auto& [_, pr] : run.p.processes)
        for (auto& [__, t] : pr.threads) kept_ns += total(t);
    EXPECT_NEAR(kept_s, kept_ns / 1e9, 0.0011);
    EXPECT_GT(left_s, 0.5) << run.r.err;
    EXPECT_NEAR(left_s, left_n * 1e-3, 0.01 * left_s + 0.002) << run.r.err;
    // The GIL line counts both: held (kept) and neither (left out).
    EXPECT_NE(run.r.err.find(" s neither"), std::string::npos) << run.r.err;
    EXPECT_EQ(run.r.err.find("no known GIL state"), std::string::npos) << run.r.err;
}

INSTANTIATE_TEST_SUITE_P(Interpreters, WallGil,
                         ::testing::ValuesIn(pick({"pyenv-3.6", "pyenv-3.9", "host-3.11", "pyenv-3.12", "pyenv-3.13", "sid-3.14"})),
                         interpreter_test_name);

// ---- free-threaded ------------------------------------------------------------------------

class WallFreeThreaded : public Wall {};

// No GIL: n/a on every sample, whatever the mode; wall mode accounts for every thread (the
// main thread waiting in join() too).
TEST_P(WallFreeThreaded, GilNaAndWallWorks) {
    std::map<std::string, pid_t> tids;
    Recorded run = launch({"--mode", "wall", "-r", "999"}, "wall_gil.py", {"python", "3"});
    ASSERT_TRUE(run.ok);
    tids = named_tids(run.r.out);
    ASSERT_EQ(run.p.processes.size(), 1u);
    const ProcessProfile& pr = run.p.processes.begin()->second;
    size_t n = 0, na = 0;
    for (auto& [tid, t] : pr.threads)
        for (auto& s : t.samples) {
            n++;
            na += s.gil == GilState::NA;
            EXPECT_NE(s.wait, WaitReason::Gil);
        }
    EXPECT_EQ(na, n) << "GIL state on a free-threaded build";
    // Both loops ran in parallel, on CPU most of the run; the main thread slept in join().
    for (const char* name : {"loop_a", "loop_b"}) {
        const ThreadProfile* t = thread(run.p, pid_t(pr.pid), tids[name]);
        ASSERT_NE(t, nullptr) << name << ": " << run.r.out;
        EXPECT_GT(weight(*t, [](const Sample& s) { return s.kind == SampleKind::Cpu; }), 0u);
    }
    const ThreadProfile* main_t = thread(run.p, pid_t(pr.pid), pid_t(pr.pid));
    ASSERT_NE(main_t, nullptr);
    const uint64_t joined = weight(*main_t, [&](const Sample& s) {
        return s.kind == SampleKind::OffCpu && has(run.p, s, "main") && s.wait == WaitReason::Sleep;
    });
    EXPECT_GT(double(joined), 0.8 * run.duration_ns()) << describe(run.p, *main_t);
}

// --mode gil keeps nothing of a process without a GIL: the summary says so in one warning
// line, and how much it left out, rather than an empty profile without a word.
TEST_P(WallFreeThreaded, GilModeWarnsThatItKeepsNothing) {
    Recorded run = launch({"--mode", "gil", "-r", "999"}, "wall_gil.py", {"python", "2"});
    ASSERT_TRUE(run.ok);
    size_t n = 0;
    for (auto& [_, pr] : run.p.processes)
        for (auto& [__, t] : pr.threads) n += t.samples.size();
    EXPECT_EQ(n, 0u) << "samples kept in --mode gil of a free-threaded build";
    const std::regex warning("  warning: 1 process has no known GIL state and --mode gil keeps none of its samples "
                             "\\(PID ([0-9]+): a free-threaded build: it has no GIL\\); use --mode cpu or --mode wall "
                             "for it\n");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(run.r.err, m, warning)) << run.r.err;
    const std::regex left(" ([0-9.]+) s on CPU not holding it left out \\(([0-9]+) samples?\\)");
    ASSERT_TRUE(std::regex_search(run.r.err, m, left)) << run.r.err;
    // Both loops ran in parallel for ~2 s: ~4 s on CPU, all left out (less when loaded).
    EXPECT_GT(std::stod(m[1]), 1.0) << run.r.err;
    EXPECT_EQ(run.r.err.find("was not sampled"), std::string::npos) << run.r.err;
}

std::vector<Interpreter> free_threaded_interpreters() {
    std::vector<Interpreter> v;
    for (auto& i : all_interpreters())
        if (free_threaded(i)) v.push_back(i);
    return v;
}
INSTANTIATE_TEST_SUITE_P(Interpreters, WallFreeThreaded, ::testing::ValuesIn(free_threaded_interpreters()),
                         interpreter_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(WallFreeThreaded);

}  // namespace
}  // namespace pbp::test
