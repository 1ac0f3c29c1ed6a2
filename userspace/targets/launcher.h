// Launching `-- COMMAND ARGS`: the child is forked first and held at a gate until the
// sampler is ready, so the program is profiled from its first instruction.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace pbp {

class Launcher {
public:
    // Forks; the child waits for release() and then execs argv (PATH searched).
    bool start(const std::vector<std::string>& argv, std::string& error);
    void release();
    // Never run it: the child exits at the gate (profiling could not begin).
    void abandon();
    // After release(): blocks until the exec happened; 0, or the errno of a failed exec.
    int wait_exec();
    pid_t pid() const { return pid_; }
    // Non-blocking: the exit status once the child has exited (waitpid WNOHANG).
    std::optional<int> poll_exit();
    ~Launcher();

private:
    pid_t pid_ = -1;
    int gate_ = -1;
    int errpipe_ = -1;
    std::optional<int> status_;
};

// Why `command` could not be run (err: the failed exec's errno), and what to do, in one line:
// "cannot run ./app.py: Permission denied; it is not an executable file: chmod +x it, or run
// it with its interpreter (-- python3 ./app.py)".
std::string cannot_run_message(const std::string& command, int err);

}  // namespace pbp
