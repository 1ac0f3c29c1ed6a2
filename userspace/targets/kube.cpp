#include "targets/kube.h"

#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "targets/cgroups.h"
#include "sys/clock.h"
#include "targets/engine_names.h"

namespace pbp::kube {

namespace {

bool is_hex(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c); });
}

bool strip_suffix(std::string& s, const std::string& suf) {
    if (s.size() < suf.size() || s.compare(s.size() - suf.size(), suf.size(), suf) != 0) return false;
    s.resize(s.size() - suf.size());
    return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, sep)) out.push_back(cur);
    return out;
}

std::vector<std::string> list_dir(const std::string& dir) {
    std::vector<std::string> out;
    DIR* d = opendir(dir.c_str());
    if (!d) return out;
    while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    closedir(d);
    return out;
}

struct RuntimePrefix {
    const char* prefix;
    const char* runtime;
};
// Longest first where one is a prefix of another.
constexpr RuntimePrefix kPrefixes[] = {
    {"cri-containerd-", "containerd"}, {"containerd-", "containerd"}, {"crio-", "crio"},
    {"cri-o-", "crio"},                {"docker-", "docker"},         {"libpod-", "podman"},
};

std::string container_id_and_runtime(const std::string& dir_name, std::string* runtime) {
    std::string n = dir_name;
    strip_suffix(n, ".scope");
    for (const auto& p : kPrefixes) {
        std::string pre = p.prefix;
        if (n.rfind(pre, 0) != 0) continue;
        std::string id = n.substr(pre.size());
        // conmon (CRI-O, podman) is the runtime's monitor, not the container
        if (id.rfind("conmon-", 0) == 0) return "";
        if (!is_hex(id) || id.size() < 12 || id.size() > 64) return "";  // (64: a full ID)
        if (runtime) *runtime = p.runtime;
        std::transform(id.begin(), id.end(), id.begin(), ::tolower);
        return id;
    }
    // cgroupfs driver and plain docker: the directory is the bare 64-hex ID
    if (n.size() == 64 && is_hex(n)) {
        std::transform(n.begin(), n.end(), n.begin(), ::tolower);
        return n;
    }
    return "";
}

}  // namespace

bool looks_like_pod_uid(const std::string& s) {
    static const int lens[] = {8, 4, 4, 4, 12};
    auto parts = split(s, '-');
    if (parts.size() != 5) return false;
    for (int i = 0; i < 5; i++)
        if (static_cast<int>(parts[i].size()) != lens[i] || !is_hex(parts[i])) return false;
    return true;
}

bool looks_like_container_id(const std::string& s) { return s.size() >= 6 && s.size() <= 64 && is_hex(s); }

bool looks_like_pod_name(const std::string& s) {
    auto slash = s.find('/');
    if (slash == std::string::npos || s.find('/', slash + 1) != std::string::npos) return false;
    auto dns = [](const std::string& x) {
        if (x.empty() || x.size() > 253) return false;
        for (unsigned char c : x)
            if (!(std::islower(c) || std::isdigit(c) || c == '-' || c == '.')) return false;
        return std::isalnum(static_cast<unsigned char>(x.front())) && std::isalnum(static_cast<unsigned char>(x.back()));
    };
    return dns(s.substr(0, slash)) && dns(s.substr(slash + 1));
}

std::string container_id_of_dir(const std::string& name) { return container_id_and_runtime(name, nullptr); }

std::string pod_uid_of_dir(const std::string& name) {
    std::string n = name;
    strip_suffix(n, ".slice");
    for (size_t at = n.rfind("pod"); at != std::string::npos; at = at ? n.rfind("pod", at - 1) : std::string::npos) {
        // the systemd driver writes the UID with '_' for '-' (a '-' means nesting to systemd)
        if (at > 0 && n[at - 1] != '-') continue;
        std::string uid = n.substr(at + 3);
        std::replace(uid.begin(), uid.end(), '_', '-');
        std::transform(uid.begin(), uid.end(), uid.begin(), ::tolower);
        if (looks_like_pod_uid(uid)) return uid;
        if (at == 0) break;
    }
    return "";
}

CgroupIdentity parse_cgroup_path(const std::string& path) {
    CgroupIdentity id;
    for (const auto& comp : split(path, '/')) {
        if (comp.empty() || comp == "..") continue;
        if (std::string uid = pod_uid_of_dir(comp); !uid.empty()) id.pod_uid = uid;
        std::string rt;
        if (std::string c = container_id_and_runtime(comp, &rt); !c.empty()) {
            id.container_id = c;
            id.runtime = rt;
        }
    }
    return id;
}

Node::Node(std::string node_root) : root_(std::move(node_root)) {
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
    if (root_ == "/") root_.clear();
}

void Node::refresh(bool force) {
    uint64_t now = mono_ns();
    if (loaded_ && !force) return;
    if (loaded_ && now - last_refresh_ns_ < 1000000000ULL) return;
    loaded_ = true;
    last_refresh_ns_ = now;
    pods_.clear();
    container_names_.clear();
    // /var/log/pods/<namespace>_<name>_<uid>: neither a namespace nor a pod name has a '_'
    for (const auto& e : list_dir(root_ + "/var/log/pods")) {
        auto parts = split(e, '_');
        if (parts.size() != 3 || !looks_like_pod_uid(parts[2])) continue;
        pods_[parts[2]] = {parts[2], parts[0], parts[1]};
    }
    // /var/log/containers/<pod>_<namespace>_<container>-<id>.log
    for (auto e : list_dir(root_ + "/var/log/containers")) {
        if (!strip_suffix(e, ".log")) continue;
        auto dash = e.rfind('-');
        if (dash == std::string::npos) continue;
        std::string id = e.substr(dash + 1);
        auto parts = split(e.substr(0, dash), '_');
        if (parts.size() != 3 || !is_hex(id)) continue;
        container_names_[id] = parts[2];
    }
}

std::optional<PodInfo> Node::pod_by_uid(const std::string& uid) {
    refresh(false);
    auto it = pods_.find(uid);
    if (it == pods_.end()) {
        refresh(true);
        it = pods_.find(uid);
    }
    if (it == pods_.end()) return std::nullopt;
    return it->second;
}

std::vector<PodInfo> Node::pods_by_name(const std::string& ns, const std::string& name) {
    refresh(true);
    std::vector<PodInfo> out;
    for (const auto& [uid, p] : pods_)
        if (p.namespace_ == ns && p.name == name) out.push_back(p);
    return out;
}

bool Node::kubelet_has_pod(const std::string& uid) const {
    struct stat st{};
    return stat((root_ + "/var/lib/kubelet/pods/" + uid).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Node::container_name(const std::string& container_id) {
    refresh(false);
    auto it = container_names_.find(container_id);
    if (it == container_names_.end()) {
        refresh(true);
        it = container_names_.find(container_id);
    }
    return it == container_names_.end() ? "" : it->second;
}

std::map<std::string, std::string> Node::labels_for(pid_t pid) {
    std::map<std::string, std::string> labels;
    auto v2 = cgroups::v2_path_of(pid);
    CgroupIdentity best;
    for (const auto& path : cgroups::all_paths_of(pid)) {
        CgroupIdentity id = parse_cgroup_path(path);
        if (best.pod_uid.empty() && best.container_id.empty()) best = id;
        else if (best.pod_uid.empty() && !id.pod_uid.empty()) best.pod_uid = id.pod_uid;
        if (best.container_id.empty() && !id.container_id.empty()) {
            best.container_id = id.container_id;
            best.runtime = id.runtime;
        }
    }
    if (v2 && *v2 != "/") labels["cgroup"] = *v2;
    if (!best.container_id.empty()) {
        labels["container_id"] = best.container_id;
        // kubelet's name first (in a pod, the engine's own is a generated one: k8s_...)
        std::string n = container_name(best.container_id);
        if (n.empty()) n = engines::container_name(root_, best.container_id);
        if (!n.empty()) labels["container"] = n;
    }
    if (!best.pod_uid.empty()) {
        labels["pod_uid"] = best.pod_uid;
        if (auto p = pod_by_uid(best.pod_uid)) {
            labels["pod"] = p->name;
            labels["namespace"] = p->namespace_;
        }
    }
    return labels;
}

}  // namespace pbp::kube
