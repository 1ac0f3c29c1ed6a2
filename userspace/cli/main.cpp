// pybpfprof: a system-wide CPython profiler built on eBPF.
#include <csignal>

#include "cli/options.h"
#include "cli/record.h"

int main(int argc, char** argv) {
    // A closed pipe (a launched command that died, a closed stdout) is an error to report,
    // never a reason to die before the samples are written.
    signal(SIGPIPE, SIG_IGN);
    pbp::Options opts;
    int code = 0;
    if (!pbp::parse_options(argc, argv, opts, code)) return code;
    return pbp::run_record(opts);
}
