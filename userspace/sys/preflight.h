// Checks made before loading BPF, each failing with a one-line cause-and-fix message.
#pragma once
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
// The machine's host name (uname -n), "unknown" if uname fails.
std::string host_name();

}  // namespace pbp
