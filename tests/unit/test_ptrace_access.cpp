// The diagnosis of a refused ptrace access check (sys/ptrace_access.h): each cause gets its
// own sentence, naming the capabilities involved.
#include <gtest/gtest.h>
#include <unistd.h>

#include "sys/ptrace_access.h"

namespace pbp {
namespace {

constexpr uint64_t kAll = 0x1ffffffffffull;          // every capability of 6.18 (0-40)
constexpr uint64_t kPtrace = 1ull << 19, kResource = 1ull << 24;

TEST(PtraceAccess, CapabilityNames) {
    EXPECT_EQ(capability_names(kResource), "cap_sys_resource");
    EXPECT_EQ(capability_names(kPtrace | kResource), "cap_sys_ptrace, cap_sys_resource");
    EXPECT_EQ(capability_names(1ull << 40 | 1ull << 45), "cap_checkpoint_restore, cap_45");
    EXPECT_EQ(capability_names(kAll), "cap_chown, cap_dac_override, cap_dac_read_search, cap_fowner and 37 more");
    EXPECT_EQ(capability_names(0), "");
}

TEST(PtraceAccess, WithoutPtraceAnotherUsersProcess) {
    PtraceFacts f{kAll & ~kPtrace, kAll & ~kPtrace, 0x0, std::nullopt, 0, 1000};
    EXPECT_EQ(ptrace_refusal_reason(f),
              "profiling another user's process needs CAP_SYS_PTRACE (run as root, or add SYS_PTRACE to the agent's "
              "capabilities)");
}

TEST(PtraceAccess, WithoutPtraceASameUserProcessWithMoreCapabilities) {
    PtraceFacts f{kAll & ~kPtrace, kAll & ~kPtrace, kAll, std::nullopt, 0, 0};
    EXPECT_EQ(ptrace_refusal_reason(f),
              "it holds capabilities this process lacks (cap_sys_ptrace), so reading it needs CAP_SYS_PTRACE (run as "
              "root, or add SYS_PTRACE to the agent's capabilities)");
    f.target_permitted = 0;  // the same user, nothing more: not dumpable
    EXPECT_NE(ptrace_refusal_reason(f).find("it is not dumpable"), std::string::npos);
}

TEST(PtraceAccess, YamaScopeThree) {
    PtraceFacts f{kAll, kAll, kAll, 3, 0, 0};
    EXPECT_NE(ptrace_refusal_reason(f).find("ptrace_scope is 3"), std::string::npos);
    f.yama_scope = 1;  // 1 and 2 do not stop CAP_SYS_PTRACE
    EXPECT_EQ(ptrace_refusal_reason(f).find("ptrace_scope"), std::string::npos);
}

// This machine's own case: pybpfprof runs as root in a sandbox whose bounding set lacks
// CAP_SYS_RESOURCE, and PID 1 (the sandbox's manager, in an outer user namespace) has it.
TEST(PtraceAccess, ASandboxsManagerWithCapabilitiesTheSandboxDropped) {
    PtraceFacts f{kAll & ~kResource, kAll & ~kResource, kAll, std::nullopt, 0, 0};
    const std::string r = ptrace_refusal_reason(f);
    EXPECT_EQ(r.rfind("it holds capabilities that pybpfprof's own set lacks (cap_sys_resource)", 0), 0u) << r;
    EXPECT_NE(r.find("profile that process from the host"), std::string::npos) << r;
}

TEST(PtraceAccess, EverythingInPlaceIsASecurityModuleOrANamespace) {
    PtraceFacts f{kAll, kAll, kAll, 0, 0, 0};
    EXPECT_NE(ptrace_refusal_reason(f).find("security module"), std::string::npos);
}

TEST(PtraceAccess, FactsOfThisProcessAndOfPidOne) {
    auto own = ptrace_refusal_facts(getpid());
    EXPECT_EQ(own.own_permitted, own.target_permitted.value_or(~0ull));
    EXPECT_EQ(own.own_uid, own.target_uid);
    auto one = ptrace_refusal_facts(1);
    EXPECT_TRUE(one.target_permitted.has_value()) << "/proc/1/status is readable to all";
}

}  // namespace
}  // namespace pbp
