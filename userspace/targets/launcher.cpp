#include "targets/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pbp {

bool Launcher::start(const std::vector<std::string>& argv, std::string& error) {
    int gate[2], err[2];
    if (pipe2(gate, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
        error = std::string("pipe: ") + strerror(errno);
        return false;
    }
    pid_ = fork();
    if (pid_ < 0) {
        error = std::string("fork: ") + strerror(errno);
        return false;
    }
    if (pid_ == 0) {
        close(gate[1]);
        close(err[0]);
        char c = 0;
        ssize_t n;
        while ((n = read(gate[0], &c, 1)) < 0 && errno == EINTR) {
        }
        if (n != 1 || c != 'g') _exit(127);  // pybpfprof gave up before sampling: do not run it
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);  // pybpfprof ignores it; an ignored signal survives exec
        std::vector<char*> a;
        for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
        a.push_back(nullptr);
        execvp(a[0], a.data());
        int e = errno;
        (void)!write(err[1], &e, sizeof e);
        _exit(127);
    }
    close(gate[0]);
    close(err[1]);
    gate_ = gate[1];
    errpipe_ = err[0];
    return true;
}

void Launcher::release() {
    if (gate_ >= 0) {
        (void)!write(gate_, "g", 1);
        close(gate_);
        gate_ = -1;
    }
}

void Launcher::abandon() {
    if (gate_ >= 0) {
        close(gate_);
        gate_ = -1;
    }
    if (pid_ > 0 && !status_) {
        int st = 0;
        if (waitpid(pid_, &st, 0) == pid_) status_ = 127;
    }
}

int Launcher::wait_exec() {
    if (errpipe_ < 0) return 0;
    int e = 0;
    ssize_t n;
    while ((n = read(errpipe_, &e, sizeof e)) < 0 && errno == EINTR) {
    }
    close(errpipe_);
    errpipe_ = -1;
    return n == sizeof e ? e : 0;
}

std::optional<int> Launcher::poll_exit() {
    if (status_ || pid_ <= 0) return status_;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_)
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return status_;
}

Launcher::~Launcher() {
    release();
    if (errpipe_ >= 0) close(errpipe_);
}

std::string cannot_run_message(const std::string& command, int err) {
    std::string m = "cannot run " + command + ": " + strerror(err) + "; ";
    if (err == EACCES)
        return m + "it is not an executable file (or a directory on the way cannot be entered): chmod +x it, or run "
                   "it with its interpreter (-- python3 " + command + ")";
    if (err == ENOEXEC)
        return m + "it is not a program this machine can run (a script needs a #! line): run it with its "
                   "interpreter (-- python3 " + command + ")";
    return m + "check the command and your PATH";
}

}  // namespace pbp
