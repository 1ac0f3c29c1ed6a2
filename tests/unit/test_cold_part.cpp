// native/cold_part.h: a function's cold part found without its symbol. The jump reading and the
// choice of FDE on made-up bytes and ranges; then, on a library gcc -O2 builds here (an exported
// _PyEval_EvalFrameDefault with unlikely paths, which gcc moves to "_PyEval_EvalFrameDefault.cold")
// and then strips as Debian strips its interpreters: the range found is the one the unstripped
// copy's symbol gives, and NativeSymbols names a pc there "_PyEval_EvalFrameDefault.cold" in a
// process that loaded the stripped library (before: "[libfake_eval.so+0x...]", so that no
// eval-loop frame of Debian sid's python3.14 and 3.15 was found).
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "native/cold_part.h"
#include "native/merge.h"
#include "native/native_symbols.h"
#include "native/process_modules.h"
#include "test_support.h"

namespace pbp {
namespace {

using namespace pbp::native;

TEST(ColdPart, Rel32JumpTargetsOutsideTheCode) {
    // At 0x1000: jmp +0x100 (to 0x1105), jne -0x2000 (to 0x1000 + 11 - 0x2000), a jmp to inside
    // (0x1000 + 16 - 6 = 0x100a), and a jmp cut by the code's end.
    const std::vector<uint8_t> code = {
        0xe9, 0x00, 0x01, 0x00, 0x00,        // 0x1000 jmp 0x1105
        0x0f, 0x85, 0x00, 0xe0, 0xff, 0xff,  // 0x1005 jne -0x2000
        0xe9, 0xfa, 0xff, 0xff, 0xff,        // 0x100b jmp 0x100a (inside)
        0x90, 0xe9, 0x01, 0x02,              // a jmp without its 4 bytes
    };
    const auto t = rel32_jump_targets(code.data(), code.size(), 0x1000);
    EXPECT_EQ(t, (std::vector<uint64_t>{0x1105, uint64_t(0x100b) - 0x2000}));
    // 0F 80..8F only: 0F 90 (setcc) is no jump.
    const std::vector<uint8_t> setcc = {0x0f, 0x90, 0x00, 0x10, 0x00, 0x00};
    EXPECT_TRUE(rel32_jump_targets(setcc.data(), setcc.size(), 0x1000).empty());
}

// FDEs [0x100, 0x200) (the cold part), [0x200, 0x300), [0x300, 0x400); nothing outside them.
std::optional<CodeRange> fde_of(uint64_t a) {
    if (a < 0x100 || a >= 0x400) return std::nullopt;
    const uint64_t s = a & ~uint64_t(0xff);
    return CodeRange{s, s + 0x100};
}

TEST(ColdPart, PicksTheUnnamedFdeManyDistinctTargetsLandIn) {
    auto none = [](const CodeRange&) { return false; };
    const std::vector<uint64_t> t = {0x110, 0x120, 0x130, 0x130, 0x250, 0x999};
    EXPECT_EQ(pick_cold_part(t, fde_of, none), (CodeRange{0x100, 0x200}));
    // A symbol covers it: a named function, not a cold part.
    auto named = [](const CodeRange& r) { return r.start == 0x100; };
    EXPECT_EQ(pick_cold_part(t, fde_of, named), std::nullopt);
    // Tail calls: many jumps, but to one address.
    EXPECT_EQ(pick_cold_part({0x100, 0x100, 0x100, 0x100, 0x100}, fde_of, none), std::nullopt);
    // Too few, or no clear winner.
    EXPECT_EQ(pick_cold_part({0x110, 0x120}, fde_of, none), std::nullopt);
    EXPECT_EQ(pick_cold_part({0x110, 0x120, 0x130, 0x210, 0x220}, fde_of, none), std::nullopt);
    EXPECT_EQ(pick_cold_part({}, fde_of, none), std::nullopt);
}

// A library with an exported _PyEval_EvalFrameDefault whose unlikely paths gcc moves to a cold
// part, and a static helper (unnamed once stripped, and no cold part).
constexpr const char* kFakeEval = R"(
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline, cold)) static long slow(const char* why, long v) { fprintf(stderr, "%s %ld\n", why, v); return v / 3; }
__attribute__((noinline)) static long helper(long v) { return v * 7 + (v >> 2); }
long _PyEval_EvalFrameDefault(const long* code, long n) {
    long s = 0;
    for (long i = 0; i < n; i++) {
        long op = code[i];
        if (__builtin_expect(op < 0, 0)) { s -= slow("negative", op); continue; }
        if (__builtin_expect(op > 1000000, 0)) { s += slow("big", op * 3); continue; }
        if (__builtin_expect(op == 7, 0)) { s ^= slow("seven", i); continue; }
        if (__builtin_expect(op == 13, 0)) { s += slow("thirteen", s); if (s > 99) abort(); continue; }
        if (__builtin_expect(op == 42, 0)) { s -= slow("answer", s + i); continue; }
        s += helper(op);
    }
    return s;
}
)";

struct FakeEvalLib {
    std::string unstripped, stripped, skip;
};

// Builds it into dir: the unstripped and the stripped copy; skip says why not.
FakeEvalLib build_fake_eval(const std::string& dir) {
    FakeEvalLib l;
    const std::string src = dir + "/fake_eval.c";
    std::ofstream(src) << kFakeEval;
    l.unstripped = dir + "/libfake_eval_full.so";
    l.stripped = dir + "/libfake_eval.so";
    auto cc = test::run({"gcc", "-O2", "-shared", "-fPIC", "-o", l.unstripped, src});
    if (cc.status != 0) {
        l.skip = "gcc: " + cc.err;
        return l;
    }
    auto st = test::run({"strip", "-o", l.stripped, l.unstripped});
    if (st.status != 0) l.skip = "strip: " + st.err;
    return l;
}

// The file's symbols (name -> [address, address + size)), as they are in it (base 0).
std::map<std::string, CodeRange> symbols_of(const std::string& path, Dwfl*& dwfl, Dwfl_Module*& m) {
    static char* debuginfo_path = nullptr;
    static const Dwfl_Callbacks cb = {dwfl_build_id_find_elf, dwfl_standard_find_debuginfo,
                                      dwfl_offline_section_address, &debuginfo_path};
    dwfl = dwfl_begin(&cb);
    dwfl_report_begin(dwfl);
    m = dwfl_report_elf(dwfl, path.c_str(), path.c_str(), -1, 0, false);
    dwfl_report_end(dwfl, nullptr, nullptr);
    std::map<std::string, CodeRange> out;
    if (!m) return out;
    for (int i = 0, n = dwfl_module_getsymtab(m); i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr = 0;
        const char* name = dwfl_module_getsym_info(m, i, &sym, &addr, nullptr, nullptr, nullptr);
        if (name && GELF_ST_TYPE(sym.st_info) == STT_FUNC && sym.st_size) out[name] = {addr, addr + sym.st_size};
    }
    return out;
}

class ColdPartOfGcc : public ::testing::Test {
protected:
    void SetUp() override {
        lib = build_fake_eval(test::temp_dir());
        PBP_REQUIRE(lib.skip.empty(), lib.skip);
        full = symbols_of(lib.unstripped, full_dwfl, full_m);
        if (!full.count(std::string(kEvalLoop) + ".cold"))
            GTEST_SKIP() << "this gcc made no cold part of the test's function";
    }
    void TearDown() override {
        if (full_dwfl) dwfl_end(full_dwfl);
    }
    FakeEvalLib lib;
    Dwfl* full_dwfl = nullptr;
    Dwfl_Module* full_m = nullptr;
    std::map<std::string, CodeRange> full;
};

TEST_F(ColdPartOfGcc, StrippedLibraryGivesTheColdSymbolsRange) {
    const CodeRange cold = full.at(std::string(kEvalLoop) + ".cold");
    Dwfl* d = nullptr;
    Dwfl_Module* m = nullptr;
    const auto syms = symbols_of(lib.stripped, d, m);
    ASSERT_NE(m, nullptr);
    EXPECT_FALSE(syms.count(std::string(kEvalLoop) + ".cold"));  // stripped, as Debian's
    ASSERT_TRUE(syms.count(kEvalLoop));
    EXPECT_EQ(find_cold_part(m, kEvalLoop), cold);
    // The unstripped file too (its .cold symbol covers it: nothing to find).
    EXPECT_EQ(find_cold_part(full_m, kEvalLoop), std::nullopt);
    // A function without a cold part; one the file does not define.
    EXPECT_EQ(find_cold_part(m, "nonexistent_function"), std::nullopt);
    // Its FDEs: the cold part has one of its own, the hot part another.
    Dwarf_Addr bias = 0;
    const auto fdes = eh_frame_ranges(dwfl_module_getelf(m, &bias));
    EXPECT_NE(std::find(fdes.begin(), fdes.end(), cold), fdes.end());
    EXPECT_NE(std::find(fdes.begin(), fdes.end(), syms.at(kEvalLoop)), fdes.end());
    dwfl_end(d);
}

// In a process (this one) that loaded the stripped library: its cold part's pcs are named
// "_PyEval_EvalFrameDefault.cold", which the merge takes for the eval loop; the static helper,
// which has no cold part and no symbol, keeps its "[library+offset]".
TEST_F(ColdPartOfGcc, NativeSymbolsNameItInAProcess) {
    void* h = dlopen(lib.stripped.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    const auto hot_at = reinterpret_cast<uint64_t>(dlsym(h, kEvalLoop));
    ASSERT_NE(hot_at, 0u);
    const uint64_t base = hot_at - full.at(kEvalLoop).start;
    const CodeRange cold = full.at(std::string(kEvalLoop) + ".cold");
    ASSERT_TRUE(full.count("helper"));
    const CodeRange helper = full.at("helper");

    FileCache files;
    ProcessModules modules(getpid(), files);
    ASSERT_TRUE(modules.refresh());
    NativeSymbols symbols(modules);
    for (uint64_t pc : {cold.start, cold.start + (cold.end - cold.start) / 2, cold.end - 1}) {
        const Frame& f = symbols.frame_at(base + pc);
        EXPECT_EQ(f.name, std::string(kEvalLoop) + ".cold") << std::hex << pc;
        EXPECT_TRUE(is_eval_loop(f.name));
        EXPECT_EQ(f.library, lib.stripped);
    }
    EXPECT_EQ(symbols.frame_at(hot_at + 1).name, kEvalLoop);
    const Frame& h1 = symbols.frame_at(base + helper.start + 1);
    EXPECT_EQ(h1.name.rfind("[libfake_eval.so+0x", 0), 0u) << h1.name;
    // Outside the cold part, either side.
    EXPECT_NE(symbols.frame_at(base + cold.end).name, std::string(kEvalLoop) + ".cold");
    EXPECT_NE(symbols.frame_at(base + cold.start - 1).name, std::string(kEvalLoop) + ".cold");
    dlclose(h);
}

}  // namespace
}  // namespace pbp
