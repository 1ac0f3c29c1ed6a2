// Checks made before loading BPF, each failing with a one-line cause-and-fix message.
#pragma once
#include <cstdint>
#include <string>

namespace pbp {

// Root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN) in the effective set.
bool check_privileges(std::string& error);
inline constexpr const char* kKernelBtf = "/sys/kernel/btf/vmlinux";
// Kernel BTF (or a --btf file) for CO-RE, and a kernel new enough for ring buffers (5.8).
bool check_kernel(const std::string& btf_path, std::string& error);
// The same for a given `uname -r` and kernel BTF path (the checks behind the one above).
bool check_kernel(const std::string& release, const std::string& kernel_btf, const std::string& btf_path,
                  std::string& error);
std::string kernel_release();
// Whether `uname -r` release is older than major.minor; false when it cannot be read.
bool kernel_older_than(const std::string& release, int major, int minor);
// Why loading BPF may have been refused with EPERM although the capabilities are there: a
// kernel before 5.11 charges BPF maps to RLIMIT_MEMLOCK, and raising it past the hard limit
// needs CAP_SYS_RESOURCE. The cause and the fix, or "" when that is not it. The pure form
// takes the kernel's release, whether CAP_SYS_RESOURCE is effective and the hard limit in
// bytes (RLIM_INFINITY: none).
std::string memlock_problem();
std::string memlock_problem(const std::string& release, bool cap_sys_resource, uint64_t hard_limit);
// The machine's host name (uname -n), "unknown" if uname fails.
std::string host_name();

}  // namespace pbp
