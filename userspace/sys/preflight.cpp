#include "sys/preflight.h"

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>

namespace pbp {

namespace {
// Whether cap is in this process's effective set; without capget, whether it is root.
bool has_effective(int cap) {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (syscall(SYS_capget, &hdr, data) != 0) return geteuid() == 0;
    return data[cap / 32].effective & (1u << (cap % 32));
}
}  // namespace

bool kernel_older_than(const std::string& release, int major, int minor) {
    int maj = 0, min = 0;
    if (sscanf(release.c_str(), "%d.%d", &maj, &min) != 2) return false;
    return maj < major || (maj == major && min < minor);
}

bool check_privileges(std::string& error) {
    constexpr int kSysAdmin = 21, kPerfmon = 38, kBpf = 39;
    if (has_effective(kSysAdmin) || (has_effective(kBpf) && has_effective(kPerfmon))) return true;
    error = "loading BPF programs needs root or CAP_BPF+CAP_PERFMON; run it with sudo "
            "(or: sudo setcap cap_bpf,cap_perfmon,cap_sys_ptrace,cap_dac_read_search+ep pybpfprof)";
    return false;
}

std::string memlock_problem(const std::string& release, bool cap_sys_resource, uint64_t hard_limit) {
    if (!kernel_older_than(release, 5, 11)) return "";
    if (cap_sys_resource || hard_limit == RLIM_INFINITY) return "";
    const std::string limit = hard_limit >= (1u << 20) ? std::to_string(hard_limit >> 20) + " MiB"
                                                       : std::to_string(hard_limit >> 10) + " KiB";
    return "kernel " + release + " charges BPF maps to the locked-memory limit (" + limit +
           " here), and raising it needs CAP_SYS_RESOURCE: add that capability (deploy/'s DaemonSet has it) "
           "or raise the limit (ulimit -l unlimited; LimitMEMLOCK=infinity in a systemd unit)";
}

std::string memlock_problem() {
    constexpr int kSysResource = 24;
    rlimit rl{};
    if (getrlimit(RLIMIT_MEMLOCK, &rl)) return "";
    return memlock_problem(kernel_release(), has_effective(kSysResource), rl.rlim_max);
}

std::string kernel_release() {
    utsname u{};
    if (uname(&u)) return "unknown";
    return u.release;
}

std::string host_name() {
    utsname u{};
    if (uname(&u)) return "unknown";
    return u.nodename;
}

bool check_kernel(const std::string& btf_path, std::string& error) {
    return check_kernel(kernel_release(), kKernelBtf, btf_path, error);
}

bool check_kernel(const std::string& release, const std::string& kernel_btf, const std::string& btf_path,
                  std::string& error) {
    if (kernel_older_than(release, 5, 8)) {
        error = "kernel " + release + " is too old: pybpfprof needs Linux 5.8 or newer (BPF ring buffer); "
                "upgrade the kernel";
        return false;
    }
    const std::string& btf = btf_path.empty() ? kernel_btf : btf_path;
    struct stat st{};
    if (stat(btf.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || access(btf.c_str(), R_OK) != 0) {
        if (btf_path.empty())
            error = "kernel " + release + " has no BTF (" + kernel_btf + " is missing): use a kernel built "
                    "with CONFIG_DEBUG_INFO_BTF=y (Debian 11+, Ubuntu 20.10+, Fedora 31+, RHEL 8.2+) "
                    "or pass --btf FILE";
        else
            error = "BTF file " + btf + " cannot be read (missing, not a file, or no permission); "
                    "pass a readable BTF file to --btf";
        return false;
    }
    return true;
}

}  // namespace pbp
