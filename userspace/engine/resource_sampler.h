// CPU % and RSS of the profiled processes over time, read from /proc about once a second
// (the counterpart of Dask's ResourceProfiler / MemorySampler). The session calls
// maybe_sample() from its loop; a tick reads one small file per process
// (/proc/PID/stat: utime + stime and rss) and is cut short after a time budget, so it never
// holds up the ring-buffer drain for long: processes not reached are read first next tick.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/profile.h"

namespace pbp {

struct ProcStat {
    uint64_t cpu_ticks = 0;   // utime + stime, in clock ticks (all threads)
    uint64_t rss_pages = 0;
    uint64_t start_ticks = 0; // starttime: tells a reused PID apart
};

// Parses the text of /proc/PID/stat (the comm field may hold spaces and parentheses).
std::optional<ProcStat> parse_proc_stat(const std::string& text);

class ResourceSampler {
public:
    explicit ResourceSampler(uint64_t interval_ns = 1000000000ULL, uint64_t budget_ns = 20000000ULL);

    // Reads the processes in pids if interval_ns passed since the last tick (and, between
    // ticks, new PIDs once, as a baseline); appends one ResourcePoint per process read to
    // profile.processes[pid].resources (processes not in the profile are skipped). Returns
    // the number of processes read.
    size_t maybe_sample(Profile& profile, const std::set<pid_t>& pids, uint64_t now_ns);
    // Reads them now, whatever the interval (the end of the run).
    size_t sample(Profile& profile, const std::set<pid_t>& pids, uint64_t now_ns);
    // The end of a run: a last reading of those whose last one is min_age_ns old or more (a
    // reading over a few ms would chart a CPU % of whole 10 ms ticks), so a short run still
    // knows the CPU time its processes used.
    size_t final_sample(Profile& profile, const std::set<pid_t>& pids, uint64_t now_ns,
                        uint64_t min_age_ns = 200'000'000ULL);
    void forget(pid_t pid) {
        prev_.erase(pid);
        tried_.erase(pid);
    }

private:
    bool read_one(Profile& profile, pid_t pid, uint64_t now_ns);
    struct Prev {
        uint64_t cpu_ticks, start_ticks, mono_ns;
    };
    uint64_t interval_ns_, budget_ns_;
    uint64_t last_ns_ = 0;
    bool started_ = false;
    pid_t resume_after_ = 0;  // a tick cut short goes on after this PID next time
    long clk_tck_, page_size_;
    std::unordered_map<pid_t, Prev> prev_;
    std::set<pid_t> tried_;  // PIDs read at least once (or tried)
};

}  // namespace pbp
