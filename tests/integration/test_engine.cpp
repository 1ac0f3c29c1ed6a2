// The engine driven directly, with no CLI: a real BPF program and real Python processes.
// Snapshots while sampling goes on, the final profile from stop(), and two sessions with
// their own targets on one BPF program.
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "test_support.h"

namespace {

using pbp::Engine;
using pbp::EngineConfig;
using pbp::EngineEvent;
using pbp::Profile;
using pbp::Session;
using pbp::SessionConfig;
using pbp::Status;

// A Python process spinning in a function called `name`, one line, until killed.
pbp::test::Reporter spinner(const std::string& name) {
    std::string script = "import sys\n"
                         "def " + name + "():\n"
                         "    while True: pass\n"
                         "print('ready', flush=True)\n" + name + "()\n";
    return pbp::test::Reporter(pbp::test::with_args(pbp::test::host_python().argv, {"-c", script}));
}

// Samples per function name (leaf frames), and the checks every snapshot must pass: each
// sample's stack and each stack's frames exist, every process has its metadata.
std::map<std::string, uint64_t> leaf_counts(const Profile& p) {
    std::map<std::string, uint64_t> n;
    for (auto& [pid, proc] : p.processes) {
        EXPECT_EQ(proc.pid, pid);
        EXPECT_FALSE(proc.comm.empty()) << "pid " << pid << " has no metadata";
        for (auto& [tid, t] : proc.threads) {
            EXPECT_FALSE(t.name.empty());
            uint64_t last = 0;
            for (auto& s : t.samples) {
                EXPECT_GE(s.ts_ns, last) << "samples out of time order";
                last = s.ts_ns;
                EXPECT_EQ(s.kind, pbp::SampleKind::Cpu);
                EXPECT_EQ(s.weight_ns, p.run.period_ns) << "an on-CPU sample weighs one period";
                EXPECT_LT(s.stack, p.stacks.size());
                if (s.stack >= p.stacks.size()) continue;
                const auto& st = p.stacks.at(s.stack);
                for (uint32_t f : st) EXPECT_LT(f, p.frames.size());
                if (!st.empty() && st.back() < p.frames.size()) n[p.frames.at(st.back()).name]++;
            }
        }
    }
    return n;
}

struct Events {
    std::set<pid_t> added;
    std::vector<std::string> errors;
    pbp::EventSink sink() {
        return [this](const EngineEvent& e) {
            if (e.kind == EngineEvent::TargetAdded) added.insert(e.pid);
            if (e.kind == EngineEvent::Error) errors.push_back(e.message);
        };
    }
};

// Polls for this long by the clock (a poll returns early when records arrive).
void poll_for(Engine& engine, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) ASSERT_GE(engine.poll(50), -EINTR);
}

TEST(Engine, SnapshotsWhileSamplingThenStop) {
    auto py = spinner("engine_hot");
    ASSERT_EQ(py.read_lines(1, 30), std::vector<std::string>{"ready"}) << py.err();

    EngineConfig ec;
    ec.rate_hz = 199;
    Status st;
    auto engine = Engine::start(ec, st);
    ASSERT_TRUE(engine) << st.message;
    SessionConfig sc;
    sc.targets.pids = {py.pid()};
    Events ev;
    Session* s = engine->subscribe(sc, ev.sink(), st);
    ASSERT_TRUE(s) << st.message;
    EXPECT_EQ(ev.added, std::set<pid_t>{py.pid()});

    poll_for(*engine, 1.0);
    Profile a = s->snapshot();
    auto na = leaf_counts(a);
    poll_for(*engine, 1.0);
    Profile b = s->snapshot();
    auto nb = leaf_counts(b);
    EXPECT_FALSE(s->done());

    ASSERT_EQ(a.processes.size(), 1u);
    // 199 per CPU-second: at least a quarter of a CPU for each second polled.
    EXPECT_GT(a.total_samples(), 50u);
    EXPECT_GT(b.total_samples(), a.total_samples() + 50u);
    EXPECT_GE(nb["engine_hot"], na["engine_hot"]);
    EXPECT_GT(na["engine_hot"], a.total_samples() * 9 / 10);
    // The first snapshot is a copy: later samples did not change it.
    EXPECT_EQ(leaf_counts(a), na);
    EXPECT_EQ(a.run.target, "pid " + std::to_string(py.pid()));
    EXPECT_EQ(a.processes.at(py.pid()).python.rfind("3.11", 0), 0u) << a.processes.at(py.pid()).python;

    Profile f = engine->stop(s);
    auto nf = leaf_counts(f);
    EXPECT_GE(f.total_samples(), b.total_samples());
    EXPECT_GT(nf["engine_hot"], f.total_samples() * 9 / 10);
    EXPECT_GT(f.run.end_mono_ns, f.run.start_mono_ns);
    EXPECT_TRUE(ev.errors.empty()) << ev.errors.front();
}

TEST(Engine, TwoSessionsOneProgramEachWithItsOwnTargets) {
    auto p1 = spinner("first_spin");
    auto p2 = spinner("second_spin");
    ASSERT_EQ(p1.read_lines(1, 30).size(), 1u) << p1.err();
    ASSERT_EQ(p2.read_lines(1, 30).size(), 1u) << p2.err();

    Status st;
    EngineConfig ec;
    ec.rate_hz = 199;
    auto engine = Engine::start(ec, st);
    ASSERT_TRUE(engine) << st.message;
    Events e1, e2;
    SessionConfig c1, c2;
    c1.targets.pids = {p1.pid()};
    c2.targets.pids = {p2.pid(), p1.pid()};
    Session* s1 = engine->subscribe(c1, e1.sink(), st);
    ASSERT_TRUE(s1) << st.message;
    poll_for(*engine, 0.5);
    Session* s2 = engine->subscribe(c2, e2.sink(), st);
    ASSERT_TRUE(s2) << st.message;
    poll_for(*engine, 1.5);

    Profile a = engine->stop(s1);
    auto na = leaf_counts(a);
    // The second session goes on alone: the first's end released nothing it needs.
    poll_for(*engine, 0.5);
    Profile b = engine->stop(s2);
    auto nb = leaf_counts(b);

    ASSERT_EQ(a.processes.size(), 1u);
    EXPECT_TRUE(a.processes.count(p1.pid()));
    EXPECT_EQ(na.count("second_spin"), 0u) << "a session sees only its own targets";
    for (auto& f : a.frames.all()) EXPECT_NE(f.name, "second_spin") << "another session's frame leaked in";
    // 199 Hz over 2 s: at least a quarter of a CPU each (two spinners share two CPUs).
    EXPECT_GT(na["first_spin"], 100u);

    ASSERT_EQ(b.processes.size(), 2u);
    EXPECT_GT(nb["second_spin"], 100u);
    EXPECT_GT(nb["first_spin"], 100u);
    // Session 2 joined later: none of its samples predate its start.
    for (auto& [pid, p] : b.processes)
        for (auto& [tid, t] : p.threads)
            for (auto& s : t.samples) EXPECT_GE(s.ts_ns, b.run.start_mono_ns);
    EXPECT_GT(b.run.start_mono_ns, a.run.start_mono_ns);
}

}  // namespace
