// Aggregator: ring-buffer sample records -> Profile. A fake stack map (counting lookups) and
// a Symbolizer without processes (every looked-up frame is then "[unknown: ...]"), plus one
// test with a live interpreter so fully resolved stacks are covered too. Thread names come
// from this very process (/proc/self/task/TID/comm, set with prctl).
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "engine/abi_names.h"
#include "engine/aggregator.h"
#include "targets/discovery.h"
#include "sys/procfs.h"
#include "engine/profile.h"
#include "engine/symbolizer.h"
#include "sys/target_memory.h"
#include "test_support.h"

namespace fs = std::filesystem;
using pbp::Aggregator;
using pbp::Frame;
using pbp::Profile;
using pbp::Symbolizer;

namespace {

// The BPF stacks map, as a std::map; counts lookups per id.
struct FakeStacks {
    std::map<uint64_t, pbp_stack> stacks;
    std::map<uint64_t, int> calls;

    void put(uint64_t id, uint32_t pid, const std::vector<pbp_frame>& leaf_first) {
        pbp_stack& s = stacks[id];
        std::memset(&s, 0, sizeof s);
        s.pid = pid;
        s.depth = static_cast<uint32_t>(leaf_first.size());
        for (size_t i = 0; i < leaf_first.size(); i++) s.frames[i] = leaf_first[i];
    }
    Aggregator::StackLookup lookup() {
        return [this](uint64_t id, pbp_stack& out) {
            calls[id]++;
            auto it = stacks.find(id);
            if (it == stacks.end()) return false;
            out = it->second;
            return true;
        };
    }
};

pbp_event sample(uint32_t pid, uint32_t tid, uint64_t ts, uint32_t cpu, uint64_t stack_id, uint16_t flags = 0,
                 uint16_t reason = 0) {
    pbp_event e{};
    e.type = PBP_EV_SAMPLE;
    e.pid = pid;
    e.tid = tid;
    e.ts_ns = ts;
    e.cpu = cpu;
    e.stack_id = stack_id;
    e.flags = flags;
    e.reason = reason;
    e.kind = PBP_KIND_CPU;
    e.weight_ns = 10'101'010;  // one period at 99 Hz
    return e;
}

// Frames of a profile stack, root first.
std::vector<Frame> frames_of(const Profile& p, uint32_t stack) {
    std::vector<Frame> v;
    for (uint32_t f : p.stacks.at(stack)) v.push_back(p.frames.at(f));
    return v;
}

std::string dump(const std::vector<Frame>& fs) {
    std::string s;
    for (auto& f : fs) s += "  " + f.name + (f.synthetic ? " (synthetic)" : "") + "\n";
    return s;
}

// A pid that does not exist (above pid_max).
uint32_t absent_pid() {
    long pid_max = 4194304;
    std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
    return static_cast<uint32_t>(pid_max + 7);
}

pbp::PythonTarget fake_target(pid_t pid) {
    pbp::PythonTarget t;
    t.pid = pid;
    t.interp_path = "/usr/bin/python3.11";
    t.layout.version = pbp::cpython::Version::from_hex(0x030B02F0);
    return t;
}

struct Fixture {
    Profile profile;
    Symbolizer sym;
    FakeStacks fake;
    Aggregator agg{profile, sym, fake.lookup()};
};

// ---- samples without a stack ---------------------------------------------------------------

TEST(Aggregator, NoStackSamplesBecomeOneReasonFrame) {
    Fixture F;
    const uint32_t pid = absent_pid(), tid = pid + 1;
    std::set<std::string> labels;
    uint64_t ts = 1000;
    for (uint32_t r = PBP_ERR_NO_INTERPRETER; r < PBP_REASON_COUNT; r++) {
        std::string label = pbp::reason_label(r);
        EXPECT_NE(label, "unknown") << "reason " << r << " has no label";
        EXPECT_FALSE(label.empty());
        labels.insert(label);
        // twice each: the same synthetic stack, counted twice
        F.agg.on_sample(sample(pid, tid, ts++, 1, 0, 0, static_cast<uint16_t>(r)));
        F.agg.on_sample(sample(pid, tid, ts++, 1, 0, 0, static_cast<uint16_t>(r)));
    }
    EXPECT_EQ(labels.size(), static_cast<size_t>(PBP_REASON_COUNT - 1)) << "labels must be distinct";
    EXPECT_STREQ(pbp::reason_label(PBP_REASON_COUNT), "unknown");
    EXPECT_STREQ(pbp::reason_label(0xffff), "unknown");
    EXPECT_TRUE(F.fake.calls.empty()) << "stack id 0 must never be looked up";

    auto& th = F.profile.processes.at(pid).threads.at(tid);
    ASSERT_EQ(th.samples.size(), 2u * (PBP_REASON_COUNT - 1));
    for (uint32_t r = PBP_ERR_NO_INTERPRETER; r < PBP_REASON_COUNT; r++) {
        const auto& s1 = th.samples[2 * (r - 1)];
        const auto& s2 = th.samples[2 * (r - 1) + 1];
        EXPECT_EQ(s1.stack, s2.stack);
        auto fr = frames_of(F.profile, s1.stack);
        ASSERT_EQ(fr.size(), 1u) << dump(fr);
        EXPECT_EQ(fr[0].name, std::string("[") + pbp::reason_label(r) + "]");
        EXPECT_TRUE(fr[0].synthetic);
        EXPECT_EQ(fr[0].file, "");
        EXPECT_EQ(fr[0].line, 0);
        EXPECT_EQ(F.profile.run.unresolved[pbp::reason_label(r)], 2u) << pbp::reason_label(r);
    }
    EXPECT_EQ(F.profile.unresolved_total(), 2u * (PBP_REASON_COUNT - 1));
    EXPECT_EQ(F.profile.run.truncated, 0u);
    EXPECT_EQ(F.profile.total_samples(), 2u * (PBP_REASON_COUNT - 1));
}

TEST(Aggregator, LookupFailureIsAnEvictedStack) {
    Fixture F;
    const uint32_t pid = absent_pid();
    F.agg.on_sample(sample(pid, pid, 10, 0, 0xdeadbeef));
    EXPECT_EQ(F.fake.calls[0xdeadbeef], 1);
    auto& th = F.profile.processes.at(pid).threads.at(pid);
    ASSERT_EQ(th.samples.size(), 1u);
    auto fr = frames_of(F.profile, th.samples[0].stack);
    ASSERT_EQ(fr.size(), 1u) << dump(fr);
    EXPECT_EQ(fr[0].name, "[stack evicted before it was read]");
    EXPECT_TRUE(fr[0].synthetic);
    EXPECT_EQ(F.profile.run.unresolved["stack evicted before it was read"], 1u);
    EXPECT_EQ(F.profile.unresolved_total(), 1u);
}

// ---- looked-up stacks ----------------------------------------------------------------------

TEST(Aggregator, UnresolvableFramesAreCountedOncePerSample) {
    Fixture F;
    const uint32_t pid = absent_pid();
    F.fake.put(5, pid, {{0x1000, 1, 11}, {0x2000, 2, 22}, {0x3000, 3, 33}});
    F.agg.on_sample(sample(pid, pid, 10, 0, 5));
    F.agg.on_sample(sample(pid, pid, 20, 0, 5));
    auto& th = F.profile.processes.at(pid).threads.at(pid);
    ASSERT_EQ(th.samples.size(), 2u);
    EXPECT_EQ(th.samples[0].stack, th.samples[1].stack);
    auto fr = frames_of(F.profile, th.samples[0].stack);
    ASSERT_EQ(fr.size(), 3u) << dump(fr);
    for (auto& f : fr) {
        EXPECT_TRUE(f.synthetic);
        EXPECT_EQ(f.name, "[unknown: process no longer tracked]");
    }
    // one per sample, not one per frame
    EXPECT_EQ(F.profile.run.unresolved["process no longer tracked"], 2u);
    EXPECT_EQ(F.profile.unresolved_total(), 2u);
}

TEST(Aggregator, TruncatedAddsARootMostMarker) {
    Fixture F;
    const uint32_t pid = absent_pid();
    F.fake.put(7, pid, {{0x1000, 1, 11}, {0x2000, 2, 22}});
    F.agg.on_sample(sample(pid, pid, 10, 0, 7, PBP_F_TRUNCATED));
    EXPECT_EQ(F.profile.run.truncated, 1u);
    auto& th = F.profile.processes.at(pid).threads.at(pid);
    ASSERT_EQ(th.samples.size(), 1u);
    auto fr = frames_of(F.profile, th.samples[0].stack);
    ASSERT_EQ(fr.size(), 3u) << dump(fr);
    EXPECT_EQ(fr[0].name, "[truncated]");
    EXPECT_TRUE(fr[0].synthetic);
    EXPECT_EQ(fr[1].name, "[unknown: process no longer tracked]");
    EXPECT_EQ(fr[2].name, "[unknown: process no longer tracked]");
    // the cached stack id keeps its marker, and every truncated sample is counted
    F.agg.on_sample(sample(pid, pid, 20, 0, 7, PBP_F_TRUNCATED));
    EXPECT_EQ(F.profile.run.truncated, 2u);
    EXPECT_EQ(th.samples[1].stack, th.samples[0].stack);
    EXPECT_EQ(F.fake.calls[7], 1);
}

TEST(Aggregator, PartialAddsARootMostMarkerAndIsUnresolved) {
    Fixture F;
    const uint32_t pid = absent_pid();
    F.fake.put(9, pid, {{0x1000, 1, 11}});
    F.agg.on_sample(sample(pid, pid, 10, 3, 9, PBP_F_PARTIAL, PBP_ERR_READ_FRAME));
    auto& th = F.profile.processes.at(pid).threads.at(pid);
    ASSERT_EQ(th.samples.size(), 1u);
    auto fr = frames_of(F.profile, th.samples[0].stack);
    ASSERT_EQ(fr.size(), 2u) << dump(fr);
    EXPECT_EQ(fr[0].name, std::string("[partial stack: ") + pbp::reason_label(PBP_ERR_READ_FRAME) + "]");
    EXPECT_TRUE(fr[0].synthetic);
    EXPECT_EQ(fr[1].name, "[unknown: process no longer tracked]");
    const std::string key = std::string("partial stack: ") + pbp::reason_label(PBP_ERR_READ_FRAME);
    EXPECT_EQ(F.profile.run.unresolved[key], 1u);
    // counted under the partial reason only, not twice
    EXPECT_EQ(F.profile.unresolved_total(), 1u);
    EXPECT_EQ(F.profile.run.truncated, 0u);

    F.agg.on_sample(sample(pid, pid, 11, 3, 9, PBP_F_PARTIAL, PBP_ERR_READ_FRAME));
    EXPECT_EQ(F.profile.run.unresolved[key], 2u);
    EXPECT_EQ(F.fake.calls[9], 1);
}

// The stack id is a hash of the frames only (see bpf/pybpfprof.bpf.c): the flags are not in
// it. A stack of exactly max_depth frames and a deeper one with the same leaf-most frames
// share an id, as do a complete stack and a partial one that stopped right after the same
// frames. The marker must follow each sample's own flags, not the first sample's.
TEST(Aggregator, FlagsOfEachSampleAreHonouredForACachedStackId) {
    Fixture F;
    const uint32_t pid = absent_pid();
    F.fake.put(13, pid, {{0x1000, 1, 11}, {0x2000, 2, 22}});
    F.agg.on_sample(sample(pid, pid, 10, 0, 13));                   // complete
    F.agg.on_sample(sample(pid, pid, 20, 0, 13, PBP_F_TRUNCATED));  // deeper: truncated
    F.agg.on_sample(sample(pid, pid, 30, 0, 13, PBP_F_PARTIAL, PBP_ERR_READ_CODE));
    auto& th = F.profile.processes.at(pid).threads.at(pid);
    ASSERT_EQ(th.samples.size(), 3u);
    auto complete = frames_of(F.profile, th.samples[0].stack);
    auto truncated = frames_of(F.profile, th.samples[1].stack);
    auto partial = frames_of(F.profile, th.samples[2].stack);
    ASSERT_EQ(complete.size(), 2u) << dump(complete);
    EXPECT_NE(complete[0].name, "[truncated]");
    ASSERT_FALSE(truncated.empty());
    EXPECT_EQ(truncated[0].name, "[truncated]") << dump(truncated);
    ASSERT_FALSE(partial.empty());
    EXPECT_EQ(partial[0].name, std::string("[partial stack: ") + pbp::reason_label(PBP_ERR_READ_CODE) + "]")
        << dump(partial);
    EXPECT_EQ(F.profile.run.unresolved[std::string("partial stack: ") + pbp::reason_label(PBP_ERR_READ_CODE)],
              1u);
}

TEST(Aggregator, StackIdLookedUpOncePerPidAndAgainAfterExec) {
    Fixture F;
    const uint32_t me = static_cast<uint32_t>(getpid());
    const uint32_t other = absent_pid();
    F.fake.put(42, me, {{0x1000, 1, 11}});
    F.agg.add_process(fake_target(static_cast<pid_t>(me)));
    for (int i = 0; i < 5; i++) F.agg.on_sample(sample(me, me, 100 + i, 0, 42));
    EXPECT_EQ(F.fake.calls[42], 1) << "the same stack id must be read from the map once";

    // Another process: its own cache (ids include the tgid in BPF, but never trust that).
    F.agg.on_sample(sample(other, other, 200, 0, 42));
    F.agg.on_sample(sample(other, other, 201, 0, 42));
    EXPECT_EQ(F.fake.calls[42], 2);

    // The process exec'd (registered again): its old ids mean nothing now.
    F.agg.add_process(fake_target(static_cast<pid_t>(me)));
    F.agg.on_sample(sample(me, me, 300, 0, 42));
    F.agg.on_sample(sample(me, me, 301, 0, 42));
    EXPECT_EQ(F.fake.calls[42], 3);
    // the other process's cache was left alone
    F.agg.on_sample(sample(other, other, 302, 0, 42));
    EXPECT_EQ(F.fake.calls[42], 3);

    EXPECT_EQ(F.profile.processes.at(me).threads.at(me).samples.size(), 7u);
    EXPECT_EQ(F.profile.processes.at(other).threads.at(other).samples.size(), 3u);
    EXPECT_EQ(F.profile.total_samples(), 10u);

    F.agg.mark_exited(static_cast<pid_t>(me));
    EXPECT_TRUE(F.profile.processes.at(me).exited);
    EXPECT_FALSE(F.profile.processes.at(other).exited);
}

TEST(Aggregator, ProcessMetadataFromAddProcess) {
    Fixture F;
    pid_t me = getpid();
    auto t = fake_target(me);
    F.agg.add_process(t);
    auto& p = F.profile.processes.at(static_cast<uint32_t>(me));
    EXPECT_EQ(p.pid, static_cast<uint32_t>(me));
    EXPECT_EQ(p.comm, pbp::procfs::comm(me));
    EXPECT_FALSE(p.comm.empty());
    EXPECT_EQ(p.cmdline, pbp::procfs::cmdline(me));
    EXPECT_NE(p.cmdline.find("pbp_unit_tests"), std::string::npos) << p.cmdline;
    EXPECT_EQ(p.exe, pbp::procfs::exe(me));
    EXPECT_EQ(p.python, t.describe());
    EXPECT_FALSE(p.exited);
    EXPECT_EQ(p.ns_pid, static_cast<uint32_t>(me));
    F.agg.mark_exited(me);
    EXPECT_TRUE(p.exited);
    F.agg.add_process(t);  // exec'd: alive again
    EXPECT_FALSE(p.exited);
}

TEST(Aggregator, SamplesKeepTimestampsCpuAndOrderPerThread) {
    Fixture F;
    const uint32_t pid = absent_pid();
    const uint32_t t1 = pid + 1, t2 = pid + 2;
    // arrival order across threads need not be time order; per thread it is
    F.agg.on_sample(sample(pid, t1, 500, 2, 0, 0, PBP_ERR_NO_FRAME));
    F.agg.on_sample(sample(pid, t2, 300, 5, 0, 0, PBP_ERR_NO_TSTATE));
    F.agg.on_sample(sample(pid, t1, 600, 3, 0, 0, PBP_ERR_NO_FRAME));
    F.agg.on_sample(sample(pid, t2, 900, 5, 0, 0, PBP_ERR_NO_FRAME));
    F.agg.on_sample(sample(pid, t1, 700, 2, 0, 0, PBP_ERR_NO_TSTATE));

    auto& p = F.profile.processes.at(pid);
    EXPECT_EQ(p.pid, pid);
    EXPECT_EQ(p.first_sample_ns, 300u);
    EXPECT_EQ(p.last_sample_ns, 900u);
    ASSERT_EQ(p.threads.size(), 2u);
    auto& a = p.threads.at(t1);
    auto& b = p.threads.at(t2);
    EXPECT_EQ(a.tid, t1);
    EXPECT_EQ(b.tid, t2);
    EXPECT_EQ(a.name, "thread") << "a thread without /proc entry gets a placeholder name";
    ASSERT_EQ(a.samples.size(), 3u);
    ASSERT_EQ(b.samples.size(), 2u);
    EXPECT_EQ(a.samples[0].ts_ns, 500u);
    EXPECT_EQ(a.samples[1].ts_ns, 600u);
    EXPECT_EQ(a.samples[2].ts_ns, 700u);
    EXPECT_EQ(a.samples[0].cpu, 2u);
    EXPECT_EQ(a.samples[1].cpu, 3u);
    EXPECT_EQ(a.samples[2].cpu, 2u);
    EXPECT_EQ(b.samples[0].ts_ns, 300u);
    EXPECT_EQ(b.samples[1].ts_ns, 900u);
    EXPECT_EQ(b.samples[0].cpu, 5u);
    auto name_of = [&](const pbp::Sample& s) { return frames_of(F.profile, s.stack).at(0).name; };
    EXPECT_EQ(name_of(a.samples[0]), std::string("[") + pbp::reason_label(PBP_ERR_NO_FRAME) + "]");
    EXPECT_EQ(name_of(a.samples[2]), std::string("[") + pbp::reason_label(PBP_ERR_NO_TSTATE) + "]");
    EXPECT_EQ(a.samples[0].stack, b.samples[1].stack);
    EXPECT_EQ(F.profile.total_threads(), 2u);

    // An earlier timestamp arriving late still moves first_sample_ns.
    F.agg.on_sample(sample(pid, t2, 250, 0, 0, 0, PBP_ERR_NO_FRAME));
    EXPECT_EQ(p.first_sample_ns, 250u);
    EXPECT_EQ(p.last_sample_ns, 900u);
}

// ---- thread names --------------------------------------------------------------------------

std::string thread_name_now() {
    char buf[32] = {};
    prctl(PR_GET_NAME, buf, 0, 0, 0);
    return buf;
}

// A thread of this process that renames itself on request and reports its tid.
class NamedThread {
public:
    explicit NamedThread(const std::string& name) {
        th_ = std::thread([this, name] {
            prctl(PR_SET_NAME, name.c_str(), 0, 0, 0);
            std::unique_lock<std::mutex> lk(mu_);
            tid_ = gettid();
            cv_.notify_all();
            for (;;) {
                cv_.wait(lk, [this] { return stop_ || !rename_.empty(); });
                if (stop_) return;
                prctl(PR_SET_NAME, rename_.c_str(), 0, 0, 0);
                rename_.clear();
                renamed_ = true;
                cv_.notify_all();
            }
        });
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [this] { return tid_ != 0; });
    }
    ~NamedThread() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        th_.join();
    }
    pid_t tid() const { return tid_; }
    void rename(const std::string& n) {
        std::unique_lock<std::mutex> lk(mu_);
        renamed_ = false;
        rename_ = n;
        cv_.notify_all();
        cv_.wait(lk, [this] { return renamed_; });
    }

private:
    std::thread th_;
    std::mutex mu_;
    std::condition_variable cv_;
    pid_t tid_ = 0;
    std::string rename_;
    bool renamed_ = false, stop_ = false;
};

TEST(Aggregator, ThreadNamesFromProcAndRefreshed) {
    Fixture F;
    const pid_t me = getpid();
    F.agg.add_process(fake_target(me));

    // The main thread (tid == pid), named with prctl.
    struct Restore {
        std::string name = thread_name_now();
        ~Restore() { prctl(PR_SET_NAME, name.c_str(), 0, 0, 0); }
    } restore;
    prctl(PR_SET_NAME, "pbp-main-x", 0, 0, 0);
    ASSERT_EQ(gettid(), me) << "gtest runs tests on the main thread";
    F.agg.on_sample(sample(me, gettid(), 10, 0, 0, 0, PBP_ERR_NO_FRAME));

    // Another thread (tid != pid).
    NamedThread worker("pbp-worker-1");
    ASSERT_NE(worker.tid(), me);
    ASSERT_EQ(pbp::procfs::thread_comm(me, worker.tid()), "pbp-worker-1");
    F.agg.on_sample(sample(me, worker.tid(), 20, 1, 0, 0, PBP_ERR_NO_FRAME));

    auto& p = F.profile.processes.at(me);
    auto& main_t = p.threads.at(me);
    auto& work_t = p.threads.at(worker.tid());
    EXPECT_EQ(main_t.name, "pbp-main-x");
    EXPECT_EQ(work_t.name, "pbp-worker-1");
    EXPECT_EQ(main_t.ns_tid, static_cast<uint32_t>(me));
    EXPECT_EQ(work_t.ns_tid, static_cast<uint32_t>(worker.tid()));

    // Renamed later: not picked up by a further sample, but by refresh_thread_names().
    worker.rename("pbp-renamed");
    prctl(PR_SET_NAME, "pbp-main-y", 0, 0, 0);
    F.agg.on_sample(sample(me, worker.tid(), 30, 1, 0, 0, PBP_ERR_NO_FRAME));
    EXPECT_EQ(work_t.name, "pbp-worker-1");
    F.agg.refresh_thread_names();
    EXPECT_EQ(work_t.name, "pbp-renamed");
    EXPECT_EQ(main_t.name, "pbp-main-y");

    // Exited processes keep the names they had.
    F.agg.mark_exited(me);
    worker.rename("pbp-after-exit");
    F.agg.refresh_thread_names();
    EXPECT_EQ(work_t.name, "pbp-renamed");
}

TEST(Aggregator, RefreshKeepsNamesOfThreadsThatAreGone) {
    Fixture F;
    const pid_t me = getpid();
    F.agg.add_process(fake_target(me));
    pid_t tid;
    {
        NamedThread worker("pbp-shortlived");
        tid = worker.tid();
        F.agg.on_sample(sample(me, tid, 10, 0, 0, 0, PBP_ERR_NO_FRAME));
    }
    // Joined: /proc/self/task/TID is gone (give the kernel a moment to reap it).
    for (int i = 0; i < 200 && fs::exists("/proc/" + std::to_string(me) + "/task/" + std::to_string(tid)); i++)
        usleep(5000);
    F.agg.refresh_thread_names();
    EXPECT_EQ(F.profile.processes.at(me).threads.at(tid).name, "pbp-shortlived");
}

// ---- with a live interpreter: fully resolved stacks ----------------------------------------

TEST(AggregatorLive, ResolvedStacksRootFirstWithMarkers) {
    std::error_code ec;
    PBP_REQUIRE(fs::exists("/usr/bin/python3.11", ec), "host /usr/bin/python3.11 missing");
    std::string script = pbp::test::tool_path("unit_symbolizer_target.py");
    pbp::test::Reporter c({"/usr/bin/python3.11", script, pbp::test::temp_dir() + "/never"});
    ASSERT_TRUE(c.read_until("ready", 30)) << c.err();
    const std::string& out = c.out();
    struct Code {
        uint64_t addr;
        uint32_t instr;
        int line;
    };
    std::map<std::string, Code> code;
    std::istringstream is(out);
    for (std::string l; std::getline(is, l);) {
        std::istringstream ls(l);
        std::string kind, label;
        Code k{};
        int first;
        if (ls >> kind >> label && kind == "code" && ls >> k.addr >> first >> k.instr >> k.line) code[label] = k;
    }
    ASSERT_TRUE(code.count("method") && code.count("modfunc") && code.count("module")) << out;

    pbp::Discoverer d;
    auto r = d.discover(c.pid());
    ASSERT_EQ(r.status, pbp::Discovery::Python) << r.reason;
    pbp::ProcessMemory mem(c.pid());
    auto frame = [&](const Code& k) {
        uint8_t win[PBP_WINDOW] = {};
        size_t len = r.target->layout.bpf.code_read_len;
        EXPECT_TRUE(mem.read(k.addr, win, len));
        return pbp_frame{k.addr, k.instr, Symbolizer::code_checksum(r.target->layout.bpf, win, len, &mem)};
    };

    Fixture F;
    const uint32_t pid = static_cast<uint32_t>(c.pid());
    F.sym.add_process(c.pid(), r.target->layout, r.target->code_type_addr);
    F.agg.add_process(*r.target);
    const std::vector<pbp_frame> leaf_first = {frame(code["method"]), frame(code["modfunc"]), frame(code["module"])};
    F.fake.put(1, pid, leaf_first);
    F.fake.put(2, pid, leaf_first);  // same frames, another id (e.g. a deeper stack)
    F.agg.on_sample(sample(pid, pid, 1000, 0, 1));
    F.agg.on_sample(sample(pid, pid, 2000, 1, 2, PBP_F_TRUNCATED));

    auto& p = F.profile.processes.at(pid);
    EXPECT_EQ(p.python, r.target->describe());
    EXPECT_NE(p.cmdline.find("unit_symbolizer_target.py"), std::string::npos) << p.cmdline;
    auto& th = p.threads.at(pid);
    EXPECT_EQ(th.name, pbp::procfs::thread_comm(c.pid(), c.pid()));
    ASSERT_EQ(th.samples.size(), 2u);

    auto full = frames_of(F.profile, th.samples[0].stack);
    ASSERT_EQ(full.size(), 3u) << dump(full);
    EXPECT_EQ(full[0].name, "<module>");
    EXPECT_EQ(full[0].line, code["module"].line);
    EXPECT_EQ(full[1].name, "module_function");
    EXPECT_EQ(full[1].line, code["modfunc"].line);
    EXPECT_EQ(full[2].name, "Klass.method");
    EXPECT_EQ(full[2].line, code["method"].line);
    EXPECT_EQ(full[2].file, script);
    for (auto& f : full) EXPECT_FALSE(f.synthetic);

    auto trunc = frames_of(F.profile, th.samples[1].stack);
    ASSERT_EQ(trunc.size(), 4u) << dump(trunc);
    EXPECT_EQ(trunc[0].name, "[truncated]");
    EXPECT_EQ(std::vector<Frame>(trunc.begin() + 1, trunc.end()), full);

    // Resolved stacks are not "unresolved"; the truncated one is counted as truncated.
    EXPECT_EQ(F.profile.unresolved_total(), 0u);
    EXPECT_TRUE(F.profile.run.unresolved.empty());
    EXPECT_EQ(F.profile.run.truncated, 1u);
    EXPECT_EQ(p.first_sample_ns, 1000u);
    EXPECT_EQ(p.last_sample_ns, 2000u);
}

// A stack whose first read did not match what BPF saw (a code object caught mid-change) is
// read again when its id comes back; once it resolves, the samples already charged to the
// unresolved stack move over and stop counting as unresolved.
TEST(AggregatorLive, TransientlyUnresolvedStackIsReadAgainAndEarlierSamplesMove) {
    std::error_code ec;
    PBP_REQUIRE(fs::exists("/usr/bin/python3.11", ec), "host /usr/bin/python3.11 missing");
    std::string script = pbp::test::tool_path("unit_symbolizer_target.py");
    pbp::test::Reporter c({"/usr/bin/python3.11", script, pbp::test::temp_dir() + "/never"});
    ASSERT_TRUE(c.read_until("ready", 30)) << c.err();
    uint64_t addr = 0;
    uint32_t instr = 0;
    std::istringstream is(c.out());
    for (std::string l; std::getline(is, l);) {
        std::istringstream ls(l);
        std::string kind, label;
        int first, line;
        if (ls >> kind >> label && kind == "code" && label == "modfunc") ls >> addr >> first >> instr >> line;
    }
    ASSERT_NE(addr, 0u) << c.out();
    pbp::Discoverer d;
    auto r = d.discover(c.pid());
    ASSERT_EQ(r.status, pbp::Discovery::Python) << r.reason;
    pbp::ProcessMemory mem(c.pid());
    uint8_t win[PBP_WINDOW] = {};
    size_t len = r.target->layout.bpf.code_read_len;
    ASSERT_TRUE(mem.read(addr, win, len));
    const uint32_t csum = Symbolizer::code_checksum(r.target->layout.bpf, win, len, &mem);

    Fixture F;
    const uint32_t pid = static_cast<uint32_t>(c.pid());
    F.sym.add_process(c.pid(), r.target->layout, r.target->code_type_addr);
    F.agg.add_process(*r.target);
    F.fake.put(7, pid, {{addr, instr, csum ^ 1}});  // as read mid-change: no match
    F.agg.on_sample(sample(pid, pid, 1000, 0, 7));
    F.agg.on_sample(sample(pid, pid, 1100, 0, 7, PBP_F_TRUNCATED));
    auto& th = F.profile.processes.at(pid).threads.at(pid);
    auto first = frames_of(F.profile, th.samples[0].stack);
    ASSERT_EQ(first.size(), 1u) << dump(first);
    EXPECT_EQ(first[0].name, std::string("[unknown: ") + Symbolizer::kFreed + "]");
    EXPECT_EQ(F.profile.run.unresolved[Symbolizer::kFreed], 2u);

    F.fake.put(7, pid, {{addr, instr, csum}});  // the same id now reads cleanly
    F.agg.on_sample(sample(pid, pid, 1200, 0, 7));
    ASSERT_EQ(th.samples.size(), 3u);
    for (auto& s : th.samples) {
        auto fr = frames_of(F.profile, s.stack);
        ASSERT_FALSE(fr.empty());
        EXPECT_EQ(fr.back().name, "module_function") << dump(fr);
        EXPECT_FALSE(fr.back().synthetic);
    }
    EXPECT_EQ(frames_of(F.profile, th.samples[1].stack).front().name, "[truncated]");
    EXPECT_EQ(th.samples[0].stack, th.samples[2].stack);
    EXPECT_EQ(F.profile.unresolved_total(), 0u);
    EXPECT_TRUE(F.profile.run.unresolved.empty());

    // A stack that stays unresolved is read again a bounded number of times, then left alone.
    F.fake.put(8, pid, {{addr, instr, csum ^ 2}});
    for (int i = 0; i < 50; i++) F.agg.on_sample(sample(pid, pid, 2000 + i, 0, 8));
    EXPECT_LE(F.fake.calls[8], 10);
    EXPECT_EQ(F.profile.run.unresolved[Symbolizer::kFreed], 50u);
}

}  // namespace
