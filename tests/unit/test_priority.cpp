// sys::PriorityBoost (around BPF verification): raises the calling thread's priority from
// nice 0 only, restores it after, and leaves a thread already under `nice` alone. Each case
// runs on its own thread (PRIO_PROCESS with a tid is per thread), so the test runner keeps
// its own nice value.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <thread>

#include "sys/priority.h"

namespace pbp {
namespace {

int my_nice() { return getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())); }

TEST(PriorityBoost, RaisedFromNiceZeroAndRestored) {
    if (geteuid() != 0) GTEST_SKIP() << "raising a priority needs CAP_SYS_NICE (root)";
    int before = 99, during = 99, after = 99, main_during = 99;
    bool raised = false;
    const int main_nice = my_nice();
    std::thread([&] {
        setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 0);
        before = my_nice();
        {
            sys::PriorityBoost b(-10);
            raised = b.raised();
            during = my_nice();
            main_during = getpriority(PRIO_PROCESS, static_cast<id_t>(getpid()));
        }
        after = my_nice();
    }).join();
    EXPECT_EQ(before, 0);
    EXPECT_TRUE(raised);
    EXPECT_EQ(during, -10);
    EXPECT_EQ(after, 0);
    EXPECT_EQ(main_during, main_nice) << "only the calling thread";
}

TEST(PriorityBoost, AThreadUnderNiceKeepsIt) {
    int during = 99, after = 99;
    bool raised = true;
    std::thread([&] {
        ASSERT_EQ(setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 5), 0);
        {
            sys::PriorityBoost b(-10);
            raised = b.raised();
            during = my_nice();
        }
        after = my_nice();
    }).join();
    EXPECT_FALSE(raised);
    EXPECT_EQ(during, 5);
    EXPECT_EQ(after, 5);
}

}  // namespace
}  // namespace pbp
