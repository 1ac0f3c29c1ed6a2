// The clocks: CLOCK_MONOTONIC is the one BPF stamps samples with (bpf_ktime_get_ns);
// CLOCK_REALTIME places a run in absolute time.
#pragma once
#include <time.h>

#include <cstdint>

namespace pbp {

inline uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

inline int64_t real_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

}  // namespace pbp
