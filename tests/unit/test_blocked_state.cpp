// native/blocked_state: reading /proc/PID/task/TID/stack, and a real blocked thread's state
// (its own process's: no privilege needed to read one's own threads). Its sp and pc come from
// procfs::read_syscall, tested in test_procfs.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <sys/syscall.h>

#include "native/blocked_state.h"
#include "pybpfprof/abi.h"

using namespace pbp::native;

TEST(BlockedState, KernelStackNames) {
    auto k = parse_kernel_stack(
        "[<0>] hrtimer_nanosleep+0x74/0xf0\n"
        "[<0>] do_pselect.constprop.0+0xc5/0x180\n"
        "[<0>] fuse_dev_do_read+0x1a/0x2b [fuse]\n"
        "garbage\n"
        "[<0>] entry_SYSCALL_64_after_hwframe+0x76/0x7e\n");
    ASSERT_EQ(k.size(), 4u);
    EXPECT_EQ(k[0], "[k] hrtimer_nanosleep");
    EXPECT_EQ(k[1], "[k] do_pselect.constprop.0");
    EXPECT_EQ(k[2], "[k] fuse_dev_do_read");
    EXPECT_EQ(k[3], "[k] entry_SYSCALL_64_after_hwframe");
    EXPECT_TRUE(parse_kernel_stack("").empty());
}

// A thread of this process blocked in a futex wait: its state has its sp and pc, a stack copy
// from that sp (here: its own words), and a thread running is never read.
TEST(BlockedState, ReadsABlockedThreadAndNotARunningOne) {
    std::atomic<int> word{0};
    std::atomic<pid_t> tid{0};
    std::thread t([&] {
        tid = static_cast<pid_t>(syscall(SYS_gettid));
        while (word.load() == 0) syscall(SYS_futex, &word, 0 /* FUTEX_WAIT */, 0, nullptr, nullptr, 0);
    });
    while (!tid) usleep(1000);
    std::optional<BlockedState> st;
    for (int i = 0; i < 500 && !st; i++) {
        usleep(2000);
        st = read_blocked_state(getpid(), tid, 12345);
    }
    ASSERT_TRUE(st);
    ASSERT_GE(st->record.size(), sizeof(pbp_native_event));
    pbp_native_event h;
    std::memcpy(&h, st->record.data(), PBP_NATIVE_HEADER_BYTES);
    EXPECT_EQ(h.ts_ns, 12345u);
    EXPECT_EQ(h.type, static_cast<uint32_t>(PBP_EV_NATIVE));
    EXPECT_EQ(h.pid, static_cast<uint32_t>(getpid()));
    EXPECT_EQ(h.tid, static_cast<uint32_t>(tid));
    EXPECT_TRUE(h.flags & PBP_NATIVE_F_OFFCPU);
    EXPECT_NE(h.ip, 0u);
    EXPECT_NE(h.sp, 0u);
    EXPECT_GT(h.ustack_len, 0u);
    EXPECT_LE(h.ustack_len, static_cast<uint32_t>(PBP_NATIVE_USTACK_OFFCPU));
    // The copy is the thread's stack from sp: its first word, read here directly.
    uint64_t first = 0;
    std::memcpy(&first, reinterpret_cast<const void*>(h.sp), sizeof first);
    uint64_t copied = 0;
    std::memcpy(&copied, st->record.data() + PBP_NATIVE_HEADER_BYTES, sizeof copied);
    EXPECT_EQ(copied, first);

    // This thread runs: none.
    EXPECT_FALSE(read_blocked_state(getpid(), static_cast<pid_t>(syscall(SYS_gettid)), 1));
    word = 1;
    syscall(SYS_futex, &word, 1 /* FUTEX_WAKE */, 1, nullptr, nullptr, 0);
    t.join();
}
