// `pybpfprof dump` through a real agent, by real unprivileged users (tests/tools/agent-test-users):
// the five named threads of tests/workloads/dump_blocked.py asleep in five calls, dumped by
// their owner without root; other users' and root's processes refused with one line; hostile
// dump requests refused; --all-python meaning the caller's own processes only.
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/protocol.h"
#include "dump_blocked_workload.h"
#include "real_agent.h"
#include "test_support.h"

namespace pbp::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

size_t lines_of(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

class DumpAgent : public RealAgent {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "the agent's tests run a real agent: root");
        RealAgent::SetUp();
    }

    // `pybpfprof dump ARGS` as user, with the agent's socket.
    CmdResult dump_as(const std::string& user, std::vector<std::string> args) {
        std::vector<std::string> a{pybpfprof_bin(), "dump"};
        a.insert(a.end(), args.begin(), args.end());
        return run(as_user(user, a, socket), 60);
    }

    // in's command line for a workload (dump_blocked.py unless said), run as user: pyenv's,
    // under /root where the user cannot go, through a tree of hard links to it; the chroots'
    // with chroot --userspec.
    std::vector<std::string> user_argv(const Interpreter& in, const std::string& user,
                                       const std::string& name = "dump_blocked.py",
                                       const std::vector<std::string>& args = {}) {
        std::vector<std::string> tail{workload_for(in, name)};
        tail.insert(tail.end(), args.begin(), args.end());
        auto with_tail = [&](std::vector<std::string> a) {
            a.insert(a.end(), tail.begin(), tail.end());
            return a;
        };
        if (!in.root.empty()) {
            const std::string uid = std::to_string(uid_of(user));
            const std::string gid = run({"id", "-g", user}).out;
            std::vector<std::string> a{"chroot", "--userspec=" + uid + ":" + gid.substr(0, gid.size() - 1),
                                       "--groups=" + gid.substr(0, gid.size() - 1), in.root};
            a.insert(a.end(), in.argv.begin() + 2, in.argv.end());  // after "chroot ROOT"
            return with_tail(a);
        }
        const std::string exe = in.argv[0];
        if (exe.rfind("/root/", 0) != 0) return as_user(user, with_tail({exe}));
        // /root/.pyenv/versions/X.Y.Z/bin/pythonX.Y -> DIR/python/X.Y.Z/bin/pythonX.Y
        const std::filesystem::path home = std::filesystem::path(exe).parent_path().parent_path();
        const std::string copy = dir + "/python/" + home.filename().string();
        std::filesystem::create_directories(dir + "/python");
        chmod((dir + "/python").c_str(), 0755);
        if (!std::filesystem::exists(copy)) run({"cp", "-al", home.string(), copy});
        return as_user(user, with_tail({"env", "LD_LIBRARY_PATH=" + copy + "/lib",
                                        copy + "/" + std::filesystem::relative(exe, home).string()}));
    }

    // bytes written at once to the agent by pbp-test-a (a child of ours with its ids), then n
    // messages read: their headers, back through a pipe.
    json raw_as_a(const std::string& bytes, int n) {
        const uid_t uid = uid_of("pbp-test-a");
        const gid_t gid = static_cast<gid_t>(std::stoul(run({"id", "-g", "pbp-test-a"}).out));
        int p[2];
        EXPECT_EQ(pipe(p), 0);
        pid_t child = fork();
        if (child == 0) {
            close(p[0]);
            if (setgroups(0, nullptr) || setgid(gid) || setuid(uid)) _exit(2);
            int fd = connect_raw(socket);
            std::string error;
            agent::Message m;
            if (fd < 0 || !agent::write_all(fd, bytes, error)) _exit(3);
            json headers = json::array();
            for (int i = 0; i < n; i++) {
                if (!agent::read_message(fd, m, error, 60000)) _exit(4);
                headers.push_back(m.header);
            }
            _exit(agent::write_all(p[1], headers.dump(), error) ? 0 : 5);
        }
        close(p[1]);
        std::string text;
        char buf[4096];
        for (ssize_t k; (k = read(p[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(k));
        close(p[0]);
        int st = 0;
        waitpid(child, &st, 0);
        EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
        return text.empty() ? json::array() : json::parse(text);
    }
};

// The five threads in a --json dump of one process: "" when each is as expected, else what
// is wrong.
std::string check_five(const json& doc, pid_t pid, const std::map<std::string, uint32_t>& tid_of) {
    if (doc["processes"].size() != 1 || doc["processes"][0]["pid"] != pid) return "not one process, " + std::to_string(pid);
    std::map<uint32_t, json> by_tid;
    for (const auto& t : doc["processes"][0]["threads"]) by_tid[t["tid"].get<uint32_t>()] = t;
    std::string wrong;
    for (const BlockedThread& b : blocked_threads()) {
        auto it = by_tid.find(tid_of.at(b.thread));
        if (it == by_tid.end()) {
            wrong += b.thread + ": not listed; ";
            continue;
        }
        const json& t = it->second;
        std::vector<SeenFrame> frames;
        for (const auto& f : t["frames"])
            frames.push_back({f["function"].get<std::string>(), f.value("file", ""), f.value("line", 0)});
        std::string why = check_blocked(t["state"].is_string() ? t["state"].get<std::string>() : "null", frames, b);
        if (why.empty() && !t["python"].get<bool>()) why = "not a Python thread";
        // Asleep in a call that released the GIL: none holds it (unknown: free-threaded).
        const json gil_expected = doc["processes"][0]["gil_unknown"].is_null() ? json(false) : json(nullptr);
        if (why.empty() && t["gil"] != gil_expected) why = "GIL " + t["gil"].dump() + ", not " + gil_expected.dump();
        if (why.empty() && t["stack_changed_while_read"] != false) why = "marked as changed while read";
        if (!why.empty()) wrong += b.thread + ": " + why + "; ";
    }
    return wrong;
}

// The issue's test, through the agent: a user dumps their own process without root; all five
// threads asleep in the right call; the text is exactly what root's direct dump prints (one
// renderer, the same stacks: every thread is asleep).
TEST_F(DumpAgent, FiveNamedThreadsOfTheCallersOwnProcess) {
    std::map<std::string, uint32_t> tid_of;
    std::string error;
    Reporter py = start_blocked("pbp-test-a", tid_of, error);
    ASSERT_EQ(error, "");
    const std::string pid = std::to_string(py.pid());
    CmdResult js;
    std::string wrong;
    // "ready" comes just before each thread enters its call: dump until all five are in it.
    for (auto until = std::chrono::steady_clock::now() + 20s;;) {
        js = dump_as("pbp-test-a", {"--pid", pid, "--json"});
        ASSERT_EQ(js.status, 0) << js.err << agent.err();
        wrong = check_five(json::parse(js.out), py.pid(), tid_of);
        if (wrong.empty() || std::chrono::steady_clock::now() > until) break;
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(wrong, "") << js.out;
    EXPECT_EQ(js.err, "");
    const json doc = json::parse(js.out);
    EXPECT_EQ(doc["processes"][0]["python_version"].get<std::string>().rfind("3.11", 0), 0u);
    EXPECT_NE(doc["processes"][0]["command"].get<std::string>().find("dump_blocked.py"), std::string::npos);
    EXPECT_EQ(doc["processes"][0]["exe"], std::filesystem::read_symlink("/proc/" + pid + "/exe").string());
    EXPECT_EQ(doc["processes"][0]["threads"].size(), 6u) << "the main thread and the five";
    EXPECT_EQ(doc["warnings"], json::array());

    // Text, through the agent and as root directly: the same bytes.
    auto text = dump_as("pbp-test-a", {"--pid", pid});
    ASSERT_EQ(text.status, 0) << text.err;
    auto direct = run({pybpfprof_bin(), "dump", "--pid", pid});
    ASSERT_EQ(direct.status, 0) << direct.err;
    EXPECT_EQ(text.out, direct.out);
    EXPECT_EQ(text.out.rfind("Process " + pid + ": /usr/bin/python3 ", 0), 0u) << text.out;
    for (const BlockedThread& b : blocked_threads())
        EXPECT_NE(text.out.find("\nThread " + std::to_string(tid_of[b.thread]) + " \""), std::string::npos) << text.out;
    // And --json as root directly is the same document.
    auto direct_js = run({pybpfprof_bin(), "dump", "--pid", pid, "--json"});
    ASSERT_EQ(direct_js.status, 0) << direct_js.err;
    EXPECT_EQ(json::parse(direct_js.out), doc);
    // The agent logged the dump, and who asked.
    EXPECT_NE(agent.err().find("dump for uid " + std::to_string(uid_of("pbp-test-a")) + " (pbp-test-a)"),
              std::string::npos)
        << agent.err();
}

// The issue's test on every interpreter of the matrix, each run by the unprivileged user
// (pyenv's, under /root where the user cannot go, through a tree of hard links to it; the
// chroots' with chroot --userspec): the user's dump through the agent shows the five
// threads asleep in their calls, and is the document root's direct dump gives.
class DumpAgentMatrix : public DumpAgent, public ::testing::WithParamInterface<Interpreter> {};

TEST_P(DumpAgentMatrix, FiveNamedThreadsThroughTheAgent) {
    const Interpreter& in = GetParam();
    std::map<std::string, uint32_t> tid_of;
    std::string error;
    Reporter py = start_blocked("pbp-test-a", tid_of, error, user_argv(in, "pbp-test-a"));
    ASSERT_EQ(error, "");
    const std::string pid = std::to_string(py.pid());
    ASSERT_NE(read_file("/proc/" + pid + "/status").find("Uid:\t" + std::to_string(uid_of("pbp-test-a"))),
              std::string::npos)
        << "the workload runs as pbp-test-a";
    CmdResult js;
    std::string wrong;
    for (auto until = std::chrono::steady_clock::now() + 20s;;) {
        js = dump_as("pbp-test-a", {"--pid", pid, "--json"});
        ASSERT_EQ(js.status, 0) << js.err << agent.err();
        wrong = check_five(json::parse(js.out), py.pid(), tid_of);
        if (wrong.empty() || std::chrono::steady_clock::now() > until) break;
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(wrong, "") << js.out;
    const json doc = json::parse(js.out);
    EXPECT_EQ(doc["processes"][0]["python_version"].get<std::string>().rfind(in.version, 0), 0u);
    auto direct = run({pybpfprof_bin(), "dump", "--pid", pid, "--json"});
    ASSERT_EQ(direct.status, 0) << direct.err;
    EXPECT_EQ(json::parse(direct.out), doc);
    // Another user may not.
    auto refused = dump_as("pbp-test-b", {"--pid", pid});
    EXPECT_EQ(refused.status, 1) << refused.err;
    EXPECT_EQ(refused.out, "");
    EXPECT_EQ(lines_of(refused.err), 1u) << refused.err;
}

INSTANTIATE_TEST_SUITE_P(Interpreters, DumpAgentMatrix, ::testing::ValuesIn(all_interpreters()), interpreter_test_name);

// A user's process in PID and user namespaces of its own (unshare as that user): dumped
// through the agent, with its PID and tids in its namespace.
TEST_F(DumpAgent, AProcessInItsOwnPidNamespace) {
    std::map<std::string, uint32_t> ns_tid_of;
    std::string error;
    // --kill-child: the Python process, init of the new namespace, dies with unshare.
    Reporter u = start_blocked("pbp-test-a", ns_tid_of, error,
                               as_user("pbp-test-a", {"unshare", "--user", "--map-root-user", "--pid", "--fork",
                                                      "--kill-child", "--mount-proc", "/usr/bin/python3",
                                                      workload("dump_blocked.py")}));
    ASSERT_EQ(error, "");
    const std::string children =
        read_file("/proc/" + std::to_string(u.pid()) + "/task/" + std::to_string(u.pid()) + "/children");
    const pid_t py = static_cast<pid_t>(std::atoi(children.c_str()));
    ASSERT_GT(py, 0) << "no child of unshare";
    CmdResult js;
    std::string wrong;
    for (auto until = std::chrono::steady_clock::now() + 20s;;) {
        js = dump_as("pbp-test-a", {"--pid", std::to_string(py), "--json"});
        ASSERT_EQ(js.status, 0) << js.err << agent.err();
        const json doc = json::parse(js.out);
        // The workload printed its tids as its namespace numbers them: their host tids.
        std::map<std::string, uint32_t> tid_of;
        for (const auto& [name, ns_tid] : ns_tid_of)
            for (const auto& t : doc["processes"][0]["threads"])
                if (t["ns_tid"] == ns_tid) tid_of[name] = t["tid"].get<uint32_t>();
        wrong = tid_of.size() == 5 ? check_five(doc, py, tid_of) : "not every thread has its namespace tid; ";
        if (wrong.empty() || std::chrono::steady_clock::now() > until) break;
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(wrong, "") << js.out;
    EXPECT_EQ(json::parse(js.out)["processes"][0]["ns_pid"], 1);
    auto text = dump_as("pbp-test-a", {"--pid", std::to_string(py)});
    ASSERT_EQ(text.status, 0) << text.err;
    EXPECT_EQ(text.out.rfind("Process " + std::to_string(py) + " (PID 1 in its namespace): ", 0), 0u) << text.out;
}

// Another user's process, a root process and PID 1: refused with one line naming the PID, its
// owner and the rule; exit 1, nothing on stdout. --cgroup needs an admin. An admin may dump
// anyone's.
TEST_F(DumpAgent, OtherUsersAndRootProcessesAreRefused) {
    std::map<std::string, uint32_t> tid_of;
    std::string error;
    Reporter theirs = start_blocked("pbp-test-b", tid_of, error);
    ASSERT_EQ(error, "");
    Reporter roots({"/usr/bin/python3", workload("dump_blocked.py")});
    ASSERT_EQ(roots.read_lines(6, 60).size(), 6u) << roots.err();
    struct Case {
        pid_t pid;
        std::string owner;
    } cases[] = {{theirs.pid(), "pbp-test-b"}, {roots.pid(), "root"}, {1, "root"}};
    for (auto& c : cases) {
        for (bool as_json : {false, true}) {
            SCOPED_TRACE(std::to_string(c.pid) + (as_json ? " --json" : ""));
            std::vector<std::string> args{"--pid", std::to_string(c.pid)};
            if (as_json) args.push_back("--json");
            auto r = dump_as("pbp-test-a", args);
            EXPECT_EQ(r.status, 1) << r.err;
            EXPECT_EQ(r.out, "");
            EXPECT_EQ(lines_of(r.err), 1u) << r.err;
            EXPECT_EQ(r.err.rfind("pybpfprof dump: PID " + std::to_string(c.pid) + " (", 0), 0u) << r.err;
            EXPECT_NE(r.err.find("belongs to uid " + std::to_string(uid_of(c.owner)) + " (" + c.owner + ")"),
                      std::string::npos)
                << r.err;
            EXPECT_NE(r.err.find("real, effective and saved"), std::string::npos) << "the rule is named: " << r.err;
        }
    }
    // A list with one refused PID is refused whole: nothing of the caller's is shown either.
    std::map<std::string, uint32_t> mine_tids;
    Reporter mine = start_blocked("pbp-test-a", mine_tids, error);
    ASSERT_EQ(error, "");
    auto mixed = dump_as("pbp-test-a", {"--pid", std::to_string(mine.pid()), "--pid", std::to_string(roots.pid())});
    EXPECT_EQ(mixed.status, 1) << mixed.err;
    EXPECT_EQ(mixed.out, "");
    EXPECT_EQ(lines_of(mixed.err), 1u) << mixed.err;

    auto cg = dump_as("pbp-test-a", {"--cgroup", "/"});
    EXPECT_EQ(cg.status, 1) << cg.err;
    EXPECT_EQ(cg.err,
              "pybpfprof dump: --cgroup needs root or membership of the agent's admin group (pbp-test-admins); dump your "
              "own processes with --pid or --all-python\n");
    // An admin may.
    auto adm = dump_as("pbp-test-adm", {"--pid", std::to_string(theirs.pid()), "--json"});
    ASSERT_EQ(adm.status, 0) << adm.err;
    EXPECT_EQ(json::parse(adm.out)["processes"][0]["pid"], theirs.pid());
    EXPECT_TRUE(agent.running());
}

// --all-python through the agent: every CPython process of the caller's, none of anyone
// else's; a user with none gets a one-line bad input.
TEST_F(DumpAgent, AllPythonIsTheCallersOwnProcesses) {
    std::map<std::string, uint32_t> ta, tb;
    std::string error;
    Reporter a1 = start_blocked("pbp-test-a", ta, error);
    ASSERT_EQ(error, "");
    Reporter a2 = start_blocked("pbp-test-a", ta, error);
    ASSERT_EQ(error, "");
    Reporter b = start_blocked("pbp-test-b", tb, error);
    ASSERT_EQ(error, "");
    Reporter roots({"/usr/bin/python3", workload("dump_blocked.py")});
    ASSERT_EQ(roots.read_lines(6, 60).size(), 6u) << roots.err();

    auto r = dump_as("pbp-test-a", {"--all-python", "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    std::set<pid_t> pids;
    const std::string uid = std::to_string(uid_of("pbp-test-a"));
    const json doc = json::parse(r.out);
    for (const auto& p : doc["processes"]) {
        pid_t pid = p["pid"].get<pid_t>();
        pids.insert(pid);
        auto st = read_file("/proc/" + std::to_string(pid) + "/status");
        if (st.empty()) continue;  // exited since (another test of the same user's, on a shared machine)
        EXPECT_NE(st.find("Uid:\t" + uid + "\t" + uid + "\t" + uid), std::string::npos) << pid << " is not pbp-test-a's";
    }
    EXPECT_TRUE(pids.count(a1.pid()) && pids.count(a2.pid())) << r.out;
    EXPECT_FALSE(pids.count(b.pid()));
    EXPECT_FALSE(pids.count(roots.pid()));

    b.signal(SIGKILL);
    b.wait(10);
    auto none = dump_as("pbp-test-b", {"--all-python"});
    EXPECT_EQ(none.status, 2) << none.err;
    EXPECT_EQ(none.out, "");
    EXPECT_EQ(none.err,
              "pybpfprof dump: no CPython process of yours is running (the agent dumps only your own processes); start "
              "one, or pass its PID with --pid\n");
}

// Dump requests written by hand: every field checked, unknown ones refused, each with one line;
// the agent goes on serving.
TEST_F(DumpAgent, HostileDumpRequestsAreRefusedWithOneLine) {
    auto ask = [&](const std::string& payload) {
        json all = raw_as_a(agent::frame(payload), 1);
        return all.empty() ? json::object() : all[0];
    };
    struct Case {
        std::string payload, code, message_starts;
    } cases[] = {
        {R"({"v":1,"op":"dump"})", "bad_input", "a dump request needs exactly one target field"},
        {R"({"v":1,"op":"dump","pids":[1],"all_python":true})", "bad_input", "a dump request needs exactly one"},
        {R"({"v":1,"op":"dump","pids":[1],"format":"html"})", "protocol", "unknown field 'format' in a dump request"},
        {R"({"v":1,"op":"dump","pids":[-5]})", "bad_input", "field 'pids[0]' must be an integer from 1 to 4194304"},
        {R"({"v":1,"op":"dump","pids":"1"})", "bad_input", "field 'pids' must be an array of 1 to 64 process IDs"},
        {R"({"v":1,"op":"dump","pids":[1],"max_depth":1e9})", "bad_input", "field 'max_depth' must be an integer"},
        {R"({"v":1,"op":"dump","cgroups":[""]})", "bad_input", "field 'cgroups[0]' must be a string of 1 to 4096"},
        {R"({"v":1,"op":"dump","pids":[4194304]})", "bad_input", "no process has PID 4194304; check the PID"},
        {R"({"v":1,"op":"dump","cgroups":["/"]})", "forbidden", "--cgroup needs root or membership"},
        {R"({"v":1,"op":"dump","pids":[1]})", "forbidden", "PID 1 ("},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.payload);
        json h = ask(c.payload);
        EXPECT_EQ(h.value("type", ""), "error") << h.dump();
        EXPECT_EQ(h.value("code", ""), c.code) << h.dump();
        const std::string m = h.value("message", "");
        EXPECT_EQ(m.find('\n'), std::string::npos);
        EXPECT_EQ(m.rfind(c.message_starts, 0), 0u) << m;
    }
    // Still serving: a user's own dump works.
    std::map<std::string, uint32_t> tid_of;
    std::string error;
    Reporter py = start_blocked("pbp-test-a", tid_of, error);
    ASSERT_EQ(error, "");
    auto r = run(as_user("pbp-test-a", {pybpfprof_bin(), "dump", "--pid", std::to_string(py.pid())}, socket), 60);
    EXPECT_EQ(r.status, 0) << r.err;
    // 300 dumps written at once: each answered, in order (the agent takes one per turn of its
    // loop, serving the others between them).
    std::string many;
    const std::string one = R"({"v":1,"op":"dump","pids":[)" + std::to_string(py.pid()) + "]}";
    for (int i = 0; i < 300; i++) many += agent::frame(i == 150 ? std::string(R"({"v":1,"op":"status"})") : one);
    json answers = raw_as_a(many, 300);
    ASSERT_EQ(answers.size(), 300u);
    for (int i = 0; i < 300; i++)
        EXPECT_EQ(answers[i].value("type", ""), i == 150 ? "status" : "dump") << i << ": " << answers[i].dump();
    EXPECT_TRUE(agent.running());
}

// A user's stream of dumps does not hold the agent: 1500 dumps written at once are answered
// one per turn of its loop, and another client's request is answered meanwhile within half a
// second (not after the whole stream: 1.4 s when the agent took the frames all at once).
TEST_F(DumpAgent, AStreamOfDumpsDoesNotHoldTheAgent) {
    std::map<std::string, uint32_t> tid_of;
    std::string error;
    Reporter py = start_blocked("pbp-test-a", tid_of, error);
    ASSERT_EQ(error, "");
    std::string many;
    const std::string one = R"({"v":1,"op":"dump","pids":[)" + std::to_string(py.pid()) + "]}";
    for (int i = 0; i < 1500; i++) many += agent::frame(one);
    json answers;
    const auto t0 = std::chrono::steady_clock::now();
    std::thread stream([&] { answers = raw_as_a(many, 1500); });
    std::this_thread::sleep_for(1s);
    const auto s0 = std::chrono::steady_clock::now();
    auto st = run({pybpfprof_bin(), "agent", "status", "--socket", socket});
    const double status_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    stream.join();
    const double stream_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(st.status, 0) << st.err;
    ASSERT_EQ(answers.size(), 1500u);
    for (const auto& h : answers) EXPECT_EQ(h.value("type", ""), "dump");
    EXPECT_LT(status_s, 0.5) << "the stream took " << stream_s << " s";
    EXPECT_GT(stream_s, 2 * status_s) << "the status came while the stream was served";
}

// An agent older than dumps (here one that answers as it would: a protocol error naming the
// ops it knows): one line saying so and the fix, exit 1.
TEST_F(DumpAgent, AnAgentOlderThanDumpsIsSaidSo) {
    const std::string path = dir + "/old.sock";
    int lfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    chmod(path.c_str(), 0666);
    ASSERT_EQ(listen(lfd, 4), 0);
    std::thread old([&] {
        // The client probes (connects and closes) first, then asks.
        for (int i = 0; i < 2; i++) {
            int fd = accept(lfd, nullptr, nullptr);
            if (fd < 0) return;
            char buf[4096];
            if (read(fd, buf, sizeof buf) > 0) {
                std::string error;
                agent::write_all(fd,
                                 agent::encode_error(agent::ErrorCode::Protocol,
                                                     "field 'op' must be one of \"start\", \"snapshot\", \"stop\", "
                                                     "\"status\" (got \"dump\")"),
                                 error);
            }
            close(fd);
        }
    });
    auto r = run(as_user("pbp-test-a", {pybpfprof_bin(), "dump", "--pid", "1"}, path), 30);
    old.join();
    close(lfd);
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "pybpfprof dump: the agent at " + path +
                         " is older than pybpfprof dump (it answered: field 'op' must be one of \"start\", "
                         "\"snapshot\", \"stop\", \"status\" (got \"dump\")); restart it with this version of "
                         "pybpfprof\n");
}

// Without root and without an agent: one line naming both fixes, exit 1.
TEST_F(DumpAgent, WithoutAgentOrRootTheErrorNamesBothFixes) {
    auto r = run(as_user("pbp-test-a", {pybpfprof_bin(), "dump", "--pid", "1"}, dir + "/none.sock"));
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_EQ(lines_of(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("sudo"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("systemctl enable --now pybpfprof-agent"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(dir + "/none.sock"), std::string::npos) << r.err;
}

}  // namespace
// --async through the agent (CPython 3.14): a user's dump of their own asyncio process lists
// its tasks and who awaits whom, the document root's direct dump gives; and a user's profile
// of their own process puts its samples under the task chain.
TEST_F(DumpAgent, AsyncTasksOfTheUsersOwnProcessThroughTheAgent) {
    std::optional<Interpreter> in;
    for (auto& i : all_interpreters())
        if (i.name == "sid-3.14") in = i;
    PBP_REQUIRE(in.has_value(), "the sid chroot's CPython 3.14 (tools/provision-pythons)");

    Reporter gather(user_argv(*in, "pbp-test-a", "asyncio_gather.py"));
    ASSERT_EQ(gather.read_lines(1, 60), std::vector<std::string>{"ready"}) << gather.err();
    const std::string pid = std::to_string(gather.pid());
    auto js = dump_as("pbp-test-a", {"--pid", pid, "--async", "--json"});
    ASSERT_EQ(js.status, 0) << js.err;
    const json doc = json::parse(js.out);
    ASSERT_EQ(doc["processes"].size(), 1u);
    const json& a = doc["processes"][0]["asyncio"];
    ASSERT_TRUE(a.is_object()) << js.out;
    std::map<std::string, std::string> name_of;  // id -> name
    for (const auto& t : a["tasks"]) name_of[t["id"].get<std::string>()] = t["name"].get<std::string>();
    std::set<std::pair<std::string, std::string>> edges;  // (awaiter, awaited)
    for (const auto& t : a["tasks"])
        for (const auto& by : t["awaited_by"]) edges.insert({name_of[by.get<std::string>()], t["name"].get<std::string>()});
    const std::set<std::pair<std::string, std::string>> want{{"main", "outer-0"},     {"main", "outer-1"},
                                                             {"outer-0", "leaf-0-0"}, {"outer-0", "leaf-0-1"},
                                                             {"outer-1", "leaf-1-0"}, {"outer-1", "leaf-1-1"}};
    for (auto& e : want) EXPECT_TRUE(edges.count(e)) << e.first << " -> " << e.second << " missing\n" << js.out;
    // The same document as root's direct dump (the tasks all wait: nothing moves between them).
    auto direct = run({pybpfprof_bin(), "dump", "--pid", pid, "--async", "--json"});
    ASSERT_EQ(direct.status, 0) << direct.err;
    EXPECT_EQ(json::parse(direct.out)["processes"][0]["asyncio"], a);
    // Text through the agent: the pstree tree.
    auto text = dump_as("pbp-test-a", {"--pid", pid, "--async"});
    ASSERT_EQ(text.status, 0) << text.err;
    EXPECT_NE(text.out.find("(T) main"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("(T) leaf-1-1"), std::string::npos) << text.out;

    // Profiling with --async through the agent: the three tasks that compute in turn.
    Reporter tasks(user_argv(*in, "pbp-test-a", "asyncio_tasks.py", {"4"}));
    const std::string out = dir + "/pbp-test-a/async.folded";
    auto rec = run(as_user("pbp-test-a",
                           {pybpfprof_bin(), "-q", "--async", "-r", "499", "-d", "2", "--pid", std::to_string(tasks.pid()),
                            "-o", out},
                           socket),
                   60);
    ASSERT_EQ(rec.status, 0) << rec.err;
    EXPECT_EQ(rec.err.find("--async"), std::string::npos) << "no note, no refusal on 3.14: " << rec.err;
    const std::string folded = read_file(out);
    for (const char* t : {"alpha", "beta", "gamma"})
        EXPECT_NE(folded.find(std::string("<task main>;<task ") + t + ">;worker"), std::string::npos)
            << t << "\n" << folded.substr(0, 2000);
}

}  // namespace pbp::test
