// CPython layouts: the built-in tables (3.6 .. 3.12) and the _Py_DebugOffsets decoder
// (3.13+), checked against every interpreter on the machine by running
// tests/tools/check_layout.py inside it.
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cpython/gil.h"
#include "cpython/layout.h"
#include "cpython/linetable.h"
#include "cpython/policy.h"
#include "cpython/runtime_phase.h"
#include "sys/target_memory.h"
#include "test_support.h"

using namespace pbp::cpython;
using pbp::test::Interpreter;
using pbp::test::with_args;

namespace {

struct LiveInfo {
    uint32_t hexversion = 0;
    bool free_threaded = false;
};

std::optional<LiveInfo> live_info(const Interpreter& in) {
    auto r = pbp::test::run(with_args(
        in.argv, {"-c", "import sys, sysconfig; print(sys.hexversion, "
                        "int(bool(sysconfig.get_config_var('Py_GIL_DISABLED'))))"}));
    if (r.status != 0) return std::nullopt;
    std::istringstream is(r.out);
    LiveInfo li;
    int ft = 0;
    if (!(is >> li.hexversion >> ft)) return std::nullopt;
    li.free_threaded = ft != 0;
    return li;
}

// 3.13+: start the interpreter, read _Py_DebugOffsets out of it with ProcessMemory.
std::optional<Layout> live_debug_offsets_layout(const Interpreter& in, std::string& error,
                                                std::string& warning) {
    pbp::test::Reporter p(with_args(in.argv,
                                    {"-c", "import ctypes, sys, time\n"
                                           "print(ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "
                                           "'_PyRuntime')))\nsys.stdout.flush()\ntime.sleep(600)\n"}));
    p.read_lines(1);
    const std::string& out = p.out();
    uint64_t runtime = std::strtoull(out.c_str(), nullptr, 10);
    if (!runtime) {
        error = "no _PyRuntime address from " + in.name + ": '" + out + "' " + p.err();
        return std::nullopt;
    }
    std::vector<uint8_t> raw(kDebugOffsetsReadSize);
    pbp::ProcessMemory mem(p.pid());
    if (!mem.read(runtime, raw.data(), raw.size())) {
        error = "cannot read _PyRuntime of pid " + std::to_string(p.pid());
        return std::nullopt;
    }
    return layout_from_debug_offsets(raw, error, warning);
}

std::string layout_json(const Layout& l) {
    const pbp_py_offsets& o = l.bpf;
    const ObjectLayout& b = l.obj;
    std::ostringstream s;
    s << "{\"version\":\"" << l.version.str() << "\",\"free_threaded\":" << (l.free_threaded ? 1 : 0)
      << ",\"line_format\":\"" << line_table_format_name(l.line_format) << "\",\"runtime_interp_head\":";
    if (l.runtime_interp_head)
        s << *l.runtime_interp_head;
    else
        s << "null";
    s << ",\"runtime_gil\":";
    if (l.runtime_gil)
        s << *l.runtime_gil;
    else
        s << "null";
    s << ",\"bpf\":{"
      << "\"py_version_hex\":" << o.py_version_hex << ",\"frame_kind\":" << int(o.frame_kind)
      << ",\"instr_kind\":" << int(o.instr_kind) << ",\"free_threaded\":" << int(o.free_threaded)
      << ",\"executable_tag_mask\":" << int(o.executable_tag_mask)
      << ",\"interp_next\":" << o.interp_next << ",\"interp_threads_head\":" << o.interp_threads_head
      << ",\"tstate_next\":" << o.tstate_next << ",\"tstate_thread_id\":" << o.tstate_thread_id
      << ",\"tstate_frame\":" << o.tstate_frame << ",\"cframe_current_frame\":" << o.cframe_current_frame
      << ",\"cframe_previous\":" << o.cframe_previous << ",\"frame_entry_off\":" << o.frame_entry_off
      << ",\"frame_entry_val\":" << int(o.frame_entry_val)
      << ",\"tstate_root_cframe\":" << o.tstate_root_cframe << ",\"interp_code_gen\":" << o.interp_code_gen
      << ",\"frame_previous\":" << o.frame_previous << ",\"frame_code\":" << o.frame_code
      << ",\"frame_instr\":" << o.frame_instr << ",\"frame_owner\":" << o.frame_owner
      << ",\"frame_tlbc_index\":" << o.frame_tlbc_index << ",\"frame_read_len\":" << o.frame_read_len
      << ",\"code_ob_type\":" << o.code_ob_type << ",\"code_adaptive\":" << o.code_adaptive
      << ",\"code_tlbc\":" << o.code_tlbc << ",\"code_read_len\":" << o.code_read_len
      << ",\"csum_off\":[" << o.csum_off[0] << "," << o.csum_off[1] << "," << o.csum_off[2] << ","
      << o.csum_off[3] << "],\"csum_size\":[" << int(o.csum_size[0]) << "," << int(o.csum_size[1])
      << "," << int(o.csum_size[2]) << "," << int(o.csum_size[3])
      << "],\"skip_owner_mask\":" << o.skip_owner_mask << ",\"gil_where\":" << int(o.gil_where)
      << ",\"interp_gil_ptr\":" << o.interp_gil_ptr << ",\"gil_locked\":" << o.gil_locked
      << ",\"gil_last_holder\":" << o.gil_last_holder << ",\"gil_size\":" << o.gil_size
      << "},\"obj\":{"
      << "\"co_filename\":" << b.co_filename << ",\"co_name\":" << b.co_name
      << ",\"co_qualname\":" << b.co_qualname << ",\"co_firstlineno\":" << b.co_firstlineno
      << ",\"co_linetable\":" << b.co_linetable << ",\"bytes_size\":" << b.bytes_size
      << ",\"bytes_sval\":" << b.bytes_sval << ",\"unicode_length\":" << b.unicode_length
      << ",\"unicode_state\":" << b.unicode_state << ",\"unicode_ascii_size\":" << b.unicode_ascii_size
      << ",\"unicode_compact_size\":" << b.unicode_compact_size
      << ",\"state_kind_shift\":" << int(b.state_kind_shift)
      << ",\"state_compact_bit\":" << int(b.state_compact_bit)
      << ",\"state_ascii_bit\":" << int(b.state_ascii_bit) << "}}";
    return s.str();
}

// Fields of layout_json(l), by JSON pointer ("/bpf/interp_next", "/bpf/csum_off/3"), against
// what they must be.
void expect_fields(const Layout& l, std::initializer_list<std::pair<const char*, int64_t>> want) {
    const nlohmann::json j = nlohmann::json::parse(layout_json(l));
    for (auto& [ptr, v] : want) {
        const nlohmann::json::json_pointer p(ptr);
        ASSERT_TRUE(j.contains(p)) << ptr << " not in " << j.dump();
        EXPECT_EQ(j.at(p).get<int64_t>(), v) << ptr;
    }
}

// Runs tests/tools/check_layout.py inside the interpreter (passed with -c, so it also works
// in the chroot).
void expect_live_check(const Interpreter& in, const Layout& l) {
    std::string script = pbp::test::read_file(pbp::test::tool_path("check_layout.py"));
    ASSERT_FALSE(script.empty());
    std::string json = layout_json(l);
    auto r = pbp::test::run(with_args(in.argv, {"-c", script, json}), 120);
    EXPECT_EQ(r.status, 0) << in.name << " (" << l.source << ")\n"
                           << r.out << r.err << "\nlayout: " << json;
    EXPECT_NE(r.out.find("failures: 0"), std::string::npos) << r.out << r.err;
    std::cout << "  " << in.name << " [" << l.source << "]\n" << r.out;
    if (std::getenv("PBP_VERBOSE")) std::cout << "  layout: " << json << "\n";
}

// ---- live: every interpreter --------------------------------------------------------------

class LayoutLive : public testing::TestWithParam<Interpreter> {};

TEST_P(LayoutLive, MatchesInterpreter) {
    const Interpreter& in = GetParam();
    auto li = live_info(in);
    PBP_REQUIRE(li.has_value(), in.name + " does not start");
    Version v = Version::from_hex(li->hexversion);
    ASSERT_EQ(v.str().rfind(in.version, 0), 0u) << v.str() << " vs " << in.version;

    if (!v.at_least(3, 13)) {
        auto l = builtin_layout(v, li->free_threaded);
        ASSERT_TRUE(l.has_value()) << "no built-in table for " << v.str();
        EXPECT_EQ(l->version.hex(), li->hexversion);
        EXPECT_EQ(l->source, "table 3." + std::to_string(v.minor));
        expect_live_check(in, *l);
    } else {
        EXPECT_FALSE(builtin_layout(v, li->free_threaded).has_value())
            << "3.13+ must come from _Py_DebugOffsets";
        std::string err, warn;
        auto l = live_debug_offsets_layout(in, err, warn);
        ASSERT_TRUE(l.has_value()) << in.name << ": " << err;
        EXPECT_EQ(warn, "") << "no warning expected for a tested version";
        EXPECT_EQ(l->bpf.py_version_hex, li->hexversion);
        EXPECT_EQ(l->free_threaded, li->free_threaded);
        EXPECT_EQ(l->bpf.frame_kind, PBP_FRAME_INTERP);
        EXPECT_EQ(l->bpf.instr_kind, PBP_INSTR_PTR);
        EXPECT_EQ(l->bpf.executable_tag_mask, v.at_least(3, 14) ? 3 : 0);
        EXPECT_EQ(l->bpf.skip_owner_mask, v.at_least(3, 14) ? 0x18u : 0x8u);
        expect_live_check(in, *l);
    }
}

INSTANTIATE_TEST_SUITE_P(Interpreters, LayoutLive, testing::ValuesIn(pbp::test::all_interpreters()),
                         pbp::test::interpreter_test_name);

// Under CI every interpreter the design relies on must be there.
TEST(LayoutLiveCoverage, AllVersionsPresent) {
    std::set<std::string> have;
    for (auto& in : pbp::test::all_interpreters()) have.insert(in.version);
    for (const char* want : {"3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15"})
        PBP_REQUIRE(have.count(want), std::string("no CPython ") + want + " interpreter to check against");
}

// ---- built-in tables ----------------------------------------------------------------------

TEST(LayoutVersion, HexRoundTrip) {
    Version v = Version::from_hex(0x030B07F0);
    EXPECT_EQ(v.major, 3);
    EXPECT_EQ(v.minor, 11);
    EXPECT_EQ(v.micro, 7);
    EXPECT_EQ(v.level, 0xF);
    EXPECT_EQ(v.serial, 0);
    EXPECT_EQ(v.hex(), 0x030B07F0u);
    EXPECT_EQ(v.str(), "3.11.7");
    EXPECT_EQ(Version::from_hex(0x030E00C2).str(), "3.14.0rc2");
    EXPECT_EQ(Version::from_hex(0x030E00A1).str(), "3.14.0a1");
    EXPECT_EQ(Version::from_hex(0x030D00B3).str(), "3.13.0b3");
    EXPECT_EQ(Version::from_hex(0x030D00B3).hex(), 0x030D00B3u);
    EXPECT_TRUE(v.at_least(3, 11));
    EXPECT_FALSE(v.at_least(3, 12));
    EXPECT_TRUE(v.known());
    EXPECT_FALSE(Version{}.known());
}

TEST(LayoutBuiltin, CoversExactly36To312) {
    for (int minor = 0; minor < 20; minor++) {
        Version v = Version::from_hex(0x03000000u | (minor << 16) | 0xF0);
        auto l = builtin_layout(v, false);
        EXPECT_EQ(l.has_value(), minor >= 6 && minor <= 12) << v.str();
        EXPECT_FALSE(builtin_layout(v, true).has_value()) << v.str();
    }
    EXPECT_FALSE(builtin_layout(Version::from_hex(0x020712F0), false).has_value());
}

TEST(LayoutBuiltin, PerVersionEssentials) {
    struct Want {
        uint32_t hex;
        pbp_frame_kind fk;
        pbp_instr_kind ik;
        LineTableFormat lf;
        bool has_runtime;
        uint32_t skip;
    } wants[] = {
        {0x030600F0, PBP_FRAME_OBJECT, PBP_INSTR_LASTI_BYTES, LineTableFormat::Lnotab, false, 0},
        {0x030700F0, PBP_FRAME_OBJECT, PBP_INSTR_LASTI_BYTES, LineTableFormat::Lnotab, true, 0},
        {0x030900F0, PBP_FRAME_OBJECT, PBP_INSTR_LASTI_BYTES, LineTableFormat::Lnotab, true, 0},
        {0x030A00F0, PBP_FRAME_OBJECT, PBP_INSTR_LASTI_UNITS, LineTableFormat::Linetable310, true, 0},
        {0x030B00F0, PBP_FRAME_INTERP_CFRAME, PBP_INSTR_PTR, LineTableFormat::Locations311, true, 0},
        {0x030C00F0, PBP_FRAME_INTERP_CFRAME, PBP_INSTR_PTR, LineTableFormat::Locations311, true, 8},
    };
    for (auto& w : wants) {
        auto l = builtin_layout(Version::from_hex(w.hex), false);
        ASSERT_TRUE(l) << std::hex << w.hex;
        const auto& o = l->bpf;
        SCOPED_TRACE(l->source);
        EXPECT_EQ(o.py_version_hex, w.hex);
        EXPECT_EQ(o.frame_kind, w.fk);
        EXPECT_EQ(o.instr_kind, w.ik);
        EXPECT_EQ(l->line_format, w.lf);
        EXPECT_EQ(l->runtime_interp_head.has_value(), w.has_runtime);
        EXPECT_EQ(o.skip_owner_mask, w.skip);
        EXPECT_EQ(o.executable_tag_mask, 0);
        EXPECT_EQ(o.free_threaded, 0);
        EXPECT_EQ(o.frame_tlbc_index, PBP_OFF_NONE);
        EXPECT_EQ(o.code_tlbc, PBP_OFF_NONE);
        EXPECT_EQ(o.cframe_current_frame != PBP_OFF_NONE, w.fk == PBP_FRAME_INTERP_CFRAME);
        // the eval loop entry check: 3.11 is_entry @68, 3.12 owner @70 == FRAME_OWNED_BY_CSTACK
        EXPECT_EQ(o.frame_entry_off != PBP_OFF_NONE, w.fk == PBP_FRAME_INTERP_CFRAME);
        EXPECT_EQ(o.tstate_root_cframe != PBP_OFF_NONE, w.fk == PBP_FRAME_INTERP_CFRAME);
        if (w.hex >= 0x030B0000) {
            const bool v311 = w.hex < 0x030C0000;
            EXPECT_EQ(o.cframe_previous, v311 ? 16 : 8);
            EXPECT_EQ(o.frame_entry_off, v311 ? 68 : 70);
            EXPECT_EQ(o.frame_entry_val, v311 ? 1 : 3);
            EXPECT_EQ(o.tstate_root_cframe, v311 ? 336 : 272);
            EXPECT_GE(o.frame_read_len, o.frame_entry_off + 1);
        }
        EXPECT_EQ(o.frame_owner != PBP_OFF_NONE, w.fk != PBP_FRAME_OBJECT);
        EXPECT_EQ(o.code_adaptive != PBP_OFF_NONE, w.ik == PBP_INSTR_PTR);
        EXPECT_EQ(l->obj.co_qualname != PBP_OFF_NONE, w.hex >= 0x030B0000);
        // checksum: name, filename, firstlineno, then co_version (4, 3.12) or line table (8)
        EXPECT_EQ(o.csum_off[0], l->obj.co_name);
        EXPECT_EQ(o.csum_off[1], l->obj.co_filename);
        EXPECT_EQ(o.csum_off[2], l->obj.co_firstlineno);
        EXPECT_EQ(o.csum_size[2], 4);
        if (w.hex >= 0x030C0000) {
            EXPECT_EQ(o.csum_size[3], 4);
        } else {
            EXPECT_EQ(o.csum_off[3], l->obj.co_linetable);
            EXPECT_EQ(o.csum_size[3], 8);
        }
        // finalized
        EXPECT_GT(o.frame_read_len, 0);
        EXPECT_EQ(o.frame_read_len % 8, 0);
        EXPECT_LE(o.frame_read_len, PBP_WINDOW);
        EXPECT_GE(o.frame_read_len, o.frame_previous + 8);
        EXPECT_GE(o.frame_read_len, o.frame_code + 8);
        EXPECT_GT(o.code_read_len, o.code_ob_type);
        EXPECT_LE(o.code_read_len, PBP_WINDOW);
        pbp_py_offsets copy = o;
        std::string err;
        EXPECT_TRUE(finalize_bpf_offsets(copy, err)) << err;
        EXPECT_EQ(std::memcmp(&copy, &o, sizeof o), 0) << "finalize must be idempotent";
    }
}

// The GIL of the built-in tables (gen_layout_offsets.sh): in _PyRuntime.ceval.gil for 3.7 ..
// 3.11, a pointer in the interpreter for 3.12, static variables for 3.6 (found by their
// symbols: no offsets in the layout).
TEST(LayoutBuiltin, Gil) {
    const struct {
        uint32_t hex;
        int where;
        int64_t runtime_gil, interp_ptr;
    } wants[] = {
        {0x030610F0, PBP_GIL_WHERE_STATICS, -1, PBP_OFF_NONE},
        {0x030710F0, PBP_GIL_WHERE_ADDR, 1264, PBP_OFF_NONE},
        {0x030812F0, PBP_GIL_WHERE_ADDR, 1152, PBP_OFF_NONE},
        {0x030912F0, PBP_GIL_WHERE_ADDR, 352, PBP_OFF_NONE},
        {0x030A0DF0, PBP_GIL_WHERE_ADDR, 352, PBP_OFF_NONE},
        {0x030B07F0, PBP_GIL_WHERE_ADDR, 360, PBP_OFF_NONE},
        {0x030C01F0, PBP_GIL_WHERE_INTERP, -1, 384},
    };
    for (auto& w : wants) {
        auto l = builtin_layout(Version::from_hex(w.hex), false);
        ASSERT_TRUE(l);
        SCOPED_TRACE(l->source);
        EXPECT_EQ(l->bpf.gil_where, w.where);
        EXPECT_EQ(l->runtime_gil ? int64_t(*l->runtime_gil) : -1, w.runtime_gil);
        EXPECT_EQ(l->bpf.interp_gil_ptr, w.interp_ptr);
        if (w.where == PBP_GIL_WHERE_STATICS) {
            EXPECT_EQ(l->bpf.gil_size, 0);
            EXPECT_EQ(gil_fixed_address(*l, 0x1000), 0u);
            continue;
        }
        EXPECT_EQ(l->bpf.gil_last_holder, 8);
        EXPECT_EQ(l->bpf.gil_locked, 16);
        EXPECT_EQ(l->bpf.gil_size, 208);
        EXPECT_EQ(gil_fixed_address(*l, 0x1000), w.runtime_gil >= 0 ? 0x1000u + w.runtime_gil : 0u);
        EXPECT_EQ(gil_fixed_address(*l, 0), 0u);  // no _PyRuntime found
    }
}

// A bad GIL description fails finalize (it would make BPF read outside its window).
TEST(LayoutBuiltin, GilFinalizeChecks) {
    auto l = builtin_layout(Version::from_hex(0x030B07F0), false);
    ASSERT_TRUE(l);
    std::string err;
    auto o = l->bpf;
    o.gil_locked = PBP_GIL_WINDOW;
    EXPECT_FALSE(finalize_bpf_offsets(o, err));
    o = l->bpf;
    o.gil_last_holder = 12;  // misaligned
    EXPECT_FALSE(finalize_bpf_offsets(o, err));
    o = l->bpf;
    o.gil_size = 8;
    EXPECT_FALSE(finalize_bpf_offsets(o, err));
    o = l->bpf;
    o.gil_where = PBP_GIL_WHERE_INTERP;  // without the pointer's offset
    EXPECT_FALSE(finalize_bpf_offsets(o, err));
    o.interp_gil_ptr = 384;
    EXPECT_TRUE(finalize_bpf_offsets(o, err)) << err;
    o.gil_where = 4;
    EXPECT_FALSE(finalize_bpf_offsets(o, err));
}

TEST(LayoutBuiltin, ReadLengthsAreExact) {
    // 3.6: f_lasti (int) @120 -> 124 -> 128; co_lnotab @112 -> 120
    auto l36 = builtin_layout(Version::from_hex(0x03060FF0), false);
    ASSERT_TRUE(l36);
    EXPECT_EQ(l36->bpf.frame_read_len, 128);
    EXPECT_EQ(l36->bpf.code_read_len, 120);
    // 3.11: owner (char) @69 -> 70 -> 72; co_linetable @136 -> 144
    auto l311 = builtin_layout(Version::from_hex(0x030B07F0), false);
    ASSERT_TRUE(l311);
    EXPECT_EQ(l311->bpf.frame_read_len, 72);
    EXPECT_EQ(l311->bpf.code_read_len, 144);
    // 3.12: owner @70 -> 72; co_name @120 -> 128
    auto l312 = builtin_layout(Version::from_hex(0x030C01F0), false);
    ASSERT_TRUE(l312);
    EXPECT_EQ(l312->bpf.frame_read_len, 72);
    EXPECT_EQ(l312->bpf.code_read_len, 128);
}

// ---- finalize_bpf_offsets -----------------------------------------------------------------

pbp_py_offsets base_offsets() {
    auto l = builtin_layout(Version::from_hex(0x030C01F0), false);
    return l->bpf;
}

TEST(LayoutFinalize, RejectsOutOfWindowAndMisaligned) {
    std::string err;
    {
        auto o = base_offsets();
        o.frame_previous = 256;
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
        EXPECT_NE(err.find("frame_previous"), std::string::npos) << err;
    }
    {
        auto o = base_offsets();
        o.frame_code = 252;  // 8-byte field needs 8 alignment
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
        EXPECT_NE(err.find("aligned"), std::string::npos) << err;
    }
    {
        auto o = base_offsets();
        o.frame_previous = 248;  // last u64 slot of the window: fine
        EXPECT_TRUE(finalize_bpf_offsets(o, err)) << err;
        EXPECT_EQ(o.frame_read_len, PBP_WINDOW);
    }
    {
        auto o = base_offsets();
        o.csum_off[2] = 70;  // u32 needs 4 alignment
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
    {
        auto o = base_offsets();
        o.csum_off[3] = 254;  // u32 beyond the window
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
    {
        auto o = base_offsets();
        o.csum_size[1] = 2;
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
    {
        auto o = base_offsets();
        o.frame_owner = 255;  // u8 at the last byte: allowed
        EXPECT_TRUE(finalize_bpf_offsets(o, err)) << err;
        EXPECT_EQ(o.frame_read_len, 256);
        o.frame_owner = 256;
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
    {
        auto o = base_offsets();
        o.frame_tlbc_index = 72;  // without code_tlbc
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
        o.code_tlbc = 226;  // misaligned u64
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
        o.code_tlbc = 224;
        EXPECT_TRUE(finalize_bpf_offsets(o, err)) << err;
        EXPECT_EQ(o.frame_read_len, 80);
        EXPECT_EQ(o.code_read_len, 232);
    }
    {
        auto o = base_offsets();
        o.code_ob_type = 260;
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
    {
        auto o = base_offsets();
        o.tstate_frame = PBP_OFF_NONE;
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
    {
        auto o = base_offsets();
        o.cframe_current_frame = PBP_OFF_NONE;  // required for PBP_FRAME_INTERP_CFRAME
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
    {
        auto o = base_offsets();
        o.cframe_current_frame = 24;  // beyond the PBP_CFRAME_WINDOW bytes read from the cframe
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
        o.cframe_current_frame = 4;  // not aligned
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
    {
        auto o = base_offsets();
        o.cframe_previous = PBP_OFF_NONE;  // the entry check needs it
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
        o.cframe_previous = 24;
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
        o.cframe_previous = 16;
        EXPECT_TRUE(finalize_bpf_offsets(o, err)) << err;
    }
    {
        auto o = base_offsets();
        o.tstate_root_cframe = PBP_OFF_NONE;  // the entry check must know the root cframe
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
    {
        auto o = base_offsets();
        o.frame_entry_off = 256;  // read from the frame window
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
        o.frame_entry_off = 200;
        EXPECT_TRUE(finalize_bpf_offsets(o, err)) << err;
        EXPECT_EQ(o.frame_read_len, 208);
        o.frame_kind = PBP_FRAME_INTERP;  // no cframe to check
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
    {
        auto o = base_offsets();
        o.frame_kind = 9;
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
    {
        auto o = base_offsets();
        o.instr_kind = PBP_INSTR_LASTI_BYTES;  // f_lasti is a 4-byte field then
        o.frame_instr = 100;
        EXPECT_TRUE(finalize_bpf_offsets(o, err)) << err;
        o.frame_instr = 102;
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
    {
        auto o = base_offsets();
        for (auto& s : o.csum_size) s = 0;
        EXPECT_FALSE(finalize_bpf_offsets(o, err));
    }
}

// ---- _Py_DebugOffsets, synthetic ------------------------------------------------------------
//
// The struct shapes, transcribed independently of debug_offsets.cpp from
// 3.13 Include/internal/pycore_runtime.h and 3.14/3.15 Include/internal/pycore_debug_offsets.h.
// Sections are listed with their uint64_t fields in order.

struct Section {
    const char* name;
    std::vector<const char*> fields;
};

std::vector<Section> shape(int minor) {
    std::vector<Section> s;
    s.push_back({"runtime_state", {"size", "finalizing", "interpreters_head"}});
    if (minor == 13)
        s.push_back({"interpreter_state",
                     {"size", "id", "next", "threads_head", "gc", "imports_modules", "sysdict", "builtins",
                      "ceval_gil", "gil_runtime_state", "gil_runtime_state_enabled",
                      "gil_runtime_state_locked", "gil_runtime_state_holder"}});
    else
        s.push_back({"interpreter_state",
                     {"size", "id", "next", "threads_head", "threads_main", "gc", "imports_modules",
                      "sysdict", "builtins", "ceval_gil", "gil_runtime_state", "gil_runtime_state_enabled",
                      "gil_runtime_state_locked", "gil_runtime_state_holder", "code_object_generation",
                      "tlbc_generation"}});
    if (minor <= 14)
        s.push_back({"thread_state",
                     {"size", "prev", "next", "interp", "current_frame", "thread_id", "native_thread_id",
                      "datastack_chunk", "status"}});
    else {
        s.push_back({"thread_state",
                     {"size", "prev", "next", "interp", "current_frame", "base_frame", "last_profiled_frame",
                      "last_profiled_frame_seq", "thread_id", "native_thread_id", "datastack_chunk", "status",
                      "holds_gil", "gil_requested", "current_exception", "exc_state"}});
        s.push_back({"err_stackitem", {"exc_value"}});
    }
    if (minor == 13)
        s.push_back({"interpreter_frame", {"size", "previous", "executable", "instr_ptr", "localsplus", "owner"}});
    else
        s.push_back({"interpreter_frame",
                     {"size", "previous", "executable", "instr_ptr", "localsplus", "owner", "stackpointer",
                      "tlbc_index"}});
    std::vector<const char*> code = {"size", "filename", "name", "qualname", "linetable", "firstlineno",
                                     "argcount", "localsplusnames", "localspluskinds", "co_code_adaptive"};
    if (minor >= 14) code.push_back("co_tlbc");
    s.push_back({"code_object", code});
    s.push_back({"pyobject", {"size", "ob_type"}});
    if (minor <= 14)
        s.push_back({"type_object", {"size", "tp_name", "tp_repr", "tp_flags"}});
    else {
        s.push_back({"type_object", {"size", "tp_name", "tp_repr", "tp_flags", "tp_basicsize", "tp_dictoffset"}});
        s.push_back({"heap_type_object", {"size", "ht_cached_keys"}});
    }
    s.push_back({"tuple_object", {"size", "ob_item", "ob_size"}});
    s.push_back({"list_object", {"size", "ob_item", "ob_size"}});
    if (minor >= 14) s.push_back({"set_object", {"size", "used", "table", "mask"}});
    s.push_back({"dict_object", {"size", "ma_keys", "ma_values"}});
    s.push_back({"float_object", {"size", "ob_fval"}});
    s.push_back({"long_object", {"size", "lv_tag", "ob_digit"}});
    s.push_back({"bytes_object", {"size", "ob_size", "ob_sval"}});
    if (minor <= 14)
        s.push_back({"unicode_object", {"size", "state", "length", "asciiobject_size"}});
    else
        s.push_back({"unicode_object", {"size", "state", "length", "asciiobject_size", "compactunicodeobject_size"}});
    if (minor <= 14)
        s.push_back({"gc", {"size", "collecting"}});
    else
        s.push_back({"gc", {"size", "collecting", "frame", "generation_stats_size", "generation_stats"}});
    if (minor >= 14) {
        s.push_back({"gen_object", {"size", "gi_name", "gi_iframe", "gi_frame_state"}});
        s.push_back({"llist_node", {"next", "prev"}});
        s.push_back({"debugger_support",
                     {"eval_breaker", "remote_debugger_support", "remote_debugging_enabled",
                      "debugger_pending_call", "debugger_script_path", "debugger_script_path_size"}});
    }
    return s;
}

// Synthetic _Py_DebugOffsets bytes: values from 'vals' ("section.field"), every other
// field a poison value that would fail the plausibility checks if decoded by mistake.
struct Synth {
    std::vector<uint8_t> bytes;
    size_t struct_size = 0;
};

Synth synth(int minor, uint32_t hexversion, bool ft, const std::map<std::string, uint64_t>& vals,
            const char* cookie = "xdebugpy") {
    Synth r;
    r.bytes.assign(kDebugOffsetsReadSize, 0xEE);
    std::memcpy(r.bytes.data(), cookie, 8);
    uint64_t v = hexversion, f = ft;
    std::memcpy(r.bytes.data() + 8, &v, 8);
    std::memcpy(r.bytes.data() + 16, &f, 8);
    size_t pos = 24;
    std::set<std::string> used;
    for (auto& sec : shape(minor)) {
        for (auto* field : sec.fields) {
            std::string key = std::string(sec.name) + "." + field;
            auto it = vals.find(key);
            uint64_t x = it != vals.end() ? it->second : 0xDEAD0000DEADull;
            if (it != vals.end()) used.insert(key);
            std::memcpy(r.bytes.data() + pos, &x, 8);
            pos += 8;
        }
    }
    for (auto& [k, _] : vals) EXPECT_TRUE(used.count(k)) << "unknown field " << k;
    r.struct_size = pos;
    return r;
}

// Real values of a default build (from gen_layout_offsets.sh on the headers), plus the
// free-threaded ones for 3.14 (the same headers with Py_GIL_DISABLED).
std::map<std::string, uint64_t> plausible(int minor, bool ft) {
    std::map<std::string, uint64_t> m = {
        {"runtime_state.size", 200000},
        {"runtime_state.interpreters_head", minor == 13 ? 632 : minor == 14 ? 808 : 936},
        {"interpreter_state.size", 100000},
        {"interpreter_state.next", minor == 14 ? 7272 : 7264},
        {"interpreter_state.threads_head", minor == 13 ? 7344 : minor == 14 ? 7344 : 7336},
        {"thread_state.size", 400},
        {"thread_state.next", 8},
        {"thread_state.current_frame", 72},
        {"thread_state.thread_id", minor == 15 ? 176 : 152},
        {"interpreter_frame.size", 80},
        {"interpreter_frame.previous", 8},
        {"interpreter_frame.executable", 0},
        {"interpreter_frame.instr_ptr", 56},
        {"interpreter_frame.owner", minor == 13 ? 70 : ft ? 78 : 74},
        {"code_object.size", 240},
        {"code_object.filename", ft ? 128 : 112},
        {"code_object.name", ft ? 136 : 120},
        {"code_object.qualname", ft ? 144 : 128},
        {"code_object.linetable", ft ? 152 : 136},
        {"code_object.firstlineno", ft ? 84 : 68},
        {"code_object.co_code_adaptive", minor == 13 ? (ft ? 216 : 200) : (ft ? 232 : 208)},
        {"pyobject.size", ft ? 32 : 16},
        {"pyobject.ob_type", ft ? 24 : 8},
        {"bytes_object.size", ft ? 56 : 40},
        {"bytes_object.ob_size", ft ? 32 : 16},
        {"bytes_object.ob_sval", ft ? 48 : 32},
        {"unicode_object.size", ft ? 80 : 64},
        {"unicode_object.state", ft ? 48 : 32},
        {"unicode_object.length", ft ? 32 : 16},
        {"unicode_object.asciiobject_size", ft ? 56 : 40},
    };
    if (minor >= 14) {
        m["interpreter_state.code_object_generation"] = minor == 14 ? (ft ? 8024 : 7992) : 7944;
        m["interpreter_frame.tlbc_index"] = ft ? 72 : 0;
        m["code_object.co_tlbc"] = ft ? 224 : 0;
    }
    if (minor >= 15) m["unicode_object.compactunicodeobject_size"] = ft ? 72 : 56;
    // The GIL, interpreter-relative: ceval.gil @16, _gil @7752/7784/7736 (3.13/3.14/3.15),
    // last_holder and locked 8 and 16 bytes into it.
    const uint64_t gil = minor == 13 ? 7752 : minor == 14 ? 7784 : 7736;
    m["interpreter_state.ceval_gil"] = 16;
    m["interpreter_state.gil_runtime_state"] = gil;
    m["interpreter_state.gil_runtime_state_holder"] = gil + 8;
    m["interpreter_state.gil_runtime_state_locked"] = gil + 16;
    return m;
}

TEST(LayoutDebugOffsets, Decodes313) {
    auto s = synth(13, 0x030D00F0, false, plausible(13, false));
    EXPECT_EQ(s.struct_size, 584u);  // sizeof(_Py_DebugOffsets) in 3.13.0
    std::string err, warn;
    auto l = layout_from_debug_offsets(s.bytes, err, warn);
    ASSERT_TRUE(l) << err;
    EXPECT_EQ(warn, "");
    EXPECT_EQ(l->version.str(), "3.13.0");
    EXPECT_FALSE(l->free_threaded);
    EXPECT_EQ(l->runtime_interp_head, 632u);
    EXPECT_EQ(l->line_format, LineTableFormat::Locations311);
    expect_fields(*l, {
        {"/bpf/frame_kind", PBP_FRAME_INTERP}, {"/bpf/instr_kind", PBP_INSTR_PTR},
        {"/bpf/interp_next", 7264}, {"/bpf/interp_threads_head", 7344},
        {"/bpf/interp_code_gen", PBP_OFF_NONE},  // 3.14+
        {"/bpf/tstate_next", 8}, {"/bpf/tstate_thread_id", 152}, {"/bpf/tstate_frame", 72},
        {"/bpf/cframe_current_frame", PBP_OFF_NONE}, {"/bpf/cframe_previous", PBP_OFF_NONE},
        {"/bpf/frame_entry_off", PBP_OFF_NONE},
        {"/bpf/frame_previous", 8}, {"/bpf/frame_code", 0}, {"/bpf/frame_instr", 56}, {"/bpf/frame_owner", 70},
        {"/bpf/frame_tlbc_index", PBP_OFF_NONE}, {"/bpf/code_tlbc", PBP_OFF_NONE},
        {"/bpf/code_ob_type", 8}, {"/bpf/code_adaptive", 200},
        {"/bpf/executable_tag_mask", 0}, {"/bpf/skip_owner_mask", 1u << 3},
        {"/bpf/csum_off/0", 120}, {"/bpf/csum_off/1", 112}, {"/bpf/csum_off/2", 68},
        {"/bpf/csum_off/3", 92}, {"/bpf/csum_size/3", 4},  // co_version
        {"/bpf/frame_read_len", 72}, {"/bpf/code_read_len", 128},
        {"/obj/co_qualname", 128}, {"/obj/co_linetable", 136},
        {"/obj/unicode_ascii_size", 40}, {"/obj/unicode_compact_size", 56}, {"/obj/state_kind_shift", 2},
    });
}

TEST(LayoutDebugOffsets, Decodes313FreeThreaded) {
    auto s = synth(13, 0x030D01F0, true, plausible(13, true));
    std::string err, warn;
    auto l = layout_from_debug_offsets(s.bytes, err, warn);
    ASSERT_TRUE(l) << err;
    EXPECT_TRUE(l->free_threaded);
    EXPECT_EQ(l->bpf.free_threaded, 1);
    EXPECT_EQ(l->bpf.code_ob_type, 24);
    EXPECT_EQ(l->bpf.executable_tag_mask, 0);
    EXPECT_EQ(l->bpf.frame_tlbc_index, PBP_OFF_NONE);  // thread-local bytecode is 3.14+
    EXPECT_EQ(l->bpf.csum_off[3], 108);                // co_version = co_firstlineno + 24
    // 3.13 kept 'unsigned int interned:2' in free-threaded builds
    EXPECT_EQ(l->obj.state_kind_shift, 2);
    EXPECT_EQ(l->obj.state_compact_bit, 5);
    EXPECT_EQ(l->obj.state_ascii_bit, 6);
    EXPECT_EQ(l->obj.unicode_compact_size, 72);
}

TEST(LayoutDebugOffsets, Decodes314) {
    auto s = synth(14, 0x030E0AF0, false, plausible(14, false));
    EXPECT_EQ(s.struct_size, 760u);
    std::string err, warn;
    auto l = layout_from_debug_offsets(s.bytes, err, warn);
    ASSERT_TRUE(l) << err;
    EXPECT_EQ(warn, "");
    EXPECT_EQ(l->runtime_interp_head, 808u);
    expect_fields(*l, {
        {"/bpf/interp_next", 7272}, {"/bpf/interp_code_gen", 7992}, {"/bpf/tstate_thread_id", 152},
        {"/bpf/frame_owner", 74}, {"/bpf/code_adaptive", 208},
        {"/bpf/executable_tag_mask", 3}, {"/bpf/skip_owner_mask", (1u << 3) | (1u << 4)},
        {"/bpf/frame_tlbc_index", PBP_OFF_NONE}, {"/bpf/code_tlbc", PBP_OFF_NONE},  // 0 in default builds
        {"/bpf/frame_read_len", 80},
    });
    // outside the interpreter state: not used (the walk then reads every code object)
    auto vals = plausible(14, false);
    vals["interpreter_state.code_object_generation"] = 100000;
    auto s2 = synth(14, 0x030E0AF0, false, vals);
    auto l2 = layout_from_debug_offsets(s2.bytes, err, warn);
    ASSERT_TRUE(l2) << err;
    EXPECT_EQ(l2->bpf.interp_code_gen, PBP_OFF_NONE);
}

TEST(LayoutDebugOffsets, Decodes314FreeThreaded) {
    auto s = synth(14, 0x030E0AF0, true, plausible(14, true));
    std::string err, warn;
    auto l = layout_from_debug_offsets(s.bytes, err, warn);
    ASSERT_TRUE(l) << err;
    expect_fields(*l, {
        {"/bpf/free_threaded", 1}, {"/bpf/frame_tlbc_index", 72}, {"/bpf/code_tlbc", 224},
        {"/bpf/frame_owner", 78}, {"/bpf/code_ob_type", 24}, {"/bpf/code_adaptive", 232},
        {"/bpf/frame_read_len", 80}, {"/bpf/code_read_len", 232}, {"/bpf/csum_off/3", 108},
        // 3.14 free-threaded: 'unsigned char interned' moves the bitfields up by a byte
        {"/obj/state_kind_shift", 8}, {"/obj/state_compact_bit", 11}, {"/obj/state_ascii_bit", 12},
        {"/obj/unicode_ascii_size", 56}, {"/obj/unicode_compact_size", 72},
    });
}

TEST(LayoutDebugOffsets, Decodes315) {
    auto vals = plausible(15, false);
    vals["unicode_object.compactunicodeobject_size"] = 60;  // distinct: must be taken as given
    auto s = synth(15, 0x030F02F0, false, vals);
    EXPECT_EQ(s.struct_size, 888u);
    std::string err, warn;
    auto l = layout_from_debug_offsets(s.bytes, err, warn);
    ASSERT_TRUE(l) << err;
    EXPECT_EQ(warn, "");
    EXPECT_EQ(l->bpf.tstate_thread_id, 176);
    EXPECT_EQ(l->bpf.interp_threads_head, 7336);
    EXPECT_EQ(l->runtime_interp_head, 936u);
    EXPECT_EQ(l->obj.unicode_compact_size, 60);
    EXPECT_EQ(l->bpf.skip_owner_mask, (1u << 3) | (1u << 4));
    EXPECT_EQ(l->bpf.interp_code_gen, 7944);
}

// 3.13+: the GIL through interp->ceval.gil, its fields relative to the struct; free-threaded
// builds and implausible values leave it unknown (samples say n/a) without failing the layout.
TEST(LayoutDebugOffsets, Gil) {
    for (int minor : {13, 14, 15}) {
        SCOPED_TRACE(minor);
        const uint32_t hex = 0x03000000u | (uint32_t(minor) << 16) | 0x01F0;
        std::string err, warn;
        auto s = synth(minor, hex, false, plausible(minor, false));
        auto l = layout_from_debug_offsets(s.bytes, err, warn);
        ASSERT_TRUE(l) << err;
        expect_fields(*l, {{"/bpf/gil_where", PBP_GIL_WHERE_INTERP}, {"/bpf/interp_gil_ptr", 16},
                           {"/bpf/gil_last_holder", 8}, {"/bpf/gil_locked", 16}, {"/bpf/gil_size", 208}});
        EXPECT_FALSE(l->runtime_gil);

        auto sft = synth(minor, hex, true, plausible(minor, true));
        auto lft = layout_from_debug_offsets(sft.bytes, err, warn);
        ASSERT_TRUE(lft) << err;
        EXPECT_EQ(lft->bpf.gil_where, PBP_GIL_WHERE_NONE);

        for (const char* bad : {"interpreter_state.ceval_gil", "interpreter_state.gil_runtime_state_locked",
                                "interpreter_state.gil_runtime_state"}) {
            auto vals = plausible(minor, false);
            vals[bad] = 200000;  // outside the interpreter state / the GIL's first bytes
            auto sb = synth(minor, hex, false, vals);
            auto lb = layout_from_debug_offsets(sb.bytes, err, warn);
            ASSERT_TRUE(lb) << bad << ": " << err;
            EXPECT_EQ(lb->bpf.gil_where, PBP_GIL_WHERE_NONE) << bad;
        }
    }
}

TEST(LayoutDebugOffsets, RejectsBadCookie) {
    auto s = synth(13, 0x030D00F0, false, plausible(13, false), "xdebugpx");
    std::string err, warn;
    EXPECT_FALSE(layout_from_debug_offsets(s.bytes, err, warn));
    EXPECT_NE(err.find("cookie"), std::string::npos) << err;
    std::vector<uint8_t> zeros(kDebugOffsetsReadSize, 0);
    EXPECT_FALSE(layout_from_debug_offsets(zeros, err, warn));
    EXPECT_NE(err.find("cookie"), std::string::npos) << err;
}

TEST(LayoutDebugOffsets, RejectsShortBuffersAndOldVersions) {
    std::string err, warn;
    auto s = synth(14, 0x030E00F0, false, plausible(14, false));
    EXPECT_FALSE(layout_from_debug_offsets(std::span(s.bytes).first(16), err, warn));
    EXPECT_FALSE(layout_from_debug_offsets(std::span(s.bytes).first(s.struct_size - 8), err, warn));
    EXPECT_TRUE(layout_from_debug_offsets(std::span(s.bytes).first(s.struct_size), err, warn)) << err;
    auto old = synth(13, 0x030C01F0, false, plausible(13, false));  // 3.12 has no such table
    EXPECT_FALSE(layout_from_debug_offsets(old.bytes, err, warn));
    auto badft = synth(13, 0x030D00F0, false, plausible(13, false));
    badft.bytes[16] = 7;
    EXPECT_FALSE(layout_from_debug_offsets(badft.bytes, err, warn));
}

TEST(LayoutDebugOffsets, RejectsImplausibleOffsets) {
    auto vals = plausible(14, false);
    vals["thread_state.thread_id"] = 4000;  // beyond thread_state.size
    auto s = synth(14, 0x030E00F0, false, vals);
    std::string err, warn;
    EXPECT_FALSE(layout_from_debug_offsets(s.bytes, err, warn));
    EXPECT_NE(err.find("thread_id"), std::string::npos) << err;

    // Decoding 3.14 bytes as if they were 3.13 (wrong shape) must not produce a layout.
    auto s14 = synth(14, 0x030E00F0, false, plausible(14, false));
    uint64_t v313 = 0x030D00F0;
    std::memcpy(s14.bytes.data() + 8, &v313, 8);
    EXPECT_FALSE(layout_from_debug_offsets(s14.bytes, err, warn));
}

TEST(LayoutDebugOffsets, FutureVersionUsesNewestShapeWithWarning) {
    static_assert(kNewestTestedMinor == 15, "update this test with the newest shape");
    auto s = synth(15, 0x031000A2, false, plausible(15, false));  // 3.16.0a2
    std::string err, warn;
    auto l = layout_from_debug_offsets(s.bytes, err, warn);
    ASSERT_TRUE(l) << err;
    EXPECT_NE(warn.find("3.16.0a2"), std::string::npos) << warn;
    EXPECT_NE(warn.find("newer"), std::string::npos) << warn;
    EXPECT_EQ(l->version.minor, 16);
    EXPECT_EQ(l->bpf.py_version_hex, 0x031000A2u);
    EXPECT_EQ(l->bpf.tstate_thread_id, 176);
    EXPECT_EQ(l->bpf.executable_tag_mask, 3);
    // where co_version lives is unknown there: the checksum falls back to the line table
    EXPECT_EQ(l->bpf.csum_off[3], 136);
    EXPECT_EQ(l->bpf.csum_size[3], 8);
    // nor is what the code generation counts: every code object is read
    EXPECT_EQ(l->bpf.interp_code_gen, PBP_OFF_NONE);

    // A future version whose struct is shaped like 3.13 fails the plausibility checks.
    auto bad = synth(13, 0x031000F0, false, plausible(13, false));
    EXPECT_FALSE(layout_from_debug_offsets(bad.bytes, err, warn));
}


// ---- choose_layout: which source for which version (cpython/policy.h) -----------------------

// _PyRuntime's first bytes at 'base' (the rest of memory unreadable), counting the reads.
struct FakeRuntime final : pbp::MemoryReader {
    uint64_t base = 0x7f00'0040'0000;
    std::vector<uint8_t> bytes;
    int reads = 0;
    explicit FakeRuntime(std::vector<uint8_t> b) : bytes(std::move(b)) {}
    bool read(uint64_t addr, void* buf, size_t n) override {
        reads++;
        if (addr < base || addr + n > base + bytes.size()) return false;
        std::memcpy(buf, bytes.data() + (addr - base), n);
        return true;
    }
};

TEST(LayoutChoice, TablesUpTo312WithoutReadingTheRuntime) {
    FakeRuntime mem(synth(13, 0x030D00F0, false, plausible(13, false)).bytes);
    for (uint32_t hex : {0x03060FF0u, 0x030700F0u, 0x030A04F0u, 0x030B07F0u, 0x030C01F0u}) {
        Version v = Version::from_hex(hex);
        auto c = choose_layout(v, mem.base, mem);
        ASSERT_TRUE(c.layout) << v.str() << ": " << c.error;
        EXPECT_EQ(c.layout->source, "table 3." + std::to_string(v.minor));
        EXPECT_EQ(c.layout->version.hex(), hex);
        EXPECT_EQ(c.error, "");
        EXPECT_EQ(c.warning, "");
    }
    EXPECT_EQ(mem.reads, 0) << "a version with a table never reads _Py_DebugOffsets";
    // 3.6 has no _PyRuntime at all: the table still applies.
    auto c36 = choose_layout(Version::from_hex(0x03060FF0), 0, mem);
    ASSERT_TRUE(c36.layout);
    EXPECT_FALSE(c36.layout->runtime_interp_head);
    // Before 3.6, or not 3 at all: nothing, and nothing to say.
    for (uint32_t hex : {0x030509F0u, 0x020712F0u}) {
        auto c = choose_layout(Version::from_hex(hex), mem.base, mem);
        EXPECT_FALSE(c.layout) << c.layout->source;
        EXPECT_EQ(c.error, "");
    }
    EXPECT_EQ(mem.reads, 0);
}

TEST(LayoutChoice, DebugOffsetsFrom313AndForUnknownVersions) {
    FakeRuntime mem(synth(14, 0x030E0AF0, false, plausible(14, false)).bytes);
    // Known 3.13+ (Py_Version): _Py_DebugOffsets, whose version is the exact one.
    auto c = choose_layout(Version::from_hex(0x030E0AF0), mem.base, mem);
    ASSERT_TRUE(c.layout) << c.error;
    EXPECT_EQ(c.layout->source, "_Py_DebugOffsets 3.14.10");
    EXPECT_EQ(mem.reads, 1);
    // Unknown version (no Py_Version, no name): _Py_DebugOffsets tells it.
    c = choose_layout(Version{}, mem.base, mem);
    ASSERT_TRUE(c.layout) << c.error;
    EXPECT_EQ(c.layout->version.str(), "3.14.10");
    EXPECT_EQ(c.layout->bpf.py_version_hex, 0x030E0AF0u);
    // Only major.minor known (from a name): the table's exact version.
    Version mm;
    mm.major = 3;
    mm.minor = 14;
    c = choose_layout(mm, mem.base, mem);
    ASSERT_TRUE(c.layout) << c.error;
    EXPECT_EQ(c.layout->version.str(), "3.14.10");
    EXPECT_EQ(mem.reads, 3);
    // No _PyRuntime: nothing, nothing read, nothing to say.
    for (Version v : {Version::from_hex(0x030D00F0), Version{}}) {
        c = choose_layout(v, 0, mem);
        EXPECT_FALSE(c.layout);
        EXPECT_EQ(c.error, "");
    }
    EXPECT_EQ(mem.reads, 3);
}

TEST(LayoutChoice, DebugOffsetsErrorsAndWarningsPassThrough) {
    FakeRuntime bad(synth(13, 0x030D00F0, false, plausible(13, false), "xdebugpx").bytes);
    auto c = choose_layout(Version::from_hex(0x030D00F0), bad.base, bad);
    EXPECT_FALSE(c.layout);
    EXPECT_NE(c.error.find("cookie"), std::string::npos) << c.error;
    // Unreadable _PyRuntime.
    c = choose_layout(Version::from_hex(0x030D00F0), bad.base + 0x100000, bad);
    EXPECT_FALSE(c.layout);
    EXPECT_EQ(c.error, "cannot read _PyRuntime");
    c = choose_layout(Version{}, bad.base + 0x100000, bad);
    EXPECT_EQ(c.error, "cannot read _PyRuntime");
    // A table saying 3.12 for a binary without a version: 3.12 predates it, refused.
    FakeRuntime old(synth(13, 0x030C01F0, false, plausible(13, false)).bytes);
    c = choose_layout(Version{}, old.base, old);
    EXPECT_FALSE(c.layout);
    EXPECT_NE(c.error.find("predates"), std::string::npos) << c.error;
    // A newer-than-tested version: decoded, with the decoder's warning.
    FakeRuntime future(synth(15, 0x031000A2, false, plausible(15, false)).bytes);
    c = choose_layout(Version::from_hex(0x031000A2), future.base, future);
    ASSERT_TRUE(c.layout) << c.error;
    EXPECT_NE(c.warning.find("newer"), std::string::npos) << c.warning;
}

}  // namespace

// ---- code identity capture and the runtime's phase ---------------------------------------------

// Every built-in table lets BPF capture a code object's identity: the copy covers the checksum's
// fields, co_firstlineno and the pointers to co_name, co_filename and the line table (and
// co_qualname from 3.11); and says where _PyRuntime keeps 'initialized' and '_finalizing' (3.7+).
TEST(LayoutBuiltin, CodeIdentityAndRuntimePhase) {
    for (int minor = 6; minor <= 12; minor++) {
        auto l = builtin_layout(Version::from_hex(0x030000f0u | (unsigned(minor) << 16)), false);
        ASSERT_TRUE(l.has_value()) << minor;
        const auto& o = l->bpf;
        SCOPED_TRACE("3." + std::to_string(minor));
        EXPECT_GE(o.code_ident_len, o.code_read_len);
        EXPECT_LE(o.code_ident_len, PBP_WINDOW);
        EXPECT_EQ(o.code_ident[PBP_CODE_NAME], l->obj.co_name);
        EXPECT_EQ(o.code_ident[PBP_CODE_FILENAME], l->obj.co_filename);
        EXPECT_EQ(o.code_ident[PBP_CODE_LINETABLE], l->obj.co_linetable);
        EXPECT_EQ(o.code_ident[PBP_CODE_QUALNAME], minor >= 11 ? l->obj.co_qualname : PBP_OFF_NONE);
        for (uint16_t f : {o.code_ident[PBP_CODE_NAME], o.code_ident[PBP_CODE_FILENAME], o.code_ident[PBP_CODE_LINETABLE]})
            EXPECT_LE(f + 8u, o.code_ident_len);
        EXPECT_LE(o.code_firstlineno + 4u, o.code_ident_len);
        EXPECT_EQ(l->runtime_initialized.has_value(), minor >= 7);
        if (minor >= 7) {
            EXPECT_EQ(*l->runtime_finalizing, *l->runtime_initialized + (minor == 7 ? 8u : 4u + (minor >= 11 ? 4u : 0u)));
        }
    }
    // A table without the identity's offsets (tests' hand-made ones) captures nothing.
    auto l = builtin_layout(Version::from_hex(0x030b00f0u), false);
    pbp_py_offsets o = l->bpf;
    o.code_firstlineno = 0;
    std::string err;
    ASSERT_TRUE(finalize_bpf_offsets(o, err)) << err;
    EXPECT_EQ(o.code_ident_len, 0u);
    // One out of the window is refused, as every other BPF offset.
    o = l->bpf;
    o.code_ident[PBP_CODE_LINETABLE] = PBP_WINDOW;
    EXPECT_FALSE(finalize_bpf_offsets(o, err));
    EXPECT_NE(err.find("code_ident[linetable]"), std::string::npos) << err;
}

TEST(RuntimePhase, LabelsOfSamplesWithoutPythonFrames) {
    using pbp::cpython::frameless_label;
    using pbp::cpython::in_startup;
    const uint8_t K = PBP_RT_KNOWN, I = PBP_RT_INITIALIZED, F = PBP_RT_FINALIZING;
    auto label = [](uint8_t rt, uint16_t reason, bool started = true) {
        const char* l = frameless_label(rt, reason, started);
        return std::string(l ? l : "(reason)");
    };
    for (uint16_t r : {PBP_ERR_NO_FRAME, PBP_ERR_NO_INTERPRETER, PBP_ERR_NO_TSTATE}) {
        EXPECT_EQ(label(K, r), "interpreter start-up");
        EXPECT_EQ(label(K | F, r), "interpreter finalization");
        EXPECT_EQ(label(K | I | F, r), "interpreter finalization");
        EXPECT_EQ(label(0, r), "(reason)");  // not read: its reason
        EXPECT_EQ(label(I | F, r), "(reason)");
    }
    EXPECT_EQ(label(K | I, PBP_ERR_NO_TSTATE), "thread without Python frames");
    // Unreadable: before the process touched its runtime (start-up), or in its exit.
    const uint8_t U = PBP_RT_UNREADABLE;
    EXPECT_EQ(label(U, PBP_ERR_NO_INTERPRETER, false), "interpreter start-up");
    EXPECT_EQ(label(U, PBP_ERR_NO_INTERPRETER, true), "(reason)");
    EXPECT_EQ(label(U, PBP_ERR_READ_RUNTIME, false), "(reason)");
    EXPECT_FALSE(in_startup(U));
    EXPECT_EQ(label(K | I, PBP_ERR_NO_FRAME), "(reason)");
    EXPECT_EQ(label(K, PBP_ERR_READ_FRAME), "(reason)");  // a problem stays one
    // In the kernel's exit path: whatever the reason, and whatever was read.
    const uint8_t X = PBP_RT_EXITING;
    for (uint16_t r : {PBP_ERR_NO_FRAME, PBP_ERR_NO_INTERPRETER, PBP_ERR_NO_TSTATE, PBP_ERR_READ_RUNTIME})
        for (uint8_t rt : {uint8_t(X), uint8_t(X | U), uint8_t(X | K | I), uint8_t(X | K | F)})
            for (bool started : {false, true})
                EXPECT_EQ(label(rt, r, started), "thread exiting") << int(rt) << " " << r;
    EXPECT_TRUE(in_startup(K));
    EXPECT_FALSE(in_startup(K | I));
    EXPECT_FALSE(in_startup(K | F));
    EXPECT_FALSE(in_startup(0));
    EXPECT_TRUE(pbp::cpython::is_site_body("<module>", "/usr/lib/python3.11/site.py"));
    EXPECT_TRUE(pbp::cpython::is_site_body("<module>", "<frozen site>"));
    EXPECT_FALSE(pbp::cpython::is_site_body("main", "/usr/lib/python3.11/site.py"));
    EXPECT_FALSE(pbp::cpython::is_site_body("<module>", "/srv/app/mysite.py"));
    EXPECT_FALSE(pbp::cpython::is_site_body("<module>", "site.py"));
}
