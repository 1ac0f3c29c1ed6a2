// The pipeline, start to end: discover -> configure the BPF side -> sample -> drain ->
// symbolize -> aggregate -> export. Returns the process exit code.
#pragma once
#include "cli/options.h"

namespace pbp {

int run_session(const Options& opts);

// Exit codes.
constexpr int kExitOk = 0;
constexpr int kExitError = 1;        // could not profile (privileges, kernel, BPF, write failure)
constexpr int kExitBadInput = 2;     // bad arguments / bad target
constexpr int kExitTargetExited = 3; // a --pid target exited during the run (its samples are kept)

}  // namespace pbp
