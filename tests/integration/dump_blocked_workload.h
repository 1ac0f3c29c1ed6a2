// tests/workloads/dump_blocked.py for the dump tests that go through the agent
// (test_dump_agent.cpp, test_pyspy.cpp): the process, started as a given user, with each of
// its five named threads' tid, and what the dump of each thread must show.
#pragma once
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "real_agent.h"
#include "test_support.h"

namespace pbp::test {

// One of the five threads: its threading.Thread name, the innermost frame's function (the
// last part of the name: "Condition.wait" on 3.11+, "wait" before) in a file ending so, and
// the workload's function whose "# BLOCK NAME" line it is asleep on.
struct BlockedThread {
    std::string thread, innermost, in_file, ours;
};
inline const std::vector<BlockedThread>& blocked_threads() {
    static const std::vector<BlockedThread> k = {
        {"sleeper", "in_sleep", "dump_blocked.py", "in_sleep"},
        {"waiter", "wait", "threading.py", "in_event_wait"},
        {"selector", "in_select", "dump_blocked.py", "in_select"},
        {"acceptor", "accept", "socket.py", "in_accept"},
        {"getter", "wait", "threading.py", "in_queue_get"},
    };
    return k;
}

inline std::string last_name_part(const std::string& name) {
    auto dot = name.rfind('.');
    return dot == std::string::npos ? name : name.substr(dot + 1);
}

inline bool has_suffix(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The workload's line (1-based) marked "# BLOCK fn".
inline int block_line(const std::string& fn) {
    std::istringstream in(read_file(workload("dump_blocked.py")));
    std::string l;
    for (int n = 1; std::getline(in, l); n++)
        if (l.find("# BLOCK " + fn) != std::string::npos) return n;
    return -1;
}

// A frame as the checks need it, from whichever output.
struct SeenFrame {
    std::string function, file;
    int line = 0;
};

// What is wrong with a thread's state and frames (innermost first) for b, "" when nothing.
inline std::string check_blocked(const std::string& state, const std::vector<SeenFrame>& frames, const BlockedThread& b) {
    if (state != "sleeping" && state != "idle") return "state '" + state + "', not asleep";
    if (frames.empty()) return "no frames";
    const SeenFrame& in = frames.front();
    if (last_name_part(in.function) != b.innermost || !has_suffix(in.file, b.in_file))
        return "innermost frame " + in.function + " (" + in.file + "), not " + b.innermost + " in " + b.in_file;
    for (const SeenFrame& f : frames)
        if (last_name_part(f.function) == b.ours)
            return f.line == block_line(b.ours) ? "" : b.ours + " at line " + std::to_string(f.line) + ", not " +
                                                           std::to_string(block_line(b.ours));
    return "no frame of " + b.ours;
}

// dump_blocked.py run by user with /usr/bin/python3 (or the command `argv`, which runs it as
// user), once its five threads are started: its tids by thread name in tid_of.
inline Reporter start_blocked(const std::string& user, std::map<std::string, uint32_t>& tid_of, std::string& error,
                              const std::vector<std::string>& argv = {}) {
    Reporter py(argv.empty() ? as_user(user, {"/usr/bin/python3", workload("dump_blocked.py")}) : argv);
    auto lines = py.read_lines(6, 60);
    if (lines.size() != 6 || lines.back() != "ready") {
        error = "dump_blocked.py did not start: " + py.out() + py.err();
        return py;
    }
    for (size_t i = 0; i + 1 < lines.size(); i++) {
        std::istringstream l(lines[i]);
        std::string name;
        uint32_t tid = 0;
        l >> name >> tid;
        tid_of[name] = tid;
    }
    if (tid_of.size() != 5) error = "not five threads: " + py.out();
    return py;
}

}  // namespace pbp::test
