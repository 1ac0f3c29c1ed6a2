// aggregate: ring-buffer sample records -> the Profile (stacks interned, timestamped
// samples per process and thread, unresolved samples counted by reason).
#pragma once
#include <sys/types.h>

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "targets/discovery.h"
#include "engine/profile.h"
#include "pybpfprof/abi.h"
#include "engine/symbolizer.h"

namespace pbp {

class Aggregator {
public:
    using StackLookup = std::function<bool(uint64_t id, pbp_stack& out)>;
    Aggregator(Profile& profile, Symbolizer& symbolizer, StackLookup lookup);

    // A process became a target (again, after an exec): metadata, fresh stack-id cache.
    void add_process(const PythonTarget& t);
    void mark_exited(pid_t pid);
    void on_sample(const pbp_event& e);
    // Re-reads the names of threads still alive (names are often set after a thread
    // starts, e.g. with prctl). active_only: just threads sampled since the last call.
    void refresh_thread_names(bool active_only = false);

private:
    ThreadProfile& thread(ProcessProfile& p, uint32_t tid);
    uint32_t synthetic_stack(const std::string& name);
    // The stack a sample lands on: the symbolized frames of its id, plus a root-most
    // [truncated] / [partial stack] marker from this sample's own flags (the id is a hash
    // of the frames only, so two samples with one id may differ in their flags).
    uint32_t sample_stack(const pbp_event& e);

    struct BaseStack {
        uint32_t retries = 0;          // re-reads after a failed symbolization, see retry()
        std::vector<uint32_t> frames;  // root first, interned
        std::string problem;           // "" or why some frame is unresolved
        // StackTable index per marker variant: 0 = none, 1 = [truncated], 2 + reason =
        // [partial stack: reason]; made once, so a repeated sample costs one lookup.
        std::unordered_map<uint32_t, uint32_t> variants;
    };

    // Reads and symbolizes a BPF stack into b; false when the id is no longer in the map.
    bool resolve(pid_t pid, uint64_t stack_id, BaseStack& b);
    // The StackTable index of b with a marker variant, made once.
    uint32_t variant_stack(BaseStack& b, uint32_t variant);
    // A stack whose symbolization failed is seen again: re-read it (a code object can be
    // caught mid-change, e.g. a str hash not computed yet); when it resolves now, the samples
    // already charged to the unresolved stack move to the resolved one.
    void retry(pid_t pid, uint64_t stack_id, BaseStack& b);
    static constexpr uint32_t kMaxRetries = 8;

    Profile& profile_;
    Symbolizer& symbolizer_;
    StackLookup lookup_;
    std::unordered_map<pid_t, std::unordered_map<uint64_t, BaseStack>> stack_ids_;  // pid -> BPF id
    std::vector<std::string> stack_problem_;  // per StackTable index: "" or why it is unresolved
    std::unique_ptr<pbp_stack> buf_;
    std::unordered_map<uint64_t, size_t> named_at_;  // (pid << 32 | tid) -> samples when last named
};

}  // namespace pbp
