// Finding the processes a target names, shared by the engine's sessions and `pybpfprof dump`
// (engine/dump.h): one wording for a PID that is missing or not Python, one cgroup2 mount.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>

#include "engine/engine.h"
#include "targets/discovery.h"

namespace pbp {

// A --pid target, discovered now (a process still in its dynamic loader gets 200 ms).
Status discover_pid(Discoverer& d, pid_t pid, std::optional<PythonTarget>& out);

// The cgroup2 mount, entered from a private cgroup namespace if need be (an agent container
// with hostPID may be in one of its own). node_root: EngineConfig::node_root.
Status cgroup_mount(const std::string& node_root, std::string& mount);

}  // namespace pbp
