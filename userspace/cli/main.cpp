// pybpfprof: a system-wide CPython profiler built on eBPF.
#include <csignal>
#include <cstring>

#include "cli/agent_command.h"
#include "cli/dump_command.h"
#include "cli/merge_command.h"
#include "cli/options.h"
#include "cli/run.h"

int main(int argc, char** argv) {
    // A closed pipe (a launched command that died, a closed stdout) is an error to report,
    // never a reason to die before the samples are written.
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "agent") == 0) return pbp::agent_command(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "dump") == 0) return pbp::dump_command(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "merge") == 0) return pbp::merge_command(argc - 1, argv + 1);
    pbp::Options opts;
    int code = 0;
    if (!pbp::parse_options(argc, argv, opts, code)) return code;
    return pbp::run_profile(opts);
}
