// The end-of-run text for the terminal: the one-line "Wrote ..." summary and the top
// functions by self time, which users read before opening any file.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "engine/profile.h"

namespace pbp {

std::string summary_line(const Profile& p, const std::string& path);
std::string top_functions(const Profile& p, size_t n = 10);
// "Threads by time (N threads):" then one "  PCT%  SECONDS s  NAME (tid T[, pid P])" line per
// thread, the busiest n first, by their names (the Python name where known); "" when fewer
// than two threads have samples.
std::string top_threads(const Profile& p, size_t n = 10);

// What a run's mode saw: the time on and off CPU (summed weights by kind) and, per GIL state,
// the time of the samples in it. Computed where the profile is; it crosses the agent's socket
// in RunOutcome.
struct ModeTotals {
    ProfileMode mode = ProfileMode::Cpu;
    uint64_t on_cpu_ns = 0, off_cpu_ns = 0;
    uint64_t min_block_ns = 0;   // wall: the run's --min-block
    uint64_t aggregate_ns = 0;   // wall: off-CPU time in aggregate samples (intervals under min_block)
    std::map<GilState, uint64_t> gil_ns;  // every sample's weight by its GIL state (absent: none)
    // gil: the on-CPU samples left out for not holding the GIL (their weights by state, and
    // how many); the processes whose GIL state is not known (pid, why), of which gil mode
    // keeps nothing.
    std::map<GilState, uint64_t> left_out_ns;
    uint64_t left_out_samples = 0;
    std::map<uint32_t, std::string> gil_unknown;
    bool operator==(const ModeTotals&) const = default;
};
ModeTotals mode_totals(const Profile& p);
// "  mode wall: 2.013 s on CPU, 7.987 s off CPU (...)\n", and a "  GIL: ..." line when any
// sample's GIL state is known (in gil mode, of the samples kept and left out). In gil mode, a
// "  warning: ..." line when some process's GIL state is not known. Seconds with three
// decimals, so that a program can read them.
std::string mode_lines(const ModeTotals& t);

}  // namespace pbp
