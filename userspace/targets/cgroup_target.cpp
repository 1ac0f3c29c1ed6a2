#include "targets/cgroup_target.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>

#include "targets/cgroups.h"

namespace pbp {

namespace {

constexpr int kSearchDepth = 10;  // kubepods.slice/<qos>.slice/<pod>.slice/<container>.scope/...

bool is_dir(const std::string& p) {
    struct stat st{};
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string basename_of(const std::string& p) {
    auto s = p.rfind('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

CgroupTarget make(const std::string& spec, const std::string& kind, const std::string& abs,
                  const std::string& mount) {
    CgroupTarget t;
    t.spec = spec;
    t.kind = kind;
    t.abs_path = abs;
    t.rel_path = abs.size() > mount.size() ? abs.substr(mount.size()) : "/";
    return t;
}

// The pod's own cgroup: the shallowest directory whose name carries the UID.
std::string find_pod_dir(const std::string& mount, const std::string& uid) {
    std::string found;
    size_t best_depth = SIZE_MAX;
    cgroups::walk(mount, mount, kSearchDepth, [&](const std::string& abs, const std::string& rel) {
        if (kube::pod_uid_of_dir(basename_of(abs)) == uid) {
            size_t depth = std::count(rel.begin(), rel.end(), '/');
            if (depth < best_depth) {
                best_depth = depth;
                found = abs;
            }
        }
        return true;
    });
    return found;
}

CgroupResolution resolve_pod_uid(const std::string& spec, const std::string& uid, const std::string& mount,
                                 kube::Node& node, const kube::PodInfo* known) {
    CgroupResolution r;
    std::string dir = find_pod_dir(mount, uid);
    if (dir.empty()) {
        std::string who = known ? "pod " + known->namespace_ + "/" + known->name + " (UID " + uid + ")" : "pod UID " + uid;
        r.cause = "no cgroup of " + who + " under " + mount;
        if (node.kubelet_has_pod(uid) || known) {
            r.cause += " (kubelet knows the pod; its containers have not started)";
            r.fix = "pass -d SECONDS to wait for them";
        } else {
            r.fix = "run pybpfprof on the pod's node (kubectl get pod -o wide shows it), or pass -d SECONDS to wait for it";
        }
        return r;
    }
    r.status = CgroupResolve::Found;
    r.target = make(spec, "pod", dir, mount);
    r.target.pod.uid = uid;
    if (known) r.target.pod = *known;
    else if (auto p = node.pod_by_uid(uid)) r.target.pod = *p;
    return r;
}

}  // namespace

std::string CgroupTarget::describe() const {
    std::string what;
    if (kind == "pod") {
        what = pod.name.empty() ? "pod " + pod.uid : "pod " + pod.namespace_ + "/" + pod.name;
    } else if (kind == "container") {
        what = "container " + kube::container_id_of_dir(basename_of(abs_path)).substr(0, 12);
    } else {
        what = "cgroup";
    }
    return what + " (" + rel_path + ")";
}

CgroupResolution resolve_cgroup(const std::string& spec, const std::string& mount, kube::Node& node) {
    CgroupResolution r;
    if (spec.empty()) {
        r.cause = "--cgroup got an empty value";
        r.fix = "give a cgroup path, a pod UID, namespace/name or a container ID";
        return r;
    }
    // 1. A cgroup path: absolute in the hierarchy, a path under the mount, or relative.
    if (spec[0] == '/' || is_dir(mount + "/" + spec)) {
        std::string abs;
        if (spec.rfind(mount + "/", 0) == 0 || spec == mount) abs = spec;
        else abs = mount + (spec[0] == '/' ? "" : "/") + spec;
        while (abs.size() > mount.size() && abs.back() == '/') abs.pop_back();
        if (is_dir(abs)) {
            r.status = CgroupResolve::Found;
            r.target = make(spec, "cgroup", abs, mount);
            return r;
        }
        if (spec[0] == '/') {
            r.cause = "no cgroup " + spec + " (looked for " + abs + ")";
            r.fix = "check the path under " + mount + ", or pass -d SECONDS to wait for it";
            return r;
        }
    }
    // 2. A pod UID.
    if (kube::looks_like_pod_uid(spec)) {
        std::string uid = spec;
        std::transform(uid.begin(), uid.end(), uid.begin(), ::tolower);
        return resolve_pod_uid(spec, uid, mount, node, nullptr);
    }
    // 3. A pod as namespace/name.
    if (kube::looks_like_pod_name(spec)) {
        std::string ns = spec.substr(0, spec.find('/')), name = spec.substr(spec.find('/') + 1);
        auto pods = node.pods_by_name(ns, name);
        if (pods.empty()) {
            r.cause = "no pod " + spec + " on this node (no " + node.root() + "/var/log/pods/" + ns + "_" + name +
                      "_<uid> directory)";
            r.fix = "run pybpfprof on the pod's node (kubectl get pod -n " + ns + " " + name +
                    " -o wide), or pass -d SECONDS to wait for it";
            return r;
        }
        // A pod recreated under the same name keeps its old log directory for a while:
        // prefer one whose cgroup exists.
        CgroupResolution last;
        for (const auto& p : pods) {
            last = resolve_pod_uid(spec, p.uid, mount, node, &p);
            if (last.status == CgroupResolve::Found) return last;
        }
        return last;
    }
    // 4. A container ID or a unique prefix of one.
    if (kube::looks_like_container_id(spec)) {
        std::string prefix = spec;
        std::transform(prefix.begin(), prefix.end(), prefix.begin(), ::tolower);
        std::map<std::string, std::string> matches;  // id -> shallowest directory
        cgroups::walk(mount, mount, kSearchDepth, [&](const std::string& abs, const std::string&) {
            std::string id = kube::container_id_of_dir(basename_of(abs));
            if (!id.empty() && id.rfind(prefix, 0) == 0 && !matches.count(id)) matches[id] = abs;
            return true;
        });
        if (matches.size() == 1) {
            r.status = CgroupResolve::Found;
            r.target = make(spec, "container", matches.begin()->second, mount);
            return r;
        }
        if (matches.size() > 1) {
            r.status = CgroupResolve::Ambiguous;
            std::string ids;
            for (const auto& [id, _] : matches) ids += (ids.empty() ? "" : ", ") + id.substr(0, 16);
            r.cause = "container ID prefix " + spec + " matches " + std::to_string(matches.size()) +
                      " containers (" + ids + ")";
            r.fix = "give more characters of the ID";
            return r;
        }
        r.cause = "no container with an ID starting with " + spec + " under " + mount;
        r.fix = "check it with crictl ps or docker ps, or pass -d SECONDS to wait for it";
        return r;
    }
    r.cause = "no cgroup " + spec + " under " + mount + " (and it is not a pod UID, namespace/name or container ID)";
    r.fix = "check it with: ls " + mount + ", or pass -d SECONDS to wait for it";
    return r;
}

}  // namespace pbp
