#include "engine/resource_sampler.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "sys/clock.h"

namespace pbp {

namespace {

// /proc/PID/stat is one short line: a single read() gets it whole.
bool read_small(const std::string& path, std::string& out) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n <= 0) return false;
    out.assign(buf, static_cast<size_t>(n));
    return true;
}

}  // namespace

std::optional<ProcStat> parse_proc_stat(const std::string& text) {
    // "pid (comm) state ppid ..." : comm may contain ')' so split at the last one.
    size_t close_paren = text.rfind(')');
    if (close_paren == std::string::npos || close_paren + 2 > text.size()) return std::nullopt;
    const char* p = text.c_str() + close_paren + 2;  // field 3 (state)
    // Fields after comm, counted from 3: utime 14, stime 15, starttime 22, rss 24.
    uint64_t v[25] = {0};
    int field = 3;
    while (*p && field <= 24) {
        while (*p == ' ') p++;
        if (!*p) break;
        if (field == 3) {
            while (*p && *p != ' ') p++;  // state is a letter
        } else {
            char* end;
            long long x = std::strtoll(p, &end, 10);
            if (end == p) return std::nullopt;
            v[field] = x < 0 ? 0 : static_cast<uint64_t>(x);
            p = end;
        }
        field++;
    }
    if (field <= 24) return std::nullopt;
    ProcStat st;
    st.cpu_ticks = v[14] + v[15];
    st.start_ticks = v[22];
    st.rss_pages = v[24];
    return st;
}

ResourceSampler::ResourceSampler(uint64_t interval_ns, uint64_t budget_ns)
    : interval_ns_(interval_ns), budget_ns_(budget_ns) {
    clk_tck_ = sysconf(_SC_CLK_TCK);
    if (clk_tck_ <= 0) clk_tck_ = 100;
    page_size_ = sysconf(_SC_PAGESIZE);
    if (page_size_ <= 0) page_size_ = 4096;
}

bool ResourceSampler::read_one(Profile& profile, pid_t pid, uint64_t now_ns) {
    auto pp = profile.processes.find(static_cast<uint32_t>(pid));
    std::string text;
    if (pp == profile.processes.end() || !read_small("/proc/" + std::to_string(pid) + "/stat", text)) return false;
    auto st = parse_proc_stat(text);
    if (!st) return false;
    const uint64_t t = mono_ns();
    ResourcePoint rp;
    rp.mono_ns = now_ns;
    rp.rss_bytes = st->rss_pages * static_cast<uint64_t>(page_size_);
    auto pv = prev_.find(pid);
    if (pv != prev_.end() && pv->second.start_ticks == st->start_ticks && t > pv->second.mono_ns &&
        st->cpu_ticks >= pv->second.cpu_ticks) {
        double cpu_s = static_cast<double>(st->cpu_ticks - pv->second.cpu_ticks) / clk_tck_;
        rp.cpu_pct = 100.0 * cpu_s / ((t - pv->second.mono_ns) / 1e9);
    }
    prev_[pid] = {st->cpu_ticks, st->start_ticks, t};
    pp->second.resources.push_back(rp);
    return true;
}

size_t ResourceSampler::maybe_sample(Profile& profile, const std::set<pid_t>& pids, uint64_t now_ns) {
    if (!started_ || now_ns - last_ns_ >= interval_ns_) return sample(profile, pids, now_ns);
    // Between ticks: a first reading of new targets, so short runs get a baseline early.
    size_t n = 0;
    for (pid_t pid : pids)
        if (!prev_.count(pid) && tried_.insert(pid).second) n += read_one(profile, pid, now_ns);
    return n;
}

size_t ResourceSampler::final_sample(Profile& profile, const std::set<pid_t>& pids, uint64_t now_ns,
                                     uint64_t min_age_ns) {
    size_t n = 0;
    const uint64_t t = mono_ns();
    for (pid_t pid : pids) {
        auto pv = prev_.find(pid);
        if (pv == prev_.end() || t - pv->second.mono_ns >= min_age_ns) n += read_one(profile, pid, now_ns);
    }
    return n;
}

size_t ResourceSampler::sample(Profile& profile, const std::set<pid_t>& pids, uint64_t now_ns) {
    started_ = true;
    last_ns_ = now_ns;
    if (pids.empty()) return 0;
    const uint64_t t_begin = mono_ns();
    size_t n = 0;
    // Start after the PID where the last tick stopped, wrapping around once.
    auto start = pids.upper_bound(resume_after_);
    if (start == pids.end()) start = pids.begin();
    auto it = start;
    resume_after_ = 0;
    do {
        tried_.insert(*it);
        n += read_one(profile, *it, now_ns);
        if (++it == pids.end()) it = pids.begin();
        if (it != start && mono_ns() - t_begin > budget_ns_) {
            // Out of time: the rest go first next tick.
            resume_after_ = it == pids.begin() ? 0 : *std::prev(it);
            break;
        }
    } while (it != start);
    // Forget PIDs no longer asked for.
    for (auto p = prev_.begin(); p != prev_.end();)
        p = pids.count(p->first) ? std::next(p) : prev_.erase(p);
    return n;
}

}  // namespace pbp
