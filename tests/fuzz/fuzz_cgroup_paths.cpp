// libFuzzer target for what pybpfprof parses out of cgroup paths and mountinfo
// (targets/kube.h, targets/cgroups.h): a container's cgroup path is named by whoever runs the
// container, and the agent resolves --cgroup arguments from unprivileged callers. Run by
// tests/tools/run-fuzz --target cgroup_paths (ctest: Fuzz.CgroupPaths), with ASan and UBSan.
//
// The input is used as a cgroup path, a directory name and mountinfo text. Checks, besides
// "no crash, no leak, no timeout": what is found is what its own predicate accepts (a pod
// UID looks like one, a container ID looks like one) and is part of the input; mountinfo
// entries are absolute paths.
#include <cctype>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "targets/cgroups.h"
#include "targets/kube.h"

namespace {

const char* const kName = "fuzz_cgroup_paths";

// A pod UID is found with dashes, possibly from a systemd name with underscores instead;
// IDs are found in lower case. So both are compared in lower case, '_' read as '-'.
bool in_input(std::string found, std::string in) {
    for (std::string* s : {&found, &in})
        for (char& c : *s) c = c == '_' ? '-' : char(std::tolower(static_cast<unsigned char>(c)));
    return in.find(found) != std::string::npos;
}

void check_identity(const pbp::kube::CgroupIdentity& id, const std::string& in) {
    if (!id.pod_uid.empty() && !pbp::kube::looks_like_pod_uid(id.pod_uid))
        pbp::fuzz::broken(kName, "pod UID that does not look like one", id.pod_uid);
    if (!id.container_id.empty() && !pbp::kube::looks_like_container_id(id.container_id))
        pbp::fuzz::broken(kName, "container ID that does not look like one", id.container_id);
    if (!id.pod_uid.empty() && !in_input(id.pod_uid, in)) pbp::fuzz::broken(kName, "pod UID not in the path", id.pod_uid);
    if (!id.container_id.empty() && !in_input(id.container_id, in))
        pbp::fuzz::broken(kName, "container ID not in the path", id.container_id);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string in(reinterpret_cast<const char*>(data), size);
    check_identity(pbp::kube::parse_cgroup_path(in), in);

    const std::string cid = pbp::kube::container_id_of_dir(in);
    if (!cid.empty() && (!pbp::kube::looks_like_container_id(cid) || !in_input(cid, in)))
        pbp::fuzz::broken(kName, "container_id_of_dir", cid);
    const std::string uid = pbp::kube::pod_uid_of_dir(in);
    if (!uid.empty() && (!pbp::kube::looks_like_pod_uid(uid) || !in_input(uid, in)))
        pbp::fuzz::broken(kName, "pod_uid_of_dir", uid);
    (void)pbp::kube::looks_like_pod_name(in);

    for (const auto& m : pbp::cgroups::parse_cgroup2_mounts(in)) {
        if (m.path.empty() || m.path[0] != '/') pbp::fuzz::broken(kName, "mount path not absolute", m.path);
    }
    (void)pbp::cgroups::is_under(in, "/kubepods.slice");
    (void)pbp::cgroups::is_under("/kubepods.slice/x", in);
    return 0;
}
