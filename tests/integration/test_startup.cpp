// End-to-end, issue 19: every sample of an import-heavy start is attributed. Module bodies run
// once at import and are freed within ms: their code objects are gone before the consumer could
// read them, so BPF captures each code object's identity the first time a new stack holds it
// (bpf/code_capture.bpf.h), and they show as <module> with their file and executing line.
// Every interpreter of the matrix (host 3.11, pyenv 3.6-3.13, chroots 3.9/3.13/3.14/3.15, 3.13t).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "speedscope_reader.h"
#include "test_support.h"

namespace pbp::test {
namespace {

int minor_of(const Interpreter& i) { return std::stoi(i.version.substr(2)); }

bool unresolved(const RFrame& f) {
    return f.name.rfind("[unknown", 0) == 0 || f.name.rfind("[partial", 0) == 0 ||
           (!f.name.empty() && f.name[0] != '[' && f.file == "<unknown>");
}

// unresolved: samples with a frame that could not be named; frameless: samples without Python
// frames that say only why ("[no Python frame]", ...), not what they are (start-up, finalization,
// a C library's thread). The issue counts both as unresolved.
struct Counts {
    size_t total = 0, unresolved = 0, frameless = 0;
    std::string example;  // an unresolved stack, for the failure message
    size_t all_unresolved() const { return unresolved + frameless; }
};

bool attributed(const std::string& label) {
    return label == "[interpreter start-up]" || label == "[interpreter finalization]" || label == "[thread exiting]" ||
           label == "[thread without Python frames]";
}

Counts count(const RProfile& p) {
    Counts c;
    for (auto& t : p.threads)
        for (auto& s : t.samples) {
            c.total++;
            if (s.size() == 1 && !s[0].name.empty() && s[0].name[0] == '[' && !attributed(s[0].name)) {
                if (c.frameless++ == 0 && c.example.empty()) c.example = s[0].name;
                continue;
            }
            for (auto& f : s)
                if (unresolved(f)) {
                    if (c.unresolved++ == 0) c.example = f.name + " (" + f.file + ")";
                    break;
                }
        }
    return c;
}

class Startup : public ::testing::TestWithParam<Interpreter> {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
        dir = temp_dir();
    }
    // [env...] pybpfprof -q -r 999 -o out.json [flags...] -- argv; the profile, the child's output in out.
    RProfile profile(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                     const std::vector<std::string>& flags = {}) {
        std::string path = dir + "/out.json";
        std::vector<std::string> cmd{"env"};
        cmd.insert(cmd.end(), env.begin(), env.end());
        cmd.insert(cmd.end(), {pybpfprof_bin(), "-q", "-r", "999", "-o", path});
        cmd.insert(cmd.end(), flags.begin(), flags.end());
        cmd.push_back("--");
        cmd.insert(cmd.end(), argv.begin(), argv.end());
        auto r = run(cmd, 300);
        out = r.out;
        err = r.err;
        EXPECT_EQ(r.status, 0) << r.out << r.err;
        return read_speedscope(path);
    }
    std::string dir, out, err;
};

// 300 generated modules whose bodies compute: fewer than 1% of samples unresolved, and the module
// bodies are <module> frames of their own files at the lines that loop.
TEST_P(Startup, ImportTreeModuleBodiesAreNamed) {
    auto p = profile(python_running(GetParam(), "import_tree.py", {"300", "20000"}));
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex("tree (\\S+) lines (\\d+) (\\d+)"))) << out << err;
    const std::string root = m[1];
    const int loop = std::stoi(m[2]), body = std::stoi(m[3]);
    const std::regex mod_file(std::regex_replace(root, std::regex("[.^$|()\\[\\]{}*+?\\\\]"), "\\$&") +
                              "/pbp_tree_pkg[0-9]+/mod[0-9]+\\.py");
    Counts c = count(p);
    size_t in_body = 0, at_loop = 0;
    std::map<std::string, size_t> wrong;
    for (auto& t : p.threads)
        for (auto& s : t.samples) {
            if (s.empty() || s.back().name != "<module>" || !std::regex_match(s.back().file, mod_file)) continue;
            in_body++;
            if (s.back().line == loop || s.back().line == body)
                at_loop++;
            else
                wrong[s.back().file + ":" + std::to_string(s.back().line)]++;
        }
    std::cerr << "[ info ] " << GetParam().name << ": " << c.total << " samples, " << in_body
              << " in generated module bodies (" << at_loop << " at their loop), " << c.unresolved
              << " unresolved, " << c.frameless << " without a Python frame and not start-up or finalization\n";
    EXPECT_LT(c.all_unresolved(), c.total / 100 + 1)
        << c.all_unresolved() << " of " << c.total << " samples unresolved, e.g. " << c.example << "\n" << err;
    // The module bodies are most of the run's CPU (each loops ~20000 times).
    EXPECT_GT(in_body, c.total / 5) << c.total << " samples";
    EXPECT_GE(at_loop, in_body * 95 / 100) << "module body samples elsewhere than at their loop, e.g. "
                                           << (wrong.empty() ? "" : wrong.begin()->first);
}

// Start-up and finalization made slow on purpose: a sitecustomize (run by site, at start-up) that
// computes for 0.3 s, and a large object graph torn down by Py_FinalizeEx after the script. Every
// stack sampled in start-up goes under a root [interpreter start-up] frame, the script's never; C
// work with no Python frame is [interpreter start-up] before the first Python frame and
// [interpreter finalization] after the script's last (but for the moments between the script's end
// and Py_FinalizeEx's start, see below); none is unresolved.
TEST_P(Startup, StartupAndFinalizationAreLabelled) {
    // The sitecustomize where the interpreter sees it: inside its chroot, if it has one.
    const std::string site = "/tmp/pbp-startup-site-" + std::to_string(getpid());
    const std::string host_site = GetParam().root + site;
    std::filesystem::create_directories(host_site);
    std::ofstream(host_site + "/sitecustomize.py") <<
               ("import time\n\n\ndef startup_work():\n    end = time.perf_counter() + 0.3\n    x = 0\n"
               "    while time.perf_counter() < end:\n        x += 1\n\n\nstartup_work()\n");
    ASSERT_TRUE(std::filesystem::exists(host_site + "/sitecustomize.py"));
    auto p = profile(python_running(GetParam(), "slow_phases.py", {"300000", "0.2"}), {"PYTHONPATH=" + site});
    std::filesystem::remove_all(host_site);
    const std::string file = workload_for(GetParam(), "slow_phases.py");
    const std::string startup_root = "[interpreter start-up]";
    size_t startup = 0, startup_under = 0, script = 0, script_under = 0, fin = 0, exiting = 0, vague_before = 0,
           vague_after = 0,
           threads = 0;
    std::string vague_names;
    for (auto& t : p.threads) {
        auto& ss = t.samples;
        auto ours = [&](const std::vector<RFrame>& s) {
            for (auto& f : s)
                if (f.file == file) return true;
            return false;
        };
        auto first = std::find_if(ss.begin(), ss.end(), ours);
        if (first == ss.end()) continue;  // not the main thread
        threads++;
        auto last = std::find_if(ss.rbegin(), ss.rend(), ours).base();
        auto python = std::find_if(ss.begin(), ss.end(), [](const std::vector<RFrame>& s) {
            return std::any_of(s.begin(), s.end(), [](const RFrame& f) { return !f.name.empty() && f.name[0] != '['; });
        });
        for (auto it = ss.begin(); it != ss.end(); ++it) {
            const bool under = !it->empty() && (*it)[0].name == startup_root;
            if (has_frame(*it, "startup_work")) startup++, startup_under += under;
            if (ours(*it)) script++, script_under += under;
            const std::string l = it->size() == 1 ? (*it)[0].name : std::string();
            fin += l == "[interpreter finalization]";
            exiting += l == "[thread exiting]";
            const bool vague = !l.empty() && l[0] == '[' && l != startup_root && l != "[interpreter finalization]" &&
                               l != "[thread exiting]";
            if (vague && vague_names.find(l) == std::string::npos) vague_names += " " + l;
            if (it < python) vague_before += vague;
            if (it >= last) vague_after += vague;
        }
    }
    Counts c = count(p);
    std::cerr << "[ info ] " << GetParam().name << ": " << c.total << " samples: " << startup << " in sitecustomize ("
              << startup_under << " under " << startup_root << "), " << script << " in the script (" << script_under
              << " under it), " << fin << " finalization, " << exiting << " exiting, " << vague_before << " + "
              << vague_after << " otherwise labelled before any Python frame / after the script" << vague_names
              << "\n";
    ASSERT_EQ(threads, 1u) << out << err;
    EXPECT_GE(startup, 100u) << "0.3 s of sitecustomize at 999 Hz";
    EXPECT_EQ(startup_under, startup);
    EXPECT_GT(script, 100u);
    EXPECT_EQ(script_under, 0u);
    EXPECT_GE(fin, 50u) << "the teardown of 300000 dicts at exit";
    // Between the script's end and Py_FinalizeEx's start (the main module's teardown, in C, with
    // the runtime still initialized), and in the process's exit after Py_FinalizeEx, a sample
    // keeps its plain reason; in the kernel's exit path, once the memory map is gone, every read
    // fails. At most 5 of them: 0-1 in 41 of 42 runs here, 3 in one (sid 3.13t).
    // 3.6 sets 'initialized' first thing in Py_Initialize: its C set-up before the first Python
    // frame (a few ms) reads as running, and its samples keep their reason (0, 1 and 2 seen here).
    EXPECT_LE(vague_before, minor_of(GetParam()) == 6 ? 5u : 0u) << vague_names;
    EXPECT_LE(vague_after, 5u) << vague_names;
    EXPECT_EQ(c.unresolved, 0u) << c.example;
}

// A thread a C library made (a pthread started by a shared object loaded with ctypes) computes
// with no Python thread state: its samples are [thread without Python frames], under the name it
// gave itself ("pbp-cspin", 0.9 s after its first samples: the name it ended with, from BPF's
// thread-exit record), and none is unresolved. With --native, the same samples carry the
// thread's C stack (its function spin) under that frame.
TEST_P(Startup, CLibraryThreadIsLabelledUnderItsName) {
    const Interpreter& in = GetParam();
    // Built on the host into a directory the interpreter sees (its root's /tmp in a chroot).
    const std::string so_dir = "/tmp/pbp-cthread-" + std::to_string(getpid());
    std::filesystem::create_directories(in.root + so_dir);
    const std::string so = so_dir + "/c_thread_spinner.so";
    auto cc = run({"cc", "-O1", "-g", "-shared", "-fPIC", "-o", in.root + so, workload("c_thread_spinner.c")});
    ASSERT_EQ(cc.status, 0) << cc.err;
    const std::string label = "[thread without Python frames]";
    for (bool native : {false, true}) {
        SCOPED_TRACE(native ? "--native" : "Python frames only");
        auto p = profile(python_running(in, "c_thread.py", {so, "1.0"}), {},
                         native ? std::vector<std::string>{"--native"} : std::vector<std::string>{});
        ASSERT_NE(out.find("spinner started"), std::string::npos) << out << err;
        const RThread* spinner = nullptr;
        size_t named = 0, labelled_elsewhere = 0;
        for (auto& t : p.threads) {
            if (t.profile_name.find(" pbp-cspin (tid ") != std::string::npos) {
                named++;
                spinner = &t;
                continue;
            }
            for (auto& s : t.samples) labelled_elsewhere += !s.empty() && s[0].name == label;
        }
        ASSERT_EQ(named, 1u) << "one profile named pbp-cspin, among:\n" << [&] {
            std::string n;
            for (auto& t : p.threads) n += "  " + t.profile_name + "\n";
            return n;
        }();
        // Python frames only: the label alone; --native: the label, then the C stack, spin in it.
        size_t exact = 0, in_spin = 0;
        std::map<std::string, size_t> other;
        for (auto& s : spinner->samples) {
            const bool labelled = !s.empty() && s[0].name == label;
            if (labelled && (native || s.size() == 1))
                exact++;
            else
                other[s.empty() ? "(empty)" : s[0].name + " .. " + s.back().name]++;
            in_spin += labelled && has_frame(s, "spin");
        }
        std::string others;
        for (auto& [what, n] : other) others += "\n  " + std::to_string(n) + " x " + what;
        std::cerr << "[ info ] " << in.name << (native ? " --native" : "") << ": " << spinner->samples.size()
                  << " samples of pbp-cspin, " << exact << " " << label << ", " << in_spin << " in spin" << others
                  << "\n";
        // 1 s of C (CPU time, however loaded the machine) at 999 Hz.
        EXPECT_GT(spinner->samples.size(), 250u) << err;
        // All but 1 in 200: one sample in about 1000 was something else on 3.6 and on 3.7, in
        // 3 of some 40 runs ("native thread without a Python thread state": see below).
        EXPECT_GE(exact, spinner->samples.size() - spinner->samples.size() / 200)
            << "the C thread's other samples:" << others;
        if (native) {
            EXPECT_GE(in_spin, spinner->samples.size() * 95 / 100) << "samples with spin in their C stack";
        } else {
            EXPECT_EQ(in_spin, 0u);
        }
        // The main thread, waiting off CPU, is not that thread.
        EXPECT_EQ(labelled_elsewhere, 0u);
        // Nothing unresolved (1% allowed, as for the import tree: a code object copy is not
        // sent past a quarter-full ring buffer, 1 in 518 seen under load). A few samples keep
        // their plain reason: the main thread's between the script's end and Py_FinalizeEx's
        // start (as in StartupAndFinalizationAreLabelled), and, it seems, a thread's last ones,
        // taken in the kernel's exit path once its memory map is gone (every read fails: "no
        // thread state", "interpreter starting or exiting"). CI saw 3 of them on 3.6, 3.7 and
        // 3.13 (at most 2 in the 28 runs here before). 3.6 adds its C set-up's (as in
        // StartupAndFinalizationAreLabelled): it sets 'initialized' first, so the main thread's
        // moments between Py_Initialize's Python calls read as [no Python frame]: 0-5 a run in
        // 15 runs here beside two busy loops, and 6 in all once in 10 such runs (CI failed on
        // 3.6 in stop 28, its message cut).
        Counts c = count(p);
        EXPECT_LE(c.unresolved, c.total / 100) << c.example << "\n" << err;
        EXPECT_LE(c.frameless, minor_of(in) == 6 ? 10u : 5u) << c.example << "\n" << err;
    }
    std::filesystem::remove_all(in.root + so_dir);
}

INSTANTIATE_TEST_SUITE_P(, Startup, ::testing::ValuesIn(all_interpreters()), interpreter_test_name);

// The issue's own workload, where the host has it (Debian's python3-pandas, -dask, -distributed):
// fewer than 1% of samples unresolved.
TEST(StartupHost, PandasDaskDistributedImport) {
    PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
    const Interpreter host = host_python();
    auto probe = run({host.argv[0], "-c", "import pandas, dask.dataframe, distributed"}, 120);
    PBP_REQUIRE(probe.status == 0, "the host's python3 lacks pandas, dask or distributed (tools/install-deps installs them)");
    const std::string dir = temp_dir(), path = dir + "/out.json";
    auto r = run({pybpfprof_bin(), "-q", "-r", "999", "-o", path, "--", host.argv[0], "-c",
                  "import pandas, dask.dataframe, distributed"},
                 300);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    Counts c = count(read_speedscope(path));
    std::cerr << "[ info ] " << c.total << " samples, " << c.unresolved << " unresolved, " << c.frameless
              << " without a Python frame and not start-up or finalization\n";
    EXPECT_GT(c.total, 200u);
    EXPECT_LT(c.all_unresolved(), c.total / 100 + 1)
        << c.all_unresolved() << " of " << c.total << " samples unresolved, e.g. " << c.example << "\n" << r.err;
}

}  // namespace
}  // namespace pbp::test
