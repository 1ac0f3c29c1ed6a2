// The run summary's mode lines (summary/text_summary.cpp, run_outcome.cpp): which mode ran,
// the time seen on and off CPU (summed weights by kind, not sample counts), wall's
// --min-block and its aggregate samples, gil's kept time, and the GIL states; through the
// agent's JSON the same text.
#include <gtest/gtest.h>

#include <string>

#include "summary/run_outcome.h"
#include "summary/text_summary.h"
#include "synthetic_profile.h"

namespace pbp {
namespace {

constexpr uint64_t kStart = 7'000'000'000ULL;
constexpr uint64_t kPeriod = 10'000'000;  // 100 Hz

// One process, one thread; samples added one by one with their kind, weight and GIL state.
struct OneThread {
    Profile p;
    uint32_t stack = 0, leaf_sleep = 0;
    uint64_t ts = kStart;

    explicit OneThread(ProfileMode mode, uint64_t min_block_ns = 0) {
        p.run.target = "pid 4242";
        p.run.start_mono_ns = kStart;
        p.run.end_mono_ns = kStart + 10'000'000'000ULL;
        p.run.rate_hz = 100;
        p.run.period_ns = kPeriod;
        p.run.mode = mode;
        p.run.min_block_ns = min_block_ns;
        uint32_t f = p.frames.intern(Frame{"work", "/srv/app.py", 3, false});
        uint32_t s = p.frames.intern(Frame{wait_leaf(WaitReason::Sleep), "", 0, true});
        stack = p.stacks.intern({f});
        leaf_sleep = p.stacks.intern({f, s});
        auto& pr = p.processes[4242];
        pr.pid = pr.ns_pid = 4242;
        pr.comm = "python3";
        pr.threads[4242].tid = 4242;
    }
    void cpu(int n, GilState gil = GilState::NA) {
        for (int i = 0; i < n; i++) add({ts += kPeriod, stack, 0, SampleKind::Cpu, kPeriod, gil});
    }
    void off(uint64_t weight_ns, bool aggregate = false, GilState gil = GilState::NA,
             WaitReason why = WaitReason::Sleep) {
        add({ts += weight_ns, leaf_sleep, 0, SampleKind::OffCpu, weight_ns, gil, why, aggregate});
    }
    void add(Sample s) { p.processes[4242].threads[4242].samples.push_back(s); }
    RunOutcome outcome() const { return run_outcome(p, RunFacts{1, false, false, false, {}}, {}, 0, false); }
};

TEST(RunSummary, CpuModeSaysTheOnCpuTimeAndThatOffCpuIsNotSampled) {
    // The synthetic --all-python run: every sample on CPU, one period each.
    Profile p = test::synthetic_profile(2, 20, 99);
    const ModeTotals t = mode_totals(p);
    EXPECT_EQ(t.mode, ProfileMode::Cpu);
    EXPECT_EQ(t.on_cpu_ns, p.total_samples() * p.run.period_ns);
    EXPECT_EQ(t.on_cpu_ns, p.total_weight_ns(SampleKind::Cpu));
    EXPECT_EQ(t.off_cpu_ns, 0u);
    char want[200];
    snprintf(want, sizeof want,
             "  mode cpu: %.3f s on CPU (time off CPU is not sampled in this mode; --mode wall adds it)\n",
             t.on_cpu_ns / 1e9);
    EXPECT_EQ(mode_lines(t), want) << "no GIL line while no sample's GIL state is known";
}

TEST(RunSummary, WallModeSumsWeightsByKindAndNamesTheMinBlock) {
    OneThread r(ProfileMode::Wall, 2'000'000);
    r.cpu(150);                       // 1.5 s on CPU
    r.off(6'000'000'000);             // one long interval: 6 s
    r.off(1'234'567'890);             // 1.234567890 s
    r.off(2'000'100, true);           // aggregates of intervals under 2 ms: 4.000200 ms
    r.off(2'000'100, true);
    const RunOutcome o = r.outcome();
    EXPECT_EQ(o.mode.on_cpu_ns, 1'500'000'000u);
    EXPECT_EQ(o.mode.off_cpu_ns, 7'238'568'090u);
    EXPECT_EQ(o.mode.aggregate_ns, 4'000'200u);
    EXPECT_EQ(o.mode.min_block_ns, 2'000'000u);
    const std::string text = o.text("/tmp/w.json");
    EXPECT_NE(text.find("Wrote /tmp/w.json: 154 samples, 1 process, 1 thread, 0 lost, 0 unresolved\n"
                        "  mode wall: 1.500 s on CPU, 7.239 s off CPU (0.004 s of it in intervals shorter than the "
                        "2 ms --min-block, summed per thread and reason)\n"),
              std::string::npos)
        << text;
}

TEST(RunSummary, MinBlockIsWrittenAsTheUserWouldWriteIt) {
    for (auto [ns, says] : std::vector<std::pair<uint64_t, std::string>>{
             {10'000, "10 us"}, {500'000, "500 us"}, {1'000'000, "1 ms"}, {2'500'000, "2.5 ms"},
             {250'000'000, "250 ms"}, {1'000'000'000, "1 s"}}) {
        OneThread r(ProfileMode::Wall, ns);
        r.off(5'000'000);
        EXPECT_NE(mode_lines(mode_totals(r.p)).find("the " + says + " --min-block"), std::string::npos) << says;
    }
}

TEST(RunSummary, GilModeSaysWhatWasKept) {
    OneThread r(ProfileMode::Gil);
    r.cpu(42, GilState::Held);
    const std::string text = mode_lines(mode_totals(r.p));
    EXPECT_EQ(text,
              "  mode gil: 0.420 s on CPU holding the GIL kept; 0.000 s on CPU not holding it left out (0 samples)\n"
              "  GIL: 0.420 s held\n");
}

// What gil mode left out is counted (by the engine, in RunInfo) and said, its GIL states in
// the GIL line; a process whose GIL is not known gets one warning line; both cross the
// agent's JSON.
TEST(RunSummary, GilModeSaysWhatWasLeftOutAndWhichProcessesHaveNoGil) {
    OneThread r(ProfileMode::Gil);
    r.cpu(42, GilState::Held);
    r.p.run.gil_left_out_ns = {{GilState::Neither, 300'000'000}, {GilState::NA, 50'000'000}};
    r.p.run.gil_left_out_samples = 35;
    r.p.run.gil_unknown = {{4242, "a free-threaded build: it has no GIL"}};
    const RunOutcome o = r.outcome();
    EXPECT_EQ(mode_lines(o.mode),
              "  mode gil: 0.420 s on CPU holding the GIL kept; 0.350 s on CPU not holding it left out (35 samples)\n"
              "  GIL: 0.420 s held, 0.300 s neither, 0.050 s n/a (not known)\n"
              "  warning: 1 process has no known GIL state and --mode gil keeps none of its samples (PID 4242: a "
              "free-threaded build: it has no GIL); use --mode cpu or --mode wall for it\n");
    const nlohmann::json j = to_json(o);
    EXPECT_EQ(j.at("gil_left_out_samples"), 35u);
    EXPECT_EQ(j.at("gil_left_out_ns"), (nlohmann::json{{"neither", 300'000'000u}, {"n/a", 50'000'000u}}));
    EXPECT_EQ(j.at("gil_unknown"), nlohmann::json::parse(R"([{"pid":4242,"reason":"a free-threaded build: it has no GIL"}])"));
    RunOutcome back;
    std::string error;
    ASSERT_TRUE(from_json(j, back, error)) << error;
    EXPECT_EQ(back.mode, o.mode);
    // Other modes: neither line (nothing is left out there, and n/a is in the GIL line).
    OneThread w(ProfileMode::Wall, 1'000'000);
    w.cpu(10, GilState::Held);
    w.p.run.gil_unknown = {{4242, "x"}};
    EXPECT_EQ(mode_lines(mode_totals(w.p)).find("warning"), std::string::npos);
}

TEST(RunSummary, GilStatesAreSummedByWeightWhenAnyIsKnown) {
    OneThread r(ProfileMode::Wall, 1'000'000);
    r.cpu(30, GilState::Held);
    r.cpu(10, GilState::Neither);
    r.off(250'000'000, false, GilState::Waiting, WaitReason::Gil);
    r.off(50'000'000, false, GilState::Neither);
    r.cpu(5);  // a process whose GIL is not known
    const ModeTotals t = mode_totals(r.p);
    EXPECT_EQ(t.gil_ns.at(GilState::Held), 300'000'000u);
    EXPECT_EQ(t.gil_ns.at(GilState::Waiting), 250'000'000u);
    EXPECT_EQ(t.gil_ns.at(GilState::Neither), 150'000'000u);
    EXPECT_EQ(t.gil_ns.at(GilState::NA), 50'000'000u);
    const std::string text = mode_lines(t);
    EXPECT_NE(text.find("  GIL: 0.300 s held, 0.250 s waiting, 0.150 s neither, 0.050 s n/a (not known)\n"),
              std::string::npos)
        << text;
    // A free-threaded build: every state n/a, so no GIL line at all (never a guess).
    OneThread ft(ProfileMode::Wall, 1'000'000);
    ft.cpu(10);
    ft.off(10'000'000);
    EXPECT_EQ(mode_lines(mode_totals(ft.p)).find("GIL"), std::string::npos);
}

TEST(RunSummary, ModeTotalsCrossTheAgentsJsonUnchanged) {
    OneThread r(ProfileMode::Wall, 500'000);
    r.cpu(3, GilState::Held);
    r.off(7'000'000, false, GilState::Waiting, WaitReason::Gil);
    r.off(600'000, true, GilState::Neither);
    const RunOutcome o = r.outcome();
    const nlohmann::json j = to_json(o);
    EXPECT_EQ(j.at("mode"), "wall");
    EXPECT_EQ(j.at("on_cpu_ns"), 30'000'000u);
    EXPECT_EQ(j.at("off_cpu_ns"), 7'600'000u);
    EXPECT_EQ(j.at("min_block_ns"), 500'000u);
    EXPECT_EQ(j.at("aggregate_ns"), 600'000u);
    EXPECT_EQ(j.at("gil_ns"), (nlohmann::json{{"held", 30'000'000u}, {"waiting", 7'000'000u}, {"neither", 600'000u}}));
    RunOutcome back;
    std::string error;
    ASSERT_TRUE(from_json(j, back, error)) << error;
    EXPECT_EQ(back.mode, o.mode);
    EXPECT_EQ(back.text("x"), o.text("x"));
    for (const char* bad : {R"("mode":"fast")", R"("gil_ns":{"holding":1})"}) {
        nlohmann::json broken = j;
        nlohmann::json patch = nlohmann::json::parse(std::string("{") + bad + "}");
        broken.update(patch);
        RunOutcome out;
        EXPECT_FALSE(from_json(broken, out, error)) << bad;
        EXPECT_NE(error.find("malformed"), std::string::npos) << error;
    }
    nlohmann::json missing = j;
    missing.erase("off_cpu_ns");
    RunOutcome out;
    EXPECT_FALSE(from_json(missing, out, error));
}

TEST(RunSummary, ThreadsByTimeUnderTheirNamesBusiestFirst) {
    OneThread one(ProfileMode::Wall);
    one.cpu(3);
    EXPECT_EQ(top_threads(one.p), "") << "one thread: nothing to compare";
    auto& pr = one.p.processes[4242];
    pr.threads[4242].name = "MainThread";
    auto& k = pr.threads[4243];
    k.tid = 4243;
    k.name = "\xe8\xa8\x88\xe7\xae\x97";  // CJK, as read from the interpreter
    k.samples.push_back({kStart + 1, one.stack, 0, SampleKind::OffCpu, 90'000'000});  // weights, not counts
    pr.threads[4244].tid = 4244;  // no samples: not listed
    EXPECT_EQ(top_threads(one.p),
              "Threads by time (2 threads):\n"
              "   75.0%    0.090 s  \xe8\xa8\x88\xe7\xae\x97 (tid 4243)\n"
              "   25.0%    0.030 s  MainThread (tid 4242)\n");
    EXPECT_EQ(top_threads(one.p, 1),
              "Threads by time (2 threads):\n"
              "   75.0%    0.090 s  \xe8\xa8\x88\xe7\xae\x97 (tid 4243)\n"
              "  ... and 1 more\n");
    EXPECT_NE(one.outcome().top.find("Threads by time"), std::string::npos) << "in the run's summary";
}

// The run's length as a person says it (before: rounded to whole seconds, "the 2 s run" of a
// -d 1.5 run, "the 0 s run" of a -d 0.3 one), and as asked when the run lasted that long: the
// clock's overshoot is the time to notice the deadline (a -d 1.5 run measures 1.59 s).
TEST(RunSummary, TheRunsLengthIsSaidAsAskedOrMeasured) {
    for (auto [s, text] : std::vector<std::pair<double, std::string>>{{1.5, "1.5"},
                                                                      {10, "10"},
                                                                      {0.3, "0.3"},
                                                                      {2, "2"},
                                                                      {1.593, "1.6"},
                                                                      {9.97, "10"},
                                                                      {10.05, "10"},
                                                                      {125.4, "125"},
                                                                      {0.322, "0.32"},
                                                                      {0.042, "0.042"},
                                                                      {0.0031, "0.003"},
                                                                      {0, "0"}})
        EXPECT_EQ(run_seconds_text(s), text) << s;

    // A launched command in which no CPython was found: the line that ends the run.
    auto nothing_found = [](double measured_s, double asked_s) {
        OneThread one(ProfileMode::Cpu);
        one.p.run.end_mono_ns = kStart + static_cast<uint64_t>(measured_s * 1e9);
        RunFacts facts{0, true, false, false, {}, "", asked_s};
        return run_outcome(one.p, facts, {}, 0, false).nothing_found;
    };
    EXPECT_EQ(nothing_found(1.593, 1.5),
              "no CPython process was found in the launched command during the 1.5 s run; nothing was written");
    EXPECT_NE(nothing_found(10.05, 10).find(" during the 10 s run;"), std::string::npos);
    EXPECT_NE(nothing_found(0.322, 0.3).find(" during the 0.3 s run;"), std::string::npos);
    // Ended before the duration (the command exited, Ctrl-C) or none asked: as measured.
    EXPECT_NE(nothing_found(2.21, 5).find(" during the 2.2 s run;"), std::string::npos);
    EXPECT_NE(nothing_found(0.0031, 0).find(" during the 0.003 s run;"), std::string::npos);

    // A target never sampled says the same length.
    OneThread idle(ProfileMode::Cpu);
    idle.p.processes[4242].threads.clear();
    RunFacts facts{1, true, false, false, {}, "", 1.5};
    idle.p.run.end_mono_ns = kStart + 1'593'000'000;
    EXPECT_NE(run_outcome(idle.p, facts, {}, 0, false).text("x.json").find(
                  "pybpfprof: PID 4242 (python3) was not sampled during the 1.5 s run"),
              std::string::npos);
}

// Why a target has no sample, from the CPU time it used (its resource readings) against the
// sampling period. Before, always "it used less than one sample period of CPU", also of a
// process busy for the whole 1.1 s run at -r 1.
TEST(RunSummary, NotSampledSaysTheCpuItUsedAgainstThePeriod) {
    EXPECT_EQ(cpu_seconds({}), -1);
    EXPECT_EQ(cpu_seconds({{kStart, -1, 0}}), -1);
    // A baseline, then 100% of a CPU for 0.5 s and 40% for 0.5 s.
    EXPECT_DOUBLE_EQ(cpu_seconds({{kStart, -1, 0}, {kStart + 500'000'000, 100, 0}, {kStart + 1'000'000'000, 40, 0}}), 0.7);

    EXPECT_EQ(not_sampled_why(-1, 99), "it used less than one sample period of CPU");
    EXPECT_EQ(not_sampled_why(0, 99), "it used less than one sample period of CPU: under 10 ms, against 10 ms at -r 99");
    EXPECT_EQ(not_sampled_why(0, 999), "it used less than one sample period of CPU");
    EXPECT_EQ(not_sampled_why(0.3, 1), "it used less than one sample period of CPU: 300 ms, against 1 s at -r 1");
    EXPECT_EQ(not_sampled_why(1.1, 1), "it used 1.1 s of CPU, about 1.1 sample periods of 1 s at -r 1, and no sample "
                                       "fell in them; a higher -r or a longer -d samples it");

    // In the run's text, and through the agent's JSON unchanged.
    OneThread busy(ProfileMode::Cpu);
    busy.p.run.rate_hz = 1;
    busy.p.run.period_ns = 1'000'000'000;
    auto& pr = busy.p.processes[4242];
    pr.threads.clear();
    pr.resources = {{kStart, -1, 0}, {kStart + 1'100'000'000, 100, 0}};
    busy.p.run.end_mono_ns = kStart + 1'100'000'000;
    const RunOutcome o = run_outcome(busy.p, RunFacts{1, false, false, false, {}, "", 0}, {}, 0, false);
    EXPECT_NE(o.text("x.json").find("pybpfprof: PID 4242 (python3) was not sampled during the 1.1 s run (it used 1.1 s "
                                    "of CPU, about 1.1 sample periods of 1 s at -r 1, and no sample fell in them; a "
                                    "higher -r or a longer -d samples it); its profile is empty\n"),
              std::string::npos)
        << o.text("x.json");
    RunOutcome back;
    std::string error;
    ASSERT_TRUE(from_json(to_json(o), back, error)) << error;
    EXPECT_EQ(back.text("x.json"), o.text("x.json"));
    // From an agent that sends neither (older than them): the plain reason.
    nlohmann::json old = to_json(o);
    old.erase("rate_hz");
    old["not_sampled"][0].erase("cpu_s");
    RunOutcome from_old;
    ASSERT_TRUE(from_json(old, from_old, error)) << error;
    EXPECT_NE(from_old.text("x.json").find("(it used less than one sample period of CPU); its profile is empty"),
              std::string::npos)
        << from_old.text("x.json");
}

}  // namespace
}  // namespace pbp
