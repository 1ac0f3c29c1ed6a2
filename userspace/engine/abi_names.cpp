#include "engine/abi_names.h"

#include "pybpfprof/abi.h"

namespace pbp {

namespace {

#define PBP_X_REASON_LABEL(name, value, label) label,
constexpr const char* kReasonLabels[] = {PBP_REASONS(PBP_X_REASON_LABEL)};
#undef PBP_X_REASON_LABEL
// The list must be dense from 0, as the labels are indexed by value.
#define PBP_X_REASON_CHECK(name, value, label) static_assert(PBP_##name < PBP_REASON_COUNT);
PBP_REASONS(PBP_X_REASON_CHECK)
#undef PBP_X_REASON_CHECK
static_assert(std::size(kReasonLabels) == PBP_REASON_COUNT);

#define PBP_X_STAT_LABEL(name, label) label,
constexpr const char* kCounterLabels[] = {PBP_STAT_COUNTERS(PBP_X_STAT_LABEL)};
constexpr const char* kTimingLabels[] = {PBP_STAT_TIMINGS(PBP_X_STAT_LABEL)};
#undef PBP_X_STAT_LABEL
static_assert(std::size(kCounterLabels) == PBP_STAT_REASON_BASE);
static_assert(std::size(kTimingLabels) == PBP_STAT_COUNT - PBP_STAT_T_BASE);

}  // namespace

const char* reason_label(uint32_t reason) {
    if (reason == PBP_OK || reason >= PBP_REASON_COUNT) return "unknown";
    return kReasonLabels[reason];
}

std::string stat_label(uint32_t i) {
    if (i < PBP_STAT_REASON_BASE) return kCounterLabels[i];
    if (i < PBP_STAT_T_BASE) return std::string("reason:") + reason_label(i - PBP_STAT_REASON_BASE);
    if (i < PBP_STAT_COUNT) return kTimingLabels[i - PBP_STAT_T_BASE];
    return "unknown";
}

}  // namespace pbp
