// Merging profiles, taken on one machine or several (a Dask scheduler and its workers,
// each profiled by its machine's pybpfprof), into one Profile that every exporter writes as
// it writes a recorded one.
//
// - Clocks: a Profile's timestamps are CLOCK_MONOTONIC of the machine and boot it was taken
//   on, which mean nothing elsewhere. Each input's (start_unix_ns, start_mono_ns) pair places
//   it in wall-clock time; every timestamp (samples, first/last sample, resource readings,
//   the run's end) is moved onto one clock: that of the input that started first, whose
//   timestamps stay as they were. So run.unix_ns(ts) of the merged profile is the wall-clock
//   time of every sample, whichever machine took it; the merged run spans the earliest start
//   to the latest end. Inputs from several machines line up as well as their wall clocks
//   agree (NTP: milliseconds).
// - Processes: different machines have equal PIDs, so the merged profile's processes are
//   keyed 1, 2, ... (input order, then each input's own order); ProcessProfile::pid keeps the
//   real PID, and a `host` label says which machine (RunInfo::host), unless the process has
//   one already (an input that was merged before).
// - Labels: each input may be given labels (role=scheduler, worker=tcp://10.0.0.2:4000):
//   every process of that input carries them, replacing a label of the same key.
// - Frames and stacks are interned anew into one table; samples keep their weights, so the
//   totals stay right when the inputs' sampling rates differ.
// - The run: counts (lost, truncated, unresolved by reason, BPF time) are summed; the rate
//   and period are the inputs' when they agree, else the highest rate and the shortest
//   period; kernel, version and host list the inputs' distinct values; each input's own run
//   and labels are kept in Profile::merged_from (flattened: an input that is itself a merge
//   contributes its inputs).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "engine/profile.h"

namespace pbp {

struct MergeOptions {
    // Per input, in input order (may be shorter than the inputs): the labels given to every
    // process of that input.
    std::vector<std::map<std::string, std::string>> labels;
    bool host_label = true;  // a `host` label from each input's RunInfo::host
    std::string target;      // the merged run's target; "" = made from the inputs'
};

// The inputs merged; error is empty on success and one line otherwise (no input, an input
// without a wall-clock start when there are several, an index out of range in an input,
// more label sets than inputs), and the returned profile then empty.
Profile merge_profiles(std::vector<Profile> inputs, const MergeOptions& options, std::string& error);

}  // namespace pbp
