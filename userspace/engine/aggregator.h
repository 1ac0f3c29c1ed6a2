// aggregate: one session's samples. Each sample record becomes a Sample (a stack of the
// engine's StackStore, with its weight and kind) under its process and thread, in time
// order; unresolved and truncated samples are counted. A session sampling at a lower rate
// than the engine keeps only its share of the on-CPU samples (engine/decimate.h). Metadata is
// not kept here: snapshots take it from the ProcessRegistry, and frames from the StackStore.
#pragma once
#include <sys/types.h>

#include <unordered_map>
#include <vector>

#include "engine/profile.h"
#include "engine/stack_store.h"
#include "pybpfprof/abi.h"

namespace pbp {

class Aggregator {
public:
    // interval_ns: the session's sampling period; on-CPU samples of a shorter period are
    // decimated to it (0: every sample kept as it is).
    explicit Aggregator(const StackStore& store, uint64_t interval_ns = 0) : store_(store), interval_ns_(interval_ns) {}

    // A target: listed in the profile even if it is never sampled.
    void add_process(pid_t pid);
    // One sample record, landing on 'stack' (StackStore::stack_for). An on-CPU sample that the
    // session's interval does not keep is dropped; one it keeps weighs the interval.
    void on_sample(const pbp_event& e, uint32_t stack);
    // Stacks re-resolved by the store: the samples already charged move with them.
    void apply(const std::vector<StackMove>& moves);

    // Processes -> threads -> samples, and run.unresolved / run.truncated. No frames, stacks
    // or metadata: indices are the StackStore's.
    const Profile& samples() const { return profile_; }
    uint64_t sample_count() const { return count_; }
    // Bytes held by the samples (vector capacities), for memory limits.
    size_t memory_bytes() const;
    // The samples, moved out (the session's end).
    Profile take() { return std::move(profile_); }

private:
    const StackStore& store_;
    uint64_t interval_ns_ = 0;
    Profile profile_;
    uint64_t count_ = 0;
    // Samples on a stack whose problem may clear later (StackStore::transient), with their
    // BPF stack id: a move re-points exactly these. Few: most stacks resolve at once.
    struct Transient {
        uint32_t tid;
        size_t index;  // in the thread's samples
        uint64_t stack_id;
    };
    std::unordered_map<uint32_t, std::vector<Transient>> transient_;  // by pid
};

}  // namespace pbp
