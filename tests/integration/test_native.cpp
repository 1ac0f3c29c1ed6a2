// --native (issue 17), with real BPF and real processes: a C extension built here without frame
// pointers shows its frames under the Python frame that called it, in order and once each; a
// loop of reads shows kernel frames under the Python line. Through a real agent, for real
// unprivileged users: the same chain, kernel frames only for those who may see kernel stacks,
// and never a byte of the stacks BPF copied.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "real_agent.h"
#include "test_support.h"

using namespace pbp;
using namespace pbp::test;

namespace {

int minor_of(const Interpreter& in) { return std::stoi(in.version.substr(2)); }

// One line of collapsed output: its frames (process and thread first) and its count.
struct Folded {
    std::vector<std::string> frames;
    size_t count = 0;
};

std::vector<Folded> read_folded(const std::string& text) {
    std::vector<Folded> out;
    std::istringstream is(text);
    std::string line;
    while (std::getline(is, line)) {
        if (!line.empty() && line[0] == '#') continue;  // wall mode's unit line
        const auto sp = line.rfind(' ');
        if (sp == std::string::npos) continue;
        Folded f;
        f.count = std::stoul(line.substr(sp + 1));
        std::istringstream fs(line.substr(0, sp));
        std::string fr;
        while (std::getline(fs, fr, ';')) f.frames.push_back(fr);
        out.push_back(std::move(f));
    }
    return out;
}

// The folded output's frames as the tests compare them (export/common.cpp frame_label): a
// kernel frame "vfs_read_[k]" as "[k] vfs_read", a native one "b [ext.so]" without its library.
std::vector<Folded> read_plain(const std::string& path) {
    std::vector<Folded> v = read_folded(read_file(path));
    for (Folded& f : v)
        for (std::string& fr : f.frames) {
            const std::string k = "_[k]";
            if (fr.size() > k.size() && fr.compare(fr.size() - k.size(), k.size(), k) == 0) {
                fr = "[k] " + fr.substr(0, fr.size() - k.size());
            } else if (!fr.empty() && fr.back() == ']') {
                const size_t lib = fr.rfind(" [");
                if (lib != std::string::npos && lib > 0) fr.resize(lib);
            }
        }
    return v;
}

// A frame named name: "b", or "b (file:line)" with debug information.
bool named(const std::string& frame, const std::string& name) {
    return frame == name || frame.rfind(name + " (", 0) == 0;
}

size_t count_named(const std::vector<std::string>& frames, const std::string& name) {
    size_t n = 0;
    for (auto& f : frames) n += named(f, name);
    return n;
}

std::string sysconfig(const Interpreter& in, const std::string& expr) {
    auto r = run(with_args(in.argv, {"-c", "import sysconfig; print(" + expr + ")"}));
    if (r.status != 0) return "";
    std::string s = r.out;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
}

class Native : public ::testing::TestWithParam<Interpreter> {
protected:
    void SetUp() override {
        PBP_REQUIRE(kernel_has_bpf_loop(), "--native needs bpf_loop (5.17+)");
        dir = temp_dir();
    }
    std::string dir;
};

// The kernel-frame tests' loop: reader() reads 1 MiB of /dev/zero at a time, for 3 s.
const char* const kReadLoop =
    "import os, time\n"
    "fd = os.open('/dev/zero', os.O_RDONLY)\n"
    "def reader():\n"
    "    os.read(fd, 1 << 20)\n"
    "end = time.monotonic() + 3\n"
    "while time.monotonic() < end:\n"
    "    reader()\n";

// `pybpfprof -q --native [extra] -f collapsed -r 199 -o out -- PYTHON -c script`, as root.
CmdResult run_native(const Interpreter& in, const std::string& script, const std::string& out,
                     const std::vector<std::string>& extra = {}) {
    std::vector<std::string> cmd{pybpfprof_bin(), "-q", "--native"};
    cmd.insert(cmd.end(), extra.begin(), extra.end());
    for (const std::string& a : {std::string("-f"), std::string("collapsed"), std::string("-r"), std::string("199"),
                                 std::string("-o"), out, std::string("--")})
        cmd.push_back(a);
    auto py = with_args(in.argv, {"-c", script});
    cmd.insert(cmd.end(), py.begin(), py.end());
    return run(cmd, 180);
}

// Builds tests/workloads/native_chain_ext.c for interpreter in, with its headers, into ext_dir
// (a path as the interpreter sees it: under its root). "" or why not.
std::string build_extension(const Interpreter& in, const std::string& ext_dir) {
    const std::string include = sysconfig(in, "sysconfig.get_paths()['include']");
    const std::string suffix = sysconfig(in, "sysconfig.get_config_var('EXT_SUFFIX')");
    if (include.empty() || !std::filesystem::exists(in.root + include + "/Python.h"))
        return in.name + ": no Python.h (its -dev package) to build the test extension with";
    // Built on the host against the interpreter's headers, into a directory it sees.
    std::filesystem::create_directories(in.root + ext_dir);
    std::vector<std::string> cc_argv{"cc", "-O2", "-fomit-frame-pointer", "-shared", "-fPIC", "-I" + in.root + include};
    // Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>: the chroot's, after the host's own headers.
    if (!in.root.empty()) cc_argv.push_back("-idirafter" + in.root + "/usr/include");
    for (std::string a : {std::string("-o"), in.root + ext_dir + "/native_chain_ext" + suffix, workload("native_chain_ext.c")})
        cc_argv.push_back(a);
    auto cc = run(cc_argv);
    return cc.status == 0 ? "" : "cc: " + cc.err;
}

// Of the samples in the chain (outer or b in them): how many, and how many show exactly outer,
// a, b at the leaf (kernel frames above b aside), in that order, each once; bad: the others.
struct ChainCount {
    size_t chain = 0, exact = 0;
    std::string bad;
};
ChainCount count_chain(const std::string& folded_path) {
    ChainCount c;
    for (const Folded& f : read_plain(folded_path)) {
        const bool in_chain = count_named(f.frames, "outer") || count_named(f.frames, "b");
        if (!in_chain) continue;
        c.chain += f.count;
        // A sample taken in the kernel (a timer interrupt in b) has kernel frames above b.
        size_t n = f.frames.size();
        while (n && f.frames[n - 1].rfind("[k] ", 0) == 0) n--;
        if (n >= 3 && named(f.frames[n - 3], "outer") && f.frames[n - 2] == "a" && f.frames[n - 1] == "b" &&
            count_named(f.frames, "outer") == 1 && count_named(f.frames, "a") == 1 && count_named(f.frames, "b") == 1)
            c.exact += f.count;
        else if (c.bad.size() < 4000) {
            for (auto& fr : f.frames) c.bad += fr + ";";
            c.bad += " " + std::to_string(f.count) + "\n";
        }
    }
    return c;
}

// Python outer() -> ext.a() -> b(), which spins: >= 95% of the samples of the chain show exactly
// outer, a, b at the leaf, in that order, each once.
TEST_P(Native, ExtensionChainUnderItsPythonCaller) {
    const Interpreter& in = GetParam();
    // In a chroot: a directory of this test process's own (sid's 3.14 and 3.15 share a root,
    // and their tests may run side by side).
    const std::string ext_dir = in.root.empty() ? dir : "/tmp/pbp-native-ext-" + std::to_string(getpid());
    const std::string built = build_extension(in, ext_dir);
    PBP_REQUIRE(built.find("no Python.h") == std::string::npos, built);
    ASSERT_EQ(built, "");

    const std::string out = dir + "/out.folded";
    auto cmd = std::vector<std::string>{pybpfprof_bin(), "-q", "--native", "-f", "collapsed", "-r", "199", "-o", out,
                                        "--"};
    auto py = python_running(in, "native_chain.py", {ext_dir, "4"});
    cmd.insert(cmd.end(), py.begin(), py.end());
    auto r = run(cmd, 180);
    ASSERT_EQ(r.status, 0) << r.err;

    const ChainCount cc = count_chain(out);
    const size_t chain = cc.chain, exact = cc.exact;
    const std::string& bad = cc.bad;
    ASSERT_GT(chain, 50u) << r.err;
    // Debian sid's 3.14 and 3.15 too, whose stripped executables run the eval loop in its cold
    // part, which no symbol names (native/cold_part.h finds it): 0 of 282 and 0 of 410 samples
    // were exact before, each "[native stack incomplete]".
    EXPECT_GE(exact * 100, chain * 95) << exact << " of " << chain << " samples exact; others:\n" << bad;
}

// A loop of os.read on /dev/zero: kernel frames ("[k] ...") at the leaf end, under the Python
// line that reads, never above a Python or native frame.
TEST_P(Native, KernelFramesUnderThePythonLine) {
    const Interpreter& in = GetParam();
    const std::string out = dir + "/out.folded";
    auto r = run_native(in, kReadLoop, out);
    ASSERT_EQ(r.status, 0) << r.err;
    size_t reader = 0, kernel = 0, read_path = 0;
    std::string text = read_file(out);
    for (const Folded& f : read_plain(out)) {
        size_t first_k = f.frames.size(), last_user = 0;
        for (size_t i = 0; i < f.frames.size(); i++) {
            if (f.frames[i].rfind("[k] ", 0) == 0) first_k = std::min(first_k, i);
            else last_user = i;
        }
        if (!count_named(f.frames, "reader")) continue;
        reader += f.count;
        if (first_k == f.frames.size()) continue;
        EXPECT_LT(last_user, first_k) << "a kernel frame above a user one: " << text.substr(0, 3000);
        kernel += f.count;
        for (auto& fr : f.frames)
            if (fr == "[k] ksys_read" || fr == "[k] vfs_read" || fr == "[k] read_zero") {
                read_path += f.count;
                break;
            }
    }
    ASSERT_GT(reader, 50u) << r.err;
    // Most of the time goes to the kernel copying zeros.
    EXPECT_GE(kernel * 2, reader) << kernel << " of " << reader << "\n" << text.substr(0, 3000);
    EXPECT_GE(read_path * 10, kernel * 9) << read_path << " of " << kernel << "\n" << text.substr(0, 3000);
}

// Two interpreters: what is tested is the two program sets loaded together, not a frame layout.
class NativeWall : public Native {};

// --mode wall with --native: both scheduler and sampling programs load together (the agent
// always loads both; a sched_switch program that grew past the verifier's limit with the
// native capture in the object was once caught only by the agent's test). A loop that reads
// /dev/zero for 50 ms, then sleeps 50 ms in select: its on-CPU time has kernel frames of the
// read path under reader(), its off-CPU time sits under waiter() with a [sleeping] leaf, and
// the two halves are both there in nanoseconds.
TEST_P(NativeWall, WallModeKeepsNativeFramesOnCpuAndWaitLeavesOffCpu) {
    const Interpreter& in = GetParam();
    const std::string out = dir + "/out.folded";
    auto r = run_native(in,
                        "import os, select, time\n"
                        "fd = os.open('/dev/zero', os.O_RDONLY)\n"
                        "def reader():\n"
                        "    os.read(fd, 1 << 20)\n"
                        "def waiter():\n"
                        "    select.select([], [], [], 0.05)\n"
                        "end = time.monotonic() + 3\n"
                        "while time.monotonic() < end:\n"
                        "    t = time.monotonic() + 0.05\n"
                        "    while time.monotonic() < t:\n"
                        "        reader()\n"
                        "    waiter()\n",
                        out, {"--mode", "wall"});
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string text = read_file(out);
    ASSERT_EQ(text.rfind("# pybpfprof folded stacks: values in nanoseconds (mode wall", 0), 0u) << text.substr(0, 300);
    uint64_t reader = 0, reader_cpu = 0, reader_kernel = 0, waiter = 0, waiter_sleeping = 0, total = 0;
    const std::set<std::string> waits{"[sleeping]", "[waiting for I/O]", "[waiting for the GIL]",
                                      "[runnable, waiting for a CPU]"};
    for (const Folded& f : read_plain(out)) {
        total += f.count;
        if (count_named(f.frames, "reader")) {
            reader += f.count;
            if (waits.count(f.frames.back())) continue;  // preempted on a busy machine
            reader_cpu += f.count;
            for (auto& fr : f.frames)
                if (fr.rfind("[k] ", 0) == 0) {
                    reader_kernel += f.count;
                    break;
                }
        }
        if (count_named(f.frames, "waiter")) {
            waiter += f.count;
            if (f.frames.back() == "[sleeping]") waiter_sleeping += f.count;
        }
    }
    ASSERT_GT(total, 2'000'000'000u) << "about 3 s of wall time: " << total << "\n" << r.err;
    // On CPU: native capture ran (most of reader's time is the kernel copying zeros).
    ASSERT_GT(reader_cpu, 100'000'000u) << text.substr(0, 3000);
    EXPECT_GE(reader_kernel * 2, reader_cpu) << reader_kernel << " of " << reader_cpu << "\n" << text.substr(0, 3000);
    // Off CPU: the select's 50 ms waits, each above the 1 ms --min-block, about half the run
    // (after each, a loaded machine adds runnable time under waiter() too).
    EXPECT_GE(waiter_sleeping * 100, total * 30) << waiter_sleeping << " of " << total << " (waiter: " << waiter
                                                 << ")\n" << text.substr(0, 3000);
    EXPECT_GE(reader * 100, total * 30) << reader << " of " << total;
}

// The frames of one folded line by kind, from the raw collapsed text (export/common.cpp
// frame_label): "name_[k]" kernel, "name [lib]" or "name (file:line) [lib]" native, "[...]"
// otherwise a marker or wait leaf, anything else Python.
enum class Kind { Python, Native, Kernel, Marker };
Kind kind_of(const std::string& fr) {
    const std::string k = "_[k]";
    if (fr.size() > k.size() && fr.compare(fr.size() - k.size(), k.size(), k) == 0) return Kind::Kernel;
    // (a native frame without a symbol: "[libc.so.6+0x8f3a7] [libc.so.6]")
    if (!fr.empty() && fr.back() == ']' && fr.find(" [") != std::string::npos) return Kind::Native;
    if (!fr.empty() && fr[0] == '[') return Kind::Marker;
    return Kind::Python;
}

// Of the off-CPU weight asleep under Python function caller (its [sleeping] leaf): how much, and
// how much is exactly caller, then native frames (at least one), then kernel frames (at least
// one, none of the profiler's own), then [sleeping]: nothing Python below caller, the caller
// once, no "[native stack incomplete]". bad: the others.
struct WaitCount {
    uint64_t asleep = 0, exact = 0;
    uint64_t marked = 0;  // the same, but "[native stack incomplete]" right below the caller
    uint64_t unknown = 0;  // with a native frame in no file ("[unknown] 0x..."): a wrong unwind
    std::string bad;
};
WaitCount count_wait(const std::string& folded_path, const std::string& caller) {
    WaitCount c;
    for (const Folded& f : read_folded(read_file(folded_path))) {
        size_t at = f.frames.size(), callers = 0;
        for (size_t i = 2; i < f.frames.size(); i++)  // past the process and thread frames
            if (kind_of(f.frames[i]) == Kind::Python && named(f.frames[i], caller)) {
                at = i;
                callers++;
            }
        if (at == f.frames.size() || f.frames.back() != "[sleeping]") continue;
        c.asleep += f.count;
        size_t native = 0, kernel = 0;
        bool ordered = callers == 1, own = false;
        const bool marked = at + 1 < f.frames.size() && f.frames[at + 1] == "[native stack incomplete]";
        bool unknown = false;
        for (size_t i = at + 1 + marked; i + 1 < f.frames.size(); i++) {
            const Kind k = kind_of(f.frames[i]);
            unknown |= f.frames[i].rfind("[unknown]", 0) == 0;
            if (k == Kind::Native && !kernel) native++;
            else if (k == Kind::Kernel) kernel++;
            else ordered = false;  // Python or a marker below the caller, or native under kernel
            own |= f.frames[i].rfind("bpf_prog_", 0) == 0 || f.frames[i].rfind("bpf_trace_run", 0) == 0;
        }
        if (ordered && native && kernel && !own) {
            (marked ? c.marked : c.exact) += f.count;
        }
        if (unknown) c.unknown += f.count;
        if ((!ordered || !native || !kernel || own || marked) && c.bad.size() < 4000) {
            for (auto& fr : f.frames) c.bad += fr + ";";
            c.bad += " " + std::to_string(f.count) + "\n";
        }
    }
    return c;
}

// --mode wall --native: off-CPU intervals carry the native and kernel frames the thread blocked
// in, under the Python line that blocked, above their wait leaf. time.sleep (3.6-3.10: a select
// in pysleep) and select.select, whose C implementation keeps 49 KB of locals, most of them
// never written: a 16 KiB copy could not unwind past it, and the pages never written cannot be
// read from BPF (they come as zeros); the off-CPU copy is 64 KiB, page by page. >= 90% of each
// caller's time asleep is exact (the rest: an interval whose place was first met before native
// capture began, on a busy machine).
TEST_P(Native, OffCpuIntervalsCarryTheirNativeAndKernelFrames) {
    const Interpreter& in = GetParam();
    const std::string out = dir + "/out.folded";
    auto r = run_native(in,
                        "import select, time\n"
                        "def spin():\n"
                        "    t = time.monotonic() + 0.02\n"
                        "    while time.monotonic() < t:\n"
                        "        pass\n"
                        "def sleeper():\n"
                        "    time.sleep(0.05)\n"
                        "def selecter():\n"
                        "    select.select([], [], [], 0.05)\n"
                        "end = time.monotonic() + 3\n"
                        "while time.monotonic() < end:\n"
                        "    spin()\n"
                        "    sleeper()\n"
                        "    selecter()\n",
                        out, {"--mode", "wall"});
    ASSERT_EQ(r.status, 0) << r.err;
    for (const char* caller : {"sleeper", "selecter"}) {
        const WaitCount c = count_wait(out, caller);
        // 25 waits of 50 ms each
        EXPECT_GT(c.asleep, 1'000'000'000u) << caller << ": " << c.asleep << "\n" << read_file(out).substr(0, 3000);
        EXPECT_GE(c.exact * 100, c.asleep * 90) << caller << ": " << c.exact << " of " << c.asleep << " ns exact; others:\n"
                                                << c.bad;
        // Every file here is one the process maps: a frame in none is a wrong unwind (a
        // just-imported module's frames unwound without its CFI).
        EXPECT_EQ(c.unknown, 0u) << caller << ": " << c.unknown << " ns under a frame in no file:\n" << c.bad;
    }
}

// A process whose two threads were asleep before the run began, in select.select and in
// time.sleep, and stay so: BPF never sees them block, so their machine state is read from
// /proc/PID/task/TID/syscall, /proc/PID/task/TID/stack and their memory when the run begins.
// Each thread's whole run is one interval with its native and kernel frames, exactly. /proc
// gives sp and pc, not rbp, which BPF reads (bpf/task_regs.bpf.c): sid's 3.15 is built with
// frame pointers, so its time_sleep's caller is found through rbp (without it, that unwind
// ended there: the sleep was "[native stack incomplete]" above its native and kernel frames).
TEST_P(Native, AsleepSinceBeforeTheRunHasItsNativeFrames) {
    const Interpreter& in = GetParam();
    Child idle(with_args(in.argv, {"-c",
                                   "import select, threading, time\n"
                                   "def napper():\n"
                                   "    time.sleep(600)\n"
                                   "def waiter():\n"
                                   "    select.select([], [], [], 600)\n"
                                   "threading.Thread(target=napper, daemon=True).start()\n"
                                   "print('ready', flush=True)\n"
                                   "waiter()\n"}),
               dir);
    ASSERT_TRUE(idle.wait_for_out("ready", 120)) << idle.err();
    // Until the kernel has both threads asleep.
    auto all_asleep = [&] {
        size_t n = 0;
        for (auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(idle.pid()) + "/task")) {
            const std::string st = read_file(t.path().string() + "/stat");
            const size_t at = st.rfind(')');
            if (at == std::string::npos || at + 2 >= st.size() || st[at + 2] != 'S') return false;
            n++;
        }
        return n == 2;
    };
    for (int i = 0; i < 500 && !all_asleep(); i++) usleep(10000);
    ASSERT_TRUE(all_asleep());
    usleep(200000);

    const std::string out = dir + "/out.folded";
    auto r = run({pybpfprof_bin(), "-q", "--native", "--mode", "wall", "-f", "collapsed", "-d", "2", "-o", out, "--pid",
                  std::to_string(idle.pid())},
                 120);
    ASSERT_EQ(r.status, 0) << r.err;
    for (const std::string caller : {"waiter", "napper"}) {
        const WaitCount c = count_wait(out, caller);
        EXPECT_GT(c.asleep, 1'800'000'000u) << caller << ": " << c.asleep << "\n" << read_file(out).substr(0, 3000);
        EXPECT_EQ(c.exact, c.asleep) << caller << ": " << c.exact << " of " << c.asleep << " ns exact; others:\n"
                                     << c.bad;
    }
}

// Clocks read through the vDSO, the kernel's code mapped into every process with no file behind
// it: time.monotonic() runs there alone; time.process_time() asks it for a CPU-time clock, which
// it reads with a system call from there. Samples in either (user or kernel mode) unwind through
// the vDSO's own CFI (read from the process): "__vdso_clock_gettime [vdso]" under the Python line,
// above the kernel's frames, and the stack above it complete. Before the vDSO was reported, every
// one of them was "[native stack incomplete]" (430 of 527 of this loop's samples, host 3.11).
TEST_P(Native, ClocksUnwindThroughTheVdso) {
    const Interpreter& in = GetParam();
    const std::string out = dir + "/out.folded";
    auto r = run_native(in,
                        "import time\n"
                        "def clocks():\n"
                        "    time.process_time()\n"
                        "    time.monotonic()\n"
                        "end = time.monotonic() + 3\n"
                        "while time.monotonic() < end:\n"
                        "    clocks()\n",
                        out);
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string text = read_file(out);
    const std::vector<Folded> raw = read_folded(text), plain = read_plain(out);
    ASSERT_EQ(raw.size(), plain.size());
    size_t clocks = 0, through_vdso = 0, incomplete = 0;
    for (size_t i = 0; i < plain.size(); i++) {
        const auto& f = plain[i].frames;
        const size_t at = std::find_if(f.begin(), f.end(), [](auto& x) { return named(x, "clocks"); }) - f.begin();
        if (at == f.size()) continue;
        clocks += plain[i].count;
        incomplete += plain[i].count * count_named(f, "[native stack incomplete]");
        size_t vdso = f.size(), first_k = f.size();
        for (size_t j = 0; j < f.size(); j++) {
            const std::string& lib_frame = raw[i].frames[j];
            if (vdso == f.size() && lib_frame.size() > 7 && lib_frame.compare(lib_frame.size() - 7, 7, " [vdso]") == 0)
                vdso = j;
            if (first_k == f.size() && f[j].rfind("[k] ", 0) == 0) first_k = j;
        }
        if (vdso == f.size()) continue;
        EXPECT_GT(vdso, at) << "a vDSO frame above the Python line: " << ::testing::PrintToString(raw[i].frames);
        if (first_k < f.size()) {
            EXPECT_LT(vdso, first_k) << "a kernel frame above the vDSO: " << ::testing::PrintToString(raw[i].frames);
        }
        through_vdso += plain[i].count;
    }
    ASSERT_GT(clocks, 100u) << r.err;
    // Most of the loop's time is in the clocks, most of that in the system call (here 78-82% of
    // clocks()'s samples are through the vDSO, 70% on the free-threaded 3.13t; 0 before it was
    // reported); the rest is the interpreter's.
    EXPECT_GE(through_vdso * 2, clocks) << through_vdso << " of " << clocks << "\n" << text.substr(0, 4000);
    // The stacks are whole (the interpreter's eval loop merged exactly).
    EXPECT_LE(incomplete * 20, clocks) << incomplete << " of " << clocks << " incomplete\n" << text.substr(0, 4000);
}

// The Python part of every --native stack is the stack the same sample has without --native.
// Three processes of one interpreter, started together under a launched parent: each file's
// symbols and debug information are parsed once for all of them (native/file_symbols.h), not
// once per process (each parse of libpython and libc's debug file cost a process 40-90 ms of
// CPU before its first merged stack; BENCHMARKS.md). PYBPFPROF_DEBUG=1 counts the loads per file.
TEST_P(Native, EachFileParsedOnceForAllItsProcesses) {
    const Interpreter& in = GetParam();
    const std::string out = dir + "/shared.folded";
    std::vector<std::string> cmd{"env", "PYBPFPROF_DEBUG=1", pybpfprof_bin(), "-q", "--native", "-f", "collapsed",
                                 "-r", "199", "-o", out, "--"};
    for (const std::string& a : python_running(in, "native_spinners.py", {"3", "1"})) cmd.push_back(a);
    auto r = run(cmd, 180);
    ASSERT_EQ(r.status, 0) << r.err;

    // The processes whose samples have native frames ("name [library]").
    std::set<std::string> with_native;
    for (const Folded& f : read_folded(read_file(out))) {
        if (f.frames.empty()) continue;
        const std::string& root = f.frames[0];
        const size_t at = root.rfind("(pid ");
        if (at == std::string::npos) continue;
        for (size_t i = 1; i < f.frames.size(); i++) {
            const std::string& fr = f.frames[i];
            if (!fr.empty() && fr.back() == ']' && fr.find(" [") != std::string::npos) {
                with_native.insert(root.substr(at));
                break;
            }
        }
    }
    ASSERT_GE(with_native.size(), 3u) << "processes with native frames\n" << r.err;

    const std::string tag = "native symbol loads per file:";
    const size_t line_at = r.err.find(tag);
    ASSERT_NE(line_at, std::string::npos) << r.err;
    std::istringstream loads(r.err.substr(line_at + tag.size(), r.err.find('\n', line_at) - line_at - tag.size()));
    std::string entry;
    size_t files = 0;
    while (loads >> entry) {
        files++;
        const size_t eq = entry.rfind('=');
        ASSERT_NE(eq, std::string::npos) << entry;
        EXPECT_EQ(entry.substr(eq + 1), "1") << "parsed more than once: " << entry;
    }
    // At least the interpreter's file (every merged stack names its eval loop).
    EXPECT_GE(files, 1u) << r.err;
}

// One engine, two sessions on the same processes (the language workloads: names, generators,
// generators resumed from C, asyncio, code objects freed and reused): one with --native, one
// without. Both get every sample; matched by thread and BPF timestamp, the native one's frames
// without its native and kernel frames and markers are the plain one's, frame for frame.
TEST_P(Native, PythonFramesUnchangedByTheMerge) {
    const Interpreter& in = GetParam();
    EngineConfig ec;
    ec.rate_hz = 199;
    ec.native = true;
    Status st;
    auto engine = Engine::start(ec, st);
    ASSERT_TRUE(engine) << st.message;
    std::vector<Child> procs;
    // Half the CPU time of the Language tests' runs (about 5 CPU-s in all, 1000-1200 samples
    // matched at 199 Hz; 10 CPU-s and 2000-2400 before): every kind of frame is still sampled
    // hundreds of times, well above the 300 matched samples asked for.
    std::vector<std::pair<std::string, std::vector<std::string>>> workloads = {
        {"lang_names.py", {"0.15"}}, {"lang_generators.py", {"0.25"}}, {"lang_gen_resume.py", {"1"}},
        {"lang_codereuse.py", {"1500"}}};
    if (minor_of(in) >= 7) workloads.push_back({"lang_asyncio.py", {"1"}});
    SessionConfig with, without;
    with.native = true;
    for (auto& [script, args] : workloads) {
        procs.emplace_back(python_running(in, script, args), dir);
        with.targets.pids.push_back(procs.back().pid());
    }
    without.targets.pids = with.targets.pids;
    // Subscribed once every process has its runtime mapped (a moment after its exec).
    Session* sn = nullptr;
    for (int i = 0; i < 100 && !sn; i++)
        if (!(sn = engine->subscribe(with, nullptr, st))) usleep(50'000);
    ASSERT_TRUE(sn) << st.message;
    Session* sp = engine->subscribe(without, nullptr, st);
    ASSERT_TRUE(sp) << st.message;
    // Until every workload has ended (each runs for a set CPU time, so what is sampled does not
    // depend on the machine's load: this test shares the CPUs with another under ctest -j2, and
    // a fixed 4 s once gave 226 matched samples on 3.13t), at most 60 s.
    auto any_running = [&procs] {
        return std::any_of(procs.begin(), procs.end(), [](Child& c) { return c.running(); });
    };
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (any_running() && std::chrono::steady_clock::now() < end) ASSERT_GE(engine->poll(50), -EINTR);
    EXPECT_FALSE(any_running()) << "a workload still ran after 60 s";
    const Profile plain = engine->stop(sp);
    const Profile native = engine->stop(sn);

    auto python_part = [](const Profile& p, uint32_t stack) {
        std::vector<std::string> out;
        for (uint32_t f : p.stacks.at(stack)) {
            const Frame& fr = p.frames.at(f);
            if (fr.kind != FrameKind::Python || fr.name == "[native stack incomplete]") continue;
            out.push_back(fr.name + " " + fr.file + ":" + std::to_string(fr.line));
        }
        return out;
    };
    std::map<std::tuple<uint32_t, uint32_t, uint64_t>, uint32_t> plain_at;  // (pid, tid, ts) -> stack
    for (auto& [pid, pp] : plain.processes)
        for (auto& [tid, t] : pp.threads)
            for (auto& s : t.samples) plain_at[{pid, tid, s.ts_ns}] = s.stack;
    size_t matched = 0, with_native = 0, differ = 0;
    std::string first;
    for (auto& [pid, pp] : native.processes)
        for (auto& [tid, t] : pp.threads)
            for (auto& s : t.samples) {
                auto it = plain_at.find({pid, tid, s.ts_ns});
                if (it == plain_at.end()) continue;
                matched++;
                for (uint32_t f : native.stacks.at(s.stack))
                    if (native.frames.at(f).kind == FrameKind::Native) {
                        with_native++;
                        break;
                    }
                const auto a = python_part(native, s.stack), b = python_part(plain, it->second);
                if (a == b) continue;
                if (!differ++)
                    for (size_t i = 0; i < std::max(a.size(), b.size()); i++)
                        first += (i < a.size() ? a[i] : "-") + "  |  " + (i < b.size() ? b[i] : "-") + "\n";
            }
    std::cerr << "[ info ] " << in.name << ": " << matched << " samples matched, " << with_native
              << " with native frames\n";
    ASSERT_GT(matched, 300u) << "samples seen by both sessions";
    // Not a comparison of two copies of the same frames: most stacks have native frames too.
    EXPECT_GE(with_native * 2, matched) << with_native << " of " << matched << " with native frames";
    EXPECT_EQ(differ, 0u) << differ << " of " << matched << " differ; the first (native | plain):\n" << first;
}

// --native with --async (3.14+): a task's sample is its task chain, then the frames from its
// coroutine's frame to the leaf with their native and kernel frames; the event loop's frames,
// Python or native, are left out as without --native. On the interpreters with task chains
// only (3.14+, below).
class NativeTasks : public Native {};
TEST_P(NativeTasks, NativeFramesUnderTheTaskChain) {
    const Interpreter& in = GetParam();
    PBP_REQUIRE(minor_of(in) >= 14, "task chains need CPython 3.14+");
    const std::string out = dir + "/out.folded";
    auto r = run_native(in,
                        "import asyncio, os, time\n"
                        "fd = os.open('/dev/zero', os.O_RDONLY)\n"
                        "def reader():\n"
                        "    os.read(fd, 1 << 20)\n"
                        "async def reading():\n"
                        "    end = time.monotonic() + 3\n"
                        "    while time.monotonic() < end:\n"
                        "        reader()\n"
                        "        await asyncio.sleep(0)\n"
                        "async def main():\n"
                        "    await asyncio.create_task(reading(), name='zeros')\n"
                        "asyncio.run(main())\n",
                        out, {"--async"});
    ASSERT_EQ(r.status, 0) << r.err;
    size_t reader = 0, under_task = 0, kernel = 0;
    std::string text = read_file(out);
    for (const Folded& f : read_plain(out)) {
        if (!count_named(f.frames, "reader")) continue;
        reader += f.count;
        // process; thread; <task Task-1>; <task zeros>; reading; reader; ...: nothing between
        // the roots and the chain, the coroutine's frame right under it.
        size_t z = 0;
        while (z < f.frames.size() && f.frames[z] != "<task zeros>") z++;
        if (z != 3 || f.frames[2].rfind("<task ", 0) != 0 || z + 2 >= f.frames.size() || !named(f.frames[z + 1], "reading"))
            continue;
        under_task += f.count;
        bool k = false;
        for (size_t i = z + 1; i < f.frames.size(); i++) {
            EXPECT_EQ(f.frames[i].find("_run_once"), std::string::npos) << "an event loop frame: " << f.frames[i];
            k |= f.frames[i].rfind("[k] ", 0) == 0;
        }
        kernel += k ? f.count : 0;
    }
    ASSERT_GT(reader, 50u) << r.err << text.substr(0, 3000);
    EXPECT_GE(under_task * 100, reader * 95) << under_task << " of " << reader << "\n" << text.substr(0, 3000);
    EXPECT_GE(kernel * 2, reader) << kernel << " of " << reader << "\n" << text.substr(0, 3000);
}

// Debian's NumPy (python3-numpy, with the host's 3.11): a matmul loop's samples show the BLAS or
// NumPy library frames under the Python function that multiplies, and no Python frame under them.
TEST(NativeNumpy, MatmulShowsLibraryFramesUnderThePythonLine) {
    PBP_REQUIRE(kernel_has_bpf_loop(), "--native needs bpf_loop (5.17+)");
    const Interpreter in = host_python();
    PBP_REQUIRE(run(with_args(in.argv, {"-c", "import numpy"})).status == 0,
                "Debian's python3-numpy is not installed (tools/install-deps installs it)");
    const std::string dir = temp_dir(), out = dir + "/numpy.folded";
    auto r = run_native(in,
                        "import numpy, time\n"
                        "a = numpy.random.default_rng(1).random((400, 400))\n"
                        "def matmul():\n"
                        "    return a @ a\n"
                        "end = time.monotonic() + 3\n"
                        "while time.monotonic() < end:\n"
                        "    matmul()\n",
                        out);
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string text = read_file(out);
    size_t matmul = 0, library = 0;
    for (const Folded& f : read_folded(text)) {
        size_t at = f.frames.size();
        for (size_t i = 0; i < f.frames.size(); i++)
            if (named(f.frames[i], "matmul")) at = i;
        if (at == f.frames.size()) continue;
        matmul += f.count;
        bool lib = false, python_below = false;
        for (size_t i = at + 1; i < f.frames.size(); i++) {
            const std::string& fr = f.frames[i];
            if (fr.empty() || fr.back() != ']') python_below = true;  // "name [lib]" and "name_[k]" end so
            const size_t open = fr.rfind(" [");
            if (open == std::string::npos) continue;
            std::string l = fr.substr(open);
            for (char& c : l) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
            lib |= l.find("blas") != std::string::npos || l.find("numpy") != std::string::npos ||
                   l.find("multiarray") != std::string::npos || l.find("lapack") != std::string::npos;
        }
        EXPECT_FALSE(python_below) << "a Python frame under the native ones: " << text.substr(0, 3000);
        if (lib) library += f.count;
    }
    ASSERT_GT(matmul, 50u) << r.err << text.substr(0, 3000);
    EXPECT_GE(library * 10, matmul * 8) << library << " of " << matmul << "\n" << text.substr(0, 4000);
}

// ---- through the agent ----------------------------------------------------------------------

int perf_event_paranoid() { return std::stoi(read_file("/proc/sys/kernel/perf_event_paranoid")); }

// Every byte a client got: its output files (all of dir, recursively), stdout and stderr.
std::string everything_in(const std::string& dir, const CmdResult& r) {
    std::string all = r.out + r.err;
    for (auto& e : std::filesystem::recursive_directory_iterator(dir))
        if (e.is_regular_file()) all += read_file(e.path().string());
    return all;
}

const char* const kNoKernelWarning = "--native: kernel frames are shown to root and the agent's admin group only";

class NativeAgent : public RealAgent {
protected:
    void SetUp() override {
        PBP_REQUIRE(kernel_has_bpf_loop(), "--native needs bpf_loop (5.17+)");
        RealAgent::SetUp();
    }
    CmdResult client(const std::string& user, std::vector<std::string> args) {
        std::vector<std::string> a{pybpfprof_bin(), "--native"};
        a.insert(a.end(), args.begin(), args.end());
        return run(as_user(user, a, socket), 180);
    }
};

// An unprivileged user's own command, through the agent: the chain as root gets it (>= 95%
// exact); while its a() keeps a secret in its stack frame, which BPF copies on every sample to
// unwind, nothing the client got (profile, report, stdout, stderr) holds it; and, where the
// kernel keeps kernel stacks from other users (kernel.perf_event_paranoid >= 2), no kernel frame
// and one warning saying why.
TEST_F(NativeAgent, UsersChainWithoutTheStackBytes) {
    const std::string ext_dir = dir + "/pbp-test-a/ext";
    ASSERT_EQ(build_extension(host_python(), ext_dir), "");
    const std::string out_dir = dir + "/pbp-test-a/out";
    std::filesystem::create_directory(out_dir);
    run({"chown", "pbp-test-a:", out_dir});
    const std::string out = out_dir + "/chain.folded";
    auto r = client("pbp-test-a", {"-f", "collapsed", "-r", "199", "-o", out, "--report", out_dir + "/chain.html",
                                   "--", "/usr/bin/python3", workload("native_chain.py"), ext_dir, "4"});
    ASSERT_EQ(r.status, 0) << r.err << agent.err();
    const ChainCount cc = count_chain(out);
    ASSERT_GT(cc.chain, 50u) << r.err;
    EXPECT_GE(cc.exact * 100, cc.chain * 95) << cc.exact << " of " << cc.chain << "; others:\n" << cc.bad;

    const std::string secret = "pbp-stack-secret-7f3a9c";
    ASSERT_NE(read_file(workload("native_chain_ext.c")).find(secret), std::string::npos) << "the workload's secret";
    const std::string all = everything_in(out_dir, r);
    EXPECT_GT(all.size(), 10000u) << "the profile and the report were read";
    EXPECT_EQ(all.find(secret), std::string::npos) << "stack bytes reached the client";

    const std::string text = read_file(out);
    if (perf_event_paranoid() >= 2) {
        EXPECT_EQ(text.find("_[k]"), std::string::npos) << text.substr(0, 3000);
        EXPECT_NE(r.err.find(kNoKernelWarning), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("kernel.perf_event_paranoid is " + std::to_string(perf_event_paranoid())),
                  std::string::npos)
            << r.err;
    } else {
        EXPECT_EQ(r.err.find(kNoKernelWarning), std::string::npos) << r.err;
    }
}

// Kernel frames through the agent: an admin gets them under the Python line that reads, as
// root does; a user who may not see kernel stacks gets the same samples without them.
TEST_F(NativeAgent, KernelFramesForThoseWhoMaySeeKernelStacks) {
    struct Seen {
        size_t reader = 0, kernel = 0;
    };
    auto profile_as = [&](const std::string& user, CmdResult& r) {
        const std::string out = dir + "/" + user + "/read.folded";
        r = client(user, {"-q", "-f", "collapsed", "-r", "199", "-o", out, "--", "/usr/bin/python3", "-c", kReadLoop});
        Seen s;
        if (r.status != 0) return s;
        for (const Folded& f : read_plain(out)) {
            if (!count_named(f.frames, "reader")) continue;
            s.reader += f.count;
            for (auto& fr : f.frames)
                if (fr.rfind("[k] ", 0) == 0) {
                    s.kernel += f.count;
                    break;
                }
        }
        return s;
    };
    CmdResult ra, rb;
    const Seen adm = profile_as("pbp-test-adm", ra);
    ASSERT_EQ(ra.status, 0) << ra.err << agent.err();
    ASSERT_GT(adm.reader, 50u) << ra.err;
    EXPECT_GE(adm.kernel * 2, adm.reader) << adm.kernel << " of " << adm.reader;
    EXPECT_EQ(ra.err.find(kNoKernelWarning), std::string::npos) << ra.err;

    const Seen user = profile_as("pbp-test-a", rb);
    ASSERT_EQ(rb.status, 0) << rb.err << agent.err();
    ASSERT_GT(user.reader, 50u) << rb.err;
    if (perf_event_paranoid() >= 2) {
        EXPECT_EQ(user.kernel, 0u);
        EXPECT_NE(rb.err.find(kNoKernelWarning), std::string::npos) << rb.err;
    } else {
        EXPECT_GE(user.kernel * 2, user.reader) << user.kernel << " of " << user.reader;
    }
}

// Off CPU through the agent, the same rule: --mode wall --native on a user's own process, one
// thread asleep in select since before the run (its state read from /proc, kernel stack
// included, by the agent as root) and one sleeping 50 ms at a time (captured by BPF). The admin
// gets both with native and kernel frames; a user who may not see kernel stacks gets the same
// native frames and not one kernel frame, from either source.
TEST_F(NativeAgent, OffCpuKernelFramesForThoseWhoMaySeeKernelStacks) {
    struct Seen {
        uint64_t asleep = 0, native = 0, kernel = 0;
    };
    auto profile_as = [&](const std::string& user, CmdResult& r, std::map<std::string, Seen>& seen) {
        Child idle(as_user(user, {"/usr/bin/python3", "-c",
                                  "import select, threading, time\n"
                                  "def waiter():\n"
                                  "    select.select([], [], [], 600)\n"
                                  "def sleeper():\n"
                                  "    time.sleep(0.05)\n"
                                  "threading.Thread(target=waiter, daemon=True).start()\n"
                                  "print('ready', flush=True)\n"
                                  "while True:\n"
                                  "    sleeper()\n"}),
                   dir);
        if (!idle.wait_for_out("ready", 60)) return;
        usleep(500000);  // the waiter asleep in select
        const std::string out = dir + "/" + user + "/wall.folded";
        r = client(user, {"-q", "--mode", "wall", "-f", "collapsed", "-d", "2", "-o", out, "--pid",
                          std::to_string(idle.pid())});
        if (r.status != 0) return;
        for (const Folded& f : read_folded(read_file(out))) {
            if (f.frames.back() != "[sleeping]") continue;
            for (const char* caller : {"waiter", "sleeper"}) {
                size_t at = f.frames.size();
                for (size_t i = 0; i < f.frames.size(); i++)
                    if (kind_of(f.frames[i]) == Kind::Python && named(f.frames[i], caller)) at = i;
                if (at == f.frames.size()) continue;
                Seen& s = seen[caller];
                s.asleep += f.count;
                bool native = false, kernel = false;
                for (size_t i = at + 1; i < f.frames.size(); i++) {
                    native |= kind_of(f.frames[i]) == Kind::Native;
                    kernel |= kind_of(f.frames[i]) == Kind::Kernel;
                }
                s.native += native ? f.count : 0;
                s.kernel += kernel ? f.count : 0;
            }
        }
    };
    CmdResult ra, rb;
    std::map<std::string, Seen> adm, user;
    profile_as("pbp-test-adm", ra, adm);
    ASSERT_EQ(ra.status, 0) << ra.err << agent.err();
    profile_as("pbp-test-a", rb, user);
    ASSERT_EQ(rb.status, 0) << rb.err << agent.err();
    for (const char* caller : {"waiter", "sleeper"}) {
        const Seen& a = adm[caller];
        const Seen& u = user[caller];
        ASSERT_GT(a.asleep, 1'000'000'000u) << caller << "\n" << ra.err;
        ASSERT_GT(u.asleep, 1'000'000'000u) << caller << "\n" << rb.err;
        EXPECT_GE(a.native * 10, a.asleep * 9) << caller << ": " << a.native << " of " << a.asleep;
        EXPECT_GE(a.kernel * 10, a.asleep * 9) << caller << ": " << a.kernel << " of " << a.asleep;
        EXPECT_GE(u.native * 10, u.asleep * 9) << caller << ": " << u.native << " of " << u.asleep;
        if (perf_event_paranoid() >= 2) {
            EXPECT_EQ(u.kernel, 0u) << caller;
        } else {
            EXPECT_GE(u.kernel * 10, u.asleep * 9) << caller;
        }
    }
    if (perf_event_paranoid() >= 2) {
        EXPECT_NE(rb.err.find(kNoKernelWarning), std::string::npos) << rb.err;
    }
}

// An agent started with --no-native refuses a --native session in one line and serves others.
TEST_F(NativeAgent, AnAgentWithoutNativeSaysSo) {
    agent = Child();
    start_agent({"--no-native"});
    const std::string out = dir + "/pbp-test-a/x.json";
    auto r = client("pbp-test-a", {"-o", out, "--", "/usr/bin/python3", "-c", "pass"});
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("this agent was started with --no-native"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out));
    auto plain = run(as_user("pbp-test-a", {pybpfprof_bin(), "-q", "-o", out, "--", "/usr/bin/python3", "-c", "pass"},
                             socket),
                     60);
    EXPECT_EQ(plain.status, 0) << plain.err;
}

// The matrix's interpreters from 3.min on.
std::vector<Interpreter> interpreters_from(int min) {
    std::vector<Interpreter> v;
    for (auto& i : all_interpreters())
        if (minor_of(i) >= min) v.push_back(i);
    return v;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(, Native, ::testing::ValuesIn(interpreters_from(6)), interpreter_test_name);
INSTANTIATE_TEST_SUITE_P(, NativeWall, ::testing::ValuesIn([] {
                             std::vector<Interpreter> v;
                             for (auto& in : interpreters_from(6))
                                 if (in.name == "host-3.11" || in.name == "sid-3.14") v.push_back(in);
                             return v;
                         }()),
                         interpreter_test_name);
INSTANTIATE_TEST_SUITE_P(, NativeTasks, ::testing::ValuesIn(interpreters_from(14)), interpreter_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(NativeTasks);
