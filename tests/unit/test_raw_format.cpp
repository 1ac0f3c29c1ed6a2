// pybpfprof's own format (export/raw.h): what is written is read back exactly (field by
// field, and through every exporter), it is compact, and its reader refuses what is wrong
// with one line naming the field: truncated files, other formats, newer versions, indices
// out of range, numbers out of range, bombs and garbage.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "engine/profile.h"
#include "mixed_profile.h"
#include "export/common.h"
#include "export/exporter.h"
#include "export/raw.h"
#include "pprof_reader.h"
#include "profile_diff.h"
#include "synthetic_profile.h"
#include "test_support.h"
#include "wall_profile.h"
#include "weighted_profile.h"

using nlohmann::json;

namespace pbp {
namespace {

std::string file_bytes(const Profile& p) {
    std::ostringstream os;
    make_exporter("pbp")->write(p, ExportOptions{}, os);
    return os.str();
}

std::string exported(const std::string& format, const Profile& p) {
    std::ostringstream os;
    make_exporter(format)->write(p, ExportOptions{}, os);
    return os.str();
}

// Everything a Profile can hold, including the awkward: bytes that are not UTF-8, a NUL,
// keys that differ from the pid, samples out of time order, timestamps at both ends of
// uint64, off-CPU samples and mixed weights, an empty stack, NaN-free doubles with
// fractions, a merged profile's inputs.
Profile everything_profile() {
    Profile p;
    RunInfo& r = p.run;
    r.target = "pid 1234 + role=worker";
    r.command = {"python3", "app.py", "caf\xc3\xa9", std::string("nul\0byte", 8)};
    r.start_mono_ns = 123'456'789'012'345ULL;
    r.end_mono_ns = r.start_mono_ns + 2'500'000'000ULL;
    r.start_unix_ns = 1'795'260'680'123'456'789LL;
    r.rate_hz = 99.5;
    r.period_ns = 10'050'251;
    r.kernel = "6.18.44-fc-v657";
    r.host = "node-a.example";
    r.version = "0.1.0";
    r.lost = 7;
    r.truncated = 3;
    r.unresolved = {{"no-thread-state", 12}, {"read-failed", 1}};
    r.bpf_run_time_ns = 987'654'321;
    r.bpf_run_cnt = 4242;
    r.max_depth = 1024;
    r.bpf_loop = true;
    MergedInput m;
    m.run = r;
    m.run.host = "node-b";
    m.run.start_unix_ns = -5;  // before 1970: a signed number
    m.labels = {{"role", "worker"}, {"worker", "tcp://10.0.0.2:4000"}};
    p.merged_from = {m, MergedInput{}};

    const uint32_t mod = p.frames.intern({"<module>", "/app/app.py", 1, false});
    const uint32_t f1 = p.frames.intern({"Caf\xc3\xa9.r\xc3\xa9sum\xc3\xa9", "/app/\xc3\xa9.py", 42, false});
    const uint32_t bad = p.frames.intern({"bad\xff\xfe name", "/app/\x80.py", -1, false});
    const uint32_t trunc = p.frames.intern({"[truncated]", "", 0, true});
    const uint32_t big = p.frames.intern({"big", "/app/app.py", std::numeric_limits<int>::max(), false});
    const uint32_t s0 = p.stacks.intern({mod, f1});
    const uint32_t s1 = p.stacks.intern({trunc, f1, bad});
    const uint32_t s2 = p.stacks.intern({});
    const uint32_t s3 = p.stacks.intern({mod, big, mod, big});

    ProcessProfile& a = p.processes[7];  // a key that is not the pid (a merged profile's)
    a.pid = 1234;
    a.ns_pid = 1;
    a.comm = "python3";
    a.cmdline = "python3 app.py \xff\xfe";
    a.exe = "/usr/bin/python3.11";
    a.python = "3.11.2 (static /usr/bin/python3.11)";
    a.first_sample_ns = r.start_mono_ns + 10;
    a.last_sample_ns = r.start_mono_ns + 2'000'000'000ULL;
    a.exited = true;
    a.labels = {{"pod", "web-1"}, {"namespace", "default"}, {"host", "node-a.example"}, {"role", "scheduler"}};
    a.resources = {{r.start_mono_ns, -1, 100 << 20}, {r.start_mono_ns + 1'000'000'000ULL, 97.3, 123'456'789},
                   {r.start_mono_ns + 2'000'000'000ULL, 0.1, 0}};
    ThreadProfile& t = a.threads[1234];
    t.tid = 1234;
    t.ns_tid = 1;
    t.name = "MainThread";
    t.samples = {{r.start_mono_ns + 10, s0, 0, SampleKind::Cpu, r.period_ns},
                 {r.start_mono_ns + 5, s1, 65535, SampleKind::OffCpu, 250'000'000},  // out of order
                 {r.start_mono_ns + 3'000'000'000ULL, s2, 1, SampleKind::Cpu, 0},
                 {std::numeric_limits<uint64_t>::max(), s3, 2, SampleKind::Cpu, std::numeric_limits<uint64_t>::max()},
                 {0, s0, 3, SampleKind::Cpu, 1}};
    ThreadProfile& u = a.threads[1300];
    u.tid = 1300;
    u.ns_tid = 67;
    u.name = std::string("w\0rk\xff", 5);
    for (uint64_t k = 0; k < 50; k++) u.samples.push_back({r.start_mono_ns + k * r.period_ns, s1, 1, SampleKind::Cpu, r.period_ns});
    a.threads[1400].tid = 1400;  // a thread without samples

    ProcessProfile& b = p.processes[3];
    b.pid = 1234;  // the same pid, another machine
    b.ns_pid = 1234;
    b.comm = "python3";
    b.labels = {{std::string("k\xff"), "not UTF-8 key"}, {"host", "node-b"}};
    ProcessProfile& c = p.processes[std::numeric_limits<uint32_t>::max()];
    c.pid = std::numeric_limits<uint32_t>::max();
    return p;
}

TEST(RawFormat, RegisteredWithItsExtension) {
    auto e = make_exporter("pbp");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->extension(), "pbp");
    EXPECT_EQ(format_for_path("/tmp/run.pbp"), "pbp");
    EXPECT_EQ(format_for_path("/tmp/RUN.PBP"), "pbp");
    EXPECT_NE(e->how_to_open("x.pbp").find("pybpfprof merge x.pbp"), std::string::npos);
}

TEST(RawFormat, RoundTripKeepsEveryField) {
    const Profile p = everything_profile();
    const std::string bytes = file_bytes(p);
    ASSERT_GE(bytes.size(), 2u);
    EXPECT_EQ(uint8_t(bytes[0]), 0x1f) << "gzipped";
    Profile back;
    std::string error;
    ASSERT_TRUE(read_raw(bytes, back, error)) << error;
    EXPECT_EQ(test::profile_difference(p, back), "");
    EXPECT_TRUE(back == p);
    // Plain (decompressed) JSON reads the same.
    Profile plain;
    ASSERT_TRUE(read_raw(raw_json(p), plain, error)) << error;
    EXPECT_TRUE(plain == p) << test::profile_difference(p, plain);
    // Written again, the same bytes.
    EXPECT_EQ(raw_json(back), raw_json(p));
    // The header says what it is.
    json doc = json::parse(raw_json(p));
    EXPECT_EQ(doc["format"], "pybpfprof");
    EXPECT_EQ(doc["version"], 1);
    EXPECT_EQ(doc["run"]["host"], "node-a.example");
}

// A program replaced by an exec (its PID went on) is written as version 6 with each process's
// execd, and read back exactly; without one, the profile stays in its older version.
TEST(RawFormat, ExecdRoundTripsAsVersion6) {
    Profile p = everything_profile();
    EXPECT_EQ(json::parse(raw_json(p))["processes"][0].count("execd"), 0u);
    p.processes.begin()->second.execd = true;
    json doc = json::parse(raw_json(p));
    EXPECT_EQ(doc["version"], 6);
    EXPECT_EQ(doc["processes"][0]["execd"], true);
    Profile back;
    std::string error;
    ASSERT_TRUE(read_raw(file_bytes(p), back, error)) << error;
    EXPECT_TRUE(back == p) << test::profile_difference(p, back);
    // A version 6 file must say it of every process.
    doc["processes"][0].erase("execd");
    Profile missing;
    EXPECT_FALSE(read_raw(doc.dump(), missing, error));
    EXPECT_EQ(error, "processes[0].execd is missing");
}

// Buckets (a run longer than its sample window) are written as version 4 with their count and
// span, and read back exactly.
TEST(RawFormat, BucketsRoundTripAsVersion4) {
    Profile p = everything_profile();
    std::vector<pbp::Sample>* found = nullptr;
    for (auto& [_, pr] : p.processes)
        for (auto& [__, t] : pr.threads)
            if (!found && !t.samples.empty()) found = &t.samples;
    ASSERT_NE(found, nullptr);
    auto& samples = *found;
    pbp::Sample b = samples.front();
    b.count = 250, b.span_ns = 1'000'000'000, b.weight_ns = 250 * 4'000'000, b.ts_ns = samples.front().ts_ns - 1;
    samples.insert(samples.begin(), b);
    json doc = json::parse(raw_json(p));
    EXPECT_EQ(doc["version"], 4);
    Profile back;
    std::string error;
    ASSERT_TRUE(read_raw(file_bytes(p), back, error)) << error;
    EXPECT_TRUE(back == p) << test::profile_difference(p, back);
    EXPECT_EQ(back.total_samples(), p.total_samples());
}

// Native and kernel frames (--native) are written as version 5 with each frame's kind and
// library, the libraries' paths in the file-name table; read back exactly.
TEST(RawFormat, FrameKindsRoundTripAsVersion5) {
    const Profile p = test::MixedProfile().profile;
    json doc = json::parse(raw_json(p));
    EXPECT_EQ(doc["version"], 5);
    ASSERT_EQ(doc["frames"]["kind"].size(), p.frames.size());
    std::map<int, int> kinds;
    for (const auto& k : doc["frames"]["kind"]) kinds[k.get<int>()]++;
    EXPECT_EQ(kinds, (std::map<int, int>{{0, 4}, {1, 5}, {2, 3}}));
    // Each library once in the table: "" (Python frames), 4 libraries, "[kernel]".
    std::set<std::string> files;
    for (const auto& f : doc["files"]) files.insert(f.get<std::string>());
    EXPECT_EQ(files.size(), doc["files"].size()) << "each name once";
    EXPECT_TRUE(files.count("[kernel]") && files.count(test::MixedProfile::kBlas));
    // Version 5 holds the fields of 3 and 4 too.
    EXPECT_TRUE(doc["run"].contains("mode"));
    EXPECT_TRUE(doc["processes"][0]["threads"][0].contains("span_ns"));
    Profile back;
    std::string error;
    ASSERT_TRUE(read_raw(file_bytes(p), back, error)) << error;
    EXPECT_EQ(test::profile_difference(p, back), "");
    EXPECT_TRUE(back == p);
    EXPECT_EQ(back.frames.at(test::MixedProfile().k_vfs_read).kind, FrameKind::Kernel);
    EXPECT_EQ(back.frames.at(test::MixedProfile().ext_b).library, test::MixedProfile::kExtLib);
    EXPECT_EQ(raw_json(back), raw_json(p));
    // A profile of Python frames only stays in its old version.
    EXPECT_EQ(json::parse(raw_json(test::WeightedProfile().profile))["version"], 1);
}

// The profiles the exporters are tested with, and a long synthetic run: read back equal,
// and every exporter writes the same bytes for the original and for the copy.
TEST(RawFormat, RoundTripKeepsEveryExportersOutput) {
    std::vector<std::pair<std::string, Profile>> cases = {
        {"weighted", test::WeightedProfile().profile},
        {"wall", test::WallProfile().profile},
        {"synthetic 3 processes x 60 s", test::synthetic_profile(3, 60, 99)},
        {"everything", everything_profile()},
        {"mixed kinds", test::MixedProfile().profile},
    };
    for (auto& [name, p] : cases) {
        Profile back;
        std::string error;
        ASSERT_TRUE(read_raw(file_bytes(p), back, error)) << name << ": " << error;
        EXPECT_EQ(test::profile_difference(p, back), "") << name;
        for (const std::string& format : exporter_names())
            EXPECT_TRUE(exported(format, p) == exported(format, back)) << name << ": " << format << " differs";
    }
}

// Samples are parallel arrays of small numbers (time deltas, stack indices, CPUs; one
// weight for the thread), then gzipped: a few bytes per sample. Measured at the margin (a
// run twice as long), apart from the frame and stack tables every run has once.
TEST(RawFormat, IsCompact) {
    const Profile p1 = test::synthetic_profile(4, 60, 99), p2 = test::synthetic_profile(4, 120, 99);
    const double samples = static_cast<double>(p2.total_samples() - p1.total_samples());
    const double plain_per = (raw_json(p2).size() - raw_json(p1).size()) / samples;
    const std::string bytes = file_bytes(p2);
    const double gz_per = (bytes.size() - file_bytes(p1).size()) / samples;
    const std::string speedscope = exported("speedscope", p2);
    std::cout << "pbp: " << plain_per << " bytes of JSON per sample, " << gz_per << " gzipped; a " << p2.total_samples()
              << "-sample run with 6000 stacks: " << raw_json(p2).size() << " bytes of JSON, " << bytes.size()
              << " gzipped; its speedscope JSON " << speedscope.size() << " bytes\n";
    EXPECT_LT(plain_per, 18);
    EXPECT_LT(gz_per, 5);
    EXPECT_LT(bytes.size() * 10, speedscope.size()) << "much smaller than the speedscope JSON";
}

// The file is gzipped as it is written (in pieces of about 1 MiB): it unpacks to exactly the
// JSON, and reads back, for a run large enough to be written in many pieces.
TEST(RawFormat, StreamedGzipIsTheJson) {
    const Profile p = test::synthetic_profile(6, 300, 99);
    const std::string text = raw_json(p), bytes = file_bytes(p);
    ASSERT_GT(text.size(), 3u << 20) << "several pieces";
    EXPECT_TRUE(test::gunzip(bytes) == text);
    Profile back;
    std::string error;
    ASSERT_TRUE(read_raw(bytes, back, error)) << error;
    EXPECT_EQ(test::profile_difference(p, back), "");
}

// ---------------------------------------------------------------------- the reader's errors

struct Failure {
    bool ok = false;
    std::string error;
    RawFailure why = RawFailure::None;
};

Failure read_bytes(const std::string& bytes, RawLimits limits = {}) {
    Failure f;
    Profile p;
    f.ok = read_raw(bytes, p, f.error, limits, &f.why);
    if (!f.ok) {
        EXPECT_EQ(f.error.find('\n'), std::string::npos) << "one line: " << f.error;
        EXPECT_FALSE(f.error.empty());
        EXPECT_TRUE(p == Profile{}) << "left empty";
    }
    return f;
}

// The small profile's JSON, changed by edit, read.
template <class Edit>
Failure read_edited(Edit edit) {
    json doc = json::parse(raw_json(test::WeightedProfile().profile));
    edit(doc);
    return read_bytes(doc.dump());
}

#define EXPECT_READ_ERROR(failure, text, kind)                                    \
    do {                                                                          \
        Failure f_ = (failure);                                                   \
        EXPECT_FALSE(f_.ok) << "read although " << (text);                        \
        EXPECT_EQ(f_.error, std::string(text));                                   \
        EXPECT_EQ(static_cast<int>(f_.why), static_cast<int>(RawFailure::kind)); \
    } while (0)

TEST(RawFormatReader, FrameKindErrors) {
    auto mixed = [](auto edit) {
        json doc = json::parse(raw_json(test::MixedProfile().profile));
        edit(doc);
        return read_bytes(doc.dump());
    };
    EXPECT_READ_ERROR(mixed([](json& d) { d["frames"]["kind"][3] = 3; }),
                      "frames.kind[3] must be 0 (Python), 1 (native) or 2 (kernel) (got 3)", Invalid);
    EXPECT_READ_ERROR(mixed([](json& d) { d["frames"]["library"][2] = 999; }),
                      "frames.library[2]: 999 is not a file index (the file has 9 file names)", Invalid);
    EXPECT_READ_ERROR(mixed([](json& d) { d["frames"]["kind"].erase(0); }),
                      "frames: kind and library must be as long as name (12, 11, 12)", Invalid);
    EXPECT_READ_ERROR(mixed([](json& d) { d["frames"].erase("library"); }), "frames.library is missing", Invalid);
    // A frame that differs only by its kind is another frame; the same kind twice is refused.
    EXPECT_READ_ERROR(mixed([](json& d) {
                          auto& f = d["frames"];
                          for (const char* k : {"name", "file", "line", "synthetic", "kind", "library"}) f[k][1] = f[k][0];
                      }),
                      "frames[1] is the same frame as frames[0]", Invalid);
    // Version 4 has no kinds: a version 4 file with them is refused, not half read.
    EXPECT_READ_ERROR(mixed([](json& d) { d["version"] = 4; }),
                      "frames: unknown field \"kind\" (a newer pybpfprof's? this one reads format version 6)", Invalid);
}

TEST(RawFormatReader, TruncatedFiles) {
    const std::string bytes = file_bytes(test::WeightedProfile().profile);
    EXPECT_READ_ERROR(read_bytes(bytes.substr(0, bytes.size() / 2)), "the file is truncated (the gzip data ends early)",
                      Invalid);
    EXPECT_READ_ERROR(read_bytes(bytes.substr(0, 10)), "the file is truncated (the gzip data ends early)", Invalid);
    const std::string text = raw_json(test::WeightedProfile().profile);
    Failure f = read_bytes(text.substr(0, text.size() - 40));
    EXPECT_FALSE(f.ok);
    EXPECT_EQ(f.error.rfind("the file is truncated or corrupt: invalid JSON near byte ", 0), 0u) << f.error;
    EXPECT_EQ(f.why, RawFailure::Invalid);
    EXPECT_READ_ERROR(read_bytes(bytes + "xyz"), "bytes follow the gzip data: the file is corrupt or two files were joined",
                      Invalid);
    std::string corrupt = bytes;
    for (size_t i = 20; i < 60 && i < corrupt.size(); i++) corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
    f = read_bytes(corrupt);
    EXPECT_FALSE(f.ok);
    EXPECT_EQ(f.why, RawFailure::Invalid) << f.error;
}

TEST(RawFormatReader, OtherFormatsSayWhatTheyAre) {
    Profile p = test::WeightedProfile().profile;
    EXPECT_READ_ERROR(read_bytes(exported("speedscope", p)), "speedscope JSON, not pybpfprof's own format", NotRaw);
    EXPECT_READ_ERROR(read_bytes(exported("html", p)), "an HTML file (a report?)", NotRaw);
    EXPECT_READ_ERROR(read_bytes(exported("collapsed", p)), "folded (collapsed) stacks", NotRaw);
    EXPECT_READ_ERROR(read_bytes(exported("pprof", p)), "gzip-compressed data that is not JSON (a pprof profile?)",
                      NotRaw);
    EXPECT_READ_ERROR(read_bytes(""), "the file is empty", NotRaw);
    EXPECT_READ_ERROR(read_bytes("hello"), "not JSON", NotRaw);
    EXPECT_READ_ERROR(read_bytes(R"({"format":"pprof"})"), R"(JSON that is not a pybpfprof profile ("format" is "pprof"))",
                      NotRaw);
    EXPECT_READ_ERROR(read_bytes(R"({"a":1})"), R"(JSON that is not a pybpfprof profile (no "format" field))", NotRaw);
    EXPECT_READ_ERROR(read_bytes("[1,2]"), "JSON that is not a pybpfprof profile (not an object)", NotRaw);
}

TEST(RawFormatReader, Versions) {
    EXPECT_READ_ERROR(read_edited([](json& d) { d["version"] = 7; }),
                      "the file is in format version 7, from a newer pybpfprof; this one reads version 6: upgrade "
                      "pybpfprof to read it",
                      TooNew);
    // Version 6 adds each process's execd: a version 5 file has none, a version 6 file must.
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["execd"] = true; }),
                      "processes[0]: unknown field \"execd\" (a newer pybpfprof's? this one reads format version 6)",
                      Invalid);

    // Version 4 adds the buckets' count and span_ns: a version 3 file has none of them.
    EXPECT_READ_ERROR(read_edited([](json& d) {
                          d["version"] = 3, d["run"]["mode"] = "cpu", d["run"]["min_block_ns"] = 0;
                          auto& t = d["processes"][0]["threads"][0];
                          t["gil"] = 0, t["wait"] = 0, t["aggregate"] = 0, t["count"] = 1;
                      }),
                      "processes[0].threads[0]: unknown field \"count\" (a newer pybpfprof's? this one reads format version 6)",
                      Invalid);
    // Version 3 adds the wall/GIL fields: a version 1 or 2 file has none of them.
    EXPECT_READ_ERROR(read_edited([](json& d) { d["run"]["mode"] = "wall"; }),
                      "run: unknown field \"mode\" (a newer pybpfprof's? this one reads format version 6)", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["threads"][0]["gil"] = 1; }),
                      "processes[0].threads[0]: unknown field \"gil\" (a newer pybpfprof's? this one reads format version 6)",
                      Invalid);
    // ... and a version 3 file must have them all.
    EXPECT_READ_ERROR(read_edited([](json& d) { d["version"] = 3; }), "run.mode is missing", Invalid);
    // Version 2 is version 1 with task spans: a version 1 file has no "tasks" (test_tasks.cpp
    // has the spans' own checks).
    EXPECT_READ_ERROR(read_edited([](json& d) { d["tasks"] = json::object(); }),
                      "profile: unknown field \"tasks\" (a newer pybpfprof's? this one reads format version 6)",
                      Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["version"] = 0; }), "profile.version must be a whole number from 1 (got 0)",
                      Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["version"] = "1"; }),
                      "profile.version must be a whole number from 1 (got \"1\")", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d.erase("version"); }), "profile.version is missing", Invalid);
}

// Version 3: the run's mode and min-block, every sample's GIL state, wait reason and aggregate
// mark, read back exactly; columns when they vary, one number when they do not.
TEST(RawFormat, WallAndGilFieldsRoundTrip) {
    test::WallProfile w;
    Profile p = w.profile;
    MergedInput m;
    m.run = p.run;
    m.run.mode = ProfileMode::Gil;
    p.merged_from = {m};
    json doc = json::parse(raw_json(p));
    EXPECT_EQ(doc["version"], 3);
    EXPECT_EQ(doc["run"]["mode"], "wall");
    EXPECT_EQ(doc["run"]["min_block_ns"], 1'000'000u);
    EXPECT_EQ(doc["merged_from"][0]["run"]["mode"], "gil");
    const json& t10 = doc["processes"][0]["threads"][0];
    EXPECT_TRUE(t10["gil"].is_array());
    EXPECT_EQ(t10["gil"].back(), 3);
    EXPECT_EQ(t10["wait"].back(), 1);
    EXPECT_EQ(t10["aggregate"], 0) << "one number when every sample has the same";
    const json& t11 = doc["processes"][0]["threads"][1];
    EXPECT_EQ(t11["aggregate"].back(), 1);
    EXPECT_EQ(doc["processes"][1]["threads"][0]["gil"], 0) << "free-threaded: n/a for every sample";
    Profile back;
    std::string error;
    ASSERT_TRUE(read_raw(file_bytes(p), back, error)) << error;
    EXPECT_EQ(test::profile_difference(p, back), "");
    EXPECT_TRUE(back == p);
    EXPECT_EQ(raw_json(back), raw_json(p));

    // Out of range: one line naming the field.
    auto edited = [&](auto edit) {
        json d = json::parse(raw_json(w.profile));
        edit(d);
        return read_bytes(d.dump());
    };
    EXPECT_READ_ERROR(edited([](json& d) { d["processes"][0]["threads"][0]["gil"][3] = 4; }),
                      "processes[0].threads[0].gil[3] must be 0 (n/a), 1 (held), 2 (waiting) or 3 (neither) (got 4)",
                      Invalid);
    EXPECT_READ_ERROR(edited([](json& d) { d["processes"][0]["threads"][0]["wait"] = 5; }),
                      "processes[0].threads[0].wait must be 0 (none), 1 (sleep), 2 (I/O), 3 (GIL) or 4 (runnable) (got 5)",
                      Invalid);
    EXPECT_READ_ERROR(edited([](json& d) { d["processes"][0]["threads"][0]["aggregate"] = json::array({0}); }),
                      "processes[0].threads[0].aggregate has 1 values, ts_ns 52: a thread's sample columns must be as "
                      "long as each other",
                      Invalid);
    EXPECT_READ_ERROR(edited([](json& d) { d["run"]["mode"] = "idle"; }),
                      "run.mode must be \"cpu\", \"wall\" or \"gil\" (got \"idle\")", Invalid);

    // Older files still read: a version 1 file is a cpu mode run with GIL state n/a.
    Profile old;
    ASSERT_TRUE(read_raw(raw_json(test::WeightedProfile().profile), old, error)) << error;
    EXPECT_EQ(json::parse(raw_json(test::WeightedProfile().profile))["version"], 1);
    EXPECT_EQ(old.run.mode, ProfileMode::Cpu);
    for (const auto& [_, pr] : old.processes)
        for (const auto& [__, t] : pr.threads)
            for (const Sample& s : t.samples) EXPECT_TRUE(s.gil == GilState::NA && s.wait == WaitReason::None && !s.aggregate);
}

TEST(RawFormatReader, IndicesOutOfRange) {
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["threads"][0]["stack"][1] = 999; }),
                      "processes[0].threads[0].stack[1]: 999 is not a stack index (the file has 3 stacks)", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["stacks"][2][1] = 4; }),
                      "stacks[2][1]: 4 is not a frame index (the file has 4 frames)", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["frames"]["file"][0] = 1; }),
                      "frames.file[0]: 1 is not a file index (the file has 1 file names)", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["threads"][0]["stack"][0] = -1; }),
                      "processes[0].threads[0].stack[0] must be a whole number from 0 to 4294967295 (got -1)", Invalid);
}

TEST(RawFormatReader, NumbersOutOfRange) {
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["pid"] = 1ULL << 40; }),
                      "processes[0].pid must be a whole number from 0 to 4294967295 (got 1099511627776)", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["threads"][0]["cpu"][0] = 70000; }),
                      "processes[0].threads[0].cpu[0] must be a whole number from 0 to 65535 (got 70000)", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["threads"][0]["ts_ns"][1] = 1e30; }),
                      "processes[0].threads[0].ts_ns[1] must be a whole number from -9223372036854775808 to "
                      "9223372036854775807 (got 1e+30)",
                      Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["threads"][0]["kind"][0] = 3; }),
                      "processes[0].threads[0].kind[0] must be 1 (on CPU) or 2 (off CPU) (got 3)", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["threads"][0]["weight_ns"][0] = -1; }),
                      "processes[0].threads[0].weight_ns[0] must be a whole number from 0 to 18446744073709551615 "
                      "(got -1)",
                      Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["run"]["max_depth"] = 1ULL << 33; }),
                      "run.max_depth must be a whole number from -2147483648 to 2147483647 (got 8589934592)", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["run"]["rate_hz"] = "fast"; }),
                      "run.rate_hz must be a number (got \"fast\")", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["exited"] = 0; }),
                      "processes[0].exited must be true or false (got 0)", Invalid);
}

TEST(RawFormatReader, ShapesAndDuplicates) {
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["threads"][0]["cpu"].erase(0); }),
                      "processes[0].threads[0].cpu has 6 values, ts_ns 7: a thread's sample columns must be as long "
                      "as each other",
                      Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["run"].erase("host"); }), "run.host is missing", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["run"]["colour"] = "blue"; }),
                      "run: unknown field \"colour\" (a newer pybpfprof's? this one reads format version 6)", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][1]["key"] = d["processes"][0]["key"]; }),
                      "processes[1].key: 10 is the key of another process too", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["threads"].push_back(d["processes"][0]["threads"][0]); }),
                      "processes[0].threads[1].tid: thread 10 appears twice in the process", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) {
                          d["stacks"][1] = d["stacks"][0];
                      }),
                      "stacks[1] is the same stack as stacks[0]", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) {
                          for (const char* k : {"name", "file", "line", "synthetic"}) d["frames"][k][1] = d["frames"][k][0];
                      }),
                      "frames[1] is the same frame as frames[0]", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["comm"] = json{{"base64", "!!"}}; }),
                      "processes[0].comm.base64 is not base64 (got {\"base64\":\"!!\"})", Invalid);
    EXPECT_READ_ERROR(read_edited([](json& d) { d["processes"][0]["labels"] = json::array({json::array({"a", "b"}), json::array({"a", "c"})}); }),
                      "processes[0].labels[1]: key \"a\" repeats", Invalid);
    // A key twice in one JSON object: refused by the parser, not silently the last one.
    std::string text = raw_json(test::WeightedProfile().profile);
    text.replace(text.find("\"run\":{"), 7, "\"run\":{\"lost\":1,");
    Failure f = read_bytes(text);
    EXPECT_FALSE(f.ok);
    EXPECT_NE(f.error.find("duplicate field 'lost'"), std::string::npos) << f.error;
}

TEST(RawFormatReader, BombsAndLimits) {
    // A gzip bomb: 64 MiB of spaces stops at the limit, not at the end of memory.
    const std::string bomb = gzip(std::string(64u << 20, ' '));
    EXPECT_READ_ERROR(read_bytes(bomb, RawLimits{16u << 20, 1000}), "the profile is larger than 16 MiB once decompressed",
                      TooLarge);
    EXPECT_READ_ERROR(read_bytes(std::string(3u << 20, ' '), RawLimits{1u << 20, 1000}), "the profile is larger than 1 MiB",
                      TooLarge);
    // Many values: refused before they are parsed.
    json doc = json::parse(raw_json(test::WeightedProfile().profile));
    EXPECT_READ_ERROR(read_bytes(doc.dump(), RawLimits{1u << 20, 20}), "the profile has more than 20 values", TooLarge);
    // Deep nesting is refused without recursion.
    std::string deep = "{\"format\":\"pybpfprof\",\"version\":1,\"run\":" + std::string(200000, '[') + std::string(200000, ']') + "}";
    Failure f = read_bytes(deep);
    EXPECT_FALSE(f.ok);
    EXPECT_NE(f.error.find("nested"), std::string::npos) << f.error;
}

// Whatever the bytes, the reader answers (true or one line), never crashes: every prefix of
// a small file, and random byte changes to it, plain and gzipped. (tests/fuzz/fuzz_raw_reader.cpp
// does this for longer under libFuzzer.)
TEST(RawFormatReader, SurvivesTruncationAndRandomDamage) {
    Profile small = test::WeightedProfile().profile;
    small.processes.begin()->second.labels["host"] = "x\xff";
    const std::string text = raw_json(small), gz = file_bytes(small);
    ASSERT_EQ(text.back(), '\n');  // (without it, still the whole JSON)
    for (size_t n = 0; n + 1 < text.size(); n++) EXPECT_FALSE(read_bytes(text.substr(0, n)).ok) << n;
    for (size_t n = 0; n < gz.size(); n++) EXPECT_FALSE(read_bytes(gz.substr(0, n)).ok) << n;
    std::mt19937 rng(7);
    size_t read_ok = 0;
    for (int round = 0; round < 3000; round++) {
        std::string d = round % 2 ? text : gz;
        int changes = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < changes; k++) {
            size_t at = rng() % d.size();
            switch (rng() % 3) {
                case 0: d[at] = static_cast<char>(rng() & 0xff); break;
                case 1: d.erase(at, 1 + rng() % 8); break;
                default: d.insert(at, 1, "0123456789[]{},:\"-"[rng() % 18]); break;
            }
            if (d.empty()) d = "x";
        }
        Failure f = read_bytes(d);
        read_ok += f.ok;
    }
    std::cout << read_ok << " of 3000 damaged files still read (a changed digit is still a profile)\n";
}

}  // namespace
}  // namespace pbp
