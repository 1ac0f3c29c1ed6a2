// pybpfprof-py-spy: py-spy's command line for pybpfprof (cli/pyspy_options.h), for tools
// that run py-spy, such as Ray's dashboard. Link it as `py-spy` on their PATH.
#include <csignal>
#include <cstring>

#include "cli/options.h"
#include "cli/pyspy_dump.h"
#include "cli/pyspy_options.h"
#include "cli/run.h"

int main(int argc, char** argv) {
    // As pybpfprof: a closed pipe is an error to report, never a reason to lose the samples.
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "dump") == 0) return pbp::pyspy_dump(argc - 1, argv + 1);
    pbp::Options opts;
    int code = 0;
    if (!pbp::parse_pyspy(argc, argv, opts, code)) return code;
    return pbp::pyspy_exit_code(pbp::run_profile(opts));
}
