#include "agent/server.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "agent/access.h"
#include "agent/protocol.h"
#include "export/dump_document.h"
#include "engine/dump.h"
#include "engine/engine.h"
#include "export/exporter.h"
#include "export/html_report.h"
#include "summary/run_outcome.h"
#include "sys/clock.h"

namespace pbp::agent {

namespace {

using nlohmann::json;

constexpr uint64_t kMs = 1000000ULL;
constexpr size_t kMaxQueuedBytes = 8u << 20;  // progress is skipped while a client lags this much

void log(const std::string& m) { std::cerr << "pybpfprof-agent: " << m << "\n" << std::flush; }

std::string mib(size_t bytes) {
    char b[32];
    snprintf(b, sizeof b, "%.*f MiB", bytes >= (10u << 20) ? 0 : 2, bytes / 1048576.0);
    return b;
}

json event_json(const EngineEvent& e) {
    static const char* kinds[] = {"target_added", "cgroup_waiting", "cgroup_watching", "all_python_scanned",
                                  "warning",      "error",          "debug"};
    json j{{"v", kProtocolVersion}, {"type", "event"}, {"kind", kinds[e.kind]}};
    if (e.pid) j["pid"] = e.pid;
    if (e.announce) j["announce"] = true;
    if (e.count) j["count"] = e.count;
    if (!e.message.empty()) j["message"] = e.message;
    if (!e.comm.empty()) j["comm"] = e.comm;
    if (!e.python.empty()) j["python"] = e.python;
    if (!e.description.empty()) j["description"] = e.description;
    if (!e.labels.empty()) j["labels"] = e.labels;
    return j;
}

json error_json(const std::string& code, const std::string& message) {
    return {{"v", kProtocolVersion}, {"type", "error"}, {"code", code}, {"message", message}};
}

std::string failure_code(Failure f) {
    switch (f) {
        case Failure::BadInput: return "bad_input";
        case Failure::Forbidden: return "forbidden";
        case Failure::CannotProfile: return "cannot_profile";
        case Failure::None: break;
    }
    return "internal";
}

// Listens on path: a stale socket file (nothing answers) is replaced; a live agent, or a
// path that is not a socket, is an error.
int listen_on(const std::string& path, std::string& error) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof addr.sun_path) {
        error = "socket path '" + path + "' is empty or longer than " + std::to_string(sizeof addr.sun_path - 1) +
                " bytes; choose a shorter --socket path";
        return -1;
    }
    memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (!dir.empty()) {
        std::error_code ec;
        if (!std::filesystem::exists(dir)) {
            std::filesystem::create_directories(dir, ec);
            if (ec) {
                error = "cannot create " + dir.string() + " for the socket (" + ec.message() + ")";
                return -1;
            }
            chmod(dir.c_str(), 0755);
        }
    }
    struct stat st{};
    if (lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            error = path + " exists and is not a socket; remove it or choose another --socket path";
            return -1;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool live = probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
        if (probe >= 0) close(probe);
        if (live) {
            error = "another agent is already listening on " + path + "; stop it first (systemctl stop pybpfprof-agent)";
            return -1;
        }
        unlink(path.c_str());  // stale: left by an agent that did not exit cleanly
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        error = std::string("socket() failed: ") + strerror(errno);
        return -1;
    }
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        error = "cannot bind " + path + ": " + strerror(errno);
        close(fd);
        return -1;
    }
    // Anyone may connect: what a caller may do is decided per request by its credentials.
    chmod(path.c_str(), 0666);
    if (listen(fd, SOMAXCONN) != 0) {
        error = "cannot listen on " + path + ": " + strerror(errno);
        close(fd);
        unlink(path.c_str());
        return -1;
    }
    return fd;
}

}  // namespace

class Server {
public:
    Server(const AgentConfig& cfg, std::unique_ptr<Engine> engine, int listen_fd, int epfd, gid_t admin_gid)
        : cfg_(cfg), engine_(std::move(engine)), listen_fd_(listen_fd), epfd_(epfd) {
        policy_.admin_gid = admin_gid;
        formats_ = exporter_names();
    }
    ~Server();
    void run(const std::atomic<int>& stop);

private:
    struct Conn {
        int fd = -1;
        uint64_t id = 0;
        Caller caller;
        bool admin = false;
        FrameReader reader{kMaxRequestBytes};
        std::string out;      // bytes not yet written
        size_t out_off = 0;
        bool want_out = false;
        bool closing = false;  // close once 'out' is written
        // A dump was answered: the frames after it wait for the loop's next turn, so that one
        // client's stream of dumps (each reads processes for milliseconds) never holds the
        // loop, and the sessions' samples are drained between them.
        bool dumped = false, more = false;
        uint64_t last_rx_ns = 0, closing_since_ns = 0, last_progress_ns = 0;
        // The session (one per connection).
        bool started = false;
        StartRequest req;
        Session* session = nullptr;
        uint64_t session_id = 0, start_ns = 0;
        std::string scope;
        std::string target;
        bool capped = false;  // no duration asked: the agent's longest applies
        // Finished by itself (duration, exit, memory limit): kept until the client stops it.
        std::optional<Profile> finished;
        RunFacts facts;
        uint64_t final_samples = 0;
        size_t final_processes = 0;
    };

    void accept_all();
    void on_readable(Conn& c);
    bool take_frames(Conn& c);
    void on_writable(Conn& c);
    void handle(Conn& c, const std::string& frame);
    void start(Conn& c, const StartRequest& r);
    void dump(Conn& c, const DumpStacksRequest& r);
    void send_profile(Conn& c, const Profile& p, const std::string& format, bool report, bool final,
                      const RunFacts* facts);
    void status(Conn& c);
    void send(Conn& c, const json& header, const std::vector<std::string>& attachments = {});
    void fail(Conn& c, const std::string& code, const std::string& message, bool close_after);
    void finish_session(Conn& c, std::string reason);
    void housekeeping(uint64_t now);
    void close_conn(int fd);
    size_t sessions_of(uid_t uid) const;
    size_t conns_of(uid_t uid) const;

    AgentConfig cfg_;
    std::unique_ptr<Engine> engine_;
    int listen_fd_, epfd_;
    Policy policy_;
    std::vector<std::string> formats_;
    std::map<int, std::unique_ptr<Conn>> conns_;
    uint64_t next_id_ = 1;
    uint64_t last_housekeeping_ = 0;
    uint64_t accept_paused_until_ = 0;
};

Server::~Server() {
    for (auto& [fd, c] : conns_) {
        if (c->session) engine_->stop(c->session);
        close(fd);
    }
    conns_.clear();
    close(listen_fd_);
    close(epfd_);
}

size_t Server::sessions_of(uid_t uid) const {
    return std::count_if(conns_.begin(), conns_.end(), [&](auto& kv) {
        return kv.second->caller.uid == uid && (kv.second->session || kv.second->finished);
    });
}

size_t Server::conns_of(uid_t uid) const {
    return std::count_if(conns_.begin(), conns_.end(), [&](auto& kv) { return kv.second->caller.uid == uid; });
}

void Server::close_conn(int fd) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    if (c.session) {
        // A client that went away: its session ends, and everything it held is freed.
        engine_->stop(c.session);
        log("session " + std::to_string(c.session_id) + " of uid " + std::to_string(c.caller.uid) +
            " ended: the client disconnected");
        c.session = nullptr;
    }
    epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
    conns_.erase(it);
}

void Server::send(Conn& c, const json& header, const std::vector<std::string>& attachments) {
    if (c.out_off && c.out_off == c.out.size()) {
        c.out.clear();
        c.out_off = 0;
    }
    try {
        c.out += encode_message(header, attachments);
    } catch (const std::exception& e) {
        // Over the protocol's limits (a profile over 1 GiB): said instead of sent.
        c.out += encode_error(ErrorCode::Internal, std::string("the answer cannot be sent: ") + e.what());
    }
    on_writable(c);
}

void Server::fail(Conn& c, const std::string& code, const std::string& message, bool close_after) {
    send(c, error_json(code, message));
    if (close_after && !c.closing) {
        c.closing = true;
        c.closing_since_ns = mono_ns();
    }
}

void Server::on_writable(Conn& c) {
    while (c.out_off < c.out.size()) {
        ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c.out_off += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        c.closing = true;  // the client is gone: closed below
        c.out.clear();
        c.out_off = 0;
        return;
    }
    bool pending = c.out_off < c.out.size();
    if (!pending) {
        c.out.clear();
        c.out_off = 0;
    }
    if (pending != c.want_out) {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP | (pending ? static_cast<uint32_t>(EPOLLOUT) : 0u);
        ev.data.fd = c.fd;
        epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev);
        c.want_out = pending;
    }
}

void Server::accept_all() {
    for (;;) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE) {
                // Out of descriptors: new connections wait in the backlog, and the listening
                // socket is left alone for 100 ms (it stays readable: no busy loop).
                log("out of file descriptors: new connections wait");
                epoll_ctl(epfd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
                accept_paused_until_ = mono_ns() + 100 * kMs;
            }
            return;
        }
        auto c = std::make_unique<Conn>();
        c->fd = fd;
        c->id = next_id_++;
        c->last_rx_ns = mono_ns();
        std::string error;
        if (!peer_credentials(fd, c->caller, error)) {
            close(fd);
            continue;
        }
        c->admin = policy_.is_admin(c->caller);
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.fd = fd;
        if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            continue;
        }
        Conn& ref = *c;
        conns_[fd] = std::move(c);
        // Limits on connections: one user cannot take every descriptor the agent has.
        if (conns_.size() > cfg_.max_connections)
            fail(ref, "limit",
                 "the agent has " + std::to_string(cfg_.max_connections) + " connections open, its most; try again later",
                 true);
        else if (!ref.admin && conns_of(ref.caller.uid) > cfg_.max_connections_per_user)
            fail(ref, "limit",
                 "uid " + std::to_string(ref.caller.uid) + " has " + std::to_string(cfg_.max_connections_per_user) +
                     " connections open to the agent, the most it allows per user; close some first",
                 true);
    }
}

void Server::on_readable(Conn& c) {
    char buf[65536];
    for (int rounds = 0; rounds < 16 && !c.closing && !c.more; rounds++) {
        ssize_t n = recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0) {
            close_conn(c.fd);  // EOF: the client is gone
            return;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            close_conn(c.fd);
            return;
        }
        c.last_rx_ns = mono_ns();
        c.reader.push(buf, static_cast<size_t>(n));
        if (!take_frames(c) || c.more) return;  // frames left wait; nothing more is read until then
    }
}

// Handles c's complete frames, up to and including a dump. false: the connection is closing.
bool Server::take_frames(Conn& c) {
    std::string frame, error;
    c.more = false;
    for (;;) {
        auto r = c.reader.next(frame, error);
        if (r == FrameReader::Next::NeedMore) return true;
        if (r == FrameReader::Next::Error) {
            fail(c, "protocol", error, true);
            return false;
        }
        c.dumped = false;
        handle(c, frame);
        if (c.closing) return false;
        if (c.dumped) {
            c.more = true;  // perhaps: the reader says at the next turn
            return true;
        }
    }
}

void Server::handle(Conn& c, const std::string& frame) {
    Request r;
    std::string error;
    ErrorCode code = ErrorCode::Protocol;
    if (!parse_request(frame, formats_, r, error, code)) {
        // Not this protocol: the connection ends. A refused field: the client may go on.
        fail(c, error_code_name(code), error, code == ErrorCode::Protocol);
        return;
    }
    switch (r.op) {
        case Request::Op::Status:
            status(c);
            break;
        case Request::Op::Dump:
            dump(c, r.dump);
            c.dumped = true;
            break;
        case Request::Op::Start:
            if (c.started) {
                fail(c, "bad_input", "this connection already has a session; open another connection for another", false);
                return;
            }
            start(c, r.start);
            break;
        case Request::Op::Snapshot:
            if (!c.session && !c.finished) {
                fail(c, "bad_input", "snapshot before start: send a start request first", false);
                return;
            }
            send_profile(c, c.finished ? *c.finished : c.session->snapshot(),
                         r.snapshot.format.empty() ? c.req.format : r.snapshot.format, r.snapshot.report, false, nullptr);
            break;
        case Request::Op::Stop: {
            if (!c.session && !c.finished) {
                fail(c, "bad_input", "stop before start: send a start request first", false);
                return;
            }
            if (c.session) finish_session(c, "");
            send_profile(c, *c.finished, c.req.format, c.req.report, true, &c.facts);
            c.finished.reset();
            c.closing = true;
            c.closing_since_ns = mono_ns();
            break;
        }
    }
}

// A refused start leaves the connection open for another start.
void Server::start(Conn& c, const StartRequest& r) {
    const Caller caller = c.caller;
    const bool admin = c.admin;
    const std::string who = "uid " + std::to_string(caller.uid) + (caller.user.empty() ? "" : " (" + caller.user + ")");
    if (!r.cgroups.empty() && !admin) {
        fail(c, "forbidden",
             "--cgroup needs root or membership of the agent's admin group" +
                 (cfg_.admin_group.empty() ? std::string(" (none is configured: the agent's --admin-group)")
                                           : " (" + cfg_.admin_group + ")") +
                 "; profile your own processes with --pid or --all-python",
             false);
        return;
    }
    if (r.native && !cfg_.native) {
        fail(c, failure_code(Failure::CannotProfile),
             "--native: this agent was started with --no-native; ask its administrator to restart it without, "
             "or run without --native",
             false);
        return;
    }
    if (sessions_of(caller.uid) >= cfg_.max_sessions_per_user) {
        fail(c, "limit",
             who + " already has " + std::to_string(cfg_.max_sessions_per_user) +
                 (cfg_.max_sessions_per_user == 1 ? " session" : " sessions") +
                 ", the most the agent allows per user (its --max-sessions-per-user); stop one first",
             false);
        return;
    }
    double duration = r.duration_s;
    bool capped = false;
    if (!admin && cfg_.max_duration_s > 0) {
        if (duration > cfg_.max_duration_s) {
            std::ostringstream m;
            m << "a duration of " << duration << " s is over the agent's limit of " << cfg_.max_duration_s
              << " s per session (its --max-duration); ask for less";
            fail(c, "limit", m.str(), false);
            return;
        }
        if (duration <= 0) {
            duration = cfg_.max_duration_s;
            capped = true;
        }
    }

    SessionConfig sc;
    sc.targets.pids = r.pids;
    sc.targets.children = r.children;
    sc.targets.all_python = r.all_python;
    sc.targets.cgroups = r.cgroups;
    sc.targets.held_child = r.launched_pid;
    sc.targets.command = r.command;
    sc.duration_s = duration;
    sc.rate_hz = r.rate_hz;
    parse_mode(r.mode, sc.mode);  // parse_request allowed only the names parse_mode knows
    sc.min_block_ns = static_cast<uint64_t>(r.min_block_us) * 1000;
    sc.async_tasks = r.async_tasks;
    sc.native = r.native;
    std::string no_kernel;
    if (r.native) sc.kernel_frames = may_see_kernel_frames(caller, policy_, no_kernel);
    if (!admin) {
        Policy policy = policy_;
        sc.admit = [caller, policy](pid_t pid, std::string& why) {
            return may_profile(caller, policy, pid, why) == Verdict::Allowed;
        };
    }
    if (r.all_python && !admin) c.scope = "every CPython process of user " + (caller.user.empty() ? std::to_string(caller.uid) : caller.user) + " (uid " + std::to_string(caller.uid) + ")";
    if (!no_kernel.empty()) send(c, event_json({EngineEvent::Warning, 0, false, 0, "--native: " + no_kernel}));
    if (r.max_depth > 0 && static_cast<uint32_t>(r.max_depth) < engine_->max_depth())
        send(c, event_json({EngineEvent::Warning, 0, false, 0,
                            "--max-depth is not applied through the agent yet: stacks are walked to " +
                                std::to_string(engine_->max_depth()) + " frames"}));

    Conn* cp = &c;
    const std::string scope = c.scope;
    auto sink = [this, cp, admin, scope](const EngineEvent& e) {
        if (e.kind == EngineEvent::Debug && !admin) return;  // engine-wide lines: admins only
        EngineEvent copy = e;
        if (e.kind == EngineEvent::AllPythonScanned && !scope.empty()) copy.description = scope;
        send(*cp, event_json(copy));
    };
    Status st;
    Session* s = engine_->subscribe(sc, sink, st);
    if (!s) {
        for (const std::string& line : st.debug) log("debug: " + line);  // the operator's, not the caller's
        log("refused " + who + " (pid " + std::to_string(caller.pid) + "): " + st.message);
        fail(c, failure_code(st.failure), st.message, false);
        return;
    }
    c.started = true;
    c.session = s;
    c.session_id = c.id;
    c.req = r;
    c.start_ns = mono_ns();
    c.target = s->target_text();
    c.facts.launched = r.launched_pid > 0;
    c.facts.all_python = r.all_python;
    c.facts.cgroups = !r.cgroups.empty();
    c.facts.duration_s = sc.duration_s;
    log("session " + std::to_string(c.session_id) + " of " + who + " (pid " + std::to_string(caller.pid) +
        "): " + c.target + " at " + std::to_string(static_cast<int>(r.rate_hz)) + " Hz, mode " + r.mode);
    json started{{"v", kProtocolVersion}, {"type", "started"}, {"session", c.session_id}, {"rate_hz", r.rate_hz},
                 {"targets", s->targets_now()}};
    if (!c.scope.empty()) started["scope"] = c.scope;
    send(c, started);
    c.capped = capped;
}

// Every thread's stack of the caller's processes, read now and sent back as the JSON document
// of docs/dump.md (the client renders it). Each target passes the profiling rule before it
// is read and again after (engine/dump.h); nothing is written anywhere for the caller. The
// connection stays open, with or without a session.
void Server::dump(Conn& c, const DumpStacksRequest& r) {
    const Caller caller = c.caller;
    const std::string who = "uid " + std::to_string(caller.uid) + (caller.user.empty() ? "" : " (" + caller.user + ")");
    if (!r.cgroups.empty() && !c.admin) {
        fail(c, "forbidden",
             "--cgroup needs root or membership of the agent's admin group" +
                 (cfg_.admin_group.empty() ? std::string(" (none is configured: the agent's --admin-group)")
                                           : " (" + cfg_.admin_group + ")") +
                 "; dump your own processes with --pid or --all-python",
             false);
        return;
    }
    pbp::DumpRequest req;
    req.pids = r.pids;
    req.all_python = r.all_python;
    req.cgroups = r.cgroups;
    req.node_root = cfg_.node_root;
    req.max_depth = r.max_depth;
    req.async_tasks = r.async_tasks;
    if (!c.admin) {
        Policy policy = policy_;
        // A PID with no process (or a thread's ID) is bad input, as in a direct dump; the
        // rule below refuses it too, should it come back meanwhile.
        for (pid_t pid : r.pids)
            if (std::string why; may_profile(caller, policy, pid, why) == Verdict::Gone) {
                fail(c, "bad_input", why + "; check the PID (ps -u " + caller.user + " lists your processes)", false);
                return;
            }
        req.admit = [caller, policy](pid_t pid, std::string& why) {
            return may_profile(caller, policy, pid, why) == Verdict::Allowed;
        };
    }
    DumpResult result;
    Status st = gather_dump(req, result);
    if (!st.ok()) {
        log("dump refused for " + who + " (pid " + std::to_string(caller.pid) + "): " + st.message);
        fail(c, failure_code(st.failure), st.message, false);
        return;
    }
    size_t threads = 0;
    for (const auto& p : result.processes) threads += p.threads.size();
    log("dump for " + who + " (pid " + std::to_string(caller.pid) + "): " + std::to_string(result.processes.size()) +
        (result.processes.size() == 1 ? " process, " : " processes, ") + std::to_string(threads) + " threads");
    send(c, dump_header(), {dump_json(result).dump(-1, ' ', false, json::error_handler_t::replace)});
}

// Ends c's session in the engine now (its targets are released) and keeps its profile.
void Server::finish_session(Conn& c, std::string reason) {  // by value: it may be the session's own
    if (!c.session) return;
    c.facts.targets_ever = c.session->targets_ever();
    c.facts.exited_early = c.session->exited_early();
    c.facts.first_refusal = c.session->first_refusal();
    c.final_samples = c.session->sample_count();
    c.final_processes = c.session->targets_ever();
    c.finished = engine_->stop(c.session);
    c.session = nullptr;
    log("session " + std::to_string(c.session_id) + " of uid " + std::to_string(c.caller.uid) + " ended: " +
        (reason.empty() ? "stopped by its client" : reason) + ", " + std::to_string(c.final_samples) + " samples");
    if (c.capped && reason == "duration reached") {
        // Said when it happens, not at every start: most sessions end long before.
        std::ostringstream m;
        m << "the session reached the agent's limit of " << cfg_.max_duration_s
          << " s per session (its --max-duration): the profile covers its first " << cfg_.max_duration_s << " s";
        send(c, event_json({EngineEvent::Warning, 0, false, 0, m.str()}));
    }
    if (!reason.empty()) send(c, {{"v", kProtocolVersion}, {"type", "done"}, {"reason", reason}});
}

void Server::send_profile(Conn& c, const Profile& p, const std::string& format, bool report, bool final,
                          const RunFacts* facts) {
    auto ex = make_exporter(format);
    if (!ex) {
        fail(c, "bad_input", "unknown format '" + format + "'", false);
        return;
    }
    const ExportOptions options{c.req.group_by};
    std::vector<std::string> attachments(1);
    std::ostringstream body;
    ex->write(p, options, body);
    attachments[0] = std::move(body).str();
    if (report) attachments.push_back(render_html_report(p, options));
    json h{{"v", kProtocolVersion}, {"type", "profile"}, {"format", format}, {"final", final}, {"report", report}};
    if (facts) {
        // BPF's statistics are engine-wide (every session's targets): shown to admins only.
        RunOutcome o = run_outcome(p, *facts, engine_->bpf_stats(), 0, c.admin);
        h["summary"] = to_json(o);
    }
    send(c, h, attachments);
}

void Server::status(Conn& c) {
    json list = json::array();
    const uint64_t now = mono_ns();
    for (auto& [fd, o] : conns_) {
        if (!o->session && !o->finished) continue;
        if (!c.admin && o->caller.uid != c.caller.uid) continue;  // a user sees only their own
        json s{{"session", o->session_id},
               {"uid", o->caller.uid},
               {"user", o->caller.user},
               {"pid", o->caller.pid},
               {"target", o->target},
               {"rate_hz", o->req.rate_hz},
               {"mode", o->req.mode},
               {"elapsed_s", (now - o->start_ns) / 1e9},
               {"samples", o->session ? o->session->sample_count() : o->final_samples},
               {"processes", o->session ? o->session->targets_ever() : o->final_processes},
               {"state", o->session ? "running" : "finished"}};
        list.push_back(s);
    }
    send(c, {{"v", kProtocolVersion}, {"type", "status"}, {"sessions", list}});
}

void Server::housekeeping(uint64_t now) {
    if (accept_paused_until_ && now >= accept_paused_until_) {
        accept_paused_until_ = 0;
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = listen_fd_;
        epoll_ctl(epfd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    }
    std::vector<int> to_close;
    for (auto& [fd, cp] : conns_) {
        Conn& c = *cp;
        if (c.closing) {
            // Closed once written, or after 5 s of a client that does not read.
            if (c.out_off >= c.out.size() || now - c.closing_since_ns > 5000 * kMs) to_close.push_back(fd);
            continue;
        }
        if (!c.session && !c.finished && now - c.last_rx_ns > static_cast<uint64_t>(cfg_.idle_timeout_s * 1e9)) {
            fail(c, "limit", "no request for " + std::to_string(static_cast<int>(cfg_.idle_timeout_s)) + " s; closing", true);
            continue;
        }
        if (!c.session) continue;
        if (c.session->done()) {
            finish_session(c, c.session->done_reason());
            continue;
        }
        if (c.session->memory_bytes() > cfg_.max_session_bytes) {
            send(c, event_json({EngineEvent::Error, 0, false, 0,
                                "the session holds " + mib(c.session->memory_bytes()) +
                                    " of samples, over the agent's limit of " + mib(cfg_.max_session_bytes) +
                                    " per session (its --max-session-mb); it was ended with the samples so far"}));
            finish_session(c, "memory limit reached");
            continue;
        }
        if (c.req.progress && now - c.last_progress_ns >= 250 * kMs && c.out.size() - c.out_off < kMaxQueuedBytes) {
            c.last_progress_ns = now;
            send(c, {{"v", kProtocolVersion},
                     {"type", "progress"},
                     {"elapsed_s", (now - c.start_ns) / 1e9},
                     {"samples", c.session->sample_count()},
                     {"processes", c.session->processes_so_far()},
                     {"lost", engine_->lost()}});
        }
    }
    for (int fd : to_close) close_conn(fd);
}

void Server::run(const std::atomic<int>& stop) {
    epoll_event evs[64];
    int wake_fd = engine_->wait_fd();
    while (!stop) {
        bool woke = false;
        bool any_session = std::any_of(conns_.begin(), conns_.end(), [](auto& kv) { return kv.second->session; });
        bool frames_wait = std::any_of(conns_.begin(), conns_.end(), [](auto& kv) { return kv.second->more; });
        int timeout = frames_wait ? 0 : any_session || accept_paused_until_ ? 50 : 1000;
        int n = epoll_wait(epfd_, evs, 64, timeout);
        if (n < 0 && errno != EINTR) {
            log(std::string("epoll_wait failed: ") + strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == listen_fd_) {
                accept_all();
                continue;
            }
            if (fd == wake_fd) {  // records (samples, or execs while idle): consumed by the poll below
                woke = true;
                continue;
            }
            auto it = conns_.find(fd);
            if (it == conns_.end()) continue;
            Conn& c = *it->second;
            if (evs[i].events & EPOLLOUT) on_writable(c);
            if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
                if (c.closing) {
                    // Nothing more is read from a connection being closed; a hang-up ends it.
                    if (evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) close_conn(fd);
                    else {
                        char sink[4096];
                        while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
                        }
                    }
                    continue;
                }
                on_readable(c);
            }
        }
        // The frames that waited behind a dump: the next ones, up to one more dump per connection.
        if (frames_wait) {
            std::vector<int> waiting;
            for (auto& [fd, c] : conns_)
                if (c->more && !c->closing) waiting.push_back(fd);
            for (int fd : waiting)
                if (auto it = conns_.find(fd); it != conns_.end()) take_frames(*it->second);
        }
        if (woke || any_session ||
            std::any_of(conns_.begin(), conns_.end(), [](auto& kv) { return kv.second->session; })) {
            int r = engine_->poll(0);
            if (r < 0 && r != -EINTR) log("ring buffer poll failed: " + std::string(strerror(-r)));
        }
        const uint64_t now = mono_ns();
        if (now - last_housekeeping_ >= 50 * kMs) {
            last_housekeeping_ = now;
            housekeeping(now);
        }
    }
}

int run_agent(const AgentConfig& given, const std::atomic<int>& stop, std::string& error) {
    AgentConfig cfg = given;
    if (cfg.socket_path.empty()) cfg.socket_path = kDefaultSocket;
    gid_t admin_gid = static_cast<gid_t>(-1);
    if (!cfg.admin_group.empty()) {
        auto g = group_id(cfg.admin_group);
        if (!g) {
            error = "--admin-group " + cfg.admin_group + ": no such group; create it (groupadd " + cfg.admin_group +
                    ") or name another";
            return 1;
        }
        admin_gid = *g;
    }
    // Many clients at once: as many descriptors as the hard limit allows.
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    EngineConfig ec;
    ec.rate_hz = cfg.rate_hz;
    ec.btf_path = cfg.btf_path;
    ec.node_root = cfg.node_root;
    ec.execs_only_in_cgroups = false;  // sessions of every kind share the program
    ec.idle_without_sessions = true;
    ec.knobs = cfg.knobs;
    // --native sessions: the capture of registers and user stacks is loaded (where the kernel
    // has it; a session asking elsewhere is refused with the reason) and used only for the
    // processes of sessions that ask. Its cost at rest: a larger ring buffer (32 MiB).
    ec.native = cfg.native;
    Status st;
    auto engine = Engine::start(ec, st);
    if (!engine) {
        for (const std::string& line : st.debug) log("debug: " + line);
        error = st.message;
        return 1;
    }
    int lfd = listen_on(cfg.socket_path, error);
    if (lfd < 0) return 1;
    struct stat sock_st{};
    stat(cfg.socket_path.c_str(), &sock_st);
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = lfd;
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
    if (int wfd = engine->wait_fd(); wfd >= 0) {
        epoll_event we{};
        we.events = EPOLLIN;
        we.data.fd = wfd;
        epoll_ctl(epfd, EPOLL_CTL_ADD, wfd, &we);
    }
    log("listening on " + cfg.socket_path + (cfg.admin_group.empty() ? "" : ", admin group " + cfg.admin_group));
    {
        Server server(cfg, std::move(engine), lfd, epfd, admin_gid);
        server.run(stop);
    }
    // The socket file goes with the agent, unless another agent has replaced it meanwhile.
    struct stat now_st{};
    if (stat(cfg.socket_path.c_str(), &now_st) == 0 && now_st.st_ino == sock_st.st_ino) unlink(cfg.socket_path.c_str());
    log("stopped");
    return 0;
}

}  // namespace pbp::agent
