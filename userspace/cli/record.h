// `pybpfprof [record]`: profile the targets the options name with the engine, show a live
// status line, write the output files and print the end-of-run summary. Returns the exit code.
#pragma once
#include "cli/options.h"

namespace pbp {

int run_record(const Options& opts);

// Exit codes.
constexpr int kExitOk = 0;
constexpr int kExitError = 1;        // could not profile (privileges, kernel, BPF, write failure)
constexpr int kExitBadInput = 2;     // bad arguments / bad target
constexpr int kExitTargetExited = 3; // a --pid target exited during the run (its samples are kept)

}  // namespace pbp
