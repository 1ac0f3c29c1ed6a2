#include "engine/knobs.h"

#include <cstdlib>
#include <cstring>

namespace pbp {

Knobs Knobs::from_environment() {
    Knobs k;
    if (const char* d = getenv("PYBPFPROF_DEBUG")) k.debug = strcmp(d, "2") == 0 ? 2 : 1;
    k.section_timing = getenv("PYBPFPROF_TIMING") != nullptr;
    k.force_no_bpf_loop = getenv("PYBPFPROF_FORCE_NO_BPF_LOOP") != nullptr;
    k.no_code_cache = getenv("PYBPFPROF_NO_CODE_CACHE") != nullptr;
    if (const char* t = getenv("TMPDIR"); t && *t) k.tmpdir = t;
    return k;
}

}  // namespace pbp
