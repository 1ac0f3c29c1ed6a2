// The hidden knobs: environment variables for debugging and before/after measurements. They
// are read here, once, into the configuration; nothing else in pybpfprof calls getenv.
#pragma once

#include <cstdint>
#include <string>

#include "pybpfprof/abi.h"

namespace pbp {

struct Knobs {
    int debug = 0;                 // PYBPFPROF_DEBUG: 1 = debug lines (registration and first-sample
                                   // times, BPF stats, verifier cost), 2 = also libbpf's debug log
    bool section_timing = false;   // PYBPFPROF_TIMING: BPF times its sections (PBP_STAT_T_*)
    // PYBPFPROF_BPF_STATS (or PYBPFPROF_DEBUG): the kernel's bpf_stats on while running, for the
    // summary's "bpf_stats:" line and the benchmarks. Off by default: it is machine-wide (two
    // clock reads added to every run of every BPF program on the machine, not only ours).
    bool bpf_stats = false;
    bool force_no_bpf_loop = false;  // PYBPFPROF_FORCE_NO_BPF_LOOP: the tail-call walk even with bpf_loop
    bool force_no_wall = false;    // PYBPFPROF_FORCE_NO_WALL: act as on a kernel that refuses wall
                                   // mode's scheduler programs (tests of the refusal)
    // PYBPFPROF_FORCE_WALL_NATIVE_E2BIG: act as on a kernel whose verifier gives up on the
    // scheduler programs with --native's capture (SamplerConfig::native_capture)
    bool force_wall_native_e2big = false;
    bool no_code_cache = false;    // PYBPFPROF_NO_CODE_CACHE: read every code object, as before 3.14
    bool no_code_capture = false;  // PYBPFPROF_NO_CODE_CAPTURE: no code object identity captured by
                                   // BPF (bpf/code_capture.bpf.h): every code object read live
    // PYBPFPROF_OFFCPU_SLOTS=N: wall mode's slot table (engine/offcpu_table.h) has N slots (a
    // power of 2 from 1 to 1 << 20; other values are ignored). Small, most threads' entries go to
    // the hash: for tests of that path.
    uint32_t offcpu_slots = PBP_OFFCPU_SLOTS;
    std::string tmpdir = "/tmp";   // TMPDIR: where a fallback output goes
    // PYBPFPROF_SAMPLE_WINDOW=SECONDS[,BUCKET_SECONDS[,MAX_BUCKETS]]: how long samples keep
    // their own timestamps before they are folded into buckets (engine/aggregator.h; 0 =
    // never), the first bucket width and the bucket entries a session keeps before the width
    // doubles. For tests of long runs in a few seconds. -1 / 0: the defaults.
    double sample_window_s = -1, sample_bucket_s = -1;
    size_t sample_max_buckets = 0;

    static Knobs from_environment();
};

}  // namespace pbp
