// libFuzzer target for the reader of pybpfprof's own format (export/raw.h): `pybpfprof
// merge` reads files from other machines with it. Run by tests/tools/run-fuzz --target
// raw_reader (ctest: Fuzz.RawReader), with ASan and UBSan.
//
// Besides "no crash, no leak, no timeout", it checks the reader's promises:
//  - a refused input has an error of one line, and the profile is left empty;
//  - an accepted one is a profile the writer writes back into a file that reads back to
//    the same profile, written the same way again (what was accepted is kept exactly).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "export/raw.h"

namespace {

[[noreturn]] void broken(const char* what, const std::string& detail) {
    fprintf(stderr, "fuzz_raw_reader: invariant broken: %s: %.500s\n", what, detail.c_str());
    abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    pbp::Profile p;
    std::string error;
    pbp::RawFailure why = pbp::RawFailure::None;
    // Small limits: the fuzzer's memory bound is 1 GiB.
    const pbp::RawLimits limits{1u << 22, 200000};
    if (!pbp::read_raw(in, p, error, limits, &why)) {
        if (error.empty() || error.find('\n') != std::string::npos) broken("error is not one line", error);
        if (why == pbp::RawFailure::None) broken("no failure kind", error);
        if (!(p == pbp::Profile{})) broken("profile not left empty", error);
        return 0;
    }
    const std::string text = pbp::raw_json(p);
    pbp::Profile back;
    if (!pbp::read_raw(text, back, error, limits)) broken("written profile does not read back", error + " | " + text);
    if (!(back == p)) {
        // NaN != NaN: a null read as NaN is written as null again, so compare the texts.
        if (pbp::raw_json(back) != text) broken("profile read back differs", text);
    }
    return 0;
}
