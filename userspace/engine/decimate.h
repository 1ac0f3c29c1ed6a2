// decimate: a session's share of the engine's on-CPU samples. The engine samples every CPU at
// the highest rate its sessions want (period P); a session at a lower rate r (interval
// I = 1e9 / r ns) keeps what a timer at rate r on that CPU would have sampled.
//
// Every CPU sample carries its CPU's sampled clock (pbp_event.cpu_clock_ns): the sum of the
// periods of every perf event on that CPU, whatever it ran. A sample of period P stands for
// the span (clock - P, clock] of that clock, and the spans of a CPU's samples tile it, across
// rate changes too. The session keeps a sample iff its span holds a multiple of I:
//   floor(clock / I) != floor((clock - P) / I)
// That is the sample a timer firing every I of that CPU's clock would have landed in, so a
// process gets r samples per second of CPU time whatever else the CPU runs and however its
// runs are spread (no bias for bursty targets, no aliasing between processes), and sessions
// at the same rate keep the same samples. A kept sample weighs I (what the session's timer
// stands for); when I <= P (the session is the fastest) every sample is kept with weight P.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace pbp {

// The period in ns of a sampling rate (what the perf events are opened with).
inline uint64_t period_of_rate(double hz) { return static_cast<uint64_t>(std::llround(1e9 / hz)); }

// Does a session of interval_ns keep the sample of period_ns ending at clock_ns?
constexpr bool keeps_sample(uint64_t clock_ns, uint64_t period_ns, uint64_t interval_ns) {
    if (interval_ns <= period_ns) return true;  // a multiple in every span
    if (clock_ns < period_ns) return true;      // the span holds 0
    return clock_ns / interval_ns != (clock_ns - period_ns) / interval_ns;
}

// The weight of a kept sample: the session's interval, or the sample's own when it is longer.
constexpr uint64_t kept_weight(uint64_t weight_ns, uint64_t interval_ns) { return std::max(weight_ns, interval_ns); }

}  // namespace pbp
