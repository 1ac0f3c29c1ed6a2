#include "sys/procfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace pbp::procfs {

std::string read_text(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return {};
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

namespace {
std::string slurp(const std::string& path) { return read_text(path); }
std::string trim_nl(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
    return s;
}
std::optional<Status> parse_status(const std::string& path) {
    std::ifstream f(path);
    if (!f) return std::nullopt;
    Status st;
    std::string line;
    while (std::getline(f, line)) {
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, colon);
        std::string val = line.substr(colon + 1);
        size_t p = val.find_first_not_of(" \t");
        val = p == std::string::npos ? "" : val.substr(p);
        if (key == "Name") st.name = val;
        else if (key == "State") st.state = val.empty() ? '?' : val[0];
        else if (key == "Tgid") st.tgid = std::atoi(val.c_str());
        else if (key == "PPid") st.ppid = std::atoi(val.c_str());
        else if (key == "Threads") st.threads = std::atoi(val.c_str());
        else if (key == "Uid") st.uid = std::atoi(val.c_str());
        else if (key == "voluntary_ctxt_switches" || key == "nonvoluntary_ctxt_switches")
            st.switches += std::strtoull(val.c_str(), nullptr, 10);
        else if (key == "NSpid") {
            std::istringstream is(val);
            pid_t x;
            while (is >> x) st.nspid.push_back(x);
        }
    }
    if (!st.tgid) return std::nullopt;
    return st;
}
}  // namespace

std::optional<std::vector<Mapping>> read_maps(pid_t pid) {
    FILE* f = fopen(("/proc/" + std::to_string(pid) + "/maps").c_str(), "re");
    if (!f) return std::nullopt;
    std::vector<Mapping> v;
    char* line = nullptr;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        Mapping m;
        char perms[8] = {0}, dev[16] = {0};
        unsigned long long start, end, off, inode;
        int pos = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %15s %llu %n", &start, &end, perms, &off, dev, &inode,
                   &pos) < 6)
            continue;
        m.start = start;
        m.end = end;
        m.perms = perms;
        m.offset = off;
        m.dev = dev;
        m.inode = inode;
        if (pos > 0) m.path = trim_nl(line + pos);
        v.push_back(std::move(m));
    }
    free(line);
    fclose(f);
    if (v.empty()) return std::nullopt;  // kernel thread or gone
    return v;
}

std::optional<Status> read_status(pid_t pid) {
    return parse_status("/proc/" + std::to_string(pid) + "/status");
}
std::optional<Status> read_task_status(pid_t pid, pid_t tid) {
    return parse_status("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status");
}

std::string comm(pid_t pid) { return trim_nl(slurp("/proc/" + std::to_string(pid) + "/comm")); }
std::string thread_comm(pid_t pid, pid_t tid) {
    return trim_nl(slurp("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm"));
}

std::string cmdline(pid_t pid) {
    std::string s = slurp("/proc/" + std::to_string(pid) + "/cmdline");
    while (!s.empty() && s.back() == '\0') s.pop_back();
    for (char& c : s)
        if (c == '\0') c = ' ';
    return s;
}

std::string exe(pid_t pid) {
    char buf[4096];
    ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), buf, sizeof buf - 1);
    if (n <= 0) return {};
    return std::string(buf, n);
}

bool exists(pid_t pid) { return access(("/proc/" + std::to_string(pid)).c_str(), F_OK) == 0; }

long pid_max() {
    const std::string text = slurp("/proc/sys/kernel/pid_max");
    return text.empty() ? 0 : std::strtol(text.c_str(), nullptr, 10);
}

bool alive(pid_t pid) {
    auto st = read_status(pid);
    return st && st->state != 'Z' && st->state != 'X' && st->state != 'x';
}

std::vector<pid_t> all_pids() { return tids_in("/proc"); }

std::vector<pid_t> tids(pid_t pid) { return tids_in("/proc/" + std::to_string(pid) + "/task"); }

std::vector<pid_t> tids_in(const std::string& dir) {
    std::vector<pid_t> v;
    DIR* d = opendir(dir.c_str());
    if (!d) return v;
    while (dirent* e = readdir(d)) {
        char* endp;
        long p = strtol(e->d_name, &endp, 10);
        if (*endp == '\0' && p > 0) v.push_back(static_cast<pid_t>(p));
    }
    closedir(d);
    return v;
}

std::string openable_path(pid_t pid, const Mapping& m) {
    char range[64];
    snprintf(range, sizeof range, "%llx-%llx", (unsigned long long)m.start, (unsigned long long)m.end);
    std::string mf = "/proc/" + std::to_string(pid) + "/map_files/" + range;
    if (access(mf.c_str(), R_OK) == 0) return mf;
    std::string path = m.path;
    const std::string deleted = " (deleted)";
    if (path.size() > deleted.size() && path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
        path.resize(path.size() - deleted.size());
    return "/proc/" + std::to_string(pid) + "/root" + path;
}

std::optional<SyscallLine> parse_syscall(const std::string& text) {
    std::istringstream is(text);
    std::vector<std::string> f;
    for (std::string w; is >> w;) f.push_back(w);
    if (f.size() != 9) return std::nullopt;
    SyscallLine l;
    size_t used = 0;
    try {
        l.nr = std::stol(f[0], &used, 10);
        if (used != f[0].size() || l.nr < 0) return std::nullopt;
        for (size_t i = 1; i < 9; i++) {
            const uint64_t v = std::stoull(f[i], &used, 16);
            if (used != f[i].size()) return std::nullopt;
            if (i <= 6) l.args[i - 1] = v;
            else if (i == 7) l.sp = v;
            else l.pc = v;
        }
    } catch (const std::exception&) {
        return std::nullopt;
    }
    return l;
}

std::optional<SyscallLine> read_syscall(pid_t pid, pid_t tid) {
    return parse_syscall(read_text("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/syscall"));
}

std::optional<uint64_t> parse_schedstat(const std::string& text) {
    // "RUN_NS WAIT_NS TIMESLICES\n": the first field, ended by a space
    uint64_t v = 0;
    const char* end = text.data() + text.size();
    auto [at, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || at == end || *at != ' ') return std::nullopt;
    return v;
}

std::optional<uint64_t> read_task_cpu_ns(pid_t pid, pid_t tid) {
    return parse_schedstat(read_text("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/schedstat"));
}

}  // namespace pbp::procfs
