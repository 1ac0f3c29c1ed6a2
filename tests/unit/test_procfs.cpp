// procfs::read_task_status: the state and the context-switch count the wall engine seeds a
// sleeping thread's interval with (Engine::seed_offcpu): unchanged while a thread sleeps,
// larger once it has woken and slept again.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "sys/procfs.h"

namespace pbp {
namespace {

TEST(Procfs, ASleepingThreadsSwitchCountStaysUntilItWakes) {
    std::mutex m;
    std::condition_variable cv;
    int go = 0;
    std::atomic<pid_t> tid{0};
    std::thread t([&] {
        tid = static_cast<pid_t>(syscall(SYS_gettid));
        std::unique_lock<std::mutex> l(m);
        for (int round = 1; round <= 2; round++) cv.wait(l, [&] { return go >= round; });
    });
    while (!tid) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto asleep = [&] {
        for (int i = 0; i < 2000; i++) {
            auto st = procfs::read_task_status(getpid(), tid);
            if (st && st->state == 'S') return st;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return std::optional<procfs::Status>{};
    };
    auto a = asleep();
    ASSERT_TRUE(a) << "the thread never slept";
    EXPECT_GT(a->switches, 0u);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto b = procfs::read_task_status(getpid(), tid);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->state, 'S');
    EXPECT_EQ(b->switches, a->switches) << "asleep all along";
    {
        std::lock_guard<std::mutex> l(m);
        go = 1;  // wakes it: it finds round 2 not come and sleeps again
    }
    cv.notify_all();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto c = asleep();
    ASSERT_TRUE(c);
    EXPECT_GT(c->switches, b->switches) << "woken and asleep again";
    {
        std::lock_guard<std::mutex> l(m);
        go = 2;
    }
    cv.notify_all();
    t.join();
    EXPECT_FALSE(procfs::read_task_status(getpid(), tid)) << "a thread gone has no status";
}

// /proc/PID/task/TID/syscall: the number, six arguments, the user sp and pc.
TEST(Procfs, SyscallLineOfAThreadInASystemCall) {
    auto l = procfs::parse_syscall("202 0x7f0000001000 0x80 0x0 0x0 0x0 0x0 0x7ffde32b6458 0x7f024eaed503\n");
    ASSERT_TRUE(l);
    EXPECT_EQ(l->nr, 202);
    EXPECT_EQ(l->args[0], 0x7f0000001000u);
    EXPECT_EQ(l->args[1], 0x80u);
    EXPECT_EQ(l->sp, 0x7ffde32b6458u);
    EXPECT_EQ(l->pc, 0x7f024eaed503u);
}

TEST(Procfs, NoSyscallLineWhenRunningOrOutsideASystemCall) {
    using procfs::parse_syscall;
    EXPECT_FALSE(parse_syscall("running\n"));
    EXPECT_FALSE(parse_syscall("-1 0x7ffde32b6458 0x7f024eaed503\n"));
    EXPECT_FALSE(parse_syscall(""));
    EXPECT_FALSE(parse_syscall("230 0x1 0x1 0x7ffde32b6470 0x0 0x0 0x0 0x7ffde32b6458 zz\n"));
    EXPECT_FALSE(parse_syscall("x 0x1 0x1 0x7ffde32b6470 0x0 0x0 0x0 0x7ffde32b6458 0x7f024eaed503\n"));
    EXPECT_FALSE(parse_syscall("230 0x1 0x1 0x7ffde32b6470 0x0 0x0 0x0 0x7ffde32b6458\n"));  // no pc
}

TEST(Procfs, SchedstatGivesTheCpuTimeRun) {
    using procfs::parse_schedstat;
    EXPECT_EQ(parse_schedstat("1234567 890 12\n"), 1234567u);
    EXPECT_EQ(parse_schedstat("0 0 0\n"), 0u);
    EXPECT_EQ(parse_schedstat("18446744073709551615 0 0\n"), UINT64_MAX);
    EXPECT_FALSE(parse_schedstat("18446744073709551616 0 0\n"));  // over a uint64_t
    EXPECT_FALSE(parse_schedstat("99999999999999999999999 0 0\n"));
    EXPECT_FALSE(parse_schedstat(""));
    EXPECT_FALSE(parse_schedstat("1234567"));  // cut short
    EXPECT_FALSE(parse_schedstat("-5 0 0\n"));
    EXPECT_FALSE(parse_schedstat("12x 0 0\n"));
}

TEST(Procfs, ThisThreadsCpuTimeGrowsAsItRuns) {
    const pid_t pid = getpid(), tid = static_cast<pid_t>(syscall(SYS_gettid));
    auto before = procfs::read_task_cpu_ns(pid, tid);
    ASSERT_TRUE(before);
    volatile uint64_t x = 0;
    for (uint64_t i = 0; i < 50'000'000; i++) x = x + i;
    auto after = procfs::read_task_cpu_ns(pid, tid);
    ASSERT_TRUE(after);
    EXPECT_GT(*after, *before + 1'000'000);  // 50M additions: well over 1 ms of CPU
    EXPECT_FALSE(procfs::read_task_cpu_ns(pid, 0));
}

}  // namespace
}  // namespace pbp
