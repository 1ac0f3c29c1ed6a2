#include "cli/agent_command.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "agent/protocol.h"
#include "agent/server.h"
#include "cli/agent_client.h"
#include "cli/option_values.h"
#include "cli/options.h"
#include "cli/terminal.h"

namespace pbp {

namespace {

// Instead of CLI11's Range ("Value -1 not in range 0.000000 to 2678400.000000"), a sentence
// that says what the option wants.
CLI::Validator number_from(double lo, double hi, bool whole, const std::string& what) {
    return CLI::Validator(
        [=](std::string& s) -> std::string {
            double d = 0;
            long long n = 0;
            const bool ok = whole ? parse_whole(s, static_cast<long long>(lo), static_cast<long long>(hi), n)
                                  : parse_double(s, d) && d >= lo && d <= hi;
            return ok ? "" : "must be " + what + " (got '" + s + "')";
        },
        "");
}

}  // namespace

int agent_command(int argc, char** argv) {
    CLI::App app{"pybpfprof agent: one privileged agent per machine, through which every user profiles the processes "
                 "they own.\nRun it as root (the systemd unit pybpfprof-agent does). `pybpfprof agent status` lists "
                 "the sessions you may see.",
                 "pybpfprof agent"};
    app.formatter(help_formatter(false));
    app.footer(
        "Exit codes: 0 the agent stopped on SIGTERM, SIGINT or SIGHUP (status: the sessions were listed); 1 it could "
        "not start (not root, the socket, the kernel, BPF; status: no agent answered); 2 bad arguments.");
    agent::AgentConfig cfg;
    cfg.socket_path = agent_socket_path();
    double max_session_mb = static_cast<double>(cfg.max_session_bytes >> 20);
    OptionValues values;  // what each option wants, for the one given none
    // A number option: its check and, given none, the same words for what it wants.
    auto number = [&](CLI::Option* opt, double lo, double hi, bool whole, const std::string& what,
                      const std::string& example) {
        values.add(opt, what, example)->check(number_from(lo, hi, whole, what));
    };
    values.add(app.add_option("--socket", cfg.socket_path,
                              "The Unix socket (default " + std::string(agent::kDefaultSocket) +
                                  ", or $PYBPFPROF_AGENT_SOCKET)"),
               "the path of the agent's Unix socket", agent::kDefaultSocket);
    values.add(app.add_option("--admin-group", cfg.admin_group,
                              "Members of this group may profile any process, --all-python and --cgroup included "
                              "(root always may)"),
               "a group name", "pybpfprof-admins");
    number(app.add_option("--max-sessions-per-user", cfg.max_sessions_per_user, "Sessions one user may hold at once"),
           1, 1000, true, "a whole number of sessions from 1 to 1000", "8");
    number(app.add_option("--max-duration", cfg.max_duration_s,
                          "Longest session of a user who is not an admin, in seconds (0: no limit)"),
           0, 31 * 86400, false, "a number of seconds from 0 (no limit) to 2678400 (31 days)", "600");
    number(app.add_option("--max-session-mb", max_session_mb, "Memory one session's samples may hold, in MiB"), 0.01,
           1048576, false, "a number of MiB from 0.01 to 1048576", "1024");
    number(app.add_option("--max-connections-per-user", cfg.max_connections_per_user,
                          "Connections one user who is not an admin may hold at once"),
           1, 100000, true, "a whole number of connections from 1 to 100000", "128");
    number(app.add_option("--idle-timeout", cfg.idle_timeout_s, "Seconds a connection without a session may stay silent"),
           1, 86400, false, "a number of seconds from 1 to 86400", "60");
    values.add(app.add_option("--btf", cfg.btf_path, "Use this BTF file instead of /sys/kernel/btf/vmlinux"),
               "a BTF file", "vmlinux.btf");
    values.add(app.add_option("--node-root", cfg.node_root, "Where the node's root file system is (in a container: /host)"),
               "the directory where the node's root file system is mounted", "/host");
    bool no_native = false;
    app.add_flag("--no-native", no_native,
                 "Serve no --native session: the capture of user stacks is not loaded, and its 32 MiB ring buffer "
                 "not allocated");
    auto* status = app.add_subcommand("status", "List the sessions (yours; every session for root and admins)");
    status->fallthrough();  // --socket after "status" too
    const std::vector<std::string> words(argv + 1, argv + argc);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        err(values.parse_error(app, e, words, "pybpfprof agent"));
        return 2;
    }
    if (std::string e = values.value_taken_from_an_option(app, words, "pybpfprof agent"); !e.empty()) {
        err(e);
        return 2;
    }
    if (status->parsed()) return agent_status(cfg.socket_path);
    cfg.max_session_bytes = static_cast<size_t>(max_session_mb * (1 << 20));
    cfg.native = !no_native;
    cfg.knobs = Knobs::from_environment();
    install_signals();
    std::string error;
    int code = agent::run_agent(cfg, g_stop_signal, error);
    if (code) err("agent: " + error);
    return code;
}

}  // namespace pbp
