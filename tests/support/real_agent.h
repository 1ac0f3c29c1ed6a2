// A real `pybpfprof agent` for integration tests, as root on a temporary socket, with
// clients and targets running as the real unprivileged users that
// tests/tools/agent-test-users creates: pbp-test-a, pbp-test-b, and pbp-test-adm in the admin
// group pbp-test-admins. Used by tests/integration/test_agent.cpp and test_pyspy.cpp.
#pragma once
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace pbp::test {

// argv run as user (real and effective uid and gid, and the user's groups), with a plain
// environment and, when given, the agent's socket in PYBPFPROF_AGENT_SOCKET.
inline std::vector<std::string> as_user(const std::string& user, std::vector<std::string> argv,
                                        const std::string& socket = "") {
    std::vector<std::string> a{"setpriv", "--reuid=" + user, "--regid=" + user, "--init-groups", "env",
                               "HOME=/tmp", "TMPDIR=/tmp"};
    if (!socket.empty()) a.push_back("PYBPFPROF_AGENT_SOCKET=" + socket);
    a.insert(a.end(), argv.begin(), argv.end());
    return a;
}

// The agent's binary: $PBP_AGENT_BIN (a sanitized build, tests/tools/sanitized), else
// the one under test. Clients are always the one under test.
inline std::string agent_bin() {
    const char* b = getenv("PBP_AGENT_BIN");
    return b && *b ? b : pybpfprof_bin();
}

inline uid_t uid_of(const std::string& user) { return static_cast<uid_t>(std::stoul(run({"id", "-u", user}).out)); }

// utime + stime of a process, in seconds.
inline double cpu_seconds(pid_t pid) {
    std::string s = read_file("/proc/" + std::to_string(pid) + "/stat");
    auto close = s.rfind(')');
    if (close == std::string::npos) return 0;
    std::istringstream in(s.substr(close + 2));
    std::string f;
    std::vector<std::string> v;
    while (in >> f) v.push_back(f);
    if (v.size() < 13) return 0;
    return (std::stod(v[11]) + std::stod(v[12])) / sysconf(_SC_CLK_TCK);
}

// A connected Unix socket to path, or -1.
inline int connect_raw(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// Per test: a temporary directory the test users can reach (with one directory of their
// own each, DIR/USER), and an agent listening on DIR/agent.sock.
class RealAgent : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        auto r = run({tool_path("agent-test-users")}, 60);
        ASSERT_EQ(r.status, 0) << r.err;
    }

    void SetUp() override {
        dir = temp_dir();
        // The test users reach the socket and their output directories through it.
        for (auto d = std::filesystem::path(dir); d != d.parent_path() && d.string().rfind("/tmp/", 0) == 0;
             d = d.parent_path())
            chmod(d.c_str(), 0755);
        socket = dir + "/agent.sock";
        for (auto& u : {"pbp-test-a", "pbp-test-b", "pbp-test-adm"}) {
            std::string d = dir + "/" + u;
            std::filesystem::create_directory(d);
            run({"chown", std::string(u) + ":", d});
        }
        start_agent();
    }

    void start_agent(std::vector<std::string> extra = {}) {
        using namespace std::chrono_literals;
        std::vector<std::string> a{agent_bin(), "agent", "--socket", socket, "--admin-group", "pbp-test-admins"};
        a.insert(a.end(), extra.begin(), extra.end());
        agent = Child(a, dir);
        for (int i = 0; i < 200; i++) {
            if (int fd = connect_raw(socket); fd >= 0) {
                close(fd);
                return;
            }
            std::this_thread::sleep_for(50ms);
        }
        FAIL() << "the agent did not listen on " << socket << ": " << agent.err();
    }

    // A file in user's own directory.
    std::string out(const std::string& user, const std::string& name) { return dir + "/" + user + "/" + name; }

    // A busy Python process of user's: hot_lines.py for secs seconds.
    Child busy(const std::string& user, int secs = 60) {
        using namespace std::chrono_literals;
        Child c(as_user(user, {"/usr/bin/python3", source_dir() + "/tests/workloads/hot_lines.py", std::to_string(secs)}),
                dir);
        std::this_thread::sleep_for(300ms);
        return c;
    }

    std::string dir, socket;
    Child agent;
};

}  // namespace pbp::test
