#include "test_support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace fs = std::filesystem;

namespace pbp::test {

bool kernel_has_bpf_loop() {
    return libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, nullptr) == 1;
}

bool in_ci() {
    const char* ci = std::getenv("CI");
    return ci && std::string(ci) == "true";
}

bool skip_browser_checks(std::string& why) {
    const char* v = std::getenv("PBP_SKIP_BROWSER_CHECKS");
    if (!v || std::string(v) != "1") return false;
#if defined(__SANITIZE_ADDRESS__)
    const bool sanitized = true;
#else
    const bool sanitized = false;
#endif
    if (in_ci() && !sanitized) {
        ADD_FAILURE() << "PBP_SKIP_BROWSER_CHECKS=1 is for the sanitized unit tests only: under CI=true the normal "
                         "build runs every browser check (running it)";
        return false;
    }
    why = "PBP_SKIP_BROWSER_CHECKS=1: the browser check is left to the normal build's unit tests";
    return true;
}

namespace {

int exit_code(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

// Forks and execs argv (PATH lookup; exit code 127 if that fails) with 'in', 'out' and 'err'
// as its stdin, stdout and stderr (-1: the test's own), in a process group of its own if
// 'own_group'.
pid_t spawn(const std::vector<std::string>& argv, int in, int out, int err, bool own_group = false) {
    pid_t pid = fork();
    if (pid == 0) {
        if (in >= 0) dup2(in, 0);
        if (out >= 0) dup2(out, 1);
        if (err >= 0) dup2(err, 2);
        if (own_group) setpgid(0, 0);
        std::vector<char*> a;
        for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
        a.push_back(nullptr);
        execvp(a[0], a.data());
        _exit(127);
    }
    return pid;
}

int ms_until(std::chrono::steady_clock::time_point deadline) {
    return static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
            .count());
}

}  // namespace

CmdResult run(const std::vector<std::string>& argv, int timeout_s) {
    CmdResult r;
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) return r;
    pid_t pid = spawn(argv, -1, out[1], err[1]);
    close(out[1]);
    close(err[1]);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    struct pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    char buf[65536];
    while (open_fds > 0) {
        int ms = ms_until(deadline);
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
    r.status = exit_code(st);
    return r;
}

std::vector<std::string> with_args(std::vector<std::string> argv, std::initializer_list<std::string> more) {
    argv.insert(argv.end(), more);
    return argv;
}

// ---- Process -------------------------------------------------------------------------------

Process::~Process() {
    if (pid_ > 0 && status_ < 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
}

void Process::swap(Process& o) noexcept {
    std::swap(pid_, o.pid_);
    std::swap(status_, o.status_);
}

void Process::signal(int sig) const {
    if (pid_ > 0 && status_ < 0) kill(pid_, sig);
}

bool Process::running() {
    if (pid_ <= 0 || status_ >= 0) return false;
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = exit_code(st);
        return false;
    }
    return true;
}

int Process::wait(int timeout_s) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (running()) {
        if (std::chrono::steady_clock::now() > deadline) return -1;
        usleep(10000);
    }
    return status_;
}

// ---- Child ---------------------------------------------------------------------------------

Child::Child(const std::vector<std::string>& argv, const std::string& dir) {
    static int n = 0;
    out_path_ = dir + "/child" + std::to_string(n) + ".out";
    err_path_ = dir + "/child" + std::to_string(n++) + ".err";
    int o = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int e = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = spawn(argv, -1, o, e, /*own_group=*/true);
    if (o >= 0) close(o);
    if (e >= 0) close(e);
}

std::string Child::out() const { return read_file(out_path_); }
std::string Child::err() const { return read_file(err_path_); }

bool Child::wait_for(std::string (Child::*text)() const, const std::string& needle, int timeout_s) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (true) {
        if ((this->*text)().find(needle) != std::string::npos) return true;
        // Exited: what it wrote is all there will be.
        if (!running()) return (this->*text)().find(needle) != std::string::npos;
        if (std::chrono::steady_clock::now() > deadline) return false;
        usleep(20000);
    }
}
bool Child::wait_for_out(const std::string& needle, int timeout_s) { return wait_for(&Child::out, needle, timeout_s); }
bool Child::wait_for_err(const std::string& needle, int timeout_s) { return wait_for(&Child::err, needle, timeout_s); }

// ---- Reporter ------------------------------------------------------------------------------

Reporter::Reporter(const std::vector<std::string>& argv) {
    err_path_ = temp_dir() + "/stderr";
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int e = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int out[2];
    if (in >= 0 && e >= 0 && pipe2(out, O_CLOEXEC) == 0) {
        pid_ = spawn(argv, in, out[1], e);
        close(out[1]);
        fd_ = out[0];
    }
    if (in >= 0) close(in);
    if (e >= 0) close(e);
}

Reporter::Reporter(Reporter&& o) noexcept { *this = std::move(o); }
Reporter& Reporter::operator=(Reporter&& o) noexcept {
    Process::operator=(std::move(o));
    std::swap(fd_, o.fd_);
    std::swap(buf_, o.buf_);
    std::swap(err_path_, o.err_path_);
    return *this;
}

Reporter::~Reporter() {
    if (fd_ >= 0) close(fd_);
}

template <class Done>
void Reporter::read_while_not(Done done, int timeout_s) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (!done() && fd_ >= 0) {
        int ms = ms_until(deadline);
        if (ms <= 0) break;
        struct pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, ms) <= 0) break;
        char b[4096];
        ssize_t n = ::read(fd_, b, sizeof b);
        if (n <= 0) break;
        buf_.append(b, n);
    }
}

std::vector<std::string> Reporter::read_lines(size_t n, int timeout_s) {
    read_while_not([&] { return static_cast<size_t>(std::count(buf_.begin(), buf_.end(), '\n')) >= n; },
                   timeout_s);
    std::vector<std::string> v;
    for (size_t pos = 0, nl; (nl = buf_.find('\n', pos)) != std::string::npos; pos = nl + 1)
        v.push_back(buf_.substr(pos, nl - pos));
    return v;
}

bool Reporter::read_until(const std::string& line, int timeout_s) {
    auto seen = [&] {
        return buf_.compare(0, line.size() + 1, line + "\n") == 0 ||
               buf_.find("\n" + line + "\n") != std::string::npos;
    };
    read_while_not(seen, timeout_s);
    return seen();
}

std::string Reporter::err() const { return read_file(err_path_); }

std::string source_dir() { return PBP_SOURCE_DIR; }
std::string binary_dir() { return PBP_BINARY_DIR; }
std::string pybpfprof_bin() {
    // The sanitized build's binary (tests/tools/sanitized runs a short set of tests with it).
    if (const char* b = std::getenv("PBP_TEST_BIN"); b && *b) return b;
    return PBP_BIN;
}
std::string pyspy_bin() { return PBP_PYSPY_BIN; }
std::string tool_path(const std::string& name) { return source_dir() + "/tests/tools/" + name; }

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

long pid_max() {
    long n = 0;
    std::ifstream("/proc/sys/kernel/pid_max") >> n;
    return n;
}

pid_t unused_pid() {
    for (long pid = pid_max() - 1; pid > 1; pid--)
        if (!std::filesystem::exists("/proc/" + std::to_string(pid))) return static_cast<pid_t>(pid);
    return 0;
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

// The test's own reading of mountinfo (not pybpfprof's): the cgroup2 mount with root "/".
std::string cgroup2_mount() {
    std::ifstream f("/proc/self/mountinfo");
    std::string line;
    while (std::getline(f, line)) {
        auto dash = line.find(" - cgroup2 ");
        if (dash == std::string::npos) continue;
        std::istringstream in(line.substr(0, dash));
        std::string a, b, c, root, mnt;
        in >> a >> b >> c >> root >> mnt;
        if (root == "/") return mnt;
    }
    return "";
}

std::string temp_dir() {
    static TempRoot root;
    static int n = 0;
    std::string d = root.path + "/t" + std::to_string(n++);
    fs::create_directories(d);
    return d;
}

std::string unhex(std::string_view hex) {
    std::string s;
    s.reserve(hex.size() / 2);
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
        s.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
    return s;
}

std::string interpreter_test_name(const ::testing::TestParamInfo<Interpreter>& info) {
    std::string s = info.param.name;
    for (auto& c : s)
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
    return s;
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

std::string chroot_dir(const std::string& name) { return "/var/cache/pybpfprof/chroots/" + name; }

std::vector<Interpreter> all_interpreters() {
    std::vector<Interpreter> v{host_python()};
    for (auto& i : pyenv_pythons()) v.push_back(i);
    const std::pair<const char*, const char*> chrooted[] = {
        {"sid", "3.14"}, {"sid", "3.15"}, {"bullseye", "3.9"}, {"trixie", "3.13"}};
    for (auto& [chroot, minor] : chrooted) {
        std::string root = chroot_dir(chroot), exe = std::string("python") + minor;
        std::error_code ec;
        if (fs::exists(root + "/usr/bin/" + exe, ec))
            v.push_back({std::string(chroot) + "-" + minor, {"chroot", root, exe}, minor, root});
    }
    for (auto& minor : free_threaded_minors()) {
        std::string root = chroot_dir("sid-ft"), exe = free_threaded_exe(minor);
        std::error_code ec;
        if (fs::exists(root + free_threaded_prefix(minor) + "/.pybpfprof-ready", ec) && fs::exists(root + exe, ec))
            v.push_back({"sid-ft-" + minor + "t", {"chroot", root, exe}, minor, root});
    }
    return v;
}

std::vector<std::string> free_threaded_minors() { return {"3.13", "3.14"}; }
std::string free_threaded_prefix(const std::string& minor) { return "/opt/python" + minor + "-ft"; }
std::string free_threaded_exe(const std::string& minor) {
    return free_threaded_prefix(minor) + "/bin/python" + minor + "t";
}

std::string workload(const std::string& name) { return source_dir() + "/tests/workloads/" + name; }

std::string workload_for(const Interpreter& in, const std::string& script) {
    if (in.root.empty()) return workload(script);
    // Copied under a name of this process's, then renamed into place: tests that run side by
    // side (ctest -j2) may copy the same script into the same chroot while the other's
    // interpreter reads it; a rename is atomic, a copy over the file is not.
    const std::string rel = "/tmp/pbp-workloads/" + script;
    const std::string tmp = in.root + rel + ".tmp-" + std::to_string(getpid());
    std::filesystem::create_directories(in.root + "/tmp/pbp-workloads");
    std::filesystem::copy_file(workload(script), tmp, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(tmp, in.root + rel);
    return rel;
}

std::vector<std::string> python_running(const Interpreter& in, const std::string& script,
                                        const std::vector<std::string>& args) {
    std::vector<std::string> a = in.argv;
    a.push_back(workload_for(in, script));
    a.insert(a.end(), args.begin(), args.end());
    return a;
}

}  // namespace pbp::test
