// `pybpfprof dump --pid PID... | --all-python | --cgroup X [--json]`: every thread's current
// Python stack, asleep or not, read without stopping or signalling the target (engine/dump.h,
// docs/dump.md).
#pragma once
#include "engine/dump.h"

namespace pbp {

// The dump of req: read here when root, else through the agent, which dumps the caller's own
// processes (as it profiles them); neither: a one-line error naming both fixes. Also used by
// pybpfprof-py-spy dump.
Status obtain_dump(const DumpRequest& req, DumpResult& out);

// argv[0] is "dump". Returns the exit code: 0 ok; 1 cannot read (not root and no agent, or a
// process the agent refuses); 2 bad input (arguments, a PID that does not exist or is not
// CPython, no Python process found).
int dump_command(int argc, char** argv);

}  // namespace pbp
