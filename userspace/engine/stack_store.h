// symbolize: BPF stack ids -> stacks of interned frames, done once for every session of the
// engine. A stack id is read from the BPF stacks map once per process, symbolized, and
// interned into one frame table and one stack table that all sessions' samples index into.
#pragma once
#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/profile.h"
#include "engine/symbolizer.h"
#include "pybpfprof/abi.h"

namespace pbp {

// A stack whose first symbolization hit a transient state was read again and resolved: the
// samples of process pid with BPF stack id stack_id, charged to stack 'from', belong to stack
// 'to'. (Unresolved frames carry no address, so 'from' may be shared by other ids' samples.)
struct StackMove {
    pid_t pid;
    uint64_t stack_id;
    uint32_t from, to;
};

class StackStore {
public:
    using StackLookup = std::function<bool(uint64_t id, pbp_stack& out)>;
    StackStore(Symbolizer& symbolizer, StackLookup lookup);

    // A process became a target (again, after an exec): its BPF stack ids mean nothing now.
    void reset_process(pid_t pid);
    void forget_process(pid_t pid);
    // pid is a fork of a running interpreter (found at its fork, no exec since): past start-up,
    // and a sample that finds its runtime unreadable was taken in its exec of another program,
    // after its memory was replaced (the exec's record comes after it).
    static constexpr const char* kExecLabel = "exec of another program";
    void mark_forked(pid_t pid) {
        started_.insert(pid);
        forked_.insert(pid);
    }

    // The stack a sample lands on: the symbolized frames of its id, plus a root-most
    // [truncated] / [partial stack] marker from this sample's own flags (the id is a hash of
    // the frames only, so two samples with one id may differ in their flags); a one-frame
    // "[reason]" stack for a sample without a stack. An off-CPU sample's stack ends in the
    // leaf of its wait reason (wait_leaf: "[sleeping]", ...); one with neither a stack id nor
    // a reason is that leaf alone.
    uint32_t stack_for(const pbp_event& e);
    // The same for a stack read from userspace (cpython::read_thread_stacks): its frames in
    // BPF's format, leaf first, symbolized by the same Symbolizer, so a stack read this way
    // and a BPF sample of the same frames land on the same stack. No frames: the one-frame
    // "[reason]" stack. wait: an off-CPU sample's enum pbp_wait (its leaf), 0 for none.
    // entry_leaf_first (ThreadStack::entry), when given, is kept for python_frames_of.
    uint32_t stack_for_frames(pid_t pid, const std::vector<pbp_frame>& leaf_first, uint16_t flags,
                              uint16_t reason, uint32_t wait = 0, const std::vector<bool>* entry_leaf_first = nullptr);
    // --async: the stack of sample e (its plain stack: stack_for(e)) taken while an asyncio task
    // ran: the task chain (synthetic "<task NAME>" frames, outermost awaiter first), then the
    // sample's frames from the task's coroutine frame (the outermost frame of code object
    // coro_code) to the leaf. The event loop's frames below the task are left out, as CPython's
    // async-aware views show a task (Modules/_remote_debugging: a task's stack ends at its
    // coroutine's frame). When coro_code is not in the stack, the chain goes above all of it.
    // over: e's --native stack (Python frames those of plain, kernel and native ones between):
    // it is cut above the same Python frame, which keeps the native and kernel frames from
    // the coroutine's frame to the leaf; when its Python frames are not plain's, it is kept
    // whole under the chain.
    uint32_t task_stack(const pbp_event& e, uint32_t plain, const std::vector<std::string>& chain,
                        uint64_t coro_code, std::optional<uint32_t> over = std::nullopt);
    // stack without its kernel frames (FrameKind::Kernel): for callers who may not see them.
    uint32_t without_kernel_frames(uint32_t stack);
    // stack with the leaf of off-CPU wait reason wait ("[sleeping]", ...) as its innermost frame:
    // an off-CPU sample's --native stack (its kernel frames end in the scheduler).
    uint32_t with_wait_leaf(uint32_t stack, uint32_t wait);
    // Stack 'to' (made from stack 'from': its --native form) under the root [interpreter start-up]
    // frame of 'from', if it has one and 'to' has not (the native merge takes the Python frames
    // without their markers).
    uint32_t with_startup_root(uint32_t from, uint32_t to);
    // "" when every frame of the stack is resolved, else why not (the unresolved count's key).
    const std::string& problem(uint32_t stack) const { return problem_[stack]; }
    // Its problem may clear on a later read of the same id (see StackMove).
    bool transient(uint32_t stack) const { return Symbolizer::transient(problem_[stack]); }

    // --native (userspace/native): the Python frames of BPF stack id stack_id of pid, root
    // first, with which of them is an eval-loop call's entry frame (PBP_INSTR_ENTRY; all false
    // when the walk did not mark them). False when the id is not known.
    bool python_frames(pid_t pid, uint64_t stack_id, std::vector<uint32_t>& root_first, std::vector<bool>& entry);
    // The same for stack, made by stack_for_frames from a stack read with its entry marks.
    bool python_frames_of(uint32_t stack, std::vector<uint32_t>& root_first, std::vector<bool>& entry) const;
    // A frame and a stack (root first) made elsewhere (the mixed stacks of --native).
    uint32_t intern_frame(const Frame& f) { return frames_.intern(f); }
    uint32_t intern_stack(const std::vector<uint32_t>& root_first);

    const FrameTable& frames() const { return frames_; }
    const StackTable& stacks() const { return stacks_; }

    // Stacks resolved on a later read since the last call (see StackMove).
    bool has_moves() const { return !moves_.empty(); }
    std::vector<StackMove> take_moves() { return std::exchange(moves_, {}); }

private:
    struct BaseStack {
        uint32_t retries = 0;          // re-reads after a failed symbolization, see retry()
        std::vector<uint32_t> frames;  // root first, interned
        std::vector<bool> entry;       // --native: per frame, an entry frame (see python_frames)
        std::string problem;           // "" or why some frame is unresolved
        bool startup = false;          // holds the site module's body: start-up (runtime_phase.h)
        // StackTable index per marker variant: 0 = none, 1 = [truncated], 2 + reason =
        // [partial stack: reason], plus kStartupBit (a root [interpreter start-up] frame), plus
        // an off-CPU wait reason << kWaitShift (its leaf); made
        // once, so a repeated sample costs one lookup.
        std::unordered_map<uint32_t, uint32_t> variants;
    };

    static constexpr uint32_t kWaitShift = 24;
    // stack_for_frames's stacks with entry marks: stack -> its Python frames and their marks
    struct ReadFrames {
        std::vector<uint32_t> root_first;
        std::vector<bool> entry;
    };
    std::unordered_map<uint32_t, ReadFrames> read_frames_;
    static constexpr uint32_t kStartupBit = 1u << 23;  // a variant under [interpreter start-up]
    uint32_t wait_frame(uint32_t wait);  // the interned leaf frame of a wait reason
    // "[name]" (none when name is "") and the leaf of wait (none when 0).
    // problem: the name is why the sample is unresolved (counted in the summary), not what it is.
    uint32_t synthetic_stack(const std::string& name, uint32_t wait = 0, bool problem = true);
    // Reads and symbolizes a BPF stack into b; false when the id is no longer in the map.
    bool resolve(pid_t pid, uint64_t stack_id, BaseStack& b);
    // The StackTable index of b with a marker variant, made once.
    uint32_t variant_stack(BaseStack& b, uint32_t variant);
    // A stack whose symbolization failed is seen again: re-read it (a code object can be
    // caught mid-change, e.g. a str hash not computed yet); when it resolves now, the samples
    // already charged to the unresolved stack move to the resolved one (take_moves).
    void retry(pid_t pid, uint64_t stack_id, BaseStack& b);
    static constexpr uint32_t kMaxRetries = 8;

    Symbolizer& symbolizer_;
    StackLookup lookup_;
    FrameTable frames_;
    StackTable stacks_;
    std::vector<std::string> problem_;  // per StackTable index
    std::unordered_map<pid_t, std::unordered_map<uint64_t, BaseStack>> stack_ids_;  // pid -> BPF id
    // Processes that have shown a Python stack or a readable runtime on CPU: past the moment
    // their runtime's memory was first touched (cpython::frameless_label's 'started').
    std::unordered_set<pid_t> started_;
    std::unordered_set<pid_t> forked_;  // mark_forked
    std::unique_ptr<pbp_stack> buf_;
    std::vector<StackMove> moves_;
    // task_stack's results: (pid, stack id, coroutine code, plain stack) -> (chain -> stack)
    // (pid, stack id, coroutine code, the stack under the chain) -> chain -> stack.
    std::map<std::tuple<pid_t, uint64_t, uint64_t, uint32_t>, std::map<std::vector<std::string>, uint32_t>> task_stacks_;
    std::unordered_map<uint32_t, uint32_t> without_kernel_;  // stack -> the same without kernel frames
};

}  // namespace pbp
