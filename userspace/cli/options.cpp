#include "cli/options.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "export/exporter.h"
#include "pybpfprof/abi.h"

namespace pbp {

bool parse_options(int argc, char** argv, Options& o, int& exit_code) {
    CLI::App app{"pybpfprof: a system-wide CPython profiler built on eBPF.\n"
                 "Samples on-CPU Python stacks in the kernel: no restart, no instrumentation, no ptrace.",
                 "pybpfprof"};
    app.set_version_flag("-V,--version", std::string("pybpfprof ") + PYBPFPROF_VERSION);
    app.add_option("-p,--pid", o.pids, "Profile this running process (repeatable)")->check(CLI::PositiveNumber);
    app.add_flag("-a,--all-python", o.all_python,
                 "Profile every CPython process on the machine, including ones started later");
    app.add_option("-c,--cgroup", o.cgroups,
                   "Profile every Python process in this cgroup v2 (a path, absolute or relative to the cgroup2 "
                   "mount), Kubernetes pod (UID or namespace/name) or container (ID or unique prefix), including "
                   "ones started later (repeatable)");
    app.add_option("--node-root", o.node_root,
                   "Where the node's root file system is (for /var/log/pods, /var/log/containers and "
                   "/var/lib/kubelet/pods; default /)");
    app.add_option("--group-by", o.group_by,
                   "Group outputs by process (default) or by pod: one speedscope profile and one folded root "
                   "per pod")
        ->check(CLI::IsMember({"process", "pod"}));
    app.add_option("-r,--rate", o.rate_hz, "Samples per second per CPU (default 99)")
        ->check(CLI::Range(1.0, 10000.0));
    app.add_option("-d,--duration", o.duration_s,
                   "Seconds to profile (default: until Ctrl-C or until the targets exit)")
        ->check(CLI::PositiveNumber);
    app.add_option("-o,--output", o.output, "Output file (default: pybpfprof-<target>-<timestamp>.<ext>)");
    std::string formats;
    for (auto& n : exporter_names()) formats += (formats.empty() ? "" : "|") + n;
    app.add_option("-f,--format", o.format, "Output format: " + formats +
                                      " (default: from the -o extension: .html, .folded, .pb.gz; else speedscope)")
        ->check(CLI::IsMember(exporter_names()));
    app.add_option("--report", o.report, "Also write the HTML performance report to this file (like -f html)");
    app.add_option("--max-depth", o.max_depth, "Deepest Python stack to collect (default: the most the kernel allows)")
        ->check(CLI::Range(1, PBP_MAX_DEPTH));
    app.add_option("--btf", o.btf_path, "Use this BTF file instead of /sys/kernel/btf/vmlinux");
    app.add_flag("-q,--quiet", o.quiet, "No live status line");
    app.add_flag("--no-summary", o.no_summary, "Do not print the top-functions summary");
    app.add_option("command", o.command, "Command to launch and profile (after --)");
    app.positionals_at_end();

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        exit_code = app.exit(e);
        return false;
    } catch (const CLI::CallForVersion& e) {
        exit_code = app.exit(e);
        return false;
    } catch (const CLI::ParseError& e) {
        std::cerr << "pybpfprof: " << e.what() << "; see pybpfprof --help\n";
        exit_code = 2;
        return false;
    }
    // No -f: the format follows the -o file's extension (report.html, out.pb.gz, ...).
    if (!app.count("--format") && !o.output.empty()) {
        if (std::string guessed = format_for_path(o.output); !guessed.empty()) o.format = guessed;
    }
    // --all-python --cgroup X means every Python process in X: the same as --cgroup X.
    int modes = (!o.pids.empty()) + (o.all_python || !o.cgroups.empty()) + (!o.command.empty());
    if (modes == 0) {
        std::cerr << "pybpfprof: nothing to profile; give --pid PID, --all-python, --cgroup POD|CGROUP, or -- COMMAND ARGS\n";
        exit_code = 2;
        return false;
    }
    if (modes > 1) {
        std::cerr << "pybpfprof: choose one of --pid, --all-python/--cgroup and -- COMMAND, not several\n";
        exit_code = 2;
        return false;
    }
    return true;
}

}  // namespace pbp
