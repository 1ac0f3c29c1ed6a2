// The kernel checks made before loading BPF, with the kernel release and its BTF path given,
// so kernels this machine does not run (below 5.8, without BTF) are checked too.
#include "sys/preflight.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "test_support.h"

namespace pbp {
namespace {

class KernelCheck : public ::testing::Test {
protected:
    void SetUp() override {
        dir = test::temp_dir();
        btf = dir + "/vmlinux";
        std::ofstream(btf) << "BTF stand-in";  // only its presence is checked here
    }
    // One line, naming the cause and the fix.
    static void expect_one_line(const std::string& e, const std::string& cause, const std::string& fix) {
        EXPECT_NE(e.find(cause), std::string::npos) << e;
        EXPECT_NE(e.find(fix), std::string::npos) << e;
        EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 0) << e;
    }
    std::string dir, btf;
};

TEST_F(KernelCheck, NewEnoughWithBtfPasses) {
    for (std::string rel : {"5.8.0", "5.10.0-32-amd64", "5.17.1", "6.1.0-50-amd64", "6.12.107+deb13-amd64",
                            "10.0.0"}) {
        std::string e;
        EXPECT_TRUE(check_kernel(rel, btf, "", e)) << rel << ": " << e;
        EXPECT_EQ(e, "");
    }
}

TEST_F(KernelCheck, BelowFiveEightIsTooOld) {
    for (std::string rel : {"5.7.19", "5.4.0-150-generic", "4.19.0-27-amd64", "3.10.0-1160.el7.x86_64", "5.0"}) {
        std::string e;
        EXPECT_FALSE(check_kernel(rel, btf, "", e)) << rel;
        expect_one_line(e, "kernel " + rel + " is too old: pybpfprof needs Linux 5.8 or newer", "upgrade the kernel");
    }
    // Even with a --btf file: the ring buffer is missing, not the BTF.
    std::string e;
    EXPECT_FALSE(check_kernel("5.4.0", btf, btf, e));
    expect_one_line(e, "needs Linux 5.8 or newer", "upgrade the kernel");
}

TEST_F(KernelCheck, NoKernelBtfIsNamed) {
    std::string missing = dir + "/no-such-vmlinux", e;
    EXPECT_FALSE(check_kernel("6.1.0-50-amd64", missing, "", e));
    expect_one_line(e, "kernel 6.1.0-50-amd64 has no BTF (" + missing + " is missing)", "CONFIG_DEBUG_INFO_BTF=y");
    EXPECT_NE(e.find("or pass --btf FILE"), std::string::npos) << e;
    // A directory where the BTF file should be is no BTF either.
    e.clear();
    EXPECT_FALSE(check_kernel("6.1.0-50-amd64", dir, "", e));
    expect_one_line(e, "has no BTF", "CONFIG_DEBUG_INFO_BTF=y");
}

TEST_F(KernelCheck, BtfFileReplacesMissingKernelBtf) {
    std::string e;
    EXPECT_TRUE(check_kernel("5.10.0-32-amd64", dir + "/no-such-vmlinux", btf, e)) << e;
    for (std::string bad : {dir + "/nope.btf", dir}) {
        e.clear();
        EXPECT_FALSE(check_kernel("6.1.0", btf, bad, e)) << bad;
        expect_one_line(e, "BTF file " + bad + " cannot be read", "pass a readable BTF file to --btf");
    }
}

TEST_F(KernelCheck, UnparsableReleaseIsNotRefused) {
    // A release string we cannot read says nothing about the kernel: BTF decides.
    std::string e;
    EXPECT_TRUE(check_kernel("unknown", btf, "", e)) << e;
    EXPECT_FALSE(check_kernel("unknown", dir + "/none", "", e));
}

// EPERM from loading on a kernel before 5.11 without CAP_SYS_RESOURCE and under a hard
// locked-memory limit: BPF maps are charged to it (the DaemonSet adds SYS_RESOURCE for this;
// seen in the 5.10 guest). Anything else is not that.
TEST_F(KernelCheck, LockedMemoryLimitBefore511NamesTheCapability) {
    const std::string e = memlock_problem("5.10.0-32-amd64", false, 64 << 10);
    expect_one_line(e, "kernel 5.10.0-32-amd64 charges BPF maps to the locked-memory limit (64 KiB here)",
                    "add that capability");
    EXPECT_NE(e.find("CAP_SYS_RESOURCE"), std::string::npos) << e;
    EXPECT_NE(e.find("ulimit -l unlimited"), std::string::npos) << e;
    EXPECT_NE(memlock_problem("5.8.0", false, 8 << 20).find("(8 MiB here)"), std::string::npos);
    EXPECT_EQ(memlock_problem("5.10.0", true, 64 << 10), "") << "with the capability, libbpf raises the limit";
    EXPECT_EQ(memlock_problem("5.10.0", false, RLIM_INFINITY), "") << "no hard limit to raise";
    EXPECT_EQ(memlock_problem("5.11.0", false, 64 << 10), "") << "memory cgroups account BPF from 5.11";
    EXPECT_EQ(memlock_problem("6.18.44", false, 64 << 10), "");
    EXPECT_EQ(memlock_problem("unknown", false, 64 << 10), "");
}

TEST(KernelCheckThisMachine, MatchesTheRunningKernel) {
    // The two-argument form checks this machine's release and /sys/kernel/btf/vmlinux.
    std::string e1, e2;
    EXPECT_EQ(check_kernel("", e1), check_kernel(kernel_release(), kKernelBtf, "", e2));
    EXPECT_EQ(e1, e2);
}

}  // namespace
}  // namespace pbp
