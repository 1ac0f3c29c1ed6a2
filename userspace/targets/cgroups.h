// cgroup v2, as --cgroup needs it: where the cgroup2 hierarchy is mounted (found in
// /proc/self/mountinfo, on pure v2 and on hybrid hosts alike), which cgroup a process is in,
// and the processes under a cgroup and all its descendants.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pbp::cgroups {

// A cgroup2 mount from mountinfo. 'root' is the mount's root inside the cgroup2 hierarchy,
// as our cgroup namespace renders it ("/" for a mount of the whole hierarchy).
struct Mount {
    std::string path;
    std::string root;
};

// Every cgroup2 mount listed in mountinfo text (for tests: any text in that format).
std::vector<Mount> parse_cgroup2_mounts(const std::string& mountinfo);

// The mount through which the whole cgroup2 hierarchy is reachable: the first cgroup2
// mount whose root is "/". nullopt, with a one-line reason, when there is none.
std::optional<std::string> hierarchy_mount(std::string& error);

// Moves pybpfprof into the initial cgroup namespace when it is in another one (a DaemonSet
// agent with hostPID runs in a private cgroup namespace), so that cgroup paths in
// /proc/PID/cgroup and in mountinfo are the host's. Returns false (and changes nothing)
// when it cannot.
bool enter_init_cgroup_namespace();

// The cgroup v2 path of a process relative to the hierarchy root ("/kubepods.slice/..."),
// from the "0::" line of /proc/PID/cgroup. nullopt if the process is gone or has no v2 line.
std::optional<std::string> v2_path_of(pid_t pid);
// All the cgroup paths of a process, v2 and v1 ("/kubepods/burstable/pod.../<id>"), for
// label discovery on hybrid hosts where pods may sit only in v1 hierarchies.
std::vector<std::string> all_paths_of(pid_t pid);

// The cgroup v2 id (the inode of the cgroup directory), 0 if it cannot be read.
uint64_t id_of(const std::string& dir);

// Calls fn for 'dir' and every cgroup below it, depth first, up to max_depth levels; fn gets
// the directory's absolute path and its path relative to 'mount'. fn returns false to stop.
void walk(const std::string& mount, const std::string& dir, int max_depth,
          const std::function<bool(const std::string& abs, const std::string& rel)>& fn);

// The processes (thread-group ids) in 'dir' and every cgroup below it.
std::vector<pid_t> procs_under(const std::string& dir);

// True if 'path' (relative to the hierarchy) is 'ancestor' or lies below it.
bool is_under(const std::string& path, const std::string& ancestor);

}  // namespace pbp::cgroups
