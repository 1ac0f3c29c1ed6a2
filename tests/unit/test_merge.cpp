// Merging profiles (engine/merge.h) and `pybpfprof merge`: profiles of two machines whose
// processes have the same PIDs stay apart and show their real PID and host in every output;
// every sample keeps its wall-clock time on the merged clock; weights (and so totals) survive
// different rates; the run is summed; the CLI reads only pybpfprof's own format and says so.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "cli/merge_command.h"
#include "engine/merge.h"
#include "engine/profile.h"
#include "export/exporter.h"
#include "export/html_report.h"
#include "export/raw.h"
#include "pprof_reader.h"
#include "profile_diff.h"
#include "test_support.h"
#include "mixed_profile.h"
#include "wall_profile.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace pbp {
namespace {

constexpr uint64_t kPeriod = 10'101'010;  // 99 Hz

// One machine's profile: pid 100 (tid 100 and 101) running work() and, in a second process
// pid 200, idle(). mono_start is that machine's CLOCK_MONOTONIC at its start; unix_start its
// wall clock then.
Profile machine(const std::string& host, uint64_t mono_start, int64_t unix_start, const std::string& leaf,
                uint64_t period = kPeriod, int n = 100) {
    Profile p;
    p.run.target = "all-python";
    p.run.start_mono_ns = mono_start;
    p.run.end_mono_ns = mono_start + 2'000'000'000ULL;
    p.run.start_unix_ns = unix_start;
    p.run.rate_hz = 1e9 / static_cast<double>(period);
    p.run.period_ns = period;
    p.run.kernel = "6.1.0-" + host;
    p.run.host = host;
    p.run.version = "0.1.0";
    p.run.max_depth = 1024;
    p.run.bpf_loop = true;
    p.run.lost = 2;
    p.run.unresolved = {{"no-thread-state", 3}};
    const uint32_t mod = p.frames.intern({"<module>", "/app/main.py", 1, false});
    const uint32_t fn = p.frames.intern({leaf, "/app/" + leaf + ".py", 10, false});
    const uint32_t stack = p.stacks.intern({mod, fn});
    const uint32_t idle = p.stacks.intern({mod});
    for (uint32_t pid : {100u, 200u}) {
        ProcessProfile& pr = p.processes[pid];
        pr.pid = pr.ns_pid = pid;
        pr.comm = "python3";
        pr.cmdline = "python3 -m distributed.cli." + std::string(pid == 100 ? "dask_worker" : "helper");
        pr.first_sample_ns = mono_start + 1'000'000;
        pr.last_sample_ns = mono_start + 1'000'000 + (n - 1) * period;
        pr.resources = {{mono_start + 500'000'000ULL, -1, 100 << 20}, {mono_start + 1'500'000'000ULL, 99, 101 << 20}};
        for (uint32_t tid : {pid, pid + 1}) {
            ThreadProfile& t = pr.threads[tid];
            t.tid = t.ns_tid = tid;
            t.name = tid == pid ? "MainThread" : "Dask-Worker-Thread";
            for (int k = 0; k < n; k++)
                t.samples.push_back({mono_start + 1'000'000 + k * period, pid == 100 ? stack : idle,
                                     static_cast<uint16_t>(k % 2), SampleKind::Cpu, period});
        }
    }
    return p;
}

// Two machines booted at different times (their monotonic clocks far apart); B started
// 2.5 s after A in wall-clock time.
struct TwoMachines {
    static constexpr int64_t kUnixA = 1'795'260'680'000'000'000LL;
    Profile a = machine("node-a", 5'000'000'000ULL, kUnixA, "work");
    Profile b = machine("node-b", 900'000'000'000ULL, kUnixA + 2'500'000'000LL, "work");
    MergeOptions options() const {
        MergeOptions o;
        o.labels = {{{"role", "scheduler"}}, {{"role", "worker"}, {"worker", "tcp://10.0.0.2:4000"}}};
        return o;
    }
    Profile merged() const {
        std::string error;
        Profile m = merge_profiles({a, b}, options(), error);
        EXPECT_EQ(error, "");
        return m;
    }
};

std::string exported(const std::string& format, const Profile& p) {
    std::ostringstream os;
    make_exporter(format)->write(p, ExportOptions{}, os);
    return os.str();
}

// Processes of the merged profile by (host, pid).
std::map<std::pair<std::string, uint32_t>, const ProcessProfile*> by_host(const Profile& m) {
    std::map<std::pair<std::string, uint32_t>, const ProcessProfile*> r;
    for (const auto& [_, p] : m.processes) r[{p.labels.at("host"), p.pid}] = &p;
    return r;
}

TEST(Merge, SamePidsOnTwoHostsStayApartWithTheirLabels) {
    TwoMachines t;
    Profile m = t.merged();
    ASSERT_EQ(m.processes.size(), 4u);
    std::vector<uint32_t> keys;
    for (auto& [k, _] : m.processes) keys.push_back(k);
    EXPECT_EQ(keys, (std::vector<uint32_t>{1, 2, 3, 4})) << "synthetic keys, input order then pid";
    auto procs = by_host(m);
    ASSERT_EQ(procs.size(), 4u) << "(host, pid) tells them apart";
    const ProcessProfile& sched = *procs.at({"node-a", 100});
    const ProcessProfile& worker = *procs.at({"node-b", 100});
    EXPECT_EQ(sched.pid, 100u);
    EXPECT_EQ(worker.pid, 100u);
    EXPECT_EQ(sched.labels, (std::map<std::string, std::string>{{"host", "node-a"}, {"role", "scheduler"}}));
    EXPECT_EQ(worker.labels, (std::map<std::string, std::string>{
                                 {"host", "node-b"}, {"role", "worker"}, {"worker", "tcp://10.0.0.2:4000"}}));
    EXPECT_EQ(worker.where(), "role=worker, worker=tcp://10.0.0.2:4000, host node-b");
    EXPECT_EQ(procs.at({"node-b", 200})->threads.size(), 2u);
    // One frame table: the frames both machines share are one entry.
    EXPECT_EQ(m.frames.size(), 2u);
    EXPECT_EQ(m.stacks.size(), 2u);
    EXPECT_EQ(m.total_samples(), t.a.total_samples() + t.b.total_samples());
    EXPECT_EQ(m.total_weight_ns(SampleKind::Cpu), t.a.total_weight_ns(SampleKind::Cpu) + t.b.total_weight_ns(SampleKind::Cpu));
}

// Every sample of either machine is at the same wall-clock time in the merged profile, and
// the run spans A's start to B's end (2.5 s + 2 s).
TEST(Merge, EveryTimestampKeepsItsWallClockTime) {
    TwoMachines t;
    Profile m = t.merged();
    EXPECT_EQ(m.run.start_unix_ns, TwoMachines::kUnixA);
    EXPECT_EQ(m.run.start_mono_ns, t.a.run.start_mono_ns) << "the first input's clock is the merged clock";
    EXPECT_EQ(m.run.end_mono_ns - m.run.start_mono_ns, 4'500'000'000ULL);
    auto procs = by_host(m);
    for (const auto& [in, host] : {std::pair<const Profile*, std::string>{&t.a, "node-a"}, {&t.b, "node-b"}}) {
        for (const auto& [pid, orig] : in->processes) {
            const ProcessProfile& merged = *procs.at({host, pid});
            EXPECT_EQ(m.run.unix_ns(merged.first_sample_ns), in->run.unix_ns(orig.first_sample_ns));
            EXPECT_EQ(m.run.unix_ns(merged.last_sample_ns), in->run.unix_ns(orig.last_sample_ns));
            ASSERT_EQ(merged.resources.size(), orig.resources.size());
            for (size_t i = 0; i < orig.resources.size(); i++)
                EXPECT_EQ(m.run.unix_ns(merged.resources[i].mono_ns), in->run.unix_ns(orig.resources[i].mono_ns));
            for (const auto& [tid, th] : orig.threads) {
                const auto& ms = merged.threads.at(tid).samples;
                ASSERT_EQ(ms.size(), th.samples.size());
                for (size_t i = 0; i < ms.size(); i++) {
                    EXPECT_EQ(m.run.unix_ns(ms[i].ts_ns), in->run.unix_ns(th.samples[i].ts_ns));
                    EXPECT_EQ(ms[i].weight_ns, th.samples[i].weight_ns);
                    EXPECT_EQ(ms[i].cpu, th.samples[i].cpu);
                    // The same frames, through the new tables.
                    std::vector<std::string> want, got;
                    for (uint32_t f : in->stacks.at(th.samples[i].stack)) want.push_back(in->frames.at(f).name);
                    for (uint32_t f : m.stacks.at(ms[i].stack)) got.push_back(m.frames.at(f).name);
                    EXPECT_EQ(got, want);
                }
            }
        }
    }
    // The order of the inputs does not matter: B first gives the same times.
    std::string error;
    MergeOptions swapped;
    Profile m2 = merge_profiles({t.b, t.a}, swapped, error);
    ASSERT_EQ(error, "");
    EXPECT_EQ(m2.run.start_unix_ns, TwoMachines::kUnixA);
    EXPECT_EQ(m2.run.end_mono_ns - m2.run.start_mono_ns, 4'500'000'000ULL);
}

// The outputs show each process's real PID and its machine.
TEST(Merge, EveryExporterShowsTheRealPidAndHost) {
    Profile m = TwoMachines().merged();
    // speedscope: one profile per thread, named with the pid, the labels and the host.
    json ss = json::parse(exported("speedscope", m));
    std::set<std::string> names;
    for (auto& p : ss["profiles"]) names.insert(p["name"].get<std::string>());
    EXPECT_TRUE(names.count("python3 -m distributed.cli.dask_worker (pid 100) MainThread (tid 100) [role=scheduler, host "
                            "node-a]"))
        << json(names).dump(1);
    EXPECT_TRUE(names.count("python3 -m distributed.cli.dask_worker (pid 100) MainThread (tid 100) [role=worker, "
                            "worker=tcp://10.0.0.2:4000, host node-b]"))
        << json(names).dump(1);
    EXPECT_EQ(names.size(), 8u);
    // collapsed: the process part of each line.
    std::string folded = exported("collapsed", m);
    EXPECT_NE(folded.find("python3 -m distributed.cli.dask_worker (pid 100) [role=scheduler, host node-a];MainThread (tid "
                          "100);<module> (/app/main.py:1);work (/app/work.py:10) 100\n"),
              std::string::npos)
        << folded;
    EXPECT_NE(folded.find("(pid 100) [role=worker, worker=tcp://10.0.0.2:4000, host node-b];MainThread (tid 100)"),
              std::string::npos)
        << folded;
    // pprof: pid and host labels on the samples.
    auto pp = test::parse_pprof(exported("pprof", m));
    std::set<std::pair<int64_t, std::string>> pid_host;
    for (const auto& s : pp.sample()) {
        int64_t pid = -1;
        std::string host;
        for (const auto& l : s.label()) {
            const std::string& key = pp.string_table(l.key());
            if (key == "pid") pid = l.num();
            if (key == "host") host = pp.string_table(l.str());
        }
        pid_host.insert({pid, host});
    }
    EXPECT_EQ(pid_host, (std::set<std::pair<int64_t, std::string>>{
                            {100, "node-a"}, {200, "node-a"}, {100, "node-b"}, {200, "node-b"}}));
    // HTML: the embedded processes have their pid and labels; the run its inputs.
    std::string html = render_html_report(m);
    const std::string open = "<script type=\"application/json\" id=\"pbp-data\">";
    size_t at = html.find(open) + open.size();
    json d = json::parse(html.substr(at, html.find("</script>", at) - at));
    ASSERT_EQ(d["procs"].size(), 4u);
    EXPECT_EQ(d["procs"][2]["pid"], 100);
    EXPECT_EQ(d["procs"][2]["labels"]["host"], "node-b");
    EXPECT_EQ(d["procs"][2]["name"], "python3 -m distributed.cli.dask_worker (pid 100)");
    ASSERT_EQ(d["run"]["merged_from"].size(), 2u);
    EXPECT_EQ(d["run"]["merged_from"][1]["host"], "node-b");
    EXPECT_EQ(d["run"]["merged_from"][1]["labels"]["role"], "worker");
    EXPECT_EQ(d["run"]["host"], "node-a, node-b");
}

TEST(Merge, RunInfoIsSummedAndEachInputKept) {
    TwoMachines t;
    t.b.run.truncated = 5;
    t.b.run.unresolved["read-failed"] = 1;
    t.b.run.bpf_loop = false;
    t.b.run.max_depth = 256;
    std::string error;
    Profile m = merge_profiles({t.a, t.b}, t.options(), error);
    EXPECT_EQ(m.run.lost, 4u);
    EXPECT_EQ(m.run.truncated, 5u);
    EXPECT_EQ(m.run.unresolved, (std::map<std::string, uint64_t>{{"no-thread-state", 6}, {"read-failed", 1}}));
    EXPECT_EQ(m.run.kernel, "6.1.0-node-a, 6.1.0-node-b");
    EXPECT_EQ(m.run.host, "node-a, node-b");
    EXPECT_EQ(m.run.version, "0.1.0");
    EXPECT_EQ(m.run.max_depth, 256);
    EXPECT_FALSE(m.run.bpf_loop);
    EXPECT_EQ(m.run.rate_hz, t.a.run.rate_hz);
    EXPECT_EQ(m.run.period_ns, kPeriod);
    EXPECT_EQ(m.run.target, "role=scheduler on node-a + role=worker worker=tcp://10.0.0.2:4000 on node-b");
    ASSERT_EQ(m.merged_from.size(), 2u);
    EXPECT_TRUE(m.merged_from[0].run == t.a.run);
    EXPECT_TRUE(m.merged_from[1].run == t.b.run);
    EXPECT_EQ(m.merged_from[1].labels.at("worker"), "tcp://10.0.0.2:4000");
    MergeOptions named;
    named.target = "dask cluster";
    EXPECT_EQ(merge_profiles({t.a, t.b}, named, error).run.target, "dask cluster");
}

// A 99 Hz and a 199 Hz profile: each sample keeps its weight, so the CPU time of each is
// right; the merged period is the shorter, and the folded output counts nanoseconds.
TEST(Merge, DifferentRatesKeepEachSamplesWeight) {
    const uint64_t fast = 5'025'126;  // 199 Hz
    Profile a = machine("node-a", 5'000'000'000ULL, TwoMachines::kUnixA, "work");
    Profile b = machine("node-b", 7'000'000'000ULL, TwoMachines::kUnixA + 1'000'000'000, "crunch", fast, 300);
    std::string error;
    Profile m = merge_profiles({a, b}, {}, error);
    ASSERT_EQ(error, "");
    EXPECT_EQ(m.total_weight_ns(SampleKind::Cpu), 4 * 100 * kPeriod + 4 * 300 * fast);
    EXPECT_EQ(m.run.period_ns, fast);
    EXPECT_NEAR(m.run.rate_hz, 199, 0.01);
    std::string folded = exported("collapsed", m);
    EXPECT_NE(folded.find(";work (/app/work.py:10) " + std::to_string(100 * kPeriod) + "\n"), std::string::npos) << folded;
    EXPECT_NE(folded.find(";crunch (/app/crunch.py:10) " + std::to_string(300 * fast) + "\n"), std::string::npos) << folded;
}

// Wall mode profiles: every sample keeps its kind, weight, GIL state, wait reason and
// aggregate mark; the mode is the inputs' when they agree, wall when one input is wall, and
// survives the file (pbp version 3).
TEST(Merge, KeepsWallAndGilFields) {
    test::WallProfile w;
    Profile a = w.profile, b = w.profile;
    b.run.start_unix_ns += 5'000'000'000LL;  // another machine, five seconds later
    b.run.host = "node-b";
    std::string error;
    Profile m = merge_profiles({a, b}, {}, error);
    ASSERT_EQ(error, "");
    EXPECT_EQ(m.run.mode, ProfileMode::Wall);
    EXPECT_EQ(m.run.min_block_ns, 1'000'000u);
    std::map<std::tuple<GilState, WaitReason, bool, SampleKind>, uint64_t> got, want;
    for (const Profile* p : {&a, &b})
        for (const auto& [_, pr] : p->processes)
            for (const auto& [__, t] : pr.threads)
                for (const Sample& s : t.samples) want[{s.gil, s.wait, s.aggregate, s.kind}] += s.weight_ns;
    for (const auto& [_, pr] : m.processes)
        for (const auto& [__, t] : pr.threads)
            for (const Sample& s : t.samples) got[{s.gil, s.wait, s.aggregate, s.kind}] += s.weight_ns;
    EXPECT_EQ(got, want);
    const uint64_t held = got[{GilState::Held, WaitReason::None, false, SampleKind::Cpu}];
    EXPECT_EQ(held, 2 * 800 * test::WallProfile::kMs);
    // Through the file and back.
    Profile back;
    ASSERT_TRUE(read_raw(raw_json(m), back, error)) << error;
    EXPECT_TRUE(back == m) << test::profile_difference(m, back);

    // Mixed modes: wall wins over cpu and gil; cpu and gil give cpu; min-block is the largest.
    Profile c = machine("node-c", 1'000'000'000ULL, TwoMachines::kUnixA, "other");
    Profile g = machine("node-g", 1'000'000'000ULL, TwoMachines::kUnixA, "other");
    g.run.mode = ProfileMode::Gil;
    b.run.min_block_ns = 5'000'000;
    EXPECT_EQ(merge_profiles({c, a}, {}, error).run.mode, ProfileMode::Wall);
    EXPECT_EQ(merge_profiles({c, g}, {}, error).run.mode, ProfileMode::Cpu);
    EXPECT_EQ(merge_profiles({g, g}, {}, error).run.mode, ProfileMode::Gil);
    EXPECT_EQ(merge_profiles({a, b}, {}, error).run.min_block_ns, 5'000'000u);
}

// Native and kernel frames keep their kind and library through a merge (frames are
// interned anew: a Python frame and a native frame of the same name stay two frames).
TEST(Merge, KeepsFrameKindsAndLibraries) {
    Profile a = test::MixedProfile().profile, b = test::MixedProfile().profile;
    b.run.start_unix_ns += 3'000'000'000LL;
    b.run.host = "node-b";
    // In b, a Python function named like a's native one.
    const uint32_t py_b = b.frames.intern(Frame{"b", "/opt/app/main.py", 40, false});
    b.processes.begin()->second.threads.begin()->second.samples.front().stack = b.stacks.intern({py_b});
    std::string error;
    Profile m = merge_profiles({a, b}, {}, error);
    ASSERT_EQ(error, "");
    EXPECT_EQ(m.frames.size(), a.frames.size() + 1);
    std::map<std::pair<FrameKind, std::string>, uint64_t> got, want;
    auto count = [](const Profile& p, auto& into) {
        for (const auto& [_, pr] : p.processes)
            for (const auto& [__, t] : pr.threads)
                for (const Sample& s : t.samples)
                    for (uint32_t f : p.stacks.at(s.stack))
                        into[{p.frames.at(f).kind, p.frames.at(f).library}] += s.weight_ns;
    };
    count(a, want);
    count(b, want);
    count(m, got);
    EXPECT_EQ(got, want);
    EXPECT_GT((got[{FrameKind::Kernel, "[kernel]"}]), 0u);
    Profile back;
    ASSERT_TRUE(read_raw(raw_json(m), back, error)) << error;
    EXPECT_TRUE(back == m) << test::profile_difference(m, back);
}

// A merge of merges keeps every input once, and the hosts found the first time.
TEST(Merge, MergingAMergedProfileFlattensItsInputs) {
    TwoMachines t;
    Profile c = machine("node-c", 1'000'000'000ULL, TwoMachines::kUnixA + 10'000'000'000LL, "other");
    std::string error;
    MergeOptions o;
    o.labels = {{}, {{"role", "late"}}};
    Profile mm = merge_profiles({t.merged(), c}, o, error);
    ASSERT_EQ(error, "");
    ASSERT_EQ(mm.merged_from.size(), 3u);
    EXPECT_EQ(mm.merged_from[2].labels.at("role"), "late");
    EXPECT_EQ(mm.processes.size(), 6u);
    std::multiset<std::string> hosts;
    for (auto& [_, p] : mm.processes) hosts.insert(p.labels.at("host"));
    EXPECT_EQ(hosts.count("node-a"), 2u);
    EXPECT_EQ(hosts.count("node-b"), 2u);
    EXPECT_EQ(hosts.count("node-c"), 2u);
    EXPECT_EQ(mm.run.end_mono_ns - mm.run.start_mono_ns, 12'000'000'000ULL);
    // And through the file format.
    Profile back;
    std::ostringstream os;
    write_raw(mm, os);
    ASSERT_TRUE(read_raw(os.str(), back, error)) << error;
    EXPECT_EQ(test::profile_difference(mm, back), "");
}

TEST(Merge, OneInputKeepsItsTimes) {
    Profile a = machine("node-a", 5'000'000'000ULL, TwoMachines::kUnixA, "work");
    std::string error;
    Profile m = merge_profiles({a}, MergeOptions{}, error);
    ASSERT_EQ(error, "");
    EXPECT_EQ(m.run.start_mono_ns, a.run.start_mono_ns);
    EXPECT_EQ(m.run.end_mono_ns, a.run.end_mono_ns);
    EXPECT_EQ(m.run.target, "all-python");
    EXPECT_EQ(m.processes.at(1).threads.at(100).samples, a.processes.at(100).threads.at(100).samples);
    // Without a host label when asked.
    MergeOptions no_host;
    no_host.host_label = false;
    EXPECT_TRUE(merge_profiles({a}, no_host, error).processes.at(1).labels.empty());
}

// A machine whose readings precede the reference's clock origin: the merged clock moves up
// instead of wrapping below zero, and wall-clock times stay exact.
TEST(Merge, TimesBeforeTheReferenceClockDoNotWrap) {
    Profile a = machine("node-a", 100, TwoMachines::kUnixA, "work");  // booted 100 ns before
    a.processes.at(100).resources.clear();
    Profile b = machine("node-b", 50'000'000'000ULL, TwoMachines::kUnixA + 1'000, "work");
    b.processes.at(100).resources[0].mono_ns = 40'000'000'000ULL;  // read 10 s before b started
    std::string error;
    Profile m = merge_profiles({a, b}, {}, error);
    ASSERT_EQ(error, "");
    EXPECT_EQ(m.run.start_unix_ns, TwoMachines::kUnixA);
    const ProcessProfile* bp = by_host(m).at({"node-b", 100});
    EXPECT_EQ(m.run.unix_ns(bp->resources[0].mono_ns), b.run.unix_ns(40'000'000'000ULL));
    EXPECT_LT(bp->resources[0].mono_ns, m.run.start_mono_ns);
    EXPECT_EQ(m.run.unix_ns(m.processes.at(1).threads.at(100).samples[0].ts_ns),
              a.run.unix_ns(a.processes.at(100).threads.at(100).samples[0].ts_ns));
}

TEST(Merge, ErrorsAreOneLine) {
    TwoMachines t;
    std::string error;
    auto expect_error = [&](std::vector<Profile> in, const MergeOptions& o, const std::string& want) {
        Profile m = merge_profiles(std::move(in), o, error);
        EXPECT_EQ(error, want);
        EXPECT_TRUE(m == Profile{});
    };
    expect_error({}, {}, "nothing to merge: give at least one profile");
    Profile no_clock = t.b;
    no_clock.run.start_unix_ns = 0;
    expect_error({t.a, no_clock}, {},
                 "profile 2 has no wall-clock start time (run.start_unix_ns): it cannot be lined up with the others");
    Profile bad_stack = t.a;
    bad_stack.processes.at(200).threads.at(201).samples[3].stack = 9;
    expect_error({t.b, bad_stack}, {}, "profile 2: a sample of pid 200 tid 201 refers to stack 9 of 2");
    MergeOptions three;
    three.labels.resize(3);
    expect_error({t.a, t.b}, three, "labels for profile 3, but there are only 2 profiles");
}

TEST(MergeLabels, Syntax) {
    std::vector<std::map<std::string, std::string>> l;
    std::string error;
    ASSERT_TRUE(parse_merge_label("1:role=scheduler", 3, l, error)) << error;
    ASSERT_TRUE(parse_merge_label("2:worker=tcp://10.0.0.2:4000", 3, l, error)) << error;
    ASSERT_TRUE(parse_merge_label("cluster=prod=1", 3, l, error)) << error;
    EXPECT_EQ(l[0], (std::map<std::string, std::string>{{"cluster", "prod=1"}, {"role", "scheduler"}}));
    EXPECT_EQ(l[1], (std::map<std::string, std::string>{{"cluster", "prod=1"}, {"worker", "tcp://10.0.0.2:4000"}}));
    EXPECT_EQ(l[2], (std::map<std::string, std::string>{{"cluster", "prod=1"}}));
    struct Bad {
        std::string spec, error;
    };
    for (const Bad& b : std::vector<Bad>{
             {"4:role=x", "--label 4:role=x: there is no input 4 (inputs are 1 to 3)"},
             {"0:role=x", "--label 0:role=x: there is no input 0 (inputs are 1 to 3)"},
             {"role", "--label role: must be [N:]KEY=VALUE, N the input's position (1 = the first file; without N: "
                      "every input), KEY letters, digits, '_', '.' or '-' (e.g. --label 1:role=scheduler)"},
             {"1:=x", "--label 1:=x: must be [N:]KEY=VALUE, N the input's position (1 = the first file; without N: "
                      "every input), KEY letters, digits, '_', '.' or '-' (e.g. --label 1:role=scheduler)"},
             {"1:ro le=x", "--label 1:ro le=x: the key 'ro le' must start with a letter or '_' and hold only letters, "
                           "digits, '_', '.' or '-'"},
             {"1:role=", "--label 1:role=: the value is empty; [N:]KEY=VALUE, N the input's position (1 = the first "
                         "file; without N: every input), KEY letters, digits, '_', '.' or '-' (e.g. --label "
                         "1:role=scheduler)"},
         }) {
        EXPECT_FALSE(parse_merge_label(b.spec, 3, l, error)) << b.spec;
        EXPECT_EQ(error, b.error);
    }
}

// ------------------------------------------------------------------- the command line

struct Files {
    std::string dir = test::temp_dir();
    std::string put(const std::string& name, const Profile& p, const std::string& format = "pbp") {
        std::ofstream(dir + "/" + name, std::ios::binary) << exported(format, p);
        return dir + "/" + name;
    }
};

TEST(MergeCommand, MergesFilesIntoAnyFormat) {
    TwoMachines t;
    Files f;
    const std::string a = f.put("a.pbp", t.a), b = f.put("b.pbp", t.b);
    auto r = test::run({test::pybpfprof_bin(), "merge", a, b, "--label", "1:role=scheduler", "--label",
                        "2:worker=tcp://10.0.0.2:4000", "-o", f.dir + "/m.pbp"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("Wrote " + f.dir + "/m.pbp: 800 samples, 4 processes, 8 threads"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("pybpfprof merge " + f.dir + "/m.pbp"), std::string::npos) << "how to open it: " << r.err;
    EXPECT_NE(r.err.find("Top functions"), std::string::npos) << r.err;
    Profile m;
    std::string error;
    ASSERT_TRUE(read_raw(test::read_file(f.dir + "/m.pbp"), m, error)) << error;
    MergeOptions o;
    o.labels = {{{"role", "scheduler"}}, {{"worker", "tcp://10.0.0.2:4000"}}};
    Profile want = merge_profiles({t.a, t.b}, o, error);
    EXPECT_EQ(test::profile_difference(want, m), "");
    // Every format, by extension or -f; standard output.
    for (const auto& [out, format] : std::vector<std::pair<std::string, std::string>>{
             {"m.html", "html"}, {"m.speedscope.json", "speedscope"}, {"m.folded", "collapsed"}, {"m.pb.gz", "pprof"}}) {
        auto r2 = test::run({test::pybpfprof_bin(), "merge", a, b, "-o", f.dir + "/" + out, "--no-summary"});
        ASSERT_EQ(r2.status, 0) << r2.err;
        EXPECT_EQ(test::read_file(f.dir + "/" + out), exported(format, merge_profiles({t.a, t.b}, {}, error))) << out;
        EXPECT_EQ(r2.err.find("Top functions"), std::string::npos) << r2.err;
    }
    auto r3 = test::run({test::pybpfprof_bin(), "merge", a, b, "-o", "-", "-f", "collapsed"});
    ASSERT_EQ(r3.status, 0) << r3.err;
    EXPECT_EQ(r3.out, exported("collapsed", merge_profiles({t.a, t.b}, {}, error)));
}

// A wall mode profile (its .pbp, as the agent or a saved run gives it) turned into pprof,
// folded and speedscope by the real command, and each read by its real consumer: go tool
// pprof's totals per sample type are ours, the speedscope app loads the JSON and the folded
// file (with its unit line).
TEST(MergeCommand, WallProfileToEveryFormatReadByItsConsumer) {
    test::WallProfile w;
    Files f;
    const std::string in = f.put("wall.pbp", w.profile);
    for (const char* out : {"wall.pb.gz", "wall.folded", "wall.json"}) {
        auto r = test::run({test::pybpfprof_bin(), "merge", in, "-o", f.dir + "/" + out, "--no-summary"});
        ASSERT_EQ(r.status, 0) << r.err;
    }
    const std::string folded = test::read_file(f.dir + "/wall.folded");
    EXPECT_EQ(folded.rfind("# pybpfprof folded stacks: values in nanoseconds (mode wall, on-CPU and off-CPU time)\n", 0), 0u)
        << folded;
    const int64_t cpu = static_cast<int64_t>(w.profile.total_weight_ns(SampleKind::Cpu));
    const int64_t off = static_cast<int64_t>(w.profile.total_weight_ns(SampleKind::OffCpu));
    if (test::have_go()) {
        auto r = test::go_pprof({"-raw"}, f.dir + "/wall.pb.gz");
        ASSERT_EQ(r.status, 0) << r.err;
        auto raw = test::parse_go_raw(r.out);
        EXPECT_EQ(raw.sample_types, (std::vector<std::string>{"samples/count", "wall/nanoseconds[dflt]", "cpu/nanoseconds",
                                                              "off_cpu/nanoseconds"}));
        EXPECT_EQ(raw.total(0), static_cast<int64_t>(w.total_samples));
        EXPECT_EQ(raw.total(1), cpu + off);
        EXPECT_EQ(raw.total(2), cpu);
        EXPECT_EQ(raw.total(3), off);
    }
    const std::string js = test::source_dir() + "/tests/js";
    if (access((js + "/node_modules/speedscope").c_str(), F_OK) == 0 && access("/usr/bin/chromium", X_OK) == 0) {
        PBP_SKIP_BROWSER_CHECK();
        auto j = test::run({"node", js + "/check_speedscope.mjs", "--expect-frame", "[waiting for the GIL]", f.dir + "/wall.json"},
                           300);
        EXPECT_EQ(j.status, 0) << j.out << j.err;
        auto c = test::run({"node", js + "/check_speedscope.mjs", f.dir + "/wall.folded"}, 300);
        EXPECT_EQ(c.status, 0) << c.out << c.err;
        EXPECT_NE(c.out.find("ok " + f.dir + "/wall.folded: "), std::string::npos) << c.out;
        // The lines the importer takes (/^(.*) (\\d+)$/, the unit line is not one) add up to ours.
        EXPECT_NE(c.out.find(std::to_string(cpu + off) + " samples"), std::string::npos) << c.out;
    }
}

TEST(MergeCommand, BadInputIsOneLineAndExitTwo) {
    TwoMachines t;
    Files f;
    const std::string a = f.put("a.pbp", t.a);
    const std::string ss = f.put("b.speedscope.json", t.b, "speedscope");
    auto expect_bad = [&](std::vector<std::string> args, const std::string& want) {
        args.insert(args.begin(), {test::pybpfprof_bin(), "merge"});
        auto r = test::run(args);
        EXPECT_EQ(r.status, 2) << r.err;
        EXPECT_EQ(r.err, "pybpfprof: merge: " + want + "\n");
        EXPECT_FALSE(fs::exists(f.dir + "/out.html")) << "nothing written";
    };
    expect_bad({a, ss, "-o", f.dir + "/out.html"},
               ss + " is speedscope JSON, not pybpfprof's own format; merge reads pybpfprof's own format (-f pbp): "
                    "record with -o NAME.pbp");
    expect_bad({a, f.dir + "/missing.pbp", "-o", f.dir + "/out.html"},
               "cannot read " + f.dir + "/missing.pbp (No such file or directory)");
    const std::string cut = f.dir + "/cut.pbp";
    std::string bytes = exported("pbp", t.b);
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    expect_bad({a, cut, "-o", f.dir + "/out.html"}, cut + ": the file is truncated (the gzip data ends early)");
    expect_bad({a, "-o", f.dir + "/out.svgz"},
               "cannot tell the output format from the name " + f.dir + "/out.svgz; give -f " +
                   "speedscope|collapsed|html|pprof|svg|pbp, or end the name in " + known_extensions_text());
    expect_bad({a, "-o", f.dir + "/no/such/dir/out.html"},
               "cannot write " + f.dir + "/no/such/dir/out.html: directory " + f.dir +
                   "/no/such/dir does not exist; create it or choose another -o path");
    expect_bad({a, "--label", "2:role=x", "-o", f.dir + "/out.html"},
               "--label 2:role=x: there is no input 2 (inputs are 1 to 1)");
    auto r = test::run({test::pybpfprof_bin(), "merge", a});
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.err, "pybpfprof: merge: -o is needed: the file to write the merged run to (e.g. pybpfprof merge -o "
                     "merged.html a.pbp b.pbp)\n");
    auto none = test::run({test::pybpfprof_bin(), "merge", "-o", f.dir + "/out.html"});
    EXPECT_EQ(none.status, 2);
    EXPECT_EQ(none.err, "pybpfprof: merge: no runs to merge; give one or more of pybpfprof's .pbp files (e.g. "
                        "pybpfprof merge -o merged.html a.pbp b.pbp)\n");
    auto group = test::run({test::pybpfprof_bin(), "merge", "--group-by", "foo", "-o", f.dir + "/out.html", a});
    EXPECT_EQ(group.status, 2);
    EXPECT_EQ(group.err, "pybpfprof: merge: --group-by: foo is not a grouping; choose process (one profile per "
                         "process, the default) or pod (one per Kubernetes pod); see pybpfprof merge --help\n");
    auto help = test::run({test::pybpfprof_bin(), "merge", "--help"});
    EXPECT_EQ(help.status, 0);
    EXPECT_NE(help.out.find("Exit codes: 0 ok; 1 the output could not be written"), std::string::npos) << help.out;
    EXPECT_NE(help.out.find("--label"), std::string::npos) << help.out;
}

// ---------------------------------------------------------------------------- Chromium

// Two machines, the same PIDs: the report loads, shows both hosts, and clicking either
// process row scopes to that one (rows are told apart by more than their PID).
TEST(Merge, MergedReportWorksInHeadlessChromium) {
    const std::string js = test::source_dir() + "/tests/js";
    PBP_REQUIRE(fs::exists(js + "/node_modules/playwright-core/package.json") && fs::exists("/usr/bin/chromium"),
                "tests/js/node_modules or /usr/bin/chromium missing (tools/install-deps)");
    TwoMachines t;
    t.b = machine("node-b", 900'000'000'000ULL, TwoMachines::kUnixA + 2'500'000'000LL, "crunch");
    std::string error;
    Profile m = merge_profiles({t.a, t.b}, t.options(), error);
    std::string dir = test::temp_dir();
    std::ofstream(dir + "/merged.html") << render_html_report(m);
    std::ofstream(dir + "/expect.json") << json{{"functions", {"work", "crunch"}},
                                                {"min_processes", 4},
                                                {"proc_text", {"host node-a", "role=worker", "host node-b"}},
                                                {"raw", true}}
                                               .dump();
    PBP_SKIP_BROWSER_CHECK();
    auto r = test::run({"node", js + "/check_report.mjs", dir + "/merged.html", dir + "/expect.json"}, 600);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("ok " + dir + "/merged.html"), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace pbp
