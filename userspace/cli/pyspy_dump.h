// `pybpfprof-py-spy dump -p PID [--native]`: py-spy's dump command, as Ray's dashboard runs it
// for its Stack Trace view. The stacks are pybpfprof's dump (obtain_dump: read here as root,
// else through the agent), printed in py-spy's text format.
#pragma once
#include <ostream>

#include "engine/dump.h"

namespace pbp {

// py-spy's dump text: "Process PID: COMMAND", "Python vVERSION (EXE)", a blank line, then per
// Python thread `Thread TID (idle|active|active+gil): "NAME"` and its frames, innermost
// first, `    FUNCTION (FILE:LINE)` (EXE "?" when unreadable). Native threads (no Python thread state) are not listed,
// as py-spy lists only thread states.
void write_pyspy_dump(const DumpResult& dump, std::ostream& out);

// argv[0] is "dump". Returns the exit code: 0 ok; 1 cannot read; 2 bad input.
int pyspy_dump(int argc, char** argv);

}  // namespace pbp
