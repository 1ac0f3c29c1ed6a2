#include "cli/options.h"

#include <CLI/CLI.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/option_values.h"
#include "export/exporter.h"
#include "pybpfprof/abi.h"
#include "sys/procfs.h"

namespace pbp {

namespace {

// a and b name one file: the same path once absolute and normal (it need not exist yet), or,
// for files that exist, the same inode (a hard or symbolic link).
bool same_path(const std::string& a, const std::string& b) {
    std::error_code ea, eb;
    const auto ca = std::filesystem::weakly_canonical(a, ea), cb = std::filesystem::weakly_canonical(b, eb);
    if (!ea && !eb && ca == cb) return true;
    struct stat sa{}, sb{};
    return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// A number option as a sentence when it is wrong, never CLI11's raw range text: the value
// is parsed here, and 'what' says what it must be.
std::string number_error(const std::string& opt, const std::string& value, const std::string& what) {
    return opt + " " + what + " (got '" + value + "')";
}

constexpr const char* kExitCodes =
    "Exit codes:\n"
    "  0  the profile was written\n"
    "  1  cannot profile (privileges, kernel, BPF) or cannot write the output (the samples then go to a\n"
    "     fallback file named on stderr)\n"
    "  2  bad input: arguments, a PID that does not exist or is not CPython, an output directory that\n"
    "     does not exist, or no CPython process found (in a launched command, a --cgroup or an\n"
    "     --all-python run)\n"
    "  3  a --pid target exited during the run (its samples are kept and written)";

}  // namespace

bool parse_double(const std::string& s, double& out) {
    if (s.empty() || isspace(static_cast<unsigned char>(s[0]))) return false;
    char* end = nullptr;
    errno = 0;
    out = std::strtod(s.c_str(), &end);
    return errno == 0 && end && *end == '\0' && std::isfinite(out);
}

bool parse_whole(const std::string& s, long long lo, long long hi, long long& out) {
    if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return isdigit(static_cast<unsigned char>(c)); }))
        return false;
    errno = 0;
    out = std::strtoll(s.c_str(), nullptr, 10);
    return errno == 0 && out >= lo && out <= hi;
}

bool parse_duration_with_unit(const std::string& s, uint64_t& ns) {
    // The longest unit first: "ms" and "us" end in "s" too.
    static const std::pair<const char*, double> units[] = {{"us", 1e3}, {"\xc2\xb5s", 1e3}, {"ms", 1e6}, {"s", 1e9}};
    for (auto& [unit, scale] : units) {
        const std::string u = unit;
        if (s.size() <= u.size() || s.compare(s.size() - u.size(), u.size(), u) != 0) continue;
        double v = 0;
        if (!parse_double(s.substr(0, s.size() - u.size()), v) || v < 0 || v * scale > 1e18) return false;
        // Whole microseconds: what the agent's protocol carries, and finer than any interval
        // the scheduler gives a meaning to.
        ns = static_cast<uint64_t>(std::llround(v * scale / 1e3)) * 1000;
        return true;
    }
    return false;
}

bool parse_pid(const std::string& opt, const std::string& s, pid_t& out, std::string& error) {
    const bool digits =
        !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return isdigit(static_cast<unsigned char>(c)); });
    if (!digits || s.find_first_not_of('0') == std::string::npos) {
        error = number_error(opt, s, "must be a process ID, a positive whole number");
        return false;
    }
    // Every PID is below the kernel's pid_max, and pid_max is at most PID_MAX_LIMIT.
    constexpr long kPidMaxLimit = 4194304;
    const long pid_max = procfs::pid_max();
    const long above = pid_max > 0 ? pid_max : kPidMaxLimit;
    long long v = 0;
    if (!parse_whole(s, 1, above - 1, v)) {  // (a number too long for parse_whole too)
        error = opt + " " + s + ": no such process (" +
                (pid_max > 0 ? "PIDs on this machine go up to " : "PIDs go up to at most ") +
                std::to_string(above - 1) + ")";
        return false;
    }
    out = static_cast<pid_t>(v);
    return true;
}

bool parse_pids(const std::vector<std::string>& given, std::vector<pid_t>& out, std::string& error) {
    for (const std::string& p : given) {
        pid_t pid = 0;
        if (!parse_pid("--pid", p, pid, error)) return false;
        out.push_back(pid);
    }
    return true;
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
    return s;
}

bool parse_options(int argc, char** argv, Options& o, int& exit_code) {
    auto fail = [&](const std::string& msg) {
        std::cerr << "pybpfprof: " << msg << "\n";
        exit_code = 2;
        return false;
    };
    // `pybpfprof record ...` is the default command, spelled out as py-spy users do.
    std::vector<char*> args(argv, argv + argc);
    if (args.size() > 1) {
        std::string first = args[1];
        if (first == "record") args.erase(args.begin() + 1);
        else if (first == "top" || first == "dump")  // dump: main() routes it to dump_command first
            return fail("'pybpfprof " + first + "' is not available yet; to profile a program named " + first +
                        ", run: pybpfprof -- " + first);
    }

    CLI::App app{"pybpfprof: a system-wide CPython profiler built on eBPF.\n"
                 "Samples Python stacks in the kernel: no restart, no instrumentation, no ptrace. On-CPU time by\n"
                 "default; --mode wall adds where threads wait (off CPU), --mode gil keeps the GIL holders.\n"
                 "Usage: pybpfprof [record] [OPTIONS] [-- COMMAND ARGS]\n"
                 "Other commands (see their --help):\n"
                 "  pybpfprof dump --pid PID           every thread's Python stack now\n"
                 "  pybpfprof merge FILE.pbp... -o OUT  merge profiles, from several machines too\n"
                 "  pybpfprof agent                    the agent, through which users profile their own processes",
                 "pybpfprof"};
    app.footer(kExitCodes);
    app.formatter(help_formatter(true));
    app.set_version_flag("-V,--version", std::string("pybpfprof ") + PYBPFPROF_VERSION);
    std::vector<std::string> pids, formats_given;
    std::string rate, duration, max_depth, mode, min_block;
    OptionValues values;  // what each option wants, for the one given none
    values.add(app.add_option("-p,--pid", pids, "Profile this running process (repeatable)"), "a process ID", "1234");
    app.add_flag("-s,--subprocesses", o.subprocesses,
                 "With --pid: their child processes too, those running now and those started later");
    app.add_flag("-a,--all-python", o.all_python,
                 "Profile every CPython process on the machine, including ones started later");
    values.add(app.add_option("-c,--cgroup", o.cgroups,
                              "Profile every Python process in this cgroup v2 (a path, absolute or relative to the "
                              "cgroup2 mount), Kubernetes pod (UID or namespace/name) or container (ID or unique "
                              "prefix), including ones started later (repeatable)"),
               "a cgroup v2 path, a Kubernetes pod (UID or namespace/name) or a container ID", "default/web-0");
    values.add(app.add_option("--node-root", o.node_root,
                              "Where the node's root file system is (for /var/log/pods, /var/log/containers and "
                              "/var/lib/kubelet/pods; default /)"),
               "the directory where the node's root file system is mounted", "/host");
    values
        .add(app.add_option("--group-by", o.group_by,
                            "Group outputs by process (default) or by pod: one speedscope profile and one folded "
                            "root per pod"),
             "process or pod", "pod")
        ->check(group_by_check());
    values.add(app.add_option("-r,--rate", rate, "Samples per second per CPU, 1 to 10000 (default 99)"),
               "a number of samples per second from 1 to 10000", "999");
    values.add(app.add_option("-d,--duration", duration,
                              "Seconds to profile (default: until Ctrl-C or until the targets exit)"),
               "a number of seconds", "10");
    values.add(app.add_option("--mode", mode,
                              "What to sample: cpu (default: on-CPU stacks only), wall (on-CPU stacks and every "
                              "off-CPU interval of the targets' threads, each weighted by its duration and ending in "
                              "a leaf that says why the thread waited), gil (only the on-CPU samples that hold the "
                              "GIL); see docs/modes.md"),
               "cpu, wall or gil", "wall");
    values.add(app.add_option("--min-block", min_block,
                              "With --mode wall: off-CPU intervals shorter than this are summed per thread and "
                              "reason and kept as one sample when the sum reaches it, never dropped; from 10us to 1s "
                              "(default 1ms; units us, ms, s)"),
               "a duration with its unit from 10us to 1s", "500us");
    app.add_flag("--native", o.native,
                 "Native and kernel frames too, with the Python frames at their place: C extensions, libpython, "
                 "libc, the kernel (innermost first); kernel 5.17+");
    app.add_flag("--async", o.async_tasks,
                 "Put each sample of a thread running an asyncio task under the task and the tasks awaiting it "
                 "(<task main> -> <task fetch-1> -> its coroutine frames); CPython 3.14+, see docs/asyncio.md");
    values.add(app.add_option("-o,--output", o.output,
                              "Output file, or - for standard output (a launched command's own output then goes to "
                              "standard error) (default: pybpfprof-<target>-<timestamp>.<ext>)"),
               "a file name, or - for standard output", "profile.html");
    std::string formats;
    for (auto& n : exporter_names()) formats += (formats.empty() ? "" : "|") + n;
    std::string format;
    values.add(app.add_option("-f,--format", format,
                              "Output format: " + formats +
                                  " (default: from the -o extension: .html, .folded, .pb.gz, .json, .svg, .pbp; "
                                  "speedscope when there is no -o)"),
               "an output format, one of " + formats, "html");
    values.add(app.add_option("--report", o.report, "Also write the HTML performance report to this file (like -f html)"),
               "a file name for the HTML report", "report.html");
    values.add(app.add_option("--max-depth", max_depth,
                              "Deepest Python stack to collect (default: the most the kernel allows)"),
               "a whole number of frames from 1 to " + std::to_string(PBP_MAX_DEPTH), "64");
    values.add(app.add_option("--btf", o.btf_path, "Use this BTF file instead of /sys/kernel/btf/vmlinux"),
               "a BTF file", "vmlinux.btf");
    app.add_flag("-q,--quiet", o.quiet, "No live status line and no progress messages (warnings and errors still come)");
    app.add_flag("--no-summary", o.no_summary, "Do not print the top-functions summary");
    app.add_option("command", o.command, "Command to launch and profile (after --)")->type_name("COMMAND ARGS");
    app.positionals_at_end();
    // --help names what each option takes (CLI11: TEXT, as each is read as a string to be
    // checked with a sentence of its own).
    for (auto [name, type] : std::initializer_list<std::pair<const char*, const char*>>{
             {"--pid", "PID"}, {"--cgroup", "CGROUP"}, {"--node-root", "DIR"}, {"--group-by", "process|pod"},
             {"--rate", "HZ"}, {"--duration", "SECONDS"}, {"--mode", "cpu|wall|gil"}, {"--min-block", "DURATION"},
             {"--output", "FILE"}, {"--format", "FORMAT"}, {"--report", "FILE"}, {"--max-depth", "FRAMES"},
             {"--btf", "FILE"}})
        app.get_option(name)->type_name(type);

    const std::vector<std::string> words(args.begin() + 1, args.end());
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::CallForHelp& e) {
        exit_code = app.exit(e);
        return false;
    } catch (const CLI::CallForVersion& e) {
        exit_code = app.exit(e);
        return false;
    } catch (const CLI::ParseError& e) {
        return fail(values.parse_error(app, e, words, "pybpfprof"));
    }
    if (std::string e = values.value_taken_from_an_option(app, words, "pybpfprof"); !e.empty()) return fail(e);

    if (std::string error; !parse_pids(pids, o.pids, error)) return fail(error);
    if (!rate.empty() && (!parse_double(rate, o.rate_hz) || o.rate_hz < 1 || o.rate_hz > 10000))
        return fail(number_error("-r/--rate", rate, "must be a number of samples per second from 1 to 10000"));
    if (!duration.empty() && (!parse_double(duration, o.duration_s) || o.duration_s <= 0))
        return fail(number_error("-d/--duration", duration, "must be a positive number of seconds"));
    if (!duration.empty() && o.duration_s < kMinDurationS)
        return fail(number_error("-d/--duration", duration,
                                 "must be at least 0.1 s: a shorter run ends before a program can be found and sampled"));
    if (!max_depth.empty()) {
        long long v = 0;
        if (!parse_whole(max_depth, 1, PBP_MAX_DEPTH, v))
            return fail(number_error("--max-depth", max_depth,
                                     "must be a whole number of frames from 1 to " + std::to_string(PBP_MAX_DEPTH)));
        o.max_depth = static_cast<int>(v);
    }
    if (!mode.empty() && !parse_mode(lower(mode), o.mode))
        return fail("--mode " + mode + " is not a mode; choose cpu (on-CPU time), wall (on- and off-CPU time) or gil "
                    "(on-CPU time holding the GIL)");
    if (!min_block.empty()) {
        uint64_t ns = 0;
        if (!parse_duration_with_unit(min_block, ns) || ns < kMinMinBlockNs || ns > kMaxMinBlockNs)
            return fail(number_error("--min-block", min_block,
                                     "must be a duration with its unit from 10us to 1s, such as 500us, 1ms or 0.2s"));
        if (o.mode != ProfileMode::Wall)
            return fail("--min-block only applies to --mode wall (it bounds the off-CPU intervals kept one by one); "
                        "add --mode wall, or drop --min-block");
        o.min_block_ns = ns;
    }
    if (!format.empty()) {
        const auto names = exporter_names();
        if (std::find(names.begin(), names.end(), lower(format)) == names.end())
            return fail("-f " + format + " is not an output format; choose one of " + formats);
        o.format = lower(format);
    } else if (!o.output.empty() && o.output != "-") {
        // No -f: the format follows the -o file's extension (report.html, out.pb.gz, ...).
        std::string guessed = format_for_path(o.output);
        if (guessed.empty())
            return fail("cannot tell the output format from the name " + o.output + "; give -f " + formats +
                        ", or end the name in " + known_extensions_text());
        o.format = guessed;
    }
    // The report and the profile in one place: one would replace or follow the other.
    if (!o.report.empty() && o.report == "-" && o.output == "-")
        return fail("-o - and --report - would both write to standard output; send one of them to a file");
    if (!o.report.empty() && o.report != "-" && !o.output.empty() && o.output != "-" && same_path(o.output, o.report))
        return fail("--report " + o.report + " is the -o file too, and the report would replace the profile; give "
                    "the report a name of its own (e.g. --report report.html)");
    // A command word after the options ("pybpfprof -d 5 top") would launch a program of that name:
    // pybpfprof's own commands come first, and a program with such a name goes after --.
    if (!o.command.empty() && std::find(words.begin(), words.end(), "--") == words.end()) {
        const std::string& c = o.command[0];
        if (c == "top")
            return fail("'top' after the options would launch the program top; 'pybpfprof top' is not available "
                        "yet; to profile a program named top, put it after --: pybpfprof [OPTIONS] -- top");
        if (c == "record" || c == "dump" || c == "merge" || c == "agent")
            return fail("'" + c + "' after the options would launch a program named " + c +
                        "; pybpfprof's commands come first: pybpfprof " + c + " [OPTIONS] (see pybpfprof " + c +
                        " --help); to profile a program named " + c + ", put it after --: pybpfprof [OPTIONS] -- " +
                        c);
    }
    // --all-python --cgroup X means every Python process in X: the same as --cgroup X.
    int modes = (!o.pids.empty()) + (o.all_python || !o.cgroups.empty()) + (!o.command.empty());
    if (modes == 0)
        return fail("nothing to profile; give --pid PID, --all-python, --cgroup POD|CGROUP, or -- COMMAND ARGS");
    if (modes > 1) return fail("choose one of --pid, --all-python/--cgroup and -- COMMAND, not several");
    if (o.subprocesses && o.pids.empty())
        return fail("--subprocesses goes with --pid (a launched command's children, --all-python and --cgroup "
                    "include child processes already)");
    return true;
}

}  // namespace pbp
