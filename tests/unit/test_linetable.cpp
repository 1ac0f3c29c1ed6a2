// line_for_instr(): hand-made tables for each format, garbage/truncated input, and
// every instruction of a corpus compiled by every interpreter available, compared
// with that interpreter's own answer (tests/tools/dump_linetables.py).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cpython/linetable.h"
#include "pybpfprof/abi.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using pbp::cpython::line_for_instr;
using pbp::cpython::line_table_format_name;
using pbp::cpython::LineTableFormat;
using F = LineTableFormat;

std::string B(std::initializer_list<int> bytes) {
    std::string s;
    for (int b : bytes) s.push_back(static_cast<char>(static_cast<uint8_t>(b)));
    return s;
}

// A heap copy of exactly table.size() bytes, so AddressSanitizer sees any overread
// (a std::string has SSO / spare capacity behind its data).
struct ExactBuf {
    std::unique_ptr<char[]> p;
    size_t n;
    explicit ExactBuf(std::string_view s) : p(new char[s.size() ? s.size() : 1]), n(s.size()) {
        if (n) std::memcpy(p.get(), s.data(), n);
    }
    std::string_view view() const { return {p.get(), n}; }
};

int L(F f, std::string_view t, int first, uint32_t instr) {
    ExactBuf b(t);
    return line_for_instr(f, b.view(), first, instr);
}

// The line of each (instruction, line) pair's instruction is its line.
void expect_lines(F f, std::string_view t, int first, std::initializer_list<std::pair<uint32_t, int>> want) {
    for (auto [instr, line] : want) EXPECT_EQ(L(f, t, first, instr), line) << "instr " << instr;
}

std::string hex(std::string_view s, size_t max = 160) {
    static const char* d = "0123456789abcdef";
    std::string o;
    for (size_t i = 0; i < s.size() && i < max; i++) {
        o.push_back(d[static_cast<uint8_t>(s[i]) >> 4]);
        o.push_back(d[static_cast<uint8_t>(s[i]) & 15]);
    }
    if (s.size() > max) o += "...(" + std::to_string(s.size()) + " bytes)";
    return o;
}

// ---- <= 3.9: co_lnotab, byte offsets -----------------------------------------------

TEST(LineTableLnotab, EmptyTableIsFirstLine) {
    EXPECT_EQ(L(F::Lnotab, "", 10, 0), 10);
    EXPECT_EQ(L(F::Lnotab, "", 10, 500), 10);
    EXPECT_EQ(L(F::Lnotab, "", 10, PBP_INSTR_UNKNOWN), 0);
}

TEST(LineTableLnotab, ForwardAndSignedDeltas) {
    // (6,+1) (4,-2) (0,+5) (10,+3), firstlineno 100
    const std::string t = B({6, 1, 4, 0xfe, 0, 5, 10, 3});
    for (uint32_t off = 0; off < 6; off++) EXPECT_EQ(L(F::Lnotab, t, 100, off), 100) << off;
    for (uint32_t off = 6; off < 10; off++) EXPECT_EQ(L(F::Lnotab, t, 100, off), 101) << off;
    for (uint32_t off = 10; off < 20; off++) EXPECT_EQ(L(F::Lnotab, t, 100, off), 104) << off;
    // Past the last entry: the last line (the table does not know the code's length).
    EXPECT_EQ(L(F::Lnotab, t, 100, 20), 107);
    EXPECT_EQ(L(F::Lnotab, t, 100, 0xfffffffe), 107);
    EXPECT_EQ(L(F::Lnotab, t, 100, PBP_INSTR_UNKNOWN), 0);
}

TEST(LineTableLnotab, LongGapsAreSplitIntoPairs) {
    // 300 bytes then +200 lines, then -300 lines at the same offset plus 2 bytes:
    // (255,0) (45,127) (0,73) (2,-128) (0,-128) (0,-44)
    const std::string t = B({255, 0, 45, 127, 0, 73, 2, 0x80, 0, 0x80, 0, 0xd4});
    expect_lines(F::Lnotab, t, 1000,
                 {{0, 1000}, {254, 1000}, {255, 1000}, {299, 1000}, {300, 1200}, {301, 1200}, {302, 900}, {4000, 900}});
}

TEST(LineTableLnotab, TruncatedAndGarbage) {
    // An odd trailing byte is ignored, as CPython's size/2 does.
    EXPECT_EQ(L(F::Lnotab, B({4, 1, 4}), 7, 100), 8);
    EXPECT_EQ(L(F::Lnotab, B({4}), 7, 100), 7);
    // A line below 1 from a garbage table is "unknown", never negative.
    EXPECT_EQ(L(F::Lnotab, B({0, 0x80, 0, 0x80}), 1, 0), 0);
}

// ---- 3.10: co_linetable, f_lasti in code units ---------------------------------------

TEST(LineTable310, RangesNoLineAndZeroLengthEntries) {
    // [0,6) +1; [6,10) no line; zero-length +2; [10,18) +1. firstlineno 10.
    const std::string t = B({6, 1, 4, 0x80, 0, 2, 8, 1});
    for (uint32_t u = 0; u < 3; u++) EXPECT_EQ(L(F::Linetable310, t, 10, u), 11) << u;
    for (uint32_t u = 3; u < 5; u++) EXPECT_EQ(L(F::Linetable310, t, 10, u), 0) << u;
    for (uint32_t u = 5; u < 9; u++) EXPECT_EQ(L(F::Linetable310, t, 10, u), 14) << u;
    EXPECT_EQ(L(F::Linetable310, t, 10, 9), 0);  // past the end
    EXPECT_EQ(L(F::Linetable310, t, 10, 1u << 31), 0);
    EXPECT_EQ(L(F::Linetable310, t, 10, PBP_INSTR_UNKNOWN), 0);
}

TEST(LineTable310, InstrIsInCodeUnits) {
    expect_lines(F::Linetable310, B({2, 1, 2, 1, 2, 1}), 1, {{0, 2}, {1, 3}, {2, 4}, {3, 0}});
}

TEST(LineTable310, BigDeltasAndLongRuns) {
    // +300 lines over 600 bytes, as 3.10's compiler splits it; then a no-line run of 300
    // bytes, then -299 lines.
    const std::string t = B({0, 127, 0, 127, 254, 46, 254, 0, 92, 0,  //
                             254, 0x80, 46, 0x80,                      //
                             0, 0x81, 0, 0x81, 2, 0xd3});
    expect_lines(F::Linetable310, t, 5,
                 {{0, 305}, {126, 305}, {127, 305}, {299, 305}, {300, 0}, {449, 0}, {450, 6}, {451, 0}});
}

TEST(LineTable310, TruncatedAndGarbage) {
    EXPECT_EQ(L(F::Linetable310, "", 10, 0), 0);           // no ranges at all
    EXPECT_EQ(L(F::Linetable310, B({4}), 10, 0), 0);       // half an entry
    EXPECT_EQ(L(F::Linetable310, B({4, 1, 4}), 10, 1), 11);
    EXPECT_EQ(L(F::Linetable310, B({4, 1, 4}), 10, 2), 0);  // trailing half entry ignored
    EXPECT_EQ(L(F::Linetable310, B({0, 1, 0, 1, 0, 1}), 10, 0), 0);  // only zero-length
    EXPECT_EQ(L(F::Linetable310, B({8, 0x81}), 1, 0), 0);   // negative line -> unknown
}

// ---- 3.11+: location table, code units ----------------------------------------------

constexpr int entry(int code, int len) { return 0x80 | (code << 3) | (len - 1); }

TEST(LineTable311, AllEntryKinds) {
    const std::string t = B({
        entry(0, 2), 0x12,                          // short form: same line (10)
        entry(11, 1), 5, 9,                         // one-line +1 -> 11
        entry(15, 3),                               // no location
        entry(14, 4), 0x50, 0x06, 0, 5, 6,          // long: svarint +200 -> 211
        entry(13, 1), 0x6d, 0x04,                   // no columns: svarint -150 -> 61
        entry(12, 8), 1, 2,                         // one-line +2 -> 63
        entry(10, 1), 3, 4,                         // one-line +0 -> 63
        entry(9, 1), 0x7f,                          // short form code 9 -> 63
    });
    const int want[] = {10, 10, 11, 0, 0, 0, 211, 211, 211, 211, 61,
                        63, 63, 63, 63, 63, 63, 63, 63, 63, 63};
    for (uint32_t u = 0; u < std::size(want); u++) EXPECT_EQ(L(F::Locations311, t, 10, u), want[u]) << u;
    EXPECT_EQ(L(F::Locations311, t, 10, std::size(want)), 0);  // past the end
    EXPECT_EQ(L(F::Locations311, t, 10, 0xfffffffe), 0);
    EXPECT_EQ(L(F::Locations311, t, 10, PBP_INSTR_UNKNOWN), 0);
}

TEST(LineTable311, NoLocationKeepsRunningLine) {
    // 3.12+ modules start at line 0 (firstlineno 1, delta -1); a no-location entry in
    // between must not disturb the running line.
    const std::string t = B({entry(13, 1), 0x03, entry(15, 2), entry(11, 1), 0, 0});
    expect_lines(F::Locations311, t, 1, {{0, 0}, {1, 0}, {2, 0}, {3, 1}});
}

TEST(LineTable311, TruncatedAndGarbage) {
    EXPECT_EQ(L(F::Locations311, "", 10, 0), 0);
    // Long form cut inside its line-delta varint (continuation bit set at the end).
    EXPECT_EQ(L(F::Locations311, B({entry(14, 2), 0x40 | 4}), 10, 1), 12);
    EXPECT_EQ(L(F::Locations311, B({entry(14, 2)}), 10, 0), 10);
    EXPECT_EQ(L(F::Locations311, B({entry(14, 2)}), 10, 2), 0);
    // A varint that never ends: more than 32 bits of continuation.
    std::string t = B({entry(13, 1)});
    t.append(40, static_cast<char>(0x7f));
    t += B({entry(10, 1), 0, 0});
    EXPECT_NO_FATAL_FAILURE(L(F::Locations311, t, 10, 0));
    EXPECT_NO_FATAL_FAILURE(L(F::Locations311, t, 10, 1));
    // A first byte without bit 7 is decoded anyway (CPython release builds do);
    // following bytes without bit 7 are skipped as entry data.
    // (0x58: code 11, i.e. +1 line, length 1.)
    EXPECT_EQ(L(F::Locations311, B({0x58, 1, 2, entry(11, 1), 0, 0}), 10, 0), 11);
    EXPECT_EQ(L(F::Locations311, B({0x58, 1, 2, entry(11, 1), 0, 0}), 10, 1), 12);
    // Only data bytes: one entry whose first byte is data.
    EXPECT_EQ(L(F::Locations311, std::string(100, '\x01'), 10, 1), 10);
    EXPECT_EQ(L(F::Locations311, std::string(100, '\x01'), 10, 2), 0);
}

// A small encoder for the 3.11 format, independent of the decoder under test.
struct Entry311 {
    int len;      // 1..8 code units
    int kind;     // 0 short, 1 one-line, 2 no-columns, 3 long, 4 none
    int delta;    // line delta (ignored for none; 0..2 for one-line)
};

void put_varint(std::string& o, uint32_t v) {
    while (v >= 64) {
        o.push_back(static_cast<char>(64 | (v & 63)));
        v >>= 6;
    }
    o.push_back(static_cast<char>(v));
}
void put_svarint(std::string& o, int v) {
    put_varint(o, v < 0 ? (static_cast<uint32_t>(-v) << 1) | 1 : static_cast<uint32_t>(v) << 1);
}

TEST(LineTable311, RandomTablesAndEveryTruncation) {
    std::mt19937 rng(12345);
    for (int round = 0; round < 200; round++) {
        const int first = static_cast<int>(rng() % 5000) + 1;
        std::vector<Entry311> es(rng() % 40);
        std::string t;
        std::vector<int> want;         // line per code unit
        std::vector<size_t> entry_end; // byte offset after each entry
        std::vector<size_t> unit_entry;
        int64_t line = first;
        for (size_t i = 0; i < es.size(); i++) {
            Entry311& e = es[i];
            e.len = static_cast<int>(rng() % 8) + 1;
            e.kind = static_cast<int>(rng() % 5);
            int code = 0;
            std::string data;
            switch (e.kind) {
                case 0: code = static_cast<int>(rng() % 10); data = B({static_cast<int>(rng() % 128)}); e.delta = 0; break;
                case 1: e.delta = static_cast<int>(rng() % 3); code = 10 + e.delta; data = B({1, 2}); break;
                case 2: e.delta = static_cast<int>(rng() % 2001) - 1000; code = 13; put_svarint(data, e.delta); break;
                case 3:
                    e.delta = static_cast<int>(rng() % 200001) - 100000;
                    code = 14;
                    put_svarint(data, e.delta);
                    put_varint(data, rng() % 5);
                    put_varint(data, rng() % 300);
                    put_varint(data, rng() % 300);
                    break;
                default: code = 15; e.delta = 0; break;
            }
            if (line + e.delta < 1) e.kind = 4, code = 15, e.delta = 0, data.clear();
            t.push_back(static_cast<char>(entry(code, e.len)));
            t += data;
            line += e.delta;
            for (int u = 0; u < e.len; u++) {
                want.push_back(e.kind == 4 ? 0 : static_cast<int>(line));
                unit_entry.push_back(i);
            }
            entry_end.push_back(t.size());
        }
        for (uint32_t u = 0; u < want.size(); u++)
            ASSERT_EQ(L(F::Locations311, t, first, u), want[u]) << "round " << round << " unit " << u << " table " << hex(t);
        ASSERT_EQ(L(F::Locations311, t, first, static_cast<uint32_t>(want.size())), 0);
        // Truncated anywhere: entries wholly inside the prefix still decode the same,
        // and nothing reads past the end (ASan) or hangs.
        for (size_t cut = 0; cut < t.size(); cut++) {
            ExactBuf pre(std::string_view(t.data(), cut));
            for (uint32_t u = 0; u <= want.size(); u++) {
                int got = line_for_instr(F::Locations311, pre.view(), first, u);
                if (u < want.size() && entry_end[unit_entry[u]] <= cut) {
                    ASSERT_EQ(got, want[u]) << "round " << round << " cut " << cut << " unit " << u;
                }
            }
        }
    }
}

TEST(LineTableAllFormats, RandomGarbageNeverCrashes) {
    std::mt19937 rng(777);
    const F formats[] = {F::Lnotab, F::Linetable310, F::Locations311};
    for (int round = 0; round < 3000; round++) {
        std::string t(rng() % 96, '\0');
        for (auto& c : t) c = static_cast<char>(rng());
        for (F f : formats) {
            for (uint32_t u : {0u, 1u, 2u, 3u, 17u, 100u, 1000u, 0x7fffffffu, 0xfffffffeu,
                               PBP_INSTR_UNKNOWN, static_cast<uint32_t>(rng())}) {
                int got = L(f, t, static_cast<int>(rng() % 100000), u);
                ASSERT_GE(got, 0);
                if (u == PBP_INSTR_UNKNOWN) {
                    ASSERT_EQ(got, 0);
                }
            }
        }
    }
    // Extreme first line numbers do not overflow into negative lines.
    EXPECT_EQ(L(F::Lnotab, B({0, 127}), INT32_MAX, 0), 0);
    EXPECT_EQ(L(F::Locations311, B({entry(12, 1), 0, 0}), INT32_MAX - 1, 0), 0);
    EXPECT_EQ(L(F::Linetable310, B({2, 1}), INT32_MAX, 0), 0);
    // A large table is decoded in one linear pass.
    std::string big(4 << 20, '\0');
    for (auto& c : big) c = static_cast<char>(rng() | 0x80);
    for (F f : formats) EXPECT_GE(L(f, big, 1, 0xfffffffe), 0);
}

// ---- every instruction of a corpus, on every interpreter available -------------------

F format_for(int minor) {
    if (minor <= 9) return F::Lnotab;
    if (minor == 10) return F::Linetable310;
    return F::Locations311;
}

std::string script_path() { return pbp::test::tool_path("dump_linetables.py"); }
std::string corpus_path() { return pbp::test::tool_path("linetable_corpus"); }

// Parameter names of the per-minor-version suites: "py3_12".
std::string minor_test_name(const ::testing::TestParamInfo<int>& info) { return "py3_" + std::to_string(info.param); }

// Runs the dump under 'argv' (an interpreter command) and compares every instruction.
// script/corpus are paths as the interpreter sees them (inside a chroot if any).
void compare_interpreter(const std::string& name, std::vector<std::string> argv, int minor,
                         const std::string& script, const std::string& corpus) {
    argv.insert(argv.end(), {"-I", script, corpus});
    auto r = pbp::test::run(argv, 300);
    ASSERT_EQ(r.status, 0) << name << ": dump_linetables.py failed\n" << r.err.substr(0, 4000);
    json doc;
    try {
        doc = json::parse(r.out);
    } catch (const std::exception& e) {
        FAIL() << name << ": bad JSON from dump_linetables.py: " << e.what();
    }
    const std::string version = doc.at("version");
    ASSERT_EQ(version.rfind("3." + std::to_string(minor) + ".", 0), 0u)
        << name << " reports version " << version;
    const F fmt = format_for(minor);
    ASSERT_EQ(doc.at("format").get<std::string>(), line_table_format_name(fmt)) << name;
    const bool bytes_unit = fmt == F::Lnotab;

    // The corpus must really have been compiled, including the version-gated files.
    std::vector<std::string> files = doc.at("files");
    auto has = [&](const std::string& f) { return std::find(files.begin(), files.end(), f) != files.end(); };
    EXPECT_TRUE(has("basics.py")) << name;
    EXPECT_TRUE(has("gen_gap_300")) << name;
    EXPECT_EQ(has("min38_walrus.py"), minor >= 8) << name;
    EXPECT_EQ(has("min310_match.py"), minor >= 10) << name;
    EXPECT_EQ(has("min312_typeparams.py"), minor >= 12) << name;

    size_t code_objects = 0, compared = 0, mismatches = 0;
    std::ostringstream report;
    int reported = 0;
    std::map<int, size_t> kinds311;  // entry codes seen in 3.11+ tables
    for (const auto& co : doc.at("code_objects")) {
        code_objects++;
        const std::string table = pbp::test::unhex(co.at("table").get<std::string>());
        const int first = co.at("firstlineno");
        const size_t code_len = co.at("code_len");
        const auto& offsets = co.at("offsets");
        const auto& lines = co.at("lines");
        ASSERT_EQ(offsets.size(), lines.size()) << name;
        // Every instruction position of the code is there (plus probes past the end).
        // (<= 3.9: one instruction per 2 bytes of wordcode; later: one per code unit.)
        EXPECT_GE(offsets.size(), code_len / 2) << name << " " << co.at("where");
        if (fmt == F::Locations311)
            for (size_t i = 0; i < table.size(); i++)
                if (table[i] & 0x80) kinds311[(static_cast<uint8_t>(table[i]) >> 3) & 15]++;
        ExactBuf buf(table);
        for (size_t i = 0; i < offsets.size(); i++) {
            const uint32_t off = offsets[i].get<uint32_t>();
            const int want = lines[i];
            const int got = line_for_instr(fmt, buf.view(), first, off);
            compared++;
            if (got != want) {
                mismatches++;
                if (reported++ < 25)
                    report << "  " << co.at("where").get<std::string>() << " firstlineno=" << first
                           << " " << (bytes_unit ? "byte offset " : "code unit ") << off
                           << ": CPython says line " << want << ", line_for_instr says " << got
                           << "; table=" << hex(table) << "\n";
            }
        }
    }
    if (fmt == F::Locations311) {
        // The corpus exercises short forms, one-line forms, long form and no-location.
        for (int k : {0, 1, 2, 10, 11, 12, 14, 15}) EXPECT_GT(kinds311[k], 0u) << name << " never emitted code " << k;
    }
    std::printf("[ linetable ] %s (%s, %s): %zu code objects, %zu instructions compared, %zu mismatches\n",
                name.c_str(), version.c_str(), line_table_format_name(fmt), code_objects, compared, mismatches);
    ::testing::Test::RecordProperty("instructions_compared", std::to_string(compared));
    EXPECT_GT(compared, 50000u) << name << ": corpus suspiciously small";
    EXPECT_EQ(mismatches, 0u) << name << ": " << mismatches << " of " << compared
                              << " instructions disagree with CPython; first ones:\n"
                              << report.str();
}

TEST(LineTableInterpreters, HostPython311) {
    auto py = pbp::test::host_python();
    PBP_REQUIRE(fs::exists(py.argv[0]), "host " + py.argv[0] + " is required");
    compare_interpreter(py.name, py.argv, 11, script_path(), corpus_path());
}

class LineTablePyenv : public ::testing::TestWithParam<int> {};

// 3.6-3.13 from pyenv: required under CI.
TEST_P(LineTablePyenv, MatchesInterpreter) {
    const int minor = GetParam();
    const std::string want = "3." + std::to_string(minor);
    std::vector<pbp::test::Interpreter> builds;
    for (auto& py : pbp::test::pyenv_pythons())
        if (py.version == want) builds.push_back(py);
    PBP_REQUIRE(!builds.empty(), "pyenv build of Python " + want + " is required");
    for (auto& py : builds) {
        SCOPED_TRACE(py.name);
        compare_interpreter(py.name, py.argv, minor, script_path(), corpus_path());
    }
}

INSTANTIATE_TEST_SUITE_P(Minor, LineTablePyenv, ::testing::Range(6, 14), minor_test_name);

// Any other pyenv build (3.14+ one day); none is fine.
TEST(LineTablePyenvOther, MatchesInterpreter) {
    for (auto& py : pbp::test::pyenv_pythons()) {
        const int minor = std::atoi(py.version.c_str() + 2);
        if (py.version.rfind("3.", 0) != 0 || (minor >= 6 && minor <= 13)) continue;
        SCOPED_TRACE(py.name);
        compare_interpreter(py.name, py.argv, minor, script_path(), corpus_path());
    }
}

class LineTableSid : public ::testing::TestWithParam<int> {};

TEST_P(LineTableSid, MatchesInterpreter) {
    const fs::path root = pbp::test::chroot_dir("sid");
    const int minor = GetParam();
    const std::string exe = "python3." + std::to_string(minor);
    if (!fs::is_directory(root)) GTEST_SKIP() << root << " does not exist";
    if (!fs::exists(root / "usr/bin" / exe)) GTEST_SKIP() << "no " << exe << " in " << root;
    PBP_REQUIRE(geteuid() == 0, "chroot needs root");
    // Copy the script and the corpus into the chroot's /tmp.
    const std::string inner = "/tmp/pbp-linetable-" + std::to_string(getpid()) + "-" + exe;
    const fs::path outer = root / inner.substr(1);
    std::error_code ec;
    fs::remove_all(outer, ec);
    fs::create_directories(outer);
    fs::copy_file(script_path(), outer / "dump_linetables.py");
    fs::copy(corpus_path(), outer / "linetable_corpus", fs::copy_options::recursive);
    compare_interpreter("sid-" + exe, {"chroot", root.string(), exe}, minor,
                        inner + "/dump_linetables.py", inner + "/linetable_corpus");
    fs::remove_all(outer, ec);
}

INSTANTIATE_TEST_SUITE_P(Minor, LineTableSid, ::testing::Values(14, 15), minor_test_name);

}  // namespace
