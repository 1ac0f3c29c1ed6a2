#include "cli/pyspy_options.h"

#include <iostream>
#include <string>
#include <vector>

#include "cli/record.h"

namespace pbp {

namespace {

constexpr const char* kUsage =
    "Usage: pybpfprof-py-spy record [OPTIONS] (-p PID | [--] COMMAND ARGS...)\n"
    "       pybpfprof-py-spy dump -p PID [--native]\n"
    "       pybpfprof-py-spy top -p PID       (not available yet)\n";

constexpr const char* kTopHelp =
    "pybpfprof-py-spy: py-spy's command line for pybpfprof, the eBPF CPython profiler.\n"
    "Tools that run py-spy (Ray's dashboard) can run this instead: link it as py-spy on their PATH.\n"
    "It profiles like pybpfprof: with BPF when it may load it (root, or CAP_BPF and CAP_PERFMON), else\n"
    "through the pybpfprof agent, so that any user profiles their own processes without sudo or\n"
    "SYS_PTRACE. The target is never stopped, attached to or signalled.\n"
    "\n"
    "%USAGE%"
    "\n"
    "Commands:\n"
    "  record   Sample a process (or a command it runs) and write a flame graph or other profile\n"
    "  dump     Print the current Python stack of every thread of a process\n"
    "  top      A live view of the functions that take the most time: not available yet (exit 2)\n"
    "\n"
    "Options:\n"
    "  -h, --help       This help (record --help: its options)\n"
    "  -V, --version    The version\n";

constexpr const char* kRecordHelp =
    "pybpfprof-py-spy record: sample a Python process with pybpfprof and write a profile, as py-spy record does.\n"
    "\n"
    "Usage: pybpfprof-py-spy record [OPTIONS] (-p PID | [--] COMMAND ARGS...)\n"
    "\n"
    "Options:\n"
    "  -p, --pid PID          The process to profile (one)\n"
    "  -o, --output FILE      Where to write the profile (default: pybpfprof-pid<PID>-<time>.<ext>; - is stdout)\n"
    "  -f, --format FORMAT    flamegraph (default): an interactive SVG flame graph (click to zoom, Ctrl-F\n"
    "                         to search); raw: folded stacks (flamegraph.pl's input); speedscope: JSON\n"
    "                         for https://www.speedscope.app. The -o name does not change the format.\n"
    "  -d, --duration S       Seconds to sample (default: unlimited, until Ctrl-C or the target exits)\n"
    "  -r, --rate HZ          Samples per second (default 100; 1 to 10000)\n"
    "  -s, --subprocesses     The process's children too, those running and those started later\n"
    "                         (a launched COMMAND's children are always profiled)\n"
    "  -t, --threads          Accepted: every profile is split by thread already\n"
    "      --full-filenames   Accepted: file names are always shown in full\n"
    "      --nonblocking      Accepted: pybpfprof never stops or pauses the target (it reads it from BPF\n"
    "                         and /proc/PID/mem while it runs), so every recording is non-blocking\n"
    "  -i, --idle             Idle threads too: pybpfprof's --mode wall. Every thread's time off CPU is\n"
    "                         sampled with the stack it waits in, under a leaf that says why ([sleeping],\n"
    "                         [waiting for I/O], [waiting for the GIL], [runnable, waiting for a CPU])\n"
    "  -g, --gil              Only the samples that hold the GIL: pybpfprof's --mode gil. With --idle too,\n"
    "                         still --mode gil: a thread holds the GIL to run Python, so py-spy's idle\n"
    "                         GIL holders are not kept (off-CPU time is only sampled in wall mode)\n"
    "  -n, --native           Native (C/C++) and kernel frames with the Python ones, at their place:\n"
    "                         pybpfprof's --native (kernel 5.17+); the target is not stopped\n"
    "      --hideprogress     No progress line\n"
    "  -h, --help             This help\n"
    "\n"
    "Not supported yet (each is a one-line error and exit 2, never silently ignored):\n"
    "  -F, --function         lines aggregated to the function's first line\n"
    "      --nolineno         frames without line numbers\n"
    "  -f chrometrace         Chrome trace output\n"
    "\n"
    "The file is written when the duration ends, on Ctrl-C or SIGTERM, or when the target exits (then\n"
    "with what was sampled), and its name is printed on stderr.\n"
    "Exit codes: 0 the profile was written (also when the target exited during the run); 1 cannot\n"
    "profile (no privileges and no agent, kernel, BPF, writing the file); 2 bad input (an option or value\n"
    "that is wrong or not supported, a PID that does not exist, is not CPython or is not yours).\n";

bool fail(int& code, const std::string& msg) {
    std::cerr << kPyspyProgram << ": " << msg << "\n";
    code = kExitBadInput;
    return false;
}

// A sentence that names the program itself ("pybpfprof-py-spy dump is ..."): no prefix.
bool refuse(int& code, const std::string& sentence) {
    std::cerr << sentence << "\n";
    code = kExitBadInput;
    return false;
}

bool print(int& code, const std::string& text) {
    std::cout << text;
    code = kExitOk;
    return false;
}

std::string top_help() {
    std::string s = kTopHelp;
    s.replace(s.find("%USAGE%"), 7, kUsage);
    return s;
}

enum class Id {
    Pid, Output, Format, Duration, Rate, Subprocesses, Threads, FullFilenames, Nonblocking, HideProgress, Help,
    Native, Idle, Gil, Function, NoLineNo,
};

struct Opt {
    Id id;
    const char* long_name;
    char short_name;  // 0: none
    bool takes_value;
    const char* unsupported;  // why it is not honoured yet, or nullptr
};

const Opt kRecordOpts[] = {
    {Id::Pid, "pid", 'p', true, nullptr},
    {Id::Output, "output", 'o', true, nullptr},
    {Id::Format, "format", 'f', true, nullptr},
    {Id::Duration, "duration", 'd', true, nullptr},
    {Id::Rate, "rate", 'r', true, nullptr},
    {Id::Subprocesses, "subprocesses", 's', false, nullptr},
    {Id::Threads, "threads", 't', false, nullptr},
    {Id::FullFilenames, "full-filenames", 0, false, nullptr},
    {Id::Nonblocking, "nonblocking", 0, false, nullptr},
    {Id::HideProgress, "hideprogress", 0, false, nullptr},
    {Id::Help, "help", 'h', false, nullptr},
    {Id::Native, "native", 'n', false, nullptr},
    {Id::Idle, "idle", 'i', false, nullptr},
    {Id::Gil, "gil", 'g', false, nullptr},
    {Id::Function, "function", 'F', false,
     "aggregating samples by a function's first line is not supported yet: frames keep the sampled line; run "
     "without --function"},
    {Id::NoLineNo, "nolineno", 0, false,
     "frames without line numbers are not supported yet: every frame shows its file:line; run without --nolineno"},
};

const Opt* find_long(const std::string& name) {
    for (const Opt& o : kRecordOpts)
        if (name == o.long_name) return &o;
    return nullptr;
}

const Opt* find_short(char c) {
    for (const Opt& o : kRecordOpts)
        if (o.short_name && c == o.short_name) return &o;
    return nullptr;
}

// "-p/--pid", or "--nonblocking" for an option without a short name.
std::string spelled(const Opt& o) {
    std::string s = o.short_name ? std::string("-") + o.short_name + "/" : std::string();
    return s + "--" + o.long_name;
}

std::string number_error(const Opt& o, const std::string& value, const std::string& what) {
    return spelled(o) + " " + what + " (got '" + value + "')";
}

// Applies one option; false (after the error) when it cannot be honoured.
// What --idle and --gil asked for; the mode is chosen once all options are read (their order
// does not matter).
struct Flags {
    bool have_pid = false, idle = false, gil = false;
};

bool apply(const Opt& opt, const std::string& v, Options& o, Flags& flags, int& code) {
    bool& have_pid = flags.have_pid;
    if (opt.unsupported) return fail(code, spelled(opt) + ": " + opt.unsupported);
    switch (opt.id) {
        case Id::Pid: {
            pid_t pid = 0;
            if (have_pid)
                return fail(code, "-p/--pid takes one process ID (py-spy profiles one process; -s adds its "
                                  "subprocesses)");
            if (std::string error; !parse_pid(spelled(opt), v, pid, error)) return fail(code, error);
            o.pids = {pid};
            have_pid = true;
            return true;
        }
        case Id::Output: o.output = v; return true;
        case Id::Format: {
            const std::string f = lower(v);
            if (f == "flamegraph") o.format = "svg";
            else if (f == "raw") o.format = "collapsed";
            else if (f == "speedscope") o.format = "speedscope";
            else if (f == "chrometrace")
                return fail(code, "-f chrometrace is not supported: pybpfprof writes flamegraph (an SVG flame graph), "
                                  "raw (folded stacks) or speedscope; choose one of those");
            else return fail(code, "-f " + v + " is not a format; choose flamegraph, raw or speedscope");
            return true;
        }
        case Id::Duration:
            if (lower(v) == "unlimited") o.duration_s = 0;
            else if (!parse_double(v, o.duration_s) || o.duration_s <= 0)
                return fail(code, number_error(opt, v, "must be a positive number of seconds, or unlimited"));
            else if (o.duration_s > 0 && o.duration_s < kMinDurationS)
                return fail(code, number_error(opt, v, "must be at least 0.1 s: a shorter run ends before a program "
                                                      "can be found and sampled"));
            return true;
        case Id::Rate:
            if (!parse_double(v, o.rate_hz) || o.rate_hz < 1 || o.rate_hz > 10000)
                return fail(code, number_error(opt, v, "must be a number of samples per second from 1 to 10000"));
            return true;
        case Id::Subprocesses: o.subprocesses = true; return true;
        case Id::HideProgress: o.quiet = true; return true;
        case Id::Idle: flags.idle = true; return true;
        case Id::Gil: flags.gil = true; return true;
        case Id::Native: o.native = true; return true;
        case Id::Threads:        // every output is split by process and thread already
        case Id::FullFilenames:  // frames always carry the full co_filename
        case Id::Nonblocking:    // the target is never stopped
            return true;
        default: return true;
    }
}

bool parse_record(const std::vector<std::string>& args, Options& o, int& code) {
    o = Options{};
    o.format = "svg";  // py-spy's default: a flame graph, whatever the -o name
    o.rate_hz = 100;   // py-spy's default rate
    Flags flags;
    const bool& have_pid = flags.have_pid;
    for (size_t i = 0; i < args.size(); i++) {
        const std::string& a = args[i];
        if (a == "--") {
            o.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
            if (o.command.empty()) return fail(code, "nothing to run after --; give a command, e.g. -- python3 app.py");
            break;
        }
        if (a.rfind("--", 0) == 0) {
            const size_t eq = a.find('=');
            const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
            const Opt* opt = find_long(name);
            if (!opt) return fail(code, "record has no option --" + name + "; see " + kPyspyProgram + " record --help");
            if (opt->id == Id::Help) return print(code, kRecordHelp);
            std::string value;
            if (opt->takes_value) {
                if (eq != std::string::npos) value = a.substr(eq + 1);
                else if (i + 1 < args.size()) value = args[++i];
                else return fail(code, spelled(*opt) + " needs a value; see " + kPyspyProgram + " record --help");
            } else if (eq != std::string::npos && !opt->unsupported) {
                return fail(code, spelled(*opt) + " takes no value (got '" + a.substr(eq + 1) + "')");
            }
            if (!apply(*opt, value, o, flags, code)) return false;
            continue;
        }
        if (a.size() > 1 && a[0] == '-') {
            // Short options, possibly several together (-si), the last one possibly with its
            // value attached (-p1234, -p=1234).
            for (size_t j = 1; j < a.size(); j++) {
                const Opt* opt = find_short(a[j]);
                if (!opt)
                    return fail(code, std::string("record has no option -") + a[j] + "; see " + kPyspyProgram +
                                          " record --help");
                if (opt->id == Id::Help) return print(code, kRecordHelp);
                std::string value;
                if (opt->takes_value) {
                    value = a.substr(j + 1);
                    if (!value.empty() && value[0] == '=') value.erase(0, 1);
                    if (value.empty()) {
                        if (i + 1 >= args.size())
                            return fail(code, spelled(*opt) + " needs a value; see " + kPyspyProgram + " record --help");
                        value = args[++i];
                    }
                    j = a.size();
                }
                if (!apply(*opt, value, o, flags, code)) return false;
            }
            continue;
        }
        // The first word that is not an option starts the command (py-spy takes it with or
        // without --).
        o.command.assign(args.begin() + static_cast<long>(i), args.end());
        break;
    }
    if (!have_pid && o.command.empty())
        return fail(code, "record needs -p PID or a command to run: " + std::string(kPyspyProgram) +
                              " record -o profile.svg -p PID, or " + kPyspyProgram +
                              " record -o profile.svg -- python3 app.py");
    if (have_pid && !o.command.empty())
        return fail(code, "give -p PID or a command to run, not both (the command starts with '" + o.command[0] + "')");
    // A launched command's children are always followed (Options::subprocesses is --pid's).
    if (!have_pid) o.subprocesses = false;
    // py-spy's --gil keeps the GIL holder's samples, --idle adds the samples of threads that do
    // not run. Together, py-spy keeps a GIL holder's sample even when it is idle; pybpfprof's
    // closest is gil mode, whose samples are all on CPU (a holder that blocks without releasing
    // the GIL is not kept): the GIL filter is what the user asked to see.
    if (flags.gil) o.mode = ProfileMode::Gil;
    else if (flags.idle) o.mode = ProfileMode::Wall;
    return true;
}

}  // namespace

bool parse_pyspy(int argc, char** argv, Options& o, int& code) {
    std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
    if (args.empty()) {
        std::cerr << kUsage;
        return fail(code, "give a command: record or dump (top is not available yet); see " +
                              std::string(kPyspyProgram) + " --help");
    }
    const std::string cmd = args[0];
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    auto asks_help = [&] {
        for (const auto& a : rest) {
            if (a == "--") break;
            if (a == "-h" || a == "--help") return true;
        }
        return false;
    };
    if (cmd == "-h" || cmd == "--help" || cmd == "help") return print(code, top_help());
    if (cmd == "-V" || cmd == "--version")
        return print(code, std::string(kPyspyProgram) + " " + PYBPFPROF_VERSION + " (pybpfprof " +
                               PYBPFPROF_VERSION + "; py-spy's record command line)\n");
    if (cmd == "record") return parse_record(rest, o, code);
    if (cmd == "dump")  // pyspy_main runs it (cli/pyspy_dump.h); here only if called another way
        return fail(code, "dump is not a recording: run it as " + std::string(kPyspyProgram) + " dump -p PID");
    if (cmd == "top") {
        if (asks_help())
            return print(code, std::string("pybpfprof-py-spy top -p PID: not available yet. Until then it exits 2 "
                                           "with one line on stderr.\n"));
        return refuse(code, "pybpfprof-py-spy top is not available yet; record a profile instead: "
                            "pybpfprof-py-spy record -p PID -d 10 -o profile.svg");
    }
    return fail(code, "'" + cmd + "' is not a command; use record or dump (top is not available yet); see " +
                          std::string(kPyspyProgram) + " --help");
}

int pyspy_exit_code(int pybpfprof_code) {
    return pybpfprof_code == kExitTargetExited ? kExitOk : pybpfprof_code;
}

}  // namespace pbp
