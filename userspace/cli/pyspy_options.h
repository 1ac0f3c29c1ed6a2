// pybpfprof-py-spy: py-spy's command line, as the tools that call py-spy use it (Ray's
// dashboard: `py-spy record -o FILE -p PID -d S -f flamegraph|raw|speedscope [--native]` and
// `py-spy dump -p PID [--native]`), mapped onto pybpfprof's Options. The profile then runs
// exactly as pybpfprof's does (run_profile: BPF here, or the agent).
//
// `record` takes py-spy's options. Those pybpfprof honours are mapped (-f flamegraph is
// pybpfprof's svg, raw its collapsed stacks, --idle is --mode wall, --gil --mode gil); those it
// cannot honour yet (--native, --function, --nolineno, -f chrometrace) are a one-line error naming the option and
// why, exit 2, before anything runs: a tool that shows the command's error output only when
// it fails (Ray's dashboard does) would otherwise show a profile that is not what was asked,
// with the warning hidden. `dump` is cli/pyspy_dump.h's; `top` is not available yet: one line,
// exit 2.
#pragma once
#include "cli/options.h"

namespace pbp {

// The program's name in its messages, whatever name it was run by (a `py-spy` symlink).
constexpr const char* kPyspyProgram = "pybpfprof-py-spy";

// Parses argv (argv[0], then the subcommand). True when a profile should run, with opts
// filled. False otherwise, with exit_code: 0 after --help or --version (printed on stdout),
// 2 after a one-line error on stderr.
bool parse_pyspy(int argc, char** argv, Options& opts, int& exit_code);

// py-spy's exit status for pybpfprof's: a --pid target that exits ends the recording, and
// the file with what was sampled is written (py-spy exits 0 then; pybpfprof says 3).
int pyspy_exit_code(int pybpfprof_code);

}  // namespace pbp
