// Shared helpers for unit and integration tests.
#pragma once
#include <sys/types.h>

#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace pbp::test {

// True when running under CI=true: nothing may be skipped there.
bool in_ci();

// Whether this kernel offers bpf_loop to perf_event programs (5.17+), asked of the kernel
// by loading a probe program (libbpf), not of pybpfprof. Needs root.
bool kernel_has_bpf_loop();

// Skip the current test outside CI, fail it under CI. Use as: PBP_REQUIRE(cond, "why").
#define PBP_REQUIRE(cond, why)                                                       \
    do {                                                                             \
        if (!(cond)) {                                                               \
            if (::pbp::test::in_ci()) FAIL() << "required under CI=true: " << (why); \
            GTEST_SKIP() << (why);                                                   \
        }                                                                            \
    } while (0)

// The checks in a real browser or node (Chromium via Playwright: the HTML report, the SVG;
// the speedscope app), which check what the JS and the browser do with a file the C++ wrote,
// are skipped when PBP_SKIP_BROWSER_CHECKS=1. Only the sanitized unit tests set it
// (Sanitized.UnitTests.Shard*, tests/CMakeLists.txt): there the C++ that writes the file runs
// under the sanitizers as before, and the browser's part, which the normal build's unit tests
// run, is left out (125 of the 21 tests' 126 CPU-seconds there, 2026-11-29). The normal
// build's unit tests never honour it under CI=true (the variable fails the test instead), so
// every browser check still runs once in CI. Not a skip of a BPF test: those never skip under
// CI=true. True (with why) when the current test should skip its browser part.
bool skip_browser_checks(std::string& why);

// Use just before a test's browser or node check, after the C++ it checks has run.
#define PBP_SKIP_BROWSER_CHECK()                                                            \
    do {                                                                                    \
        std::string pbp_skip_why_;                                                          \
        if (::pbp::test::skip_browser_checks(pbp_skip_why_)) GTEST_SKIP() << pbp_skip_why_; \
    } while (0)

struct CmdResult {
    int status = -1;  // exit code, or 128+signal
    std::string out;  // stdout
    std::string err;  // stderr
};

// Runs argv (no shell), capturing stdout/stderr.
CmdResult run(const std::vector<std::string>& argv, int timeout_s = 120);

// argv with more arguments appended: with_args(in.argv, {"-c", script}).
std::vector<std::string> with_args(std::vector<std::string> argv, std::initializer_list<std::string> more);

// What Child and Reporter have in common: a started process that is killed (SIGKILL) and
// reaped when its owner is destroyed, unless it was seen to end before.
class Process {
public:
    pid_t pid() const { return pid_; }
    void signal(int sig) const;
    // Waits up to timeout_s; returns the exit code (128+signal), or -1 on timeout.
    int wait(int timeout_s);
    bool running();

protected:
    Process() = default;
    Process(Process&& o) noexcept { swap(o); }  // the moved-from one takes over ours, if any
    Process& operator=(Process&& o) noexcept {
        swap(o);
        return *this;
    }
    ~Process();
    void swap(Process& o) noexcept;
    pid_t pid_ = -1;
    int status_ = -1;
};

// A process running in the background, its output going to files (its own process group).
class Child : public Process {
public:
    Child() = default;
    Child(const std::vector<std::string>& argv, const std::string& dir);
    Child(Child&& o) noexcept = default;
    Child& operator=(Child&& o) noexcept = default;
    ~Child() = default;  // kills it if still running
    std::string out() const;
    std::string err() const;
    // Wait until its stdout / stderr contains needle (e.g. pybpfprof's "profiling PID" line,
    // printed once sampling runs); false if it exits or timeout_s passes first.
    bool wait_for_out(const std::string& needle, int timeout_s = 120);
    bool wait_for_err(const std::string& needle, int timeout_s = 120);

private:
    bool wait_for(std::string (Child::*text)() const, const std::string& needle, int timeout_s);
    std::string out_path_, err_path_;
};

// A process that reports on its stdout (a pipe), read line by line as the test needs it:
// stdin is /dev/null, stderr goes to a file (err()). Killed and reaped when destroyed.
class Reporter : public Process {
public:
    Reporter() = default;
    explicit Reporter(const std::vector<std::string>& argv);
    Reporter(Reporter&& o) noexcept;
    Reporter& operator=(Reporter&& o) noexcept;
    ~Reporter();
    // Reads until n complete lines arrived (or EOF / timeout); returns the complete lines so far.
    std::vector<std::string> read_lines(size_t n, int timeout_s = 30);
    // Reads until a line equal to 'line' arrived; false on EOF / timeout.
    bool read_until(const std::string& line, int timeout_s = 30);
    // All of stdout read so far (the last line possibly incomplete).
    const std::string& out() const { return buf_; }
    std::string err() const;

private:
    template <class Done>
    void read_while_not(Done done, int timeout_s);
    int fd_ = -1;
    std::string buf_, err_path_;
};

std::string source_dir();
std::string binary_dir();
std::string pybpfprof_bin();  // $PBP_TEST_BIN when set (a sanitized build), else this build's
std::string pyspy_bin();  // pybpfprof-py-spy
std::string tool_path(const std::string& name);  // tests/tools/NAME in the source tree
std::string read_file(const std::string& path);
std::string temp_dir();  // a fresh directory, removed at exit
// The test's own reading of /proc/sys/kernel/pid_max: every PID is below it.
long pid_max();
// A PID below pid_max that no process has now: the highest, the last the kernel hands out.
pid_t unused_pid();
// The test's own reading of mountinfo (not pybpfprof's): the cgroup2 mount with root "/"; "" if none.
std::string cgroup2_mount();

// "48690a" -> "Hi\n" (pairs of hex digits; a trailing odd digit is ignored).
std::string unhex(std::string_view hex);

// Python interpreters available to the tests, by name ("host-3.11", "pyenv-3.12", ...).
struct Interpreter {
    std::string name;
    std::vector<std::string> argv;  // how to start it (may include chroot)
    std::string version;            // "3.12"
    std::string root;               // the chroot it runs in ("" = none): it sees only files below
};
// tests/workloads/NAME in the source tree.
std::string workload(const std::string& name);
// tests/workloads/SCRIPT as interpreter in sees it: chroot interpreters get a copy inside their
// root (/tmp/pbp-workloads/SCRIPT there).
std::string workload_for(const Interpreter& in, const std::string& script);
// in's command line running tests/workloads/SCRIPT with args.
std::vector<std::string> python_running(const Interpreter& in, const std::string& script,
                                        const std::vector<std::string>& args = {});
// gtest prints parameters with this (instead of a byte dump).
inline void PrintTo(const Interpreter& i, std::ostream* os) { *os << i.name; }
// gtest parameter name: the interpreter's name with every non-alphanumeric character as '_'.
std::string interpreter_test_name(const ::testing::TestParamInfo<Interpreter>& info);

// The host's Debian /usr/bin/python3.11 (static).
Interpreter host_python();
// pyenv builds under /root/.pyenv/versions matching a minor version ("3.12"), if present.
std::vector<Interpreter> pyenv_pythons();
// The Debian chroots' directory (/var/cache/pybpfprof/chroots/NAME).
std::string chroot_dir(const std::string& name);
// Every interpreter on the machine: host 3.11, the pyenv builds, then those present of the
// chroots' (run with `chroot DIR pythonX.Y`, named "CHROOT-X.Y"): sid's 3.14 and 3.15,
// bullseye's 3.9 and trixie's 3.13.
// ... and the free-threaded builds (`--disable-gil`, from Debian's source packages) in
// the sid-ft chroot, named "sid-ft-3.13t" / "sid-ft-3.14t" (tools/provision-free-threaded).
std::vector<Interpreter> all_interpreters();
// The free-threaded minors built, their install prefix and executable inside sid-ft.
std::vector<std::string> free_threaded_minors();
std::string free_threaded_prefix(const std::string& minor);
std::string free_threaded_exe(const std::string& minor);

}  // namespace pbp::test
