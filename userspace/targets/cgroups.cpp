#include "targets/cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "sys/procfs.h"

namespace pbp::cgroups {

namespace {

std::string unescape(const std::string& s) {
    std::string r;
    for (size_t i = 0; i < s.size(); i++) {
        // The kernel escapes space, tab, newline and backslash as \ooo (three octal digits);
        // anything else after a backslash is kept as it is.
        auto octal = [&](size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '7'; };
        if (s[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
            r += static_cast<char>(((s[i + 1] - '0') << 6) | ((s[i + 2] - '0') << 3) | (s[i + 3] - '0'));
            i += 3;
        } else {
            r += s[i];
        }
    }
    return r;
}

std::string normalize(std::string p) {
    if (p.empty() || p[0] != '/') p = "/" + p;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return p;
}

}  // namespace

std::vector<Mount> parse_cgroup2_mounts(const std::string& mountinfo) {
    std::vector<Mount> out;
    std::istringstream in(mountinfo);
    std::string line;
    while (std::getline(in, line)) {
        // id parent maj:min root mountpoint options [optional fields...] - fstype source super
        auto dash = line.find(" - ");
        if (dash == std::string::npos) continue;
        std::istringstream after(line.substr(dash + 3));
        std::string fstype;
        after >> fstype;
        if (fstype != "cgroup2") continue;
        std::istringstream before(line.substr(0, dash));
        std::string id, parent, dev, root, mountpoint;
        if (!(before >> id >> parent >> dev >> root >> mountpoint)) continue;
        if (mountpoint[0] != '/' || root[0] != '/') continue;  // the kernel writes absolute paths
        out.push_back({unescape(mountpoint), unescape(root)});
    }
    return out;
}

std::optional<std::string> hierarchy_mount(std::string& error) {
    auto mounts = parse_cgroup2_mounts(procfs::read_text("/proc/self/mountinfo"));
    for (const auto& m : mounts)
        if (m.root == "/") return m.path;
    if (mounts.empty())
        error = "no cgroup2 file system is mounted (see /proc/self/mountinfo); mount it with: "
                "mount -t cgroup2 none /sys/fs/cgroup/unified";
    else
        error = "the cgroup2 mount at " + mounts[0].path + " shows only part of the hierarchy (root " + mounts[0].root +
                "); pybpfprof joins the host's cgroup namespace by itself when it has CAP_SYS_ADMIN and sees the "
                "host's processes (hostPID); otherwise mount the host's cgroup2 file system into its container";
    return std::nullopt;
}

bool enter_init_cgroup_namespace() {
    // The initial cgroup namespace has a fixed inode (PROC_CGROUP_INIT_INO). Its handle is
    // taken from PID 1 when we may read it (a DaemonSet with hostPID: the host's init), else
    // from any process still in it.
    constexpr ino_t kInitCgroupNsIno = 0xEFFFFFFBU;
    struct stat mine{};
    if (stat("/proc/self/ns/cgroup", &mine) != 0) return false;
    if (mine.st_ino == kInitCgroupNsIno) return true;
    auto try_pid = [&](const std::string& pid) {
        std::string path = "/proc/" + pid + "/ns/cgroup";
        struct stat st{};
        if (stat(path.c_str(), &st) != 0 || st.st_ino != kInitCgroupNsIno) return false;
        int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return false;
        bool ok = setns(fd, CLONE_NEWCGROUP) == 0;
        close(fd);
        return ok;
    };
    if (try_pid("1")) return true;
    DIR* d = opendir("/proc");
    if (!d) return false;
    bool ok = false;
    while (dirent* e = readdir(d)) {
        if (!isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
        if ((ok = try_pid(e->d_name))) break;
    }
    closedir(d);
    return ok;
}

std::optional<std::string> v2_path_of(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/cgroup");
    if (!f) return std::nullopt;
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("0::", 0) == 0) return normalize(line.substr(3));
    return std::nullopt;
}

std::vector<std::string> all_paths_of(pid_t pid) {
    std::vector<std::string> out;
    std::ifstream f("/proc/" + std::to_string(pid) + "/cgroup");
    std::string line;
    while (std::getline(f, line)) {
        auto c1 = line.find(':');
        auto c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
        if (c2 == std::string::npos) continue;
        out.push_back(normalize(line.substr(c2 + 1)));
    }
    return out;
}

uint64_t id_of(const std::string& dir) {
    struct stat st{};
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    return st.st_ino;
}

void walk(const std::string& mount, const std::string& dir, int max_depth,
          const std::function<bool(const std::string&, const std::string&)>& fn) {
    // Iterative, so a deep hierarchy cannot exhaust the stack; stops as soon as fn says so.
    struct Item {
        std::string abs;
        int depth;
    };
    std::vector<Item> todo{{dir, 0}};
    while (!todo.empty()) {
        Item it = std::move(todo.back());
        todo.pop_back();
        std::string rel = it.abs.size() > mount.size() ? it.abs.substr(mount.size()) : "/";
        if (!fn(it.abs, normalize(rel))) return;
        if (it.depth >= max_depth) continue;
        DIR* d = opendir(it.abs.c_str());
        if (!d) continue;
        std::vector<std::string> children;
        while (dirent* e = readdir(d)) {
            if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
            children.push_back(it.abs + "/" + e->d_name);
        }
        closedir(d);
        for (auto c = children.rbegin(); c != children.rend(); ++c) todo.push_back({*c, it.depth + 1});
    }
}

std::vector<pid_t> procs_under(const std::string& dir) {
    std::vector<pid_t> out;
    walk(dir, dir, 64, [&](const std::string& abs, const std::string&) {
        std::ifstream f(abs + "/cgroup.procs");
        pid_t p;
        while (f >> p) out.push_back(p);
        return true;
    });
    return out;
}

bool is_under(const std::string& path, const std::string& ancestor) {
    std::string a = normalize(ancestor), p = normalize(path);
    if (a == "/") return true;
    return p == a || (p.size() > a.size() && p.compare(0, a.size(), a) == 0 && p[a.size()] == '/');
}

}  // namespace pbp::cgroups
