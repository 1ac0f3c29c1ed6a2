#include "cli/run.h"

#include <unistd.h>

#include "cli/agent_client.h"
#include "cli/record.h"
#include "cli/terminal.h"
#include "sys/preflight.h"

namespace pbp {

int run_profile(const Options& opts) {
    // A binary profile on standard output that is a terminal would only garble it (as curl
    // refuses to): said before anything runs, locally or through the agent.
    if (opts.output == "-" && (opts.format == "pprof" || opts.format == "pbp") && isatty(STDOUT_FILENO)) {
        err("-o - with -f " + opts.format + " would write a binary profile to this terminal; redirect standard "
            "output (> profile." + (opts.format == "pprof" ? std::string("pb.gz") : std::string("pbp")) +
            ") or give -o FILE");
        return kExitBadInput;
    }
    // Without the privileges to load BPF, the agent profiles for this user, when one runs.
    std::string error;
    if (!check_privileges(error)) {
        const std::string socket = agent_socket_path();
        if (agent_reachable(socket)) return run_via_agent(opts, socket);
        err("profiling needs root (or CAP_BPF and CAP_PERFMON), or the pybpfprof agent: run it with sudo, or "
            "have an administrator start the agent once (sudo systemctl enable --now pybpfprof-agent), after "
            "which you can profile your own processes as you are; no agent answers at " + socket);
        return kExitError;
    }
    return run_record(opts);
}

}  // namespace pbp
