// pybpfprof: a system-wide CPython profiler built on eBPF.
#include "options.h"
#include "session.h"

int main(int argc, char** argv) {
    pbp::Options opts;
    int code = 0;
    if (!pbp::parse_options(argc, argv, opts, code)) return code;
    return pbp::run_session(opts);
}
