// Wall mode's slot table, userspace's half (engine/offcpu_table.h), on plain memory: where seeds
// go, what entries() and forget() see, and the claim protocol under contention. BPF's half is
// tested end to end by tests/integration/test_wall.cpp (WallSharedSlot).
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "engine/offcpu_table.h"

namespace {

using pbp::OffcpuTable;

struct Table {
    explicit Table(uint32_t n) : slots(n), t(slots.data(), n) {}
    std::vector<pbp_offcpu_slot> slots;
    OffcpuTable t;
};

pbp_offcpu entry(uint32_t tgid, uint64_t out_ns = 0) {
    pbp_offcpu e{};
    e.tgid = tgid;
    e.out_ns = out_ns;
    return e;
}

uint32_t slot_of(const Table& tb, uint32_t tid) {
    for (uint32_t i = 0; i < tb.slots.size(); i++)
        if (tb.slots[i].tid == tid) return i;
    return UINT32_MAX;
}

TEST(OffcpuTable, SeedGoesHomeWhenFree) {
    Table tb(16);
    EXPECT_TRUE(tb.t.seed(35, entry(7, 111)));
    EXPECT_EQ(slot_of(tb, 35), 35u & 15);
    EXPECT_EQ(tb.slots[35 & 15].claims, 1u);
    EXPECT_EQ(tb.slots[35 & 15].spill, 0u);
    auto es = tb.t.entries(7);
    ASSERT_EQ(es.size(), 1u);
    EXPECT_EQ(es[0].first, 35u);
    EXPECT_EQ(es[0].second.out_ns, 111u);
    EXPECT_TRUE(tb.t.entries(8).empty());
}

TEST(OffcpuTable, HomeTakenGoesAlongTheProbeSequenceAndCountsTheSpill) {
    Table tb(16);
    // 3, 19, 35, 51: one home (3); the probe sequence of a 16-slot table is 3, 4, 5, 6.
    for (uint32_t tid : {3u, 19u, 35u, 51u}) EXPECT_TRUE(tb.t.seed(tid, entry(7))) << tid;
    std::set<uint32_t> at;
    for (uint32_t tid : {3u, 19u, 35u, 51u}) {
        uint32_t i = slot_of(tb, tid);
        ASSERT_NE(i, UINT32_MAX) << tid;
        at.insert(i);
    }
    EXPECT_EQ(at, (std::set<uint32_t>{3, 4, 5, 6}));
    EXPECT_EQ(slot_of(tb, 3), 3u);  // the first seeded has its home
    EXPECT_EQ(tb.slots[3].spill, 3u);
    EXPECT_EQ(tb.t.spilled(), 3u);
    EXPECT_EQ(tb.t.entries(7).size(), 4u);
    // A fifth has no slot left in its sequence: not tracked, said so, nothing half made.
    EXPECT_FALSE(tb.t.seed(67, entry(7)));
    EXPECT_EQ(tb.t.full(), 1u);
    EXPECT_EQ(tb.slots[3].spill, 3u);
    EXPECT_EQ(slot_of(tb, 67), UINT32_MAX);
}

TEST(OffcpuTable, AnEntryBpfMadeIsKept) {
    Table tb(16);
    // As the fork tracepoint's program leaves it: home slot held, tid written.
    pbp_offcpu_slot& s = tb.slots[5];
    s.claims = 1;
    s.e = entry(9, 42);
    s.tid = 5;
    EXPECT_FALSE(tb.t.seed(5, entry(9, 1000)));
    EXPECT_EQ(s.e.out_ns, 42u);
    EXPECT_EQ(s.claims, 1u);
}

TEST(OffcpuTable, ForgetLeavesEntriesDormantAndASeedRevivesThem) {
    Table tb(16);
    ASSERT_TRUE(tb.t.seed(4, entry(7, 100)));
    ASSERT_TRUE(tb.t.seed(20, entry(7, 200)));  // home 4 taken: next in its sequence
    ASSERT_TRUE(tb.t.seed(6, entry(8, 300)));
    tb.t.forget(7);
    EXPECT_TRUE(tb.t.entries(7).empty());
    ASSERT_EQ(tb.t.entries(8).size(), 1u);  // another process's untouched
    // Dormant: still held (only BPF frees), nothing pending, no process.
    const uint32_t i = slot_of(tb, 20);
    ASSERT_NE(i, UINT32_MAX);
    EXPECT_EQ(tb.slots[i].e.tgid, 0u);
    EXPECT_EQ(tb.slots[i].e.out_ns, 0u);
    EXPECT_EQ(tb.slots[i].claims, 1u);
    EXPECT_EQ(tb.slots[4].spill, 1u);
    // The same thread's process a target again: its dormant entry is replaced, where it is.
    EXPECT_TRUE(tb.t.seed(20, entry(7, 500)));
    EXPECT_EQ(slot_of(tb, 20), i);
    auto es = tb.t.entries(7);
    ASSERT_EQ(es.size(), 1u);
    EXPECT_EQ(es[0].first, 20u);
    EXPECT_EQ(es[0].second.out_ns, 500u);
}

TEST(OffcpuTable, AFreedSlotIsTakenAgain) {
    Table tb(16);
    ASSERT_TRUE(tb.t.seed(2, entry(7)));
    pbp_offcpu_slot& s = tb.slots[2];
    OffcpuTable::release(s);  // as BPF's offcpu_free at the thread's exit
    EXPECT_EQ(s.tid, 0u);
    EXPECT_EQ(s.claims, 0u);
    EXPECT_TRUE(tb.t.seed(18, entry(7)));
    EXPECT_EQ(slot_of(tb, 18), 2u);
    EXPECT_EQ(tb.slots[2].spill, 0u);
}

TEST(OffcpuTable, ClearFreesEverySlot) {
    Table tb(16);
    for (uint32_t tid : {3u, 19u, 35u, 8u}) ASSERT_TRUE(tb.t.seed(tid, entry(7)));
    tb.t.forget(7);
    tb.t.clear();
    for (auto& s : tb.slots) {
        EXPECT_EQ(s.tid, 0u);
        EXPECT_EQ(s.claims, 0u);
        EXPECT_EQ(s.spill, 0u);
    }
    EXPECT_TRUE(tb.t.seed(19, entry(9)));
    EXPECT_EQ(slot_of(tb, 19), 3u);
}

// Many claimants at once on one slot: never two holders at a time, and every claim that was
// given up leaves no trace (the count back to 0 once all are done).
TEST(OffcpuTable, ClaimsNeverGiveTwoHolders) {
    pbp_offcpu_slot s{};
    std::atomic<int> holders{0}, most{0};
    std::atomic<long> held{0};
    std::vector<std::thread> ts;
    for (int k = 0; k < 4; k++)
        ts.emplace_back([&, k] {
            for (int i = 0; i < 200000; i++) {
                if (!OffcpuTable::claim(s)) continue;
                const int now = ++holders;
                int m = most.load();
                while (now > m && !most.compare_exchange_weak(m, now)) {
                }
                __atomic_store_n(&s.tid, uint32_t(k + 1), __ATOMIC_RELEASE);
                held++;
                --holders;
                OffcpuTable::release(s);
            }
        });
    for (auto& t : ts) t.join();
    EXPECT_EQ(most.load(), 1);
    EXPECT_GT(held.load(), 0);
    EXPECT_EQ(s.claims, 0u);
    EXPECT_EQ(s.tid, 0u);
}

}  // namespace
