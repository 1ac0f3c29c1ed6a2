// Container and Kubernetes identity of a process, found on the node itself without the API
// server: the container ID and pod UID are in its cgroup path (every kubelet cgroup driver
// and container runtime layout), and kubelet's /var/log/pods/<namespace>_<name>_<uid> and
// /var/log/containers/<pod>_<namespace>_<container>-<id>.log map them to names.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pbp::kube {

// What a cgroup path says about its container and pod.
struct CgroupIdentity {
    std::string pod_uid;       // "0b6a...-..." with dashes, lower case; "" if none
    std::string container_id;  // 64 hex digits (or what the runtime uses); "" if none
    std::string runtime;       // "containerd", "crio", "docker", "podman", "" if not said
};

// Understands the systemd driver (kubepods.slice/kubepods-burstable.slice/
// kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope, crio-<id>.scope,
// docker-<id>.scope), the cgroupfs driver (/kubepods/burstable/pod<uid>/<id>) and plain
// docker/podman containers (/docker/<id>, /system.slice/docker-<id>.scope, libpod-<id>.scope).
CgroupIdentity parse_cgroup_path(const std::string& path);

// If a cgroup directory name names a container, its ID ("" otherwise). Conmon and
// sandbox helper scopes (crio-conmon-<id>.scope) are not containers.
std::string container_id_of_dir(const std::string& name);
// If a cgroup directory name is a pod's, its UID with dashes ("" otherwise).
std::string pod_uid_of_dir(const std::string& name);

bool looks_like_pod_uid(const std::string& s);        // 8-4-4-4-12 hex
bool looks_like_container_id(const std::string& s);   // >= 6 hex digits, <= 64
bool looks_like_pod_name(const std::string& s);       // "namespace/name" (DNS labels)

struct PodInfo {
    std::string uid, namespace_, name;
};

// The node's kubelet files, read under 'node_root' ("/" on the node, or wherever the node's
// file system is mounted in an agent container). Listings are cached and re-read when a
// lookup misses, at most once a second.
class Node {
public:
    explicit Node(std::string node_root = "/");
    std::string root() const { return root_; }  // "" for "/"

    std::optional<PodInfo> pod_by_uid(const std::string& uid);
    std::vector<PodInfo> pods_by_name(const std::string& ns, const std::string& name);
    // Whether kubelet knows this pod UID on this node (/var/lib/kubelet/pods/<uid>).
    bool kubelet_has_pod(const std::string& uid) const;
    std::string container_name(const std::string& container_id);

    // Labels for a process: pod_uid, pod, namespace, container_id, container, cgroup, as far
    // as they can be discovered (a container's name from kubelet, else from podman's or
    // Docker's state under the node root). Empty for a process that is in no container.
    std::map<std::string, std::string> labels_for(pid_t pid);

private:
    void refresh(bool force);
    std::string root_;
    uint64_t last_refresh_ns_ = 0;
    bool loaded_ = false;
    std::map<std::string, PodInfo> pods_;                 // by uid
    std::map<std::string, std::string> container_names_;  // id -> container name
};

}  // namespace pbp::kube
