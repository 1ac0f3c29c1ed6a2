// libFuzzer target for the _Py_DebugOffsets decoder (cpython/layout.h: 3.13+ describe their
// own structs at the start of _PyRuntime, read from the profiled process, which is not
// trusted). Run by tests/tools/run-fuzz --target debug_offsets (ctest: Fuzz.DebugOffsets),
// with ASan and UBSan.
//
// The input is the first bytes of a _PyRuntime (the seeds: real ones of 3.13, 3.13t, 3.14
// and 3.15). Checks, besides "no crash, no leak, no timeout": a refused table has a
// one-line error; an accepted one names a 3.13+ version, and the offsets handed to BPF
// either pass finalize_bpf_offsets (which bounds every one by the BPF read window) or are
// refused with a one-line error.
#include <cstdint>
#include <span>
#include <string>

#include "cpython/layout.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* const name = "fuzz_debug_offsets";
    std::string error, warning;
    auto layout = pbp::cpython::layout_from_debug_offsets(std::span<const uint8_t>(data, size), error, warning);
    if (!layout) {
        if (!pbp::fuzz::one_line(error)) pbp::fuzz::broken(name, "refused without a one-line error", error);
        return 0;
    }
    if (!warning.empty() && warning.find('\n') != std::string::npos)
        pbp::fuzz::broken(name, "warning is not one line", warning);
    if (!layout->version.at_least(3, 13)) pbp::fuzz::broken(name, "accepted an older version", layout->version.str());
    std::string bpf_error;
    if (!pbp::cpython::finalize_bpf_offsets(layout->bpf, bpf_error) && !pbp::fuzz::one_line(bpf_error))
        pbp::fuzz::broken(name, "BPF offsets refused without a one-line error", bpf_error);
    return 0;
}
