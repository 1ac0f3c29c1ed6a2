#include "cli/dump_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/agent_client.h"
#include "cli/dump_output.h"
#include "cli/option_values.h"
#include "export/dump_document.h"
#include "cli/options.h"
#include "cli/record.h"
#include "engine/dump.h"
#include "pybpfprof/abi.h"

namespace pbp {

namespace {

// Exit codes: record.h's (kExitError: cannot read the processes; kExitBadInput).

constexpr const char* kDumpExitCodes =
    "Exit codes: 0 ok; 1 cannot read the processes (not root and no agent, or a process the agent does not let\n"
    "you read); 2 bad input (arguments, a PID that does not exist or is not CPython, an unknown cgroup, no\n"
    "CPython process found).";

int err(const std::string& msg, int code) {
    std::cerr << "pybpfprof dump: " << msg << "\n";
    return code;
}

}  // namespace

Status obtain_dump(const DumpRequest& req, DumpResult& out) {
    // Reading another process's memory needs root here; otherwise the agent reads it, for the
    // caller's own processes, when one runs.
    if (geteuid() == 0) return gather_dump(req, out);
    const std::string socket = agent_socket_path();
    if (agent_reachable(socket)) return dump_via_agent(req, socket, out);
    return Status::cannot_profile(
        "reading another process's Python stacks needs root, or the pybpfprof agent: run it with sudo, or have an "
        "administrator start the agent once (sudo systemctl enable --now pybpfprof-agent), after which you can dump "
        "your own processes as you are; no agent answers at " + socket);
}

int dump_command(int argc, char** argv) {
    CLI::App app{"pybpfprof dump: print every thread's current Python stack (asleep or not) of running CPython\n"
                 "processes, innermost frame first. The target is never stopped or signalled: its memory is read\n"
                 "with process_vm_readv. See docs/dump.md.",
                 "pybpfprof dump"};
    app.footer(kDumpExitCodes);
    app.formatter(help_formatter(false));
    std::vector<std::string> pids;
    DumpRequest req;
    bool json = false;
    std::string max_depth;
    OptionValues values;  // what each option wants, for the one given none
    values.add(app.add_option("-p,--pid", pids, "Dump this running process (repeatable)"), "a process ID", "1234");
    app.add_flag("-a,--all-python", req.all_python,
                 "Dump every CPython process on the machine (through the agent: every one of yours)");
    values.add(app.add_option("-c,--cgroup", req.cgroups,
                              "Dump every Python process in this cgroup v2 (a path, absolute or relative to the "
                              "cgroup2 mount), Kubernetes pod (UID or namespace/name) or container (ID or unique "
                              "prefix) (repeatable)"),
               "a cgroup v2 path, a Kubernetes pod (UID or namespace/name) or a container ID", "default/web-0");
    values.add(app.add_option("--node-root", req.node_root,
                              "Where the node's root file system is (for Kubernetes pods and containers; default /)"),
               "the directory where the node's root file system is mounted", "/host");
    values.add(app.add_option("--max-depth", max_depth,
                              "Deepest Python stack to read (default " + std::to_string(PBP_MAX_DEPTH) + ")"),
               "a whole number of frames from 1 to " + std::to_string(PBP_MAX_DEPTH), "64");
    app.add_flag("--async", req.async_tasks,
                 "Every asyncio task too (CPython 3.14+): name, state, coroutine stack, and who awaits whom, as "
                 "python -m asyncio pstree shows it (docs/asyncio.md)");
    app.add_flag("--json", json, "Print one JSON document (fields: docs/dump.md)");
    const std::vector<std::string> words(argv + 1, argv + argc);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        return err(values.parse_error(app, e, words, "pybpfprof dump"), kExitBadInput);
    }
    if (std::string e = values.value_taken_from_an_option(app, words, "pybpfprof dump"); !e.empty())
        return err(e, kExitBadInput);
    if (std::string error; !parse_pids(pids, req.pids, error)) return err(error, kExitBadInput);
    if (!max_depth.empty()) {
        long long v = 0;
        if (!parse_whole(max_depth, 1, PBP_MAX_DEPTH, v))
            return err("--max-depth must be a whole number of frames from 1 to " + std::to_string(PBP_MAX_DEPTH) +
                           " (got '" + max_depth + "')",
                       kExitBadInput);
        req.max_depth = static_cast<int>(v);
    }
    // --all-python --cgroup X means every Python process in X, as for profiling.
    const int modes = (!req.pids.empty()) + (req.all_python || !req.cgroups.empty());
    if (modes == 0) return err("nothing to dump; give --pid PID, --all-python or --cgroup POD|CGROUP", kExitBadInput);
    if (modes > 1) return err("choose one of --pid and --all-python/--cgroup, not both", kExitBadInput);

    DumpResult dump;
    Status st = obtain_dump(req, dump);
    if (!st.ok()) return err(st.message, st.failure == Failure::BadInput ? kExitBadInput : kExitError);
    if (json) {
        std::cout << dump_json(dump).dump(2) << "\n";
    } else {
        for (const auto& w : dump.warnings) std::cerr << "pybpfprof dump: warning: " << w << "\n";
        write_dump_text(dump, std::cout);
    }
    std::cout.flush();
    return std::cout ? 0 : kExitError;
}

}  // namespace pbp
