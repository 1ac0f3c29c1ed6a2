// The names container engines give their containers, read from the engines' own state on
// the machine (no daemon, no API): for containers run outside Kubernetes, where kubelet's
// /var/log/containers names nothing and the cgroup path holds only the ID.
#pragma once
#include <string>

namespace pbp::engines {

// The name of container 'id' (64 hex digits, lower case) as podman or Docker knows it, read
// under 'root' ("" for /): podman's (containers/storage)
// /var/lib/containers/storage/<driver>-containers/containers.json, Docker's
// /var/lib/docker/containers/<id>/config.v2.json. "" if neither knows it.
std::string container_name(const std::string& root, const std::string& id);

}  // namespace pbp::engines
