// --cgroup on real kernel objects: cgroup v2 directories made by the test under the host's
// cgroup2 mount (found in /proc/self/mountinfo), kubelet's pod layouts recreated there,
// a fake /var/log/pods tree under --node-root, and Python processes placed in them.
// Plus PID and mount namespaces: a Python in its own namespaces and a debootstrap rootfs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <functional>
#include <list>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "speedscope_reader.h"
#include "sys/preflight.h"
#include "test_support.h"

namespace pbp::test {
namespace {

namespace fs = std::filesystem;


const std::string kUid = "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f";
const std::string kUidUnderscored = "7c1d2e3f_4a5b_4c6d_8e9f_0a1b2c3d4e5f";
std::string container_id(char c) { return std::string(8, 'f') + std::string(56, c); }

bool wait_for(const std::function<bool()>& cond, int timeout_s) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
        if (cond()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return cond();
}

class Cgroups : public ::testing::Test {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
        mount = cgroup2_mount();
        ASSERT_FALSE(mount.empty()) << "no cgroup2 mount with root / in /proc/self/mountinfo";
        static int n = 0;
        rel = "/pbp-test-" + std::to_string(getpid()) + "-" + std::to_string(++n);
        base = mount + rel;
        fs::create_directories(base);
        dir = temp_dir();
        node = dir + "/node";
        fs::create_directories(node + "/var/log/pods");
        fs::create_directories(node + "/var/log/containers");
    }
    void TearDown() override {
        kids.clear();  // kills and reaps them
        // deepest first; a cgroup with no processes left can be removed
        std::vector<std::string> dirs;
        if (!base.empty() && fs::exists(base))
            for (auto& e : fs::recursive_directory_iterator(base))
                if (e.is_directory()) dirs.push_back(e.path());
        std::sort(dirs.begin(), dirs.end(), [](auto& a, auto& b) { return a.size() > b.size(); });
        for (auto& d : dirs) rmdir(d.c_str());
        if (!base.empty()) rmdir(base.c_str());
    }
    // Starts argv inside cgroup directory 'cg' (created if missing): the shell joins the
    // cgroup, then execs argv, so the Python process is in it from its first instruction.
    pid_t start_in(const std::string& cg, const std::vector<std::string>& argv) {
        fs::create_directories(cg);
        std::vector<std::string> sh{"sh", "-c", "echo $$ > '" + cg + "/cgroup.procs' && exec \"$@\"", "sh"};
        sh.insert(sh.end(), argv.begin(), argv.end());
        kids.emplace_back(sh, dir);
        return kids.back().pid();
    }
    pid_t start_outside(const std::vector<std::string>& argv) {
        kids.emplace_back(argv, dir);
        return kids.back().pid();
    }
    std::vector<std::string> busy(int seconds) {
        return {"/usr/bin/python3.11", workload("cpu_split.py"), std::to_string(seconds)};
    }
    // pybpfprof in the background; returns it.
    Child& profiler(std::vector<std::string> args, const std::string& out) {
        std::vector<std::string> argv{pybpfprof_bin(), "-o", out, "-r", "199", "--no-summary", "--node-root", node};
        argv.insert(argv.end(), args.begin(), args.end());
        prof_kids.emplace_back(argv, dir);
        return prof_kids.back();
    }
    static bool said(Child& c, const std::string& what, int timeout_s = 30) {
        return wait_for([&] { return c.err().find(what) != std::string::npos; }, timeout_s);
    }
    // Samples per host PID, from the profile names "(pid N" / "(pid N, ns pid M)".
    static size_t samples_of(const RProfile& p, pid_t pid) {
        size_t n = 0;
        for (auto& t : p.threads)
            if (t.profile_name.find("(pid " + std::to_string(pid) + ")") != std::string::npos ||
                t.profile_name.find("(pid " + std::to_string(pid) + ",") != std::string::npos)
                n += t.samples.size();
        return n;
    }
    static std::string names(const RProfile& p) {
        std::string s;
        for (auto& t : p.threads) s += "  " + t.profile_name + "\n";
        return s;
    }
    void make_pod_logs(const std::string& ns, const std::string& name, const std::string& uid,
                       const std::vector<std::pair<std::string, std::string>>& containers) {
        fs::create_directories(node + "/var/log/pods/" + ns + "_" + name + "_" + uid);
        for (auto& [cname, id] : containers)
            std::ofstream(node + "/var/log/containers/" + name + "_" + ns + "_" + cname + "-" + id + ".log");
    }
    std::string systemd_pod_dir() {
        return base + "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidUnderscored + ".slice";
    }

    std::string mount, rel, base, dir, node;
    std::list<Child> kids, prof_kids;
};

TEST_F(Cgroups, CatchesOnlyProcessesInsideAndOnesStartedLater) {
    pid_t inside = start_in(base + "/app", busy(12));
    pid_t outside = start_outside(busy(12));
    std::string out = dir + "/out.json";
    // relative to the cgroup2 mount
    Child& p = profiler({"--cgroup", rel.substr(1), "-d", "5"}, out);
    ASSERT_TRUE(said(p, "watching cgroup")) << p.err();
    // started after pybpfprof: a process in the cgroup, and one in a new child cgroup
    pid_t later = start_in(base + "/app", busy(8));
    pid_t nested = start_in(base + "/new-child/deeper", busy(8));
    ASSERT_EQ(p.wait(60), 0) << p.err();
    auto prof = read_speedscope(out);
    EXPECT_GT(samples_of(prof, inside), 50u) << names(prof) << p.err();
    EXPECT_GT(samples_of(prof, later), 20u) << names(prof) << p.err();
    EXPECT_GT(samples_of(prof, nested), 20u) << names(prof) << p.err();
    EXPECT_EQ(samples_of(prof, outside), 0u) << names(prof);
    EXPECT_EQ(prof.threads.size(), 3u) << names(prof);
    size_t split = prof.count([](auto& s) { return has_frame(s, "Splitter.hot_seventy"); });
    EXPECT_GT(split, 0u);
}

TEST_F(Cgroups, KubeletSystemdLayoutByNameUidAndContainer) {
    const std::string id1 = container_id('1'), id2 = container_id('2');
    make_pod_logs("shop", "web-1", kUid, {{"app", id1}, {"side-car", id2}});
    std::string podd = systemd_pod_dir();
    // They outlive the three runs below: under TCG (tools/vmtest) those take more than 20 s.
    pid_t app = start_in(podd + "/cri-containerd-" + id1 + ".scope", busy(90));
    pid_t other = start_outside(busy(90));

    // By namespace/name, grouped by pod; a second container starts in the pod later.
    std::string out = dir + "/by-name.json";
    Child& p = profiler({"--cgroup", "shop/web-1", "-d", "4", "--group-by", "pod"}, out);
    ASSERT_TRUE(said(p, "watching pod shop/web-1")) << p.err();
    pid_t side = start_in(podd + "/cri-containerd-" + id2 + ".scope", busy(90));
    ASSERT_EQ(p.wait(60), 0) << p.err();
    EXPECT_NE(p.err().find("in pod shop/web-1, container app"), std::string::npos) << p.err();
    EXPECT_NE(p.err().find("in pod shop/web-1, container side-car"), std::string::npos) << p.err();
    auto prof = read_speedscope(out);
    ASSERT_EQ(prof.threads.size(), 1u) << "one profile for the pod:\n" << names(prof);
    EXPECT_EQ(prof.threads[0].profile_name, "pod shop/web-1 (2 processes, 2 threads)");

    // By pod UID, not grouped: each process carries its pod and container.
    out = dir + "/by-uid.json";
    Child& q = profiler({"--cgroup", kUid, "-d", "2"}, out);
    ASSERT_EQ(q.wait(60), 0) << q.err();
    prof = read_speedscope(out);
    EXPECT_GT(samples_of(prof, app), 0u) << names(prof);
    EXPECT_GT(samples_of(prof, side), 0u) << names(prof);
    EXPECT_EQ(samples_of(prof, other), 0u) << names(prof);
    for (auto& t : prof.threads) {
        bool is_app = t.profile_name.find("(pid " + std::to_string(app) + ")") != std::string::npos;
        EXPECT_NE(t.profile_name.find(is_app ? "[pod shop/web-1, container app]" : "[pod shop/web-1, container side-car]"),
                  std::string::npos)
            << t.profile_name;
    }
    // pprof carries the labels as strings
    out = dir + "/by-container.pb.gz";
    Child& r = profiler({"--cgroup", id1.substr(0, 10) + "1", "-d", "2", "-f", "pprof"}, out);
    ASSERT_EQ(r.wait(60), 0) << r.err();
    EXPECT_NE(r.err().find("watching container " + id1.substr(0, 12)), std::string::npos) << r.err();
    EXPECT_EQ(r.err().find("side-car"), std::string::npos) << "only the one container:\n" << r.err();
    auto raw = run({"sh", "-c", "zcat '" + out + "' | strings"});
    for (std::string want : {std::string("pod_uid"), kUid, std::string("web-1"), std::string("shop"), id1})
        EXPECT_NE(raw.out.find(want), std::string::npos) << want;
}

TEST_F(Cgroups, KubeletCgroupfsLayout) {
    const std::string uid = "3f2e1d0c-9b8a-4766-a554-433221100fed";
    const std::string id = container_id('c');
    make_pod_logs("ray", "raycluster-head-x7k2p", uid, {{"ray-head", id}});
    std::string podd = base + "/kubepods/burstable/pod" + uid;
    // It outlives the three runs (killed at teardown): under TCG they took more than 12 s, and
    // the third found no process (a full CI run here, 6.1 guest, 2026-11-27), as
    // KubeletSystemdLayout's did.
    pid_t head = start_in(podd + "/" + id, busy(90));
    for (std::string spec : {std::string("ray/raycluster-head-x7k2p"), uid, id.substr(0, 12)}) {
        std::string out = dir + "/cgfs.json";
        Child& p = profiler({"--cgroup", spec, "-d", "2"}, out);
        ASSERT_EQ(p.wait(60), 0) << spec << ": " << p.err();
        auto prof = read_speedscope(out);
        EXPECT_GT(samples_of(prof, head), 0u) << spec << "\n" << names(prof) << p.err();
        ASSERT_EQ(prof.threads.size(), 1u) << spec << "\n" << names(prof);
        EXPECT_NE(prof.threads[0].profile_name.find("[pod ray/raycluster-head-x7k2p, container ray-head]"),
                  std::string::npos)
            << prof.threads[0].profile_name;
    }
}

// A cgroup that exists but never holds a CPython process during -d: exit 2, no empty file.
TEST_F(Cgroups, NoPythonInTheCgroupWritesNothing) {
    const std::string cg = base + "/empty";
    start_in(cg, {"sleep", "30"});
    const std::string out = dir + "/empty.json";
    auto r = run({pybpfprof_bin(), "-q", "-o", out, "-d", "1", "--node-root", node, "--cgroup", rel + "/empty"}, 60);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("no CPython process was found in cgroup " + rel + "/empty"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
}

TEST_F(Cgroups, BadTargetsFailFastWithOneLine) {
    const std::string id1 = container_id('1'), id2 = container_id('2');
    fs::create_directories(systemd_pod_dir() + "/cri-containerd-" + id1 + ".scope");
    fs::create_directories(systemd_pod_dir() + "/cri-containerd-" + id2 + ".scope");
    struct Case {
        std::vector<std::string> args;
        std::string says;
    };
    std::vector<Case> cases = {
        {{"--cgroup", rel + "/no-such", "--node-root", node}, "no cgroup " + rel + "/no-such"},
        {{"--cgroup", "shop/absent", "--node-root", node}, "no pod shop/absent on this node"},
        {{"--cgroup", "ffffffff", "--node-root", node}, "matches 2 containers"},
        {{"--cgroup", "0123abcd0123", "--node-root", node}, "no container with an ID starting with 0123abcd0123"},
        {{"--cgroup", "x", "--node-root", dir + "/nope"}, "--node-root"},
        {{"--cgroup", "x", "--pid", "1"}, "choose one of"},
    };
    for (auto& c : cases) {
        std::vector<std::string> argv{pybpfprof_bin(), "-o", dir + "/x.json"};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        auto r = run(argv, 60);
        EXPECT_EQ(r.status, 2) << c.args[1] << ": " << r.err;
        EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line:\n" << r.err;
        EXPECT_FALSE(fs::exists(dir + "/x.json"));
    }
}

TEST_F(Cgroups, WaitsForAPodThatAppearsLater) {
    const std::string uid = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";
    const std::string id = container_id('a');
    std::string out = dir + "/late.json";
    Child& p = profiler({"--cgroup", "jobs/etl-late", "-d", "5"}, out);
    ASSERT_TRUE(said(p, "waiting for it")) << p.err();
    // the pod is scheduled: kubelet's directories, then its cgroup and a Python in it
    make_pod_logs("jobs", "etl-late", uid, {{"etl", id}});
    pid_t late = start_in(base + "/kubepods.slice/kubepods-pod" + std::string("aaaaaaaa_bbbb_4ccc_8ddd_eeeeeeeeeeee") +
                              ".slice/cri-containerd-" + id + ".scope",
                          busy(10));
    ASSERT_EQ(p.wait(60), 0) << p.err();
    auto prof = read_speedscope(out);
    EXPECT_GT(samples_of(prof, late), 50u) << names(prof) << p.err();
    EXPECT_NE(p.err().find("watching pod jobs/etl-late"), std::string::npos) << p.err();
}

TEST_F(Cgroups, AgentInAPrivateCgroupNamespace) {
    // A DaemonSet agent runs in a cgroup namespace of its own: pybpfprof joins PID 1's.
    pid_t inside = start_in(base + "/app", busy(10));
    // Python by the time pybpfprof looks (its -d 2 is short): under TCG (tools/vmtest 6.12) the
    // shell's exec and Python's start-up took long enough that the scan found no CPython yet.
    ASSERT_TRUE(wait_for(
        [&] {
            std::error_code ec;
            return fs::read_symlink("/proc/" + std::to_string(inside) + "/exe", ec).filename() == "python3.11";
        },
        30));
    usleep(300000);
    std::string agent = base + "/agent";
    fs::create_directories(agent);
    std::string out = dir + "/ns.json";
    std::vector<std::string> argv{"sh", "-c", "echo $$ > '" + agent + "/cgroup.procs' && exec unshare --cgroup \"$@\"", "sh",
                                  pybpfprof_bin(), "-o", out, "-r", "199", "--no-summary", "--cgroup", rel + "/app", "-d", "2"};
    auto r = run(argv, 60);
    ASSERT_EQ(r.status, 0) << r.err;
    auto prof = read_speedscope(out);
    EXPECT_GT(samples_of(prof, inside), 0u) << names(prof) << r.err;
}

// The capabilities deploy/pybpfprof-agent.yaml's DaemonSet adds, read from the manifest (so
// the test follows it): "+bpf,+perfmon,..." for setpriv; those of `without` left out.
std::string daemonset_caps(const std::set<std::string>& without = {}) {
    std::istringstream in(read_file(source_dir() + "/deploy/pybpfprof-agent.yaml"));
    std::string line, caps;
    int lists = 0;
    for (; std::getline(in, line);) {
        const auto at = line.find("add: [");
        if (at == std::string::npos || line.find_first_not_of(' ') != at) continue;
        lists++;
        std::string item;
        std::istringstream items(line.substr(at + 6, line.find(']') - at - 6));
        while (std::getline(items, item, ',')) {
            item.erase(std::remove_if(item.begin(), item.end(), [](char c) { return c == '"' || c == ' '; }), item.end());
            std::transform(item.begin(), item.end(), item.begin(), [](unsigned char c) { return std::tolower(c); });
            if (!item.empty() && !without.count(item)) caps += (caps.empty() ? "+" : ",+") + item;
        }
    }
    EXPECT_EQ(lists, 1) << "the manifest's capabilities: one add: [...] line";
    return caps;
}

// The DaemonSet's capabilities, measured: BPF, PERFMON, SYS_PTRACE (to read other users'
// processes), SYS_ADMIN (to join the host's cgroup namespace) and SYS_RESOURCE (BPF memory
// before 5.11) profile a pod process of another user from a private cgroup namespace;
// without SYS_PTRACE, or SYS_ADMIN, the error says so.
TEST_F(Cgroups, AgentCapabilitiesAreEnough) {
    const std::string all = daemonset_caps();
    ASSERT_EQ(all, "+bpf,+perfmon,+sys_ptrace,+sys_admin,+sys_resource") << "the manifest changed: check the docs too";
    std::vector<std::string> nobody{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
    // The workload where nobody can read it: the source tree may be under /root (0700), the
    // test's temporary directory is 0700 too.
    const std::string open_dir = "/tmp/pbp-nobody-" + std::to_string(getpid());
    fs::create_directories(open_dir);
    fs::permissions(open_dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
    fs::copy_file(workload("cpu_split.py"), open_dir + "/cpu_split.py", fs::copy_options::overwrite_existing);
    struct Cleanup {
        std::string d;
        ~Cleanup() { std::error_code ec; fs::remove_all(d, ec); }
    } cleanup{open_dir};
    auto b = busy(90);  // outlives the three runs, however slow (killed at teardown)
    b[1] = open_dir + "/cpu_split.py";
    nobody.insert(nobody.end(), b.begin(), b.end());
    pid_t target = start_in(base + "/app", nobody);
    std::string agent = base + "/agent";
    fs::create_directories(agent);
    auto as_agent = [&](const std::string& caps, std::vector<std::string> args) {
        std::vector<std::string> argv{"sh", "-c", "echo $$ > '" + agent + "/cgroup.procs' && exec unshare --cgroup \"$@\"",
                                      "sh", "setpriv", "--bounding-set=-all," + caps, "--inh-caps=-all", "--",
                                      pybpfprof_bin(), "-r", "199", "--no-summary"};
        argv.insert(argv.end(), args.begin(), args.end());
        return run(argv, 60);
    };
    std::string out = dir + "/caps.json";
    auto r = as_agent(all, {"-o", out, "--cgroup", rel + "/app", "-d", "2"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_GT(samples_of(read_speedscope(out), target), 0u) << r.err;
    auto no_ptrace = as_agent(daemonset_caps({"sys_ptrace"}), {"-o", out, "--pid", std::to_string(target)});
    EXPECT_EQ(no_ptrace.status, 2) << no_ptrace.err;
    EXPECT_NE(no_ptrace.err.find("needs CAP_SYS_PTRACE"), std::string::npos) << no_ptrace.err;
    auto no_admin = as_agent(daemonset_caps({"sys_admin"}), {"-o", out, "--cgroup", rel + "/app", "-d", "1"});
    EXPECT_EQ(no_admin.status, 1) << no_admin.err;
    EXPECT_NE(no_admin.err.find("CAP_SYS_ADMIN"), std::string::npos) << no_admin.err;
    // SYS_RESOURCE is for kernels that charge BPF maps to RLIMIT_MEMLOCK (before 5.11), under
    // a hard limit (5.10's default is 64 KiB): there, without it, loading fails and says so.
    auto no_resource = as_agent(daemonset_caps({"sys_resource"}), {"-o", out, "--cgroup", rel + "/app", "-d", "1"});
    rlimit ml{};
    ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &ml), 0);
    if (kernel_older_than(kernel_release(), 5, 11) && ml.rlim_max != RLIM_INFINITY) {
        EXPECT_EQ(no_resource.status, 1) << no_resource.err;
        EXPECT_NE(no_resource.err.find("locked-memory limit"), std::string::npos) << no_resource.err;
        EXPECT_NE(no_resource.err.find("needs CAP_SYS_RESOURCE"), std::string::npos) << no_resource.err;
    } else {
        EXPECT_EQ(no_resource.status, 0) << kernel_release() << ": " << no_resource.err;
    }
}

// A Python in new PID and mount namespaces, chrooted into a debootstrap rootfs with its
// own interpreter: profiled by its host PID, with names and lines from inside the rootfs
// and its namespace PID and TID shown. (--propagation unchanged: nothing is mounted inside,
// and making / private fails where / is no mount point, e.g. in a chroot.)
TEST(Namespaces, PidAndMountNamespaceInARootfs) {
    PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
    std::string root = chroot_dir("bullseye");
    PBP_REQUIRE(fs::exists(root + "/usr/bin/python3.9"), "the bullseye rootfs is provisioned by tools/provision-pythons");
    std::string name = "pbp-ns-" + std::to_string(getpid()) + ".py";
    fs::copy_file(workload("cpu_split.py"), root + "/tmp/" + name, fs::copy_options::overwrite_existing);
    std::string dir = temp_dir();
    std::string out = dir + "/ns.json";
    auto r = run({pybpfprof_bin(), "-o", out, "-r", "199", "--no-summary", "--", "unshare", "--pid", "--mount", "--propagation", "unchanged", "--fork",
                  "chroot", root, "python3.9", "/tmp/" + name, "3"},
                 120);
    fs::remove(root + "/tmp/" + name);
    ASSERT_EQ(r.status, 0) << r.err;
    auto prof = read_speedscope(out);
    ASSERT_EQ(prof.threads.size(), 1u);
    // the host PID, and PID 1 inside its namespace
    EXPECT_NE(prof.threads[0].profile_name.find(", ns pid 1)"), std::string::npos) << prof.threads[0].profile_name;
    EXPECT_NE(prof.threads[0].profile_name.find(", ns tid 1)"), std::string::npos) << prof.threads[0].profile_name;
    size_t a = prof.count([](auto& s) { return has_frame(s, "hot_seventy"); });
    size_t b = prof.count([](auto& s) { return has_frame(s, "hot_thirty"); });
    ASSERT_GT(a + b, 200u) << r.err;
    EXPECT_NEAR(100.0 * a / (a + b), 70.0, 5.0);
    size_t placed = prof.count([&](auto& s) {
        for (auto& f : s)
            if (f.name == "hot_seventy") return f.file == "/tmp/" + name && f.line > 0;
        return false;
    });
    EXPECT_EQ(placed, a) << "file and line as the process sees them";
    EXPECT_NE(r.err.find("3.9."), std::string::npos) << "bullseye's own interpreter: " << r.err;
}

}  // namespace
}  // namespace pbp::test
