// aggregate: one session's samples. Each sample record becomes a Sample (a stack of the
// engine's StackStore, with its weight and kind) under its process and thread, in time
// order; unresolved and truncated samples are counted. A session sampling at a lower rate
// than the engine keeps only its share of the on-CPU samples (engine/decimate.h). Metadata is
// not kept here: snapshots take it from the ProcessRegistry, and frames from the StackStore.
//
// Memory stays flat on long runs (an agent runs for days): the samples of the last `window`
// keep their own timestamps; older ones are folded, per thread, into buckets (Sample with
// span_ns > 0): one per (bucket, stack, kind, GIL state, wait, aggregate), counts and weights
// summed, so every total stays exact and the timeline still covers the whole run at the
// bucket's resolution. An off-CPU interval is split over the buckets it spans. When the
// buckets of a session exceed max_buckets entries, the bucket width doubles and the older
// buckets are merged pairwise (widths are powers of two times the first, aligned on the
// clock's multiples, so a merge is exact), again until they fit; when a doubling no longer
// saves a quarter of the entries (the distinct stacks fill them, not the run's length), the
// limit becomes twice what remained. Memory is bounded by max_buckets, or by what the
// distinct stacks need, never by the run's length. Defaults (docs/html-report.md, "Long runs"): 60 s of full
// timestamps, 1 s buckets, 262144 bucket entries (10 MiB): at 999 Hz on 2 CPUs the window
// holds ~120,000 samples (4.8 MB), and a 1-hour run stays far below 100 MB.
#pragma once
#include <sys/types.h>

#include <algorithm>

#include <unordered_map>
#include <vector>

#include "engine/profile.h"
#include "engine/stack_store.h"
#include "pybpfprof/abi.h"

namespace pbp {

// How long samples keep their own timestamps, and how older ones are bucketed.
struct SampleWindow {
    uint64_t window_ns = 60'000'000'000ULL;  // full timestamps for the newest samples
    uint64_t bucket_ns = 1'000'000'000ULL;   // the first bucket width (doubles under pressure)
    size_t max_buckets = 262144;              // bucket entries of the session before it doubles
};

class Aggregator {
public:
    // interval_ns: the session's sampling period; on-CPU samples of a shorter period are
    // decimated to it (0: every sample kept as it is).
    explicit Aggregator(const StackStore& store, uint64_t interval_ns = 0, SampleWindow window = {})
        : store_(store), interval_ns_(interval_ns), window_(window), bucket_ns_(std::max<uint64_t>(window.bucket_ns, 1)),
          limit_(window.max_buckets) {}

    // A target: listed in the profile even if it is never sampled.
    void add_process(pid_t pid);
    // One sample record, landing on 'stack' (StackStore::stack_for). An on-CPU sample that the
    // session's interval does not keep is dropped; one it keeps weighs the interval.
    void on_sample(const pbp_event& e, uint32_t stack);
    // pid exec'd another program: the samples of the one it ran move under key (the key the
    // ProcessRegistry keeps that program's metadata under), so the next program's samples, and
    // its command line, do not mix with them. A process with no sample stays where it is.
    void retire(uint32_t pid, uint32_t key);
    // child, vforked by parent, exec'd another program (it could run nothing of its own before):
    // its samples (its fork's way to the exec, under its parent's stack) move to parent's thread
    // kForkedChildrenTid, and child is no longer listed. Nothing moves if parent is not
    // listed here (not a target of this session).
    void fold_fork(uint32_t child, uint32_t parent);
    // pid was never news (a forked child that exec'd or exited before it ran Python of its
    // own): not listed, unless it has samples.
    void forget_if_unsampled(uint32_t pid);
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
    // The current bucket width and the number of bucket entries held.
    uint64_t bucket_ns() const { return bucket_ns_; }
    size_t bucket_entries() const { return buckets_; }

private:
    // Folds every thread's samples older than cutoff (a multiple of bucket_ns_) into buckets.
    void compact(uint64_t cutoff);
    void compact_thread(uint32_t pid, ThreadProfile& t, uint64_t cutoff);
    // Doubles the bucket width until the entries fit max_buckets or stop shrinking (above).
    void coarsen();

    const StackStore& store_;
    uint64_t interval_ns_ = 0;
    SampleWindow window_;
    uint64_t bucket_ns_ = 1;
    size_t limit_ = 0;
    size_t buckets_ = 0;              // bucket entries in all threads
    uint64_t cutoff_ = 0;             // samples before this are bucketed (a multiple of bucket_ns_)
    uint64_t newest_ns_ = 0;
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
