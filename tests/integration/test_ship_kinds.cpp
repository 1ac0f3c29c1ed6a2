// Every way an interpreter is shipped, profiled for real: a C program embedding libpython,
// a stripped copy of the static interpreter, an interpreter started through ld.so, a
// virtualenv whose python is a symlink, and a process that execs from a non-Python program
// into Python and back (launched, and followed by --pid).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "speedscope_reader.h"
#include "test_support.h"

namespace pbp::test {
namespace {

namespace fs = std::filesystem;


class ShipKinds : public ::testing::Test {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
        dir = temp_dir();
    }
    // pybpfprof [extra] -- cmd; returns the parsed speedscope profile.
    RProfile profile(const std::vector<std::string>& cmd, std::vector<std::string> extra = {}) {
        std::string out = dir + "/out.json";
        std::vector<std::string> argv{pybpfprof_bin(), "-o", out, "-r", "499"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        if (!cmd.empty()) argv.push_back("--");
        argv.insert(argv.end(), cmd.begin(), cmd.end());
        auto r = run(argv, 120);
        last_err = r.err;
        EXPECT_EQ(r.status, 0) << r.err;
        return read_speedscope(out);
    }
    // cpu_split.py's 70/30 split, with its qualified names (3.11+) and its file.
    void expect_split(const RProfile& prof, const std::string& file) {
        size_t a = prof.count([](auto& s) { return has_frame(s, "Splitter.hot_seventy"); });
        size_t b = prof.count([](auto& s) { return has_frame(s, "Splitter.hot_thirty"); });
        ASSERT_GT(a + b, 200u) << last_err;
        EXPECT_NEAR(100.0 * a / (a + b), 70.0, 5.0) << a << " vs " << b;
        size_t in_file = prof.count([&](auto& s) {
            for (auto& f : s)
                if (f.name == "Splitter.hot_seventy") return f.file == file;
            return false;
        });
        EXPECT_EQ(in_file, a) << "Splitter.hot_seventy must be attributed to " << file;
    }
    std::string dir, last_err;
};

TEST_F(ShipKinds, CProgramEmbeddingLibpython) {
#ifndef PBP_EMBED_HOST
    PBP_REQUIRE(false, "pbp_embed_host was not built: install libpython3.11-dev (tools/install-deps)");
#else
    std::string host = PBP_EMBED_HOST;
    // The host is not a Python executable: the interpreter is only in the shared library.
    auto ldd = run({"ldd", host});
    ASSERT_NE(ldd.out.find("libpython3.11.so"), std::string::npos) << ldd.out;
    auto prof = profile({host, workload("cpu_split.py"), "3"});
    EXPECT_NE(last_err.find("libpython3.11.so"), std::string::npos)
        << "the interpreter should be found in libpython: " << last_err;
    expect_split(prof, workload("cpu_split.py"));
#endif
}

TEST_F(ShipKinds, StrippedStaticInterpreter) {
    std::string py = dir + "/python3.11";
    fs::copy_file("/usr/bin/python3.11", py);
    auto s = run({"strip", "--strip-all", py});
    ASSERT_EQ(s.status, 0) << s.err;
    // No static symbol table is left; _PyRuntime survives as a dynamic symbol and as the
    // .PyRuntime section.
    auto sections = run({"readelf", "-S", "-W", py});
    EXPECT_EQ(sections.out.find(".symtab"), std::string::npos);
    EXPECT_NE(sections.out.find(".PyRuntime"), std::string::npos);
    auto dyn = run({"readelf", "--dyn-syms", "-W", py});
    EXPECT_NE(dyn.out.find("_PyRuntime"), std::string::npos);
    auto prof = profile({py, workload("cpu_split.py"), "3"});
    expect_split(prof, workload("cpu_split.py"));
}

// The stripped copy with its dynamic _PyRuntime symbol gone as well: only the .PyRuntime
// section is left to find the runtime by.
TEST_F(ShipKinds, StrippedWithoutDynamicRuntimeSymbol) {
    std::string py = dir + "/python3.11";
    fs::copy_file("/usr/bin/python3.11", py);
    ASSERT_EQ(run({"strip", "--strip-all", py}).status, 0);
    // Rename the dynamic symbol in place (same length, so nothing else moves): nothing in
    // the process refers to it by name at run time.
    {
        std::fstream f(py, std::ios::in | std::ios::out | std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(f)), {});
        const std::string needle = std::string("_PyRuntime") + '\0';
        size_t n = 0;
        for (size_t at = bytes.find(needle); at != std::string::npos; at = bytes.find(needle, at + 1)) {
            f.seekp(static_cast<std::streamoff>(at));
            f.write("_XyRuntime", 10);
            n++;
        }
        ASSERT_GE(n, 1u);
    }
    auto dyn = run({"readelf", "--dyn-syms", "-W", py});
    ASSERT_FALSE(std::regex_search(dyn.out, std::regex(" _PyRuntime\n"))) << "the symbol is still there";
    auto prof = profile({py, workload("cpu_split.py"), "3"});
    expect_split(prof, workload("cpu_split.py"));
}

TEST_F(ShipKinds, StartedThroughTheDynamicLoader) {
    std::string ldso = "/lib64/ld-linux-x86-64.so.2";
    ASSERT_TRUE(fs::exists(ldso));
    // /proc/PID/exe is ld.so, not Python: static interpreter...
    auto prof = profile({ldso, "/usr/bin/python3.11", workload("cpu_split.py"), "3"});
    expect_split(prof, workload("cpu_split.py"));
    // ...and a shared-libpython one.
    auto pyenv = pyenv_pythons();
    auto it = std::find_if(pyenv.begin(), pyenv.end(), [](auto& p) { return p.version == "3.12"; });
    PBP_REQUIRE(it != pyenv.end(), "pyenv 3.12 is not installed");
    auto prof2 = profile({ldso, it->argv[0], workload("cpu_split.py"), "3"});
    expect_split(prof2, workload("cpu_split.py"));
}

TEST_F(ShipKinds, VirtualenvWithSymlinkedPython) {
    std::string venv = dir + "/venv";
    auto mk = run({"/usr/bin/python3.11", "-m", "venv", "--without-pip", venv});
    ASSERT_EQ(mk.status, 0) << mk.err;
    std::string py = venv + "/bin/python";
    ASSERT_TRUE(fs::is_symlink(py));
    // Launched through the symlink...
    auto prof = profile({py, workload("cpu_split.py"), "3"});
    expect_split(prof, workload("cpu_split.py"));
    // ...and by --pid, with the venv's sys.prefix really in effect.
    Reporter target(with_args({py, "-c",
                               "import sys, runpy; print(sys.prefix, flush=True); "
                               "sys.argv = ['cpu_split.py', '10']; "
                               "runpy.run_path('" + workload("cpu_split.py") + "', run_name='__main__')"},
                              {}));
    auto lines = target.read_lines(1);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0], venv);
    auto prof2 = profile({}, {"--pid", std::to_string(target.pid()), "-d", "3"});
    expect_split(prof2, workload("cpu_split.py"));
}

// sh (busy) -> exec python (phase one) -> exec sh (busy) -> exec python (phase two), one PID.
class ExecChain : public ShipKinds {
protected:
    void SetUp() override {
        ShipKinds::SetUp();
        script = dir + "/phases.py";
        std::ofstream(script) << R"(import os, sys, time
def python_phase_one():
    t = time.process_time() + 1.0
    while time.process_time() < t: pass
def python_phase_two():
    t = time.process_time() + 1.0
    while time.process_time() < t: pass
if sys.argv[1] == "wait":
    while not os.path.exists(__file__ + ".go"): time.sleep(0.01)
    os.execv(sys.executable, [sys.executable, __file__, "one"])
elif sys.argv[1] == "one":
    python_phase_one()
    os.execv("/bin/sh", ["sh", "-c", SHELL_BUSY + 'exec "$0" "$1" two', sys.executable, __file__])
else:
    python_phase_two()
)";
        // A shell busy loop (~0.3 s of CPU) that is not Python.
        std::string busy = "i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done; ";
        std::string text = read_file(script);
        text.replace(text.find("SHELL_BUSY"), 10, "'" + busy + "'");
        std::ofstream(script) << text;
        shell_busy = busy;
    }
    void expect_both_phases(const RProfile& prof) {
        size_t one = prof.count([](auto& s) { return has_frame(s, "python_phase_one"); });
        size_t two = prof.count([](auto& s) { return has_frame(s, "python_phase_two"); });
        EXPECT_GT(one, 150u) << last_err;
        EXPECT_GT(two, 150u) << last_err;
        // One PID throughout: every profile is the same process.
        std::set<std::string> pids;
        for (auto& t : prof.threads) {
            auto at = t.profile_name.find("(pid ");
            if (at != std::string::npos) pids.insert(t.profile_name.substr(at, t.profile_name.find(')', at) - at));
        }
        EXPECT_EQ(pids.size(), 1u) << prof.raw["profiles"].size();
        // Each program's samples are under its own command line (issue 18: samples taken before
        // an exec keep the command line they had then), and the summary counts one process.
        size_t one_named = 0, two_named = 0;
        for (auto& t : prof.threads)
            for (auto& s : t.samples) {
                if (has_frame(s, "python_phase_one")) one_named += t.profile_name.find("phases.py one (pid") != std::string::npos;
                if (has_frame(s, "python_phase_two")) two_named += t.profile_name.find("phases.py two (pid") != std::string::npos;
            }
        EXPECT_EQ(one_named, one) << "phase one's samples under another program's name";
        EXPECT_EQ(two_named, two) << "phase two's samples under another program's name";
        EXPECT_NE(last_err.find(", 1 process, "), std::string::npos) << last_err;
        // Nothing from either Python program is mixed into the other's stacks.
        size_t mixed = prof.count([](auto& s) {
            return has_frame(s, "python_phase_one") && has_frame(s, "python_phase_two");
        });
        EXPECT_EQ(mixed, 0u);
        for (auto& t : prof.threads)
            for (auto& s : t.samples)
                for (auto& f : s) EXPECT_FALSE(f.name.empty() || f.name == "?") << t.profile_name;
    }
    std::string script, shell_busy;
};

TEST_F(ExecChain, LaunchedShellIntoPythonAndBack) {
    auto prof = profile({"/bin/sh", "-c", shell_busy + "exec /usr/bin/python3.11 " + script + " one"},
                        {"--report", dir + "/r.html"});
    expect_both_phases(prof);
    // The report tells how each program ended: phase one was replaced by an exec (the PID went
    // on), phase two exited (before, both were just "exited").
    const std::string html = read_file(dir + "/r.html");
    const std::string open = "<script type=\"application/json\" id=\"pbp-data\">";
    const size_t at = html.find(open) + open.size();
    ASSERT_GT(at, open.size()) << "no pbp-data in the report";
    const auto data = nlohmann::json::parse(html.substr(at, html.find("</script>", at) - at));
    int one = 0, two = 0;
    for (auto& p : data.at("procs")) {
        const std::string cmd = p.at("cmdline");
        if (cmd.find("phases.py one") != std::string::npos) {
            one++;
            EXPECT_TRUE(p.at("exited").get<bool>() && p.at("execd").get<bool>()) << p.dump();
        } else if (cmd.find("phases.py two") != std::string::npos) {
            two++;
            EXPECT_TRUE(p.at("exited").get<bool>() && !p.at("execd").get<bool>()) << p.dump();
        }
    }
    EXPECT_EQ(one, 1);
    EXPECT_EQ(two, 1);
}

TEST_F(ExecChain, PidFollowedThroughExec) {
    // Started by the test and profiled by --pid; once profiled, it execs into Python again,
    // out to sh, and back into Python.
    Child target({"/usr/bin/python3.11", script, "wait"}, dir);
    // --pid is for a running Python: wait until the child has exec'd into it (until then
    // /proc/PID/maps is this test's, and pybpfprof rightly refuses the PID).
    const std::string exe = "/proc/" + std::to_string(target.pid()) + "/exe";
    for (int i = 0; i < 200; i++) {
        std::error_code ec;
        if (std::filesystem::read_symlink(exe, ec).filename() == "python3.11") break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::string out = dir + "/pid.json";
    Child prof({pybpfprof_bin(), "-o", out, "-r", "499", "--pid", std::to_string(target.pid())}, dir);
    for (int i = 0; i < 200 && prof.err().find("profiling PID") == std::string::npos; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    ASSERT_NE(prof.err().find("profiling PID"), std::string::npos) << prof.err();
    std::ofstream(script + ".go") << "go\n";
    EXPECT_EQ(target.wait(60), 0) << target.err();
    // 3: the --pid target exited (documented exit code); its samples are kept.
    EXPECT_EQ(prof.wait(30), 3) << prof.err();
    last_err = prof.err();
    expect_both_phases(read_speedscope(out));
}

}  // namespace
}  // namespace pbp::test
