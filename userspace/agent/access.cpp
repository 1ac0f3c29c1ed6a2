#include "agent/access.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59  // Linux 4.13
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // Linux 5.3, every architecture
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

namespace pbp::agent {

namespace {

const char kIdRule[] =
    "the agent lets you profile only processes whose real, effective and saved user and group IDs are all yours";
const char kDumpRule[] =
    "is not dumpable (it ran a setuid/setgid program, changed its user/group IDs, or called "
    "prctl(PR_SET_DUMPABLE, 0)): the agent profiles only dumpable processes, as ptrace would";

// struct pidfd_info of <linux/pidfd.h> up to coredump_mask (PIDFD_INFO_SIZE_VER1; Debian 12's
// kernel headers predate it). PIDFD_GET_INFO is extensible: the kernel copies what both know.
struct PidfdInfo {
    uint64_t mask = 0;
    uint64_t cgroupid = 0;
    uint32_t pid = 0, tgid = 0, ppid = 0;
    uint32_t ruid = 0, rgid = 0, euid = 0, egid = 0, suid = 0, sgid = 0, fsuid = 0, fsgid = 0;
    int32_t exit_code = 0;
    uint32_t coredump_mask = 0;
    uint32_t spare1 = 0;
};
static_assert(sizeof(PidfdInfo) == 72);
constexpr unsigned long kPidfdGetInfo = _IOWR(0xFF, 11, PidfdInfo);  // Linux 6.13
constexpr uint64_t kPidfdInfoCreds = 1u << 1;
constexpr uint64_t kPidfdInfoCoredump = 1u << 4;                 // Linux 6.16
constexpr uint32_t kCoredumpSkip = 1u << 1;                      // SUID_DUMP_DISABLE
constexpr uint32_t kCoredumpUser = 1u << 2;                      // SUID_DUMP_USER: dumpable
constexpr uint32_t kCoredumpRoot = 1u << 3;                      // SUID_DUMP_ROOT

std::string errno_text(int e) { return std::strerror(e); }

// A name from a process (its comm, which the process sets itself) made safe for a one-line
// message that may end up in JSON: control characters and non-ASCII bytes as \xNN.
std::string printable(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            out.push_back(static_cast<char>(c));
        } else {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            out += b;
        }
    }
    return out;
}

// The whole of a small /proc file below dirfd. false with errno (ESRCH once the process is
// reaped) if it cannot be read. st (if given): the file as of its open (owner = task_dump_owner).
bool read_at(int dirfd, const std::string& name, std::string& out, struct stat* st = nullptr) {
    int fd = openat(dirfd, name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    if (st && fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return false;
    }
    out.clear();
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return false;
        }
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return true;
}

// What /proc/PID/status (or task/TID/status) says about one task.
struct TaskStatus {
    char state = '?';
    pid_t tgid = 0, ppid = 0;
    int threads = 0;
    std::array<uid_t, 4> uid{};  // real, effective, saved, filesystem
    std::array<gid_t, 4> gid{};
    bool ids = false;
};

bool parse_ids(const char* v, std::array<unsigned, 4>& out) {
    return std::sscanf(v, "%u %u %u %u", &out[0], &out[1], &out[2], &out[3]) == 4;
}

std::optional<TaskStatus> parse_status(const std::string& text) {
    TaskStatus s;
    bool have_uid = false, have_gid = false;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, colon);
        const char* v = line.c_str() + colon + 1;
        while (*v == ' ' || *v == '\t') v++;
        if (key == "State") {
            s.state = *v ? *v : '?';
        } else if (key == "Tgid") {
            s.tgid = std::atoi(v);
        } else if (key == "PPid") {
            s.ppid = std::atoi(v);
        } else if (key == "Threads") {
            s.threads = std::atoi(v);
        } else if (key == "Uid") {
            std::array<unsigned, 4> ids{};
            if ((have_uid = parse_ids(v, ids)))
                for (int i = 0; i < 4; i++) s.uid[i] = ids[i];
        } else if (key == "Gid") {
            std::array<unsigned, 4> ids{};
            if ((have_gid = parse_ids(v, ids)))
                for (int i = 0; i < 4; i++) s.gid[i] = ids[i];
        }
    }
    s.ids = have_uid && have_gid;
    if (s.tgid <= 0 || !s.ids) return std::nullopt;
    return s;
}

bool dead_state(char state) { return state == 'Z' || state == 'X' || state == 'x'; }

std::string with_name(const char* kind, unsigned id, const std::string& name) {
    std::string s = std::string(kind) + " " + std::to_string(id);
    if (name != std::to_string(id)) s += " (" + name + ")";
    return s;
}
std::string uid_text(uid_t u) { return with_name("uid", u, user_name(u)); }
std::string gid_text(gid_t g) { return with_name("gid", g, group_name(g)); }

// "(uid 1001, pbp-test-a)"
std::string caller_uid_text(const Caller& c) {
    std::string s = "uid " + std::to_string(c.uid);
    if (!c.user.empty() && c.user != std::to_string(c.uid)) s += ", " + c.user;
    return s;
}
std::string caller_gid_text(const Caller& c) {
    std::string name = group_name(c.gid), s = "gid " + std::to_string(c.gid);
    if (name != std::to_string(c.gid)) s += ", " + name;
    return s;
}

std::string join_labels(const std::vector<std::string>& labels) {
    std::string s;
    for (size_t i = 0; i < labels.size(); i++) {
        if (i) s += i + 1 == labels.size() ? " and " : ", ";
        s += labels[i];
    }
    return s;
}

// Which of real/effective/saved differ from want, grouped by value: "effective and saved uid 0
// (root)", "real uid 1002 (pbp-test-b) and saved uid 0 (root)". "" if none differs.
template <class Id>
std::string differing(const std::array<Id, 4>& ids, Id want, std::string (*text)(Id)) {
    static const char* const labels[3] = {"real", "effective", "saved"};
    std::vector<std::string> parts;
    std::array<bool, 3> done{};
    for (int i = 0; i < 3; i++) {
        if (done[i] || ids[i] == want) continue;
        std::vector<std::string> same;
        for (int j = i; j < 3; j++)
            if (!done[j] && ids[j] == ids[i]) {
                same.push_back(labels[j]);
                done[j] = true;
            }
        parts.push_back(join_labels(same) + " " + text(ids[i]));  // "effective and saved uid 0 (root)"
    }
    return join_labels(parts);
}

// Why one task's ids are not the caller's, as the middle of "PID N (comm) ...: rule"; "" if
// they all are. thread: the TID when this is not the process's own (leader) task.
std::string id_mismatch(const Caller& c, const TaskStatus& t, pid_t thread) {
    std::string prefix = thread ? "has a thread (TID " + std::to_string(thread) + ") with " : "has ";
    std::string d = differing<uid_t>(t.uid, c.uid, uid_text);
    if (!d.empty()) {
        if (!thread && t.uid[0] == t.uid[1] && t.uid[1] == t.uid[2])
            return "belongs to " + uid_text(t.uid[0]) + ", not to you (" + caller_uid_text(c) + ")";
        return prefix + d + ", not yours (" + caller_uid_text(c) + ")";
    }
    d = differing<gid_t>(t.gid, c.gid, gid_text);
    if (!d.empty()) {
        if (!thread && t.gid[0] == t.gid[1] && t.gid[1] == t.gid[2])
            return "runs as group " + gid_text(t.gid[0]) + ", not as yours (" + caller_gid_text(c) + ")";
        return prefix + d + ", not yours (" + caller_gid_text(c) + ")";
    }
    return "";
}

long pidfd_send_signal(int pidfd, int sig) { return syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0); }

enum class Dumpable { Yes, No, Unknown };

// From the pidfd: PIDFD_GET_INFO's coredump_mask is the mm's dumpability (6.16+; 0 when the
// kernel does not say, or the task has no mm).
Dumpable dumpable_from_pidfd(int pidfd) {
    if (pidfd < 0) return Dumpable::Unknown;
    PidfdInfo info;
    info.mask = kPidfdInfoCreds | kPidfdInfoCoredump;
    if (ioctl(pidfd, kPidfdGetInfo, &info) != 0) return Dumpable::Unknown;  // ENOTTY before 6.13
    if (!(info.mask & kPidfdInfoCoredump)) return Dumpable::Unknown;        // before 6.16
    if (info.coredump_mask & kCoredumpUser) return Dumpable::Yes;
    if (info.coredump_mask & (kCoredumpSkip | kCoredumpRoot)) return Dumpable::No;
    return Dumpable::Unknown;  // no mm, or 6.16's first releases (which left it 0 for live tasks)
}

// From /proc: the files inside /proc/PID (not /proc/PID itself) of a non-dumpable process are
// owned by root (task_dump_owner); a dumpable one's by its effective uid and gid. So a task is
// dumpable iff its status file's owner is its own euid/egid -- unambiguous for the callers this
// is asked for (euid not 0). status: "status" or "task/TID/status" below dir.
Dumpable dumpable_from_proc(int dir, const std::string& status) {
    std::string text;
    struct stat st;
    if (!read_at(dir, status, text, &st)) return Dumpable::Unknown;
    auto t = parse_status(text);
    if (!t || dead_state(t->state)) return Dumpable::Unknown;
    return st.st_uid == t->uid[1] && st.st_gid == t->gid[1] ? Dumpable::Yes : Dumpable::No;
}

std::string gone_text(pid_t pid) { return "PID " + std::to_string(pid) + " has exited"; }

std::optional<bool> as_optional(Dumpable d) {
    if (d == Dumpable::Unknown) return std::nullopt;
    return d == Dumpable::Yes;
}

}  // namespace

// ---- names ------------------------------------------------------------------------------

std::string user_name(uid_t uid) {
    long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
    std::vector<char> buf(hint > 0 ? static_cast<size_t>(hint) : 16384);
    for (;;) {
        struct passwd pw, *res = nullptr;
        int e = getpwuid_r(uid, &pw, buf.data(), buf.size(), &res);
        if (e == ERANGE && buf.size() < (1u << 20)) {
            buf.resize(buf.size() * 2);
            continue;
        }
        return e == 0 && res && res->pw_name ? std::string(res->pw_name) : std::to_string(uid);
    }
}

std::string group_name(gid_t gid) {
    long hint = sysconf(_SC_GETGR_R_SIZE_MAX);
    std::vector<char> buf(hint > 0 ? static_cast<size_t>(hint) : 16384);
    for (;;) {
        struct group gr, *res = nullptr;
        int e = getgrgid_r(gid, &gr, buf.data(), buf.size(), &res);
        if (e == ERANGE && buf.size() < (1u << 20)) {
            buf.resize(buf.size() * 2);
            continue;
        }
        return e == 0 && res && res->gr_name ? std::string(res->gr_name) : std::to_string(gid);
    }
}

bool may_see_kernel_frames(const Caller& c, const Policy& p, std::string& why, const std::string& paranoid_path) {
    if (p.is_admin(c)) return true;
    std::ifstream f(paranoid_path);
    long level = 0;
    if (!(f >> level)) {
        why = "kernel frames are shown to root and the agent's admin group only (" + paranoid_path + " is unreadable)";
        return false;
    }
    if (level <= 1) return true;
    why = "kernel frames are shown to root and the agent's admin group only: kernel.perf_event_paranoid is " +
          std::to_string(level) + ", which keeps kernel stacks from other users (1 or less would allow them, as for perf)";
    return false;
}

std::optional<gid_t> group_id(const std::string& name_or_number) {
    if (name_or_number.empty()) return std::nullopt;
    long hint = sysconf(_SC_GETGR_R_SIZE_MAX);
    std::vector<char> buf(hint > 0 ? static_cast<size_t>(hint) : 16384);
    for (;;) {
        struct group gr, *res = nullptr;
        int e = getgrnam_r(name_or_number.c_str(), &gr, buf.data(), buf.size(), &res);
        if (e == ERANGE && buf.size() < (1u << 20)) {
            buf.resize(buf.size() * 2);
            continue;
        }
        if (e == 0 && res) return res->gr_gid;
        break;
    }
    if (!std::all_of(name_or_number.begin(), name_or_number.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
    errno = 0;
    char* end = nullptr;
    unsigned long long v = std::strtoull(name_or_number.c_str(), &end, 10);
    if (errno || *end || v >= static_cast<gid_t>(-1)) return std::nullopt;  // -1 means "no group"
    return static_cast<gid_t>(v);
}

// ---- callers ----------------------------------------------------------------------------

bool peer_credentials(int fd, Caller& out, std::string& error) {
    int domain = 0;
    socklen_t len = sizeof domain;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) {
        error = "cannot read the peer's credentials: fd " + std::to_string(fd) + " is not a socket (" +
                errno_text(errno) + ")";
        return false;
    }
    if (domain != AF_UNIX) {
        error = "cannot read the peer's credentials: fd " + std::to_string(fd) + " is not an AF_UNIX socket";
        return false;
    }
    struct ucred cred {};
    len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        error = "cannot read the peer's credentials (SO_PEERCRED): " + errno_text(errno);
        return false;
    }
    if (cred.pid <= 0 || cred.uid == static_cast<uid_t>(-1)) {
        error = "cannot read the peer's credentials: the socket has no peer (not connected?)";
        return false;
    }
    std::vector<gid_t> groups(32);
    for (;;) {
        len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) break;
        if (errno != ERANGE || len <= groups.size() * sizeof(gid_t)) {
            error = "cannot read the peer's groups (SO_PEERGROUPS): " + errno_text(errno);
            return false;
        }
        groups.resize(len / sizeof(gid_t));  // ERANGE: len is the size needed
    }
    groups.resize(len / sizeof(gid_t));
    out.pid = cred.pid;
    out.uid = cred.uid;
    out.gid = cred.gid;
    out.groups = std::move(groups);
    out.user = user_name(cred.uid);
    return true;
}

bool Policy::is_admin(const Caller& c) const {
    if (c.uid == 0) return true;
    if (admin_gid == static_cast<gid_t>(-1)) return false;
    return c.gid == admin_gid || std::find(c.groups.begin(), c.groups.end(), admin_gid) != c.groups.end();
}

std::string own_scope_text(const Caller& caller) {
    std::string name = caller.user.empty() ? user_name(caller.uid) : caller.user;
    return "every CPython process of " + with_name("uid", caller.uid, name) + ", including ones started later";
}

// ---- processes --------------------------------------------------------------------------

std::optional<ProcessHandle> ProcessHandle::open(pid_t pid, std::string& why) {
    why.clear();
    if (pid <= 0) {
        why = "no process has PID " + std::to_string(pid);
        return std::nullopt;
    }
    ProcessHandle h;
    h.pid_ = pid;
    // The pidfd first, then the directory, then the pidfd is checked to be alive: had the
    // process been reaped in between (and its PID reused), the directory could be another's.
    h.pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (h.pidfd_ < 0) {
        if (errno == ESRCH) {
            why = "no process has PID " + std::to_string(pid);
            return std::nullopt;
        }
        // EINVAL: a thread that is not its process's leader (may_profile says so); ENOSYS or
        // EPERM: no pidfds here (old kernel, seccomp). The directory alone still pins the process.
        h.pidfd_ = -1;
    }
    std::string path = "/proc/" + std::to_string(pid);
    h.dir_ = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (h.dir_ < 0) {
        why = errno == ENOENT || errno == ESRCH ? "no process has PID " + std::to_string(pid)
                                                : "cannot open " + path + ": " + errno_text(errno);
        return std::nullopt;
    }
    if (!h.alive()) {
        why = gone_text(pid);
        return std::nullopt;
    }
    return h;
}

ProcessHandle::ProcessHandle(ProcessHandle&& o) noexcept : pid_(o.pid_), dir_(o.dir_), pidfd_(o.pidfd_) {
    o.dir_ = o.pidfd_ = -1;
}

ProcessHandle& ProcessHandle::operator=(ProcessHandle&& o) noexcept {
    if (this != &o) {
        std::swap(pid_, o.pid_);
        std::swap(dir_, o.dir_);
        std::swap(pidfd_, o.pidfd_);
    }
    return *this;
}

ProcessHandle::~ProcessHandle() {
    if (dir_ >= 0) close(dir_);
    if (pidfd_ >= 0) close(pidfd_);
}

bool ProcessHandle::alive() const {
    if (pidfd_ >= 0) return pidfd_send_signal(pidfd_, 0) == 0 || errno == EPERM;
    if (dir_ < 0) return false;
    int fd = openat(dir_, "stat", O_RDONLY | O_CLOEXEC);  // ESRCH once reaped
    if (fd < 0) return false;
    close(fd);
    return true;
}

std::optional<bool> dumpable_by_pidfd(const ProcessHandle& process) {
    return as_optional(dumpable_from_pidfd(process.pidfd()));
}

std::optional<bool> dumpable_by_proc(const ProcessHandle& process) {
    const int dir = process.proc_dir();
    if (Dumpable d = dumpable_from_proc(dir, "status"); d != Dumpable::Unknown) return as_optional(d);
    // The leader has exited (no mm): ask a thread that has not.
    int tfd = openat(dir, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (tfd < 0) return std::nullopt;
    DIR* d = fdopendir(tfd);
    if (!d) {
        close(tfd);
        return std::nullopt;
    }
    Dumpable found = Dumpable::Unknown;
    while (struct dirent* e = readdir(d)) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        found = dumpable_from_proc(dir, std::string("task/") + e->d_name + "/status");
        if (found != Dumpable::Unknown) break;
    }
    closedir(d);
    return as_optional(found);
}

Verdict may_profile(const Caller& caller, const Policy& policy, pid_t pid, std::string& why) {
    auto process = ProcessHandle::open(pid, why);
    if (!process) return Verdict::Gone;
    return may_profile(caller, policy, *process, why);
}

Verdict may_profile(const Caller& caller, const Policy& policy, const ProcessHandle& process, std::string& why) {
    why.clear();
    const pid_t pid = process.pid();
    const int dir = process.proc_dir();
    const std::string pid_text = "PID " + std::to_string(pid);

    std::string text;
    if (!read_at(dir, "status", text)) {
        why = errno == ESRCH || errno == ENOENT ? gone_text(pid)
                                                : "cannot read /proc/" + std::to_string(pid) + "/status: " +
                                                      errno_text(errno);
        return Verdict::Gone;
    }
    auto leader = parse_status(text);
    if (!leader) {
        why = "cannot parse /proc/" + std::to_string(pid) + "/status";
        return Verdict::Gone;
    }
    std::string comm;
    read_at(dir, "comm", comm);
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    const std::string named = pid_text + " (" + printable(comm) + ")";

    if (leader->tgid != pid) {
        why = "no process has PID " + std::to_string(pid) + ": it is a thread of PID " + std::to_string(leader->tgid);
        return Verdict::Gone;
    }
    // A zombie has exited; a leader that exited while other threads run is shown as a zombie
    // too, but its process lives on (Threads counts the live ones, and the leader until reaped).
    const bool leader_dead = dead_state(leader->state);
    if (leader_dead && leader->threads <= 1) {
        why = named + " has exited: it is a zombie that its parent (PID " + std::to_string(leader->ppid) +
              ") has not reaped yet";
        return Verdict::Gone;
    }

    if (policy.is_admin(caller)) {
        if (!process.alive()) {
            why = gone_text(pid);
            return Verdict::Gone;
        }
        why = caller.uid == 0 ? std::string("you are root")
                              : "you are an administrator (a member of group " + group_name(policy.admin_gid) + ", gid " +
                                    std::to_string(policy.admin_gid) + ")";
        why += ": you may profile " + named + ", whoever's it is";
        return Verdict::Allowed;
    }

    if (std::string d = id_mismatch(caller, *leader, 0); !d.empty()) {
        why = named + " " + d + ": " + kIdRule;
        return Verdict::Refused;
    }

    // Every thread: credentials are per thread, and the agent reads the memory they all share.
    std::string live_status = leader_dead ? "" : "status";
    if (int tfd = openat(dir, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC); tfd >= 0) {
        DIR* d = fdopendir(tfd);
        if (!d) {
            close(tfd);
        } else {
            std::string refusal;
            while (struct dirent* e = readdir(d)) {
                char* end = nullptr;
                long tid = std::strtol(e->d_name, &end, 10);
                if (!end || *end || tid <= 0 || tid == pid) continue;
                std::string path = std::string("task/") + e->d_name + "/status", ttext;
                if (!read_at(dir, path, ttext)) continue;  // exited meanwhile
                auto t = parse_status(ttext);
                if (!t || dead_state(t->state)) continue;
                if (std::string m = id_mismatch(caller, *t, static_cast<pid_t>(tid)); !m.empty()) {
                    refusal = named + " " + m + ": " + kIdRule;
                    break;
                }
                if (live_status.empty()) live_status = path;
            }
            closedir(d);
            if (!refusal.empty()) {
                why = refusal;
                return Verdict::Refused;
            }
        }
    }

    Dumpable dumpable = dumpable_from_pidfd(process.pidfd());
    if (dumpable == Dumpable::Unknown && !live_status.empty()) dumpable = dumpable_from_proc(dir, live_status);
    if (!process.alive() || dumpable == Dumpable::Unknown) {
        // Unknown with a live process: no live thread left to ask (it is exiting).
        why = gone_text(pid);
        return Verdict::Gone;
    }
    if (dumpable == Dumpable::No) {
        why = named + " " + kDumpRule;
        return Verdict::Refused;
    }
    why = named + " is yours (" + caller_uid_text(caller) + ", " + caller_gid_text(caller) +
          ") and dumpable: you may profile it";
    return Verdict::Allowed;
}

}  // namespace pbp::agent
