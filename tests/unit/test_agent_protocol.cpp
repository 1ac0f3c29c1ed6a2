// The agent's wire protocol (agent/protocol.h, docs/agent-protocol.md): request parsing and
// validation (every rule, with the error text naming the field), framing in both
// directions, and the blocking client reads and writes over real sockets and pipes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "agent/protocol.h"

namespace pbp::agent {
namespace {

using json = nlohmann::json;

const std::vector<std::string> kFormats = {"speedscope", "collapsed", "html", "pprof"};

// The error parse_request gives for text (a test failure if it accepts it).
std::string error_of(std::string_view text, const std::vector<std::string>& formats = kFormats) {
    Request r;
    std::string error;
    bool ok = parse_request(text, formats, r, error);
    EXPECT_FALSE(ok) << "accepted: " << text;
    EXPECT_FALSE(error.empty()) << text;
    return error;
}

Request parse_ok(std::string_view text, const std::vector<std::string>& formats = kFormats) {
    Request r;
    std::string error;
    EXPECT_TRUE(parse_request(text, formats, r, error)) << text << " -> " << error;
    EXPECT_EQ(error, "") << text;
    return r;
}

// A start request for pid 1 with extra fields (",\"rate_hz\":5").
std::string start_with(const std::string& extra) { return R"({"v":1,"op":"start","pids":[1])" + extra + "}"; }

// One line of printable ASCII.
bool one_line_ascii(const std::string& s) {
    for (unsigned char c : s)
        if (c < 0x20 || c >= 0x7f) return false;
    return true;
}

// ---- valid requests ---------------------------------------------------------------------

TEST(AgentProtocol, ParsesMinimalRequestOfEachOp) {
    Request r = parse_ok(R"({"v":1,"op":"status"})");
    EXPECT_EQ(r.op, Request::Op::Status);
    EXPECT_EQ(r, Request{});

    r = parse_ok(R"({"op":"stop","v":1})");
    EXPECT_EQ(r.op, Request::Op::Stop);
    EXPECT_EQ(r.stop.output_name, "");

    r = parse_ok(R"({"v":1,"op":"snapshot"})");
    EXPECT_EQ(r.op, Request::Op::Snapshot);
    EXPECT_EQ(r.snapshot.format, "");
    EXPECT_FALSE(r.snapshot.report);

    r = parse_ok(" \t\r\n{ \"v\" : 1 , \"op\" : \"start\" , \"all_python\" : true }\n ");
    EXPECT_EQ(r.op, Request::Op::Start);
    StartRequest expected;
    expected.all_python = true;
    EXPECT_EQ(r.start, expected);
}

// `dump`: a target (exactly one of pids, all_python, cgroups, with their start rules) and
// max_depth; nothing else.
TEST(AgentProtocol, DumpRequest) {
    Request r = parse_ok(R"({"v":1,"op":"dump","pids":[42,7],"max_depth":16})");
    EXPECT_EQ(r.op, Request::Op::Dump);
    EXPECT_EQ(r.dump.pids, (std::vector<pid_t>{42, 7}));
    EXPECT_EQ(r.dump.max_depth, 16);
    EXPECT_EQ(r.start, StartRequest{});
    r = parse_ok(R"({"v":1,"op":"dump","all_python":true})");
    EXPECT_TRUE(r.dump.all_python);
    r = parse_ok(R"({"v":1,"op":"dump","cgroups":["a/b"]})");
    EXPECT_EQ(r.dump.cgroups, std::vector<std::string>{"a/b"});
    for (const Request& q : {parse_ok(R"({"v":1,"op":"dump","pids":[1]})"), r})
        EXPECT_EQ(parse_ok(encode_request(q)), q) << encode_request(q);

    EXPECT_EQ(error_of(R"({"v":1,"op":"dump"})"),
              "a dump request needs exactly one target field: 'pids', 'all_python' or 'cgroups' (got none)");
    EXPECT_EQ(error_of(R"({"v":1,"op":"dump","pids":[1],"all_python":true})"),
              "a dump request needs exactly one target field: 'pids', 'all_python' or 'cgroups' (got 'pids' and "
              "'all_python')");
    EXPECT_EQ(error_of(R"({"v":1,"op":"dump","launched_pid":5})"), "unknown field 'launched_pid' in a dump request");
    EXPECT_EQ(error_of(R"({"v":1,"op":"dump","pids":[1],"rate_hz":5})"), "unknown field 'rate_hz' in a dump request");
    EXPECT_EQ(error_of(R"({"v":1,"op":"dump","pids":[1,1]})"), "field 'pids' lists process 1 twice");
    EXPECT_EQ(error_of(R"({"v":1,"op":"dump","pids":[0]})"),
              "field 'pids[0]' must be an integer from 1 to 4194304 (got 0)");
    EXPECT_EQ(error_of(R"({"v":1,"op":"dump","pids":[]})"),
              "field 'pids' must be an array of 1 to 64 process IDs (got [])");
    EXPECT_EQ(error_of(R"({"v":1,"op":"dump","all_python":false})"),
              "field 'all_python' must be true (omit it otherwise) (got false)");
    EXPECT_EQ(error_of(R"({"v":1,"op":"dump","pids":[1],"max_depth":1025})"),
              "field 'max_depth' must be an integer from 0 to 1024 (got 1025)");
    EXPECT_EQ(error_of(R"({"v":1,"op":"dump","cgroups":["a\u0007"]})"),
              "field 'cgroups[0]' must be a string of 1 to 4096 bytes without control characters (got \"a\\u0007\")");
    std::string many = R"({"v":1,"op":"dump","pids":[)";
    for (int i = 1; i <= 65; i++) many += (i > 1 ? "," : "") + std::to_string(i);
    EXPECT_NE(error_of(many + "]}").find("field 'pids' must be an array of 1 to 64 process IDs"), std::string::npos);
    ErrorCode code;
    std::string error;
    EXPECT_FALSE(parse_request(R"({"v":1,"op":"dump","pids":"1"})", kFormats, r, error, code));
    EXPECT_EQ(code, ErrorCode::BadInput);
    EXPECT_FALSE(parse_request(R"({"v":1,"op":"dump","pids":[1],"x":1})", kFormats, r, error, code));
    EXPECT_EQ(code, ErrorCode::Protocol);
    json h = dump_header();
    EXPECT_EQ(h, (json{{"v", 1}, {"type", "dump"}, {"format", "json"}}));
}

TEST(AgentProtocol, StartDefaults) {
    Request r = parse_ok(R"({"v":1,"op":"start","launched_pid":4194304})");
    const StartRequest& s = r.start;
    EXPECT_EQ(s.launched_pid, 4194304);
    EXPECT_TRUE(s.pids.empty());
    EXPECT_FALSE(s.all_python);
    EXPECT_TRUE(s.cgroups.empty());
    EXPECT_TRUE(s.command.empty());
    EXPECT_EQ(s.rate_hz, 99);
    EXPECT_EQ(s.duration_s, 0);
    EXPECT_EQ(s.max_depth, 0);
    EXPECT_EQ(s.format, "speedscope");
    EXPECT_FALSE(s.report);
    EXPECT_EQ(s.group_by, "process");
    EXPECT_TRUE(s.progress);
    EXPECT_EQ(s.mode, "cpu");
    EXPECT_EQ(s.min_block_us, 1000);
    EXPECT_FALSE(s.native);
}

TEST(AgentProtocol, ParsesEveryStartField) {
    Request r = parse_ok(R"({"v":1,"op":"start","launched_pid":77,"command":["python3","-c","print(1)\n"],
        "rate_hz":199.5,"duration_s":2678400,"max_depth":1024,"format":"pprof","report":true,
        "group_by":"pod","progress":false,"mode":"wall","min_block_us":2500,"native":true})");
    const StartRequest& s = r.start;
    EXPECT_EQ(s.launched_pid, 77);
    EXPECT_EQ(s.command, (std::vector<std::string>{"python3", "-c", "print(1)\n"}));
    EXPECT_EQ(s.rate_hz, 199.5);
    EXPECT_EQ(s.duration_s, 2678400);
    EXPECT_EQ(s.max_depth, 1024);
    EXPECT_EQ(s.format, "pprof");
    EXPECT_TRUE(s.report);
    EXPECT_EQ(s.group_by, "pod");
    EXPECT_FALSE(s.progress);
    EXPECT_EQ(s.mode, "wall");
    EXPECT_EQ(s.min_block_us, 2500);
    EXPECT_TRUE(s.native);

    r = parse_ok(R"({"v":1,"op":"start","pids":[1,4194304,300],"rate_hz":1,"duration_s":0.25,"max_depth":0})");
    EXPECT_EQ(r.start.pids, (std::vector<pid_t>{1, 4194304, 300}));
    EXPECT_EQ(r.start.rate_hz, 1);
    EXPECT_EQ(r.start.duration_s, 0.25);

    r = parse_ok(R"({"v":1,"op":"start","cgroups":["/sys/fs/cgroup/a.slice","kubepods/pod-x/é"]})");
    EXPECT_EQ(r.start.cgroups, (std::vector<std::string>{"/sys/fs/cgroup/a.slice", "kubepods/pod-x/\xc3\xa9"}));

    r = parse_ok(R"({"v":1,"op":"snapshot","format":"collapsed","report":true})");
    EXPECT_EQ(r.snapshot.format, "collapsed");
    EXPECT_TRUE(r.snapshot.report);

    r = parse_ok(R"({"v":1,"op":"stop","output_name":"profile \u00e9.json"})");
    EXPECT_EQ(r.stop.output_name, "profile \xc3\xa9.json");
}

TEST(AgentProtocol, RoundTripsEveryOp) {
    std::vector<Request> requests;
    Request r;
    r.op = Request::Op::Start;
    r.start.pids = {4194304, 1, 55};
    r.start.rate_hz = 123.456789012345;
    r.start.duration_s = 0.1;
    r.start.max_depth = 17;
    r.start.format = "collapsed";
    r.start.report = true;
    r.start.group_by = "pod";
    r.start.progress = false;
    r.start.mode = "wall";
    r.start.min_block_us = 250;
    r.start.native = true;
    requests.push_back(r);
    r.start = StartRequest{};
    r.start.all_python = true;
    requests.push_back(r);
    r.start.mode = "gil";
    requests.push_back(r);
    r.start.mode = "wall";  // the default minimum
    requests.push_back(r);
    r.start = StartRequest{};
    r.start.cgroups = {"a", std::string(4096, 'c'), "ünï\"\\code"};
    r.start.duration_s = 2678400;
    requests.push_back(r);
    r.start = StartRequest{};
    r.start.launched_pid = 9;
    r.start.command = {"python3", "", "-c", "x = '\x01\n'"};
    requests.push_back(r);
    r.start.command.clear();
    requests.push_back(r);
    r = Request{};
    r.op = Request::Op::Snapshot;
    requests.push_back(r);
    r.snapshot.format = "html";
    r.snapshot.report = true;
    requests.push_back(r);
    r = Request{};
    r.op = Request::Op::Stop;
    requests.push_back(r);
    r.stop.output_name = "out/profile.speedscope.json";
    requests.push_back(r);
    requests.push_back(Request{});

    for (const Request& req : requests) {
        std::string text = encode_request(req);
        SCOPED_TRACE(text);
        Request back;
        std::string error;
        ASSERT_TRUE(parse_request(text, kFormats, back, error)) << error;
        EXPECT_EQ(back, req);
        EXPECT_EQ(encode_request(back), text);
        EXPECT_LE(text.size(), kMaxRequestBytes);
    }
    EXPECT_EQ(encode_request(Request{}), R"({"v":1,"op":"status"})");
}

// ---- the envelope -----------------------------------------------------------------------

TEST(AgentProtocol, RejectsMissingOrWrongVersion) {
    EXPECT_EQ(error_of(R"({"op":"status"})"), "field 'v' is missing: it must be 1, the protocol version");
    EXPECT_EQ(error_of(R"({"v":2,"op":"status"})"),
              "field 'v' must be 1, the protocol version this agent speaks (got 2)");
    for (const char* v : {"1.0", "\"1\"", "true", "null", "[1]", "0", "-1", "18446744073709551615"})
        EXPECT_EQ(error_of(std::string(R"({"op":"status","v":)") + v + "}"),
                  std::string("field 'v' must be 1, the protocol version this agent speaks (got ") + v + ")");
}

TEST(AgentProtocol, RejectsMissingOrUnknownOp) {
    EXPECT_EQ(error_of(R"({"v":1})"),
              R"(field 'op' is missing: it must be one of "start", "snapshot", "stop", "status", "dump")");
    EXPECT_EQ(error_of(R"({"v":1,"op":"START"})"),
              R"(field 'op' must be one of "start", "snapshot", "stop", "status", "dump" (got "START"))");
    EXPECT_EQ(error_of(R"({"v":1,"op":1})"),
              R"(field 'op' must be one of "start", "snapshot", "stop", "status", "dump" (got 1))");
    EXPECT_EQ(error_of(R"({"v":1,"op":["status"]})"),
              R"(field 'op' must be one of "start", "snapshot", "stop", "status", "dump" (got ["status"]))");
}

TEST(AgentProtocol, RejectsUnknownField) {
    EXPECT_EQ(error_of(R"({"v":1,"op":"status","format":"pprof"})"), "unknown field 'format' in a status request");
    EXPECT_EQ(error_of(R"({"v":1,"op":"stop","report":true})"), "unknown field 'report' in a stop request");
    EXPECT_EQ(error_of(R"({"v":1,"op":"snapshot","output_name":"x"})"),
              "unknown field 'output_name' in a snapshot request");
    EXPECT_EQ(error_of(start_with(R"(,"rate":5)")), "unknown field 'rate' in a start request");
    EXPECT_EQ(error_of(start_with(R"(,"Rate_hz":5)")), "unknown field 'Rate_hz' in a start request");
    // A strange name is shown escaped.
    EXPECT_EQ(error_of(R"({"v":1,"op":"status","a\nb\u0000\u00e9":1})"),
              "unknown field 'a\\nb\\x00\\xc3\\xa9' in a status request");
    // Objects inside arrays are not fields: the array's type is wrong.
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":[{"pid":1}]})"),
              R"(field 'pids[0]' must be an integer from 1 to 4194304 (got {"pid":1}))");
}

TEST(AgentProtocol, RejectsAttachmentsInRequest) {
    EXPECT_EQ(error_of(R"({"v":1,"op":"status","attachments":[3]})"),
              "field 'attachments': a request must not carry attachments");
    EXPECT_EQ(error_of(start_with(R"(,"attachments":[])")),
              "field 'attachments': a request must not carry attachments");
}

// ---- start: the target ------------------------------------------------------------------

TEST(AgentProtocol, StartNeedsExactlyOneTarget) {
    const std::string prefix =
        "a start request needs exactly one target field: 'pids', 'all_python', 'cgroups' or 'launched_pid' (got ";
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","rate_hz":5})"), prefix + "none)");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":[1],"cgroups":["a"]})"), prefix + "'pids' and 'cgroups')");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","all_python":true,"launched_pid":3})"),
              prefix + "'all_python' and 'launched_pid')");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","all_python":true,"launched_pid":3,"pids":[1]})"),
              prefix + "'pids' and 'all_python' and more)");
    // all_python false is not "no target": it is refused.
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","all_python":false})"),
              "field 'all_python' must be true (omit it otherwise) (got false)");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","all_python":1})"),
              "field 'all_python' must be true (omit it otherwise) (got 1)");
}

TEST(AgentProtocol, PidsRules) {
    const std::string pids_err = "field 'pids' must be an array of 1 to 64 process IDs (got ";
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":[]})"), pids_err + "[])");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":1})"), pids_err + "1)");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":null})"), pids_err + "null)");
    std::string many, sixty_four;
    for (int i = 1; i <= 65; i++) {
        many += (i > 1 ? "," : "") + std::to_string(i);
        if (i == 64) sixty_four = many;
    }
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":[)" + many + "]}"), pids_err + "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,...)");
    EXPECT_EQ(parse_ok(R"({"v":1,"op":"start","pids":[)" + sixty_four + "]}").start.pids.size(), 64u);

    for (const char* bad : {"0", "-1", "4194305", "1.5", "1.0", "\"1\"", "true", "null", "[1]"})
        EXPECT_EQ(error_of(std::string(R"({"v":1,"op":"start","pids":[7,)") + bad + "]}"),
                  std::string("field 'pids[1]' must be an integer from 1 to 4194304 (got ") + bad + ")");
    // A number is echoed as it was understood: 1e3 is a float, so is an integer out of 64 bits.
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":[1e3]})"),
              "field 'pids[0]' must be an integer from 1 to 4194304 (got 1000.0)");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":[18446744073709551616]})"),
              "field 'pids[0]' must be an integer from 1 to 4194304 (got 1.8446744073709552e+19)");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":[-9223372036854775809]})"),
              "field 'pids[0]' must be an integer from 1 to 4194304 (got -9.223372036854776e+18)");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":[18446744073709551615]})"),
              "field 'pids[0]' must be an integer from 1 to 4194304 (got 18446744073709551615)");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":[5,6,5]})"), "field 'pids' lists process 5 twice");
}

TEST(AgentProtocol, LaunchedPidRules) {
    for (const char* bad : {"0", "-5", "4194305", "2.5", "\"12\"", "false", "{}"})
        EXPECT_EQ(error_of(std::string(R"({"v":1,"op":"start","launched_pid":)") + bad + "}"),
                  std::string("field 'launched_pid' must be an integer from 1 to 4194304 (got ") + bad + ")");
    EXPECT_EQ(parse_ok(R"({"v":1,"op":"start","launched_pid":1})").start.launched_pid, 1);
}

TEST(AgentProtocol, CgroupsRules) {
    const std::string arr_err = "field 'cgroups' must be an array of 1 to 16 cgroup names (got ";
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","cgroups":[]})"), arr_err + "[])");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","cgroups":"a"})"), arr_err + "\"a\")");
    std::string sixteen = R"("a")";
    for (int i = 1; i < 16; i++) sixteen += R"(,"a")";
    EXPECT_EQ(parse_ok(R"({"v":1,"op":"start","cgroups":[)" + sixteen + "]}").start.cgroups.size(), 16u);
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","cgroups":[)" + sixteen + R"(,"b"]})"),
              arr_err + R"(["a","a","a","a","a","a","a","a","a",...))");

    const std::string entry_err = "field 'cgroups[1]' must be a string of 1 to 4096 bytes without control characters (got ";
    auto cg = [](const std::string& second) { return R"({"v":1,"op":"start","cgroups":["ok",)" + second + "]}"; };
    EXPECT_EQ(error_of(cg(R"("")")), entry_err + R"(""))");
    EXPECT_EQ(error_of(cg("5")), entry_err + "5)");
    EXPECT_EQ(error_of(cg(R"("a\nb")")), entry_err + R"("a\nb"))");
    EXPECT_EQ(error_of(cg(R"("a\u0000b")")), entry_err + R"("a\u0000b"))");
    EXPECT_EQ(error_of(cg(R"("a\tb")")), entry_err + R"("a\tb"))");
    EXPECT_EQ(error_of(cg(R"("a\u007fb")")), entry_err + R"("a\u007fb"))");
    EXPECT_EQ(error_of(cg(R"("a\u009bb")")), entry_err + R"("a\u009bb"))");  // C1 CSI
    EXPECT_EQ(parse_ok(cg(R"("a\u00a0b")")).start.cgroups[1], "a\xc2\xa0"
                                                               "b");  // U+00A0 is not a control
    EXPECT_EQ(parse_ok(cg("\"" + std::string(4096, 'x') + "\"")).start.cgroups[1].size(), 4096u);
    std::string e = error_of(cg("\"" + std::string(4097, 'x') + "\""));
    EXPECT_EQ(e, entry_err + "\"" + std::string(36, 'x') + "...)");
}

TEST(AgentProtocol, CommandRules) {
    EXPECT_EQ(error_of(start_with(R"(,"command":["x"])")), "field 'command' is only allowed with 'launched_pid'");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","all_python":true,"command":[]})"),
              "field 'command' is only allowed with 'launched_pid'");
    auto launched = [](const std::string& cmd) { return R"({"v":1,"op":"start","launched_pid":5,"command":)" + cmd + "}"; };
    EXPECT_EQ(error_of(launched(R"("python3 x.py")")),
              R"(field 'command' must be an array of at most 256 strings (got "python3 x.py"))");
    EXPECT_EQ(error_of(launched(R"(["a",null])")), "field 'command[1]' must be a string (got null)");
    EXPECT_TRUE(parse_ok(launched("[]")).start.command.empty());

    std::string args = R"("")";
    for (int i = 1; i < 256; i++) args += R"(,"")";
    EXPECT_EQ(parse_ok(launched("[" + args + "]")).start.command.size(), 256u);
    EXPECT_EQ(error_of(launched("[" + args + R"(,""])")),
              R"(field 'command' must be an array of at most 256 strings (got ["","","","","","","","","","","","",...))");

    // 16 KiB of strings in all: at the limit, and one byte over.
    std::string big = "\"" + std::string(8192, 'a') + "\",\"" + std::string(8192, 'b') + "\"";
    EXPECT_EQ(parse_ok(launched("[" + big + "]")).start.command.size(), 2u);
    EXPECT_EQ(error_of(launched("[" + big + R"(,"c"])")),
              "field 'command' must have at most 16384 bytes of strings (got 16385)");
}

// ---- start: the options -----------------------------------------------------------------

TEST(AgentProtocol, RateHzRules) {
    EXPECT_EQ(error_of(start_with(R"(,"rate_hz":"fast")")), R"(field 'rate_hz' must be a number from 1 to 10000 (got "fast"))");
    for (const char* bad : {"0", "0.999", "10000.001", "-99", "true", "null", "[99]", "1e+308"})
        EXPECT_EQ(error_of(start_with(std::string(R"(,"rate_hz":)") + bad)),
                  std::string("field 'rate_hz' must be a number from 1 to 10000 (got ") + bad + ")");
    EXPECT_EQ(parse_ok(start_with(R"(,"rate_hz":1)")).start.rate_hz, 1);
    EXPECT_EQ(parse_ok(start_with(R"(,"rate_hz":10000)")).start.rate_hz, 10000);
    EXPECT_EQ(parse_ok(start_with(R"(,"rate_hz":1e4)")).start.rate_hz, 10000);
    EXPECT_EQ(parse_ok(start_with(R"(,"rate_hz":49.5)")).start.rate_hz, 49.5);
}

TEST(AgentProtocol, DurationRules) {
    const std::string err = "field 'duration_s' must be a number of seconds from 0 to 2678400 (31 days) (got ";
    for (const char* bad : {"-1", "-0.001", "2678400.5", "\"60\"", "false", "null"})
        EXPECT_EQ(error_of(start_with(std::string(R"(,"duration_s":)") + bad)), err + bad + ")");
    EXPECT_EQ(parse_ok(start_with(R"(,"duration_s":0)")).start.duration_s, 0);
    EXPECT_EQ(parse_ok(start_with(R"(,"duration_s":2678400)")).start.duration_s, 2678400);
    EXPECT_EQ(parse_ok(start_with(R"(,"duration_s":0.5)")).start.duration_s, 0.5);
}

TEST(AgentProtocol, MaxDepthRules) {
    for (const char* bad : {"-1", "1025", "1.5", "10.0", "\"10\"", "true", "null"})
        EXPECT_EQ(error_of(start_with(std::string(R"(,"max_depth":)") + bad)),
                  std::string("field 'max_depth' must be an integer from 0 to 1024 (got ") + bad + ")");
    EXPECT_EQ(parse_ok(start_with(R"(,"max_depth":1024)")).start.max_depth, 1024);
    EXPECT_EQ(parse_ok(start_with(R"(,"max_depth":0)")).start.max_depth, 0);
}

TEST(AgentProtocol, FormatRules) {
    EXPECT_EQ(error_of(start_with(R"(,"format":"svg")")),
              R"(field 'format' must be one of "speedscope", "collapsed", "html", "pprof" (got "svg"))");
    EXPECT_EQ(error_of(R"({"v":1,"op":"snapshot","format":"Pprof"})"),
              R"(field 'format' must be one of "speedscope", "collapsed", "html", "pprof" (got "Pprof"))");
    EXPECT_EQ(error_of(R"({"v":1,"op":"snapshot","format":""})"),
              R"(field 'format' must be one of "speedscope", "collapsed", "html", "pprof" (got ""))");
    EXPECT_EQ(error_of(R"({"v":1,"op":"snapshot","format":null})"),
              R"(field 'format' must be one of "speedscope", "collapsed", "html", "pprof" (got null))");
    // The names are the caller's.
    EXPECT_EQ(parse_ok(start_with(R"(,"format":"svg")"), {"svg"}).start.format, "svg");
    EXPECT_EQ(error_of(start_with(R"(,"format":"pprof")"), {"svg"}),
              R"(field 'format' must be one of "svg" (got "pprof"))");
    EXPECT_EQ(error_of(start_with(R"(,"format":"pprof")"), {}),
              R"(field 'format' must be a format of the agent, which has none (got "pprof"))");
}

TEST(AgentProtocol, BoolFieldsAreExact) {
    for (const char* field : {"report", "progress", "native", "async"}) {
        for (const char* bad : {"0", "1", "\"true\"", "null", "[true]"})
            EXPECT_EQ(error_of(start_with(std::string(",\"") + field + "\":" + bad)),
                      std::string("field '") + field + "' must be true or false (got " + bad + ")");
    }
    EXPECT_EQ(error_of(R"({"v":1,"op":"snapshot","report":1})"), "field 'report' must be true or false (got 1)");
    EXPECT_TRUE(parse_ok(start_with(R"(,"report":true)")).start.report);
    EXPECT_FALSE(parse_ok(start_with(R"(,"progress":false)")).start.progress);
}

TEST(AgentProtocol, GroupByRules) {
    for (const char* bad : {"\"Pod\"", "\"node\"", "\"\"", "1", "null"})
        EXPECT_EQ(error_of(start_with(std::string(R"(,"group_by":)") + bad)),
                  std::string(R"(field 'group_by' must be "process" or "pod" (got )") + bad + ")");
    EXPECT_EQ(parse_ok(start_with(R"(,"group_by":"pod")")).start.group_by, "pod");
    EXPECT_EQ(parse_ok(start_with(R"(,"group_by":"process")")).start.group_by, "process");
}

TEST(AgentProtocol, ModeRules) {
    for (const char* bad : {"\"Wall\"", "\"off-cpu\"", "\"\"", "1", "null", "[\"wall\"]"})
        EXPECT_EQ(error_of(start_with(std::string(R"(,"mode":)") + bad)),
                  std::string(R"(field 'mode' must be "cpu", "wall" or "gil" (got )") + bad + ")");
    for (const char* mode : {"cpu", "wall", "gil"})
        EXPECT_EQ(parse_ok(start_with(std::string(R"(,"mode":")") + mode + "\"")).start.mode, mode);
}

TEST(AgentProtocol, MinBlockRules) {
    const std::string err = "field 'min_block_us' must be an integer number of microseconds from 10 to 1000000 (got ";
    for (const char* bad : {"9", "0", "-1", "1000001", "1.5", "1000.0", "\"1ms\"", "true", "null"})
        EXPECT_EQ(error_of(start_with(std::string(R"(,"mode":"wall","min_block_us":)") + bad)), err + bad + ")");
    EXPECT_EQ(parse_ok(start_with(R"(,"mode":"wall","min_block_us":10)")).start.min_block_us, 10);
    EXPECT_EQ(parse_ok(start_with(R"(,"mode":"wall","min_block_us":1000000)")).start.min_block_us, 1000000);
    // Wherever it is in the object: the mode decides.
    EXPECT_EQ(parse_ok(R"({"min_block_us":500,"v":1,"op":"start","mode":"wall","pids":[1]})").start.min_block_us, 500);
    // Only wall mode has a minimum: elsewhere it would change nothing, and is refused.
    for (const char* extra : {R"(,"min_block_us":500)", R"(,"mode":"cpu","min_block_us":500)",
                              R"(,"mode":"gil","min_block_us":500)"})
        EXPECT_EQ(error_of(start_with(extra)), R"(field 'min_block_us' is only allowed with 'mode' "wall")");
    Request r;
    std::string error;
    ErrorCode code = ErrorCode::Internal;
    EXPECT_FALSE(parse_request(start_with(R"(,"mode":"wall","min_block_us":1)"), kFormats, r, error, code));
    EXPECT_EQ(code, ErrorCode::BadInput);
    EXPECT_FALSE(parse_request(start_with(R"(,"mode":"fast")"), kFormats, r, error, code));
    EXPECT_EQ(code, ErrorCode::BadInput);
    EXPECT_FALSE(parse_request(R"({"v":1,"op":"snapshot","mode":"wall"})", kFormats, r, error, code));
    EXPECT_EQ(code, ErrorCode::Protocol) << "a start field in another op: " << error;
}

// ---- stop -------------------------------------------------------------------------------

TEST(AgentProtocol, OutputNameRules) {
    const std::string err = "field 'output_name' must be a string of at most 4096 bytes without control characters (got ";
    for (const char* bad : {R"("a\nb")", R"("\u001b[31m")", R"("x\u0085")", "7", "null", "[\"a\"]"})
        EXPECT_EQ(error_of(std::string(R"({"v":1,"op":"stop","output_name":)") + bad + "}"), err + bad + ")");
    EXPECT_EQ(parse_ok(R"({"v":1,"op":"stop","output_name":")" + std::string(4096, 'n') + "\"}").stop.output_name.size(),
              4096u);
    EXPECT_EQ(error_of(R"({"v":1,"op":"stop","output_name":")" + std::string(4097, 'n') + "\"}"),
              err + "\"" + std::string(36, 'n') + "...)");
    EXPECT_EQ(parse_ok(R"({"v":1,"op":"stop","output_name":""})").stop.output_name, "");
}

TEST(AgentProtocol, ErrorCodeSaysProtocolOrBadInput) {
    auto code_of = [](std::string_view text) {
        Request r;
        std::string e;
        ErrorCode code = ErrorCode::Internal;
        EXPECT_FALSE(parse_request(text, kFormats, r, e, code)) << text;
        return code;
    };
    for (std::string text : {std::string("{\"v\":1,"), std::string(R"([1])"), std::string(R"({"v":2,"op":"status"})"),
                             std::string(R"({"op":"status"})"), std::string(R"({"v":1,"op":"go"})"),
                             std::string(R"({"v":1})"), std::string(R"({"v":1,"op":"status","x":1})"),
                             std::string(R"({"v":1,"op":"status","attachments":[]})"),
                             std::string(R"({"v":1,"op":"status","v":1})"),
                             std::string(R"({"v":1,"op":"start","pids":[[[[1]]]]})"),
                             std::string(kMaxRequestBytes + 1, ' ')})
        EXPECT_EQ(code_of(text), ErrorCode::Protocol) << text;
    for (std::string text : {start_with(R"(,"rate_hz":0)"), start_with(R"(,"format":"svg")"),
                             std::string(R"({"v":1,"op":"start"})"), std::string(R"({"v":1,"op":"start","pids":[1,1]})"),
                             std::string(R"({"v":1,"op":"start","pids":"1"})"),
                             std::string(R"({"v":1,"op":"snapshot","format":"svg"})"),
                             std::string(R"({"v":1,"op":"stop","output_name":"a\nb"})")})
        EXPECT_EQ(code_of(text), ErrorCode::BadInput) << text;
}

// ---- malformed JSON ---------------------------------------------------------------------

TEST(AgentProtocol, RejectsMalformedJson) {
    struct Case {
        std::string text, error;
    };
    const std::vector<Case> cases = {
        {"", "invalid JSON near byte 0: syntax error while parsing value - unexpected end of input; expected '[', '{', "
             "or a literal"},
        {R"({"v":1,"op":"status")", "invalid JSON near byte 20: syntax error while parsing object - unexpected end of "
                                    "input; expected '}'"},
        {R"({"v":1,"op":"sta)", "invalid JSON near byte 16: syntax error while parsing value - invalid string: missing "
                                "closing quote; last read: '\"sta'"},
        {R"({"v":1,"op":"status"} x)", "invalid JSON near byte 22: syntax error while parsing value - invalid literal; "
                                       "last read: '\"status\"} x'; expected end of input"},
        {R"({"v":1,"op":"status"}{})", "invalid JSON near byte 21: syntax error while parsing value - unexpected '{'; "
                                       "expected end of input"},
        {std::string("{\"v\":1,\"op\":\"status\"}\0garbage", 29), "invalid JSON at byte 21: NUL byte"},
        {std::string("{\"v\":1,\"op\":\"st\0tus\"}", 22), "invalid JSON at byte 15: NUL byte"},
        {"\xEF\xBB\xBF{\"v\":1,\"op\":\"status\"}", "invalid JSON at byte 0: byte order mark"},
        {R"({"v":1,"op":"status"} // c)", "invalid JSON near byte 22: syntax error while parsing value - invalid "
                                          "literal; last read: '\"status\"} /'; expected end of input"},
        {R"({"v":1,/*c*/"op":"status"})", "invalid JSON near byte 7: syntax error while parsing object key - invalid "
                                          "literal; last read: '1,/'; expected string literal"},
        {R"({'v':1})", "invalid JSON near byte 1: syntax error while parsing object key - invalid literal; last read: "
                       "'{''; expected string literal"},
        {R"({"v":1,"op":"status",})", "invalid JSON near byte 21: syntax error while parsing object key - unexpected "
                                      "'}'; expected string literal"},
        {R"({"v":1,"op":"status","v":1})", "duplicate field 'v'"},
        {R"({"v":1,"op":"status","op":"stop"})", "duplicate field 'op'"},
        {R"({"v":1,"op":"start","pids":[1],"rate_hz":1e400})", "invalid JSON near byte 45: number overflow parsing "
                                                               "'1e400'"},
        {R"({"v":01,"op":"status"})", "invalid JSON near byte 6: syntax error while parsing object - unexpected "
                                      "number literal; expected '}'"},
        {R"({"v":NaN})", "invalid JSON near byte 5: syntax error while parsing value - invalid literal; last read: "
                         "'\"v\":N'"},
        // Not an object.
        {R"([{"v":1,"op":"status"}])", R"(a request must be a JSON object (got [{"op":"status","v":1}]))"},
        {R"("status")", R"(a request must be a JSON object (got "status"))"},
        {"42", "a request must be a JSON object (got 42)"},
        {"null", "a request must be a JSON object (got null)"},
    };
    for (const auto& c : cases) EXPECT_EQ(error_of(c.text), c.error) << c.text;
}

TEST(AgentProtocol, RejectsInvalidUtf8) {
    const std::vector<std::string> bad = {
        "\xff",            // never valid
        "\xc3",            // truncated 2-byte sequence
        "\x80",            // lone continuation byte
        "\xc0\xaf",        // overlong '/'
        "\xed\xa0\x80",    // UTF-16 surrogate encoded in UTF-8
        "\xf4\x90\x80\x80",  // above U+10FFFF
    };
    for (const auto& b : bad) {
        std::string text = R"({"v":1,"op":"stop","output_name":"a)" + b + "\"}";
        std::string e = error_of(text);
        EXPECT_NE(e.find("syntax error while parsing value - invalid string: ill-formed UTF-8 byte"), std::string::npos)
            << e;
        EXPECT_TRUE(one_line_ascii(e)) << e;
        // Outside a string.
        e = error_of("{\"v\":1," + b + "\"op\":\"status\"}");
        EXPECT_NE(e.find("invalid JSON near byte 7: syntax error while parsing object key"), std::string::npos) << e;
        EXPECT_TRUE(one_line_ascii(e)) << e;
    }
    // Escapes that are not a character: lone surrogates.
    EXPECT_NE(error_of(R"({"v":1,"op":"stop","output_name":"\ud800"})").find("surrogate"), std::string::npos);
    EXPECT_NE(error_of(R"({"v":1,"op":"stop","output_name":"\udc00x"})").find("surrogate"), std::string::npos);
    // A valid pair is fine.
    EXPECT_EQ(parse_ok(R"({"v":1,"op":"stop","output_name":"\ud83d\ude00"})").stop.output_name, "\xf0\x9f\x98\x80");
}

TEST(AgentProtocol, NestingBombRejectedFast) {
    std::vector<std::string> bombs = {std::string(kMaxRequestBytes, '[')};
    std::string obj;
    while (obj.size() + 5 <= kMaxRequestBytes) obj += R"({"a":)";
    bombs.push_back(obj);
    std::string mixed = R"({"v":1,"op":"start","pids":)";
    while (mixed.size() + 6 <= kMaxRequestBytes) mixed += R"([{"a":)";
    bombs.push_back(mixed);
    for (const auto& b : bombs) {
        auto t0 = std::chrono::steady_clock::now();
        std::string e = error_of(b);
        auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        EXPECT_EQ(e, "JSON nested deeper than 4 levels");
        EXPECT_LT(ms, 50) << "the parser went on after the limit";
    }
    // {{{{...: the second { is not a key.
    EXPECT_EQ(error_of(std::string(kMaxRequestBytes, '{')),
              "invalid JSON near byte 1: syntax error while parsing object key - unexpected '{'; expected string literal");
    // At the limit, the parser accepts it and the field check refuses it.
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":[[[1]]]})"),
              "field 'pids[0]' must be an integer from 1 to 4194304 (got [[1]])");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","pids":[[[[1]]]]})"), "JSON nested deeper than 4 levels");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","x":{"a":{"b":{"c":{"d":1}}}}})"), "JSON nested deeper than 4 levels");
    EXPECT_EQ(error_of(R"({"v":1,"op":"start","x":{"a":{"b":{"c":1}}}})"), "unknown field 'x' in a start request");
}

TEST(AgentProtocol, RejectsRequestOverTheSizeLimit) {
    std::string name(kMaxRequestBytes, 'n');
    std::string text = R"({"v":1,"op":"stop","output_name":")" + name + "\"}";
    EXPECT_EQ(error_of(text), "request of " + std::to_string(text.size()) + " bytes: a request must have at most 65536 bytes");
    // Exactly at the limit is fine (trailing whitespace is allowed).
    std::string pad(kMaxRequestBytes - 21, ' ');
    text = R"({"v":1,"op":"status"})" + pad;
    ASSERT_EQ(text.size(), kMaxRequestBytes);
    parse_ok(text);
    EXPECT_EQ(error_of(text + " "), "request of 65537 bytes: a request must have at most 65536 bytes");
}

TEST(AgentProtocol, ParseJsonStrictDepthAndTypes) {
    json j;
    std::string e;
    EXPECT_TRUE(parse_json_strict("5", 0, j, e)) << e;
    EXPECT_EQ(j, 5);
    EXPECT_FALSE(parse_json_strict("[]", 0, j, e));
    EXPECT_EQ(e, "JSON nested deeper than 0 levels");
    EXPECT_TRUE(parse_json_strict(R"([1,{"a":[true,null,"x",-2,1.5,18446744073709551615]}])", 3, j, e)) << e;
    EXPECT_EQ(j, json::parse(R"([1,{"a":[true,null,"x",-2,1.5,18446744073709551615]}])"));
    EXPECT_TRUE(j[1]["a"][5].is_number_unsigned());
    EXPECT_TRUE(j[1]["a"][4].is_number_float());
    EXPECT_FALSE(parse_json_strict(R"([1,{"a":[[]]}])", 3, j, e));
    EXPECT_FALSE(parse_json_strict(R"({"a":{"b":1,"b":2}})", 3, j, e));
    EXPECT_EQ(e, "duplicate field 'b'");
    // The same key in different objects is fine.
    EXPECT_TRUE(parse_json_strict(R"([{"b":1},{"b":2}])", 3, j, e)) << e;
}

TEST(AgentProtocol, GarbageIsRefusedWithOneLineErrors) {
    std::mt19937 rng(12345);
    for (int i = 0; i < 2000; i++) {
        std::string text(rng() % 200, '\0');
        for (char& c : text) c = static_cast<char>(rng());
        // Half of them look like the start of a request.
        if (i % 2) text = R"({"v":1,"op":")" + text;
        Request r;
        std::string e;
        ASSERT_FALSE(parse_request(text, kFormats, r, e));
        EXPECT_TRUE(one_line_ascii(e)) << e;
        EXPECT_LE(e.size(), 300u) << e;
    }
    // An echoed value is cut at 40 characters, its control characters escaped.
    std::string ctl;
    for (int i = 0; i < 1000; i++) ctl += "\\u0001";
    std::string e = error_of(start_with(R"(,"rate_hz":")" + ctl + "\""));
    EXPECT_EQ(e, R"(field 'rate_hz' must be a number from 1 to 10000 (got "\u0001\u0001\u0001\u0001\u0001\u0001...))");
    EXPECT_TRUE(one_line_ascii(e));
}

// ---- framing ----------------------------------------------------------------------------

TEST(AgentProtocol, FrameIsBigEndianLengthThenPayload) {
    EXPECT_EQ(frame("{}"), std::string("\0\0\0\x02{}", 6));
    std::string big(0x010203, 'x');
    std::string f = frame(big);
    EXPECT_EQ(f.substr(0, 4), std::string("\0\x01\x02\x03", 4));
    EXPECT_EQ(f.size(), 4 + big.size());
    EXPECT_EQ(frame(""), std::string(4, '\0'));
}

TEST(AgentProtocol, FrameReaderSplitAtEveryByte) {
    const std::string a = R"({"v":1,"op":"status"})";
    const std::string b = encode_request([] {
        Request r;
        r.op = Request::Op::Start;
        r.start.pids = {1, 2, 3};
        return r;
    }());
    const std::string stream = frame(a) + frame(b) + frame("x");
    for (size_t cut1 = 0; cut1 <= stream.size(); cut1++) {
        for (size_t cut2 : {cut1, (cut1 + stream.size()) / 2, stream.size()}) {
            FrameReader reader;
            std::vector<std::string> frames;
            std::string f, e;
            auto drain = [&] {
                FrameReader::Next n;
                while ((n = reader.next(f, e)) == FrameReader::Next::Frame) frames.push_back(f);
                ASSERT_EQ(n, FrameReader::Next::NeedMore) << e;
            };
            reader.push(stream.data(), cut1);
            drain();
            reader.push(stream.data() + cut1, cut2 - cut1);
            drain();
            reader.push(stream.data() + cut2, stream.size() - cut2);
            drain();
            ASSERT_EQ(frames, (std::vector<std::string>{a, b, "x"})) << cut1 << " " << cut2;
            EXPECT_EQ(reader.buffered(), 0u);
        }
    }
    // One byte at a time.
    FrameReader reader;
    std::vector<std::string> frames;
    std::string f, e;
    for (char c : stream) {
        reader.push(&c, 1);
        while (reader.next(f, e) == FrameReader::Next::Frame) frames.push_back(f);
    }
    EXPECT_EQ(frames, (std::vector<std::string>{a, b, "x"}));
}

TEST(AgentProtocol, FrameReaderTwoFramesInOnePush) {
    FrameReader reader;
    std::string stream = frame("first") + frame("second") + std::string("\0\0", 2);
    reader.push(stream.data(), stream.size());
    EXPECT_EQ(reader.buffered(), stream.size());
    std::string f, e;
    ASSERT_EQ(reader.next(f, e), FrameReader::Next::Frame);
    EXPECT_EQ(f, "first");
    EXPECT_EQ(reader.buffered(), stream.size() - 9);
    ASSERT_EQ(reader.next(f, e), FrameReader::Next::Frame);
    EXPECT_EQ(f, "second");
    EXPECT_EQ(reader.next(f, e), FrameReader::Next::NeedMore);
    EXPECT_EQ(reader.buffered(), 2u);
    reader.push("\0\x01z", 3);
    ASSERT_EQ(reader.next(f, e), FrameReader::Next::Frame);
    EXPECT_EQ(f, "z");
    EXPECT_EQ(reader.buffered(), 0u);
    EXPECT_EQ(reader.next(f, e), FrameReader::Next::NeedMore);
}

TEST(AgentProtocol, FrameReaderRejectsZeroLength) {
    FrameReader reader;
    std::string stream = frame("ok") + frame("");
    reader.push(stream.data(), stream.size());
    std::string f, e;
    ASSERT_EQ(reader.next(f, e), FrameReader::Next::Frame);
    ASSERT_EQ(reader.next(f, e), FrameReader::Next::Error);
    EXPECT_EQ(e, "frame of 0 bytes: a frame must have 1 to 65536 bytes");
}

TEST(AgentProtocol, FrameReaderRejectsOversizeAndStaysFailed) {
    {
        FrameReader reader;
        reader.push("\xff\xff\xff\xff", 4);
        std::string f, e;
        ASSERT_EQ(reader.next(f, e), FrameReader::Next::Error);
        EXPECT_EQ(e, "frame of 4294967295 bytes: a frame must have 1 to 65536 bytes");
        // Sticky: more bytes are ignored, the same error comes back.
        std::string good = frame("{}");
        reader.push(good.data(), good.size());
        EXPECT_EQ(reader.buffered(), 0u);
        e.clear();
        EXPECT_EQ(reader.next(f, e), FrameReader::Next::Error);
        EXPECT_EQ(e, "frame of 4294967295 bytes: a frame must have 1 to 65536 bytes");
    }
    {
        // The limit is known from the length alone, before the payload arrives.
        FrameReader reader;
        reader.push("\0\x01\0\x01", 4);
        std::string f, e;
        ASSERT_EQ(reader.next(f, e), FrameReader::Next::Error);
        EXPECT_EQ(e, "frame of 65537 bytes: a frame must have 1 to 65536 bytes");
    }
    {
        // An HTTP request is an oversize frame.
        FrameReader reader;
        reader.push("GET / HTTP/1.1\r\n", 16);
        std::string f, e;
        ASSERT_EQ(reader.next(f, e), FrameReader::Next::Error);
        EXPECT_EQ(e, "frame of 1195725856 bytes: a frame must have 1 to 65536 bytes");
    }
    {
        // Exactly the limit is fine; the limit is the constructor's.
        std::string payload(kMaxRequestBytes, 'p');
        std::string stream = frame(payload);
        FrameReader reader;
        reader.push(stream.data(), stream.size() - 1);
        std::string f, e;
        EXPECT_EQ(reader.next(f, e), FrameReader::Next::NeedMore);
        reader.push(stream.data() + stream.size() - 1, 1);
        ASSERT_EQ(reader.next(f, e), FrameReader::Next::Frame) << e;
        EXPECT_EQ(f, payload);
        FrameReader small(10);
        std::string eleven = frame("01234567890");
        small.push(eleven.data(), eleven.size());
        ASSERT_EQ(small.next(f, e), FrameReader::Next::Error);
        EXPECT_EQ(e, "frame of 11 bytes: a frame must have 1 to 10 bytes");
    }
}

TEST(AgentProtocol, FramedBombThroughTheReader) {
    std::string stream = frame(std::string(kMaxRequestBytes, '['));
    FrameReader reader;
    reader.push(stream.data(), stream.size());
    std::string f, e;
    ASSERT_EQ(reader.next(f, e), FrameReader::Next::Frame);
    EXPECT_EQ(error_of(f), "JSON nested deeper than 4 levels");
}

// ---- messages ---------------------------------------------------------------------------

// The header a message's bytes start with (and what follows it).
json header_of(const std::string& msg, std::string* rest = nullptr) {
    FrameReader reader(kMaxHeaderBytes);
    reader.push(msg.data(), msg.size());
    std::string f, e;
    EXPECT_EQ(reader.next(f, e), FrameReader::Next::Frame) << e;
    if (rest) *rest = msg.substr(4 + f.size());
    return json::parse(f);
}

TEST(AgentProtocol, EncodeMessageAddsVersionAndAttachments) {
    std::string rest;
    json h = header_of(encode_message({{"type", "profile"}, {"format", "pprof"}}, {"PROFILE", "", "<html>"}), &rest);
    EXPECT_EQ(h, json::parse(R"({"v":1,"type":"profile","format":"pprof","attachments":[7,0,6]})"));
    EXPECT_EQ(rest, "PROFILE<html>");

    // No attachments: the field is removed, not left stale.
    h = header_of(encode_message({{"type", "status"}, {"attachments", {5}}}), &rest);
    EXPECT_EQ(h, json::parse(R"({"v":1,"type":"status"})"));
    EXPECT_EQ(rest, "");
    // A caller's "v" is kept.
    EXPECT_EQ(header_of(encode_message({{"v", 2}, {"type", "x"}}))["v"], 2);
    // Strings that are not UTF-8 (a process's command line) are sent with U+FFFD.
    h = header_of(encode_message({{"type", "event"}, {"comm", "py\xff"}}));
    EXPECT_EQ(h["comm"], "py\xef\xbf\xbd");

    EXPECT_THROW(encode_message(json::array()), std::invalid_argument);
    EXPECT_THROW(encode_message({{"type", "x"}, {"big", std::string(kMaxHeaderBytes, 'x')}}), std::length_error);
    EXPECT_THROW(encode_message_header({{"type", "x"}}, {kMaxAttachmentBytes + 1}), std::length_error);
    EXPECT_THROW(encode_message_header({{"type", "x"}}, std::vector<uint64_t>(kMaxAttachments + 1, 1)), std::length_error);
    // The header alone, for attachments written separately.
    h = header_of(encode_message_header({{"type", "profile"}}, {kMaxAttachmentBytes}));
    EXPECT_EQ(h["attachments"], json::array({kMaxAttachmentBytes}));
}

TEST(AgentProtocol, EncodeError) {
    EXPECT_EQ(header_of(encode_error(ErrorCode::BadInput, "field 'x' ...")),
              json::parse(R"({"v":1,"type":"error","code":"bad_input","message":"field 'x' ..."})"));
    // One line, whatever the caller passed.
    EXPECT_EQ(error_header(ErrorCode::Internal, "a\nb\tc\x7f")["message"], "a b c ");
    std::vector<std::string> names;
    for (auto c : {ErrorCode::Protocol, ErrorCode::BadInput, ErrorCode::Forbidden, ErrorCode::CannotProfile,
                   ErrorCode::Limit, ErrorCode::Internal})
        names.push_back(error_code_name(c));
    EXPECT_EQ(names, (std::vector<std::string>{"protocol", "bad_input", "forbidden", "cannot_profile", "limit",
                                               "internal"}));
}

// The agent's messages, exactly as docs/agent-protocol.md shows them.
TEST(AgentProtocol, MessageHeadersAsDocumented) {
    EXPECT_EQ(started_header(7, 99, "process 1234 of alice", 1),
              json::parse(R"({"v":1,"type":"started","session":7,"rate_hz":99.0,"scope":"process 1234 of alice",
                              "targets":1})"));
    Event added;
    added.kind = EventKind::TargetAdded;
    added.pid = 1234;
    added.announce = true;
    added.comm = "python3";
    added.python = "CPython 3.12.3";
    added.description = "python3 app.py";
    added.labels = {{"pod", "web-1"}, {"namespace", "default"}};
    EXPECT_EQ(event_header(added), json::parse(R"({"v":1,"type":"event","kind":"target_added","pid":1234,
        "announce":true,"comm":"python3","python":"CPython 3.12.3","description":"python3 app.py",
        "labels":{"namespace":"default","pod":"web-1"}})"));
    Event scanned;
    scanned.kind = EventKind::AllPythonScanned;
    scanned.count = 0;
    EXPECT_EQ(event_header(scanned), json::parse(R"({"v":1,"type":"event","kind":"all_python_scanned","count":0})"));
    Event warning;
    warning.kind = EventKind::Warning;
    warning.message = "process 77 exited";
    warning.count = 3;  // not a field of a warning
    EXPECT_EQ(event_header(warning), json::parse(R"({"v":1,"type":"event","kind":"warning","message":"process 77 exited"})"));
    std::vector<std::string> kinds;
    for (auto k : {EventKind::TargetAdded, EventKind::CgroupWaiting, EventKind::CgroupWatching,
                   EventKind::AllPythonScanned, EventKind::Warning, EventKind::Error})
        kinds.push_back(event_kind_name(k));
    EXPECT_EQ(kinds, (std::vector<std::string>{"target_added", "cgroup_waiting", "cgroup_watching",
                                               "all_python_scanned", "warning", "error"}));

    EXPECT_EQ(progress_header(12.5, 1234, 3, 0),
              json::parse(R"({"v":1,"type":"progress","elapsed_s":12.5,"samples":1234,"processes":3,"lost":0})"));
    EXPECT_EQ(done_header("duration reached"), json::parse(R"({"v":1,"type":"done","reason":"duration reached"})"));
    json summary = {{"lines", {"Wrote profile.json"}}, {"exit_code", 0}, {"exited_early", json::array()}};
    EXPECT_EQ(profile_header("speedscope", true, false, summary),
              json::parse(R"({"v":1,"type":"profile","format":"speedscope","final":true,"report":false,
                              "summary":{"lines":["Wrote profile.json"],"exit_code":0,"exited_early":[]}})"));
    SessionStatus st;
    st.session = 7;
    st.uid = 1001;
    st.user = "alice";
    st.pid = 4000;
    st.target = "process 1234";
    st.rate_hz = 99;
    st.elapsed_s = 3.5;
    st.samples = 300;
    st.processes = 1;
    EXPECT_EQ(status_header({st}), json::parse(R"({"v":1,"type":"status","sessions":[{"session":7,"uid":1001,
        "user":"alice","pid":4000,"target":"process 1234","rate_hz":99.0,"elapsed_s":3.5,"samples":300,
        "processes":1}]})"));
    EXPECT_EQ(status_header({}), json::parse(R"({"v":1,"type":"status","sessions":[]})"));

    // Through encode_message and read_message, with the profile's attachments.
    std::string msg = encode_message(profile_header("pprof", false, true, summary), {"PB", "<html>"});
    json h = header_of(msg);
    EXPECT_EQ(h["attachments"], json::parse("[2,6]"));
    EXPECT_EQ(h["type"], "profile");
}

// ---- blocking reads and writes ------------------------------------------------------------

struct SocketPair {
    int fd[2] = {-1, -1};
    SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0); }
    ~SocketPair() { close_all(); }
    void close_end(int i) {
        if (fd[i] >= 0) close(fd[i]);
        fd[i] = -1;
    }
    void close_all() {
        close_end(0);
        close_end(1);
    }
};

TEST(AgentProtocol, ReadMessageWithAttachments) {
    SocketPair sp;
    std::string profile(3 << 20, '\0');  // bigger than the socket buffer: partial writes and reads
    for (size_t i = 0; i < profile.size(); i++) profile[i] = static_cast<char>(i * 7 + (i >> 12));
    std::string msgs = encode_message({{"type", "profile"}, {"final", true}}, {profile, "<html/>"}) +
                       encode_message({{"type", "done"}, {"reason", "duration reached"}}) +
                       encode_message({{"type", "profile"}}, {""});
    std::string werr;
    bool wrote = false;
    std::thread writer([&] {
        wrote = write_all(sp.fd[1], msgs, werr);
        sp.close_end(1);
    });
    Message m;
    std::string e;
    ASSERT_TRUE(read_message(sp.fd[0], m, e, 10000)) << e;
    EXPECT_EQ(m.header["type"], "profile");
    EXPECT_EQ(m.header["final"], true);
    ASSERT_EQ(m.attachments.size(), 2u);
    EXPECT_TRUE(m.attachments[0] == profile);
    EXPECT_EQ(m.attachments[1], "<html/>");
    ASSERT_TRUE(read_message(sp.fd[0], m, e, 10000)) << e;
    EXPECT_EQ(m.header, json::parse(R"({"v":1,"type":"done","reason":"duration reached"})"));
    EXPECT_TRUE(m.attachments.empty());
    ASSERT_TRUE(read_message(sp.fd[0], m, e, 10000)) << e;
    EXPECT_EQ(m.attachments, std::vector<std::string>{""});
    EXPECT_FALSE(read_message(sp.fd[0], m, e, 10000));
    EXPECT_EQ(e, "the agent closed the connection");
    writer.join();
    EXPECT_TRUE(wrote) << werr;
}

TEST(AgentProtocol, ReadMessageTimesOut) {
    SocketPair sp;
    Message m;
    std::string e;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(read_message(sp.fd[0], m, e, 150));
    auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(e, "timed out after 150 ms waiting for a message from the agent");
    EXPECT_GE(ms, 140);
    EXPECT_LT(ms, 3000);

    // The deadline is for the whole message: half of one does not extend it.
    std::string msg = encode_message({{"type", "profile"}}, {"0123456789"});
    std::string werr;
    ASSERT_TRUE(write_all(sp.fd[1], std::string_view(msg).substr(0, msg.size() - 3), werr)) << werr;
    t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(read_message(sp.fd[0], m, e, 100));
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(e, "timed out after 100 ms waiting for a message from the agent");
    EXPECT_GE(ms, 90);
    EXPECT_LT(ms, 3000);
}

TEST(AgentProtocol, ReadMessageWithoutDeadlineWaits) {
    SocketPair sp;
    std::thread writer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        std::string werr, msg = encode_message({{"type", "status"}, {"sessions", json::array()}});
        // Byte by byte, with pauses.
        for (char c : msg) {
            EXPECT_TRUE(write_all(sp.fd[1], std::string_view(&c, 1), werr)) << werr;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    });
    Message m;
    std::string e;
    EXPECT_TRUE(read_message(sp.fd[0], m, e)) << e;
    EXPECT_EQ(m.header["type"], "status");
    writer.join();
}

TEST(AgentProtocol, ReadMessageEofInTheMiddle) {
    std::string msg = encode_message({{"type", "profile"}}, {"0123456789"});
    struct Case {
        size_t keep;
        std::string error;
    };
    const std::vector<Case> cases = {
        {0, "the agent closed the connection"},
        {2, "the agent closed the connection in the middle of a message"},
        {10, "the agent closed the connection in the middle of a message"},
        {msg.size() - 10, "the agent closed the connection in the middle of an attachment (0 of 10 bytes)"},
        {msg.size() - 1, "the agent closed the connection in the middle of an attachment (9 of 10 bytes)"},
    };
    for (const auto& c : cases) {
        SocketPair sp;
        std::string werr;
        ASSERT_TRUE(write_all(sp.fd[1], std::string_view(msg).substr(0, c.keep), werr)) << werr;
        sp.close_end(1);
        Message m;
        std::string e;
        EXPECT_FALSE(read_message(sp.fd[0], m, e, 5000));
        EXPECT_EQ(e, c.error) << c.keep;
    }
}

TEST(AgentProtocol, ReadMessageRejectsBadHeaders) {
    struct Case {
        std::string bytes, error;
    };
    const std::vector<Case> cases = {
        {std::string(4, '\0'), "message header of 0 bytes: a header must have 1 to 1048576 bytes"},
        {std::string("\0\x10\0\x01", 4), "message header of 1048577 bytes: a header must have 1 to 1048576 bytes"},
        {std::string("\xff\xff\xff\xff", 4), "message header of 4294967295 bytes: a header must have 1 to 1048576 bytes"},
        {frame("{\"type\":"), "message header: invalid JSON near byte 8: syntax error while parsing value - unexpected "
                              "end of input; expected '[', '{', or a literal"},
        {frame("[1]"), "message header is not a JSON object (got [1])"},
        {frame(R"({"type":"x","attachments":[-1]})"),
         "message header field 'attachments' must be an array of at most 16 sizes from 0 to 1073741824 (got [-1])"},
        {frame(R"({"type":"x","attachments":[1073741825]})"),
         "message header field 'attachments' must be an array of at most 16 sizes from 0 to 1073741824 (got "
         "[1073741825])"},
        {frame(R"({"type":"x","attachments":3})"),
         "message header field 'attachments' must be an array of at most 16 sizes from 0 to 1073741824 (got 3)"},
        {frame(R"({"type":"x","attachments":[1.5]})"),
         "message header field 'attachments' must be an array of at most 16 sizes from 0 to 1073741824 (got [1.5])"},
        {frame(R"({"type":"x","attachments":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]})"),
         "message header field 'attachments' must be an array of at most 16 sizes from 0 to 1073741824 (got "
         "[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0])"},
    };
    for (const auto& c : cases) {
        SocketPair sp;
        std::string werr;
        ASSERT_TRUE(write_all(sp.fd[1], c.bytes, werr)) << werr;
        Message m;
        std::string e;
        EXPECT_FALSE(read_message(sp.fd[0], m, e, 5000));
        EXPECT_EQ(e, c.error);
    }
}

TEST(AgentProtocol, WriteAllToClosedPeerFailsWithoutSigpipe) {
    // The default SIGPIPE disposition would kill this test binary.
    struct sigaction old {};
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, &old);
    SocketPair sp;
    sp.close_end(0);
    std::string e;
    EXPECT_FALSE(write_all(sp.fd[1], std::string(1 << 20, 'x'), e));
    EXPECT_EQ(e, "write: Broken pipe");
    sigaction(SIGPIPE, &old, nullptr);
}

TEST(AgentProtocol, WriteAllAndReadMessageOverAPipe) {
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    std::string big(200000, 'q');  // over a pipe's 64 KiB buffer
    std::string msg = encode_message({{"type", "profile"}}, {big});
    std::string werr;
    bool wrote = false;
    std::thread writer([&] {
        wrote = write_all(p[1], msg, werr);
        close(p[1]);
    });
    Message m;
    std::string e;
    EXPECT_TRUE(read_message(p[0], m, e, 10000)) << e;
    ASSERT_EQ(m.attachments.size(), 1u);
    EXPECT_TRUE(m.attachments[0] == big);
    writer.join();
    EXPECT_TRUE(wrote) << werr;
    close(p[0]);
}

TEST(AgentProtocol, OpNames) {
    EXPECT_STREQ(op_name(Request::Op::Start), "start");
    EXPECT_STREQ(op_name(Request::Op::Snapshot), "snapshot");
    EXPECT_STREQ(op_name(Request::Op::Stop), "stop");
    EXPECT_STREQ(op_name(Request::Op::Status), "status");
}

}  // namespace
}  // namespace pbp::agent
