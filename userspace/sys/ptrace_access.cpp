#include "sys/ptrace_access.h"

#include <unistd.h>

#include <cctype>
#include <sstream>

#include "sys/procfs.h"

namespace pbp {

namespace {

constexpr int kCapSysPtrace = 19;

// The capabilities' names, by number (include/uapi/linux/capability.h).
const char* const kCapNames[] = {
    "cap_chown", "cap_dac_override", "cap_dac_read_search", "cap_fowner", "cap_fsetid", "cap_kill",
    "cap_setgid", "cap_setuid", "cap_setpcap", "cap_linux_immutable", "cap_net_bind_service",
    "cap_net_broadcast", "cap_net_admin", "cap_net_raw", "cap_ipc_lock", "cap_ipc_owner", "cap_sys_module",
    "cap_sys_rawio", "cap_sys_chroot", "cap_sys_ptrace", "cap_sys_pacct", "cap_sys_admin", "cap_sys_boot",
    "cap_sys_nice", "cap_sys_resource", "cap_sys_time", "cap_sys_tty_config", "cap_mknod", "cap_lease",
    "cap_audit_write", "cap_audit_control", "cap_setfcap", "cap_mac_override", "cap_mac_admin", "cap_syslog",
    "cap_wake_alarm", "cap_block_suspend", "cap_audit_read", "cap_perfmon", "cap_bpf", "cap_checkpoint_restore"};

// The hex mask of a "CapXxx:" line of a /proc status file.
std::optional<uint64_t> cap_line(const std::string& status, const std::string& field) {
    auto at = status.find("\n" + field + ":");
    if (at == std::string::npos) return std::nullopt;
    std::istringstream in(status.substr(at + field.size() + 2));
    uint64_t v = 0;
    if (!(in >> std::hex >> v)) return std::nullopt;
    return v;
}

}  // namespace

std::string capability_names(uint64_t mask) {
    std::string out;
    int shown = 0, more = 0;
    for (int bit = 0; bit < 64; bit++) {
        if (!(mask >> bit & 1)) continue;
        if (shown == 4) {  // (a whole set would not be a line)
            more++;
            continue;
        }
        if (!out.empty()) out += ", ";
        out += bit < int(sizeof kCapNames / sizeof *kCapNames) ? kCapNames[bit] : "cap_" + std::to_string(bit);
        shown++;
    }
    if (more) out += " and " + std::to_string(more) + " more";
    return out;
}

PtraceFacts ptrace_refusal_facts(pid_t pid) {
    PtraceFacts f;
    const std::string own = "\n" + procfs::read_text("/proc/self/status");
    f.own_effective = cap_line(own, "CapEff").value_or(0);
    f.own_permitted = cap_line(own, "CapPrm").value_or(0);
    f.own_uid = geteuid();
    const std::string target = "\n" + procfs::read_text("/proc/" + std::to_string(pid) + "/status");
    f.target_permitted = cap_line(target, "CapPrm");
    if (auto st = procfs::read_status(pid)) f.target_uid = st->uid;
    const std::string yama = procfs::read_text("/proc/sys/kernel/yama/ptrace_scope");
    if (!yama.empty() && isdigit(static_cast<unsigned char>(yama[0]))) f.yama_scope = yama[0] - '0';
    return f;
}

std::string ptrace_refusal_reason(const PtraceFacts& f) {
    const uint64_t extra = f.target_permitted ? *f.target_permitted & ~f.own_permitted : 0;
    if (!(f.own_effective >> kCapSysPtrace & 1)) {
        if (f.own_uid != f.target_uid)
            return "profiling another user's process needs CAP_SYS_PTRACE (run as root, or add SYS_PTRACE to the "
                   "agent's capabilities)";
        return std::string(extra ? "it holds capabilities this process lacks (" + capability_names(extra) + ")"
                                 : "it is not dumpable (set-user-ID, or prctl(PR_SET_DUMPABLE, 0))") +
               ", so reading it needs CAP_SYS_PTRACE (run as root, or add SYS_PTRACE to the agent's capabilities)";
    }
    if (f.yama_scope && *f.yama_scope >= 3)
        return "Yama's kernel.yama.ptrace_scope is 3, which forbids reading another process to everyone, root "
               "included (only a reboot lowers it)";
    if (extra)
        return "it holds capabilities that pybpfprof's own set lacks (" + capability_names(extra) +
               "), and the kernel refuses even pybpfprof's CAP_SYS_PTRACE, as it does across a user namespace "
               "boundary: pybpfprof runs in a container or sandbox that dropped those capabilities (its PID 1 is "
               "often the sandbox's manager); profile that process from the host";
    return "the kernel refused it although pybpfprof has CAP_SYS_PTRACE: a security module (SELinux, AppArmor, "
           "Landlock) or a user namespace boundary stands between them; the kernel's audit log names which";
}

}  // namespace pbp
