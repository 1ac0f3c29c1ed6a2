// The threads asleep at a wall session's start (--mode wall), with their context switch counts:
// a thread still asleep with the same count when its process is registered later slept all
// along, and its off-CPU interval is seeded from the session's start, not from its
// registration (Engine::seed_offcpu). A PID may be reused meanwhile by another process: an
// entry is only ever taken for the process that held the PID when the snapshot was taken.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace pbp {

class AsleepSnapshot {
public:
    // Reads the threads of pids asleep now (S or D in /proc/PID/task/TID/status) and stamps the
    // snapshot with the time after the reads. Returns the number of threads read.
    size_t take(const std::vector<pid_t>& pids);
    // One thread asleep at the snapshot (take() adds them; so do tests), and its time: ns on
    // CLOCK_MONOTONIC and the same moment in /proc/PID/stat's starttime units (clock ticks).
    void add(pid_t pid, uint32_t tid, char state, uint64_t switches);
    void stamp(uint64_t mono_ns, uint64_t boot_ticks);

    // When thread tid of pid, asleep now in state with this many context switches, has slept
    // since the snapshot: its time; else nothing. A different state or count means it ran since;
    // process_start_ticks (asked only when all else matches) after the snapshot means the PID
    // is another process's now (the one the entry was taken of exited, its PID reused).
    std::optional<uint64_t> asleep_since(pid_t pid, uint32_t tid, char state, uint64_t switches,
                                         const std::function<uint64_t()>& process_start_ticks) const;
    // pid exited: its entries go before its PID can be reused.
    void forget(pid_t pid);

    size_t size() const { return threads_.size(); }
    uint64_t mono_ns() const { return mono_ns_; }

private:
    struct Thread {
        pid_t pid;
        char state;
        uint64_t switches;
    };
    std::map<uint32_t, Thread> threads_;  // by tid
    uint64_t mono_ns_ = 0, boot_ticks_ = 0;
};

}  // namespace pbp
