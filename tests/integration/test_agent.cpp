// The agent for real: a real `pybpfprof agent` as root, and clients and targets running as
// real unprivileged users that the test setup creates (tests/tools/agent-test-users):
// pbp-test-a, pbp-test-b, and pbp-test-adm in the admin group pbp-test-admins.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <arpa/inet.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "real_agent.h"
#include "export/raw.h"
#include "speedscope_reader.h"
#include "sys/preflight.h"
#include "test_support.h"
#include "tmux_screen.h"

namespace pbp::test {
namespace {

using namespace std::chrono_literals;

uint64_t rss_kib(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
    return 0;
}

std::set<pid_t> pids_in(const RProfile& p) {
    std::set<pid_t> out;
    static const std::regex re(R"(\(pid (\d+))");
    for (auto& t : p.threads) {
        std::smatch m;
        if (std::regex_search(t.profile_name, m, re)) out.insert(std::stoi(m[1]));
    }
    return out;
}

// RSS means little in a sanitized agent (ASan keeps freed memory in quarantine).
bool sanitized_agent() { return agent_bin() != pybpfprof_bin(); }

size_t lines_of(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

class Agent : public RealAgent {
protected:
    CmdResult client(const std::string& user, std::vector<std::string> args, int timeout = 120) {
        std::vector<std::string> a{pybpfprof_bin(), "-q"};
        a.insert(a.end(), args.begin(), args.end());
        return run(as_user(user, a, socket), timeout);
    }
};

// min_leaf: samples expected in two_loops at least (from the target's CPU time: on a
// loaded machine a busy process gets less than a CPU).
void expect_hot_lines(const RProfile& prof, const std::string& err, size_t min_leaf) {
    const std::string file = source_dir() + "/tests/workloads/hot_lines.py";
    std::map<int, size_t> lines;
    size_t leaf = 0;
    for (auto& t : prof.threads)
        for (auto& s : t.samples)
            if (!s.empty() && s.back().name == "two_loops") {
                leaf++;
                lines[s.back().line]++;
                EXPECT_EQ(s.back().file, file);
            }
    ASSERT_GE(leaf, min_leaf) << err;
    std::vector<std::pair<size_t, int>> by;
    for (auto& [l, c] : lines) by.push_back({c, l});
    std::sort(by.rbegin(), by.rend());
    ASSERT_GE(by.size(), 2u);
    // LINE-A and LINE-B of hot_lines.py (lines 8 and 10).
    EXPECT_EQ((std::set<int>{by[0].second, by[1].second}), (std::set<int>{8, 10})) << err;
}

TEST_F(Agent, UserProfilesOwnProcessByPid) {
    Child target = busy("pbp-test-a");
    std::string o = out("pbp-test-a", "pid.json");
    const double cpu0 = cpu_seconds(target.pid());
    auto r = run(as_user("pbp-test-a",
                         {pybpfprof_bin(), "--pid", std::to_string(target.pid()), "-d", "3", "-o", o}, socket),
                 60);
    ASSERT_EQ(r.status, 0) << r.err << agent.err();
    // What a root run prints: the target, the summary and the top functions.
    EXPECT_NE(r.err.find("profiling PID " + std::to_string(target.pid())), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Wrote " + o + ": "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Top functions by self time"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("two_loops"), std::string::npos) << r.err;
    // Written by the client, as the user.
    struct stat st{};
    ASSERT_EQ(stat(o.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, uid_of("pbp-test-a"));
    const double cpu = cpu_seconds(target.pid()) - cpu0;  // a little more than the session's
    expect_hot_lines(read_speedscope(o), r.err, static_cast<size_t>(cpu * 99 * 0.7));
}

TEST_F(Agent, UserProfilesOwnLaunchedCommand) {
    std::string o = out("pbp-test-a", "launched.json");
    auto r = client("pbp-test-a",
                    {"-o", o, "--", "/usr/bin/python3", source_dir() + "/tests/workloads/hot_lines.py", "3"}, 60);
    ASSERT_EQ(r.status, 0) << r.err << agent.err();
    auto prof = read_speedscope(o);
    // About 3 s of one busy CPU at 99 Hz, less on a loaded machine.
    expect_hot_lines(prof, r.err, 50);
}

// Through the agent, on a real terminal (tmux, 100x12): the user's launched program prints its
// lines above the status line, which keeps the bottom row (the client takes it before it forks
// the command), and gives it back at the end; every line once, in order, none glued to it.
TEST_F(Agent, StatusLineKeepsTheBottomRowForALaunchedCommand) {
    PBP_REQUIRE(Tmux::installed(), "tmux is not installed (tools/install-deps)");
    Tmux tmux;
    const std::string o = out("pbp-test-a", "tty.json");
    std::string cmd;
    for (auto& w : as_user("pbp-test-a", {pybpfprof_bin(), "-d", "6", "-o", o, "--", "/usr/bin/python3",
                                          source_dir() + "/tests/workloads/prints_lines.py", "3"},
                           socket))
        cmd += w + " ";
    cmd += "; echo EXIT=$?; sleep 120";
    ASSERT_TRUE(tmux({"new-session", "-d", "-s", "s", "-x", "100", "-y", "12", "sh", "-c", cmd}));
    const std::regex status(R"(pybpfprof: \d+\.\ds of 6s  \d+ samples  [01] process(es)?  \d+ lost)");
    const std::regex program_line(R"(\bline \d+)");
    int status_under_lines = 0;
    // Once the program is announced, the status line counts it: before, the first draws said
    // "0 processes" below "profiling PID ..." until the agent's first progress (250 ms later).
    int announced_but_none_counted = 0;
    bool ended = false;
    for (int i = 0; i < 600 && !ended; i++) {
        std::this_thread::sleep_for(50ms);
        auto rows = tmux.screen();
        size_t line_rows = 0;
        const bool announced = joined(rows).find("profiling PID") != std::string::npos;
        for (size_t r = 0; r < rows.size(); r++) {
            if (rows[r].rfind("EXIT=", 0) == 0) ended = true;
            if (announced && rows[r].find("  0 processes  ") != std::string::npos) announced_but_none_counted++;
            if (std::regex_search(rows[r], status)) {
                EXPECT_EQ(r, 11u) << "the status line off the bottom row:\n" << joined(rows);
                EXPECT_TRUE(std::regex_match(rows[r], status)) << "glued: '" << rows[r] << "'";
            }
            if (std::regex_search(rows[r], program_line)) {
                line_rows++;
                EXPECT_TRUE(std::regex_match(rows[r], std::regex(R"(line \d+)"))) << "glued: '" << rows[r] << "'";
            }
        }
        if (rows.size() == 12 && std::regex_match(rows[11], status) && line_rows >= 10) status_under_lines++;
    }
    ASSERT_TRUE(ended) << "the run did not end:\n" << joined(tmux.screen());
    EXPECT_GE(status_under_lines, 3);
    // (One screen may catch the moment between the announcement and the draw that follows it.)
    EXPECT_LE(announced_but_none_counted, 1);
    const std::string text = joined(tmux.screen(true));
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(done after (\d+) lines)"))) << text;
    const int printed = std::stoi(m[1]);
    int next = 0;
    for (auto& r : tmux.screen(true))
        if (std::regex_match(r, m, std::regex(R"(line (\d+))"))) {
            EXPECT_EQ(std::stoi(m[1]), next) << text;
            next = std::stoi(m[1]) + 1;
        }
    EXPECT_EQ(next, printed) << text;
    EXPECT_NE(text.find("EXIT=0"), std::string::npos) << text << agent.err();
    EXPECT_NE(text.find("Wrote " + o), std::string::npos) << text;
    for (auto& r : tmux.screen()) EXPECT_FALSE(std::regex_search(r, status)) << r;
}

// --mode and --min-block reach the agent's session, and its summary says so, as a root run's.
TEST_F(Agent, ModeAndMinBlockGoThroughTheAgent) {
    std::string o = out("pbp-test-a", "wall.json");
    auto r = client("pbp-test-a",
                    {"--mode", "wall", "--min-block", "250us", "-o", o, "--", "/usr/bin/python3",
                     source_dir() + "/tests/workloads/hot_lines.py", "1"},
                    60);
    ASSERT_EQ(r.status, 0) << r.err << agent.err();
    EXPECT_NE(r.err.find("\n  mode wall: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" s on CPU, "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the 250 us --min-block"), std::string::npos) << r.err;
    EXPECT_NE(agent.err().find("mode wall"), std::string::npos) << agent.err();
    auto cpu = client("pbp-test-a", {"-o", out("pbp-test-a", "cpu.json"), "--", "/usr/bin/python3",
                                     source_dir() + "/tests/workloads/hot_lines.py", "1"},
                      60);
    ASSERT_EQ(cpu.status, 0) << cpu.err;
    EXPECT_NE(cpu.err.find("\n  mode cpu: "), std::string::npos) << cpu.err;
}

TEST_F(Agent, OtherUsersRootsAndPidOneAreRefused) {
    Child theirs = busy("pbp-test-b");
    Child roots({"/usr/bin/python3", source_dir() + "/tests/workloads/hot_lines.py", "60"}, dir);
    std::this_thread::sleep_for(300ms);
    struct Case {
        pid_t pid;
        std::string owner;
    } cases[] = {{theirs.pid(), "pbp-test-b"}, {roots.pid(), "root"}, {1, "root"}};
    for (auto& c : cases) {
        std::string o = out("pbp-test-a", "refused-" + std::to_string(c.pid) + ".json");
        auto r = client("pbp-test-a", {"--pid", std::to_string(c.pid), "-d", "2", "-o", o});
        EXPECT_EQ(r.status, 1) << r.err;
        EXPECT_EQ(lines_of(r.err), 1u) << r.err;
        EXPECT_NE(r.err.find("PID " + std::to_string(c.pid)), std::string::npos) << r.err;
        EXPECT_NE(r.err.find(c.owner), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("real, effective and saved"), std::string::npos) << "the rule is named: " << r.err;
        EXPECT_FALSE(std::filesystem::exists(o));
    }
    // An admin may.
    std::string o = out("pbp-test-adm", "admin.json");
    auto r = client("pbp-test-adm", {"--pid", std::to_string(theirs.pid()), "-d", "2", "-o", o});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(pids_in(read_speedscope(o)), std::set<pid_t>{theirs.pid()});
}

TEST_F(Agent, CgroupNeedsAnAdmin) {
    std::string o = out("pbp-test-a", "cg.json");
    auto r = client("pbp-test-a", {"--cgroup", "/", "-d", "1", "-o", o});
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_EQ(lines_of(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("--cgroup needs root or membership of the agent's admin group (pbp-test-admins)"),
              std::string::npos)
        << r.err;
}

TEST_F(Agent, AllPythonOfAUserIsThatUsersOnly) {
    Child mine = busy("pbp-test-a");
    Child theirs = busy("pbp-test-b");
    std::string o = out("pbp-test-a", "all.json");
    Child c(as_user("pbp-test-a", {pybpfprof_bin(), "--all-python", "-d", "4", "-o", o}, socket), dir);
    ASSERT_TRUE(c.wait_for_err("profiling every CPython process of user pbp-test-a", 30)) << c.err() << agent.err();
    std::this_thread::sleep_for(1s);
    Child later = busy("pbp-test-a", 30);  // started after the session began
    ASSERT_EQ(c.wait(60), 0) << c.err();
    auto pids = pids_in(read_speedscope(o));
    EXPECT_TRUE(pids.count(mine.pid())) << c.err();
    EXPECT_TRUE(pids.count(later.pid())) << "a process started later is caught: " << c.err();
    EXPECT_FALSE(pids.count(theirs.pid())) << "another user's process is never sampled";
    const std::string uid = std::to_string(uid_of("pbp-test-a"));
    for (pid_t p : pids) {
        auto st = read_file("/proc/" + std::to_string(p) + "/status");
        EXPECT_NE(st.find("Uid:\t" + uid + "\t" + uid + "\t" + uid), std::string::npos) << p;
    }
}

TEST_F(Agent, TwoUsersAtTwoRatesGetTheirOwn) {
    Child a = busy("pbp-test-a");
    Child b = busy("pbp-test-b");
    std::string oa = out("pbp-test-a", "a.json"), ob = out("pbp-test-b", "b.json");
    double a0 = cpu_seconds(a.pid()), b0 = cpu_seconds(b.pid());
    Child ca(as_user("pbp-test-a", {pybpfprof_bin(), "-q", "--pid", std::to_string(a.pid()), "-r", "199", "-d", "4", "-o", oa},
                     socket),
             dir);
    Child cb(as_user("pbp-test-b", {pybpfprof_bin(), "-q", "--pid", std::to_string(b.pid()), "-r", "49", "-d", "4", "-o", ob},
                     socket),
             dir);
    ASSERT_EQ(ca.wait(60), 0) << ca.err();
    ASSERT_EQ(cb.wait(60), 0) << cb.err();
    double a_cpu = cpu_seconds(a.pid()) - a0, b_cpu = cpu_seconds(b.pid()) - b0;
    auto pa = read_speedscope(oa), pb = read_speedscope(ob);
    EXPECT_EQ(pids_in(pa), std::set<pid_t>{a.pid()});
    EXPECT_EQ(pids_in(pb), std::set<pid_t>{b.pid()});
    // CPU time is measured over a little more than the session (client start-up and exit):
    // the rate is checked against it with the 5% the issue allows plus that margin.
    EXPECT_NEAR(pa.total() / a_cpu, 199.0, 199.0 * 0.12) << pa.total() << " samples, " << a_cpu << " s CPU";
    EXPECT_NEAR(pb.total() / b_cpu, 49.0, 49.0 * 0.12) << pb.total() << " samples, " << b_cpu << " s CPU";
}

TEST_F(Agent, StatusShowsUsersTheirOwnSessions) {
    Child a = busy("pbp-test-a"), b = busy("pbp-test-b");
    Child ca(as_user("pbp-test-a", {pybpfprof_bin(), "-q", "--pid", std::to_string(a.pid()), "-d", "20", "-o",
                                    out("pbp-test-a", "s.json")},
                     socket),
             dir);
    Child cb(as_user("pbp-test-b", {pybpfprof_bin(), "-q", "--pid", std::to_string(b.pid()), "-d", "20", "-o",
                                    out("pbp-test-b", "s.json")},
                     socket),
             dir);
    std::string seen;
    for (int i = 0; i < 100; i++) {
        seen = run({pybpfprof_bin(), "agent", "status", "--socket", socket}).out;
        if (lines_of(seen) >= 3) break;
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(lines_of(seen), 3u) << "root sees both sessions:\n" << seen;
    auto mine = run(as_user("pbp-test-a", {pybpfprof_bin(), "agent", "status"}, socket));
    EXPECT_EQ(mine.status, 0) << mine.err;
    EXPECT_EQ(lines_of(mine.out), 2u) << mine.out;
    EXPECT_NE(mine.out.find("pbp-test-a"), std::string::npos) << mine.out;
    EXPECT_EQ(mine.out.find("pbp-test-b"), std::string::npos) << mine.out;
}

TEST_F(Agent, WithoutAgentOrRootTheErrorNamesBothFixes) {
    auto r = run(as_user("pbp-test-a", {pybpfprof_bin(), "--pid", "1", "-d", "1"}, dir + "/none.sock"));
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(lines_of(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("sudo"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("agent"), std::string::npos) << r.err;
}

TEST_F(Agent, KilledClientsFreeTheirSessions) {
    Child target = busy("pbp-test-a", 300);
    // Idle baseline: after one session has come and gone (BPF maps, symbolizer code paged in).
    auto once = client("pbp-test-a", {"--pid", std::to_string(target.pid()), "-d", "1", "-o",
                                      out("pbp-test-a", "warm.json")});
    ASSERT_EQ(once.status, 0) << once.err;
    std::this_thread::sleep_for(500ms);
    const uint64_t idle = rss_kib(agent.pid());
    for (int i = 0; i < 100; i++) {
        Child c(as_user("pbp-test-a", {pybpfprof_bin(), "--pid", std::to_string(target.pid()), "-o",
                                       out("pbp-test-a", "killed.json")},
                        socket),
                dir);
        ASSERT_TRUE(c.wait_for_err("profiling PID", 30)) << i << ": " << c.err() << agent.err();
        std::this_thread::sleep_for(100ms);
        c.signal(SIGKILL);
        c.wait(10);
    }
    std::string st;
    for (int i = 0; i < 50; i++) {
        st = run({pybpfprof_bin(), "agent", "status", "--socket", socket}).out;
        if (st == "no sessions\n") break;
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(st, "no sessions\n");
    const uint64_t after = rss_kib(agent.pid());
    if (!sanitized_agent()) {
        EXPECT_LE(after, idle * 1.10) << "idle " << idle << " KiB, after 100 killed sessions " << after << " KiB";
    }
    EXPECT_FALSE(std::filesystem::exists(out("pbp-test-a", "killed.json")));
}

TEST_F(Agent, HostileInputNeverHarmsTheAgentOrAnotherSession) {
    Child target = busy("pbp-test-a", 120);
    std::string o = out("pbp-test-a", "legit.json");
    Child legit(as_user("pbp-test-a", {pybpfprof_bin(), "-q", "--pid", std::to_string(target.pid()), "-d", "15", "-o", o},
                        socket),
                dir);
    std::this_thread::sleep_for(1s);
    const uint64_t rss0 = rss_kib(agent.pid());
    const double cpu0 = cpu_seconds(target.pid());
    auto send_raw = [&](const std::string& bytes, bool hold) {
        int fd = connect_raw(socket);
        EXPECT_GE(fd, 0);
        (void)!write(fd, bytes.data(), bytes.size());
        if (!hold) {
            char buf[4096];
            struct timeval tv{5, 0};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            while (read(fd, buf, sizeof buf) > 0) {
            }
            close(fd);
            return -1;
        }
        return fd;
    };
    std::vector<int> held;
    // Garbage, a huge length prefix, truncated JSON, JSON that is not a request.
    send_raw(std::string("\x00\x00\x00\x05hello", 9), false);
    send_raw(std::string("\xff\xff\xff\xff", 4) + std::string(1000, 'x'), false);
    send_raw(std::string("\x00\x00\x00\x20{\"v\":1,\"op\":\"start\",\"pids\":[", 4 + 27), false);
    held.push_back(send_raw(std::string("\x00\x00\x00\x40{\"v\":1,\"op\":", 4 + 12), true));  // and left hanging
    send_raw(std::string("\x00\x00\x00\x02[]", 6), false);
    {
        std::string bomb(60000, '[');
        uint32_t n = htonl(static_cast<uint32_t>(bomb.size()));
        send_raw(std::string(reinterpret_cast<char*>(&n), 4) + bomb, false);
    }
    // A start request naming a PID that exits mid-session.
    Child shortlived = busy("pbp-test-a", 2);
    std::string so = out("pbp-test-a", "short.json");
    auto sr = client("pbp-test-a", {"--pid", std::to_string(shortlived.pid()), "-d", "5", "-o", so}, 30);
    EXPECT_EQ(sr.status, 3) << "a --pid that exits mid-session keeps its samples: " << sr.err;
    EXPECT_TRUE(std::filesystem::exists(so));
    // 1000 connections opened and held, as another user.
    const uid_t b_uid = uid_of("pbp-test-b");
    const gid_t b_gid = static_cast<gid_t>(std::stoul(run({"id", "-g", "pbp-test-b"}).out));
    pid_t holder = fork();
    if (holder == 0) {
        rlimit rl{};
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (setgroups(0, nullptr) || setgid(b_gid) || setuid(b_uid)) _exit(2);
        std::vector<int> fds;
        for (int k = 0; k < 1000; k++) fds.push_back(connect_raw(socket));
        sleep(5);
        _exit(std::count(fds.begin(), fds.end(), -1) > 0 ? 3 : 0);
    }
    int hst = 0;
    waitpid(holder, &hst, 0);
    EXPECT_TRUE(WIFEXITED(hst) && WEXITSTATUS(hst) == 0) << "1000 connections could be opened: " << hst;
    for (int fd : held)
        if (fd >= 0) close(fd);
    ASSERT_EQ(legit.wait(60), 0) << legit.err() << agent.err();
    const double cpu = cpu_seconds(target.pid()) - cpu0;
    auto prof = read_speedscope(o);
    EXPECT_EQ(pids_in(prof), std::set<pid_t>{target.pid()});
    // Sampled all along: 99 Hz of its CPU time from 1 s after the session began.
    EXPECT_GE(prof.total(), static_cast<size_t>(cpu * 99 * 0.9)) << cpu << " s of CPU";
    EXPECT_TRUE(agent.running());
    if (!sanitized_agent()) {
        EXPECT_LE(rss_kib(agent.pid()), rss0 + 20 * 1024) << "the agent's RSS";
    }
    auto st = run({pybpfprof_bin(), "agent", "status", "--socket", socket});
    EXPECT_EQ(st.status, 0) << st.err;
}

TEST_F(Agent, LimitsAreClearErrors) {
    agent.signal(SIGTERM);
    ASSERT_EQ(agent.wait(30), 0) << agent.err();
    start_agent({"--max-sessions-per-user", "1", "--max-duration", "5", "--max-session-mb", "0.05"});
    Child target = busy("pbp-test-a", 120);
    // One session at a time for this user: a second is refused while the first runs.
    std::string o1 = out("pbp-test-a", "first.json");
    Child first(as_user("pbp-test-a", {pybpfprof_bin(), "--pid", std::to_string(target.pid()), "-d", "3", "-o", o1},
                        socket),
                dir);
    ASSERT_TRUE(first.wait_for_err("profiling PID", 30)) << first.err() << agent.err();
    auto second = client("pbp-test-a", {"--pid", std::to_string(target.pid()), "-d", "1", "-o",
                                        out("pbp-test-a", "second.json")});
    EXPECT_EQ(second.status, 1) << second.err;
    EXPECT_EQ(lines_of(second.err), 1u) << second.err;
    EXPECT_NE(second.err.find("already has 1 session, the most the agent allows per user"), std::string::npos)
        << second.err;
    EXPECT_EQ(first.wait(30), 0) << first.err();
    // Longer than the agent allows.
    auto longer = client("pbp-test-a", {"--pid", std::to_string(target.pid()), "-d", "10", "-o",
                                        out("pbp-test-a", "long.json")});
    EXPECT_EQ(longer.status, 1) << longer.err;
    EXPECT_NE(longer.err.find("a duration of 10 s is over the agent's limit of 5 s per session"), std::string::npos)
        << longer.err;
    EXPECT_FALSE(std::filesystem::exists(out("pbp-test-a", "long.json")));
    // Memory: 0.05 MiB of samples is reached in about 2 s at 999 Hz; the samples so far are kept.
    std::string om = out("pbp-test-a", "memory.json");
    auto mem = client("pbp-test-a", {"--pid", std::to_string(target.pid()), "-r", "999", "-o", om}, 60);
    EXPECT_EQ(mem.status, 0) << mem.err;
    EXPECT_NE(mem.err.find("over the agent's limit of 0.05 MiB per session"), std::string::npos) << mem.err;
    EXPECT_GT(read_speedscope(om).total(), 500u);
    // No duration: ended at the agent's longest, and said so then.
    std::string oc = out("pbp-test-a", "capped.json");
    auto capped = client("pbp-test-a", {"--pid", std::to_string(target.pid()), "-o", oc}, 60);
    EXPECT_EQ(capped.status, 0) << capped.err;
    EXPECT_NE(capped.err.find("the session reached the agent's limit of 5 s per session"), std::string::npos)
        << capped.err;
    EXPECT_TRUE(std::filesystem::exists(oc));
}

TEST_F(Agent, RestartsReplaceAStaleSocket) {
    // A second agent on a live socket is refused.
    auto second = run({agent_bin(), "agent", "--socket", socket}, 30);
    EXPECT_EQ(second.status, 1);
    EXPECT_NE(second.err.find("another agent is already listening on " + socket), std::string::npos) << second.err;
    // Killed: the socket file stays behind, stale; a new agent replaces it.
    agent.signal(SIGKILL);
    agent.wait(10);
    ASSERT_TRUE(std::filesystem::exists(socket));
    start_agent();
    Child target = busy("pbp-test-a", 30);
    auto r = client("pbp-test-a", {"--pid", std::to_string(target.pid()), "-d", "1", "-o", out("pbp-test-a", "r.json")});
    EXPECT_EQ(r.status, 0) << r.err;
    // Stopped cleanly: the socket goes with it.
    agent.signal(SIGTERM);
    EXPECT_EQ(agent.wait(30), 0) << agent.err();
    EXPECT_FALSE(std::filesystem::exists(socket));
}

// pybpfprof's own format through the agent (as a Dask worker's profile travels): the
// user's file reads back with the agent machine's host and the samples, and the user merges
// it into a report with no privilege at all.
TEST_F(Agent, OwnFormatThroughTheAgentMergesWithoutPrivileges) {
    Child target = busy("pbp-test-a");
    const std::string o = out("pbp-test-a", "w.pbp"), html = out("pbp-test-a", "w.html");
    auto r = client("pbp-test-a", {"--pid", std::to_string(target.pid()), "-d", "2", "-o", o});
    ASSERT_EQ(r.status, 0) << r.err << agent.err();
    Profile p;
    std::string error;
    ASSERT_TRUE(read_raw(read_file(o), p, error)) << error;
    EXPECT_EQ(p.run.host, host_name());
    ASSERT_EQ(p.processes.count(static_cast<uint32_t>(target.pid())), 1u);
    EXPECT_GT(p.total_samples(), 100u);
    auto m = run(as_user("pbp-test-a", {pybpfprof_bin(), "merge", o, "--label", "role=worker", "-o", html}), 60);
    ASSERT_EQ(m.status, 0) << m.err;
    EXPECT_NE(m.err.find("Wrote " + html + ": "), std::string::npos) << m.err;
    EXPECT_NE(read_file(html).find("\"role\":\"worker\""), std::string::npos);
}

}  // namespace
}  // namespace pbp::test
