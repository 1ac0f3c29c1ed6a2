// A real terminal emulator for tests of what pybpfprof shows on a terminal: tmux, on a server of
// the test's own (its own socket, no configuration), killed when the test ends.
#pragma once
#include <unistd.h>

#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.h"

namespace pbp::test {

class Tmux {
public:
    Tmux() {
        static int n = 0;  // a server per use: a killed one's socket may linger a moment
        cmd_ = {"tmux", "-f", "/dev/null", "-L", "pbp-test-" + std::to_string(getpid()) + "-" + std::to_string(n++)};
    }
    ~Tmux() { run(with_args(cmd_, {"kill-server"})); }
    Tmux(const Tmux&) = delete;
    Tmux& operator=(const Tmux&) = delete;

    static bool installed() { return run({"sh", "-c", "command -v tmux"}).status == 0; }

    // tmux ARGS on this server; a failure is the test's, with tmux's words.
    bool operator()(std::initializer_list<std::string> args) {
        auto r = run(with_args(cmd_, args));
        if (r.status != 0) ADD_FAILURE() << "tmux: " << r.err;
        return r.status == 0;
    }

    // The rows of session s's screen (or its whole history), as tmux shows them (trailing
    // blanks trimmed).
    std::vector<std::string> screen(bool history = false) {
        auto r = history ? run(with_args(cmd_, {"capture-pane", "-p", "-t", "s", "-S", "-"}))
                         : run(with_args(cmd_, {"capture-pane", "-p", "-t", "s"}));
        std::vector<std::string> rows;
        std::istringstream in(r.out);
        for (std::string l; std::getline(in, l);) rows.push_back(l);
        return rows;
    }

private:
    std::vector<std::string> cmd_;
};

inline std::string joined(const std::vector<std::string>& rows) {
    std::string s;
    for (auto& r : rows) s += r + "\n";
    return s;
}

}  // namespace pbp::test
