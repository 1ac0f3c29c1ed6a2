// native/task_regs (bpf/task_regs.bpf.c): the registers a thread asleep in a system call entered
// the kernel with, read by BPF, are the ones /proc shows (sp and pc), and hold its frame pointer,
// which /proc does not show. On every kernel that runs --native's off-CPU capture (the host's,
// and 6.1 in CI's VM boot); before 5.15, none (the /proc read alone, as before).
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "native/task_regs.h"
#include "sys/procfs.h"

namespace pbp {
namespace {

// bpf_task_pt_regs came in 5.15: before it the program cannot load, and the read says none.
bool kernel_has_task_pt_regs() {
    utsname u{};
    int major = 0, minor = 0;
    return uname(&u) == 0 && sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
           (major > 5 || (major == 5 && minor >= 15));
}

TEST(TaskRegs, ThreadAsleepInASyscallHasItsFramePointer) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    std::atomic<pid_t> tid{0};
    std::atomic<uint64_t> frame{0};
    std::thread t([&] {
        // -O0 (this file's build): rbp is this function's frame, and stays so through a
        // read(2) made here, without libc, which might use rbp as it likes.
        frame = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
        tid = static_cast<pid_t>(syscall(SYS_gettid));
        char c;
        register long rax asm("rax") = SYS_read;
        register long rdi asm("rdi") = fds[0];
        register long rsi asm("rsi") = reinterpret_cast<long>(&c);
        register long rdx asm("rdx") = 1;
        asm volatile("syscall" : "+r"(rax) : "r"(rdi), "r"(rsi), "r"(rdx) : "rcx", "r11", "memory");
    });
    for (int i = 0; i < 500 && !tid; i++) usleep(10000);
    ASSERT_NE(tid.load(), 0);
    std::optional<procfs::SyscallLine> place;
    for (int i = 0; i < 500; i++) {
        auto st = procfs::read_task_status(getpid(), tid);
        place = procfs::read_syscall(getpid(), tid);
        if (st && st->state == 'S' && place && place->nr == SYS_read) break;
        place.reset();
        usleep(10000);
    }
    std::optional<native::TaskRegs> regs;
    // (and through an iteration of every task, as before 6.1: many records per read)
    std::optional<native::TaskRegs> regs_all;
    if (place) regs = native::read_task_regs(getpid(), tid);
    if (place) regs_all = native::read_task_regs(getpid(), tid, true);
    const auto none = native::read_task_regs(getpid(), 0x3fffffff);  // no such thread
    // (the thread woken and joined before any assertion can return)
    EXPECT_EQ(write(fds[1], "x", 1), 1);
    t.join();
    close(fds[0]);
    close(fds[1]);
    ASSERT_TRUE(place) << "the thread never slept in read(2)";
    EXPECT_FALSE(none);
    if (!kernel_has_task_pt_regs()) {
        EXPECT_FALSE(regs) << "before 5.15 the program cannot load: the /proc read stays as it is";
        EXPECT_FALSE(regs_all);
        return;
    }
    ASSERT_TRUE(regs) << "the iter/task program did not load or run";
    EXPECT_EQ(regs->sp, place->sp);
    EXPECT_EQ(regs->ip, place->pc);
    EXPECT_EQ(regs->bp, frame.load());
    ASSERT_TRUE(regs_all);
    EXPECT_EQ(regs_all->sp, regs->sp);
    EXPECT_EQ(regs_all->ip, regs->ip);
    EXPECT_EQ(regs_all->bp, regs->bp);
}

}  // namespace
}  // namespace pbp
