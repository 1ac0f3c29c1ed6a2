#include "engine/stack_store.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "cpython/runtime_phase.h"
#include "engine/abi_names.h"

namespace pbp {

StackStore::StackStore(Symbolizer& symbolizer, StackLookup lookup)
    : symbolizer_(symbolizer), lookup_(std::move(lookup)), buf_(new pbp_stack()) {}

void StackStore::reset_process(pid_t pid) {
    stack_ids_[pid].clear();
    started_.erase(pid);
    forked_.erase(pid);
    task_stacks_.erase(task_stacks_.lower_bound({pid, 0, 0, 0}), task_stacks_.lower_bound({pid + 1, 0, 0, 0}));
}

void StackStore::forget_process(pid_t pid) {
    stack_ids_.erase(pid);
    started_.erase(pid);
    forked_.erase(pid);
    task_stacks_.erase(task_stacks_.lower_bound({pid, 0, 0, 0}), task_stacks_.lower_bound({pid + 1, 0, 0, 0}));
}

namespace {
// A frame of the interpreter's (not a marker, a native or a kernel frame).
bool is_python(const Frame& f) { return f.kind == FrameKind::Python && !f.synthetic; }
}  // namespace

uint32_t StackStore::wait_frame(uint32_t wait) {
    Frame f;
    f.name = wait_leaf(static_cast<WaitReason>(wait));
    f.synthetic = true;
    return frames_.intern(f);
}

uint32_t StackStore::synthetic_stack(const std::string& name, uint32_t wait, bool problem) {
    std::vector<uint32_t> frames;
    if (!name.empty()) {
        Frame f;
        f.name = "[" + name + "]";
        f.synthetic = true;
        frames.push_back(frames_.intern(f));
    }
    if (wait) frames.push_back(wait_frame(wait));
    uint32_t idx = stacks_.intern(frames);
    if (problem_.size() <= idx) problem_.resize(idx + 1);
    problem_[idx] = problem ? name : "";
    return idx;
}

bool StackStore::resolve(pid_t pid, uint64_t stack_id, BaseStack& b) {
    if (!lookup_(stack_id, *buf_)) return false;
    // --native marks entry frames in instr (3.11+): kept apart, so the frames are the same
    // with or without it.
    std::vector<bool> entry_leaf_first;
    const uint32_t depth = std::min<uint32_t>(buf_->depth, PBP_MAX_DEPTH);
    bool marked = false;
    for (uint32_t i = 0; i < depth; i++) {
        pbp_frame& f = buf_->frames[i];
        const bool entry = f.instr != PBP_INSTR_UNKNOWN && (f.instr & PBP_INSTR_ENTRY);
        if (entry) f.instr &= ~PBP_INSTR_ENTRY;
        marked |= entry;
        entry_leaf_first.push_back(entry);
    }
    std::map<std::string, uint64_t> problems;
    b.frames = symbolizer_.symbolize_into(pid, *buf_, frames_, problems);
    b.problem = problems.empty() ? "" : problems.begin()->first;
    b.startup = false;
    for (uint32_t f : b.frames) b.startup |= cpython::is_site_body(frames_.at(f).name, frames_.at(f).file);
    b.entry.clear();
    // One frame per walked frame (none skipped as a shim): the marks line up with the frames.
    if (b.frames.size() == depth) b.entry.assign(entry_leaf_first.rbegin(), entry_leaf_first.rend());
    else if (!marked) b.entry.assign(b.frames.size(), false);
    return true;
}

bool StackStore::python_frames(pid_t pid, uint64_t stack_id, std::vector<uint32_t>& root_first,
                               std::vector<bool>& entry) {
    auto p = stack_ids_.find(pid);
    if (p == stack_ids_.end()) return false;
    auto it = p->second.find(stack_id);
    if (it == p->second.end()) return false;
    root_first = it->second.frames;
    entry = it->second.entry;
    // Marks that cannot be lined up: none (the merge then finds no entry frame and keeps the
    // whole Python stack, marked incomplete).
    if (entry.size() != root_first.size()) entry.assign(root_first.size(), false);
    return true;
}

uint32_t StackStore::intern_stack(const std::vector<uint32_t>& root_first) {
    uint32_t idx = stacks_.intern(root_first);
    if (problem_.size() <= idx) problem_.resize(idx + 1);
    return idx;
}

uint32_t StackStore::variant_stack(BaseStack& b, uint32_t variant) {
    auto v = b.variants.find(variant);
    if (v != b.variants.end()) return v->second;
    const uint32_t key = variant;
    std::string problem = b.problem;
    std::vector<uint32_t> frames;
    const uint32_t wait = variant >> kWaitShift;
    if (variant & kStartupBit) {  // root-most: everything sampled in start-up under one frame
        Frame phase;
        phase.synthetic = true;
        phase.name = std::string("[") + cpython::kStartup + "]";
        frames.push_back(frames_.intern(phase));
    }
    variant &= kStartupBit - 1;
    if (variant) {
        Frame marker;
        marker.synthetic = true;
        if (variant >= 2) {
            marker.name = std::string("[partial stack: ") + reason_label(variant - 2) + "]";
            problem = std::string("partial stack: ") + reason_label(variant - 2);
        } else {
            marker.name = "[truncated]";
        }
        frames.push_back(frames_.intern(marker));
    }
    frames.insert(frames.end(), b.frames.begin(), b.frames.end());
    if (wait) frames.push_back(wait_frame(wait));
    uint32_t idx = stacks_.intern(frames);
    if (problem_.size() <= idx) problem_.resize(idx + 1);
    problem_[idx] = problem;
    b.variants.emplace(key, idx);
    return idx;
}

void StackStore::retry(pid_t pid, uint64_t stack_id, BaseStack& b) {
    b.retries++;
    BaseStack fresh;
    if (!resolve(pid, stack_id, fresh) || !fresh.problem.empty()) return;
    // The same id again proves the same code objects are alive (the id hashes their addresses
    // and checksums), so the first read hit a transient state: re-point the samples so far.
    for (auto& [variant, old_idx] : b.variants) moves_.push_back({pid, stack_id, old_idx, variant_stack(fresh, variant)});
    b = std::move(fresh);
}

uint32_t StackStore::stack_for(const pbp_event& e) {
    // An off-CPU sample ends in its wait reason's leaf ([sleeping], ...), made once per
    // (stack, wait) like the markers.
    const uint32_t wait = e.kind == PBP_KIND_OFF_CPU && e.wait > PBP_WAIT_NONE && e.wait < PBP_WAIT_COUNT ? e.wait : 0;
    // A Python stack or a readable runtime on CPU: the process has touched its runtime's memory.
    if (e.kind == PBP_KIND_CPU && (e.stack_id || (e.runtime & PBP_RT_KNOWN))) started_.insert(static_cast<pid_t>(e.pid));
    if (!e.stack_id) {
        // Start-up, finalization, a C library's thread: what it is, not a problem.
        const bool started = started_.count(static_cast<pid_t>(e.pid));
        // (Compared as text: the same literal can have one address per translation unit.)
        if ((e.runtime & PBP_RT_UNREADABLE) && forked_.count(static_cast<pid_t>(e.pid)))
            if (const char* l = cpython::frameless_label(e.runtime, e.reason, false); l && !strcmp(l, cpython::kStartup))
                return synthetic_stack(kExecLabel, wait, false);
        if (const char* what = cpython::frameless_label(e.runtime, e.reason, started)) return synthetic_stack(what, wait, false);
        // An off-CPU sample with neither a stack nor a reason (made by the engine for a thread
        // still blocked at the end, stack not read): the leaf alone.
        return synthetic_stack(wait && e.reason == PBP_OK ? "" : reason_label(e.reason), wait);
    }
    const pid_t pid = static_cast<pid_t>(e.pid);
    auto& ids = stack_ids_[pid];
    auto it = ids.find(e.stack_id);
    if (it == ids.end()) {
        BaseStack b;
        if (!resolve(pid, e.stack_id, b)) return synthetic_stack("stack evicted before it was read", wait);
        it = ids.emplace(e.stack_id, std::move(b)).first;
    } else if (Symbolizer::transient(it->second.problem) && it->second.retries < kMaxRetries) {
        retry(pid, e.stack_id, it->second);
    }
    uint32_t variant = (e.flags & PBP_F_PARTIAL) ? 2 + e.reason : (e.flags & PBP_F_TRUNCATED) ? 1 : 0;
    if (it->second.startup || cpython::in_startup(e.runtime)) variant |= kStartupBit;
    return variant_stack(it->second, variant | (wait << kWaitShift));
}

uint32_t StackStore::stack_for_frames(pid_t pid, const std::vector<pbp_frame>& leaf_first, uint16_t flags,
                                      uint16_t reason, uint32_t wait, const std::vector<bool>* entry_leaf_first) {
    if (wait >= PBP_WAIT_COUNT) wait = 0;
    if (leaf_first.empty()) return synthetic_stack(reason_label(reason), wait);
    // Not cached by an id: such stacks are read a few times per process (a session's end, a
    // dump), and the Symbolizer caches per code object and instruction anyway.
    size_t n = std::min<size_t>(leaf_first.size(), PBP_MAX_DEPTH);
    buf_->depth = static_cast<uint32_t>(n);
    buf_->pid = static_cast<uint32_t>(pid);
    std::copy_n(leaf_first.begin(), n, buf_->frames);
    std::map<std::string, uint64_t> problems;
    BaseStack b;
    b.frames = symbolizer_.symbolize_into(pid, *buf_, frames_, problems);
    b.problem = problems.empty() ? "" : problems.begin()->first;
    uint32_t variant = (flags & PBP_F_PARTIAL) ? 2 + reason : (flags & PBP_F_TRUNCATED) ? 1 : 0;
    const uint32_t stack = variant_stack(b, variant | (wait << kWaitShift));
    // One frame per frame read (as resolve()): the marks line up with the frames.
    if (entry_leaf_first && entry_leaf_first->size() >= n && b.frames.size() == n)
        read_frames_[stack] = {b.frames, std::vector<bool>(entry_leaf_first->rend() - static_cast<std::ptrdiff_t>(n),
                                                           entry_leaf_first->rend())};
    return stack;
}

bool StackStore::python_frames_of(uint32_t stack, std::vector<uint32_t>& root_first, std::vector<bool>& entry) const {
    auto it = read_frames_.find(stack);
    if (it == read_frames_.end()) return false;
    root_first = it->second.root_first;
    entry = it->second.entry;
    return true;
}

uint32_t StackStore::task_stack(const pbp_event& e, uint32_t plain, const std::vector<std::string>& chain,
                                uint64_t coro_code, std::optional<uint32_t> over) {
    const pid_t pid = static_cast<pid_t>(e.pid);
    auto& by_chain = task_stacks_[{pid, e.stack_id, coro_code, over ? *over : plain}];
    auto known = by_chain.find(chain);
    if (known != by_chain.end()) return known->second;

    std::vector<uint32_t> frames;
    for (auto& name : chain) {
        Frame f;
        f.name = name;
        f.synthetic = true;
        frames.push_back(frames_.intern(f));
    }
    std::string problem = problem_[plain];
    // The frames from the task's coroutine frame to the leaf, read again from the stacks map
    // (the id was read moments ago; this is once per stack, task code and chain).
    bool cut = false;
    if (e.stack_id && coro_code && lookup_(e.stack_id, *buf_)) {
        int outer = -1;
        for (uint32_t i = 0; i < buf_->depth && i < PBP_MAX_DEPTH; i++)
            if (buf_->frames[i].code == coro_code) outer = static_cast<int>(i);
        if (outer >= 0 && over) {
            // The same Python frame in the --native stack: the (outer + 1)th from the leaf.
            const auto& whole = stacks_.at(*over);
            uint32_t python = 0, plain_python = 0;
            for (uint32_t f : whole) python += is_python(frames_.at(f));
            for (uint32_t f : stacks_.at(plain)) plain_python += is_python(frames_.at(f));
            if (python == plain_python && plain_python == buf_->depth) {
                size_t at = whole.size(), seen = 0;
                while (at > 0 && seen < static_cast<size_t>(outer) + 1) seen += is_python(frames_.at(whole[--at]));
                frames.insert(frames.end(), whole.begin() + static_cast<std::ptrdiff_t>(at), whole.end());
                problem = problem_[*over];
                cut = true;
            }
        } else if (outer >= 0) {
            buf_->depth = static_cast<uint32_t>(outer) + 1;
            std::map<std::string, uint64_t> problems;
            auto own = symbolizer_.symbolize_into(pid, *buf_, frames_, problems);
            frames.insert(frames.end(), own.begin(), own.end());
            problem = problems.empty() ? "" : problems.begin()->first;
            // An off-CPU sample keeps its wait leaf (the plain stack's last frame).
            const uint32_t wait = e.kind == PBP_KIND_OFF_CPU && e.wait > PBP_WAIT_NONE && e.wait < PBP_WAIT_COUNT ? e.wait : 0;
            if (wait) frames.push_back(wait_frame(wait));
            cut = true;
        }
    }
    if (!cut) {
        const auto& whole = stacks_.at(over ? *over : plain);
        frames.insert(frames.end(), whole.begin(), whole.end());
        if (over) problem = problem_[*over];
    }
    uint32_t idx = stacks_.intern(frames);
    if (problem_.size() <= idx) problem_.resize(idx + 1);
    problem_[idx] = problem;
    by_chain.emplace(chain, idx);
    return idx;
}

uint32_t StackStore::with_startup_root(uint32_t from, uint32_t to) {
    const auto& f = stacks_.at(from);
    if (f.empty() || from == to) return to;
    const Frame& root = frames_.at(f[0]);
    if (!root.synthetic || root.name != std::string("[") + cpython::kStartup + "]") return to;
    const auto& t = stacks_.at(to);
    if (!t.empty() && t[0] == f[0]) return to;
    std::vector<uint32_t> frames;
    frames.reserve(t.size() + 1);
    frames.push_back(f[0]);
    frames.insert(frames.end(), t.begin(), t.end());
    const uint32_t idx = stacks_.intern(frames);
    if (problem_.size() <= idx) problem_.resize(idx + 1);
    problem_[idx] = problem_[to];
    return idx;
}

uint32_t StackStore::without_kernel_frames(uint32_t stack) {
    if (auto it = without_kernel_.find(stack); it != without_kernel_.end()) return it->second;
    std::vector<uint32_t> kept;
    for (uint32_t f : stacks_.at(stack))
        if (frames_.at(f).kind != FrameKind::Kernel) kept.push_back(f);
    const uint32_t idx = kept.size() == stacks_.at(stack).size() ? stack : stacks_.intern(kept);
    if (problem_.size() <= idx) problem_.resize(idx + 1);
    if (idx != stack) problem_[idx] = problem_[stack];
    without_kernel_.emplace(stack, idx);
    return idx;
}

uint32_t StackStore::with_wait_leaf(uint32_t stack, uint32_t wait) {
    std::vector<uint32_t> frames = stacks_.at(stack);
    frames.push_back(wait_frame(wait));
    const uint32_t idx = intern_stack(frames);
    if (idx != stack) problem_[idx] = problem_[stack];
    return idx;
}

}  // namespace pbp
