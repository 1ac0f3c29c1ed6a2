#include "engine/knobs.h"

#include <cstdlib>
#include <cstring>

namespace pbp {

Knobs Knobs::from_environment() {
    Knobs k;
    if (const char* d = getenv("PYBPFPROF_DEBUG")) k.debug = strcmp(d, "2") == 0 ? 2 : 1;
    k.section_timing = getenv("PYBPFPROF_TIMING") != nullptr;
    k.bpf_stats = k.debug || getenv("PYBPFPROF_BPF_STATS") != nullptr;
    k.force_no_bpf_loop = getenv("PYBPFPROF_FORCE_NO_BPF_LOOP") != nullptr;
    k.force_no_wall = getenv("PYBPFPROF_FORCE_NO_WALL") != nullptr;
    k.force_wall_native_e2big = getenv("PYBPFPROF_FORCE_WALL_NATIVE_E2BIG") != nullptr;
    k.no_code_cache = getenv("PYBPFPROF_NO_CODE_CACHE") != nullptr;
    k.no_code_capture = getenv("PYBPFPROF_NO_CODE_CAPTURE") != nullptr;
    if (const char* n = getenv("PYBPFPROF_OFFCPU_SLOTS"); n && *n) {
        char* rest = nullptr;
        unsigned long v = strtoul(n, &rest, 10);
        if (rest && !*rest && v >= 1 && v <= (1ul << 20) && (v & (v - 1)) == 0) k.offcpu_slots = static_cast<uint32_t>(v);
    }
    if (const char* t = getenv("TMPDIR"); t && *t) k.tmpdir = t;
    if (const char* w = getenv("PYBPFPROF_SAMPLE_WINDOW"); w && *w) {
        char* rest = nullptr;
        double v = strtod(w, &rest);
        if (rest != w && v >= 0) k.sample_window_s = v;
        if (rest && *rest == ',') {
            const char* b = rest + 1;
            double bv = strtod(b, &rest);
            if (rest != b && bv > 0) k.sample_bucket_s = bv;
            if (rest && *rest == ',') {
                const char* m = rest + 1;
                unsigned long long mv = strtoull(m, &rest, 10);
                if (rest != m && mv > 0) k.sample_max_buckets = static_cast<size_t>(mv);
            }
        }
    }
    return k;
}

}  // namespace pbp
