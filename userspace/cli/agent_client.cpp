#include "cli/agent_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <set>

#include "agent/protocol.h"
#include "export/dump_document.h"
#include "cli/outputs.h"
#include "cli/record.h"
#include "cli/terminal.h"
#include "engine/knobs.h"
#include "sys/clock.h"
#include "targets/launcher.h"

namespace pbp {

namespace {

using nlohmann::json;

int connect_to(const std::string& path, std::string& error) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) {
        error = "the agent socket path " + path + " is too long";
        return -1;
    }
    memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        error = std::string("socket() failed: ") + strerror(errno);
        return -1;
    }
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        error = "cannot reach the agent at " + path + " (" + strerror(errno) + ")";
        close(fd);
        return -1;
    }
    return fd;
}

// An agent event as the engine's, for the same Printer a local run uses.
EngineEvent to_event(const json& j) {
    static const std::map<std::string, EngineEvent::Kind> kinds{
        {"target_added", EngineEvent::TargetAdded},   {"cgroup_waiting", EngineEvent::CgroupWaiting},
        {"cgroup_watching", EngineEvent::CgroupWatching}, {"all_python_scanned", EngineEvent::AllPythonScanned},
        {"warning", EngineEvent::Warning},             {"error", EngineEvent::Error},
        {"debug", EngineEvent::Debug}};
    EngineEvent e{EngineEvent::Warning};
    auto k = kinds.find(j.value("kind", ""));
    if (k != kinds.end()) e.kind = k->second;
    e.pid = j.value("pid", 0);
    e.announce = j.value("announce", false);
    e.count = j.value("count", size_t{0});
    e.message = j.value("message", "");
    e.comm = j.value("comm", "");
    e.python = j.value("python", "");
    e.description = j.value("description", "");
    if (j.contains("labels") && j["labels"].is_object())
        for (auto& [key, v] : j["labels"].items())
            if (v.is_string()) e.labels[key] = v.get<std::string>();
    return e;
}

int error_exit(const json& h) {
    const std::string code = h.value("code", "");
    err(h.value("message", "the agent refused the request"));
    return code == "bad_input" || code == "protocol" ? kExitBadInput : kExitError;
}

}  // namespace

std::string agent_socket_path() {
    const char* env = getenv("PYBPFPROF_AGENT_SOCKET");
    return env && *env ? env : agent::kDefaultSocket;
}

bool agent_reachable(const std::string& path) {
    std::string error;
    int fd = connect_to(path, error);
    if (fd < 0) return false;
    close(fd);
    return true;
}

int run_via_agent(const Options& o, const std::string& path) {
    auto exporter = make_exporter(o.format);
    std::string out_path, error;
    if (!resolve_output(o, *exporter, out_path, error)) return err(error), kExitBadInput;
    if (!o.report.empty() && !report_path_ok(o.report)) {
        err("cannot write the report " + o.report + ": it is not in a writable directory or names a directory; choose "
            "another --report path");
        return kExitBadInput;
    }
    int fd = connect_to(path, error);
    if (fd < 0) return err(error), kExitError;
    install_signals();

    agent::Request req;
    req.op = agent::Request::Op::Start;
    agent::StartRequest& s = req.start;
    s.pids = o.pids;
    s.children = o.subprocesses;
    s.all_python = o.all_python;
    s.cgroups = o.cgroups;
    s.rate_hz = o.rate_hz;
    s.duration_s = o.duration_s;
    s.max_depth = o.max_depth;
    s.format = o.format;
    s.report = !o.report.empty();
    s.group_by = o.group_by;
    s.mode = mode_name(o.mode);
    s.min_block_us = static_cast<int64_t>(o.min_block_ns / 1000);
    s.async_tasks = o.async_tasks;
    s.native = o.native;
    // The status line's row is taken before the command is launched (StatusLine).
    StatusLine status(o, isatty(2) && !o.quiet);
    Launcher launcher;
    if (!o.command.empty()) {
        // Forked here, as this user, and held before exec until the agent follows it.
        CommandStdoutToStderr redirect(out_path == "-");
        if (!launcher.start(o.command, error)) return err("cannot start " + o.command[0] + ": " + error), kExitError;
        s.launched_pid = launcher.pid();
        s.command = o.command;
    }
    auto give_up = [&](int code) {
        launcher.abandon();
        close(fd);
        return code;
    };
    if (!agent::write_all(fd, agent::frame(agent::encode_request(req)), error))
        return err("cannot talk to the agent at " + path + ": " + error), give_up(kExitError);

    Printer printer(o, status.in_place());
    const uint64_t start = mono_ns();
    uint64_t samples = 0, lost = 0;
    size_t procs = 0;
    std::set<pid_t> announced;  // TargetAdded events' PIDs
    // Until the session starts: its events, then 'started' (or an error).
    for (;;) {
        agent::Message m;
        if (!agent::read_message(fd, m, error, 30000))
            return err("the agent did not start the session: " + error), give_up(kExitError);
        const std::string type = m.header.value("type", "");
        if (type == "error") return give_up(error_exit(m.header));
        if (type == "event") {
            const EngineEvent e = to_event(m.header);
            if (e.kind == EngineEvent::TargetAdded) announced.insert(e.pid);
            printer(e);
        }
        if (type == "started") break;
    }
    if (!o.command.empty()) {
        launcher.release();
        if (int e = launcher.wait_exec()) {
            err(cannot_run_message(o.command[0], e));
            close(fd);
            return kExitBadInput;
        }
    }

    // The run: events and progress until it is done, stopped, or the launched program exits.
    bool agent_gone = false;
    for (;;) {
        if (g_stop_signal) break;
        if (!o.command.empty() && launcher.poll_exit()) break;
        pollfd p{fd, POLLIN, 0};
        int n = ::poll(&p, 1, 100);
        if (n < 0 && errno != EINTR) break;
        if (n > 0) {
            agent::Message m;
            if (!agent::read_message(fd, m, error, 10000)) {
                agent_gone = true;
                break;
            }
            const std::string type = m.header.value("type", "");
            if (type == "event") {
                const EngineEvent e = to_event(m.header);
                if (e.kind == EngineEvent::TargetAdded) announced.insert(e.pid);
                printer(e);
            } else if (type == "progress") {
                samples = m.header.value("samples", uint64_t{0});
                procs = m.header.value("processes", size_t{0});
                lost = m.header.value("lost", uint64_t{0});
            } else if (type == "done") break;
            else if (type == "error") {
                int code = error_exit(m.header);
                close(fd);
                return code;
            }
        }
        // The agent's count (announced and sampled processes) arrives every 250 ms; the
        // processes announced so far are counted before it does.
        procs = std::max(procs, announced.size());
        if (!g_stop_signal) status.draw(start, samples, procs, lost);
    }
    status.finish();
    if (!o.command.empty() && !agent_gone && procs > 0 && !launcher.poll_exit())
        say_launched_still_running(o, launcher.pid());
    if (agent_gone) {
        err("lost the connection to the agent (" + error + "); its samples are gone; is the agent running? (systemctl "
            "status pybpfprof-agent)");
        close(fd);
        return kExitError;
    }

    agent::Request stop;
    stop.op = agent::Request::Op::Stop;
    stop.stop.output_name = out_path == "-" ? "standard output" : out_path;
    if (!agent::write_all(fd, agent::frame(agent::encode_request(stop)), error))
        return err("cannot talk to the agent: " + error), close(fd), kExitError;
    agent::Message profile;
    for (;;) {
        // A large profile is exported by the agent before it answers: allow it time.
        if (!agent::read_message(fd, profile, error, 600000)) {
            err("the agent did not return the profile: " + error);
            close(fd);
            return kExitError;
        }
        const std::string type = profile.header.value("type", "");
        if (type == "profile") break;
        if (type == "event") printer(to_event(profile.header));
        if (type == "error") {
            int code = error_exit(profile.header);
            close(fd);
            return code;
        }
    }
    close(fd);
    RunOutcome outcome;
    if (!profile.header.contains("summary") || !from_json(profile.header["summary"], outcome, error) ||
        profile.attachments.empty() || (!o.report.empty() && profile.attachments.size() < 2)) {
        err("the agent's answer is incomplete" + (error.empty() ? std::string() : ": " + error));
        return kExitError;
    }
    const std::string& body = profile.attachments[0];
    const std::string report = profile.attachments.size() > 1 ? profile.attachments[1] : std::string();
    return finish(
        o, outcome, *exporter, out_path, [&](std::ostream& f) { f.write(body.data(), static_cast<std::streamsize>(body.size())); },
        [&](std::ostream& f) { f.write(report.data(), static_cast<std::streamsize>(report.size())); },
        Knobs::from_environment().tmpdir);
}

Status dump_via_agent(const DumpRequest& r, const std::string& path, DumpResult& out) {
    std::string error;
    int fd = connect_to(path, error);
    if (fd < 0) return Status::cannot_profile(error);
    agent::Request req;
    req.op = agent::Request::Op::Dump;
    req.dump.pids = r.pids;
    req.dump.all_python = r.all_python;
    req.dump.cgroups = r.cgroups;
    req.dump.max_depth = r.max_depth;
    req.dump.async_tasks = r.async_tasks;
    agent::Message m;
    // A dump of many processes is read before the agent answers: allow it time.
    const bool talked = agent::write_all(fd, agent::frame(agent::encode_request(req)), error) &&
                        agent::read_message(fd, m, error, 120000);
    close(fd);
    if (!talked) return Status::cannot_profile("the agent did not answer the dump: " + error);
    const std::string type = m.header.value("type", "");
    if (type == "error") {
        const std::string code = m.header.value("code", "");
        std::string message = m.header.value("message", "the agent refused the dump");
        // An agent older than dumps refuses the op itself: say so, not its protocol error.
        if (code == "protocol" && message.find("(got \"dump\")") != std::string::npos)
            return Status::cannot_profile("the agent at " + path + " is older than pybpfprof dump (it answered: " +
                                          message + "); restart it with this version of pybpfprof");
        if (code == "bad_input" || code == "protocol") return Status::bad_input(message);
        if (code == "forbidden") return Status::forbidden(message);
        return Status::cannot_profile(message);
    }
    nlohmann::json doc;
    if (type != "dump" || m.attachments.size() != 1)
        return Status::cannot_profile("the agent's answer to the dump is not a dump (type '" + type + "'); restart the agent "
                                      "with this version of pybpfprof");
    if (!agent::parse_json_strict(m.attachments[0], agent::kMaxDumpDepth, doc, error) ||
        !dump_from_json(doc, out, error))
        return Status::cannot_profile("the agent's dump cannot be read: " + error);
    return {};
}

int agent_status(const std::string& path) {
    std::string error;
    int fd = connect_to(path, error);
    if (fd < 0) {
        err(error + "; start it with: systemctl start pybpfprof-agent (or: sudo pybpfprof agent)");
        return kExitError;
    }
    agent::Request req;
    req.op = agent::Request::Op::Status;
    agent::Message m;
    if (!agent::write_all(fd, agent::frame(agent::encode_request(req)), error) ||
        !agent::read_message(fd, m, error, 10000)) {
        close(fd);
        err("the agent did not answer: " + error);
        return kExitError;
    }
    close(fd);
    if (m.header.value("type", "") == "error") return error_exit(m.header);
    const json& list = m.header["sessions"];
    if (!list.is_array() || list.empty()) {
        std::cout << "no sessions\n";
        return kExitOk;
    }
    char line[512];
    snprintf(line, sizeof line, "%-8s %-16s %-8s %8s %-4s %9s %9s %6s  %s\n", "SESSION", "USER", "PID", "RATE", "MODE",
             "ELAPSED", "SAMPLES", "PROCS", "TARGET");
    std::cout << line;
    for (const auto& s : list) {
        std::string user = s.value("user", "");
        if (user.empty()) user = std::to_string(s.value("uid", 0));
        char elapsed[32];
        snprintf(elapsed, sizeof elapsed, "%.1fs", s.value("elapsed_s", 0.0));
        snprintf(line, sizeof line, "%-8llu %-16s %-8d %6.0fHz %-4s %9s %9llu %6zu  %s%s\n",
                 (unsigned long long)s.value("session", uint64_t{0}), user.c_str(), s.value("pid", 0),
                 s.value("rate_hz", 0.0), s.value("mode", "cpu").c_str(), elapsed, (unsigned long long)s.value("samples", uint64_t{0}),
                 s.value("processes", size_t{0}), s.value("target", "").c_str(),
                 s.value("state", "") == "finished" ? " (finished)" : "");
        std::cout << line;
    }
    return kExitOk;
}

}  // namespace pbp
