// The agent's access policy: who may profile which process. The agent (root) reads target
// memory with its own privileges, so Yama and ptrace do not limit it: this rule is the whole
// policy. Non-admins get what ptrace would give them without CAP_SYS_PTRACE
// (__ptrace_may_access, PTRACE_MODE_ATTACH_REALCREDS): every thread's real, effective and saved
// uid equal to theirs, the same for gids, and a dumpable process. Admins (uid 0, or members of
// --admin-group) may profile any process.
//
// How it is observed (see may_profile): the process is opened once (a pidfd, then its /proc/PID
// directory, then the pidfd is checked to be alive: both name the same process) and everything
// is read through those: a reaped process's reads fail with ESRCH, so a PID reused meanwhile is
// never mistaken for the one asked about. Dumpability comes from PIDFD_GET_INFO's coredump_mask
// (Linux 6.16+), otherwise from who owns /proc/PID/status: the kernel makes the files inside
// /proc/PID of a non-dumpable process root's (task_dump_owner) -- but not /proc/PID itself, a
// 0555 directory, which keeps the effective uid/gid on every kernel.
//
// A verdict holds when it is given: a process can exec a setuid program, or change its ids,
// afterwards. Whoever profiles on a verdict should keep the ProcessHandle it was given for and
// ask again from time to time (and stop if the answer changes).
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace pbp::agent {

// Who is on the other end of a connection.
struct Caller {
    pid_t pid = 0;
    uid_t uid = 0;  // the effective ids of the peer when it called connect() (SO_PEERCRED)
    gid_t gid = 0;
    std::vector<gid_t> groups;  // supplementary groups, as at connect() (SO_PEERGROUPS)
    std::string user;           // the user's name, or the number
};

// SO_PEERCRED + SO_PEERGROUPS of a connected AF_UNIX socket. false + one-line error.
bool peer_credentials(int fd, Caller& out, std::string& error);

struct Policy {
    gid_t admin_gid = static_cast<gid_t>(-1);  // members (primary or supplementary) may profile anything; -1: none
    bool is_admin(const Caller& c) const;      // uid 0, or a member of admin_gid
};

// --native through the agent: may the caller see the kernel frames of the processes it may
// profile? Admins may. Others may where the kernel would let them record kernel call chains
// of their own processes with perf: kernel.perf_event_paranoid at 1 or below (2, and
// Debian's 3, keep kernel stacks from unprivileged users; so does /proc/PID/stack, root's
// only). paranoid_path: the sysctl's file (tests point it elsewhere). false + why (one line).
bool may_see_kernel_frames(const Caller& c, const Policy& p, std::string& why,
                           const std::string& paranoid_path = "/proc/sys/kernel/perf_event_paranoid");

// Resolves a group name (or number) for --admin-group. nullopt if there is none: a name must
// exist in the group database; a number is taken as it is (any but -1), named or not.
std::optional<gid_t> group_id(const std::string& name_or_number);

// "root", or the number if the user database has no name for it. Same for groups.
std::string user_name(uid_t uid);
std::string group_name(gid_t gid);

enum class Verdict { Allowed, Refused, Gone };

// A process, held from the moment it was opened: its pidfd (where the kernel has pidfd_open)
// and its /proc/PID directory, which name the same process. Reads through proc_dir() fail with
// ESRCH once the process is reaped, and alive() turns false: its PID may then name another
// process, which this handle never describes.
class ProcessHandle {
public:
    // nullopt, with why ("no process has PID 7"), if there is no such process (now).
    static std::optional<ProcessHandle> open(pid_t pid, std::string& why);
    ProcessHandle(ProcessHandle&& o) noexcept;
    ProcessHandle& operator=(ProcessHandle&& o) noexcept;
    ProcessHandle(const ProcessHandle&) = delete;
    ProcessHandle& operator=(const ProcessHandle&) = delete;
    ~ProcessHandle();

    pid_t pid() const { return pid_; }
    int proc_dir() const { return dir_; }  // O_DIRECTORY fd of /proc/PID
    int pidfd() const { return pidfd_; }   // -1 if the kernel (or a seccomp filter) refused pidfd_open
    // Not reaped yet (a zombie counts as alive here): pid() still names this process.
    bool alive() const;

private:
    ProcessHandle() = default;
    pid_t pid_ = 0;
    int dir_ = -1;
    int pidfd_ = -1;
};

// May this caller profile pid? Admins: Allowed if the process exists. Others: the ptrace-by-uid
// rule above. why is one line: on Refused it names the PID, its command name, whose it is and
// the rule, e.g.
//  "PID 1 (systemd) belongs to uid 0 (root), not to you (uid 1001, pbp-test-a): the agent lets you profile only processes whose real, effective and saved user and group IDs are all yours"
//  "PID 4242 (python3) is not dumpable (...): the agent profiles only dumpable processes, as ptrace would"
// and a mixed-uid/gid process names which id differs ("has saved uid 0 (root), not yours").
// Gone: no such process, a zombie, or a thread ID rather than a process's (why says which).
// Allowed: why says on what grounds (for the agent's log).
Verdict may_profile(const Caller& caller, const Policy& policy, pid_t pid, std::string& why);
// The same for a process already held: Gone once it has been reaped, whatever now has its PID.
Verdict may_profile(const Caller& caller, const Policy& policy, const ProcessHandle& process, std::string& why);

// Whether the process is dumpable, as each source says: PIDFD_GET_INFO's coredump_mask (Linux
// 6.16+), and the owner of /proc/PID/status (or a live thread's, if the leader has exited) against
// its effective uid/gid -- which cannot tell for a process whose euid and egid are 0. nullopt: this
// source cannot tell. may_profile asks the pidfd first. For tests and diagnostics.
std::optional<bool> dumpable_by_pidfd(const ProcessHandle& process);
std::optional<bool> dumpable_by_proc(const ProcessHandle& process);

// The uid whose processes a non-admin's --all-python covers, said for the user: "every CPython
// process of uid 1001 (pbp-test-a), including ones started later". (Each one found must still
// pass may_profile: same uid is not enough.)
std::string own_scope_text(const Caller& caller);

}  // namespace pbp::agent
