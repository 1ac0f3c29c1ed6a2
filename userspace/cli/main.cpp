// pybpfprof: a system-wide CPython profiler built on eBPF.
#include <unistd.h>

#include <csignal>
#include <cstring>

#include "cli/agent_client.h"
#include "cli/agent_command.h"
#include "cli/merge_command.h"
#include "cli/options.h"
#include "cli/record.h"
#include "cli/terminal.h"
#include "sys/preflight.h"

int main(int argc, char** argv) {
    // A closed pipe (a launched command that died, a closed stdout) is an error to report,
    // never a reason to die before the samples are written.
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "agent") == 0) return pbp::agent_command(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "merge") == 0) return pbp::merge_command(argc - 1, argv + 1);
    pbp::Options opts;
    int code = 0;
    if (!pbp::parse_options(argc, argv, opts, code)) return code;
    // Without the privileges to load BPF, the agent profiles for this user, when one runs.
    std::string error;
    if (!pbp::check_privileges(error)) {
        const std::string socket = pbp::agent_socket_path();
        if (pbp::agent_reachable(socket)) return pbp::run_via_agent(opts, socket);
        pbp::err("profiling needs root (or CAP_BPF and CAP_PERFMON), or the pybpfprof agent: run it with sudo, or "
                 "have an administrator start the agent once (sudo systemctl enable --now pybpfprof-agent), after "
                 "which you can profile your own processes as you are; no agent answers at " + socket);
        return pbp::kExitError;
    }
    return pbp::run_record(opts);
}
