#include "native/native_stacks.h"

#include <cstdio>
#include <cstring>

#include "native/merge.h"
#include "sys/clock.h"

namespace pbp::native {

NativeStacks::NativeStacks(StackStore& store) : store_(store) {
    Frame f;
    f.name = "[native stack incomplete]";
    f.synthetic = true;
    f.kind = FrameKind::Native;
    incomplete_ = store_.intern_frame(f);
}

NativeStacks::~NativeStacks() = default;

namespace {

// The bytes of record ev: its header and its stack copy (an off-CPU one's may be wider).
size_t record_bytes(const pbp_native_event& ev) {
    const size_t most = (ev.flags & PBP_NATIVE_F_OFFCPU) ? PBP_NATIVE_USTACK_OFFCPU : PBP_NATIVE_USTACK;
    return PBP_NATIVE_HEADER_BYTES + std::min<size_t>(ev.ustack_len, most);
}

// The BPF program's frames and the tracepoint's calling it: "[k] bpf_prog_<tag>_on_switch",
// "[k] bpf_trace_run4", "[k] __bpf_trace_sched_switch", "[k] __traceiter_sched_switch".
bool is_tracing_frame(const std::string& name) {
    for (const char* p : {"[k] bpf_prog_", "[k] bpf_trace_run", "[k] __bpf_trace_", "[k] __traceiter_"})
        if (name.rfind(p, 0) == 0) return true;
    return false;
}

}  // namespace

void NativeStacks::on_capture(const pbp_native_event& ev, size_t size) {
    if (ev.flags & PBP_NATIVE_F_OFFCPU) {
        if (size >= record_bytes(ev)) on_offcpu_capture(ev);
        return;
    }
    auto& buf = pending_[ev.tid];
    buf.resize(std::max(size, sizeof(pbp_native_event)));
    std::memcpy(buf.data(), &ev, size);
}

NativeStacks::Proc& NativeStacks::proc(pid_t pid) {
    auto& p = procs_[pid];
    if (!p) p = std::make_unique<Proc>(pid, files_);
    return *p;
}

void NativeStacks::forget_process(pid_t pid) {
    for (auto it = offcpu_.begin(); it != offcpu_.end();) {
        if (!it->second.empty() && it->second.front().pid == static_cast<uint32_t>(pid)) {
            for (auto& c : it->second) drop_raw(c);
            it = offcpu_.erase(it);
        } else {
            ++it;
        }
    }
    if (procs_.erase(pid)) files_.trim(mono_ns());
}

void NativeStacks::set_timing(bool on) {
    timing_ = on;
    files_.timing = on;
}

void NativeStacks::watch(pid_t pid, uint64_t ns) {
    if (timing_) watched_ns_[pid] = ns;
}

uint32_t NativeStacks::intern_native(Proc& p, const Frame& f) {
    auto it = p.interned.find(&f);  // NativeSymbols' frames stay where they are (std::map)
    if (it != p.interned.end()) return it->second;
    uint32_t idx = store_.intern_frame(f);
    p.interned.emplace(&f, idx);
    return idx;
}

uint32_t NativeStacks::stack_for(const pbp_event& e, uint32_t plain, uint32_t version_hex) {
    auto pend = pending_.find(e.tid);
    if (pend == pending_.end()) return plain;
    const auto* ev = reinterpret_cast<const pbp_native_event*>(pend->second.data());
    if (ev->ts_ns != e.ts_ns || ev->pid != e.pid) {  // another sample's (this one's was lost)
        pending_.erase(pend);
        return plain;
    }
    const uint64_t t0 = mono_ns();
    Unwound w = unwind(*ev);
    pending_.erase(pend);
    return merged(w, e, plain, version_hex, t0);
}

void NativeStacks::on_blocked_state(const BlockedState& st) {
    if (st.record.size() < sizeof(pbp_native_event)) return;
    on_offcpu_capture(*reinterpret_cast<const pbp_native_event*>(st.record.data()), &st.kernel);
}

void NativeStacks::on_offcpu_capture(const pbp_native_event& ev, const std::vector<std::string>* kernel_names) {
    auto& list = offcpu_[ev.tid];
    if (offcpu_.size() > kMaxOffcpuThreads) {  // threads gone without their process: drop one
        auto victim = offcpu_.begin();
        if (victim->first == ev.tid) ++victim;
        for (auto& c : victim->second) drop_raw(c);
        offcpu_.erase(victim);
    }
    list.emplace_back();
    OffcpuCapture& c = list.back();
    c.ts_ns = ev.ts_ns;
    c.pid = ev.pid;
    const size_t size = record_bytes(ev);
    // As long as the record, as the ring buffer's was (read within its header and ustack_len)
    c.raw.assign(reinterpret_cast<const uint8_t*>(&ev), reinterpret_cast<const uint8_t*>(&ev) + size);
    raw_bytes_ += c.raw.size();
    if (kernel_names || raw_bytes_ > kMaxRawBytes) unwind_capture(c);
    if (kernel_names)  // read by name (/proc), not captured by BPF
        for (const std::string& name : *kernel_names) {
            Frame f;
            f.name = name;
            f.kind = FrameKind::Kernel;
            f.library = "[kernel]";
            c.w.kernel.push_back(store_.intern_frame(f));
        }
    while (list.size() > kOffcpuPerThread) {
        drop_raw(list.front());
        list.pop_front();
    }
}

void NativeStacks::unwind_capture(OffcpuCapture& c) {
    if (c.raw.empty()) return;  // unwound already
    const uint64_t t0 = mono_ns();
    c.w = unwind(*reinterpret_cast<const pbp_native_event*>(c.raw.data()));
    drop_raw(c);
    unwind_ns_ += mono_ns() - t0;
}

void NativeStacks::drop_raw(OffcpuCapture& c) {
    raw_bytes_ -= c.raw.size();
    std::vector<uint8_t>().swap(c.raw);
}

uint32_t NativeStacks::offcpu_stack_for(const pbp_event& e, uint32_t plain, uint32_t version_hex) {
    auto t = offcpu_.find(e.tid);
    if (!e.cpu_clock_ns || t == offcpu_.end()) return plain;
    for (auto& c : t->second) {
        if (c.ts_ns != e.cpu_clock_ns || c.pid != e.pid) continue;
        auto m = c.merged.find(e.stack_id);
        if (m != c.merged.end()) return m->second;
        unwind_capture(c);
        const uint32_t stack = merged(c.w, e, plain, version_hex, mono_ns());
        c.merged.emplace(e.stack_id, stack);
        return stack;
    }
    return plain;
}

NativeStacks::Unwound NativeStacks::unwind(const pbp_native_event& ev) {
    const uint64_t t0 = mono_ns();
    if (t0 - trimmed_ns_ > 1000000000ULL) {  // the files no process maps any more
        files_.trim(t0);
        trimmed_ns_ = t0;
    }
    Unwound w;
    const uint64_t cpu0 = timing_ ? thread_cpu_ns() : 0, refresh0 = files_.counters.refresh_cpu_ns;
    Proc& p = proc(static_cast<pid_t>(ev.pid));
    w.u = p.unwinder.unwind(ev, record_bytes(ev));
    if (timing_) {
        const uint64_t cpu1 = thread_cpu_ns(), refresh1 = files_.counters.refresh_cpu_ns;
        p.refresh_cpu += refresh1 - refresh0;
        p.unwind_cpu += (cpu1 - cpu0) - (refresh1 - refresh0);
        unwind_cpu_ns_ += (cpu1 - cpu0) - (refresh1 - refresh0);
    }
    for (uint16_t i = 0; i < ev.kdepth && i < PBP_NATIVE_KSTACK; i++) {
        const uint64_t a = ev.kstack[i];
        auto k = kernel_frames_.find(a);
        if (k == kernel_frames_.end()) {
            Frame f;
            if (!kernel_) kernel_ = std::make_unique<KernelSymbols>(KernelSymbols::load());
            f.name = kernel_->name_for(a);
            if (f.name.empty()) {  // not in the table (or the addresses are hidden: kptr_restrict)
                char hex[32];
                snprintf(hex, sizeof hex, "[k] 0x%llx", static_cast<unsigned long long>(a));
                f.name = hex;
            }
            f.kind = FrameKind::Kernel;
            f.library = "[kernel]";
            k = kernel_frames_.emplace(a, store_.intern_frame(f)).first;
            if (is_tracing_frame(f.name)) tracing_frames_.insert(k->second);
        }
        w.kernel.push_back(k->second);
    }
    // An off-CPU capture is taken by the sched_switch program, whose own frames (and the
    // tracepoint's) are innermost: the thread's stack ends in the scheduler.
    if (ev.flags & PBP_NATIVE_F_OFFCPU) {
        size_t own = 0;
        while (own < w.kernel.size() && tracing_frames_.count(w.kernel[own])) own++;
        w.kernel.erase(w.kernel.begin(), w.kernel.begin() + static_cast<std::ptrdiff_t>(own));
    }
    return w;
}

uint32_t NativeStacks::merged(const Unwound& w, const pbp_event& e, uint32_t plain, uint32_t version_hex,
                              uint64_t t0) {
    Proc& p = proc(static_cast<pid_t>(e.pid));
    const uint64_t cpu1 = timing_ ? thread_cpu_ns() : 0, refresh1 = files_.counters.refresh_cpu_ns;
    MergeInput in;
    in.kernel = w.kernel;
    // The interpreter's own file: the one holding the eval loop.
    std::string interpreter;
    std::vector<const Frame*> named;
    named.reserve(w.u.pcs.size());
    for (uint64_t pc : w.u.pcs) {
        const Frame& f = p.symbols.frame_at(pc);
        named.push_back(&f);
        if (interpreter.empty() && is_eval_loop(f.name)) interpreter = f.library;
    }
    if (timing_) {
        const uint64_t cpu2 = thread_cpu_ns(), refresh2 = files_.counters.refresh_cpu_ns;
        p.refresh_cpu += refresh2 - refresh1;
        p.symbols_cpu += (cpu2 - cpu1) - (refresh2 - refresh1);
        symbols_cpu_ns_ += (cpu2 - cpu1) - (refresh2 - refresh1);
        p.samples++;
    }
    for (const Frame* f : named) {
        NativeRole role = NativeRole::Keep;
        // In the interpreter's file, a function without a symbol is hidden too: Debian's
        // python3.11 keeps only its exported symbols, and its static functions between Python
        // frames are mostly call machinery (pymain_*, cfunction_call, ...).
        if (!interpreter.empty() && f->library == interpreter)
            role = is_eval_loop(f->name) ? NativeRole::Eval
                   : (hidden_in_interpreter(f->name) || f->name.compare(0, 1, "[") == 0) ? NativeRole::Hidden
                                                                                         : NativeRole::Keep;
        in.native.push_back({intern_native(p, *f), role});
    }
    in.native_complete = w.u.complete;
    in.rule = version_hex >= 0x030b0000 ? EntryRule::Marked : EntryRule::OnePerEval;
    std::vector<uint32_t> root_first;
    std::vector<bool> entry;
    // No BPF stack id: a stack read from userspace (a thread asleep since before the session).
    if (e.stack_id ? store_.python_frames(static_cast<pid_t>(e.pid), e.stack_id, root_first, entry)
                   : store_.python_frames_of(plain, root_first, entry)) {
        for (size_t i = root_first.size(); i-- > 0;) in.python.push_back({root_first[i], entry[i]});
    }
    MergeOutput m = merge(in, incomplete_);
    unwound_++;
    exact_ += m.exact;
    unwind_ns_ += mono_ns() - t0;
    if (timing_ && m.exact && !p.told) {
        p.told = true;
        const uint64_t now = mono_ns();
        auto wt = watched_ns_.find(static_cast<pid_t>(e.pid));
        auto ms = [](uint64_t ns) { return std::to_string(ns / 1000000) + "." + std::to_string(ns / 100000 % 10); };
        notes_.push_back("native: PID " + std::to_string(e.pid) + " first stack merged at mono_ns " + std::to_string(now) +
                         (wt != watched_ns_.end() ? ", " + ms(now - wt->second) + " ms after native capture began" : "") +
                         " (sample taken " + ms(now > e.ts_ns ? now - e.ts_ns : 0) + " ms before); set-up CPU " +
                         ms(p.refresh_cpu + p.unwind_cpu + p.symbols_cpu) + " ms over " + std::to_string(p.samples) +
                         " samples: maps and modules " + ms(p.refresh_cpu) + " ms, unwind " + ms(p.unwind_cpu) +
                         " ms, symbols " + ms(p.symbols_cpu) + " ms");
    }
    // A sample without Python frames (a thread in C only, or no thread state) is its native
    // stack under plain's "[reason]" frame.
    std::vector<uint32_t> out(m.leaf_first.rbegin(), m.leaf_first.rend());
    if (in.python.empty()) {
        const auto& base = store_.stacks().at(plain);
        out.insert(out.begin(), base.begin(), base.end());
    }
    return store_.intern_stack(out);
}

}  // namespace pbp::native
