// --native: the engine's part for native frames. Keeps each sample's machine state (the
// PBP_EV_NATIVE record that precedes its sample record) until the sample comes, unwinds it,
// names its frames and merges them with the sample's Python frames (merge.h) into a stack of
// the StackStore. One per engine, per process state inside.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/stack_store.h"
#include "native/blocked_state.h"
#include "native/file_symbols.h"
#include "native/native_symbols.h"
#include "native/process_modules.h"
#include "native/unwinder.h"
#include "pybpfprof/abi.h"
#include "sys/kallsyms.h"

namespace pbp::native {

class NativeStacks {
public:
    explicit NativeStacks(StackStore& store);
    ~NativeStacks();

    // A machine-state record (size bytes of it): kept for the sample record that follows it.
    void on_capture(const pbp_native_event& ev, size_t size);
    // The mixed stack of sample e, whose Python-only stack is plain; plain when it has no
    // machine state (BPF could not send it, or not asked for this process). version_hex: the
    // process's PY_VERSION_HEX (how its eval-loop calls map to Python frames).
    uint32_t stack_for(const pbp_event& e, uint32_t plain, uint32_t version_hex);
    // --mode wall: the mixed stack of off-CPU sample e (its Python-only stack without the wait
    // leaf: plain), from the machine state taken at the switch-out whose walk its stack came
    // from (PBP_NATIVE_F_OFFCPU, ts_ns == e.cpu_clock_ns), kept per thread (its last
    // kOffcpuPerThread); plain when there is none. The caller adds the wait leaf.
    uint32_t offcpu_stack_for(const pbp_event& e, uint32_t plain, uint32_t version_hex);
    // The state of a thread asleep since before its wall session began (read_blocked_state),
    // as an off-CPU capture of ts_ns st's: its pending interval's record carries it.
    void on_blocked_state(const BlockedState& st);
    void forget_process(pid_t pid);
    // Bytes of off-CPU captures kept as they came (not unwound yet): at most kMaxRawBytes and
    // one capture more.
    size_t offcpu_raw_bytes() const { return raw_bytes_; }
    static constexpr size_t kMaxRawBytes = 32u << 20;
    // PYBPFPROF_DEBUG: time the set-up (thread CPU clock) and say, per process, when its first
    // stack was merged exactly and what it cost (take_notes()).
    void set_timing(bool on);
    // Native capture was turned on for pid at mono_ns ns (the debug lines count from it).
    void watch(pid_t pid, uint64_t ns);
    std::vector<std::string> take_notes() { return std::move(notes_); }
    // CPU spent unwinding and naming (timing on), over every process.
    uint64_t unwind_cpu_ns() const { return unwind_cpu_ns_; }
    uint64_t symbols_cpu_ns() const { return symbols_cpu_ns_; }
    const SetupCounters& counters() const { return files_.counters; }

    // For the debug line and the benchmarks: samples unwound, exactly merged, ns spent.
    uint64_t unwound() const { return unwound_; }
    uint64_t exact() const { return exact_; }
    uint64_t unwind_ns() const { return unwind_ns_; }

private:
    struct Proc {
        Proc(pid_t pid, FileCache& files) : modules(pid, files), unwinder(modules), symbols(modules) {}
        ProcessModules modules;
        Unwinder unwinder;
        NativeSymbols symbols;
        // interned frame index per distinct native frame, in the StackStore's table
        std::unordered_map<const Frame*, uint32_t> interned;
        // timing on: until its first exact merge
        uint64_t samples = 0, refresh_cpu = 0, unwind_cpu = 0, symbols_cpu = 0;
        bool told = false;
    };
    Proc& proc(pid_t pid);
    uint32_t intern_native(Proc& p, const Frame& f);
    // A machine state unwound: its native pcs, and its kernel frames (interned).
    struct Unwound {
        UnwoundStack u;
        std::vector<uint32_t> kernel;
    };
    Unwound unwind(const pbp_native_event& ev);
    // w merged with e's Python frames (plain: e's stack, for one without them); t0: when the
    // work on it began (the unwind_ns count).
    uint32_t merged(const Unwound& w, const pbp_event& e, uint32_t plain, uint32_t version_hex, uint64_t t0);
    // kernel_names: its kernel frames by name (a BlockedState's), else from ev.kstack
    void on_offcpu_capture(const pbp_native_event& ev, const std::vector<std::string>* kernel_names = nullptr);
    // An off-CPU machine state and the stacks merged from it (per BPF stack id: the
    // switch-outs from its place reuse it, whatever Python stack they had). Kept as it came
    // (raw) and unwound when an interval first needs it: most captures of a thread that blocks
    // often stand for intervals shorter than --min-block, which are summed without a stack (a
    // ping-pong at 3 places: 60,000 captures in 3 s, ~11 us each to unwind). Unwound at once
    // when the raw ones kept reach kMaxRawBytes.
    struct OffcpuCapture {
        uint64_t ts_ns = 0;
        uint32_t pid = 0;
        std::vector<uint8_t> raw;  // the record, until unwound (then empty)
        Unwound w;
        std::unordered_map<uint64_t, uint32_t> merged;
    };
    void unwind_capture(OffcpuCapture& c);
    void drop_raw(OffcpuCapture& c);
    size_t raw_bytes_ = 0;
    // Two per thread, as BPF keeps two places per thread (pbp_offcpu.seen), and one more: the
    // interval of a new place may still be pending when the next place's state comes.
    static constexpr size_t kOffcpuPerThread = 3;
    static constexpr size_t kMaxOffcpuThreads = 1 << 16;

    StackStore& store_;
    FileCache files_;  // before procs_: their modules hold its files
    uint64_t trimmed_ns_ = 0;
    std::unique_ptr<KernelSymbols> kernel_;  // /proc/kallsyms, read at the first kernel frame
    std::unordered_map<uint64_t, uint32_t> kernel_frames_;  // address -> interned frame
    std::map<pid_t, std::unique_ptr<Proc>> procs_;
    // tid -> the last machine state, waiting for its sample record
    std::unordered_map<uint32_t, std::vector<uint8_t>> pending_;
    std::unordered_map<uint32_t, std::deque<OffcpuCapture>> offcpu_;  // tid -> its last ones
    std::unordered_set<uint32_t> tracing_frames_;  // kernel frames of the capturing program's call
    uint32_t incomplete_ = 0;  // the interned "[native stack incomplete]"
    uint64_t unwound_ = 0, exact_ = 0, unwind_ns_ = 0;
    bool timing_ = false;
    uint64_t unwind_cpu_ns_ = 0, symbols_cpu_ns_ = 0;
    std::map<pid_t, uint64_t> watched_ns_;
    std::vector<std::string> notes_;
};

}  // namespace pbp::native
