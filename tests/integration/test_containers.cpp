// A real container engine: podman (with runc) running Python in images made with no
// registry (tests/tools/container-images: a debootstrap rootfs imported with `podman
// import`), with the engine's default security settings: no added capability, the default
// seccomp profile. Profiled from the host by container ID and by cgroup path, and from the
// agent's own image (deploy/Dockerfile) run with exactly the DaemonSet's capabilities and
// mounts (deploy/pybpfprof-agent.yaml).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "pprof_reader.h"
#include "speedscope_reader.h"
#include "test_support.h"

namespace pbp::test {
namespace {

namespace fs = std::filesystem;

bool have_podman() { return run({"sh", "-c", "command -v podman && command -v runc"}, 30).status == 0; }

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

// podman with runc: crun, its default runtime, refuses hybrid cgroup hosts. The hard nofile
// limit of this kind of machine (20000) is below what podman asks by default, hence explicit ones.
CmdResult podman(std::vector<std::string> args, int timeout_s = 120) {
    std::vector<std::string> argv{"podman", "--runtime", "runc"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, timeout_s);
}
const std::vector<std::string> kUlimits{"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"};

struct Container {
    std::string id;   // 64 hex digits
    std::string name;
    pid_t pid = 0;    // its first process, on the host
    std::string cgroup;  // its cgroup v2 path, as /proc/PID/cgroup says
    std::string ctl;     // a directory of the test's, /ctl in the container
};

class Containers : public ::testing::Test {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
        PBP_REQUIRE(have_podman(), "podman and runc are not installed (tools/install-deps installs them)");
        dir = temp_dir();
        static std::string image;  // built once per test binary run
        if (image.empty()) {
            auto r = run({tool_path("container-images"), "python"}, 600);
            ASSERT_EQ(r.status, 0) << r.err;
            image = trim(r.out);
        }
        python_image = image;
    }
    void TearDown() override {
        for (auto& c : started) podman({"rm", "-f", "-t", "0", c}, 60);
    }

    // A container of python_image running tests/workloads/container_app.py until stop(c)
    // (at most 120 s), exiting with 'code'; default security: no --cap-add, no
    // --security-opt, no --privileged.
    Container start_app(const std::string& role, int code) {
        Container c;
        c.name = "pbp-test-" + role + "-" + std::to_string(getpid());
        c.ctl = dir + "/ctl-" + role;
        fs::create_directories(c.ctl);
        std::vector<std::string> args{"run", "-d", "--name", c.name, "--network", "none"};
        args.insert(args.end(), kUlimits.begin(), kUlimits.end());
        args.insert(args.end(), {"-v", source_dir() + "/tests/workloads:/app:ro", "-v", c.ctl + ":/ctl", python_image,
                                 "python3.9", "/app/container_app.py", "120", std::to_string(code), "/ctl/stop"});
        auto r = podman(args);
        started.push_back(c.name);
        EXPECT_EQ(r.status, 0) << r.err;
        c.id = trim(r.out);
        c.pid = std::atoi(trim(podman({"inspect", "--format", "{{.State.Pid}}", c.id}).out).c_str());
        std::ifstream f("/proc/" + std::to_string(c.pid) + "/cgroup");
        for (std::string line; std::getline(f, line);)
            if (line.rfind("0::", 0) == 0) c.cgroup = line.substr(3);
        return c;
    }
    // Stops the app (it exits by itself) and checks what its own process did: its exit code
    // and its output.
    static void expect_unharmed(const Container& c, int code) {
        std::ofstream(c.ctl + "/stop");
        auto w = podman({"wait", c.id}, 120);
        EXPECT_EQ(trim(w.out), std::to_string(code)) << w.err;
        auto logs = podman({"logs", c.id});
        EXPECT_EQ(logs.out.rfind("served ", 0), 0u) << logs.out << logs.err;
    }
    static size_t samples_of(const RProfile& p, pid_t pid) {
        size_t n = 0;
        for (auto& t : p.threads)
            if (t.profile_name.find("(pid " + std::to_string(pid) + ",") != std::string::npos ||
                t.profile_name.find("(pid " + std::to_string(pid) + ")") != std::string::npos)
                n += t.samples.size();
        return n;
    }
    static std::string names(const RProfile& p) {
        std::string s;
        for (auto& t : p.threads) s += "  " + t.profile_name + "\n";
        return s;
    }
    // Every sample of the app is on its one call chain, and nearly all are in spin() under
    // parse or render (the rest: between the calls). A stack BPF could not read whole is
    // marked so ("[partial stack: ...]"): allowed, rarely.
    static void expect_app_stacks(const RProfile& p) {
        const std::vector<std::string> chain{"<module>", "serve", "handle_request"};
        size_t parse = 0, render = 0, other = 0, marked = 0;
        for (auto& t : p.threads)
            for (auto& s : t.samples) {
                std::vector<std::string> n;
                for (auto& f : s) n.push_back(f.name);
                if (std::any_of(n.begin(), n.end(), [](auto& x) { return x.rfind("[partial stack", 0) == 0; })) {
                    marked++;
                    continue;
                }
                bool on_chain = n.size() >= 2 && n.size() <= 5 && std::equal(n.begin(), n.begin() + std::min<size_t>(n.size(), 3), chain.begin());
                if (n.size() >= 4) on_chain = on_chain && (n[3] == "parse" || n[3] == "render");
                if (n.size() == 5) on_chain = on_chain && n[4] == "spin";
                EXPECT_TRUE(on_chain) << "not the app's call chain: " << ::testing::PrintToString(n);
                if (n.size() == 5 && n[3] == "parse") parse++;
                else if (n.size() == 5 && n[3] == "render") render++;
                else other++;
                // file and line as the container sees them
                for (auto& f : s) {
                    if (f.name == "spin") {
                        EXPECT_EQ(f.file, "/app/container_app.py");
                        EXPECT_GT(f.line, 0);
                    }
                }
            }
        EXPECT_GT(parse, 0u);
        EXPECT_GT(render, 0u);
        EXPECT_GT(parse + render, 9 * (parse + render + other) / 10) << parse << " " << render << " " << other;
        EXPECT_LE(marked * 50, parse + render + other + marked) << marked << " partial stacks";
    }

    std::string dir, python_image;
    std::vector<std::string> started;
};

TEST_F(Containers, ProfiledFromTheHostByIdAndCgroupPath) {
    Container app = start_app("app", 3);
    Container other = start_app("other", 0);
    ASSERT_GT(app.pid, 0);
    ASSERT_GT(other.pid, 0);
    ASSERT_NE(app.cgroup.find(app.id), std::string::npos) << app.cgroup;
    const std::string short_id = app.id.substr(0, 12);

    struct Case {
        std::string spec, says;
    };
    for (const Case& c : {Case{short_id, "watching container " + short_id},
                          Case{app.cgroup, "watching cgroup (" + app.cgroup + ")"}}) {
        std::string out = dir + "/c.json";
        auto r = run({pybpfprof_bin(), "-o", out, "-r", "199", "--no-summary", "--cgroup", c.spec, "-d", "2"}, 60);
        ASSERT_EQ(r.status, 0) << c.spec << ": " << r.err;
        EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
        auto prof = read_speedscope(out);
        ASSERT_EQ(prof.threads.size(), 1u) << c.spec << ": only the app's one thread\n" << names(prof);
        EXPECT_EQ(samples_of(prof, other.pid), 0u) << names(prof);
        EXPECT_GT(samples_of(prof, app.pid), 20u) << names(prof) << r.err;
        // the process's PID in the container (1: no init), and the container it is in, by the
        // name podman gave it
        EXPECT_NE(prof.threads[0].profile_name.find(", ns pid 1)"), std::string::npos) << prof.threads[0].profile_name;
        EXPECT_NE(prof.threads[0].profile_name.find("[container " + app.name + "]"), std::string::npos)
            << prof.threads[0].profile_name;
        expect_app_stacks(prof);
    }

    // The full ID, into pprof: every sample carries the full container ID, its name and the
    // cgroup.
    std::string out = dir + "/c.pb.gz";
    auto r = run({pybpfprof_bin(), "-o", out, "-r", "199", "--no-summary", "--cgroup", app.id, "-d", "2"}, 60);
    ASSERT_EQ(r.status, 0) << r.err;
    auto pp = parse_pprof(read_file(out));
    std::map<std::string, std::map<std::string, size_t>> seen;  // label -> value -> samples
    for (auto& s : pp.sample())
        for (auto& l : s.label())
            if (l.str()) seen[pp.string_table(l.key())][pp.string_table(l.str())]++;
    ASSERT_GT(pp.sample_size(), 0);
    EXPECT_EQ(seen["container_id"].size(), 1u);
    EXPECT_EQ(seen["container_id"][app.id], static_cast<size_t>(pp.sample_size()));
    EXPECT_EQ(seen["cgroup"][app.cgroup], static_cast<size_t>(pp.sample_size()));
    EXPECT_EQ(seen["container"][app.name], static_cast<size_t>(pp.sample_size()));

    expect_unharmed(app, 3);
    expect_unharmed(other, 0);
}

// --native on a container's process, from the host: its native frames are named from the
// container's own files, read through /proc/PID/root. The image is Debian 11's: python3.9 is in
// no host path (/usr/bin has only 3.11), and its libc is libc-2.31.so, where the host's 2.36 is
// libc.so.6 (and calls main from __libc_start_call_main, not __libc_start_main). The app's
// spin() reads time.process_time(): the vDSO's system call, whose samples unwind through the
// vDSO's CFI, read from the process too.
TEST_F(Containers, NativeFramesFromTheContainersOwnFiles) {
    PBP_REQUIRE(kernel_has_bpf_loop(), "--native needs bpf_loop (5.17+)");
    Container app = start_app("app", 0);
    ASSERT_GT(app.pid, 0);
    const std::string out = dir + "/native.folded";
    auto r = run({pybpfprof_bin(), "-q", "--native", "-f", "collapsed", "-o", out, "-r", "199", "--no-summary",
                  "--cgroup", app.id.substr(0, 12), "-d", "2"},
                 60);
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string text = read_file(out);
    size_t all = 0, interp = 0, libc = 0, vdso = 0, incomplete = 0, spin = 0;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] == '#') continue;
        const size_t sp = line.rfind(' ');
        ASSERT_NE(sp, std::string::npos) << line;
        const size_t n = std::stoul(line.substr(sp + 1));
        const std::string stack = line.substr(0, sp);
        all += n;
        interp += n * (stack.find(" [python3.9];") != std::string::npos);
        libc += n * (stack.find(";__libc_start_main [libc-2.31.so];") != std::string::npos);
        vdso += n * (stack.find(" [vdso];") != std::string::npos);
        incomplete += n * (stack.find(";[native stack incomplete]") != std::string::npos);
        spin += n * (stack.find(";spin (/app/container_app.py:") != std::string::npos);
    }
    ASSERT_GT(all, 50u) << r.err;
    // Every stack is rooted in the container's executable and libc (_start, __libc_start_main).
    EXPECT_GE(interp * 100, all * 95) << interp << " of " << all << "\n" << text.substr(0, 4000);
    EXPECT_GE(libc * 100, all * 95) << libc << " of " << all << "\n" << text.substr(0, 4000);
    EXPECT_GE(spin * 100, all * 90) << spin << " of " << all;
    // Most of spin()'s time is process_time()'s system call, through the vDSO; nothing is cut short.
    EXPECT_GE(vdso * 2, all) << vdso << " of " << all << "\n" << text.substr(0, 4000);
    EXPECT_LE(incomplete * 20, all) << incomplete << " of " << all << " incomplete\n" << text.substr(0, 4000);
    expect_unharmed(app, 0);
}

// The agent's image, built from deploy/Dockerfile with no registry, run as the DaemonSet
// runs it (its capabilities, seccomp, user, hostPID and mounts, read from the manifest by
// tests/tools/daemonset-podman-args), in a private cgroup namespace as containerd gives
// pods on cgroup v2 nodes. Its probe answers, and `pybpfprof` run in it as a cluster admin
// runs it (kubectl exec) profiles another container, which kubelet's file names there; a
// node user's pybpfprof reaches the agent through the socket's hostPath.
TEST_F(Containers, AgentImageAsTheDaemonSetProfilesAnotherContainer) {
    auto img = run({tool_path("container-images"), "agent", source_dir(), pybpfprof_bin(), pyspy_bin()}, 600);
    ASSERT_EQ(img.status, 0) << img.err;
    Container app = start_app("app", 5);
    Container other = start_app("other", 0);
    ASSERT_GT(app.pid, 0);
    const std::string short_id = app.id.substr(0, 12);
    // kubelet's log file for the container (what names a container in a pod)
    const std::string node = dir + "/node";
    fs::create_directories(node + "/var/log/containers");
    std::ofstream(node + "/var/log/containers/web-1_shop_app-" + app.id + ".log");

    auto ds = run({tool_path("daemonset-podman-args"), source_dir() + "/deploy/pybpfprof-agent.yaml", trim(img.out), node});
    ASSERT_EQ(ds.status, 0) << ds.err;
    const std::string agent = "pbp-test-agent-" + std::to_string(getpid());
    std::vector<std::string> args{"run", "-d", "--name", agent, "--network", "none", "--cgroupns=private"};
    args.insert(args.end(), kUlimits.begin(), kUlimits.end());
    std::istringstream lines(ds.out);
    for (std::string l; std::getline(lines, l);) args.push_back(l);
    auto r = podman(args);
    started.push_back(agent);
    ASSERT_EQ(r.status, 0) << r.err;

    // The startup probe: `pybpfprof agent status` on the socket, until it answers.
    const std::vector<std::string> probe{"exec", agent, "/usr/local/bin/pybpfprof", "agent", "--socket",
                                         "/run/pybpfprof/agent.sock", "status"};
    CmdResult st;
    for (int i = 0; i < 60 && (st = podman(probe)).status != 0; i++) usleep(500 * 1000);
    ASSERT_EQ(st.status, 0) << st.out << st.err << podman({"logs", agent}).err;
    EXPECT_TRUE(fs::exists(node + "/run/pybpfprof/agent.sock")) << "the socket on the node (its hostPath)";

    // kubectl exec -n pybpfprof $AGENT -- pybpfprof --cgroup <container ID> ...
    r = podman({"exec", agent, "pybpfprof", "--cgroup", short_id, "-d", "2", "-r", "199", "--no-summary", "-o",
                "/tmp/app.json"},
               60);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.err.find("watching container " + short_id), std::string::npos) << r.err;
    ASSERT_EQ(podman({"cp", agent + ":/tmp/app.json", dir + "/app.json"}).status, 0);
    auto prof = read_speedscope(dir + "/app.json");
    ASSERT_EQ(prof.threads.size(), 1u) << names(prof);
    EXPECT_GT(samples_of(prof, app.pid), 20u) << names(prof) << r.err;
    EXPECT_EQ(samples_of(prof, other.pid), 0u) << names(prof);
    EXPECT_NE(prof.threads[0].profile_name.find("[container app]"), std::string::npos) << prof.threads[0].profile_name;
    expect_app_stacks(prof);

    // A user logged in on the node: pybpfprof, unprivileged, goes through the agent's socket
    // on the node (the hostPath) and profiles a program of its own.
    ASSERT_EQ(run({tool_path("agent-test-users")}, 60).status, 0);
    for (auto d = fs::path(dir); d != d.parent_path() && d.string().rfind("/tmp/", 0) == 0; d = d.parent_path())
        fs::permissions(d, fs::perms::others_exec | fs::perms::others_read, fs::perm_options::add);
    const std::string user_dir = dir + "/user";
    fs::create_directories(user_dir);
    run({"chown", "pbp-test-a:", user_dir});
    const std::string user_out = user_dir + "/own.json";
    auto u = run({"setpriv", "--reuid=pbp-test-a", "--regid=pbp-test-a", "--init-groups", "env", "HOME=/tmp",
                  "PYBPFPROF_AGENT_SOCKET=" + node + "/run/pybpfprof/agent.sock", pybpfprof_bin(), "-r", "199",
                  "--no-summary", "-o", user_out, "--", "/usr/bin/python3", workload("cpu_split.py"), "2"},
                 60);
    ASSERT_EQ(u.status, 0) << u.err;
    auto own = read_speedscope(user_out);
    EXPECT_GT(own.count([](auto& s) { return has_frame(s, "Splitter.hot_seventy"); }), 20u) << u.err;
    EXPECT_EQ(own.threads.size(), 1u) << names(own);
    EXPECT_NE(podman({"logs", agent}).err.find("uid " + trim(run({"id", "-u", "pbp-test-a"}).out)), std::string::npos)
        << "the agent's log names the session's user: " << podman({"logs", agent}).err;

    expect_unharmed(app, 5);
    expect_unharmed(other, 0);
    // SIGTERM (the pod's termination) stops the agent cleanly and removes the socket.
    auto stop = podman({"stop", "-t", "5", agent}, 60);
    EXPECT_EQ(stop.status, 0) << stop.err;
    EXPECT_EQ(trim(podman({"inspect", "--format", "{{.State.ExitCode}}", agent}).out), "0");
    EXPECT_FALSE(fs::exists(node + "/run/pybpfprof/agent.sock"));
}

}  // namespace
}  // namespace pbp::test
