// The end-of-run lines about BPF: its cost per sample (from its own statistics and the
// kernel's bpf_stats) and, with Knobs::debug, every statistic and the sections' timing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/profile.h"

namespace pbp {

// stats: indexed by enum pbp_stat (Engine::bpf_stats()).
std::string bpf_cost_lines(const RunInfo& run, const std::vector<uint64_t>& stats, int debug);

}  // namespace pbp
