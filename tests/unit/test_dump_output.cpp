// The dump's renderings (cli/dump_output.h, cli/pyspy_dump.h) on a dump made by hand: the JSON
// document read back into the same dump (what a client does with the agent's answer), a
// document that is not one refused with one line, and py-spy's text line by line.
#include <gtest/gtest.h>

#include <sstream>

#include "cli/dump_output.h"
#include "cli/pyspy_dump.h"
#include "export/dump_document.h"

namespace pbp {
namespace {

using nlohmann::json;

// Two processes: every field set somewhere, every state and GIL value, a marker frame, a line
// 0, a native thread, a thread state without a thread, a warning.
DumpResult sample_dump() {
    DumpResult d;
    DumpProcess a;
    a.pid = 100;
    a.command = "/usr/bin/python3 app.py --x \xc3\xa9";
    a.exe = "/usr/bin/python3.11";
    a.version = "3.11.2";
    a.python = "3.11.2 (static /usr/bin/python3.11)";
    DumpThread t1;
    t1.tid = 100;
    t1.name = "python3";
    t1.state = 'R';
    t1.python = true;
    t1.gil = DumpGil::Held;
    t1.frames = {{"work", "/app/app.py", 12, false}, {"<module>", "/app/app.py", 30, false}};
    DumpThread t2;
    t2.tid = 101;
    t2.name = "worker";
    t2.os_name = "python3";
    t2.state = 'R';
    t2.python = true;
    t2.gil = DumpGil::Waiting;
    t2.changed = true;
    t2.problem = "frame unreadable";
    t2.frames = {{"Thread.run", "/usr/lib/python3.11/threading.py", 0, false}, {"[partial stack]", "", 0, true}};
    DumpThread t3;
    t3.tid = 102;
    t3.name = "native";
    t3.state = 'D';
    DumpThread t4;  // a thread state whose thread was not found
    t4.python = true;
    t4.problem = "no Python frame";
    a.threads = {t1, t2, t3, t4};
    // dump --async: a task awaiting two others, one done, one of the interpreter's list.
    DumpAsyncio as;
    as.tasks = {{0x7f0000001000, "main", "pending", 100, {{"main", "/app/app.py", 40, false}}, {}},
                {0x7f0000002000, "Task-7", "running", 100, {{"fetch", "/app/app.py", 22, false}}, {0x7f0000001000}},
                {0x7f0000003000, "finished", "done", 0, {}, {0x7f0000001000, 0x7f0000002000}}};
    a.asyncio = as;
    DumpProcess b;
    b.pid = 200;
    b.ns_pid = 7;
    b.command = "python3 -c pass";
    b.version = "3.13.1t";
    b.python = "3.13.1t (libpython /usr/lib/libpython3.13t.so.1.0)";
    b.gil_note = "free-threaded build: no GIL";
    DumpThread u;
    u.tid = 201;
    u.ns_tid = 8;
    u.name = "sleeper";
    u.state = 'S';
    u.python = true;
    u.frames = {{"sleep_here", "/b.py", 3, false}};
    b.threads = {u};
    d.processes = {a, b};
    d.warnings = {"PID 300: not dumped: it exited"};
    return d;
}

TEST(DumpOutput, JsonReadsBackToTheSameDump) {
    const DumpResult d = sample_dump();
    const json doc = dump_json(d);
    // Through its text, as the agent sends it.
    const json again = json::parse(doc.dump());
    DumpResult back;
    std::string error;
    ASSERT_TRUE(dump_from_json(again, back, error)) << error;
    EXPECT_EQ(dump_json(back), doc);
    std::ostringstream t1, t2;
    write_dump_text(d, t1);
    write_dump_text(back, t2);
    EXPECT_EQ(t2.str(), t1.str());
    EXPECT_EQ(back.processes[0].threads[2].state, 'D');
    EXPECT_EQ(back.processes[1].gil_note, "free-threaded build: no GIL");
    ASSERT_TRUE(back.processes[0].asyncio.has_value());
    EXPECT_EQ(back.processes[0].asyncio->tasks[2].awaited_by, (std::vector<uint64_t>{0x7f0000001000, 0x7f0000002000}));
    EXPECT_FALSE(back.processes[1].asyncio.has_value());
    // Fields a newer agent may add are ignored.
    json newer = doc;
    newer["processes"][0]["coroutines"] = json::array();
    newer["processes"][0]["threads"][0]["python_name"] = "MainThread";
    ASSERT_TRUE(dump_from_json(newer, back, error)) << error;
    EXPECT_EQ(dump_json(back), doc);
}

// --native frames keep their kind and library through the document (the agent's answer read
// back by its client); a Python frame's JSON has neither field.
TEST(DumpOutput, NativeAndKernelFramesRoundTrip) {
    DumpResult d = sample_dump();
    Frame n{"b", "/src/ext/ext.c", 7, false};
    n.kind = FrameKind::Native;
    n.library = "/opt/app/_ext.so";
    Frame k{"[k] vfs_read", "", 0, false};
    k.kind = FrameKind::Kernel;
    k.library = "[kernel]";
    auto& frames = d.processes[0].threads[0].frames;
    frames.insert(frames.begin(), {k, n});
    const json doc = dump_json(d);
    const json& jf = doc["processes"][0]["threads"][0]["frames"];
    EXPECT_EQ(jf[0]["kind"], "kernel");
    EXPECT_EQ(jf[1]["library"], "/opt/app/_ext.so");
    EXPECT_FALSE(jf[2].contains("kind") || jf[2].contains("library"));
    DumpResult back;
    std::string error;
    ASSERT_TRUE(dump_from_json(json::parse(doc.dump()), back, error)) << error;
    EXPECT_EQ(back.processes[0].threads[0].frames, frames);
    json bad = doc;
    bad["processes"][0]["threads"][0]["frames"][0]["kind"] = "python";
    EXPECT_FALSE(dump_from_json(bad, back, error));
    EXPECT_EQ(error, "processes[0].threads[0].frames[0].kind is not \"native\" or \"kernel\"");
}

TEST(DumpOutput, ADocumentThatIsNotADumpIsOneLine) {
    const json good = dump_json(sample_dump());
    struct Case {
        json doc;
        std::string error;
    };
    std::vector<Case> cases;
    cases.push_back({json::array(), "the dump is not an object"});
    cases.push_back({json::object(), "the dump has no field 'processes'"});
    json c = good;
    c["processes"][0].erase("pid");
    cases.push_back({c, "processes[0] has no field 'pid'"});
    c = good;
    c["processes"][0]["pid"] = -1;
    cases.push_back({c, "processes[0].pid is not a whole number up to 2147483647"});
    c = good;
    c["processes"][0]["threads"][1]["frames"][0]["line"] = "12";
    cases.push_back({c, "processes[0].threads[1].frames[0].line is not a whole number up to 2147483647"});
    c = good;
    c["processes"][0]["threads"][0]["gil"] = "yes";
    cases.push_back({c, "processes[0].threads[0].gil is not true, false or null"});
    c = good;
    c["processes"][0]["threads"][1]["frames"][1]["synthetic"] = 1;
    cases.push_back({c, ""});  // nlohmann's own type error, caught: any one line
    c = good;
    c["warnings"] = json::array({1});
    cases.push_back({c, "the dump's warnings are not strings"});
    c = good;
    c["processes"][0]["asyncio"]["tasks"][1]["awaited_by"][0] = "0xZZ";
    cases.push_back({c, "processes[0].asyncio.tasks[1].awaited_by is not a task id (0x and up to 16 hex digits)"});
    c = good;
    c["processes"][0]["asyncio"]["tasks"][0]["id"] = "0x123456789abcdef01";
    cases.push_back({c, "processes[0].asyncio.tasks[0].id is not a task id (0x and up to 16 hex digits)"});
    c = good;
    c["processes"][0]["asyncio"].erase("tasks");
    cases.push_back({c, "processes[0].asyncio has no field 'tasks'"});
    for (const auto& k : cases) {
        DumpResult out;
        std::string error;
        EXPECT_FALSE(dump_from_json(k.doc, out, error)) << k.doc.dump();
        if (!k.error.empty()) {
            EXPECT_EQ(error, k.error);
        }
        EXPECT_FALSE(error.empty());
        EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    }
}

// py-spy's dump text (py-spy's src/dump.rs): the process, the interpreter, a blank line, then
// each Python thread and its frames; no native thread; a blank line between processes.
TEST(DumpOutput, PyspyTextLineByLine) {
    std::ostringstream out;
    write_pyspy_dump(sample_dump(), out);
    EXPECT_EQ(out.str(),
              "Process 100: /usr/bin/python3 app.py --x \xc3\xa9\n"
              "Python v3.11.2 (/usr/bin/python3.11)\n"
              "\n"
              "Thread 100 (active+gil): \"python3\"\n"
              "    work (/app/app.py:12)\n"
              "    <module> (/app/app.py:30)\n"
              "Thread 101 (active): \"worker\"\n"
              "    Thread.run (/usr/lib/python3.11/threading.py)\n"
              "    [partial stack]\n"
              "Thread 0x0 (idle): \"\"\n"
              "\n"
              "Process 200: python3 -c pass\n"
              "Python v3.13.1t (?)\n"
              "\n"
              "Thread 201 (idle): \"sleeper\"\n"
              "    sleep_here (/b.py:3)\n");
}

}  // namespace
}  // namespace pbp
