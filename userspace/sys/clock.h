// The clocks: CLOCK_MONOTONIC is the one BPF stamps samples with (bpf_ktime_get_ns);
// CLOCK_REALTIME places a run in absolute time; CLOCK_BOOTTIME in ticks dates processes.
#pragma once
#include <time.h>
#include <unistd.h>

#include <cstdint>

namespace pbp {

inline uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// CLOCK_BOOTTIME in clock ticks: the unit of /proc/PID/stat's starttime (a process started
// after this reading has a larger one).
inline uint64_t boot_clock_ticks() {
    timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    const uint64_t ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
    return ns / (1000000000ULL / static_cast<uint64_t>(sysconf(_SC_CLK_TCK)));
}

// CPU time of the calling thread (a system call, not the vDSO: for debug timing only).
inline uint64_t thread_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

inline int64_t real_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

}  // namespace pbp
