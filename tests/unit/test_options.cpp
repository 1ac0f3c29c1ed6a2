// Command-line parsing: modes, --cgroup, and the output format following -o's extension.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/options.h"

namespace pbp {
namespace {

bool parse(std::vector<std::string> args, Options& o, int& code, std::string* err = nullptr) {
    std::vector<char*> argv{const_cast<char*>("pybpfprof")};
    for (auto& a : args) argv.push_back(a.data());
    testing::internal::CaptureStderr();
    bool ok = parse_options(static_cast<int>(argv.size()), argv.data(), o, code);
    std::string e = testing::internal::GetCapturedStderr();
    if (err) *err = e;
    return ok;
}

// What a user typing a wrong value reads: one line, naming the option, what it must be, and
// the value given; never CLI11's raw "Value 0 not in range 0.000000 to 1797693...".
TEST(Options, NumberErrorsAreSentences) {
    struct Case {
        std::vector<std::string> args;
        std::string says;
    };
    std::vector<Case> cases = {
        {{"-a", "-d", "0"}, "-d/--duration must be a positive number of seconds (got '0')"},
        {{"-a", "-d", "abc"}, "-d/--duration must be a positive number of seconds (got 'abc')"},
        {{"-a", "-d", "-3"}, "-d/--duration must be a positive number of seconds (got '-3')"},
        {{"-a", "-d", "inf"}, "-d/--duration must be a positive number of seconds (got 'inf')"},
        // Before, accepted: the run ended at once and blamed the launched command for having
        // no CPython process "during the 0 s run".
        {{"-a", "-d", "0.0000001"},
         "-d/--duration must be at least 0.1 s: a shorter run ends before a program can be found and sampled "
         "(got '0.0000001')"},
        {{"-a", "-d", "0.09"},
         "-d/--duration must be at least 0.1 s: a shorter run ends before a program can be found and sampled "
         "(got '0.09')"},
        {{"--pid", "0"}, "--pid must be a process ID, a positive whole number (got '0')"},
        {{"--pid", "12x"}, "--pid must be a process ID, a positive whole number (got '12x')"},
        {{"-a", "-r", "0"}, "-r/--rate must be a number of samples per second from 1 to 10000 (got '0')"},
        {{"-a", "-r", "20000"}, "-r/--rate must be a number of samples per second from 1 to 10000 (got '20000')"},
        {{"-a", "--max-depth", "2000"}, "--max-depth must be a whole number of frames from 1 to 1024 (got '2000')"},
    };
    for (auto& c : cases) {
        Options o;
        int code = -1;
        std::string err;
        EXPECT_FALSE(parse(c.args, o, code, &err)) << c.args.back();
        EXPECT_EQ(code, 2);
        EXPECT_EQ(err, "pybpfprof: " + c.says + "\n");
    }
    Options ok;
    int code = -1;
    ASSERT_TRUE(parse({"-a", "-d", "2.5", "-r", "999", "--max-depth", "64"}, ok, code));
    EXPECT_EQ(ok.duration_s, 2.5);
    EXPECT_EQ(ok.rate_hz, 999);
    EXPECT_EQ(ok.max_depth, 64);
}

// A PID at or above the kernel's pid_max is a positive whole number that no process can have:
// "no such process", with the highest PID this machine hands out (before: "must be a process
// ID, a positive whole number (got '99999999')", and any PID up to 4194304 passed).
TEST(Options, PidAbovePidMaxIsNoSuchProcess) {
    long pid_max = 0;
    std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
    ASSERT_GT(pid_max, 1);
    const std::string up_to = " no such process (PIDs on this machine go up to " + std::to_string(pid_max - 1) + ")\n";
    for (std::string pid : {std::to_string(pid_max), std::string("99999999"), std::string("99999999999999999999999")}) {
        Options o;
        int code = -1;
        std::string err;
        EXPECT_FALSE(parse({"--pid", pid}, o, code, &err)) << pid;
        EXPECT_EQ(code, 2);
        EXPECT_EQ(err, "pybpfprof: --pid " + pid + ":" + up_to);
    }
    // The highest PID there can be: whether a process has it is the run's question.
    Options o;
    int code = -1;
    ASSERT_TRUE(parse({"--pid", std::to_string(pid_max - 1)}, o, code));
    EXPECT_EQ(o.pids, std::vector<pid_t>{static_cast<pid_t>(pid_max - 1)});
}

TEST(Options, FormatNamesInAnyCaseAndUnknownExtensionsAreErrors) {
    Options o;
    int code = -1;
    std::string err;
    ASSERT_TRUE(parse({"-a", "-f", "HTML"}, o, code));
    EXPECT_EQ(o.format, "html");
    Options bad;
    EXPECT_FALSE(parse({"-a", "-f", "svgz"}, bad, code, &err));
    EXPECT_EQ(err, "pybpfprof: -f svgz is not an output format; choose one of speedscope|collapsed|html|pprof|svg|pbp\n");
    for (std::string name : {"x.svgz", "x.pb", "profile"}) {
        Options u;
        EXPECT_FALSE(parse({"-a", "-o", name}, u, code, &err)) << name << " must not silently be speedscope";
        EXPECT_EQ(code, 2);
        EXPECT_NE(err.find("cannot tell the output format from the name " + name + "; give -f speedscope|"),
                  std::string::npos)
            << err;
        EXPECT_NE(err.find(".pb.gz"), std::string::npos) << err;
    }
    Options svg;
    EXPECT_TRUE(parse({"-a", "-o", "x.svg", "-f", "collapsed"}, svg, code)) << "-f decides";
    EXPECT_EQ(svg.format, "collapsed");
    Options flame;
    ASSERT_TRUE(parse({"-a", "-o", "x.svg"}, flame, code));
    EXPECT_EQ(flame.format, "svg");
    Options svg_f;
    ASSERT_TRUE(parse({"-a", "-f", "SVG"}, svg_f, code));
    EXPECT_EQ(svg_f.format, "svg");
    Options upper;
    ASSERT_TRUE(parse({"-a", "-o", "R.HTML"}, upper, code));
    EXPECT_EQ(upper.format, "html");
}

TEST(Options, RecordIsTheDefaultCommandAndOthersAreNotThereYet) {
    Options o;
    int code = -1;
    std::string err;
    ASSERT_TRUE(parse({"record", "--pid", "42", "-d", "1"}, o, code));
    EXPECT_EQ(o.pids, std::vector<pid_t>{42});
    for (std::string sub : {"top", "dump"}) {
        Options s;
        EXPECT_FALSE(parse({sub}, s, code, &err)) << sub << " must not launch a program named " << sub;
        EXPECT_EQ(code, 2);
        EXPECT_EQ(err, "pybpfprof: 'pybpfprof " + sub + "' is not available yet; to profile a program named " + sub +
                           ", run: pybpfprof -- " + sub + "\n");
    }
    Options launched;
    ASSERT_TRUE(parse({"--", "top", "-b"}, launched, code));
    EXPECT_EQ(launched.command, (std::vector<std::string>{"top", "-b"}));
    Options after;
    ASSERT_TRUE(parse({"-d", "1", "--", "dump"}, after, code));
    EXPECT_EQ(after.command, std::vector<std::string>{"dump"});
}

// A command word after the options is not launched as a program (before, `pybpfprof -d 1 top`
// ran /usr/bin/top while `pybpfprof top` was refused): it is said where commands go, and how
// to launch a program of that name.
TEST(Options, CommandWordsAfterTheOptionsAreNotLaunched) {
    int code = -1;
    std::string err;
    Options top;
    EXPECT_FALSE(parse({"-d", "1", "top"}, top, code, &err));
    EXPECT_EQ(code, 2);
    EXPECT_EQ(err, "pybpfprof: 'top' after the options would launch the program top; 'pybpfprof top' is not "
                   "available yet; to profile a program named top, put it after --: pybpfprof [OPTIONS] -- top\n");
    for (std::string sub : {"record", "dump", "merge", "agent"}) {
        Options o;
        EXPECT_FALSE(parse({"record", "-r", "999", sub, "x"}, o, code, &err)) << sub;
        EXPECT_EQ(code, 2);
        EXPECT_EQ(err, "pybpfprof: '" + sub + "' after the options would launch a program named " + sub +
                           "; pybpfprof's commands come first: pybpfprof " + sub + " [OPTIONS] (see pybpfprof " +
                           sub + " --help); to profile a program named " + sub +
                           ", put it after --: pybpfprof [OPTIONS] -- " + sub + "\n");
    }
    Options program;
    ASSERT_TRUE(parse({"-d", "1", "python3", "top.py"}, program, code));
    EXPECT_EQ(program.command, (std::vector<std::string>{"python3", "top.py"}));
}

TEST(Options, HelpDocumentsTheExitCodes) {
    Options o;
    int code = -1;
    testing::internal::CaptureStdout();
    EXPECT_FALSE(parse({"--help"}, o, code));
    std::string out = testing::internal::GetCapturedStdout();
    EXPECT_EQ(code, 0);
    for (const char* s : {"Exit codes:\n  0  the profile was written\n  1  cannot profile", "\n  2  bad input",
                          "\n  3  a --pid target exited"})
        EXPECT_NE(out.find(s), std::string::npos) << out;
}

// --help reads on a terminal: one usage line, each option's value named (not CLI11's TEXT), and
// no line over 100 columns (CLI11 2.1 printed descriptions of up to 300 characters on one line).
TEST(Options, HelpIsReadableOnATerminal) {
    Options o;
    int code = -1;
    testing::internal::CaptureStdout();
    EXPECT_FALSE(parse({"--help"}, o, code));
    const std::string out = testing::internal::GetCapturedStdout();
    std::istringstream lines(out);
    int usages = 0;
    for (std::string line; std::getline(lines, line);) {
        EXPECT_LE(line.size(), 100u) << line;
        usages += line.rfind("Usage:", 0) == 0;
        EXPECT_EQ(line.find(" TEXT"), std::string::npos) << line;
    }
    EXPECT_EQ(usages, 1) << out;
    for (const char* s : {"-d,--duration SECONDS", "-r,--rate HZ", "-p,--pid PID", "-o,--output FILE",
                          "--mode cpu|wall|gil", "--group-by process|pod "})
        EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
}

TEST(Options, FormatFollowsTheOutputExtensionUnlessGiven) {
    struct Case {
        std::vector<std::string> args;
        std::string format;
    };
    std::vector<Case> cases = {
        {{"-a", "-o", "/tmp/report.html"}, "html"},
        {{"-a", "-o", "out.pb.gz"}, "pprof"},
        {{"-a", "-o", "out.folded"}, "collapsed"},
        {{"-a", "-o", "out.json"}, "speedscope"},
        {{"-a"}, "speedscope"},
        {{"-a", "-o", "x.html", "-f", "speedscope"}, "speedscope"},
    };
    for (auto& c : cases) {
        Options o;
        int code = -1;
        ASSERT_TRUE(parse(c.args, o, code)) << c.args.back();
        EXPECT_EQ(o.format, c.format) << c.args.back();
    }
}

TEST(Options, CgroupIsAModeOfItsOwn) {
    Options o;
    int code = -1;
    ASSERT_TRUE(parse({"--cgroup", "ray/head", "--cgroup", "abc123", "-d", "30", "--group-by", "pod"}, o, code));
    EXPECT_EQ(o.cgroups, (std::vector<std::string>{"ray/head", "abc123"}));
    EXPECT_EQ(o.group_by, "pod");
    Options both;
    EXPECT_TRUE(parse({"--all-python", "--cgroup", "x"}, both, code)) << "--all-python within a cgroup";
    Options bad;
    EXPECT_FALSE(parse({"--cgroup", "x", "--pid", "1"}, bad, code));
    EXPECT_EQ(code, 2);
    Options badgroup;
    std::string error;
    EXPECT_FALSE(parse({"-a", "--group-by", "node"}, badgroup, code, &error));
    EXPECT_EQ(code, 2);
    EXPECT_EQ(error, "pybpfprof: --group-by: node is not a grouping; choose process (one profile per process, the "
                     "default) or pod (one per Kubernetes pod); see pybpfprof --help\n")
        << "not CLI11's 'node not in {process,pod}'";
}

// --mode and --min-block: the mode by name in any case, the minimum with its unit, and every
// wrong value or combination one line naming the fix.
TEST(Options, ModeAndMinBlock) {
    Options def;
    int code = -1;
    ASSERT_TRUE(parse({"-a"}, def, code));
    EXPECT_EQ(def.mode, ProfileMode::Cpu);
    EXPECT_EQ(def.min_block_ns, 1'000'000u);
    struct Good {
        std::vector<std::string> args;
        ProfileMode mode;
        uint64_t min_block_ns;
    };
    for (const Good& g : std::vector<Good>{
             {{"-a", "--mode", "cpu"}, ProfileMode::Cpu, 1'000'000},
             {{"-a", "--mode", "wall"}, ProfileMode::Wall, 1'000'000},
             {{"-a", "--mode", "GIL"}, ProfileMode::Gil, 1'000'000},
             {{"-a", "--mode=wall", "--min-block", "500us"}, ProfileMode::Wall, 500'000},
             {{"-a", "--mode", "wall", "--min-block", "500\xc2\xb5s"}, ProfileMode::Wall, 500'000},
             {{"-a", "--min-block", "0.5ms", "--mode", "wall"}, ProfileMode::Wall, 500'000},
             {{"-a", "--mode", "wall", "--min-block", "2ms"}, ProfileMode::Wall, 2'000'000},
             {{"-a", "--mode", "wall", "--min-block", "0.25s"}, ProfileMode::Wall, 250'000'000},
             {{"-a", "--mode", "wall", "--min-block", "1s"}, ProfileMode::Wall, 1'000'000'000},
             {{"-a", "--mode", "wall", "--min-block", "10us"}, ProfileMode::Wall, 10'000},
             {{"-a", "--mode", "wall", "--min-block", "1.0004ms"}, ProfileMode::Wall, 1'000'000},  // whole us
         }) {
        Options o;
        ASSERT_TRUE(parse(g.args, o, code)) << g.args.back();
        EXPECT_EQ(o.mode, g.mode) << g.args.back();
        EXPECT_EQ(o.min_block_ns, g.min_block_ns) << g.args.back();
    }
    const std::string range = "must be a duration with its unit from 10us to 1s, such as 500us, 1ms or 0.2s";
    struct Bad {
        std::vector<std::string> args;
        std::string says;
    };
    for (const Bad& b : std::vector<Bad>{
             {{"-a", "--mode", "off-cpu"},
              "--mode off-cpu is not a mode; choose cpu (on-CPU time), wall (on- and off-CPU time) or gil (on-CPU "
              "time holding the GIL)"},
             {{"-a", "--mode", "wall", "--min-block", "1"}, "--min-block " + range + " (got '1')"},
             {{"-a", "--mode", "wall", "--min-block", "5us"}, "--min-block " + range + " (got '5us')"},
             {{"-a", "--mode", "wall", "--min-block", "2s"}, "--min-block " + range + " (got '2s')"},
             {{"-a", "--mode", "wall", "--min-block", "-1ms"}, "--min-block " + range + " (got '-1ms')"},
             {{"-a", "--mode", "wall", "--min-block", "ms"}, "--min-block " + range + " (got 'ms')"},
             {{"-a", "--mode", "wall", "--min-block", "1 ms"}, "--min-block " + range + " (got '1 ms')"},
             {{"-a", "--mode", "wall", "--min-block", "1h"}, "--min-block " + range + " (got '1h')"},
             {{"-a", "--mode", "wall", "--min-block", "infms"}, "--min-block " + range + " (got 'infms')"},
             {{"-a", "--min-block", "1ms"},
              "--min-block only applies to --mode wall (it bounds the off-CPU intervals kept one by one); add "
              "--mode wall, or drop --min-block"},
             {{"-a", "--mode", "gil", "--min-block", "1ms"},
              "--min-block only applies to --mode wall (it bounds the off-CPU intervals kept one by one); add "
              "--mode wall, or drop --min-block"},
         }) {
        Options o;
        std::string err;
        EXPECT_FALSE(parse(b.args, o, code, &err)) << b.args.back();
        EXPECT_EQ(code, 2);
        EXPECT_EQ(err, "pybpfprof: " + b.says + "\n");
    }
}

TEST(Options, HelpNamesTheModes) {
    Options o;
    int code = -1;
    testing::internal::CaptureStdout();
    EXPECT_FALSE(parse({"--help"}, o, code));
    const std::string out = testing::internal::GetCapturedStdout();
    EXPECT_EQ(code, 0);
    for (const char* s : {"--mode", "cpu (default", "wall (on-CPU", "gil (only", "--min-block", "10us to 1s"})
        EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
}

}  // namespace
}  // namespace pbp
