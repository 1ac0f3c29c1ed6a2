// Command-line parsing: modes, --cgroup, and the output format following -o's extension.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/options.h"

namespace pbp {
namespace {

bool parse(std::vector<std::string> args, Options& o, int& code) {
    std::vector<char*> argv{const_cast<char*>("pybpfprof")};
    for (auto& a : args) argv.push_back(a.data());
    testing::internal::CaptureStderr();
    bool ok = parse_options(static_cast<int>(argv.size()), argv.data(), o, code);
    testing::internal::GetCapturedStderr();
    return ok;
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
    EXPECT_FALSE(parse({"-a", "--group-by", "node"}, badgroup, code));
    EXPECT_EQ(code, 2);
}

}  // namespace
}  // namespace pbp
