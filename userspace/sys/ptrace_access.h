// Why the kernel refuses this process another process's memory maps and files: its ptrace
// access check (PTRACE_MODE_READ), diagnosed from what /proc shows, so that the one-line
// error names the cause in this environment rather than a generic "needs CAP_SYS_PTRACE".
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace pbp {

// What the diagnosis looks at (read from /proc by ptrace_refusal_facts; a test may build it).
struct PtraceFacts {
    uint64_t own_effective = 0;     // this process's CapEff
    uint64_t own_permitted = 0;     // CapPrm
    std::optional<uint64_t> target_permitted;  // the target's CapPrm, if /proc/PID/status says
    std::optional<int> yama_scope;  // kernel.yama.ptrace_scope, if Yama is built in
    uid_t own_uid = 0, target_uid = 0;
};

PtraceFacts ptrace_refusal_facts(pid_t pid);

// The reason, one sentence without a trailing period, naming the fix where there is one.
std::string ptrace_refusal_reason(const PtraceFacts& f);

// "cap_sys_resource, cap_mac_admin": the names of the capabilities in a mask (the first 4,
// then "and N more").
std::string capability_names(uint64_t mask);

}  // namespace pbp
