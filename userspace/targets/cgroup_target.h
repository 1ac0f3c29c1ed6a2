// What a --cgroup argument names, resolved to one cgroup v2 directory: a cgroup path
// (absolute, or relative to the cgroup2 mount), a Kubernetes pod UID, a pod as
// namespace/name, or a container ID (full, or a unique prefix).
#pragma once
#include <string>

#include "targets/kube.h"

namespace pbp {

struct CgroupTarget {
    std::string spec;      // as given
    std::string kind;      // "cgroup", "pod" or "container"
    std::string abs_path;  // the directory under the cgroup2 mount
    std::string rel_path;  // the same, relative to the hierarchy root ("/kubepods.slice/...")
    std::string describe() const;  // "pod default/web-1 (/kubepods.slice/...)"
    kube::PodInfo pod;     // kind == "pod" (uid always; name when known)
};

enum class CgroupResolve {
    Found,
    NotFound,   // may appear later (with --duration, pybpfprof waits for it)
    Ambiguous,  // a container-ID prefix matching several containers
};

struct CgroupResolution {
    CgroupResolve status = CgroupResolve::NotFound;
    CgroupTarget target;
    std::string cause;  // NotFound / Ambiguous: what is wrong ("no pod default/web on this node")
    std::string fix;    // and what to do about it ("run pybpfprof on the pod's node ...")
    std::string message() const { return cause + "; " + fix; }
};

CgroupResolution resolve_cgroup(const std::string& spec, const std::string& mount, kube::Node& node);

}  // namespace pbp
