// Names of the ABI's enums for people, generated from the lists in pybpfprof/abi.h so the
// two cannot drift: reasons (shown in outputs and the summary) and BPF statistics (debug output).
#pragma once
#include <cstdint>
#include <string>

namespace pbp {

// Why a sample has no (or a partial) stack; "unknown" for PBP_OK and out-of-range values.
const char* reason_label(uint32_t reason);
// A statistic's name: a counter's, "reason:<label>" for a reason counter, or a timing's.
std::string stat_label(uint32_t index);

}  // namespace pbp
