// Shared helpers for unit and integration tests.
#pragma once
#include <sys/types.h>

#include <ostream>
#include <string>
#include <vector>

namespace pbp::test {

// True when running under CI=true: nothing may be skipped there.
bool in_ci();

// Skip the current test outside CI, fail it under CI. Use as: PBP_REQUIRE(cond, "why").
#define PBP_REQUIRE(cond, why)                                                       \
    do {                                                                             \
        if (!(cond)) {                                                               \
            if (::pbp::test::in_ci()) FAIL() << "required under CI=true: " << (why); \
            GTEST_SKIP() << (why);                                                   \
        }                                                                            \
    } while (0)

struct CmdResult {
    int status = -1;  // exit code, or 128+signal
    std::string out;  // stdout
    std::string err;  // stderr
};

// Runs argv (no shell), capturing stdout/stderr.
CmdResult run(const std::vector<std::string>& argv, int timeout_s = 120);

// A process running in the background, its output going to files.
class Child {
public:
    Child() = default;
    Child(const std::vector<std::string>& argv, const std::string& dir);
    Child(Child&& o) noexcept;
    Child& operator=(Child&& o) noexcept;
    ~Child();  // kills it if still running
    pid_t pid() const { return pid_; }
    void signal(int sig) const;
    // Waits up to timeout_s; returns the exit code (128+signal), or -1 on timeout.
    int wait(int timeout_s);
    bool running();
    std::string out() const;
    std::string err() const;

private:
    pid_t pid_ = -1;
    int status_ = -1;
    std::string out_path_, err_path_;
};

std::string source_dir();
std::string binary_dir();
std::string pybpfprof_bin();
std::string read_file(const std::string& path);
std::string temp_dir();  // a fresh directory, removed at exit

// Python interpreters available to the tests, by name ("host-3.11", "pyenv-3.12", ...).
struct Interpreter {
    std::string name;
    std::vector<std::string> argv;  // how to start it (may include chroot)
    std::string version;            // "3.12"
};
// gtest prints parameters with this (instead of a byte dump).
inline void PrintTo(const Interpreter& i, std::ostream* os) { *os << i.name; }

// The host's Debian /usr/bin/python3.11 (static).
Interpreter host_python();
// pyenv builds under /root/.pyenv/versions matching a minor version ("3.12"), if present.
std::vector<Interpreter> pyenv_pythons();

}  // namespace pbp::test
