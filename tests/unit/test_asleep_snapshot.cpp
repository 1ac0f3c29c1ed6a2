// AsleepSnapshot (engine/asleep_snapshot.h): which threads slept since a wall session's start,
// and the guard against a PID reused by another process (issue 15).
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "engine/asleep_snapshot.h"
#include "sys/clock.h"
#include "sys/procfs.h"

namespace pbp {
namespace {

constexpr uint64_t kAt = 5'000'000'000ULL, kTicks = 1000;

AsleepSnapshot snapshot() {
    AsleepSnapshot s;
    s.add(100, 100, 'S', 7);   // a process's main thread, asleep
    s.add(100, 101, 'D', 3);   // another of its threads, waiting for I/O
    s.add(200, 200, 'S', 12);  // a process that is never a target
    s.stamp(kAt, kTicks);
    return s;
}

TEST(AsleepSnapshot, AThreadStillAsleepWithTheSameCountSleptSinceTheSnapshot) {
    const AsleepSnapshot s = snapshot();
    int asked = 0;
    auto started_before = [&] { return asked++, kTicks - 10; };
    EXPECT_EQ(s.asleep_since(100, 100, 'S', 7, started_before), kAt);
    EXPECT_EQ(s.asleep_since(100, 101, 'D', 3, started_before), kAt);
    // It ran since: another count, another state; or it is not in the snapshot, or is another
    // process's thread. The start is not asked for then.
    asked = 0;
    EXPECT_FALSE(s.asleep_since(100, 100, 'S', 8, started_before));
    EXPECT_FALSE(s.asleep_since(100, 100, 'D', 7, started_before));
    EXPECT_FALSE(s.asleep_since(100, 102, 'S', 7, started_before));
    EXPECT_FALSE(s.asleep_since(300, 100, 'S', 7, started_before));
    EXPECT_EQ(asked, 0);
}

// A PID reused: process 200 exited unseen (it was never a target: no exit removed its
// entries), and a new process got PID 200 and a thread 200 asleep with the same state and
// count. It started after the snapshot: not seeded from it. A process started at the same
// tick as the snapshot (ticks are 10 ms) is taken as the one it was of.
TEST(AsleepSnapshot, APidReusedAfterTheSnapshotIsNotSeededFromIt) {
    const AsleepSnapshot s = snapshot();
    EXPECT_FALSE(s.asleep_since(200, 200, 'S', 12, [] { return kTicks + 1; }));
    EXPECT_EQ(s.asleep_since(200, 200, 'S', 12, [] { return kTicks; }), kAt);
    // A start that cannot be read (the process is gone) counts as after.
    EXPECT_FALSE(s.asleep_since(200, 200, 'S', 12, [] { return UINT64_MAX; }));
}

TEST(AsleepSnapshot, ATargetThatExitsIsForgotten) {
    AsleepSnapshot s = snapshot();
    s.forget(100);
    EXPECT_EQ(s.size(), 1u);
    EXPECT_FALSE(s.asleep_since(100, 100, 'S', 7, [] { return kTicks; }));
    EXPECT_EQ(s.asleep_since(200, 200, 'S', 12, [] { return kTicks; }), kAt);
}

// take() reads /proc: a thread of this process blocked in sleep is in it, asleep, and the
// snapshot is stamped after the reads.
TEST(AsleepSnapshot, TakeReadsTheThreadsAsleepNow) {
    std::thread sleeper([] { usleep(500000); });
    usleep(100000);
    const uint64_t before = mono_ns();
    AsleepSnapshot s;
    EXPECT_GE(s.take({getpid()}), 2u);
    sleeper.join();
    EXPECT_GE(s.mono_ns(), before);
    EXPECT_GE(s.size(), 1u) << "the sleeping thread";
}

}  // namespace
}  // namespace pbp
