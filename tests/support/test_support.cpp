#include "test_support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace pbp::test {

bool in_ci() {
    const char* ci = std::getenv("CI");
    return ci && std::string(ci) == "true";
}

CmdResult run(const std::vector<std::string>& argv, int timeout_s) {
    CmdResult r;
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) return r;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        std::vector<char*> a;
        for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
        a.push_back(nullptr);
        execvp(a[0], a.data());
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    struct pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    char buf[65536];
    while (open_fds > 0) {
        int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      deadline - std::chrono::steady_clock::now())
                                      .count());
        if (ms <= 0) {
            kill(pid, SIGKILL);
            break;
        }
        if (poll(fds, 2, ms) < 0) break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
            ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            } else {
                (i == 0 ? r.out : r.err).append(buf, n);
            }
        }
    }
    for (auto& f : fds)
        if (f.fd >= 0) close(f.fd);
    int st = 0;
    waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

Child::Child(const std::vector<std::string>& argv, const std::string& dir) {
    static int n = 0;
    out_path_ = dir + "/child" + std::to_string(n) + ".out";
    err_path_ = dir + "/child" + std::to_string(n++) + ".err";
    pid_ = fork();
    if (pid_ == 0) {
        int o = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        setpgid(0, 0);
        std::vector<char*> a;
        for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
        a.push_back(nullptr);
        execvp(a[0], a.data());
        _exit(127);
    }
}

Child::Child(Child&& o) noexcept { *this = std::move(o); }
Child& Child::operator=(Child&& o) noexcept {
    std::swap(pid_, o.pid_);
    std::swap(status_, o.status_);
    std::swap(out_path_, o.out_path_);
    std::swap(err_path_, o.err_path_);
    return *this;
}

Child::~Child() {
    if (pid_ > 0 && status_ < 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
}

void Child::signal(int sig) const {
    if (pid_ > 0 && status_ < 0) kill(pid_, sig);
}

bool Child::running() {
    if (pid_ <= 0 || status_ >= 0) return false;
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return false;
    }
    return true;
}

int Child::wait(int timeout_s) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (running()) {
        if (std::chrono::steady_clock::now() > deadline) return -1;
        usleep(10000);
    }
    return status_;
}

std::string Child::out() const { return read_file(out_path_); }
std::string Child::err() const { return read_file(err_path_); }

std::string source_dir() { return PBP_SOURCE_DIR; }
std::string binary_dir() { return PBP_BINARY_DIR; }
std::string pybpfprof_bin() { return PBP_BIN; }

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

namespace {
struct TempRoot {
    std::string path;
    TempRoot() {
        char tmpl[] = "/tmp/pbp-test-XXXXXX";
        path = mkdtemp(tmpl);
    }
    ~TempRoot() {
        if (!std::getenv("PBP_KEEP_TEMP")) {
            std::error_code ec;
            fs::remove_all(path, ec);
        }
    }
};
}  // namespace

std::string temp_dir() {
    static TempRoot root;
    static int n = 0;
    std::string d = root.path + "/t" + std::to_string(n++);
    fs::create_directories(d);
    return d;
}

Interpreter host_python() { return {"host-3.11", {"/usr/bin/python3.11"}, "3.11"}; }

std::vector<Interpreter> pyenv_pythons() {
    std::vector<Interpreter> v;
    const char* root = std::getenv("PYENV_ROOT");
    fs::path base = fs::path(root ? root : "/root/.pyenv") / "versions";
    std::error_code ec;
    if (!fs::is_directory(base, ec)) return v;
    for (auto& e : fs::directory_iterator(base, ec)) {
        std::string name = e.path().filename();
        if (name.rfind("3.", 0) != 0) continue;
        auto dot = name.find('.', 2);
        std::string minor = name.substr(0, dot);
        fs::path exe = e.path() / "bin" / ("python" + minor);
        if (fs::exists(exe)) v.push_back({"pyenv-" + name, {exe.string()}, minor});
    }
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.name < b.name; });
    return v;
}

}  // namespace pbp::test
