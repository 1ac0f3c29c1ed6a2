// Python thread names (threading.Thread(name=...)) in every output: read from the
// interpreter of a process that runs before pybpfprof starts, for threads started during the
// run, with the latest name of a thread renamed during it, in ASCII, Latin and CJK; and the OS
// name for a thread the threading module does not know. On every interpreter of the matrix.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/profile.h"
#include "export/raw.h"
#include "pprof_reader.h"
#include "speedscope_reader.h"
#include "test_support.h"

namespace pbp::test {
namespace {

// The names the workload gives (tests/workloads/thread_names.py), as UTF-8.
const std::vector<std::string> kNamed = {"kiln", "caf\xc3\xa9-\xc3\xb1", "\xe8\xa8\x88\xe7\xae\x97\xe3\x82\xb9\xe3\x83\xac\xe3\x83\x83\xe3\x83\x89",
                                         "renamed-\xc3\xb1", "late-\xe5\xbe\x8c"};
const std::string kOsOnly = "os-only";   // not in threading._active: its OS name
const std::string kOldName = "rename-me";  // renamed during the run: never shown

class ThreadNames : public ::testing::TestWithParam<Interpreter> {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
        dir = temp_dir();
    }
    std::string dir;
};

// Every name in 'names' is among 'have', and kOldName is not.
void expect_names(const std::set<std::string>& have, const std::string& where) {
    std::string all;
    for (auto& h : have) all += "\n  " + h;
    for (auto& n : kNamed) EXPECT_TRUE(have.count(n)) << where << ": no thread named " << n << "; have:" << all;
    EXPECT_TRUE(have.count(kOsOnly)) << where << ": no thread named " << kOsOnly << " (OS name); have:" << all;
    EXPECT_FALSE(have.count(kOldName)) << where << ": the renamed thread's old name; have:" << all;
}

// "CMD (pid 12) NAME (tid 34)" -> NAME: what follows the process's "(pid N) ".
std::string name_in(const std::string& s, const std::string& pidtag) {
    auto at = s.find(pidtag);
    if (at == std::string::npos) return "";
    std::string rest = s.substr(at + pidtag.size());
    if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
    if (!rest.empty() && rest[0] == '[') rest = rest.substr(rest.find("] ") == std::string::npos ? rest.size() : rest.find("] ") + 2);
    auto tid = rest.rfind(" (tid ");
    return tid == std::string::npos ? "" : rest.substr(0, tid);
}

TEST_P(ThreadNames, PythonNamesInEveryOutput) {
    const Interpreter& in = GetParam();
    // Running before pybpfprof starts, its first threads named already.
    Child target(python_running(in, "thread_names.py"), dir);
    ASSERT_TRUE(target.wait_for_out("started", 60)) << target.err();
    const std::string pid = std::to_string(target.pid());
    const std::string pbp = dir + "/run.pbp", html = dir + "/run.html";
    Child prof({pybpfprof_bin(), "-r", "199", "-p", pid, "-o", pbp, "--report", html}, dir);
    ASSERT_TRUE(prof.wait_for_err("profiling PID")) << prof.err();
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // "rename-me" sampled by its old name
    target.signal(SIGUSR1);  // renames it, starts "late-後"
    ASSERT_TRUE(target.wait_for_out("renamed", 30)) << target.err();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));

    // dump, while it runs: the Python name and the OS name of each thread.
    auto dump = run({pybpfprof_bin(), "dump", "--pid", pid, "--json"}, 60);
    ASSERT_EQ(dump.status, 0) << dump.err;
    auto text = run({pybpfprof_bin(), "dump", "--pid", pid}, 60);
    ASSERT_EQ(text.status, 0) << text.err;

    prof.signal(SIGINT);
    ASSERT_EQ(prof.wait(60), 0) << prof.err();
    target.signal(SIGUSR2);
    EXPECT_EQ(target.wait(60), 0) << target.err();

    {  // the text summary: the threads by time, by name
        const std::string err = prof.err();
        auto at = err.find("Threads by time (");
        ASSERT_NE(at, std::string::npos) << err;
        std::set<std::string> have;
        std::istringstream lines(err.substr(at));
        std::string line;
        std::getline(lines, line);
        while (std::getline(lines, line) && line.rfind("  ", 0) == 0) {
            auto s = line.find(" s  "), tid = line.rfind(" (tid ");
            if (s != std::string::npos && tid != std::string::npos && tid > s) have.insert(line.substr(s + 4, tid - s - 4));
        }
        expect_names(have, "text summary");
    }
    {  // dump --json
        auto d = nlohmann::json::parse(dump.out);
        ASSERT_EQ(d["processes"].size(), 1u) << dump.out;
        std::set<std::string> names;
        std::map<std::string, std::string> os_name;
        for (auto& t : d["processes"][0]["threads"]) {
            names.insert(t["name"].get<std::string>());
            if (t["os_name"].is_string()) os_name[t["name"].get<std::string>()] = t["os_name"].get<std::string>();
        }
        names.erase("MainThread");
        expect_names(names, "dump --json");
        EXPECT_TRUE(d["processes"][0]["threads"].dump().find("\"MainThread\"") != std::string::npos) << dump.out;
        EXPECT_EQ(os_name[kOsOnly], kOsOnly);
        EXPECT_FALSE(os_name["kiln"].empty()) << "the OS name is kept next to the Python name";
        for (auto& n : kNamed)
            EXPECT_NE(text.out.find("\"" + n + "\""), std::string::npos) << "dump text: " << n << "\n" << text.out;
    }

    // The recorded profile, read back.
    Profile p;
    std::string error;
    ASSERT_TRUE(read_raw(read_file(pbp), p, error)) << error;
    ASSERT_EQ(p.processes.size(), 1u);
    std::set<std::string> names;
    for (auto& [tid, t] : p.processes.begin()->second.threads)
        if (!t.samples.empty()) names.insert(t.name);
    expect_names(names, ".pbp");

    // Each format, from the profile (pybpfprof merge: the same exporters as a recording).
    const std::string pidtag = "(pid " + pid + ")";
    auto convert = [&](const std::string& out) {
        auto r = run({pybpfprof_bin(), "merge", pbp, "-o", out}, 120);
        EXPECT_EQ(r.status, 0) << r.err;
    };
    {  // speedscope: each profile's name
        convert(dir + "/run.json");
        auto s = read_speedscope(dir + "/run.json");
        std::set<std::string> have;
        for (auto& t : s.threads) have.insert(name_in(t.profile_name, pidtag));
        expect_names(have, "speedscope profile names");
        // The real consumer (once, on the host's interpreter: it takes a browser): the app loads
        // the file and titles it with the first profile's name.
        const std::string js = source_dir() + "/tests/js";
        if (in.name == host_python().name && access((js + "/node_modules/speedscope").c_str(), F_OK) == 0 &&
            access("/usr/bin/chromium", X_OK) == 0) {
            auto c = run({"node", js + "/check_speedscope.mjs", dir + "/run.json"}, 180);
            EXPECT_EQ(c.status, 0) << c.out << c.err;
        }
    }
    {  // folded: the thread's root frame, after the process's
        convert(dir + "/run.folded");
        std::set<std::string> have;
        std::istringstream f(read_file(dir + "/run.folded"));
        for (std::string line; std::getline(f, line);) {
            auto a = line.find(';'), b = line.find(';', a + 1);
            if (a == std::string::npos || b == std::string::npos) continue;
            std::string root = line.substr(a + 1, b - a - 1);
            have.insert(root.substr(0, root.rfind(" (tid ")));
        }
        expect_names(have, "folded roots");
    }
    {  // pprof: the thread_name label
        convert(dir + "/run.pb.gz");
        auto pp = parse_pprof(read_file(dir + "/run.pb.gz"));
        std::set<std::string> have;
        for (const auto& s : pp.sample())
            for (const auto& l : s.label())
                if (pp.string_table(static_cast<int>(l.key())) == "thread_name")
                    have.insert(pp.string_table(static_cast<int>(l.str())));
        expect_names(have, "pprof thread_name labels");
    }
    {  // the HTML report (written by the recording itself): its data's thread names
        std::string h = read_file(html);
        const std::string open = "<script type=\"application/json\" id=\"pbp-data\">";
        auto a = h.find(open), b = h.find("</script>", a);
        ASSERT_NE(a, std::string::npos);
        auto d = nlohmann::json::parse(h.substr(a + open.size(), b - a - open.size()));
        std::set<std::string> have;
        for (auto& pr : d["procs"])
            for (auto& t : pr["threads"])
                if (t["n"].get<uint64_t>() > 0) have.insert(t["name"].get<std::string>());
        expect_names(have, "HTML report");
    }
}

INSTANTIATE_TEST_SUITE_P(Interpreters, ThreadNames, ::testing::ValuesIn(all_interpreters()), interpreter_test_name);

}  // namespace
}  // namespace pbp::test
