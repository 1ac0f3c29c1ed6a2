// Where a profile runs, the same for every front end (pybpfprof, pybpfprof-py-spy): here,
// with BPF, when this process may load it; else through the agent, when one answers on its
// socket; else a one-line error that names both fixes. Returns the exit code.
#pragma once
#include "cli/options.h"

namespace pbp {

int run_profile(const Options& opts);

}  // namespace pbp
