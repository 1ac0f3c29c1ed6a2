// pybpfprof-py-spy's command line (userspace/cli/pyspy_options.cpp): py-spy's arguments, as
// Ray's dashboard passes them, mapped onto pybpfprof's Options; what cannot be honoured is
// one line and exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "cli/pyspy_options.h"
#include "cli/record.h"

namespace pbp {
namespace {

struct Parsed {
    bool ok = false;
    int code = -1;
    Options o;
    std::string out, err;
};

Parsed parse(std::vector<std::string> args) {
    std::vector<char*> argv{const_cast<char*>("py-spy")};
    for (auto& a : args) argv.push_back(a.data());
    Parsed p;
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    p.ok = parse_pyspy(static_cast<int>(argv.size()), argv.data(), p.o, p.code);
    p.err = testing::internal::GetCapturedStderr();
    p.out = testing::internal::GetCapturedStdout();
    return p;
}

size_t lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

// The command lines of Ray's dashboard (profile_manager.py): flamegraph to .svg, raw and
// speedscope to .txt, with -d from the dashboard.
TEST(PyspyOptions, RaysRecordCommandLines) {
    struct Case {
        std::string format, file, expect;
    };
    for (const Case& c : std::vector<Case>{{"flamegraph", "flamegraph_42_20261123_101010_cpu_profiling.svg", "svg"},
                                           {"raw", "raw_42_20261123_101010_cpu_profiling.txt", "collapsed"},
                                           {"speedscope", "speedscope_42_20261123_101010_cpu_profiling.txt", "speedscope"}}) {
        const std::string out = "/tmp/ray/session_latest/logs/profiles/" + c.file;
        Parsed p = parse({"record", "-o", out, "-p", "42", "-d", "5", "-f", c.format});
        ASSERT_TRUE(p.ok) << c.format << ": " << p.err;
        EXPECT_EQ(p.err, "");
        EXPECT_EQ(p.o.pids, std::vector<pid_t>{42});
        EXPECT_EQ(p.o.output, out);
        EXPECT_EQ(p.o.duration_s, 5);
        EXPECT_EQ(p.o.format, c.expect) << "-f decides, never the .txt name";
        EXPECT_EQ(p.o.rate_hz, 100) << "py-spy's default rate";
        EXPECT_FALSE(p.o.subprocesses);
        EXPECT_TRUE(p.o.command.empty());
    }
    // A duration as a float's str() ("5.0"), and py-spy's "unlimited".
    EXPECT_EQ(parse({"record", "-p", "42", "-d", "5.0"}).o.duration_s, 5);
    Parsed unlimited = parse({"record", "-p", "42", "-d", "unlimited"});
    ASSERT_TRUE(unlimited.ok);
    EXPECT_EQ(unlimited.o.duration_s, 0);
}

TEST(PyspyOptions, FlamegraphIsTheDefaultWhateverTheFileName) {
    Parsed p = parse({"record", "-p", "42", "-o", "profile.json"});
    ASSERT_TRUE(p.ok) << p.err;
    EXPECT_EQ(p.o.format, "svg");
    Parsed none = parse({"record", "--pid", "42"});
    ASSERT_TRUE(none.ok) << none.err;
    EXPECT_EQ(none.o.format, "svg");
    EXPECT_EQ(none.o.output, "") << "pybpfprof's default name, with .svg";
    EXPECT_EQ(parse({"record", "-p", "42", "-f", "RAW"}).o.format, "collapsed");
}

// What pybpfprof cannot do yet is one line naming the option and why, exit 2, whatever its
// place on the line: never a profile that silently is not what was asked.
TEST(PyspyOptions, OptionsNotHonouredYetAreOneLineErrors) {
    struct Case {
        std::string arg, named, why;
    };
    for (const Case& c : std::vector<Case>{
             {"--function", "-F/--function", "by a function's first line is not supported yet"},
             {"-F", "-F/--function", "by a function's first line is not supported yet"},
             {"--nolineno", "--nolineno", "without line numbers are not supported yet"}}) {
        // Where Ray puts its options: last.
        Parsed p = parse({"record", "-o", "/tmp/f.svg", "-p", "42", "-d", "5", "-f", "flamegraph", c.arg});
        EXPECT_FALSE(p.ok) << c.arg;
        EXPECT_EQ(p.code, 2) << c.arg;
        EXPECT_EQ(lines(p.err), 1u) << p.err;
        EXPECT_EQ(p.err.rfind("pybpfprof-py-spy: " + c.named + ": ", 0), 0u) << p.err;
        EXPECT_NE(p.err.find(c.why), std::string::npos) << p.err;
        const std::string long_name = c.named.substr(c.named.find("--"));
        EXPECT_NE(p.err.find("run without " + long_name), std::string::npos) << p.err;
        EXPECT_EQ(p.err.find("ermission"), std::string::npos) << "Ray would add its setuid advice: " << p.err;
        // First on the line, or in a group of short flags, too.
        EXPECT_FALSE(parse({"record", c.arg, "-p", "42"}).ok) << c.arg;
    }
    Parsed grouped = parse({"record", "-sF", "-p", "42"});
    EXPECT_FALSE(grouped.ok);
    EXPECT_NE(grouped.err.find("-F/--function: "), std::string::npos) << grouped.err;
    Parsed chrome = parse({"record", "-p", "42", "-f", "chrometrace"});
    EXPECT_FALSE(chrome.ok);
    EXPECT_EQ(chrome.code, 2);
    EXPECT_EQ(chrome.err,
              "pybpfprof-py-spy: -f chrometrace is not supported: pybpfprof writes flamegraph (an SVG flame graph), raw "
              "(folded stacks) or speedscope; choose one of those\n");
}

// py-spy's --native is pybpfprof's --native, long, short, grouped, and last as Ray puts it.
TEST(PyspyOptions, NativeIsNative) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"record", "-p", "42", "--native"}, {"record", "-n", "-p", "42"},
          {"record", "-sn", "-p", "42"}, {"record", "-o", "/tmp/f.svg", "-p", "42", "-d", "5", "-f", "flamegraph", "--native"}}) {
        Parsed p = parse(args);
        ASSERT_TRUE(p.ok) << p.err;
        EXPECT_TRUE(p.o.native) << args.back();
    }
    EXPECT_FALSE(parse({"record", "-p", "42"}).o.native);
}

// Options whose meaning pybpfprof always gives, or that change nothing it does.
TEST(PyspyOptions, OptionsAlwaysHonouredAreAccepted) {
    Parsed p = parse({"record", "-p", "42", "--nonblocking", "-t", "--threads", "--full-filenames", "--hideprogress"});
    ASSERT_TRUE(p.ok) << p.err;
    EXPECT_TRUE(p.o.quiet);
    Parsed s = parse({"record", "-s", "-p", "42", "-r", "250"});
    ASSERT_TRUE(s.ok) << s.err;
    EXPECT_TRUE(s.o.subprocesses);
    EXPECT_EQ(s.o.rate_hz, 250);
    Parsed help = parse({"record", "--help"});
    EXPECT_FALSE(help.ok);
    EXPECT_EQ(help.code, 0);
    EXPECT_NE(help.out.find("--nonblocking"), std::string::npos);
    EXPECT_NE(help.out.find("never stops or pauses the target"), std::string::npos) << help.out;
    for (const char* unsupported : {"--native", "--idle", "--gil", "--function", "--nolineno", "chrometrace"})
        EXPECT_NE(help.out.find(unsupported), std::string::npos) << unsupported;
}

// py-spy's --idle and --gil are pybpfprof's modes; both together is gil mode, in any order,
// spelled long, short or grouped.
TEST(PyspyOptions, IdleIsWallModeAndGilIsGilMode) {
    struct Case {
        std::vector<std::string> args;
        ProfileMode mode;
    };
    for (const Case& c : std::vector<Case>{
             {{"record", "-p", "42"}, ProfileMode::Cpu},
             {{"record", "-p", "42", "--idle"}, ProfileMode::Wall},
             {{"record", "-i", "-p", "42"}, ProfileMode::Wall},
             {{"record", "-p", "42", "--gil"}, ProfileMode::Gil},
             {{"record", "-g", "-p", "42"}, ProfileMode::Gil},
             {{"record", "-p", "42", "--idle", "--gil"}, ProfileMode::Gil},
             {{"record", "-p", "42", "--gil", "--idle"}, ProfileMode::Gil},
             {{"record", "-gi", "-p", "42"}, ProfileMode::Gil},
             {{"record", "-si", "-p", "42"}, ProfileMode::Wall},
             {{"record", "--idle", "-o", "x.svg", "--", "python3", "app.py"}, ProfileMode::Wall},
         }) {
        Parsed p = parse(c.args);
        std::string line;
        for (auto& a : c.args) line += a + " ";
        ASSERT_TRUE(p.ok) << line << p.err;
        EXPECT_EQ(p.o.mode, c.mode) << line;
        EXPECT_EQ(p.o.min_block_ns, kDefaultMinBlockNs) << line;
        EXPECT_TRUE(p.err.empty()) << p.err;
    }
    // A flag after the command is the command's, not py-spy's.
    Parsed cmd = parse({"record", "--", "python3", "app.py", "--idle"});
    ASSERT_TRUE(cmd.ok) << cmd.err;
    EXPECT_EQ(cmd.o.mode, ProfileMode::Cpu);
    EXPECT_EQ(cmd.o.command.back(), "--idle");
    Parsed value = parse({"record", "-p", "42", "--idle=yes"});
    EXPECT_FALSE(value.ok);
    EXPECT_EQ(value.code, 2);
    EXPECT_EQ(value.err, "pybpfprof-py-spy: -i/--idle takes no value (got 'yes')\n");
    Parsed help = parse({"record", "--help"});
    EXPECT_NE(help.out.find("--mode wall"), std::string::npos) << help.out;
    EXPECT_NE(help.out.find("--mode gil"), std::string::npos) << help.out;
}

TEST(PyspyOptions, LaunchedCommandWithOrWithoutDashDash) {
    Parsed p = parse({"record", "-o", "x.svg", "--", "python3", "app.py", "-d", "1"});
    ASSERT_TRUE(p.ok) << p.err;
    EXPECT_EQ(p.o.command, (std::vector<std::string>{"python3", "app.py", "-d", "1"}));
    EXPECT_TRUE(p.o.pids.empty());
    Parsed bare = parse({"record", "-o", "x.svg", "python3", "app.py", "--native"});
    ASSERT_TRUE(bare.ok) << bare.err;
    EXPECT_EQ(bare.o.command, (std::vector<std::string>{"python3", "app.py", "--native"}))
        << "after the program, every word is the program's";
    Parsed s = parse({"record", "-s", "--", "python3", "app.py"});
    ASSERT_TRUE(s.ok) << s.err;
    EXPECT_FALSE(s.o.subprocesses) << "a launched command's children are always profiled";
}

TEST(PyspyOptions, ValueSpellings) {
    for (auto args : std::vector<std::vector<std::string>>{
             {"record", "-p42"}, {"record", "-p=42"}, {"record", "--pid=42"}, {"record", "--pid", "42"}, {"record", "-sp", "42"}}) {
        Parsed p = parse(args);
        ASSERT_TRUE(p.ok) << args.back() << ": " << p.err;
        EXPECT_EQ(p.o.pids, std::vector<pid_t>{42});
    }
}

TEST(PyspyOptions, BadInputIsOneSentence) {
    struct Case {
        std::vector<std::string> args;
        std::string says;
    };
    for (const Case& c : std::vector<Case>{
             {{"record"}, "record needs -p PID or a command to run: "},
             {{"record", "-o", "x.svg"}, "record needs -p PID or a command to run: "},
             {{"record", "-p", "42", "--", "python3"}, "give -p PID or a command to run, not both"},
             {{"record", "-p", "42", "-p", "43"}, "-p/--pid takes one process ID"},
             {{"record", "-p", "abc"}, "-p/--pid must be a process ID, a positive whole number (got 'abc')"},
             {{"record", "-p", "42", "-r", "0"}, "-r/--rate must be a number of samples per second from 1 to 10000 (got '0')"},
             {{"record", "-p", "42", "-d", "0"}, "-d/--duration must be a positive number of seconds, or unlimited (got '0')"},
             {{"record", "-p", "42", "-d", "0.05"},
              "-d/--duration must be at least 0.1 s: a shorter run ends before a program can be found and sampled "
              "(got '0.05')"},
             {{"record", "-p", "42", "-f", "svgz"}, "-f svgz is not a format; choose flamegraph, raw or speedscope"},
             {{"record", "-p", "42", "--bogus"}, "record has no option --bogus; see pybpfprof-py-spy record --help"},
             {{"record", "-p", "42", "-x"}, "record has no option -x; see pybpfprof-py-spy record --help"},
             {{"record", "-p"}, "-p/--pid needs a value"},
             {{"record", "--nonblocking=yes", "-p", "42"}, "--nonblocking takes no value (got 'yes')"},
             {{"record", "-p", "42", "--"}, "nothing to run after --"},
             {{"frobnicate"}, "'frobnicate' is not a command; use record"},
         }) {
        Parsed p = parse(c.args);
        EXPECT_FALSE(p.ok) << c.says;
        EXPECT_EQ(p.code, 2) << c.says;
        EXPECT_EQ(lines(p.err), 1u) << p.err;
        EXPECT_EQ(p.err.rfind("pybpfprof-py-spy: " + c.says, 0), 0u) << p.err;
    }
    // A PID above the kernel's pid_max: no such process, not a bad number.
    long pid_max = 0;
    std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
    Parsed above = parse({"record", "-p", "99999999"});
    EXPECT_FALSE(above.ok);
    EXPECT_EQ(above.code, 2);
    EXPECT_EQ(above.err, "pybpfprof-py-spy: -p/--pid 99999999: no such process (PIDs on this machine go up to " +
                             std::to_string(pid_max - 1) + ")\n");
    Parsed none = parse({});
    EXPECT_FALSE(none.ok);
    EXPECT_EQ(none.code, 2);
    EXPECT_NE(none.err.find("give a command: record"), std::string::npos) << none.err;
}

// `dump` is pybpfprof-py-spy's own command (cli/pyspy_dump.h, run by its main before the
// recording options are parsed); `top` is not available yet.
TEST(PyspyOptions, DumpIsNotARecordingAndTopIsNotAvailableYet) {
    Parsed p = parse({"dump", "-p", "42"});
    EXPECT_FALSE(p.ok);
    EXPECT_EQ(p.code, 2);
    EXPECT_EQ(p.err, "pybpfprof-py-spy: dump is not a recording: run it as pybpfprof-py-spy dump -p PID\n");
    Parsed top = parse({"top", "-p", "42"});
    EXPECT_FALSE(top.ok);
    EXPECT_EQ(top.code, 2);
    EXPECT_EQ(lines(top.err), 1u);
    EXPECT_EQ(top.err.rfind("pybpfprof-py-spy top is not available yet", 0), 0u) << top.err;
}

TEST(PyspyOptions, HelpAndVersion) {
    for (const char* h : {"--help", "-h", "help"}) {
        Parsed p = parse({h});
        EXPECT_FALSE(p.ok);
        EXPECT_EQ(p.code, 0);
        EXPECT_NE(p.out.find("Usage: pybpfprof-py-spy record"), std::string::npos) << p.out;
        EXPECT_NE(p.out.find("dump"), std::string::npos);
        EXPECT_NE(p.out.find("agent"), std::string::npos);
    }
    Parsed v = parse({"--version"});
    EXPECT_EQ(v.code, 0);
    EXPECT_EQ(v.out, std::string("pybpfprof-py-spy ") + PYBPFPROF_VERSION + " (pybpfprof " + PYBPFPROF_VERSION +
                         "; py-spy's record command line)\n");
}

// py-spy writes what it has and exits 0 when the target exits; pybpfprof says 3.
TEST(PyspyOptions, TargetExitIsSuccessOtherCodesKept) {
    EXPECT_EQ(pyspy_exit_code(kExitTargetExited), 0);
    EXPECT_EQ(pyspy_exit_code(kExitOk), 0);
    EXPECT_EQ(pyspy_exit_code(kExitError), 1);
    EXPECT_EQ(pyspy_exit_code(kExitBadInput), 2);
}

}  // namespace
}  // namespace pbp
