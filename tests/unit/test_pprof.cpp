// pprof exporter: structure (our own parse with the generated protobuf classes) and the real
// consumer, `go tool pprof` (Debian's golang-go), reading the same file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "export/exporter.h"
#include "mixed_profile.h"
#include "pprof_reader.h"
#include "engine/profile.h"
#include "test_support.h"
#include "wall_profile.h"
#include "weighted_profile.h"

namespace pbp {
namespace {

using test::go_pprof;
using test::parse_pprof;
namespace pp = perftools::profiles;

constexpr uint64_t kStart = 5'000'000'000ULL;                // CLOCK_MONOTONIC at start
constexpr int64_t kStartUnix = 1'795'260'680'123'456'789LL;  // 2026-11-21T11:31:20.123456789Z
constexpr uint64_t kDuration = 2'000'000'000ULL;
constexpr uint64_t kPeriod = 10'101'010;  // 99 Hz

struct Builder {
    Profile p;
    Builder() {
        p.run.target = "python3 app.py";
        p.run.start_mono_ns = kStart;
        p.run.end_mono_ns = kStart + kDuration;
        p.run.start_unix_ns = kStartUnix;
        p.run.rate_hz = 99;
        p.run.period_ns = kPeriod;
        p.run.version = "0.1.0";
    }
    uint32_t frame(const std::string& name, const std::string& file, int line) {
        return p.frames.intern(Frame{name, file, line, false});
    }
    uint32_t synthetic(const std::string& name) { return p.frames.intern(Frame{name, "", 0, true}); }
    ProcessProfile& process(uint32_t pid, const std::string& cmdline, uint32_t ns_pid = 0) {
        auto& pr = p.processes[pid];
        pr.pid = pid;
        pr.ns_pid = ns_pid ? ns_pid : pid;
        pr.comm = "python3";
        pr.cmdline = cmdline;
        return pr;
    }
    ThreadProfile& thread(uint32_t pid, uint32_t tid, const std::string& name, uint32_t ns_tid = 0) {
        auto& t = p.processes.at(pid).threads[tid];
        t.tid = tid;
        t.ns_tid = ns_tid ? ns_tid : tid;
        t.name = name;
        return t;
    }
    void add(uint32_t pid, uint32_t tid, const std::vector<uint32_t>& stack, uint64_t at_ms, int n = 1) {
        uint32_t s = p.stacks.intern(stack);
        auto& t = p.processes.at(pid).threads.at(tid);
        for (int k = 0; k < n; k++)
            t.samples.push_back({kStart + at_ms * 1'000'000ULL + k * kPeriod, s, 0, SampleKind::Cpu, kPeriod});
    }
};

// Two processes (one in a PID namespace, with container/pod labels), three threads with
// samples, an idle thread and an idle process; the same stack on two threads, a stack
// sampled at two different times (aggregated), names pprof could mangle, a synthetic frame,
// unicode, a frame without line and an empty stack.
Profile sample_profile() {
    Builder b;
    uint32_t mod = b.frame("<module>", "/app/app.py", 1);
    uint32_t run = b.frame("Worker.run", "/app/app.py", 12);
    uint32_t hot = b.frame("hot_loop", "/app/app.py", 20);
    uint32_t hot2 = b.frame("hot_loop", "/app/app.py", 21);
    uint32_t hot3 = b.frame("hot_loop", "/app/app.py", 25);
    uint32_t lam = b.frame("main.<locals>.<lambda>", "/app/app.py", 40);
    uint32_t comp = b.frame("<listcomp>", "/app/app.py", 41);
    uint32_t tmpl = b.frame("Box[int]::get<T>", "/app/cpp_like.py", 5);
    uint32_t uni = b.frame("grüße_λ", "/app/ünï.py", 7);
    uint32_t noline = b.frame("noline", "/app/lib.py", 0);
    uint32_t trunc = b.synthetic("[truncated]");

    b.process(100, "python3 app.py --workers 2");
    b.thread(100, 100, "python3");
    b.thread(100, 101, "worker-1");
    b.thread(100, 102, "idle-thread");  // no samples
    b.add(100, 100, {mod, hot2}, 0, 5);
    b.add(100, 100, {mod, hot}, 60, 3);
    b.add(100, 100, {mod, uni}, 100, 2);
    b.add(100, 100, {mod, hot2}, 150, 1);  // same stack again, later: aggregated
    b.add(100, 100, {mod, lam, comp}, 170, 4);
    b.add(100, 101, {run, hot}, 10, 4);
    b.add(100, 101, {mod, hot}, 200, 2);   // same stack as on thread 100: kept apart
    b.add(100, 101, {trunc, run, hot3}, 300, 2);

    auto& pr = b.process(200, "python3 -c 'print(1)'", 7);
    pr.labels["container"] = "abc123";
    pr.labels["pod"] = "web-1";
    pr.labels["pid"] = "clash";  // must not hide our numeric pid label
    b.thread(200, 200, "python3", 1);
    b.add(200, 200, {mod, noline}, 50, 12);
    b.add(200, 200, {mod, tmpl}, 60, 3);
    b.add(200, 200, {}, 500, 1);  // empty stack

    b.process(300, "python3 idle.py");
    b.thread(300, 300, "python3");  // idle process
    return b.p;
}

std::string export_pprof(const Profile& p) {
    auto e = make_exporter("pprof");
    EXPECT_NE(e, nullptr);
    if (!e) return "";
    std::ostringstream out(std::ios::binary);
    e->write(p, {}, out);
    return out.str();
}

std::string write_file(const std::string& bytes, const std::string& name) {
    std::string path = test::temp_dir() + "/" + name;
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
}

// A frame as pprof describes it, from the parsed message.
using PFrame = std::tuple<std::string, std::string, int64_t>;  // name, file, line

struct Decoded {
    const pp::Profile& p;
    std::map<uint64_t, const pp::Function*> fns;
    std::map<uint64_t, const pp::Location*> locs;

    explicit Decoded(const pp::Profile& prof) : p(prof) {
        for (const auto& f : p.function()) {
            EXPECT_NE(f.id(), 0u) << "function ids start at 1";
            EXPECT_TRUE(fns.emplace(f.id(), &f).second) << "duplicate function id " << f.id();
        }
        for (const auto& l : p.location()) {
            EXPECT_NE(l.id(), 0u) << "location ids start at 1";
            EXPECT_TRUE(locs.emplace(l.id(), &l).second) << "duplicate location id " << l.id();
        }
    }
    const std::string& str(int64_t i) const {
        static const std::string bad = "<bad string index>";
        EXPECT_GE(i, 0);
        EXPECT_LT(i, p.string_table_size());
        return i >= 0 && i < p.string_table_size() ? p.string_table(static_cast<int>(i)) : bad;
    }
    PFrame frame(uint64_t loc_id) const {
        auto it = locs.find(loc_id);
        if (it == locs.end()) {
            ADD_FAILURE() << "sample refers to missing location " << loc_id;
            return {};
        }
        const pp::Location& l = *it->second;
        EXPECT_EQ(l.line_size(), 1) << "one Line per location";
        if (l.line_size() < 1) return {};
        auto f = fns.find(l.line(0).function_id());
        if (f == fns.end()) {
            ADD_FAILURE() << "location " << loc_id << " refers to a missing function";
            return {};
        }
        return {str(f->second->name()), str(f->second->filename()), l.line(0).line()};
    }
    // Root-first stack of a sample (pprof stores it leaf first).
    std::vector<PFrame> root_first(const pp::Sample& s) const {
        std::vector<PFrame> v;
        for (uint64_t id : s.location_id()) v.push_back(frame(id));
        std::reverse(v.begin(), v.end());
        return v;
    }
    std::map<std::string, std::string> str_labels(const pp::Sample& s) const {
        std::map<std::string, std::string> m;
        for (const auto& l : s.label()) {
            if (l.str()) {
                EXPECT_TRUE(m.emplace(str(l.key()), str(l.str())).second) << str(l.key());
            }
        }
        return m;
    }
    std::map<std::string, int64_t> num_labels(const pp::Sample& s) const {
        std::map<std::string, int64_t> m;
        for (const auto& l : s.label()) {
            if (!l.str()) {
                EXPECT_TRUE(m.emplace(str(l.key()), l.num()).second) << str(l.key());
            }
        }
        return m;
    }
};

using Key = std::tuple<uint32_t, uint32_t, std::vector<PFrame>>;  // pid, tid, root-first stack

// What the samples should add up to, straight from the Profile.
std::map<Key, int64_t> expected_counts(const Profile& p) {
    std::map<Key, int64_t> m;
    for (const auto& [pid, pr] : p.processes)
        for (const auto& [tid, t] : pr.threads)
            for (const auto& s : t.samples) {
                std::vector<PFrame> st;
                for (uint32_t f : p.stacks.at(s.stack)) {
                    const Frame& fr = p.frames.at(f);
                    st.emplace_back(fr.name, fr.synthetic ? "" : fr.file, fr.line);
                }
                if (st.empty()) st.emplace_back("[no stack]", "", 0);  // pprof drops empty samples
                m[{pid, tid, st}]++;
            }
    return m;
}

TEST(Pprof, Registered) {
    auto e = make_exporter("pprof");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->name(), "pprof");
    EXPECT_EQ(e->extension(), "pb.gz");
    EXPECT_NE(e->how_to_open("/tmp/x.pb.gz").find("go tool pprof -http=: /tmp/x.pb.gz"), std::string::npos);
    auto names = exporter_names();
    auto c = std::find(names.begin(), names.end(), "collapsed");
    auto pos = std::find(names.begin(), names.end(), "pprof");
    ASSERT_NE(pos, names.end());
    EXPECT_GT(pos, c) << "listed after collapsed";
}

TEST(Pprof, HeaderAndSampleTypes) {
    std::string gz = export_pprof(sample_profile());
    ASSERT_GE(gz.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f) << "gzip magic";
    EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b) << "gzip magic";
    pp::Profile p = parse_pprof(gz);
    Decoded d(p);

    ASSERT_GT(p.string_table_size(), 0);
    EXPECT_EQ(p.string_table(0), "");
    std::set<std::string> uniq(p.string_table().begin(), p.string_table().end());
    EXPECT_EQ(uniq.size(), static_cast<size_t>(p.string_table_size())) << "strings interned once";

    ASSERT_EQ(p.sample_type_size(), 2);
    EXPECT_EQ(d.str(p.sample_type(0).type()), "samples");
    EXPECT_EQ(d.str(p.sample_type(0).unit()), "count");
    EXPECT_EQ(d.str(p.sample_type(1).type()), "cpu");
    EXPECT_EQ(d.str(p.sample_type(1).unit()), "nanoseconds");
    EXPECT_EQ(d.str(p.period_type().type()), "cpu");
    EXPECT_EQ(d.str(p.period_type().unit()), "nanoseconds");
    EXPECT_EQ(p.period(), static_cast<int64_t>(kPeriod));
    EXPECT_EQ(d.str(p.default_sample_type()), "cpu");
    EXPECT_EQ(p.time_nanos(), kStartUnix);
    EXPECT_EQ(p.duration_nanos(), static_cast<int64_t>(kDuration));
    bool version_comment = false;
    for (int64_t c : p.comment()) version_comment |= d.str(c) == "pybpfprof 0.1.0";
    EXPECT_TRUE(version_comment);
    ASSERT_EQ(p.mapping_size(), 1);
    EXPECT_EQ(p.mapping(0).id(), 1u);
    EXPECT_EQ(d.str(p.mapping(0).filename()), "python");
    EXPECT_TRUE(p.mapping(0).has_functions() && p.mapping(0).has_filenames() && p.mapping(0).has_line_numbers())
        << "already symbolized: pprof must not try";

    // Every sample: one value per sample type, cpu = count * period.
    uint64_t total = 0;
    for (const auto& s : p.sample()) {
        ASSERT_EQ(s.value_size(), 2);
        EXPECT_GT(s.value(0), 0);
        EXPECT_EQ(s.value(1), s.value(0) * static_cast<int64_t>(kPeriod));
        total += s.value(0);
    }
    EXPECT_EQ(total, sample_profile().total_samples());
    EXPECT_EQ(total, 39u);
    EXPECT_EQ(test::pprof_total(p, 1), 39u * kPeriod);
}

TEST(Pprof, FunctionsAndLocations) {
    pp::Profile p = parse_pprof(export_pprof(sample_profile()));
    Decoded d(p);
    // One function per (name, file); start_line = the smallest line sampled in it.
    std::map<std::pair<std::string, std::string>, const pp::Function*> by_name;
    for (const auto& f : p.function()) {
        EXPECT_TRUE(by_name.emplace(std::make_pair(d.str(f.name()), d.str(f.filename())), &f).second)
            << d.str(f.name());
        EXPECT_EQ(f.system_name(), 0) << "system_name unset (pprof would demangle <module> away)";
    }
    EXPECT_EQ(by_name.size(), 10u);
    // start_line of a function, -1 when there is none.
    auto start = [&](const std::string& n, const std::string& file) -> int64_t {
        auto it = by_name.find({n, file});
        return it == by_name.end() ? -1 : it->second->start_line();
    };
    EXPECT_EQ(start("hot_loop", "/app/app.py"), 20);
    EXPECT_EQ(start("<module>", "/app/app.py"), 1);
    EXPECT_EQ(start("main.<locals>.<lambda>", "/app/app.py"), 40);
    EXPECT_EQ(start("grüße_λ", "/app/ünï.py"), 7);
    EXPECT_EQ(start("noline", "/app/lib.py"), 0);
    EXPECT_EQ(start("[truncated]", ""), 0) << "synthetic frames have no file";
    EXPECT_EQ(start("[no stack]", ""), 0) << "the empty stack's stand-in";
    for (const auto& f : p.function()) {
        if (d.str(f.name()) == "[truncated]") {
            EXPECT_EQ(f.filename(), 0);
        }
    }
    // One location per distinct (function, line), each with one Line.
    std::set<PFrame> seen;
    for (const auto& l : p.location()) {
        EXPECT_EQ(l.mapping_id(), 1u);
        EXPECT_TRUE(seen.insert(d.frame(l.id())).second) << "duplicate location";
    }
    EXPECT_TRUE(seen.count({"hot_loop", "/app/app.py", 20}));
    EXPECT_TRUE(seen.count({"hot_loop", "/app/app.py", 21}));
    EXPECT_TRUE(seen.count({"hot_loop", "/app/app.py", 25}));
    EXPECT_TRUE(seen.count({"[truncated]", "", 0}));
    EXPECT_TRUE(seen.count({"noline", "/app/lib.py", 0}));
}

TEST(Pprof, SamplesAggregatedLeafFirstWithLabels) {
    const Profile prof = sample_profile();
    pp::Profile p = parse_pprof(export_pprof(prof));
    Decoded d(p);

    std::map<Key, int64_t> got;
    for (const auto& s : p.sample()) {
        auto num = d.num_labels(s);
        auto str = d.str_labels(s);
        ASSERT_TRUE(num.count("pid") && num.count("tid")) << "every sample has pid and tid";
        uint32_t pid = static_cast<uint32_t>(num["pid"]), tid = static_cast<uint32_t>(num["tid"]);
        for (const auto& l : s.label())
            EXPECT_TRUE((l.str() != 0) != (l.num() != 0)) << "a label is a string or a number: " << d.str(l.key());
        const ProcessProfile& pr = prof.processes.at(pid);
        EXPECT_EQ(str["process"], pr.display_name());
        EXPECT_EQ(str["thread_name"], pr.threads.at(tid).name);
        if (pid == 200) {
            EXPECT_EQ(num["ns_pid"], 7);
            EXPECT_EQ(num["ns_tid"], 1);
            EXPECT_EQ(str["container"], "abc123");
            EXPECT_EQ(str["pod"], "web-1");
            EXPECT_EQ(str["label_pid"], "clash");
            EXPECT_EQ(str.count("pid"), 0u);
            EXPECT_EQ(str["process"], "python3 -c 'print(1)' (pid 200, ns pid 7)");
            EXPECT_EQ(num.size() + str.size(), 9u);
        } else {
            EXPECT_EQ(num.count("ns_pid"), 0u) << "only when it differs";
            EXPECT_EQ(num.count("ns_tid"), 0u);
            EXPECT_EQ(num.size() + str.size(), 4u) << "pid, tid, thread_name, process";
        }
        Key k{pid, tid, d.root_first(s)};
        EXPECT_EQ(got.count(k), 0u) << "identical (stack, labels) samples are aggregated";
        got[k] += s.value(0);
    }
    EXPECT_EQ(got, expected_counts(prof));
    EXPECT_EQ(p.sample_size(), 10) << "one pprof Sample per (thread, stack)";

    // Leaf first, explicitly: thread 101's truncated sample.
    bool found = false;
    for (const auto& s : p.sample()) {
        if (s.location_id_size() != 3 || d.num_labels(s)["tid"] != 101) continue;
        found = true;
        EXPECT_EQ(d.frame(s.location_id(0)), PFrame("hot_loop", "/app/app.py", 25)) << "leaf first";
        EXPECT_EQ(d.frame(s.location_id(1)), PFrame("Worker.run", "/app/app.py", 12));
        EXPECT_EQ(d.frame(s.location_id(2)), PFrame("[truncated]", "", 0)) << "root last";
        EXPECT_EQ(s.value(0), 2);
    }
    EXPECT_TRUE(found);
}

TEST(Pprof, EmptyLabelValues) {
    // A label whose str is index 0 ("") reads as a numeric label: never written.
    Builder b;
    uint32_t f = b.frame("f", "/app/f.py", 1);
    auto& pr = b.process(1, "python3 f.py");
    pr.labels["pod"] = "";
    pr.labels["container"] = "c1";
    b.thread(1, 1, "");
    b.add(1, 1, {f}, 0, 2);
    pp::Profile p = parse_pprof(export_pprof(b.p));
    Decoded d(p);
    ASSERT_EQ(p.sample_size(), 1);
    for (const auto& l : p.sample(0).label())
        EXPECT_TRUE(l.str() != 0 || l.num() != 0) << d.str(l.key());
    auto str = d.str_labels(p.sample(0));
    EXPECT_EQ(str["thread_name"], "?");
    EXPECT_EQ(str["container"], "c1");
    EXPECT_EQ(str.count("pod"), 0u);
}

TEST(Pprof, InvalidUtf8Replaced) {
    // Names and files are whatever the target had: protobuf refuses to parse a proto3 string
    // that is not UTF-8, so invalid bytes become U+FFFD.
    Builder b;
    uint32_t bad = b.frame("bad\xff\xc3(", "/app/caf\xe9.py", 3);
    uint32_t ok = b.frame("ok_\xc3\xa9", "/app/ok.py", 4);
    uint32_t sur = b.frame("sur\xed\xa0\x80", "/app/ok.py", 5);  // a UTF-16 surrogate
    b.process(1, "python3 \xff");
    b.thread(1, 1, "t\xfe");
    b.add(1, 1, {ok, bad}, 0, 2);
    b.add(1, 1, {sur}, 10, 1);
    pp::Profile p;
    ASSERT_NO_THROW(p = parse_pprof(export_pprof(b.p)));
    std::set<std::string> strings(p.string_table().begin(), p.string_table().end());
    EXPECT_TRUE(strings.count("bad\uFFFD\uFFFD(")) << "each invalid byte replaced";
    EXPECT_TRUE(strings.count("/app/caf\uFFFD.py"));
    EXPECT_TRUE(strings.count("ok_\u00e9")) << "valid UTF-8 kept";
    EXPECT_TRUE(strings.count("sur\uFFFD\uFFFD\uFFFD"));
    EXPECT_TRUE(strings.count("t\uFFFD"));
    EXPECT_TRUE(strings.count("python3 \uFFFD (pid 1)"));
    EXPECT_EQ(test::pprof_total(p, 0), 3u);
}

TEST(Pprof, DeterministicAndIdle) {
    EXPECT_EQ(export_pprof(sample_profile()), export_pprof(sample_profile()));

    Builder b;
    b.process(10, "python3 sleeper.py");
    b.thread(10, 10, "python3");
    b.p.run.end_mono_ns = 0;  // not finished: no negative duration
    b.p.run.period_ns = 0;    // rate only
    pp::Profile p = parse_pprof(export_pprof(b.p));
    EXPECT_EQ(p.sample_size(), 0);
    EXPECT_EQ(p.sample_type_size(), 2);
    EXPECT_EQ(p.string_table(0), "");
    EXPECT_EQ(p.duration_nanos(), 0);
    EXPECT_EQ(p.period(), 10101010) << "period from rate_hz 99";
}

// ------------------------------------------------------------- the real consumer

TEST(PprofGo, RawTotalsNamesAndLabels) {
    PBP_REQUIRE(test::have_go(), "go is not installed (Debian golang-go; tools/install-deps)");
    const Profile prof = sample_profile();
    std::string path = write_file(export_pprof(prof), "sample.pb.gz");

    auto t0 = std::chrono::steady_clock::now();
    auto r = go_pprof({"-raw"}, path);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_LT(secs, 30.0) << "go tool pprof -raw took " << secs << " s";
    auto raw = test::parse_go_raw(r.out);
    EXPECT_EQ(raw.sample_types, (std::vector<std::string>{"samples/count", "cpu/nanoseconds[dflt]"})) << r.out;
    EXPECT_EQ(raw.period_type, "cpu nanoseconds");
    EXPECT_EQ(raw.period, static_cast<int64_t>(kPeriod));
    ASSERT_EQ(raw.values.size(), 10u) << r.out;
    EXPECT_EQ(raw.total(0), static_cast<int64_t>(prof.total_samples()));
    EXPECT_EQ(raw.total(1), static_cast<int64_t>(prof.total_samples() * kPeriod));
    EXPECT_NE(r.out.find("Duration: 2s"), std::string::npos) << r.out;

    // Function names, files and lines as pprof shows them (names it must not mangle).
    std::string locs;
    for (auto& [id, text] : raw.location_text) locs += text + "\n";
    for (const char* want : {"hot_loop /app/app.py:20 s=20", "hot_loop /app/app.py:25 s=20",
                             "<module> /app/app.py:1 s=1", "<listcomp> /app/app.py:41 s=41",
                             "main.<locals>.<lambda> /app/app.py:40 s=40",
                             "Box[int]::get<T> /app/cpp_like.py:5 s=5", "grüße_λ /app/ünï.py:7 s=7",
                             "noline /app/lib.py:0 s=0", "[truncated] :0 s=0", "[no stack] :0 s=0", "Worker.run /app/app.py:12"})
        EXPECT_NE(locs.find(want), std::string::npos) << want << "\n" << locs;

    // Labels as pprof reads them.
    bool ns = false, worker = false;
    for (auto& l : raw.labels) {
        ns |= l.find("container:[abc123]") != std::string::npos && l.find("ns_pid:[7]") != std::string::npos &&
              l.find("pid:[200]") != std::string::npos && l.find("pod:[web-1]") != std::string::npos;
        worker |= l.find("thread_name:[worker-1]") != std::string::npos && l.find("tid:[101]") != std::string::npos;
    }
    EXPECT_TRUE(ns) << r.out;
    EXPECT_TRUE(worker) << r.out;
}

// Values are summed weights (tests/support/weighted_profile.h): with off-CPU samples the
// types are samples/count (either kind), wall/nanoseconds (every weight, the default),
// cpu/nanoseconds (the on-CPU samples') and off_cpu/nanoseconds (the off-CPU ones').
TEST(Pprof, ExportsSampleWeights) {
    test::WeightedProfile w;
    const pp::Profile p = parse_pprof(export_pprof(w.profile));
    Decoded d(p);
    std::vector<std::string> types;
    for (const auto& t : p.sample_type()) types.push_back(d.str(t.type()) + "/" + d.str(t.unit()));
    EXPECT_EQ(types, (std::vector<std::string>{"samples/count", "wall/nanoseconds", "cpu/nanoseconds",
                                               "off_cpu/nanoseconds"}));
    EXPECT_EQ(d.str(p.default_sample_type()), "wall");
    std::map<std::string, uint64_t> samples, wall, cpu, off;
    for (const auto& s : p.sample()) {
        ASSERT_EQ(s.value_size(), 4);
        std::string leaf = std::get<0>(d.frame(s.location_id(0)));
        samples[leaf] += s.value(0);
        wall[leaf] += s.value(1);
        cpu[leaf] += s.value(2);
        off[leaf] += s.value(3);
    }
    auto nonzero = [](std::map<std::string, uint64_t> m) {
        std::erase_if(m, [](const auto& kv) { return kv.second == 0; });
        return m;
    };
    EXPECT_EQ(samples, w.samples);
    EXPECT_EQ(nonzero(cpu), w.cpu_ns);
    EXPECT_EQ(nonzero(off), w.off_cpu_ns);
    for (const auto& [leaf, ns] : wall) EXPECT_EQ(ns, w.weight_ns(leaf)) << leaf;
    // Without off-CPU samples (a cpu mode run), the sample types stay the two they always were.
    for (auto& [_, pr] : w.profile.processes)
        for (auto& [__, t] : pr.threads) std::erase_if(t.samples, [](const Sample& s) { return s.kind == SampleKind::OffCpu; });
    EXPECT_EQ(parse_pprof(export_pprof(w.profile)).sample_type_size(), 2);
}

// go tool pprof reads the weights and the four sample types.
TEST(PprofGo, ReadsSampleWeights) {
    PBP_REQUIRE(test::have_go(), "go is not installed (Debian golang-go; tools/install-deps)");
    test::WeightedProfile w;
    auto r = go_pprof({"-raw"}, write_file(export_pprof(w.profile), "weighted.pb.gz"));
    ASSERT_EQ(r.status, 0) << r.err;
    auto raw = test::parse_go_raw(r.out);
    EXPECT_EQ(raw.sample_types, (std::vector<std::string>{"samples/count", "wall/nanoseconds[dflt]", "cpu/nanoseconds",
                                                          "off_cpu/nanoseconds"}))
        << r.out;
    EXPECT_EQ(raw.total(0), 8);
    EXPECT_EQ(raw.total(1), static_cast<int64_t>(w.profile.total_weight_ns(SampleKind::Cpu) +
                                                 w.profile.total_weight_ns(SampleKind::OffCpu)));
    EXPECT_EQ(raw.total(2), static_cast<int64_t>(w.profile.total_weight_ns(SampleKind::Cpu)));
    EXPECT_EQ(raw.total(3), static_cast<int64_t>(w.profile.total_weight_ns(SampleKind::OffCpu)));
    auto top = go_pprof({"-top", "-sample_index=off_cpu"}, write_file(export_pprof(w.profile), "weighted2.pb.gz"));
    ASSERT_EQ(top.status, 0) << top.err;
    EXPECT_NE(top.out.find("waits"), std::string::npos) << top.out;
    EXPECT_NE(top.out.find("253ms"), std::string::npos) << top.out;
}

// A wall mode run (tests/support/wall_profile.h): the wait leaves, the gil and wait labels
// per sample, the mode in the comments.
TEST(Pprof, WallModeLabelsGilAndWait) {
    test::WallProfile w;
    const pp::Profile p = parse_pprof(export_pprof(w.profile));
    Decoded d(p);
    EXPECT_EQ(d.str(p.default_sample_type()), "wall");
    std::set<std::string> comments;
    for (int64_t c : p.comment()) comments.insert(d.str(c));
    EXPECT_TRUE(comments.count("mode: wall")) << "the mode is said";
    EXPECT_TRUE(comments.count("min block: 1000000 ns"));
    std::map<std::string, uint64_t> by_gil, by_wait;  // wall ns by label value
    std::map<uint64_t, uint64_t> held;                // tid -> held ns
    std::map<std::string, uint64_t> wall;
    for (const auto& s : p.sample()) {
        ASSERT_EQ(s.value_size(), 4);
        std::string gil, wait;
        uint64_t tid = 0;
        for (const auto& l : s.label()) {
            if (d.str(l.key()) == "gil") gil = d.str(l.str());
            if (d.str(l.key()) == "wait") wait = d.str(l.str());
            if (d.str(l.key()) == "tid") tid = l.num();
        }
        ASSERT_FALSE(gil.empty()) << "every sample of a wall run says its GIL state";
        by_gil[gil] += s.value(1);
        if (!wait.empty()) by_wait[wait] += s.value(1);
        if (gil == "held") held[tid] += s.value(1);
        const std::string leaf = std::get<0>(d.frame(s.location_id(0)));
        wall[leaf] += s.value(1);
        EXPECT_EQ(wait.empty(), s.value(3) == 0) << "off-CPU samples, and only they, have a wait label";
    }
    EXPECT_EQ(by_gil["held"], 800 * test::WallProfile::kMs);
    EXPECT_EQ(by_gil["waiting"], 800 * test::WallProfile::kMs);
    EXPECT_EQ(by_gil["n/a"], 1000 * test::WallProfile::kMs) << "free-threaded: n/a, not a guess";
    EXPECT_EQ(by_wait, (std::map<std::string, uint64_t>{{"gil", 800 * test::WallProfile::kMs},
                                                        {"io", 100 * test::WallProfile::kMs},
                                                        {"sleep", 1000 * test::WallProfile::kMs}}));
    EXPECT_EQ(held, (std::map<uint64_t, uint64_t>{{10, w.held_ns.at(10)}, {11, w.held_ns.at(11)}}));
    for (const auto& [leaf, ns] : wall) EXPECT_EQ(ns, w.weight_ns(leaf)) << leaf;
    EXPECT_EQ(wall["[waiting for the GIL]"], 800 * test::WallProfile::kMs);
}

// go tool pprof's totals per sample type equal ours, and it filters by the gil label.
TEST(PprofGo, WallTotalsAndGilTagsEqualOurs) {
    PBP_REQUIRE(test::have_go(), "go is not installed (Debian golang-go; tools/install-deps)");
    test::WallProfile w;
    const std::string path = write_file(export_pprof(w.profile), "wall.pb.gz");
    auto r = go_pprof({"-raw"}, path);
    ASSERT_EQ(r.status, 0) << r.err;
    auto raw = test::parse_go_raw(r.out);
    EXPECT_EQ(raw.sample_types, (std::vector<std::string>{"samples/count", "wall/nanoseconds[dflt]", "cpu/nanoseconds",
                                                          "off_cpu/nanoseconds"}))
        << r.out;
    const int64_t cpu = static_cast<int64_t>(w.profile.total_weight_ns(SampleKind::Cpu));
    const int64_t off = static_cast<int64_t>(w.profile.total_weight_ns(SampleKind::OffCpu));
    EXPECT_EQ(raw.total(0), static_cast<int64_t>(w.total_samples));
    EXPECT_EQ(raw.total(1), cpu + off);
    EXPECT_EQ(raw.total(2), cpu);
    EXPECT_EQ(raw.total(3), off);
    EXPECT_EQ(cpu + off, 3000 * static_cast<int64_t>(test::WallProfile::kMs)) << "three threads, one second each";
    // -tags lists the label values with their share of wall time.
    auto tags = go_pprof({"-tags"}, path);
    ASSERT_EQ(tags.status, 0) << tags.err;
    for (const char* want : {"gil: Total 3.0s", "800.0ms (26.67%): held", "800.0ms (26.67%): waiting",
                             "400.0ms (13.33%): neither", "1.0s (33.33%): n/a", "wait: Total 1.9s", "1.0s (52.63%): sleep",
                             "800.0ms (42.11%): gil", "100.0ms ( 5.26%): io"})
        EXPECT_NE(tags.out.find(want), std::string::npos) << want << "\n" << tags.out;
    // Held time through pprof's own filter: 800 ms.
    auto top = go_pprof({"-top", "-tagfocus=gil=held"}, path);
    ASSERT_EQ(top.status, 0) << top.err;
    EXPECT_NE(top.out.find("800ms"), std::string::npos) << top.out;
    EXPECT_NE(top.out.find("spin"), std::string::npos) << top.out;
}

TEST(PprofGo, TopReadsLeafFirst) {
    PBP_REQUIRE(test::have_go(), "go is not installed (Debian golang-go; tools/install-deps)");
    const Profile prof = sample_profile();
    std::string path = write_file(export_pprof(prof), "top.pb.gz");
    // Counts, not time: flat = samples whose leaf is the function, cum = samples containing it.
    auto r = go_pprof({"-top", "-sample_index=samples", "-nodecount=100"}, path);
    ASSERT_EQ(r.status, 0) << r.err;
    auto rows = test::parse_go_top(r.out);
    std::map<std::string, std::pair<std::string, std::string>> by;
    for (auto& row : rows) by[row.name] = {row.flat, row.cum};
    using P = std::pair<std::string, std::string>;
    EXPECT_EQ(by["hot_loop"], P("17", "17")) << r.out;  // 5+3+1 + 4+2 + 2
    EXPECT_EQ(by["<module>"], P("0", "32")) << r.out;   // never a leaf: pprof reads leaf first
    EXPECT_EQ(by["noline"], P("12", "12")) << r.out;
    EXPECT_EQ(by["<listcomp>"], P("4", "4")) << r.out;
    EXPECT_EQ(by["main.<locals>.<lambda>"], P("0", "4")) << r.out;
    EXPECT_EQ(by["[truncated]"], P("0", "2")) << r.out;
    EXPECT_NE(r.out.find("of 39 total"), std::string::npos) << r.out;

    // Per-thread identity survives aggregation: -tagfocus selects one thread.
    auto t = go_pprof({"-top", "-sample_index=samples", "-tagfocus=thread_name=worker-1"}, path);
    ASSERT_EQ(t.status, 0) << t.err;
    EXPECT_NE(t.out.find("accounting for 8, "), std::string::npos) << t.out;

    // What `go tool pprof -http=: FILE` does by default (local symbolization and C++
    // demangling): nothing to symbolize, and names with <...> must survive.
    auto dflt = go_pprof({"-top", "-sample_index=samples", "-nodecount=100"}, path, false);
    ASSERT_EQ(dflt.status, 0) << dflt.err;
    auto drows = test::parse_go_top(dflt.out);
    std::set<std::string> names;
    for (auto& row : drows) names.insert(row.name);
    EXPECT_EQ(dflt.err.find("binary"), std::string::npos) << "nothing to symbolize:\n" << dflt.err;
    EXPECT_NE(dflt.out.find("File: python"), std::string::npos) << dflt.out;
    for (const char* n : {"<module>", "<listcomp>", "main.<locals>.<lambda>", "Box[int]::get<T>", "grüße_λ"})
        EXPECT_TRUE(names.count(n)) << n << "\n" << dflt.out << dflt.err;
}

// --native (issue 17): one mapping per native library and one for the kernel, each location
// in its frame's mapping; Python frames stay in mapping 1 ("python").
TEST(Pprof, NativeAndKernelFramesHaveTheirMappings) {
    test::MixedProfile m;
    const pp::Profile p = test::parse_pprof(export_pprof(m.profile));
    Decoded d(p);
    std::map<uint64_t, std::string> mapping_file;
    for (const auto& mp : p.mapping()) {
        EXPECT_TRUE(mp.has_functions()) << "symbolized: pprof must not look the library up";
        mapping_file[mp.id()] = d.str(mp.filename());
    }
    EXPECT_EQ(mapping_file, (std::map<uint64_t, std::string>{{1, "python"},
                                                            {2, test::MixedProfile::kExtLib},
                                                            {3, test::MixedProfile::kLibpython},
                                                            {4, test::MixedProfile::kLibc},
                                                            {5, test::MixedProfile::kBlas},
                                                            {6, "[kernel]"}}));
    // Debug information gave every frame of _ext.so a file and line, none of the others'.
    EXPECT_TRUE(p.mapping(1).has_filenames() && p.mapping(1).has_line_numbers());
    EXPECT_FALSE(p.mapping(3).has_filenames() || p.mapping(3).has_line_numbers());
    auto mapping_of = [&](uint32_t frame) { return mapping_file[d.locs.at(frame + 1)->mapping_id()]; };
    EXPECT_EQ(mapping_of(m.outer), "python");
    EXPECT_EQ(mapping_of(m.module), "python");
    EXPECT_EQ(mapping_of(m.ext_b), test::MixedProfile::kExtLib);
    EXPECT_EQ(mapping_of(m.libc_read), test::MixedProfile::kLibc);
    EXPECT_EQ(mapping_of(m.dgemm), test::MixedProfile::kBlas);
    EXPECT_EQ(mapping_of(m.k_vfs_read), "[kernel]");
    EXPECT_EQ(d.frame(m.ext_b + 1), PFrame("b", "/src/ext/ext.c", 7));
    EXPECT_EQ(d.frame(m.k_vfs_read + 1), PFrame("[k] vfs_read", "", 0));
    EXPECT_EQ(d.frame(m.outer + 1), PFrame("outer", "/opt/app/main.py", 12));
}

// go tool pprof reads the mappings: its totals, names and the libraries of the locations,
// and -focus on a kernel function keeps the samples under it; by default (local
// symbolization) it opens no library and renames nothing.
TEST(PprofGo, NativeAndKernelFramesReadByGoPprof) {
    PBP_REQUIRE(test::have_go(), "go is not installed (Debian golang-go; tools/install-deps)");
    test::MixedProfile m;
    const std::string path = write_file(export_pprof(m.profile), "mixed.pb.gz");
    auto r = go_pprof({"-raw"}, path);
    ASSERT_EQ(r.status, 0) << r.err;
    auto raw = test::parse_go_raw(r.out);
    EXPECT_EQ(raw.total(0), 140);
    EXPECT_EQ(raw.total(1), static_cast<int64_t>(140 * test::MixedProfile::kPeriod));
    const std::string maps = r.out.substr(r.out.find("Mappings"));
    for (const char* lib : {test::MixedProfile::kExtLib, test::MixedProfile::kLibc, test::MixedProfile::kBlas,
                            "[kernel]", "python"})
        EXPECT_NE(maps.find(lib), std::string::npos) << lib << "\n" << maps;
    std::string locs;
    for (auto& [id, text] : raw.location_text) locs += text + "\n";
    for (const char* want : {"b /src/ext/ext.c:7", "[k] vfs_read :0", "read :0", "outer /opt/app/main.py:12"})
        EXPECT_NE(locs.find(want), std::string::npos) << want << "\n" << locs;

    auto top = go_pprof({"-top", "-sample_index=samples", "-nodecount=100"}, path, false);
    ASSERT_EQ(top.status, 0) << top.err;
    EXPECT_EQ(top.err.find("binary"), std::string::npos) << "nothing to symbolize:\n" << top.err;
    EXPECT_EQ(top.err.find("Local symbolization failed"), std::string::npos) << top.err;
    std::map<std::string, std::pair<std::string, std::string>> by;
    for (auto& row : test::parse_go_top(top.out)) by[row.name] = {row.flat, row.cum};
    using P = std::pair<std::string, std::string>;
    EXPECT_EQ(by["b"], P("60", "60")) << top.out;
    EXPECT_EQ(by["[k] vfs_read"], P("25", "25")) << top.out;
    EXPECT_EQ(by["[k] asm_exc_page_fault"], P("40", "40")) << top.out;
    EXPECT_EQ(by["dgemm_kernel_HASWELL"], P("0", "40")) << top.out;
    EXPECT_EQ(by["outer"], P("15", "100")) << top.out;
    EXPECT_NE(top.out.find("File: python"), std::string::npos) << top.out;
}

}  // namespace
}  // namespace pbp
