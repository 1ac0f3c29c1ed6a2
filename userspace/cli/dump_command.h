// `pybpfprof dump --pid PID... | --all-python | --cgroup X [--json]`: every thread's current
// Python stack, asleep or not, read without stopping or signalling the target (engine/dump.h,
// docs/dump.md).
#pragma once

namespace pbp {

// argv[0] is "dump". Returns the exit code: 0 ok; 1 cannot read (not root); 2 bad input (arguments,
// a PID that does not exist or is not CPython, no Python process found).
int dump_command(int argc, char** argv);

}  // namespace pbp
