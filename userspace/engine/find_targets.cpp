#include "engine/find_targets.h"

#include <sys/stat.h>
#include <unistd.h>

#include "sys/procfs.h"
#include "targets/cgroups.h"

namespace pbp {

Status discover_pid(Discoverer& d, pid_t pid, std::optional<PythonTarget>& out) {
    const std::string p = std::to_string(pid);
    if (pid == getpid()) return Status::bad_input("PID " + p + " is pybpfprof itself; pass the PID of a Python process");
    DiscoveryResult r;
    for (int i = 0; i < 20; i++) {
        r = d.discover(pid);
        if (r.status != Discovery::NotYet) break;
        usleep(10000);
    }
    if (r.status == Discovery::Gone) return Status::bad_input("no process with PID " + p + "; check it with: ps -p " + p);
    if (r.status == Discovery::Zombie)
        return Status::bad_input("PID " + p + " (" + procfs::comm(pid) + ") is a zombie (" + r.reason +
                                 "): there is nothing left to profile");
    if (r.status == Discovery::Unsupported)
        return Status::bad_input("PID " + p + " (" + procfs::comm(pid) + ") cannot be profiled: " + r.reason);
    if (r.status != Discovery::Python)
        return Status::bad_input("PID " + p + " (" + procfs::comm(pid) + ") is not a CPython process we can profile: " +
                                 r.reason + "; pass the PID of a python process");
    out = r.target;
    return {};
}

Status cgroup_mount(const std::string& node_root, std::string& mount) {
    struct stat st{};
    if (stat(node_root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return Status::bad_input("--node-root " + node_root +
                                 " is not a directory; give the path where the node's / is mounted");
    cgroups::enter_init_cgroup_namespace();
    std::string error;
    auto m = cgroups::hierarchy_mount(error);
    if (!m) return Status::cannot_profile(error);
    mount = *m;
    return {};
}

}  // namespace pbp
