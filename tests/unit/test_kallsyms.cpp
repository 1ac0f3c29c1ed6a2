// The kernel symbol table (sys/kallsyms.h): a fixture with every case (aliases, data
// symbols, _etext, modules, the last symbol), a kptr_restrict'd file of zeros, and the live
// /proc/kallsyms of this machine checked against a plain reading of the same file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "sys/kallsyms.h"
#include "test_support.h"

namespace pbp {
namespace {

constexpr const char* kFixture =
    "ffffffff81000000 T _stext\n"
    "ffffffff81000000 t startup_64\n"          // a local alias at the same address
    "ffffffff81000100 T do_syscall_64\n"
    "ffffffff81000200 D some_data\n"           // data: not code, left out
    "ffffffff81000300 t ksys_read\n"
    "ffffffff81000380 T vfs_read\n"
    "ffffffff81000400 W weak_handler\n"
    "ffffffff81000500 T _etext\n"              // the end of the kernel's text
    "ffffffffc0a01000 t nft_do_chain\t[nf_tables]\n"
    "ffffffffc0a01200 T nft_register_expr\t[nf_tables]\n"
    "ffffffffc0b00000 t ext4_read\t[ext4]\n"
    "garbage line\n"
    "\n";

TEST(KernelSymbols, NamesAddressesOfTheFixture) {
    KernelSymbols k = KernelSymbols::parse(kFixture, "fixture");
    ASSERT_TRUE(k.ok()) << k.why();
    EXPECT_EQ(k.why(), "");
    EXPECT_EQ(k.size(), 8u) << "code symbols, one per address, _etext as the end";
    EXPECT_EQ(k.name_for(0xffffffff81000000), "[k] _stext") << "the global name of an alias";
    EXPECT_EQ(k.name_for(0xffffffff81000150), "[k] do_syscall_64");
    EXPECT_EQ(k.name_for(0xffffffff81000250), "[k] do_syscall_64") << "a data symbol ends nothing";
    EXPECT_EQ(k.name_for(0xffffffff81000300), "[k] ksys_read");
    EXPECT_EQ(k.name_for(0xffffffff8100037f), "[k] ksys_read");
    EXPECT_EQ(k.name_for(0xffffffff81000380), "[k] vfs_read");
    EXPECT_EQ(k.name_for(0xffffffff81000401), "[k] weak_handler");
    EXPECT_EQ(k.name_for(0xffffffff81000500), "") << "at _etext";
    EXPECT_EQ(k.name_for(0xffffffffa0000000), "") << "between the kernel's text and the modules";
    EXPECT_EQ(k.name_for(0xffffffff80ffffff), "") << "before the first symbol";
    EXPECT_EQ(k.name_for(0), "");
    EXPECT_EQ(k.name_for(0xffffffffc0a01010), "[k] nft_do_chain");
    long i = k.find(0xffffffffc0a01210);
    ASSERT_GE(i, 0);
    EXPECT_EQ(k.name(static_cast<size_t>(i)), "nft_register_expr");
    EXPECT_EQ(k.module(static_cast<size_t>(i)), "nf_tables");
    EXPECT_EQ(k.module(static_cast<size_t>(k.find(0xffffffff81000380))), "");
    EXPECT_EQ(k.name_for(0xffffffffc0b00000 + KernelSymbols::kMaxLastSymbolBytes - 1), "[k] ext4_read");
    EXPECT_EQ(k.name_for(0xffffffffc0b00000 + KernelSymbols::kMaxLastSymbolBytes), "") << "far past the last symbol";
    EXPECT_EQ(k.name_for(~0ULL), "");
}

TEST(KernelSymbols, RestrictedFileOfZerosSaysWhy) {
    KernelSymbols k = KernelSymbols::parse(
        "0000000000000000 T _stext\n0000000000000000 T vfs_read\n0000000000000000 t nft_do_chain\t[nf_tables]\n", "/proc/kallsyms");
    EXPECT_FALSE(k.ok());
    EXPECT_EQ(k.size(), 0u);
    EXPECT_EQ(k.name_for(0xffffffff81000380), "");
    EXPECT_NE(k.why().find("/proc/kallsyms shows every kernel address as 0 (kernel.kptr_restrict="), std::string::npos) << k.why();
    EXPECT_NE(k.why().find("sysctl kernel.kptr_restrict=1"), std::string::npos) << k.why();
    EXPECT_EQ(k.why().find('\n'), std::string::npos) << "one line";

    KernelSymbols none = KernelSymbols::parse("", "empty");
    EXPECT_FALSE(none.ok());
    EXPECT_EQ(none.why(), "empty lists no symbols: kernel frames cannot be named");
    KernelSymbols missing = KernelSymbols::load("/nonexistent/kallsyms");
    EXPECT_FALSE(missing.ok());
    EXPECT_EQ(missing.why(), "cannot read /nonexistent/kallsyms: kernel frames cannot be named (is /proc mounted?)");
}

// The live file (this machine runs the tests as root, so the addresses are real): every
// global function's own address and the byte after it name that function, as a plain
// reading of the file says.
TEST(KernelSymbols, LiveProcKallsyms) {
    PBP_REQUIRE(geteuid() == 0, "needs root to see kernel addresses");
    KernelSymbols k = KernelSymbols::load();
    ASSERT_TRUE(k.ok()) << k.why();
    EXPECT_GT(k.size(), 10000u);
    // A plain reading: the first global function name at each address, and all names there.
    std::ifstream in("/proc/kallsyms");
    std::map<uint64_t, std::vector<std::string>> at;
    std::map<std::string, uint64_t> addr_of;
    for (std::string line; std::getline(in, line);) {
        std::istringstream ls(line);
        std::string a, type, name;
        ls >> a >> type >> name;
        if (type != "T" && type != "t") continue;
        const uint64_t v = std::stoull(a, nullptr, 16);
        at[v].push_back(name);
        if (type == "T" && line.find('\t') == std::string::npos) addr_of.emplace(name, v);
    }
    for (const char* fn : {"vfs_read", "ksys_read", "do_syscall_64", "schedule"}) {
        ASSERT_TRUE(addr_of.count(fn)) << fn;
        const uint64_t a = addr_of[fn];
        // At one address the kernel may have several names; the one chosen is one of them.
        const std::string got = k.name_for(a + 1);
        ASSERT_EQ(got.rfind("[k] ", 0), 0u) << fn << ": " << got;
        const auto& names = at[a];
        EXPECT_NE(std::find(names.begin(), names.end(), got.substr(4)), names.end()) << fn << ": " << got;
        EXPECT_EQ(k.name_for(a), got);
    }
    // Spread over the whole table: the address just before each of 200 symbols is named by
    // the symbol before it (or is a gap).
    size_t checked = 0;
    for (size_t i = 1; i < k.size(); i += k.size() / 200) {
        const long j = k.find(k.address(i) - 1);
        if (j >= 0) {
            EXPECT_EQ(static_cast<size_t>(j), i - 1);
        }
        checked++;
    }
    EXPECT_GE(checked, 200u);
}

// What an unprivileged reader of the live file gets (kptr_restrict or no CAP_SYSLOG: zeros),
// read through setpriv as nobody.
TEST(KernelSymbols, LiveFileAsNobodyIsRefusedWithTheReason) {
    PBP_REQUIRE(geteuid() == 0, "needs root to switch to nobody");
    auto r = test::run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
                        "--bounding-set=-all", "head", "-n", "2000", "/proc/kallsyms"},
                       30);
    PBP_REQUIRE(r.status == 0, "setpriv could not run head as nobody: " + r.err);
    KernelSymbols k = KernelSymbols::parse(r.out, "/proc/kallsyms");
    EXPECT_FALSE(k.ok());
    EXPECT_NE(k.why().find("shows every kernel address as 0"), std::string::npos) << k.why();
}

}  // namespace
}  // namespace pbp
