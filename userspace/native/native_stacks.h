// --native: the engine's part for native frames. Keeps each sample's machine state (the
// PBP_EV_NATIVE record that precedes its sample record) until the sample comes, unwinds it,
// names its frames and merges them with the sample's Python frames (merge.h) into a stack of
// the StackStore. One per engine, per process state inside.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/stack_store.h"
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
    void forget_process(pid_t pid);
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

    StackStore& store_;
    FileCache files_;  // before procs_: their modules hold its files
    uint64_t trimmed_ns_ = 0;
    std::unique_ptr<KernelSymbols> kernel_;  // /proc/kallsyms, read at the first kernel frame
    std::unordered_map<uint64_t, uint32_t> kernel_frames_;  // address -> interned frame
    std::map<pid_t, std::unique_ptr<Proc>> procs_;
    // tid -> the last machine state, waiting for its sample record
    std::unordered_map<uint32_t, std::vector<uint8_t>> pending_;
    uint32_t incomplete_ = 0;  // the interned "[native stack incomplete]"
    uint64_t unwound_ = 0, exact_ = 0, unwind_ns_ = 0;
    bool timing_ = false;
    uint64_t unwind_cpu_ns_ = 0, symbols_cpu_ns_ = 0;
    std::map<pid_t, uint64_t> watched_ns_;
    std::vector<std::string> notes_;
};

}  // namespace pbp::native
