// Per-version policy (cpython/policy.h), on facts made up here: which ELF files hold a
// runtime, which version their facts give, where 3.6 and later keep the interpreters list
// head, which code object is 3.13's _Py_InitCleanup shim. The layout choice is tested with
// synthetic _Py_DebugOffsets in test_layout.cpp; all of it against live interpreters in
// test_discovery.cpp and test_symbolizer.cpp.
#include <gtest/gtest.h>

#include "cpython/policy.h"

using namespace pbp::cpython;

namespace {

TEST(PolicySymbols, RuntimeSymbolsAreTheOnesTheRulesAskFor) {
    const auto& names = runtime_symbols();
    for (const char* want : {kSymRuntime, kSymVersion, kSymCodeType, kSymTstateCurrent, kSymInterpHead})
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
    EXPECT_EQ(names.size(), 5u);
    EXPECT_STREQ(kSymRuntime, "_PyRuntime");
    EXPECT_STREQ(kSymVersion, "Py_Version");
    EXPECT_STREQ(kSymCodeType, "PyCode_Type");
    EXPECT_STREQ(kSymTstateCurrent, "_PyThreadState_Current");
    EXPECT_STREQ(kSymInterpHead, "interp_head");
    EXPECT_STREQ(kRuntimeSection, ".PyRuntime");
}

TEST(PolicySymbols, HoldsRuntime) {
    using Syms = std::map<std::string, uint64_t>;
    EXPECT_TRUE(holds_runtime(Syms{{"_PyRuntime", 0x1000}}, false));  // 3.7+
    EXPECT_TRUE(holds_runtime(Syms{}, true));                          // stripped: .PyRuntime
    EXPECT_TRUE(holds_runtime(Syms{{"PyCode_Type", 1}}, true));
    // 3.6: no _PyRuntime; the current thread state and the code type tell it
    EXPECT_TRUE(holds_runtime(Syms{{"_PyThreadState_Current", 8}, {"PyCode_Type", 16}}, false));
    EXPECT_TRUE(holds_runtime(Syms{{"_PyThreadState_Current", 8}, {"PyCode_Type", 16}, {"interp_head", 24}}, false));
    // Either alone is not enough (an extension module may import PyCode_Type)
    EXPECT_FALSE(holds_runtime(Syms{{"PyCode_Type", 16}}, false));
    EXPECT_FALSE(holds_runtime(Syms{{"_PyThreadState_Current", 8}}, false));
    EXPECT_FALSE(holds_runtime(Syms{{"Py_Version", 8}, {"interp_head", 24}}, false));
    EXPECT_FALSE(holds_runtime(Syms{}, false));
}

TEST(PolicyVersion, FromName) {
    auto mm = [](const std::string& name) {
        auto v = version_from_name(name);
        return v ? std::to_string(v->major) + "." + std::to_string(v->minor) + (v->micro ? "!" : "") : "-";
    };
    EXPECT_EQ(mm("libpython3.9.so.1.0"), "3.9");
    EXPECT_EQ(mm("libpython3.6m.so.1.0"), "3.6");
    EXPECT_EQ(mm("/usr/bin/python3.11"), "3.11");
    EXPECT_EQ(mm("/opt/py/lib/libpython3.13t.so.1.0"), "3.13");
    EXPECT_EQ(mm("python3.12.1"), "3.12");  // "python" + a .rodata version string
    EXPECT_EQ(mm("/usr/bin/python3"), "-");
    EXPECT_EQ(mm("/usr/bin/python"), "-");
    EXPECT_EQ(mm("libfoo.so"), "-");
    EXPECT_EQ(mm(""), "-");
    // A mapped file's name is chosen by whoever maps it: a huge number is no version (and
    // once made stoi throw out of discovery).
    EXPECT_EQ(mm("/home/u/libpython3.99999999999999999999.so"), "-");
    EXPECT_EQ(mm("libpython3.1234.so"), "-");
    EXPECT_EQ(mm("libpython3.999.so"), "-");
}

TEST(PolicyVersion, InferOrder) {
    const std::vector<std::string> none, strings = {"3.8.18", "3.7.1"};
    // Py_Version is exact and wins over everything else.
    Version v = infer_version(0x030B07F0, "libpython3.9.so.1.0", "/usr/bin/python3.10", strings);
    EXPECT_EQ(v.str(), "3.11.7");
    EXPECT_EQ(v.hex(), 0x030B07F0u);
    // Then the soname, then the path, then the first version string: major.minor only.
    v = infer_version(std::nullopt, "libpython3.9.so.1.0", "/usr/bin/python3.10", strings);
    EXPECT_EQ(v.major, 3);
    EXPECT_EQ(v.minor, 9);
    EXPECT_EQ(v.micro, 0);
    v = infer_version(std::nullopt, "", "/usr/bin/python3.10", strings);
    EXPECT_EQ(v.minor, 10);
    v = infer_version(std::nullopt, "libpython3.so", "/usr/local/bin/renamed", strings);
    EXPECT_EQ(v.minor, 8);
    // None says: unknown (for _Py_DebugOffsets to tell).
    EXPECT_FALSE(infer_version(std::nullopt, "", "/usr/local/bin/renamed", none).known());
    EXPECT_FALSE(infer_version(std::nullopt, "", "/usr/local/bin/renamed", {"2x"}).known());
    // A zero Py_Version (unreadable) falls through to the names.
    EXPECT_EQ(infer_version(0u, "", "/usr/bin/python3.12", none).minor, 12);
}

TEST(PolicyInterpHead, InsideRuntimeFrom37) {
    auto l = builtin_layout(Version::from_hex(0x030701F0), false);
    ASSERT_TRUE(l && l->runtime_interp_head);
    std::string err;
    EXPECT_EQ(interp_head_address(*l, 0x10000, 0x9999, err), 0x10000 + *l->runtime_interp_head);
    EXPECT_EQ(err, "");
    EXPECT_EQ(interp_head_address(*l, 0, 0x9999, err), 0u);  // the symbol is 3.6's: not used
    EXPECT_EQ(err, "_PyRuntime not found");
}

TEST(PolicyInterpHead, StaticSymbolIn36) {
    auto l = builtin_layout(Version::from_hex(0x03060FF0), false);
    ASSERT_TRUE(l);
    ASSERT_FALSE(l->runtime_interp_head);
    std::string err = "stale";
    EXPECT_EQ(interp_head_address(*l, 0x10000, 0x9990, err), 0x9990u);  // no _PyRuntime offset
    EXPECT_EQ(err, "");
    EXPECT_EQ(interp_head_address(*l, 0, 0, err), 0u);
    EXPECT_EQ(err, "the interp_head symbol is missing (stripped 3.6 build)");
}

TEST(PolicyShim, InitCleanupFrom313) {
    const Version v312 = Version::from_hex(0x030C01F0), v313 = Version::from_hex(0x030D00F0),
                  v314 = Version::from_hex(0x030E0AF0);
    const uint64_t s = 0x7f00'0000'1000, other = 0x7f00'0000'2000;
    EXPECT_TRUE(is_init_cleanup_shim(v313, s, s, s, "__init__"));
    EXPECT_TRUE(is_init_cleanup_shim(v314, s, s, s, "__init__"));
    EXPECT_FALSE(is_init_cleanup_shim(v312, s, s, s, "__init__"));  // no such shim before 3.13
    // A real __init__: its file is not its name.
    EXPECT_FALSE(is_init_cleanup_shim(v313, s, s, other, "__init__"));
    EXPECT_FALSE(is_init_cleanup_shim(v313, other, s, s, "__init__"));
    EXPECT_FALSE(is_init_cleanup_shim(v313, s, other, s, "__init__"));
    EXPECT_FALSE(is_init_cleanup_shim(v313, s, s, s, "Klass.__init__"));
    EXPECT_FALSE(is_init_cleanup_shim(v313, s, s, s, "__new__"));
    EXPECT_FALSE(is_init_cleanup_shim(v313, 0, 0, 0, "__init__"));  // no fields at all
}

}  // namespace
