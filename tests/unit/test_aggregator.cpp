// The engine's sample path, part by part: StackStore (BPF stack ids -> interned stacks, shared
// by every session), Aggregator (one session's samples), ProcessRegistry (process and thread
// metadata) and make_snapshot (a self-contained copy of a session's profile). The Fixture
// drives them as the Engine does. A fake stack map (counting lookups) and a Symbolizer
// without processes (every looked-up frame is then "[unknown: ...]"), plus tests with a live
// interpreter so fully resolved stacks are covered too. Thread names come from this very
// process (/proc/self/task/TID/comm, set with prctl).
#include <sys/prctl.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "engine/abi_names.h"
#include "engine/aggregator.h"
#include "engine/process_registry.h"
#include "engine/profile.h"
#include "engine/snapshot.h"
#include "engine/stack_store.h"
#include "engine/symbolizer.h"
#include "summary/text_summary.h"
#include "sys/procfs.h"
#include "sys/target_memory.h"
#include "targets/discovery.h"
#include "test_support.h"

namespace fs = std::filesystem;
using pbp::Aggregator;
using pbp::Frame;
using pbp::ProcessRegistry;
using pbp::Profile;
using pbp::SampleKind;
using pbp::StackStore;
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
    StackStore::StackLookup lookup() {
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

// Frames of a StackStore stack (what an Aggregator's samples index), root first.
std::vector<Frame> frames_of(const StackStore& s, uint32_t stack) {
    std::vector<Frame> v;
    for (uint32_t f : s.stacks().at(stack)) v.push_back(s.frames().at(f));
    return v;
}

std::string dump(const std::vector<Frame>& fs) {
    std::string s;
    for (auto& f : fs) s += "  " + f.name + (f.synthetic ? " (synthetic)" : "") + "\n";
    return s;
}

// Everything a snapshot holds, as text: two snapshots are equal when their texts are.
std::string describe(const Profile& p) {
    std::ostringstream o;
    o << "truncated " << p.run.truncated << " unresolved";
    for (auto& [k, v] : p.run.unresolved) o << " [" << k << "]=" << v;
    o << "\n";
    for (auto& [pid, pr] : p.processes) {
        o << "pid " << pid << "/" << pr.pid << " ns " << pr.ns_pid << " comm " << pr.comm << " cmd " << pr.cmdline
          << " exe " << pr.exe << " py " << pr.python << " exited " << pr.exited << " first " << pr.first_sample_ns
          << " last " << pr.last_sample_ns << "\n";
        for (auto& [k, v] : pr.labels) o << " label " << k << "=" << v << "\n";
        for (auto& [tid, t] : pr.threads) {
            o << " tid " << tid << "/" << t.tid << " ns " << t.ns_tid << " name " << t.name << "\n";
            for (auto& s : t.samples) {
                o << "  " << s.ts_ns << " cpu " << s.cpu << " kind " << int(s.kind) << " w " << s.weight_ns << ":";
                for (auto& f : frames_of(p, s.stack))
                    o << " " << f.name << "|" << f.file << ":" << f.line << (f.synthetic ? "*" : "");
                o << "\n";
            }
        }
    }
    return o.str();
}

// A snapshot is self-contained and minimal: every index in range, every stack used by a
// sample and every frame by a stack (nothing of another session's samples).
::testing::AssertionResult self_contained(const Profile& p) {
    std::set<uint32_t> used_stacks, used_frames;
    for (auto& [pid, pr] : p.processes)
        for (auto& [tid, t] : pr.threads)
            for (auto& s : t.samples) {
                if (s.stack >= p.stacks.size())
                    return ::testing::AssertionFailure() << "stack " << s.stack << " out of range in pid " << pid;
                used_stacks.insert(s.stack);
            }
    for (uint32_t st : used_stacks)
        for (uint32_t f : p.stacks.at(st)) {
            if (f >= p.frames.size()) return ::testing::AssertionFailure() << "frame " << f << " out of range";
            used_frames.insert(f);
        }
    if (used_stacks.size() != p.stacks.size())
        return ::testing::AssertionFailure() << p.stacks.size() << " stacks, " << used_stacks.size() << " used";
    if (used_frames.size() != p.frames.size())
        return ::testing::AssertionFailure() << p.frames.size() << " frames, " << used_frames.size() << " used";
    return ::testing::AssertionSuccess();
}

std::set<std::string> frame_names(const Profile& p) {
    std::set<std::string> n;
    for (auto& f : p.frames.all()) n.insert(f.name);
    return n;
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
    t.exe = pbp::procfs::exe(pid);  // as discovery reads it
    t.interp_path = "/usr/bin/python3.11";
    t.layout.version = pbp::cpython::Version::from_hex(0x030B02F0);
    return t;
}

std::string reason_frame(uint32_t r) { return std::string("[") + pbp::reason_label(r) + "]"; }

// The engine's parts, driven as Engine does: one StackStore and one ProcessRegistry for all
// sessions; 'agg' is the first session, more come from new_session().
struct Fixture {
    Symbolizer sym;
    FakeStacks fake;
    StackStore store{sym, fake.lookup()};
    ProcessRegistry reg;
    Aggregator agg{store};
    std::vector<std::unique_ptr<Aggregator>> more;

    Aggregator& new_session(uint64_t interval_ns = 0) {
        return *more.emplace_back(std::make_unique<Aggregator>(store, interval_ns));
    }
    std::vector<Aggregator*> all_sessions() {
        std::vector<Aggregator*> v{&agg};
        for (auto& a : more) v.push_back(a.get());
        return v;
    }

    // A target registered (again, after an exec) with these sessions (default: agg).
    void add_process(const pbp::PythonTarget& t, std::initializer_list<Aggregator*> sessions = {},
                     std::map<std::string, std::string> labels = {}) {
        store.reset_process(t.pid);
        reg.add(t, std::move(labels));
        if (sessions.size() == 0) agg.add_process(t.pid);
        for (Aggregator* s : sessions) s->add_process(t.pid);
    }
    // One sample record, given to these sessions (default: agg); moves go to every session.
    void on_sample(const pbp_event& e, std::initializer_list<Aggregator*> sessions = {}) {
        uint32_t stack = store.stack_for(e);
        reg.on_sample(e.pid, e.tid);
        if (sessions.size() == 0) agg.on_sample(e, stack);
        for (Aggregator* s : sessions) s->on_sample(e, stack);
        if (auto moves = store.take_moves(); !moves.empty())
            for (Aggregator* s : all_sessions()) s->apply(moves);
    }
    void exited(pid_t pid) {
        reg.mark_exited(pid);
        store.forget_process(pid);
    }
    // pid exec'd another program (Engine::retire_exec, then forget_in_bpf): the one it ran
    // moves under key in the registry and in these sessions (default: every one).
    void exec(pid_t pid, uint32_t key, std::initializer_list<Aggregator*> sessions = {}) {
        reg.retire(static_cast<uint32_t>(pid), key);
        for (Aggregator* s : sessions.size() ? std::vector<Aggregator*>(sessions) : all_sessions())
            s->retire(static_cast<uint32_t>(pid), key);
        store.forget_process(pid);
    }
    Profile snap(const Aggregator& a) const { return make_snapshot(a.samples(), store, reg, pbp::RunInfo{}); }
    Profile snap() const { return snap(agg); }
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
        F.on_sample(sample(pid, tid, ts++, 1, 0, 0, static_cast<uint16_t>(r)));
        F.on_sample(sample(pid, tid, ts++, 1, 0, 0, static_cast<uint16_t>(r)));
    }
    EXPECT_EQ(labels.size(), static_cast<size_t>(PBP_REASON_COUNT - 1)) << "labels must be distinct";
    EXPECT_STREQ(pbp::reason_label(PBP_REASON_COUNT), "unknown");
    EXPECT_STREQ(pbp::reason_label(0xffff), "unknown");
    EXPECT_TRUE(F.fake.calls.empty()) << "stack id 0 must never be looked up";

    Profile P = F.snap();
    EXPECT_TRUE(self_contained(P));
    auto& th = P.processes.at(pid).threads.at(tid);
    ASSERT_EQ(th.samples.size(), 2u * (PBP_REASON_COUNT - 1));
    for (uint32_t r = PBP_ERR_NO_INTERPRETER; r < PBP_REASON_COUNT; r++) {
        const auto& s1 = th.samples[2 * (r - 1)];
        const auto& s2 = th.samples[2 * (r - 1) + 1];
        EXPECT_EQ(s1.stack, s2.stack);
        auto fr = frames_of(P, s1.stack);
        ASSERT_EQ(fr.size(), 1u) << dump(fr);
        EXPECT_EQ(fr[0].name, reason_frame(r));
        EXPECT_TRUE(fr[0].synthetic);
        EXPECT_EQ(fr[0].file, "");
        EXPECT_EQ(fr[0].line, 0);
        EXPECT_EQ(P.run.unresolved[pbp::reason_label(r)], 2u) << pbp::reason_label(r);
    }
    EXPECT_EQ(P.unresolved_total(), 2u * (PBP_REASON_COUNT - 1));
    EXPECT_EQ(P.run.truncated, 0u);
    EXPECT_EQ(P.total_samples(), 2u * (PBP_REASON_COUNT - 1));
    EXPECT_EQ(F.agg.sample_count(), 2u * (PBP_REASON_COUNT - 1));
}

TEST(Aggregator, LookupFailureIsAnEvictedStack) {
    Fixture F;
    const uint32_t pid = absent_pid();
    F.on_sample(sample(pid, pid, 10, 0, 0xdeadbeef));
    EXPECT_EQ(F.fake.calls[0xdeadbeef], 1);
    Profile P = F.snap();
    auto& th = P.processes.at(pid).threads.at(pid);
    ASSERT_EQ(th.samples.size(), 1u);
    auto fr = frames_of(P, th.samples[0].stack);
    ASSERT_EQ(fr.size(), 1u) << dump(fr);
    EXPECT_EQ(fr[0].name, "[stack evicted before it was read]");
    EXPECT_TRUE(fr[0].synthetic);
    EXPECT_EQ(P.run.unresolved["stack evicted before it was read"], 1u);
    EXPECT_EQ(P.unresolved_total(), 1u);
}

// ---- looked-up stacks ----------------------------------------------------------------------

TEST(Aggregator, UnresolvableFramesAreCountedOncePerSample) {
    Fixture F;
    const uint32_t pid = absent_pid();
    F.fake.put(5, pid, {{0x1000, 1, 11}, {0x2000, 2, 22}, {0x3000, 3, 33}});
    F.on_sample(sample(pid, pid, 10, 0, 5));
    F.on_sample(sample(pid, pid, 20, 0, 5));
    Profile P = F.snap();
    auto& th = P.processes.at(pid).threads.at(pid);
    ASSERT_EQ(th.samples.size(), 2u);
    EXPECT_EQ(th.samples[0].stack, th.samples[1].stack);
    auto fr = frames_of(P, th.samples[0].stack);
    ASSERT_EQ(fr.size(), 3u) << dump(fr);
    for (auto& f : fr) {
        EXPECT_TRUE(f.synthetic);
        EXPECT_EQ(f.name, "[unknown: process no longer tracked]");
    }
    // one per sample, not one per frame
    EXPECT_EQ(P.run.unresolved["process no longer tracked"], 2u);
    EXPECT_EQ(P.unresolved_total(), 2u);
}

TEST(Aggregator, TruncatedAddsARootMostMarker) {
    Fixture F;
    const uint32_t pid = absent_pid();
    F.fake.put(7, pid, {{0x1000, 1, 11}, {0x2000, 2, 22}});
    F.on_sample(sample(pid, pid, 10, 0, 7, PBP_F_TRUNCATED));
    {
        Profile P = F.snap();
        EXPECT_EQ(P.run.truncated, 1u);
        auto& th = P.processes.at(pid).threads.at(pid);
        ASSERT_EQ(th.samples.size(), 1u);
        auto fr = frames_of(P, th.samples[0].stack);
        ASSERT_EQ(fr.size(), 3u) << dump(fr);
        EXPECT_EQ(fr[0].name, "[truncated]");
        EXPECT_TRUE(fr[0].synthetic);
        EXPECT_EQ(fr[1].name, "[unknown: process no longer tracked]");
        EXPECT_EQ(fr[2].name, "[unknown: process no longer tracked]");
    }
    // the cached stack id keeps its marker, and every truncated sample is counted
    F.on_sample(sample(pid, pid, 20, 0, 7, PBP_F_TRUNCATED));
    Profile P = F.snap();
    EXPECT_EQ(P.run.truncated, 2u);
    auto& th = P.processes.at(pid).threads.at(pid);
    ASSERT_EQ(th.samples.size(), 2u);
    EXPECT_EQ(th.samples[1].stack, th.samples[0].stack);
    EXPECT_EQ(frames_of(P, th.samples[1].stack).at(0).name, "[truncated]");
    EXPECT_EQ(F.fake.calls[7], 1);
}

TEST(Aggregator, PartialAddsARootMostMarkerAndIsUnresolved) {
    Fixture F;
    const uint32_t pid = absent_pid();
    F.fake.put(9, pid, {{0x1000, 1, 11}});
    F.on_sample(sample(pid, pid, 10, 3, 9, PBP_F_PARTIAL, PBP_ERR_READ_FRAME));
    const std::string key = std::string("partial stack: ") + pbp::reason_label(PBP_ERR_READ_FRAME);
    {
        Profile P = F.snap();
        auto& th = P.processes.at(pid).threads.at(pid);
        ASSERT_EQ(th.samples.size(), 1u);
        auto fr = frames_of(P, th.samples[0].stack);
        ASSERT_EQ(fr.size(), 2u) << dump(fr);
        EXPECT_EQ(fr[0].name, "[" + key + "]");
        EXPECT_TRUE(fr[0].synthetic);
        EXPECT_EQ(fr[1].name, "[unknown: process no longer tracked]");
        EXPECT_EQ(P.run.unresolved[key], 1u);
        // counted under the partial reason only, not twice
        EXPECT_EQ(P.unresolved_total(), 1u);
        EXPECT_EQ(P.run.truncated, 0u);
    }
    F.on_sample(sample(pid, pid, 11, 3, 9, PBP_F_PARTIAL, PBP_ERR_READ_FRAME));
    Profile P = F.snap();
    EXPECT_EQ(P.run.unresolved[key], 2u);
    EXPECT_EQ(P.unresolved_total(), 2u);
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
    F.on_sample(sample(pid, pid, 10, 0, 13));                   // complete
    F.on_sample(sample(pid, pid, 20, 0, 13, PBP_F_TRUNCATED));  // deeper: truncated
    F.on_sample(sample(pid, pid, 30, 0, 13, PBP_F_PARTIAL, PBP_ERR_READ_CODE));
    Profile P = F.snap();
    auto& th = P.processes.at(pid).threads.at(pid);
    ASSERT_EQ(th.samples.size(), 3u);
    auto complete = frames_of(P, th.samples[0].stack);
    auto truncated = frames_of(P, th.samples[1].stack);
    auto partial = frames_of(P, th.samples[2].stack);
    ASSERT_EQ(complete.size(), 2u) << dump(complete);
    EXPECT_NE(complete[0].name, "[truncated]");
    ASSERT_FALSE(truncated.empty());
    EXPECT_EQ(truncated[0].name, "[truncated]") << dump(truncated);
    ASSERT_FALSE(partial.empty());
    EXPECT_EQ(partial[0].name, std::string("[partial stack: ") + pbp::reason_label(PBP_ERR_READ_CODE) + "]")
        << dump(partial);
    EXPECT_EQ(P.run.unresolved[std::string("partial stack: ") + pbp::reason_label(PBP_ERR_READ_CODE)], 1u);
    EXPECT_EQ(F.fake.calls[13], 1);
}

TEST(Aggregator, StackIdLookedUpOncePerPidAndAgainAfterExec) {
    Fixture F;
    const uint32_t me = static_cast<uint32_t>(getpid());
    const uint32_t other = absent_pid();
    F.fake.put(42, me, {{0x1000, 1, 11}});
    F.add_process(fake_target(static_cast<pid_t>(me)));
    for (int i = 0; i < 5; i++) F.on_sample(sample(me, me, 100 + i, 0, 42));
    EXPECT_EQ(F.fake.calls[42], 1) << "the same stack id must be read from the map once";

    // Another process: its own cache (ids include the tgid in BPF, but never trust that).
    F.on_sample(sample(other, other, 200, 0, 42));
    F.on_sample(sample(other, other, 201, 0, 42));
    EXPECT_EQ(F.fake.calls[42], 2);

    // The process exec'd (registered again): its old ids mean nothing now.
    F.add_process(fake_target(static_cast<pid_t>(me)));
    F.on_sample(sample(me, me, 300, 0, 42));
    F.on_sample(sample(me, me, 301, 0, 42));
    EXPECT_EQ(F.fake.calls[42], 3);
    // the other process's cache was left alone
    F.on_sample(sample(other, other, 302, 0, 42));
    EXPECT_EQ(F.fake.calls[42], 3);

    {
        Profile P = F.snap();
        EXPECT_EQ(P.processes.at(me).threads.at(me).samples.size(), 7u);
        EXPECT_EQ(P.processes.at(other).threads.at(other).samples.size(), 3u);
        EXPECT_EQ(P.total_samples(), 10u);
        EXPECT_FALSE(P.processes.at(me).exited);
    }

    F.exited(static_cast<pid_t>(me));
    Profile P = F.snap();
    EXPECT_TRUE(P.processes.at(me).exited);
    EXPECT_FALSE(P.processes.at(other).exited);
    EXPECT_EQ(P.total_samples(), 10u);
}

// A forked child of a target that exec'd another program before it ran Python of its own (a
// subprocess's child on its way to exec uname): what it was sampled doing is its parent's,
// under the parent's thread kForkedChildrenTid, and it is no process of its own in a session
// that has the parent (Engine::on_exec_or_fork). A sample of it whose runtime no longer
// reads was taken in the exec itself, after its memory was replaced: not start-up. A session
// without the parent keeps the child as an exec'd program of its own, as before.
TEST(Aggregator, AForkThatExecsBeforeRunningPythonIsItsParents) {
    const uint32_t parent = static_cast<uint32_t>(getpid()), c1 = absent_pid(), c2 = c1 + 1;
    Fixture F;
    Aggregator& no_parent = F.new_session();
    F.add_process(fake_target(static_cast<pid_t>(parent)));
    for (uint32_t c : {c1, c2}) {
        F.add_process(fake_target(static_cast<pid_t>(c)), {&F.agg, &no_parent});
        F.store.mark_forked(static_cast<pid_t>(c));
    }
    pbp_event in_exec = sample(c1, c1, 104, 0, 0, 0, PBP_ERR_NO_INTERPRETER);
    in_exec.runtime = PBP_RT_UNREADABLE;
    F.on_sample(sample(parent, parent, 100, 0, 0, 0, PBP_ERR_NO_FRAME));
    F.on_sample(sample(c2, c2, 103, 1, 0, 0, PBP_ERR_NO_FRAME), {&F.agg, &no_parent});
    F.on_sample(sample(c1, c1, 101, 0, 0, 0, PBP_ERR_NO_FRAME), {&F.agg, &no_parent});
    F.on_sample(in_exec, {&F.agg, &no_parent});
    F.on_sample(sample(parent, parent, 105, 0, 0, 0, PBP_ERR_NO_FRAME));
    uint32_t key = 0x80000000u;
    for (uint32_t c : {c1, c2}) {
        for (Aggregator* a : F.all_sessions()) a->fold_fork(c, parent);
        F.exec(static_cast<pid_t>(c), key++);
    }

    Profile P = F.snap();
    ASSERT_EQ(P.processes.size(), 1u) << "the children are not processes of their own";
    const auto& pp = P.processes.at(parent);
    ASSERT_EQ(pp.threads.size(), 2u);
    const auto& kids = pp.threads.at(pbp::kForkedChildrenTid);
    EXPECT_EQ(kids.name, "[forked children, until their exec]");
    ASSERT_EQ(kids.samples.size(), 3u);
    EXPECT_EQ(kids.samples[0].ts_ns, 101u) << "in time order";
    EXPECT_EQ(kids.samples[1].ts_ns, 103u);
    EXPECT_EQ(kids.samples[2].ts_ns, 104u);
    EXPECT_EQ(frames_of(P, kids.samples[2].stack).at(0).name, "[exec of another program]");
    EXPECT_EQ(P.run.unresolved.count("exec of another program"), 0u) << "what it is, not a problem";
    EXPECT_EQ(pp.threads.at(parent).samples.size(), 2u);
    EXPECT_EQ(pp.first_sample_ns, 100u);
    EXPECT_EQ(pp.last_sample_ns, 105u);
    EXPECT_EQ(P.total_samples(), 5u);
    EXPECT_NE(pbp::summary_line(P, "x").find(", 1 process, 2 threads,"), std::string::npos) << pbp::summary_line(P, "x");

    // Without the parent: each child is the program it ran until its exec, as any exec'd one.
    Profile N = F.snap(no_parent);
    EXPECT_EQ(N.processes.size(), 2u);
    EXPECT_EQ(N.processes.count(parent), 0u);
    EXPECT_EQ(N.total_samples(), 3u);

    // A process not found at a fork whose runtime does not read has not started yet.
    const uint32_t other = c2 + 1;
    F.add_process(fake_target(static_cast<pid_t>(other)));
    pbp_event early = sample(other, other, 200, 0, 0, 0, PBP_ERR_NO_INTERPRETER);
    early.runtime = PBP_RT_UNREADABLE;
    F.on_sample(early);
    Profile Q = F.snap();
    EXPECT_EQ(frames_of(Q, Q.processes.at(other).threads.at(other).samples.at(0).stack).at(0).name,
              "[interpreter start-up]");
}

// A target that exec'd another Python program (python a.py -> os.execv -> python b.py): the
// samples taken before the exec keep the command line, names and CPU of the program that took
// them, in an entry of their own (its key is not the pid; ProcessProfile::pid is), and the
// next program's start with none of them. A real exec, of a shell into sleep.
TEST(Aggregator, AnExecKeepsTheProgramItRanUnderAKeyOfItsOwn) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        execl("/bin/sh", "sh", "-c", "trap 'exec sleep 30' USR1; while :; do sleep 0.01; done", static_cast<char*>(nullptr));
        _exit(127);
    }
    auto wait_comm = [&](const std::string& want) {
        for (int i = 0; i < 500 && pbp::procfs::comm(child) != want; i++) usleep(10000);
        return pbp::procfs::comm(child);
    };
    ASSERT_EQ(wait_comm("sh"), "sh");
    // The shell is named at its exec, before it runs its trap: a USR1 sent before the trap is
    // set ends it (seen in a sanitized run under load). Its mask of caught signals says when.
    auto catches_usr1 = [&] {
        std::istringstream st(pbp::procfs::read_text("/proc/" + std::to_string(child) + "/status"));
        for (std::string line; std::getline(st, line);)
            if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGUSR1 - 1)) & 1;
        return 0ull;
    };
    for (int i = 0; i < 500 && !catches_usr1(); i++) usleep(10000);
    ASSERT_TRUE(catches_usr1()) << "the shell never set its USR1 trap";
    const std::string before_exe = pbp::procfs::exe(child);
    const uint32_t pid = static_cast<uint32_t>(child), key = 0x80000000u;
    Fixture F;
    Aggregator& idle = F.new_session();  // has the process, never got a sample of it
    F.add_process(fake_target(child), {&F.agg, &idle});
    for (uint64_t ts : {100, 101, 102}) F.on_sample(sample(pid, pid, ts, 0, 0, 0, PBP_ERR_NO_FRAME));
    F.on_sample(sample(pid, pid + 1, 103, 0, 0, 0, PBP_ERR_NO_FRAME));  // a thread of its, gone at the exec
    const std::string before_cmdline = F.reg.find(pid)->cmdline;
    ASSERT_NE(before_cmdline.find("trap"), std::string::npos) << before_cmdline;

    kill(child, SIGUSR1);
    ASSERT_EQ(wait_comm("sleep"), "sleep");
    F.exec(child, key);
    F.add_process(fake_target(child), {&F.agg, &idle});
    for (uint64_t ts : {200, 201}) F.on_sample(sample(pid, pid, ts, 0, 0, 0, PBP_ERR_NO_FRAME));

    Profile P = F.snap();
    ASSERT_EQ(P.processes.size(), 2u);
    const auto& old = P.processes.at(key);
    EXPECT_EQ(old.pid, pid);
    EXPECT_EQ(old.cmdline, before_cmdline);
    EXPECT_EQ(old.comm, "sh");
    EXPECT_EQ(old.exe, before_exe);
    EXPECT_NE(P.processes.at(pid).exe, before_exe);
    EXPECT_TRUE(old.exited) << "exec ended the program";
    ASSERT_EQ(old.threads.size(), 2u);
    EXPECT_EQ(old.threads.at(pid).name, "sh");
    EXPECT_EQ(old.threads.at(pid).samples.size(), 3u);
    EXPECT_EQ(old.first_sample_ns, 100u);
    EXPECT_EQ(old.last_sample_ns, 103u);
    const auto& now = P.processes.at(pid);
    EXPECT_EQ(now.pid, pid);
    EXPECT_EQ(now.cmdline, "sleep 30");
    EXPECT_EQ(now.comm, "sleep");
    EXPECT_FALSE(now.exited);
    ASSERT_EQ(now.threads.size(), 1u) << "the exec'd program has only the threads sampled since";
    EXPECT_EQ(now.threads.at(pid).name, "sleep") << "named anew after the exec";
    EXPECT_EQ(now.threads.at(pid).samples.size(), 2u);
    EXPECT_EQ(now.first_sample_ns, 200u);
    EXPECT_EQ(P.total_samples(), 6u);
    // One process, two programs.
    EXPECT_NE(pbp::summary_line(P, "x").find(", 1 process, 3 threads,"), std::string::npos) << pbp::summary_line(P, "x");

    // A session with no sample of the program keeps no entry for it.
    Profile I = F.snap(idle);
    EXPECT_EQ(I.processes.count(key), 0u);
    ASSERT_EQ(I.processes.count(pid), 1u);
    EXPECT_EQ(I.processes.at(pid).cmdline, "sleep 30");

    // Forgotten by its key (no session has it any more): the running program stays.
    F.reg.forget(key);
    EXPECT_EQ(F.reg.find(key), nullptr);
    ASSERT_NE(F.reg.find(pid), nullptr);
    EXPECT_EQ(F.reg.find(pid)->cmdline, "sleep 30");
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
}

TEST(Aggregator, ProcessMetadataFromAddProcess) {
    Fixture F;
    pid_t me = getpid();
    auto t = fake_target(me);
    F.add_process(t);
    auto check = [&](const pbp::ProcessProfile& p) {
        EXPECT_EQ(p.pid, static_cast<uint32_t>(me));
        EXPECT_EQ(p.comm, pbp::procfs::comm(me));
        EXPECT_FALSE(p.comm.empty());
        EXPECT_EQ(p.cmdline, pbp::procfs::cmdline(me));
        EXPECT_NE(p.cmdline.find("pbp_unit_tests"), std::string::npos) << p.cmdline;
        EXPECT_EQ(p.exe, pbp::procfs::exe(me));
        EXPECT_EQ(p.python, t.describe());
        EXPECT_EQ(p.ns_pid, static_cast<uint32_t>(me));
    };
    // Listed in the session's snapshot though never sampled, with the registry's metadata.
    {
        Profile P = F.snap();
        ASSERT_EQ(P.processes.count(static_cast<uint32_t>(me)), 1u);
        check(P.processes.at(static_cast<uint32_t>(me)));
        EXPECT_FALSE(P.processes.at(static_cast<uint32_t>(me)).exited);
        EXPECT_EQ(P.total_samples(), 0u);
    }
    const pbp::ProcessProfile* m = F.reg.find(static_cast<uint32_t>(me));
    ASSERT_NE(m, nullptr);
    check(*m);
    EXPECT_FALSE(m->exited);

    F.exited(me);
    EXPECT_TRUE(F.reg.find(static_cast<uint32_t>(me))->exited);
    EXPECT_TRUE(F.snap().processes.at(static_cast<uint32_t>(me)).exited);
    F.add_process(t);  // exec'd: alive again
    EXPECT_FALSE(F.reg.find(static_cast<uint32_t>(me))->exited);
    EXPECT_FALSE(F.snap().processes.at(static_cast<uint32_t>(me)).exited);
}

TEST(Aggregator, SamplesKeepTimestampsCpuAndOrderPerThread) {
    Fixture F;
    const uint32_t pid = absent_pid();
    const uint32_t t1 = pid + 1, t2 = pid + 2;
    // arrival order across threads need not be time order; per thread it is
    F.on_sample(sample(pid, t1, 500, 2, 0, 0, PBP_ERR_NO_FRAME));
    F.on_sample(sample(pid, t2, 300, 5, 0, 0, PBP_ERR_NO_TSTATE));
    F.on_sample(sample(pid, t1, 600, 3, 0, 0, PBP_ERR_NO_FRAME));
    F.on_sample(sample(pid, t2, 900, 5, 0, 0, PBP_ERR_NO_FRAME));
    F.on_sample(sample(pid, t1, 700, 2, 0, 0, PBP_ERR_NO_TSTATE));

    {
        Profile P = F.snap();
        auto& p = P.processes.at(pid);
        EXPECT_EQ(p.pid, pid);
        EXPECT_EQ(p.first_sample_ns, 300u);
        EXPECT_EQ(p.last_sample_ns, 900u);
        ASSERT_EQ(p.threads.size(), 2u);
        auto& a = p.threads.at(t1);
        auto& b = p.threads.at(t2);
        EXPECT_EQ(a.tid, t1);
        EXPECT_EQ(b.tid, t2);
        EXPECT_EQ(a.name, "thread") << "a thread without /proc entry gets a placeholder name";
        EXPECT_EQ(b.name, "thread");
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
        auto name_of = [&](const pbp::Sample& s) { return frames_of(P, s.stack).at(0).name; };
        EXPECT_EQ(name_of(a.samples[0]), reason_frame(PBP_ERR_NO_FRAME));
        EXPECT_EQ(name_of(a.samples[2]), reason_frame(PBP_ERR_NO_TSTATE));
        EXPECT_EQ(a.samples[0].stack, b.samples[1].stack);
        EXPECT_EQ(P.total_threads(), 2u);
    }

    // An earlier timestamp arriving late still moves first_sample_ns.
    F.on_sample(sample(pid, t2, 250, 0, 0, 0, PBP_ERR_NO_FRAME));
    Profile P = F.snap();
    auto& p = P.processes.at(pid);
    EXPECT_EQ(p.first_sample_ns, 250u);
    EXPECT_EQ(p.last_sample_ns, 900u);
    EXPECT_EQ(p.threads.at(t2).samples.size(), 3u);
}

// ---- new in the split: kinds and weights, sessions, snapshots, moves ------------------------

TEST(Aggregator, WeightAndKindComeFromTheRecord) {
    Fixture F;
    const uint32_t pid = absent_pid();
    pbp_event on = sample(pid, pid, 10, 0, 0, 0, PBP_ERR_NO_FRAME);
    on.kind = PBP_KIND_CPU;
    on.weight_ns = 4'000'000;
    pbp_event off = sample(pid, pid, 20, 1, 0, 0, PBP_ERR_NO_FRAME);
    off.kind = PBP_KIND_OFF_CPU;
    off.weight_ns = 123'456'789;
    pbp_event off2 = off;
    off2.ts_ns = 30;
    off2.weight_ns = 1'000;
    F.on_sample(on);
    F.on_sample(off);
    F.on_sample(off2);

    auto check = [](const Profile& P, uint32_t pid) {
        auto& s = P.processes.at(pid).threads.at(pid).samples;
        ASSERT_EQ(s.size(), 3u);
        EXPECT_EQ(s[0].kind, SampleKind::Cpu);
        EXPECT_EQ(s[0].weight_ns, 4'000'000u);
        EXPECT_EQ(s[1].kind, SampleKind::OffCpu);
        EXPECT_EQ(s[1].weight_ns, 123'456'789u);
        EXPECT_EQ(s[2].kind, SampleKind::OffCpu);
        EXPECT_EQ(s[2].weight_ns, 1'000u);
        EXPECT_EQ(P.total_weight_ns(SampleKind::Cpu), 4'000'000u);
        EXPECT_EQ(P.total_weight_ns(SampleKind::OffCpu), 123'457'789u);
    };
    check(F.agg.samples(), pid);
    check(F.snap(), pid);
}

// A session at a lower rate than the engine's (an interval longer than the records' period)
// keeps the on-CPU samples whose span of their CPU's clock holds a multiple of its interval,
// weighing the interval; off-CPU samples are all kept with their own weight. A session at the
// engine's rate keeps everything as it is.
TEST(Aggregator, ASessionAtALowerRateKeepsItsShareOfTheCpuSamples) {
    Fixture F;
    const uint64_t P = 5'000'000, I = 20'000'000;  // 200 Hz records, a 50 Hz session
    Aggregator& slow = F.new_session(I);
    Aggregator& same = F.new_session(P);
    const uint32_t pid = absent_pid();
    uint64_t clock[2] = {3 * P, 1 * P};  // two CPUs, clocks out of phase
    uint64_t ts = 1000;
    for (int i = 0; i < 400; i++) {
        for (uint32_t cpu : {0u, 1u}) {
            clock[cpu] += P;
            pbp_event e = sample(pid, pid + cpu, ts++, cpu, 0, 0, PBP_ERR_NO_FRAME);
            e.weight_ns = P;
            e.cpu_clock_ns = clock[cpu];
            F.on_sample(e, {&F.agg, &slow, &same});
        }
        if (i % 100 == 0) {
            pbp_event off = sample(pid, pid, ts++, 0, 0, 0, PBP_ERR_NO_FRAME);
            off.kind = PBP_KIND_OFF_CPU;
            off.weight_ns = 777;
            F.on_sample(off, {&F.agg, &slow, &same});
        }
    }
    EXPECT_EQ(F.agg.sample_count(), 804u);
    EXPECT_EQ(same.sample_count(), 804u);
    // CPU 0's clock went from 15 to 2015 ms (100 multiples of 20 ms), CPU 1's from 5 to 2005 ms
    // (100 too): 200 on-CPU samples, and the 4 off-CPU ones.
    EXPECT_EQ(slow.sample_count(), 204u);
    Profile A = F.snap(F.agg), S = F.snap(slow), E = F.snap(same);
    EXPECT_EQ(A.total_weight_ns(SampleKind::Cpu), 800 * P);
    EXPECT_EQ(E.total_weight_ns(SampleKind::Cpu), 800 * P);
    EXPECT_EQ(S.total_weight_ns(SampleKind::Cpu), 200 * I);
    EXPECT_EQ(S.total_weight_ns(SampleKind::OffCpu), 4 * 777u);
    for (auto& [tid, t] : S.processes.at(pid).threads)
        for (auto& smp : t.samples) {
            if (smp.kind == SampleKind::Cpu) {
                EXPECT_EQ(smp.weight_ns, I);
            }
        }
}

// Two sessions on one StackStore: a record is symbolized once and lands in each session that
// holds its process; each session's snapshot holds its own processes only, and just the
// stacks and frames its samples use.
TEST(StackStore, TwoSessionsShareLookupsAndSnapshotsHoldOnlyTheirOwn) {
    Fixture F;
    Aggregator& A = F.agg;
    Aggregator& B = F.new_session();
    const pid_t me = getpid();
    const uint32_t shared = static_cast<uint32_t>(me);
    const uint32_t only_a = absent_pid(), only_b = absent_pid() + 1;

    F.add_process(fake_target(me), {&A, &B}, {{"container", "c0ffee"}});
    F.fake.put(42, shared, {{0x1000, 1, 11}, {0x2000, 2, 22}});
    F.fake.put(50, only_a, {{0x3000, 3, 33}});
    F.fake.put(60, only_b, {{0x4000, 4, 44}});

    for (int i = 0; i < 4; i++) F.on_sample(sample(shared, shared, 100 + i, 0, 42), {&A, &B});
    EXPECT_EQ(F.fake.calls[42], 1) << "one lookup for both sessions";
    F.on_sample(sample(only_a, only_a, 200, 0, 0, 0, PBP_ERR_NO_FRAME), {&A});
    F.on_sample(sample(only_a, only_a, 201, 0, 50, PBP_F_PARTIAL, PBP_ERR_READ_FRAME), {&A});
    F.on_sample(sample(only_b, only_b, 300, 0, 0, 0, PBP_ERR_NO_TSTATE), {&B});
    F.on_sample(sample(only_b, only_b, 301, 0, 60, PBP_F_PARTIAL, PBP_ERR_READ_CODE), {&B});
    F.on_sample(sample(only_b, only_b, 302, 0, 60, PBP_F_TRUNCATED), {&B});

    // The sessions' samples index the store's one stack table.
    const auto& sa = A.samples().processes.at(shared).threads.at(shared).samples;
    const auto& sb = B.samples().processes.at(shared).threads.at(shared).samples;
    ASSERT_EQ(sa.size(), 4u);
    ASSERT_EQ(sb.size(), 4u);
    for (size_t i = 0; i < 4; i++) {
        EXPECT_EQ(sa[i].stack, sa[0].stack);
        EXPECT_EQ(sb[i].stack, sa[0].stack);
    }
    EXPECT_EQ(frames_of(F.store, sa[0].stack).size(), 2u);
    EXPECT_EQ(A.sample_count(), 6u);
    EXPECT_EQ(B.sample_count(), 7u);

    const std::string unknown = "[unknown: process no longer tracked]";
    const std::string a_partial = std::string("[partial stack: ") + pbp::reason_label(PBP_ERR_READ_FRAME) + "]";
    const std::string b_partial = std::string("[partial stack: ") + pbp::reason_label(PBP_ERR_READ_CODE) + "]";
    const std::set<std::string> a_frames = {unknown, reason_frame(PBP_ERR_NO_FRAME), a_partial};
    const std::set<std::string> b_frames = {unknown, reason_frame(PBP_ERR_NO_TSTATE), b_partial, "[truncated]"};
    EXPECT_GE(F.store.frames().size(), 6u) << "the store holds both sessions' frames";

    Profile PA = F.snap(A), PB = F.snap(B);
    EXPECT_TRUE(self_contained(PA));
    EXPECT_TRUE(self_contained(PB));
    EXPECT_EQ(frame_names(PA), a_frames);
    EXPECT_EQ(frame_names(PB), b_frames);
    EXPECT_EQ(PA.frames.size(), a_frames.size());
    EXPECT_EQ(PB.frames.size(), b_frames.size());
    EXPECT_EQ(PA.stacks.size(), 3u);  // shared, [no Python frame], partial
    EXPECT_EQ(PB.stacks.size(), 4u);  // shared, [native thread ...], partial, truncated

    std::set<uint32_t> pids_a, pids_b;
    for (auto& [pid, _] : PA.processes) pids_a.insert(pid);
    for (auto& [pid, _] : PB.processes) pids_b.insert(pid);
    EXPECT_EQ(pids_a, (std::set<uint32_t>{shared, only_a}));
    EXPECT_EQ(pids_b, (std::set<uint32_t>{shared, only_b}));
    EXPECT_EQ(PA.total_samples(), 6u);
    EXPECT_EQ(PB.total_samples(), 7u);

    // Counters are per session.
    EXPECT_EQ(PA.run.unresolved.count(pbp::reason_label(PBP_ERR_NO_TSTATE)), 0u);
    EXPECT_EQ(PB.run.unresolved.count(pbp::reason_label(PBP_ERR_NO_FRAME)), 0u);
    EXPECT_EQ(PA.run.unresolved.at("process no longer tracked"), 4u);
    EXPECT_EQ(PB.run.unresolved.at("process no longer tracked"), 5u);  // 4 shared + the truncated one
    EXPECT_EQ(PA.run.unresolved.at(a_partial.substr(1, a_partial.size() - 2)), 1u);
    EXPECT_EQ(PB.run.unresolved.at(b_partial.substr(1, b_partial.size() - 2)), 1u);
    EXPECT_EQ(PA.run.truncated, 0u);
    EXPECT_EQ(PB.run.truncated, 1u);

    // Both sessions see the shared process's metadata, from the one registry.
    for (const Profile* P : {&PA, &PB}) {
        auto& p = P->processes.at(shared);
        EXPECT_EQ(p.cmdline, pbp::procfs::cmdline(me));
        EXPECT_EQ(p.labels.at("container"), "c0ffee");
        EXPECT_EQ(p.threads.at(shared).name, pbp::procfs::thread_comm(me, me));
        auto fr = frames_of(*P, p.threads.at(shared).samples.at(3).stack);
        ASSERT_EQ(fr.size(), 2u) << dump(fr);
        EXPECT_EQ(fr[0].name, unknown);
    }
}

// A process registered again (exec) or forgotten (exit) loses its cached stack ids only.
TEST(StackStore, ResetAndForgetDropOnlyThatProcessesIds) {
    Fixture F;
    const uint32_t p1 = absent_pid(), p2 = absent_pid() + 1;
    F.fake.put(3, p1, {{0x1000, 1, 11}});
    const uint32_t s1 = F.store.stack_for(sample(p1, p1, 1, 0, 3));
    const uint32_t s2 = F.store.stack_for(sample(p2, p2, 2, 0, 3));
    EXPECT_EQ(F.fake.calls[3], 2);
    EXPECT_EQ(s1, s2) << "the same frames are one interned stack for every process";
    EXPECT_EQ(F.store.problem(s1), "process no longer tracked");
    const uint32_t t1 = F.store.stack_for(sample(p1, p1, 3, 0, 3, PBP_F_TRUNCATED));
    EXPECT_NE(t1, s1);
    EXPECT_EQ(F.store.stack_for(sample(p1, p1, 4, 0, 3, PBP_F_TRUNCATED)), t1);
    EXPECT_EQ(F.fake.calls[3], 2);

    F.store.forget_process(static_cast<pid_t>(p1));
    EXPECT_EQ(F.store.stack_for(sample(p2, p2, 5, 0, 3)), s2);
    EXPECT_EQ(F.fake.calls[3], 2) << "p2's ids survive p1's exit";
    EXPECT_EQ(F.store.stack_for(sample(p1, p1, 6, 0, 3)), s1);
    EXPECT_EQ(F.fake.calls[3], 3) << "p1's ids were dropped";

    F.store.reset_process(static_cast<pid_t>(p2));
    EXPECT_EQ(F.store.stack_for(sample(p1, p1, 7, 0, 3)), s1);
    EXPECT_EQ(F.fake.calls[3], 3);
    EXPECT_EQ(F.store.stack_for(sample(p2, p2, 8, 0, 3)), s2);
    EXPECT_EQ(F.fake.calls[3], 4);
    EXPECT_TRUE(F.store.take_moves().empty()) << "nothing transient here";

    // A synthetic stack's problem is its reason; a reason stack is the same for every process.
    const uint32_t r = F.store.stack_for(sample(p1, p1, 9, 0, 0, 0, PBP_ERR_NO_FRAME));
    EXPECT_EQ(F.store.stack_for(sample(p2, p2, 9, 0, 0, 0, PBP_ERR_NO_FRAME)), r);
    EXPECT_EQ(F.store.problem(r), pbp::reason_label(PBP_ERR_NO_FRAME));
}

// A snapshot is a copy: making it leaves the aggregator as it was, sampling goes on, a later
// snapshot has the later samples, and the earlier snapshot does not change.
TEST(Snapshot, OfACopyLeavesTheAggregatorUnchanged) {
    Fixture F;
    Aggregator& other = F.new_session();
    const pid_t me = getpid();
    const uint32_t pid = static_cast<uint32_t>(me), stranger = absent_pid();
    // Another session's stacks first: this session's store indices are then not the
    // snapshot's (which are numbered from 0).
    F.on_sample(sample(stranger, stranger, 1, 0, 0, 0, PBP_ERR_NO_TSTATE), {&other});
    F.on_sample(sample(stranger, stranger, 2, 0, 0, 0, PBP_ERR_READ_RUNTIME), {&other});

    F.add_process(fake_target(me));
    F.fake.put(11, pid, {{0x1000, 1, 11}});
    F.on_sample(sample(pid, pid, 100, 0, 0, 0, PBP_ERR_NO_FRAME));
    F.on_sample(sample(pid, pid, 110, 1, 11));
    const std::vector<pbp::Sample> before = F.agg.samples().processes.at(pid).threads.at(pid).samples;
    ASSERT_EQ(before.size(), 2u);
    EXPECT_GE(before[0].stack, 2u);

    Profile s1 = F.snap();
    const std::string s1_text = describe(s1);
    EXPECT_TRUE(self_contained(s1));
    EXPECT_EQ(s1.stacks.size(), 2u);
    EXPECT_EQ(s1.total_samples(), 2u);
    EXPECT_EQ(s1.processes.count(stranger), 0u);
    EXPECT_EQ(s1.processes.at(pid).cmdline, pbp::procfs::cmdline(me));
    EXPECT_EQ(frames_of(s1, s1.processes.at(pid).threads.at(pid).samples[0].stack).at(0).name,
              reason_frame(PBP_ERR_NO_FRAME));

    // The aggregator is untouched: store indices, no frames or stacks, no metadata.
    const Profile& live = F.agg.samples();
    EXPECT_EQ(live.frames.size(), 0u);
    EXPECT_EQ(live.stacks.size(), 0u);
    const auto& lp = live.processes.at(pid);
    EXPECT_EQ(lp.cmdline, "");
    EXPECT_EQ(lp.python, "");
    EXPECT_EQ(lp.threads.at(pid).name, "");
    ASSERT_EQ(lp.threads.at(pid).samples.size(), 2u);
    for (size_t i = 0; i < 2; i++) {
        EXPECT_EQ(lp.threads.at(pid).samples[i].stack, before[i].stack);
        EXPECT_EQ(lp.threads.at(pid).samples[i].ts_ns, before[i].ts_ns);
    }

    // Sampling goes on; the registry changes too.
    F.on_sample(sample(pid, pid, 120, 0, 11, PBP_F_TRUNCATED));
    F.on_sample(sample(pid, pid + 1, 130, 0, 0, 0, PBP_ERR_NO_FRAME));
    F.exited(me);
    EXPECT_EQ(F.agg.sample_count(), 4u);

    Profile s2 = F.snap();
    EXPECT_TRUE(self_contained(s2));
    EXPECT_EQ(s2.total_samples(), 4u);
    EXPECT_EQ(s2.run.truncated, 1u);
    EXPECT_TRUE(s2.processes.at(pid).exited);
    EXPECT_EQ(s2.processes.at(pid).last_sample_ns, 130u);
    EXPECT_EQ(s2.stacks.size(), 3u);

    EXPECT_EQ(describe(s1), s1_text) << "an earlier snapshot does not change";
    EXPECT_EQ(s1.total_samples(), 2u);
    EXPECT_EQ(s1.run.truncated, 0u);
    EXPECT_FALSE(s1.processes.at(pid).exited);
    EXPECT_EQ(s1.processes.at(pid).last_sample_ns, 110u);
    EXPECT_NE(describe(s2), s1_text);

    // Making a snapshot twice gives the same.
    EXPECT_EQ(describe(F.snap()), describe(s2));
}

// The run's fields come from the caller, its counters from the session's samples.
TEST(Snapshot, RunInfoFromTheCallerCountsFromTheSamples) {
    Fixture F;
    const uint32_t pid = absent_pid();
    F.fake.put(5, pid, {{0x1000, 1, 11}});
    F.on_sample(sample(pid, pid, 10, 0, 5, PBP_F_TRUNCATED));
    F.on_sample(sample(pid, pid, 20, 0, 0, 0, PBP_ERR_NO_FRAME));
    pbp::RunInfo run;
    run.target = "pid 1234";
    run.rate_hz = 99;
    run.period_ns = 10'101'010;
    run.lost = 3;
    run.start_mono_ns = 5;
    run.end_mono_ns = 50;
    run.unresolved["bogus"] = 9;  // not the session's: replaced
    run.truncated = 77;
    Profile P = make_snapshot(F.agg.samples(), F.store, F.reg, run);
    EXPECT_EQ(P.run.target, "pid 1234");
    EXPECT_EQ(P.run.rate_hz, 99);
    EXPECT_EQ(P.run.period_ns, 10'101'010u);
    EXPECT_EQ(P.run.lost, 3u);
    EXPECT_EQ(P.run.start_mono_ns, 5u);
    EXPECT_EQ(P.run.end_mono_ns, 50u);
    EXPECT_EQ(P.run.truncated, 1u);
    EXPECT_EQ(P.run.unresolved, (std::map<std::string, uint64_t>{{"process no longer tracked", 1},
                                                                 {pbp::reason_label(PBP_ERR_NO_FRAME), 1}}));
    // The final profile: the samples moved out of the session.
    Profile fin = make_snapshot(F.agg.take(), F.store, F.reg, run);
    EXPECT_EQ(describe(fin), describe(P));
}

// ---- process registry ----------------------------------------------------------------------

// A thread's last name (BPF's thread-exit record) replaces the one read at its first sample;
// a thread never sampled has no profile to name, and an empty name changes nothing.
TEST(ProcessRegistry, ThreadExitCarriesItsLastName) {
    ProcessRegistry reg;
    const uint32_t me = static_cast<uint32_t>(getpid());
    reg.on_sample(me, me);
    const pbp::ProcessProfile* m = reg.find(me);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->threads.at(me).name, pbp::procfs::thread_comm(getpid(), getpid()));
    reg.on_thread_exit(me, me, "pbp-renamed");
    EXPECT_EQ(m->threads.at(me).name, "pbp-renamed");
    reg.on_thread_exit(me, me, "");
    EXPECT_EQ(m->threads.at(me).name, "pbp-renamed");
    reg.on_thread_exit(me, absent_pid(), "never-sampled");
    EXPECT_EQ(m->threads.count(absent_pid()), 0u);
    reg.on_thread_exit(absent_pid(), absent_pid(), "unknown-process");
    EXPECT_EQ(reg.find(absent_pid()), nullptr);
}

TEST(ProcessRegistry, SampledBeforeRegisteredAndFill) {
    ProcessRegistry reg;
    const pid_t me = getpid();
    const uint32_t absent = absent_pid();
    EXPECT_EQ(reg.find(static_cast<uint32_t>(me)), nullptr);
    // BPF knew the process first: what /proc says now.
    reg.on_sample(static_cast<uint32_t>(me), static_cast<uint32_t>(me));
    const pbp::ProcessProfile* m = reg.find(static_cast<uint32_t>(me));
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->pid, static_cast<uint32_t>(me));
    EXPECT_EQ(m->ns_pid, static_cast<uint32_t>(me));
    EXPECT_EQ(m->comm, pbp::procfs::comm(me));
    EXPECT_FALSE(m->comm.empty());
    ASSERT_EQ(m->threads.count(static_cast<uint32_t>(me)), 1u);
    EXPECT_EQ(m->threads.at(static_cast<uint32_t>(me)).name, pbp::procfs::thread_comm(me, me));
    EXPECT_TRUE(m->threads.at(static_cast<uint32_t>(me)).samples.empty()) << "metadata only";

    // Registered later: its full metadata, with labels.
    reg.add(fake_target(me), {{"pod", "default/web-1"}});
    m = reg.find(static_cast<uint32_t>(me));
    EXPECT_EQ(m->cmdline, pbp::procfs::cmdline(me));
    EXPECT_EQ(m->labels.at("pod"), "default/web-1");

    // fill: metadata in, samples (and threads unknown to the registry) kept.
    pbp::ProcessProfile out;
    out.pid = static_cast<uint32_t>(me);
    out.first_sample_ns = 5;
    out.last_sample_ns = 9;
    out.threads[static_cast<uint32_t>(me)].tid = static_cast<uint32_t>(me);
    out.threads[static_cast<uint32_t>(me)].samples.push_back({5, 3, 1, SampleKind::OffCpu, 77});
    out.threads[absent].tid = absent;
    out.threads[absent].name = "kept";
    reg.fill(out.pid, out);
    EXPECT_EQ(out.comm, m->comm);
    EXPECT_EQ(out.cmdline, m->cmdline);
    EXPECT_EQ(out.exe, m->exe);
    EXPECT_EQ(out.python, fake_target(me).describe());
    EXPECT_EQ(out.labels, m->labels);
    EXPECT_EQ(out.first_sample_ns, 5u);
    EXPECT_EQ(out.last_sample_ns, 9u);
    auto& t = out.threads.at(static_cast<uint32_t>(me));
    EXPECT_EQ(t.name, pbp::procfs::thread_comm(me, me));
    EXPECT_EQ(t.ns_tid, static_cast<uint32_t>(me));
    ASSERT_EQ(t.samples.size(), 1u);
    EXPECT_EQ(t.samples[0].stack, 3u);
    EXPECT_EQ(t.samples[0].weight_ns, 77u);
    EXPECT_EQ(out.threads.at(absent).name, "kept");

    // An unknown process is left as it was.
    pbp::ProcessProfile unknown;
    unknown.pid = absent;
    unknown.comm = "mine";
    reg.fill(unknown.pid, unknown);
    EXPECT_EQ(unknown.comm, "mine");
    EXPECT_EQ(reg.find(absent), nullptr);
}

// A process that exec'd between its discovery and its registration (a forked child of Python
// running uname at once: stop 29's CI named its thread "uname"). Its samples so far ran the
// program found, so neither it nor its threads take the next program's name or command line,
// at registration, at its first sample, or at a refresh.
TEST(ProcessRegistry, ExecBetweenDiscoveryAndRegistrationKeepsTheFoundProgramsName) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
        _exit(127);
    }
    for (int i = 0; i < 200 && pbp::procfs::comm(child) != "sleep"; i++) usleep(10000);
    ASSERT_EQ(pbp::procfs::comm(child), "sleep");
    pbp::PythonTarget t = fake_target(child);
    t.exe = "/usr/bin/python3.11";  // what discovery found, before the exec
    ProcessRegistry reg;
    reg.add(t, {});
    const pbp::ProcessProfile* m = reg.find(static_cast<uint32_t>(child));
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->exe, "/usr/bin/python3.11");
    EXPECT_EQ(m->comm, "python3.11");
    EXPECT_EQ(m->cmdline, "") << "the next program's command line";
    reg.on_sample(static_cast<uint32_t>(child), static_cast<uint32_t>(child));
    EXPECT_EQ(m->threads.at(static_cast<uint32_t>(child)).name, "python3.11");
    reg.refresh_thread_names();
    EXPECT_EQ(m->threads.at(static_cast<uint32_t>(child)).name, "python3.11");
    // Its profile is named for the program found, not for the one it runs now.
    EXPECT_EQ(m->display_name().find("sleep"), std::string::npos) << m->display_name();
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
}

TEST(ProcessRegistry, MarkGoneExitedMarksOnlyProcessesThatAreGone) {
    ProcessRegistry reg;
    const pid_t me = getpid();
    const uint32_t gone = absent_pid();
    reg.add(fake_target(me), {});
    reg.add(fake_target(static_cast<pid_t>(gone)), {});
    reg.on_sample(gone + 1, gone + 1);  // sampled, never registered
    ASSERT_NE(reg.find(gone), nullptr);
    EXPECT_FALSE(reg.find(gone)->exited);
    reg.mark_gone_exited();
    EXPECT_TRUE(reg.find(gone)->exited);
    EXPECT_TRUE(reg.find(gone + 1)->exited);
    EXPECT_FALSE(reg.find(static_cast<uint32_t>(me))->exited);
    reg.mark_exited(absent_pid() + 2);  // unknown: nothing happens
    EXPECT_EQ(reg.find(absent_pid() + 2), nullptr);
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
    F.add_process(fake_target(me));

    // The main thread (tid == pid), named with prctl.
    struct Restore {
        std::string name = thread_name_now();
        ~Restore() { prctl(PR_SET_NAME, name.c_str(), 0, 0, 0); }
    } restore;
    prctl(PR_SET_NAME, "pbp-main-x", 0, 0, 0);
    ASSERT_EQ(gettid(), me) << "gtest runs tests on the main thread";
    F.on_sample(sample(me, gettid(), 10, 0, 0, 0, PBP_ERR_NO_FRAME));

    // Another thread (tid != pid).
    NamedThread worker("pbp-worker-1");
    ASSERT_NE(worker.tid(), me);
    ASSERT_EQ(pbp::procfs::thread_comm(me, worker.tid()), "pbp-worker-1");
    F.on_sample(sample(me, worker.tid(), 20, 1, 0, 0, PBP_ERR_NO_FRAME));

    auto name = [&](pid_t tid) { return F.snap().processes.at(me).threads.at(tid).name; };
    {
        Profile P = F.snap();
        auto& p = P.processes.at(me);
        auto& main_t = p.threads.at(me);
        auto& work_t = p.threads.at(worker.tid());
        EXPECT_EQ(main_t.name, "pbp-main-x");
        EXPECT_EQ(work_t.name, "pbp-worker-1");
        EXPECT_EQ(main_t.ns_tid, static_cast<uint32_t>(me));
        EXPECT_EQ(work_t.ns_tid, static_cast<uint32_t>(worker.tid()));
    }

    // Renamed later: not picked up by a further sample, but by refresh_thread_names().
    worker.rename("pbp-renamed");
    prctl(PR_SET_NAME, "pbp-main-y", 0, 0, 0);
    F.on_sample(sample(me, worker.tid(), 30, 1, 0, 0, PBP_ERR_NO_FRAME));
    EXPECT_EQ(name(worker.tid()), "pbp-worker-1");
    Profile stale = F.snap();
    F.reg.refresh_thread_names();
    EXPECT_EQ(name(worker.tid()), "pbp-renamed");
    EXPECT_EQ(name(me), "pbp-main-y");
    EXPECT_EQ(stale.processes.at(me).threads.at(worker.tid()).name, "pbp-worker-1") << "snapshots are copies";

    // Exited processes keep the names they had.
    F.exited(me);
    worker.rename("pbp-after-exit");
    F.reg.refresh_thread_names();
    EXPECT_EQ(name(worker.tid()), "pbp-renamed");
}

// refresh_thread_names_of (and the periodic re-read) re-reads only threads sampled since
// they were last named; refresh_thread_names all of them.
TEST(ProcessRegistry, RefreshActiveOnlyRereadsThreadsSampledSinceTheirNaming) {
    Fixture F;
    const pid_t me = getpid();
    F.add_process(fake_target(me));
    NamedThread busy("pbp-busy-1"), idle("pbp-idle-1");
    F.on_sample(sample(me, busy.tid(), 10, 0, 0, 0, PBP_ERR_NO_FRAME));
    F.on_sample(sample(me, idle.tid(), 11, 0, 0, 0, PBP_ERR_NO_FRAME));
    auto name = [&](pid_t tid) { return F.reg.find(static_cast<uint32_t>(me))->threads.at(tid).name; };
    EXPECT_EQ(name(busy.tid()), "pbp-busy-1");
    EXPECT_EQ(name(idle.tid()), "pbp-idle-1");

    busy.rename("pbp-busy-2");
    idle.rename("pbp-idle-2");
    F.reg.refresh_thread_names_of(me);  // neither sampled since its naming
    EXPECT_EQ(name(busy.tid()), "pbp-busy-1");
    EXPECT_EQ(name(idle.tid()), "pbp-idle-1");

    F.on_sample(sample(me, busy.tid(), 12, 0, 0, 0, PBP_ERR_NO_FRAME));
    F.reg.refresh_thread_names_of(me);
    EXPECT_EQ(name(busy.tid()), "pbp-busy-2");
    EXPECT_EQ(name(idle.tid()), "pbp-idle-1");
    EXPECT_EQ(F.snap().processes.at(me).threads.at(busy.tid()).name, "pbp-busy-2");

    F.reg.refresh_thread_names();  // all of them
    EXPECT_EQ(name(idle.tid()), "pbp-idle-2");
}

// refresh_due_thread_names: a process's names are read again 1 s after its last read, then
// twice as long after each read that changed nothing (up to 16 s); a change brings it back to
// 1 s. A forced refresh reads them whenever asked.
TEST(ProcessRegistry, PeriodicRefreshBacksOffWhileNamesStayTheSame) {
    Fixture F;
    const pid_t me = getpid();
    F.add_process(fake_target(me));
    NamedThread w("pbp-pace-0");
    uint64_t ts = 10;
    auto sampled = [&] { F.on_sample(sample(me, w.tid(), ts++, 0, 0, 0, PBP_ERR_NO_FRAME)); };
    auto name = [&] { return F.reg.find(static_cast<uint32_t>(me))->threads.at(w.tid()).name; };
    const uint64_t s = 1000000000ULL, T = 1000 * s;
    sampled();
    ASSERT_EQ(name(), "pbp-pace-0");

    w.rename("pbp-pace-1");
    sampled();
    F.reg.refresh_due_thread_names(T);  // its first turn: read, changed -> next at T+1
    EXPECT_EQ(name(), "pbp-pace-1");

    w.rename("pbp-pace-2");
    sampled();
    F.reg.refresh_due_thread_names(T + s / 2);
    EXPECT_EQ(name(), "pbp-pace-1") << "read again before its turn";
    F.reg.refresh_due_thread_names(T + s);  // changed -> next at T+2
    EXPECT_EQ(name(), "pbp-pace-2");

    // Unchanged at T+2 (next at T+4) and T+4 (next at T+8).
    sampled();
    F.reg.refresh_due_thread_names(T + 2 * s);
    sampled();
    F.reg.refresh_due_thread_names(T + 4 * s);
    w.rename("pbp-pace-3");
    sampled();
    F.reg.refresh_due_thread_names(T + 7 * s);
    EXPECT_EQ(name(), "pbp-pace-2") << "read again before its turn, after two reads that changed nothing";
    F.reg.refresh_due_thread_names(T + 8 * s);
    EXPECT_EQ(name(), "pbp-pace-3");

    // Unchanged reads until the interval reaches its cap: 1 (reset at T+8), 2, 4, 8, 16, 16 s.
    uint64_t at = T + 8 * s;
    for (uint64_t gap : {1, 2, 4, 8, 16}) {
        at += gap * s;
        sampled();
        F.reg.refresh_due_thread_names(at);
    }
    w.rename("pbp-pace-4");
    sampled();
    F.reg.refresh_due_thread_names(at + 15 * s);
    EXPECT_EQ(name(), "pbp-pace-3");
    F.reg.refresh_due_thread_names(at + 16 * s);
    EXPECT_EQ(name(), "pbp-pace-4") << "no more than 16 s between two reads";

    // Forced: whenever asked.
    w.rename("pbp-pace-5");
    sampled();
    F.reg.refresh_thread_names_of(me);
    EXPECT_EQ(name(), "pbp-pace-5");
    w.rename("pbp-pace-6");
    sampled();
    F.reg.refresh_thread_names();
    EXPECT_EQ(name(), "pbp-pace-6");
}

TEST(Aggregator, RefreshKeepsNamesOfThreadsThatAreGone) {
    Fixture F;
    const pid_t me = getpid();
    F.add_process(fake_target(me));
    pid_t tid;
    {
        NamedThread worker("pbp-shortlived");
        tid = worker.tid();
        F.on_sample(sample(me, tid, 10, 0, 0, 0, PBP_ERR_NO_FRAME));
    }
    // Joined: /proc/self/task/TID is gone (give the kernel a moment to reap it).
    for (int i = 0; i < 200 && fs::exists("/proc/" + std::to_string(me) + "/task/" + std::to_string(tid)); i++)
        usleep(5000);
    F.reg.refresh_thread_names();
    EXPECT_EQ(F.snap().processes.at(me).threads.at(tid).name, "pbp-shortlived");
}

// A thread that threading does not know at its first sample (here started with _thread; the
// same as one sampled before threading registers it, or missed by a read that raced
// threading._active's growth, as a pool thread of a 47-thread run was) gets its OS name. Named
// in Python afterwards and never sampled again, it takes its Python name at its process's next
// turn, not only if it is sampled again: a thread named by comm is read again at the next 3
// turns, 1 s apart, sampled since or not; then no more until it is sampled again.
TEST(ProcessRegistry, ThreadUnnamedAtItsSampleTakesItsPythonNameLaterUnsampled) {
    std::error_code ec;
    PBP_REQUIRE(fs::exists("/usr/bin/python3.11", ec), "host /usr/bin/python3.11 missing");
    const std::string script =
        "import _thread, signal, threading, time\n"
        "go = {'late': threading.Event(), 'never': threading.Event()}\n"
        "signal.signal(signal.SIGUSR1, lambda *a: go['late'].set())\n"
        "signal.signal(signal.SIGUSR2, lambda *a: go['never'].set())\n"
        "tids = {}\n"
        "def body(who):\n"
        "    tids[who] = threading.get_native_id()\n"
        "    go[who].wait()\n"
        "    threading.current_thread().name = who + '-named'  # a _DummyThread in threading._active\n"
        "    print('named', who, flush=True)\n"
        "    time.sleep(60)\n"
        "for who in ('late', 'never'): _thread.start_new_thread(body, (who,))\n"
        "while len(tids) < 2: time.sleep(0.01)\n"
        "for who in ('late', 'never'): print('tid', who, tids[who], flush=True)\n"
        // A process's signal may be delivered to any of its threads; Python runs the handler
        // in the main thread, at its next bytecode: a main thread in one long sleep ran it only
        // after 60 s (CI, 2026-11-29: "named never" not within 30 s).
        "for _ in range(600): time.sleep(0.1)\n";
    pbp::test::Reporter child({"/usr/bin/python3.11", "-c", script});
    auto lines = child.read_lines(2, 30);
    ASSERT_EQ(lines.size(), 2u) << child.err();
    std::map<std::string, uint32_t> tid;
    for (const auto& l : lines) {
        std::istringstream ls(l);
        std::string w, who;
        uint32_t t = 0;
        ASSERT_TRUE(ls >> w >> who >> t) << l;
        tid[who] = t;
    }
    ASSERT_EQ(tid.size(), 2u);
    pbp::Discoverer d;
    auto found = d.discover(child.pid());
    ASSERT_EQ(found.status, pbp::Discovery::Python) << found.reason;
    const uint32_t pid = static_cast<uint32_t>(child.pid());
    ProcessRegistry reg;
    ASSERT_TRUE(found.target.has_value());
    reg.add(*found.target, {});
    // Each named at its sample (a process's names are read at most every 200 ms at a first
    // sample: a burst is named at the next turn).
    reg.on_sample(pid, tid["late"]);
    usleep(250000);
    reg.on_sample(pid, tid["never"]);
    usleep(250000);
    reg.on_sample(pid, pid);
    auto name = [&](uint32_t t) { return reg.find(pid)->threads.at(t).name; };
    const std::string os_name = pbp::procfs::thread_comm(child.pid(), static_cast<pid_t>(tid["late"]));
    ASSERT_FALSE(os_name.empty());
    EXPECT_EQ(name(pid), "MainThread");
    EXPECT_EQ(name(tid["late"]), os_name) << "not in threading._active yet: its OS name";

    child.signal(SIGUSR1);
    ASSERT_TRUE(child.read_until("named late", 30)) << child.err();
    const uint64_t s = 1000000000ULL, T = 1000 * s;
    reg.refresh_due_thread_names(T);  // neither sampled since
    EXPECT_EQ(name(tid["late"]), "late-named") << "read again at its process's next turn";
    EXPECT_EQ(name(tid["never"]), os_name);
    // "never" is read again at the next turns, 1 s apart while one is due: 3 times after its
    // naming at its sample (T, T+1 and T+2).
    for (uint64_t at = 1; at <= 3; at++) reg.refresh_due_thread_names(T + at * s);
    child.signal(SIGUSR2);
    ASSERT_TRUE(child.read_until("named never", 30)) << child.err();
    for (uint64_t at = 4; at <= 40; at++) reg.refresh_due_thread_names(T + at * s);
    EXPECT_EQ(name(tid["never"]), os_name) << "read again 3 times, then only when sampled again";
    reg.on_sample(pid, tid["never"]);
    reg.refresh_due_thread_names(T + 60 * s);
    EXPECT_EQ(name(tid["never"]), "never-named");
}

// ---- with a live interpreter: fully resolved stacks ----------------------------------------

// The code objects unit_symbolizer_target.py reports: label -> (address, instruction, line).
struct Code {
    uint64_t addr;
    uint32_t instr;
    int line;
};

std::map<std::string, Code> reported_code(const std::string& out) {
    std::map<std::string, Code> code;
    std::istringstream is(out);
    for (std::string l; std::getline(is, l);) {
        std::istringstream ls(l);
        std::string kind, label;
        Code k{};
        int first;
        if (ls >> kind >> label && kind == "code" && ls >> k.addr >> first >> k.instr >> k.line) code[label] = k;
    }
    return code;
}

// tests/tools/unit_symbolizer_target.py running under the host's Debian 3.11, discovered:
// the code objects it reports, and their checksums as BPF takes them.
struct LiveTarget {
    pbp::test::Reporter child{{"/usr/bin/python3.11", pbp::test::tool_path("unit_symbolizer_target.py"),
                               pbp::test::temp_dir() + "/never"}};
    std::map<std::string, Code> code;
    std::optional<pbp::PythonTarget> target;
    std::string error;  // why it is not usable; "" when it is

    LiveTarget() {
        if (!child.read_until("ready", 30)) {
            error = "the target did not start: " + child.err();
            return;
        }
        code = reported_code(child.out());
        pbp::Discoverer d;
        auto r = d.discover(child.pid());
        if (r.status != pbp::Discovery::Python) error = "not discovered as Python: " + r.reason;
        else target = r.target;
    }
    uint32_t pid() const { return static_cast<uint32_t>(child.pid()); }
    uint32_t csum(const Code& k) {
        pbp::ProcessMemory mem(child.pid());
        uint8_t win[PBP_WINDOW] = {};
        size_t len = target->layout.bpf.code_read_len;
        EXPECT_TRUE(mem.read(k.addr, win, len));
        return Symbolizer::code_checksum(target->layout.bpf, win, len, &mem);
    }
    pbp_frame frame(const Code& k) { return pbp_frame{k.addr, k.instr, csum(k)}; }
};

TEST(AggregatorLive, ResolvedStacksRootFirstWithMarkers) {
    std::error_code ec;
    PBP_REQUIRE(fs::exists("/usr/bin/python3.11", ec), "host /usr/bin/python3.11 missing");
    LiveTarget L;
    ASSERT_TRUE(L.error.empty()) << L.error;
    auto& code = L.code;
    const std::string& out = L.child.out();
    ASSERT_TRUE(code.count("method") && code.count("modfunc") && code.count("module")) << out;
    auto frame = [&](const Code& k) { return L.frame(k); };
    auto& c = L.child;
    auto& r = L;
    const std::string script = pbp::test::tool_path("unit_symbolizer_target.py");
    Fixture F;
    const uint32_t pid = static_cast<uint32_t>(c.pid());
    F.sym.add_process(c.pid(), r.target->layout, r.target->code_type_addr);
    F.add_process(*r.target);
    const std::vector<pbp_frame> leaf_first = {frame(code["method"]), frame(code["modfunc"]), frame(code["module"])};
    F.fake.put(1, pid, leaf_first);
    F.fake.put(2, pid, leaf_first);  // same frames, another id (e.g. a deeper stack)
    F.on_sample(sample(pid, pid, 1000, 0, 1));
    F.on_sample(sample(pid, pid, 2000, 1, 2, PBP_F_TRUNCATED));

    Profile P = F.snap();
    EXPECT_TRUE(self_contained(P));
    auto& p = P.processes.at(pid);
    EXPECT_EQ(p.python, r.target->describe());
    EXPECT_NE(p.cmdline.find("unit_symbolizer_target.py"), std::string::npos) << p.cmdline;
    auto& th = p.threads.at(pid);
    EXPECT_EQ(th.name, pbp::procfs::thread_comm(c.pid(), c.pid()));
    ASSERT_EQ(th.samples.size(), 2u);

    auto full = frames_of(P, th.samples[0].stack);
    ASSERT_EQ(full.size(), 3u) << dump(full);
    EXPECT_EQ(full[0].name, "<module>");
    EXPECT_EQ(full[0].line, code["module"].line);
    EXPECT_EQ(full[1].name, "module_function");
    EXPECT_EQ(full[1].line, code["modfunc"].line);
    EXPECT_EQ(full[2].name, "Klass.method");
    EXPECT_EQ(full[2].line, code["method"].line);
    EXPECT_EQ(full[2].file, script);
    for (auto& f : full) EXPECT_FALSE(f.synthetic);

    auto trunc = frames_of(P, th.samples[1].stack);
    ASSERT_EQ(trunc.size(), 4u) << dump(trunc);
    EXPECT_EQ(trunc[0].name, "[truncated]");
    EXPECT_EQ(std::vector<Frame>(trunc.begin() + 1, trunc.end()), full);

    // Resolved stacks are not "unresolved"; the truncated one is counted as truncated.
    EXPECT_EQ(P.unresolved_total(), 0u);
    EXPECT_TRUE(P.run.unresolved.empty());
    EXPECT_EQ(P.run.truncated, 1u);
    EXPECT_EQ(p.first_sample_ns, 1000u);
    EXPECT_EQ(p.last_sample_ns, 2000u);
    EXPECT_EQ(F.store.problem(F.agg.samples().processes.at(pid).threads.at(pid).samples[0].stack), "");
}

// A stack whose first read did not match what BPF saw (a code object caught mid-change) is
// read again when its id comes back; once it resolves, the samples already charged to the
// unresolved stack move over and stop counting as unresolved.
TEST(AggregatorLive, TransientlyUnresolvedStackIsReadAgainAndEarlierSamplesMove) {
    std::error_code ec;
    PBP_REQUIRE(fs::exists("/usr/bin/python3.11", ec), "host /usr/bin/python3.11 missing");
    LiveTarget L;
    ASSERT_TRUE(L.error.empty()) << L.error;
    auto& c = L.child;
    auto& r = L;
    auto& code = L.code;
    ASSERT_TRUE(code.count("modfunc")) << c.out();
    const uint64_t addr = code["modfunc"].addr;
    const uint32_t instr = code["modfunc"].instr;
    ASSERT_NE(addr, 0u) << c.out();
    const uint32_t csum = L.csum(code["modfunc"]);

    Fixture F;
    const uint32_t pid = static_cast<uint32_t>(c.pid());
    F.sym.add_process(c.pid(), r.target->layout, r.target->code_type_addr);
    // Two sessions hold the process; the second starts after the first sample.
    Aggregator& A = F.agg;
    Aggregator& B = F.new_session();
    Aggregator& C = F.new_session();  // a session of other processes
    F.add_process(*r.target, {&A});
    F.fake.put(7, pid, {{addr, instr, csum ^ 1}});  // as read mid-change: no match
    F.on_sample(sample(pid, pid, 1000, 0, 7), {&A});
    B.add_process(static_cast<pid_t>(pid));
    F.on_sample(sample(pid, pid, 1100, 0, 7, PBP_F_TRUNCATED), {&A, &B});
    F.on_sample(sample(absent_pid(), absent_pid(), 1150, 0, 0, 0, PBP_ERR_NO_FRAME), {&C});
    EXPECT_EQ(F.fake.calls[7], 2) << "read, then read again when the id came back";
    Profile before = F.snap(A);
    {
        auto& th = before.processes.at(pid).threads.at(pid);
        ASSERT_EQ(th.samples.size(), 2u);
        auto first = frames_of(before, th.samples[0].stack);
        ASSERT_EQ(first.size(), 1u) << dump(first);
        EXPECT_EQ(first[0].name, std::string("[unknown: ") + Symbolizer::kFreed + "]");
        EXPECT_EQ(before.run.unresolved[Symbolizer::kFreed], 2u);
        EXPECT_EQ(F.snap(B).run.unresolved.at(Symbolizer::kFreed), 1u);
    }
    const std::string before_text = describe(before);

    F.fake.put(7, pid, {{addr, instr, csum}});  // the same id now reads cleanly
    F.on_sample(sample(pid, pid, 1200, 0, 7), {&A, &B});
    EXPECT_EQ(F.fake.calls[7], 3);
    F.on_sample(sample(pid, pid, 1300, 0, 7), {&A});
    EXPECT_EQ(F.fake.calls[7], 3) << "resolved: not read again";
    for (Aggregator* s : {&A, &B}) {
        Profile P = F.snap(*s);
        EXPECT_TRUE(self_contained(P));
        auto& th = P.processes.at(pid).threads.at(pid);
        ASSERT_EQ(th.samples.size(), s == &A ? 4u : 2u);
        for (auto& smp : th.samples) {
            auto fr = frames_of(P, smp.stack);
            ASSERT_FALSE(fr.empty());
            EXPECT_EQ(fr.back().name, "module_function") << dump(fr);
            EXPECT_FALSE(fr.back().synthetic);
        }
        if (s == &A) {
            EXPECT_EQ(frames_of(P, th.samples[1].stack).front().name, "[truncated]");
            EXPECT_EQ(th.samples[0].stack, th.samples[2].stack);
            EXPECT_EQ(th.samples[0].stack, th.samples[3].stack);
        } else {
            EXPECT_EQ(frames_of(P, th.samples[0].stack).front().name, "[truncated]");
            EXPECT_NE(frames_of(P, th.samples[1].stack).front().name, "[truncated]");
        }
        EXPECT_EQ(P.unresolved_total(), 0u);
        EXPECT_TRUE(P.run.unresolved.empty());
        EXPECT_EQ(P.run.truncated, 1u);
    }
    // The other session is untouched, and an earlier snapshot keeps what it had.
    EXPECT_EQ(F.snap(C).processes.count(pid), 0u);
    EXPECT_EQ(F.snap(C).run.unresolved.at(pbp::reason_label(PBP_ERR_NO_FRAME)), 1u);
    EXPECT_EQ(describe(before), before_text);

    // A stack that stays unresolved is read again a bounded number of times, then left alone.
    F.fake.put(8, pid, {{addr, instr, csum ^ 2}});
    for (int i = 0; i < 50; i++) F.on_sample(sample(pid, pid, 2000 + i, 0, 8), {&A});
    EXPECT_LE(F.fake.calls[8], 10);
    EXPECT_EQ(F.snap().run.unresolved[Symbolizer::kFreed], 50u);
    EXPECT_EQ(F.snap(B).run.unresolved.count(Symbolizer::kFreed), 0u);
}

// Two stack ids of one process, both unresolved when first read: their frames are alike
// ("[unknown: <problem>]" names no address), so both land on one interned stack. When one id
// later resolves, only its own samples may move; the other id's stay unresolved (a move
// names the BPF stack id, not just the shared stack).
TEST(AggregatorLive, OnlyTheResolvedIdsSamplesMove) {
    std::error_code ec;
    PBP_REQUIRE(fs::exists("/usr/bin/python3.11", ec), "host /usr/bin/python3.11 missing");
    LiveTarget L;
    ASSERT_TRUE(L.error.empty()) << L.error;
    auto& c = L.child;
    auto& r = L;
    auto& code = L.code;
    ASSERT_TRUE(code.count("modfunc") && code.count("method")) << c.out();
    auto csum_of = [&](const Code& k) { return L.csum(k); };
    const Code mf = code["modfunc"], me = code["method"];
    const uint32_t mf_csum = csum_of(mf), me_csum = csum_of(me);

    Fixture F;
    const uint32_t pid = static_cast<uint32_t>(c.pid());
    F.sym.add_process(c.pid(), r.target->layout, r.target->code_type_addr);
    F.add_process(*r.target);
    F.fake.put(7, pid, {{mf.addr, mf.instr, mf_csum ^ 1}});  // resolves on a later read
    F.fake.put(8, pid, {{me.addr, me.instr, me_csum ^ 1}});  // never resolves
    F.on_sample(sample(pid, pid, 1000, 0, 8));
    F.on_sample(sample(pid, pid, 1100, 0, 7));
    {
        Profile P = F.snap();
        auto& th = P.processes.at(pid).threads.at(pid);
        ASSERT_EQ(th.samples.size(), 2u);
        EXPECT_EQ(frames_of(P, th.samples[0].stack), frames_of(P, th.samples[1].stack))
            << "alike unresolved frames: one interned stack";
        EXPECT_EQ(P.run.unresolved.at(Symbolizer::kFreed), 2u);
    }
    F.fake.put(7, pid, {{mf.addr, mf.instr, mf_csum}});
    F.on_sample(sample(pid, pid, 1200, 0, 7));
    Profile P = F.snap();
    auto& th = P.processes.at(pid).threads.at(pid);
    ASSERT_EQ(th.samples.size(), 3u);
    auto id8 = frames_of(P, th.samples[0].stack);
    ASSERT_EQ(id8.size(), 1u) << dump(id8);
    EXPECT_EQ(id8[0].name, std::string("[unknown: ") + Symbolizer::kFreed + "]") << "id 8 never resolved";
    EXPECT_EQ(frames_of(P, th.samples[1].stack).back().name, "module_function");
    EXPECT_EQ(frames_of(P, th.samples[2].stack).back().name, "module_function");
    EXPECT_EQ(P.run.unresolved[Symbolizer::kFreed], 1u);
}

}  // namespace
