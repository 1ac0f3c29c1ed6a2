// Symbolizer against live interpreters (host 3.11 and the pyenv 3.11+ builds): stacks built
// the way BPF records them (code address, code-unit index, checksum of a window read from
// the target) must come back root first, with co_qualname, co_filename and the exact line
// co_positions() gives. A code object freed and replaced at the same address must never be
// given the old name, and a dead process yields "unreadable" frames for uncached code.
// Ground truth: tests/tools/unit_symbolizer_target.py.
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "targets/discovery.h"
#include "engine/symbolizer.h"
#include "engine/code_capture.h"
#include "sys/target_memory.h"
#include "test_support.h"

namespace fs = std::filesystem;
using pbp::Frame;
using pbp::Symbolizer;
using pbp::test::Interpreter;
using pbp::test::Reporter;

namespace {

// co_qualname and co_positions() exist from 3.11 on. Not the chroots' interpreters: the target
// script is run by its path here (and must come back as co_filename), which a chroot cannot see.
std::vector<Interpreter> interpreters() {
    std::vector<Interpreter> v;
    for (auto& i : pbp::test::all_interpreters())
        if (i.root.empty() && std::stoi(i.version.substr(2)) >= 11) v.push_back(i);
    return v;
}

std::string unhex(const std::string& h) { return h == "-" ? "" : pbp::test::unhex(h); }

struct CodeFacts {
    uint64_t addr = 0;
    int firstlineno = 0;
    uint32_t instr = 0;  // chosen code-unit index
    int line = 0;        // its line
    std::string qualname, filename;
    std::vector<int> units;  // line of every code unit (0 = none)
};

// The child's report: "code LABEL ADDR FIRSTLINENO I LINE QUALHEX FILEHEX" and
// "units LABEL l0,l1,..." lines, then a marker line.
struct Target {
    std::map<std::string, CodeFacts> code;
    std::string raw;
    bool ok = false;
};

Target wait_for(Reporter& c, const std::string& marker, int timeout_s = 30) {
    Target t;
    t.ok = c.read_until(marker, timeout_s);
    t.raw = c.out();
    if (!t.ok) return t;
    std::istringstream is(t.raw);
    for (std::string line; std::getline(is, line);) {
        std::istringstream ls(line);
        std::string kind, label;
        ls >> kind >> label;
        if (kind == "code") {
            CodeFacts& f = t.code[label];
            std::string q, fn;
            ls >> f.addr >> f.firstlineno >> f.instr >> f.line >> q >> fn;
            f.qualname = unhex(q);
            f.filename = unhex(fn);
        } else if (kind == "units") {
            std::string list;
            ls >> list;
            std::istringstream ws(list);
            std::vector<int> v;
            for (std::string w; std::getline(ws, w, ',');) v.push_back(w == "-" ? 0 : std::stoi(w));
            t.code[label].units = v;
        }
    }
    return t;
}

std::string script_path() { return pbp::test::tool_path("unit_symbolizer_target.py"); }

// A started target, discovered, registered with a Symbolizer.
struct Live {
    Reporter child;
    std::string trigger;
    Target rep;
    pbp::PythonTarget target;
    std::unique_ptr<pbp::ProcessMemory> mem;
    std::string error;

    bool start(const Interpreter& in) {
        trigger = pbp::test::temp_dir() + "/swap";
        child = Reporter(pbp::test::with_args(in.argv, {script_path(), trigger}));
        rep = wait_for(child, "ready");
        if (!rep.ok) {
            error = in.name + " did not start: " + child.err();
            return false;
        }
        pbp::Discoverer d;
        auto r = d.discover(child.pid());
        if (r.status != pbp::Discovery::Python) {
            error = "not discovered as Python: " + r.reason;
            return false;
        }
        target = *r.target;
        mem = std::make_unique<pbp::ProcessMemory>(child.pid());
        return true;
    }

    // What BPF would compute at sample time.
    uint32_t csum(uint64_t addr) const {
        uint8_t win[PBP_WINDOW] = {};
        size_t len = target.layout.bpf.code_read_len;
        EXPECT_GT(len, 0u);
        EXPECT_LE(len, sizeof win);
        EXPECT_TRUE(mem->read(addr, win, len)) << "code object at 0x" << std::hex << addr << " unreadable";
        return Symbolizer::code_checksum(target.layout.bpf, win, len, mem.get());
    }
    pbp_frame frame(const std::string& label, std::optional<uint32_t> instr = std::nullopt) const {
        const CodeFacts& f = rep.code.at(label);
        pbp_frame fr{};
        fr.code = f.addr;
        fr.instr = instr.value_or(f.instr);
        fr.csum = csum(f.addr);
        return fr;
    }
};

std::unique_ptr<pbp_stack> make_stack(pid_t pid, const std::vector<pbp_frame>& leaf_first) {
    auto st = std::make_unique<pbp_stack>();
    std::memset(st.get(), 0, sizeof *st);
    st->pid = static_cast<uint32_t>(pid);
    st->depth = static_cast<uint32_t>(leaf_first.size());
    for (size_t i = 0; i < leaf_first.size(); i++) st->frames[i] = leaf_first[i];
    return st;
}

uint64_t total(const std::map<std::string, uint64_t>& problems) {
    uint64_t n = 0;
    for (auto& [_, c] : problems) n += c;
    return n;
}

std::string dump(const std::vector<Frame>& fs) {
    std::string s;
    for (auto& f : fs) s += "  " + f.name + " " + f.file + ":" + std::to_string(f.line) + (f.synthetic ? " (synthetic)" : "") + "\n";
    return s;
}

// Each test: the target under GetParam(), registered with its own Symbolizer.
class SymbolizerLive : public testing::TestWithParam<Interpreter> {
protected:
    Live L;
    Symbolizer sym;
    pid_t pid = 0;
    std::map<std::string, uint64_t> problems;  // of the last symbolize()

    bool start() {
        if (!L.start(GetParam())) return false;
        pid = L.child.pid();
        sym.add_process(pid, L.target.layout, L.target.code_type_addr);
        return true;
    }
    // A stack of these frames, leaf first as BPF records it, symbolized (root first).
    std::vector<Frame> symbolize(const std::vector<pbp_frame>& leaf_first) {
        problems.clear();
        return sym.symbolize(pid, *make_stack(pid, leaf_first), problems);
    }
};

TEST_P(SymbolizerLive, ResolvesNamesFilesAndExactLines) {
    PBP_REQUIRE(start(), L.error);
    SCOPED_TRACE(GetParam().name + " " + L.target.describe());
    for (const char* label : {"method", "latin", "cjk", "modfunc", "inner", "module"})
        ASSERT_TRUE(L.rep.code.count(label)) << label << " missing in\n" << L.rep.raw;

    // The interpreter's own names, and what they must be.
    EXPECT_EQ(L.rep.code["method"].qualname, "Klass.method");
    EXPECT_EQ(L.rep.code["latin"].qualname, "grüße");
    EXPECT_EQ(L.rep.code["cjk"].qualname, "計算する");
    EXPECT_EQ(L.rep.code["modfunc"].qualname, "module_function");
    EXPECT_EQ(L.rep.code["inner"].qualname, "outer.<locals>.inner");
    EXPECT_EQ(L.rep.code["module"].qualname, "<module>");
    EXPECT_EQ(L.rep.code["method"].filename, script_path());

    EXPECT_EQ(sym.cached_code_objects(), 0u);

    // A six-deep stack, leaf first as BPF records it.
    const std::vector<std::string> leaf_first = {"method", "inner", "cjk", "latin", "modfunc", "module"};
    std::vector<pbp_frame> frames;
    for (auto& l : leaf_first) frames.push_back(L.frame(l));
    std::vector<Frame> out = symbolize(frames);
    ASSERT_EQ(out.size(), leaf_first.size()) << dump(out);
    EXPECT_TRUE(problems.empty()) << problems.begin()->first;
    for (size_t i = 0; i < out.size(); i++) {
        const std::string& label = leaf_first[leaf_first.size() - 1 - i];  // root first
        const CodeFacts& f = L.rep.code[label];
        SCOPED_TRACE(label + " at frame " + std::to_string(i) + "\n" + dump(out));
        EXPECT_FALSE(out[i].synthetic);
        EXPECT_EQ(out[i].name, f.qualname);
        EXPECT_EQ(out[i].file, f.filename);
        EXPECT_EQ(out[i].line, f.line) << "instr " << f.instr;
        EXPECT_GT(out[i].line, 0);
        EXPECT_NE(out[i].line, f.firstlineno) << "the chosen instruction is not on the def line";
    }
    EXPECT_EQ(out.front().name, "<module>");
    EXPECT_EQ(out.back().name, "Klass.method");
    EXPECT_EQ(sym.cached_code_objects(), leaf_first.size());

    // Every code unit of every function, against co_positions().
    for (auto& label : leaf_first) {
        const CodeFacts& f = L.rep.code[label];
        ASSERT_FALSE(f.units.empty());
        ASSERT_LE(f.units.size(), static_cast<size_t>(PBP_MAX_DEPTH));
        std::vector<pbp_frame> fr;
        for (uint32_t u = 0; u < f.units.size(); u++) fr.push_back(L.frame(label, u));
        auto got = symbolize(fr);
        ASSERT_EQ(got.size(), f.units.size());
        EXPECT_TRUE(problems.empty());
        for (uint32_t u = 0; u < f.units.size(); u++) {
            // root first: got[k] is frames[n-1-k], i.e. unit n-1-k
            uint32_t unit = static_cast<uint32_t>(f.units.size()) - 1 - u;
            EXPECT_EQ(got[u].line, f.units[unit]) << label << " code unit " << unit;
            EXPECT_EQ(got[u].name, f.qualname);
        }
    }

    // No instruction offset, or one past the code: the name still, line 0.
    auto u = symbolize({L.frame("method", PBP_INSTR_UNKNOWN),
                        L.frame("method", static_cast<uint32_t>(L.rep.code["method"].units.size() + 50))});
    ASSERT_EQ(u.size(), 2u);
    for (auto& f : u) {
        EXPECT_EQ(f.name, "Klass.method");
        EXPECT_EQ(f.line, 0);
        EXPECT_FALSE(f.synthetic);
    }

    // Distinct code objects have distinct checksums.
    std::set<uint32_t> sums;
    for (auto& [label, f] : L.rep.code) sums.insert(L.csum(f.addr));
    EXPECT_EQ(sums.size(), L.rep.code.size());
}

TEST_P(SymbolizerLive, WrongChecksumIsNeverGivenTheCachedName) {
    PBP_REQUIRE(start(), L.error);
    SCOPED_TRACE(GetParam().name);

    pbp_frame good = L.frame("method");
    auto out = symbolize({good});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].name, "Klass.method");
    ASSERT_EQ(sym.cached_code_objects(), 1u);

    // Same address, another checksum: what a sample of a different code object at a
    // reused address looks like. Synthetic, counted, never the cached name.
    pbp_frame bad = good;
    bad.csum ^= 0x5a5a5a5au;
    out = symbolize({bad});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].synthetic);
    EXPECT_EQ(out[0].name.rfind("[unknown: ", 0), 0u) << out[0].name;
    EXPECT_EQ(out[0].name.find("method"), std::string::npos) << out[0].name;
    EXPECT_EQ(out[0].line, 0);
    EXPECT_EQ(out[0].file, "");
    EXPECT_EQ(total(problems), 1u);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ("[unknown: " + problems.begin()->first + "]", out[0].name);

    // Mixed with good frames: only the bad one is synthetic, each problem counted.
    out = symbolize({bad, L.frame("modfunc"), bad});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_TRUE(out[0].synthetic);
    EXPECT_EQ(out[1].name, "module_function");
    EXPECT_TRUE(out[2].synthetic);
    EXPECT_EQ(total(problems), 2u);

    // The good checksum still resolves (the cache was not poisoned by the bad lookups).
    out = symbolize({good});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].name, "Klass.method");
    EXPECT_FALSE(out[0].synthetic);
    EXPECT_TRUE(problems.empty());
}

// A real reuse: the child frees a code object and allocates new ones until one lands at the
// same address.
TEST_P(SymbolizerLive, RealAddressReuse) {
    PBP_REQUIRE(start(), L.error);
    SCOPED_TRACE(GetParam().name);

    ASSERT_TRUE(L.rep.code.count("victim"));
    pbp_frame old = L.frame("victim");
    auto out = symbolize({old});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].name, "victim");
    EXPECT_EQ(out[0].line, L.rep.code["victim"].line);

    std::ofstream(L.trigger).put('x');
    Target after = wait_for(L.child, "swapped");
    ASSERT_TRUE(after.ok) << L.child.err();
    PBP_REQUIRE(after.code.count("newcomer"), "no code object reused the freed address:\n" + after.raw);
    const CodeFacts& nc = after.code["newcomer"];
    ASSERT_EQ(nc.addr, old.code);
    L.rep = after;

    pbp_frame fresh = L.frame("newcomer");
    ASSERT_EQ(fresh.code, old.code);
    ASSERT_NE(fresh.csum, old.csum) << "checksum cannot tell the two code objects apart";

    // A late read of a stack sampled while the victim lived: its checksum is the victim's,
    // so the victim's (cached) name is the right answer, not the newcomer's.
    out = symbolize({old});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].name.find("newcomer"), std::string::npos) << out[0].name;
    EXPECT_EQ(out[0].name, "victim");

    // A sample of the new code object gets the new name and line, never the cached one.
    out = symbolize({fresh});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_FALSE(out[0].synthetic);
    EXPECT_EQ(out[0].name, nc.qualname);
    EXPECT_NE(out[0].name, "victim");
    EXPECT_EQ(out[0].line, nc.line);
    EXPECT_EQ(out[0].file, "<reuse>");
    EXPECT_TRUE(problems.empty());

    // The victim's checksum now cannot be resolved from memory any more: a synthetic,
    // counted frame, never the newcomer's name.
    out = symbolize({old});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].synthetic) << out[0].name;
    EXPECT_EQ(out[0].name.find("newcomer"), std::string::npos) << out[0].name;
    EXPECT_EQ(out[0].name.rfind("[unknown: ", 0), 0u) << out[0].name;
    EXPECT_EQ(total(problems), 1u);

    // And the newcomer is still resolved (from the cache) afterwards.
    out = symbolize({fresh});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].name, nc.qualname);
}

TEST_P(SymbolizerLive, DeadProcess) {
    PBP_REQUIRE(start(), L.error);
    SCOPED_TRACE(GetParam().name);

    pbp_frame cached = L.frame("method");
    pbp_frame uncached = L.frame("modfunc");
    auto out = symbolize({cached});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].name, "Klass.method");

    L.child.signal(SIGKILL);
    ASSERT_GE(L.child.wait(10), 0);

    // Cached code objects still resolve after the process is gone (samples read late).
    out = symbolize({uncached, cached});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].name, "Klass.method");
    EXPECT_EQ(out[0].line, L.rep.code["method"].line);
    // An address never read before cannot be: a synthetic "unreadable" frame, counted.
    EXPECT_TRUE(out[1].synthetic);
    EXPECT_EQ(out[1].name.rfind("[unknown: ", 0), 0u) << out[1].name;
    EXPECT_NE(out[1].name.find("unreadable"), std::string::npos) << out[1].name;
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems.begin()->first.find("unreadable"), std::string::npos);
    EXPECT_EQ(problems.begin()->second, 1u);

    // Once removed, nothing of it resolves any more.
    sym.remove_process(pid);
    EXPECT_EQ(sym.cached_code_objects(), 0u);
    out = symbolize({cached});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].synthetic);
    EXPECT_EQ(out[0].name, "[unknown: process no longer tracked]");
    EXPECT_EQ(problems["process no longer tracked"], 1u);
}

// What bpf/code_capture.bpf.h copies of a code object, taken here from the live process the same
// way: the code object (code_ident_len bytes), then each str / bytes it points to, as much of the
// region's room as is readable (at least the rest of its page). lines_cap: the line table's room
// (PBP_CODE_LINES, or less to have it cut short).
std::unique_ptr<pbp_code_event> capture_like_bpf(const Live& L, const pbp_frame& f, size_t lines_cap = PBP_CODE_LINES) {
    auto e = std::make_unique<pbp_code_event>();
    std::memset(e.get(), 0, sizeof *e);
    const auto& off = L.target.layout.bpf;
    e->type = PBP_EV_CODE;
    e->pid = static_cast<uint32_t>(L.child.pid());
    e->code = f.code;
    e->csum = f.csum;
    EXPECT_GT(off.code_ident_len, 0u);
    EXPECT_TRUE(L.mem->read(f.code, e->data, off.code_ident_len));
    e->addr[0] = f.code;
    e->len[0] = off.code_ident_len;
    for (int i = 0; i < PBP_CODE_IDENT_PTRS; i++) {
        const uint16_t o = off.code_ident[i];
        if (o == PBP_OFF_NONE) continue;
        uint64_t a = 0;
        std::memcpy(&a, e->data + o, sizeof a);
        const int r = 1 + i;
        size_t cap = PBP_CODE_DATA_CAP(r);
        if (r == 1 + PBP_CODE_LINETABLE) cap = std::min(cap, lines_cap);
        uint8_t* dst = e->data + PBP_CODE_DATA_OFF(r);
        size_t n = cap;
        if (!L.mem->read(a, dst, n)) n = std::min<size_t>(cap, 4096 - (a & 4095));
        if (!a || !L.mem->read(a, dst, n)) continue;
        e->addr[r] = a;
        e->len[r] = static_cast<uint16_t>(n);
    }
    return e;
}

// A code object captured as BPF captures it is named from the copy once the process is gone:
// name, file and exact line, as from the live process; a line table cut short still gives the
// lines it covers; a copy that does not match its checksum names nothing.
TEST_P(SymbolizerLive, CapturedIdentityOutlivesTheProcess) {
    PBP_REQUIRE(start(), L.error);
    SCOPED_TRACE(GetParam().name);
    const pbp_frame method = L.frame("method"), inner = L.frame("inner");
    pbp_frame module = L.frame("module", 0);  // its first instruction: within any cut
    auto ev_method = capture_like_bpf(L, method);
    auto ev_inner = capture_like_bpf(L, inner);
    auto ev_module = capture_like_bpf(L, module, 40);  // bytes header + a few entries
    auto ev_bad = capture_like_bpf(L, L.frame("modfunc"));
    ev_bad->csum ^= 1;  // not what BPF saw: the copy is of another object
    const pbp_frame modfunc_wrong{ev_bad->code, L.rep.code["modfunc"].instr, ev_bad->csum};

    L.child.signal(SIGKILL);
    ASSERT_GE(L.child.wait(10), 0);

    EXPECT_TRUE(sym.add_captured(pid, *ev_method));
    EXPECT_TRUE(sym.add_captured(pid, *ev_inner));
    EXPECT_TRUE(sym.add_captured(pid, *ev_module));
    EXPECT_FALSE(sym.add_captured(pid, *ev_bad));
    EXPECT_FALSE(sym.add_captured(pid + 1000000, *ev_method));  // not a process it knows

    auto out = symbolize({method, inner, module});
    ASSERT_EQ(out.size(), 3u) << dump(out);
    EXPECT_EQ(out[0].name, "<module>");
    EXPECT_EQ(out[0].line, L.rep.code["module"].units.empty() ? out[0].line : L.rep.code["module"].units[0]);
    EXPECT_EQ(out[1].name, "outer.<locals>.inner");
    EXPECT_EQ(out[1].line, L.rep.code["inner"].line);
    EXPECT_EQ(out[2].name, "Klass.method");
    EXPECT_EQ(out[2].file, script_path());
    EXPECT_EQ(out[2].line, L.rep.code["method"].line);
    EXPECT_TRUE(problems.empty());
    out = symbolize({modfunc_wrong});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].synthetic) << dump(out);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, SymbolizerLive, testing::ValuesIn(interpreters()),
                         pbp::test::interpreter_test_name);

TEST(SymbolizerCoverage, HostAndPyenv312And313Present) {
    std::set<std::string> have;
    for (auto& i : interpreters()) have.insert(i.name.substr(0, i.name.find('-')) + "-" + i.version);
    std::error_code ec;
    PBP_REQUIRE(fs::exists("/usr/bin/python3.11", ec), "host /usr/bin/python3.11 missing");
    PBP_REQUIRE(have.count("pyenv-3.12"), "no pyenv CPython 3.12");
    PBP_REQUIRE(have.count("pyenv-3.13"), "no pyenv CPython 3.13");
}

// A freed code object keeps the checksum's fields (free writes only the first words), so the
// header decides: glibc's free overwrites ob_type, pymalloc's puts a pointer into its own
// pool (or NULL) in ob_refcnt. Immortal counts (3.12: 2^30-1; 3.14: 3<<30, plus the static
// flag at bit 50) are live; free-threaded builds keep ob_tid there and are not judged by it.
TEST(SymbolizerOffline, FreedHeadersAreNotAlive) {
    auto L = pbp::cpython::builtin_layout(pbp::cpython::Version::from_hex(0x030B02F0), false);
    ASSERT_TRUE(L);
    const uint64_t type = 0x7f00'0012'3400, addr = 0x5555'0000'1000;
    auto alive = [&](const pbp::cpython::Layout& lay, uint64_t code_type, int64_t rc, uint64_t ob_type) {
        uint8_t w[PBP_WINDOW] = {};
        memcpy(w, &rc, 8);
        memcpy(w + lay.bpf.code_ob_type, &ob_type, 8);
        return Symbolizer::looks_alive(lay, code_type, addr, w, lay.bpf.code_read_len);
    };
    EXPECT_TRUE(alive(*L, type, 1, type));
    EXPECT_TRUE(alive(*L, type, 0x3fffffff, type));
    EXPECT_TRUE(alive(*L, type, (int64_t{4} << 48) | (int64_t{3} << 30), type));
    EXPECT_TRUE(alive(*L, 0, 5, 0x1234));                   // type unknown: not checked
    EXPECT_FALSE(alive(*L, type, 1, 0x5555'0000'2000));     // glibc: a list link in ob_type
    EXPECT_FALSE(alive(*L, type, 0, type));                 // pymalloc: last free block
    EXPECT_FALSE(alive(*L, type, -3, type));
    EXPECT_FALSE(alive(*L, type, static_cast<int64_t>(addr + 0x200), type));  // next free block
    EXPECT_FALSE(alive(*L, type, static_cast<int64_t>(addr - 0x3000), type));
    auto ft = *L;
    ft.free_threaded = true;
    EXPECT_TRUE(alive(ft, type, 0, type));
}

// A code object image as 3.12 lays it out, in memory that frees it (glibc: a list link over
// ob_type; its filename str gone) right after its window is first read, i.e. while the
// symbolizer goes on to read its name, file and line table.
class FreeingMemory final : public pbp::MemoryReader {
public:
    std::map<uint64_t, std::vector<uint8_t>> regions;
    uint64_t code = 0, file = 0;
    size_t window = 0;
    bool free_after_window = false, freed = false;
    bool read(uint64_t addr, void* buf, size_t n) override {
        for (auto& [base, b] : regions) {
            if (addr >= base && addr + n <= base + b.size()) {
                std::memcpy(buf, b.data() + (addr - base), n);
                if (addr == code && n == window && free_after_window && !freed) free_now();
                return true;
            }
        }
        return false;
    }
    void free_now() {
        freed = true;
        uint64_t link = code + 0x2000;
        std::memcpy(regions[code].data() + 8, &link, 8);
        regions.erase(file);
    }
};

std::vector<uint8_t> ascii_str(const pbp::cpython::ObjectLayout& o, const std::string& text) {
    std::vector<uint8_t> b(o.unicode_ascii_size + text.size() + 1, 0);
    int64_t len = static_cast<int64_t>(text.size());
    std::memcpy(b.data() + o.unicode_length, &len, 8);
    uint32_t state = (1u << o.state_kind_shift) | (1u << o.state_compact_bit) | (1u << o.state_ascii_bit);
    std::memcpy(b.data() + o.unicode_state, &state, 4);
    std::memcpy(b.data() + o.unicode_ascii_size, text.data(), text.size());
    return b;
}

// A live code object image at 'code' in m (co_qualname, co_name, co_filename: the str objects
// at those addresses, first line 10, no line table). Returns its checksum as BPF computes it.
uint32_t put_code(FreeingMemory& m, const pbp::cpython::Layout& lay, uint64_t type, uint64_t code,
                  uint64_t qualname, uint64_t name, uint64_t file) {
    std::vector<uint8_t> img(512, 0);
    int64_t rc = 3;
    std::memcpy(img.data(), &rc, 8);
    std::memcpy(img.data() + lay.bpf.code_ob_type, &type, 8);
    std::memcpy(img.data() + lay.obj.co_name, &name, 8);
    std::memcpy(img.data() + lay.obj.co_qualname, &qualname, 8);
    std::memcpy(img.data() + lay.obj.co_filename, &file, 8);
    int32_t first = 10;
    std::memcpy(img.data() + lay.obj.co_firstlineno, &first, 4);
    m.regions[code] = img;
    return Symbolizer::code_checksum(lay.bpf, img.data(), lay.bpf.code_read_len, &m);
}

struct FreedMidRead {
    pbp::cpython::Layout lay;
    const uint64_t type = 0x7f00'0012'3400, code = 0x5555'0000'1000, name = 0x5555'0000'8000,
                   file = 0x5555'0000'9000;
    uint32_t csum = 0;
    FreeingMemory* mem = nullptr;
    Symbolizer sym;
    explicit FreedMidRead(bool free_it) {
        lay = *pbp::cpython::builtin_layout(pbp::cpython::Version::from_hex(0x030C01F0), false);
        auto m = std::make_unique<FreeingMemory>();
        m->regions[name] = ascii_str(lay.obj, "<module>");
        m->regions[file] = ascii_str(lay.obj, "/srv/app/mod.py");
        csum = put_code(*m, lay, type, code, name, name, file);
        m->code = code;
        m->file = file;
        m->window = lay.bpf.code_read_len;
        m->free_after_window = free_it;
        mem = m.get();
        sym.add_process(4242, lay, type, std::move(m));
    }
    std::vector<Frame> symbolize(std::map<std::string, uint64_t>& problems) {
        auto st = make_stack(4242, {{code, PBP_INSTR_UNKNOWN, csum}});
        return sym.symbolize(4242, *st, problems);
    }
};

TEST(SymbolizerOffline, CodeObjectFreedWhileItsFieldsAreReadIsMarkedFreed) {
    {
        FreedMidRead live(false);  // the control: the same image, never freed
        std::map<std::string, uint64_t> problems;
        auto out = live.symbolize(problems);
        ASSERT_EQ(out.size(), 1u);
        EXPECT_FALSE(out[0].synthetic);
        EXPECT_EQ(out[0].name, "<module>");
        EXPECT_EQ(out[0].file, "/srv/app/mod.py");
    }
    FreedMidRead f(true);
    std::map<std::string, uint64_t> problems;
    auto out = f.symbolize(problems);
    EXPECT_TRUE(f.mem->freed);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].synthetic) << out[0].name << " in " << out[0].file;
    EXPECT_EQ(out[0].name, "[unknown: " + std::string(Symbolizer::kFreed) + "]");
    EXPECT_EQ(problems[Symbolizer::kFreed], 1u);
    EXPECT_EQ(f.sym.cached_code_objects(), 0u);  // nothing half-read is kept
}

// 3.13+ runs a specialized class call's __init__ under the _Py_InitCleanup shim: the symbolizer
// leaves that frame out (cpython::is_init_cleanup_shim), from both symbolize() and
// symbolize_into(), and keeps every frame of an older version, whose code objects it cannot be.
TEST(SymbolizerOffline, InitCleanupShimIsLeftOutFrom313) {
    const uint64_t type = 0x7f00'0012'3400, module = 0x5555'0000'1000, shim = 0x5555'0000'2000,
                   init = 0x5555'0000'3000, s_module = 0x5555'0000'8000, s_file = 0x5555'0000'9000,
                   s_init = 0x5555'0000'a000, s_qual = 0x5555'0000'b000;
    for (uint32_t hex : {0x030C01F0u, 0x030D00F0u}) {
        const bool v313 = hex >= 0x030D0000;
        SCOPED_TRACE(v313 ? "3.13" : "3.12");
        // The 3.12 table stands in for the object layout; the version is what decides.
        auto lay = *pbp::cpython::builtin_layout(pbp::cpython::Version::from_hex(0x030C01F0), false);
        lay.version = pbp::cpython::Version::from_hex(hex);
        auto m = std::make_unique<FreeingMemory>();
        m->regions[s_module] = ascii_str(lay.obj, "<module>");
        m->regions[s_file] = ascii_str(lay.obj, "/srv/app/mod.py");
        m->regions[s_init] = ascii_str(lay.obj, "__init__");
        m->regions[s_qual] = ascii_str(lay.obj, "Klass.__init__");
        const pbp_frame leaf_first[] = {
            {init, PBP_INSTR_UNKNOWN, put_code(*m, lay, type, init, s_qual, s_init, s_file)},
            {shim, PBP_INSTR_UNKNOWN, put_code(*m, lay, type, shim, s_init, s_init, s_init)},
            {module, PBP_INSTR_UNKNOWN, put_code(*m, lay, type, module, s_module, s_module, s_file)},
        };
        Symbolizer sym;
        sym.add_process(4242, lay, type, std::move(m));
        auto st = make_stack(4242, {std::begin(leaf_first), std::end(leaf_first)});
        const std::vector<std::string> want = v313 ? std::vector<std::string>{"<module>", "Klass.__init__"}
                                                   : std::vector<std::string>{"<module>", "__init__", "Klass.__init__"};
        pbp::FrameTable table;
        for (int pass = 0; pass < 2; pass++) {  // the second from the cache
            std::map<std::string, uint64_t> problems;
            std::vector<std::string> names;
            for (auto& f : sym.symbolize(4242, *st, problems)) names.push_back(f.name);
            EXPECT_EQ(names, want);
            names.clear();
            for (uint32_t i : sym.symbolize_into(4242, *st, table, problems)) names.push_back(table.at(i).name);
            EXPECT_EQ(names, want);
            EXPECT_TRUE(problems.empty());
        }
        EXPECT_EQ(sym.cached_code_objects(), 3u);
    }
}

TEST(SymbolizerOffline, UnknownProcess) {
    Symbolizer sym;
    auto st = make_stack(424242, {{0x1000, 3, 7}, {0x2000, 4, 8}});
    std::map<std::string, uint64_t> problems;
    auto out = sym.symbolize(424242, *st, problems);
    ASSERT_EQ(out.size(), 2u);
    for (auto& f : out) {
        EXPECT_TRUE(f.synthetic);
        EXPECT_EQ(f.name, "[unknown: process no longer tracked]");
    }
    EXPECT_EQ(problems["process no longer tracked"], 2u);
    EXPECT_EQ(sym.cached_code_objects(), 0u);
}

TEST(SymbolizerOffline, ChecksumUsesOnlyTheDeclaredFields) {
    pbp_py_offsets off{};
    off.csum_off[0] = 8;
    off.csum_size[0] = 8;
    off.csum_off[1] = 20;
    off.csum_size[1] = 4;
    uint8_t w[64] = {};
    for (int i = 0; i < 64; i++) w[i] = static_cast<uint8_t>(i * 7 + 1);
    uint32_t base = Symbolizer::code_checksum(off, w, sizeof w);
    uint64_t f0;
    uint32_t f1;
    std::memcpy(&f0, w + 8, 8);
    std::memcpy(&f1, w + 20, 4);
    EXPECT_EQ(base, pbp_csum_step(pbp_csum_step(0, f0), f1)) << "must match the BPF side (abi.h)";
    uint8_t w2[64];
    std::memcpy(w2, w, sizeof w);
    w2[0] ^= 1;   // outside every field
    w2[30] ^= 1;
    EXPECT_EQ(Symbolizer::code_checksum(off, w2, sizeof w2), base);
    w2[21] ^= 1;  // inside field 1
    EXPECT_NE(Symbolizer::code_checksum(off, w2, sizeof w2), base);
    std::memcpy(w2, w, sizeof w);
    w2[15] ^= 0x80;  // last byte of field 0
    EXPECT_NE(Symbolizer::code_checksum(off, w2, sizeof w2), base);
}

}  // namespace
