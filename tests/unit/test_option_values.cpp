// An option given no value (last on the line, or followed by another option that CLI11 would
// take as its value): one line naming the option as it was typed, what it wants and an example,
// for every option of every command that takes one (cli/option_values.cpp); never CLI11's
// "--duration: 1 required TEXT missing".
#include <gtest/gtest.h>

#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/agent_command.h"
#include "cli/dump_command.h"
#include "cli/merge_command.h"
#include "cli/options.h"

namespace pbp {
namespace {

struct Ran {
    int code = -1;
    std::string out, err;
};

// A command's entry point, as main() calls it: argv[0] is the command's name.
using Command = std::function<int(int, char**)>;

Ran run_command(const Command& command, const std::string& name, std::vector<std::string> args) {
    std::vector<char*> argv{const_cast<char*>(name.c_str())};
    for (auto& a : args) argv.push_back(a.data());
    Ran r;
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    r.code = command(static_cast<int>(argv.size()), argv.data());
    r.err = testing::internal::GetCapturedStderr();
    r.out = testing::internal::GetCapturedStdout();
    return r;
}

int record(int argc, char** argv) {
    Options o;
    int code = 0;
    return parse_options(argc, argv, o, code) ? 0 : code;
}

struct Cmd {
    Command run;
    std::string argv0, prefix;  // what its errors start with
};

std::vector<Cmd> commands() {
    return {{record, "pybpfprof", "pybpfprof: "},
            {dump_command, "dump", "pybpfprof dump: "},
            {merge_command, "merge", "pybpfprof: merge: "},
            {agent_command, "agent", "pybpfprof: "}};
}

// The names of the options that take a value, as --help lists them ("-d,--duration TEXT").
std::vector<std::string> options_with_a_value(const Cmd& c) {
    const Ran help = run_command(c.run, c.argv0, {"--help"});
    EXPECT_EQ(help.code, 0) << help.err;
    std::vector<std::string> names;
    std::istringstream lines(help.out);
    std::string line;
    const std::regex option(R"(^  (-[A-Za-z0-9](?:,--[a-z0-9-]+)?|--[a-z0-9-]+) [A-Z]+)");
    while (std::getline(lines, line)) {
        std::smatch m;
        if (!std::regex_search(line, m, option)) continue;
        std::stringstream spelled(m[1].str());
        for (std::string n; std::getline(spelled, n, ',');) names.push_back(n);
    }
    return names;
}

TEST(OptionValues, EveryOptionThatTakesAValueSaysWhatItWantsWhenGivenNone) {
    for (const Cmd& c : commands()) {
        const auto names = options_with_a_value(c);
        EXPECT_GE(names.size(), 4u) << c.argv0;
        for (const std::string& name : names) {
            const Ran r = run_command(c.run, c.argv0, {name});
            EXPECT_EQ(r.code, 2) << c.argv0 << " " << name;
            EXPECT_EQ(r.err.rfind(c.prefix + name + " needs a value: ", 0), 0u) << c.argv0 << " " << name << ": " << r.err;
            EXPECT_NE(r.err.find(" (e.g. " + name + " "), std::string::npos) << r.err;
            EXPECT_EQ(r.err.find("required"), std::string::npos) << r.err;
            EXPECT_EQ(r.err.find("TEXT"), std::string::npos) << r.err;
            EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        }
    }
}

TEST(OptionValues, TheSentencesNameTheOptionAsTyped) {
    struct Case {
        std::vector<std::string> args;
        std::string says;
    };
    const std::vector<Case> cases = {
        {{"-d"}, "-d needs a value: a number of seconds (e.g. -d 10)"},
        {{"-a", "--duration"}, "--duration needs a value: a number of seconds (e.g. --duration 10)"},
        {{"-a", "--duration="}, "--duration needs a value: a number of seconds (e.g. --duration 10)"},
        {{"-a", "-qd"}, "-d needs a value: a number of seconds (e.g. -d 10)"},
        {{"-a", "-r"}, "-r needs a value: a number of samples per second from 1 to 10000 (e.g. -r 999)"},
        {{"-a", "-o"}, "-o needs a value: a file name, or - for standard output (e.g. -o profile.html)"},
        {{"--pid"}, "--pid needs a value: a process ID (e.g. --pid 1234)"},
        {{"-p"}, "-p needs a value: a process ID (e.g. -p 1234)"},
        // Another option where the value should be: CLI11 would take it as the value.
        {{"-a", "-d", "-q"}, "-d needs a value before -q: a number of seconds (e.g. -d 10)"},
        {{"--pid", "--duration", "5"}, "--pid needs a value before --duration: a process ID (e.g. --pid 1234)"},
        {{"-a", "-o", "--", "python3", "app.py"},
         "-o needs a value before --: a file name, or - for standard output (e.g. -o profile.html)"},
        {{"--group-by", "-a"}, "--group-by needs a value before -a: process or pod (e.g. --group-by pod)"},
    };
    for (auto& c : cases) {
        const Ran r = run_command(record, "pybpfprof", c.args);
        EXPECT_EQ(r.code, 2);
        EXPECT_EQ(r.err, "pybpfprof: " + c.says + "\n");
    }
    // The other commands' checks fail in its stead when a value is missing (a required -o, a
    // number's range): the missing value is what they say.
    EXPECT_EQ(run_command(merge_command, "merge", {"--label", "-o", "x.html", "a.pbp"}).err,
              "pybpfprof: merge: --label needs a value before -o: a label, [N:]KEY=VALUE (e.g. --label "
              "1:role=scheduler)\n");
    EXPECT_EQ(run_command(agent_command, "agent", {"--idle-timeout", "--btf", "x"}).err,
              "pybpfprof: --idle-timeout needs a value before --btf: a number of seconds from 1 to 86400 (e.g. "
              "--idle-timeout 60)\n");
    EXPECT_EQ(run_command(dump_command, "dump", {"--pid", "-a"}).err,
              "pybpfprof dump: --pid needs a value before -a: a process ID (e.g. --pid 1234)\n");
}

// An option of one value given twice: one line naming it and its values, not CLI11's "--duration:
// At Most 1 required but received 2".
TEST(OptionValues, AnOptionOfOneValueGivenTwiceSaysSo) {
    Ran r = run_command(record, "pybpfprof", {"-a", "-d", "2", "-d", "3"});
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "pybpfprof: -d/--duration was given 2 times (2, 3); give it once\n");
    r = run_command(record, "pybpfprof", {"-a", "-r", "5", "--rate", "6", "-r", "7"});
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "pybpfprof: -r/--rate was given 3 times (5, 6, 7); give it once\n");
    // Repeatable options stay repeatable.
    Options o;
    int code = 0;
    std::vector<std::string> args{"pybpfprof", "-p", "1", "-p", "2", "-d", "1"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    EXPECT_TRUE(parse_options(static_cast<int>(argv.size()), argv.data(), o, code)) << code;
    EXPECT_EQ(o.pids.size(), 2u);
}

// Values that only look like options stay values: a negative number is checked as a number,
// - is standard output, and a launched command's words are its own.
TEST(OptionValues, ValuesThatAreNotOptionsAreLeftToTheirChecks) {
    EXPECT_EQ(run_command(record, "pybpfprof", {"-a", "-d", "-3"}).err,
              "pybpfprof: -d/--duration must be a positive number of seconds (got '-3')\n");
    Options o;
    int code = -1;
    std::vector<std::string> args{"pybpfprof", "-o", "-", "-f", "collapsed", "--", "python3", "app.py", "-d", "-o"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    ASSERT_TRUE(parse_options(static_cast<int>(argv.size()), argv.data(), o, code));
    EXPECT_EQ(o.output, "-");
    EXPECT_EQ(o.command, (std::vector<std::string>{"python3", "app.py", "-d", "-o"}));
    // Not an option of pybpfprof's: CLI11's own words, with where the help is.
    EXPECT_EQ(run_command(record, "pybpfprof", {"-a", "--nope"}).err,
              "pybpfprof: The following argument was not expected: --nope; see pybpfprof --help\n");
}

}  // namespace
}  // namespace pbp
