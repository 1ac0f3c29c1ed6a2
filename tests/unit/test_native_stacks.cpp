// native/native_stacks: the off-CPU captures kept as they came, until an interval needs one,
// stay bounded: 3 per thread, 32 MiB in all, none after their process is forgotten.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "engine/stack_store.h"
#include "engine/symbolizer.h"
#include "native/native_stacks.h"
#include "pybpfprof/abi.h"

using namespace pbp;

namespace {

// A whole-width off-CPU capture record of thread tid of this process, taken at ts (no
// registers: unwinding it gives nothing, quickly).
std::vector<uint8_t> capture(uint32_t tid, uint64_t ts) {
    std::vector<uint8_t> rec(PBP_NATIVE_HEADER_BYTES + PBP_NATIVE_USTACK_OFFCPU, 0);
    pbp_native_event h{};
    h.ts_ns = ts;
    h.type = PBP_EV_NATIVE;
    h.pid = static_cast<uint32_t>(getpid());
    h.tid = tid;
    h.flags = PBP_NATIVE_F_OFFCPU | PBP_NATIVE_F_KERNEL;
    h.ustack_len = PBP_NATIVE_USTACK_OFFCPU;
    std::memcpy(rec.data(), &h, PBP_NATIVE_HEADER_BYTES);
    return rec;
}

void feed(native::NativeStacks& ns, const std::vector<uint8_t>& rec) {
    ns.on_capture(*reinterpret_cast<const pbp_native_event*>(rec.data()), rec.size());
}

}  // namespace

TEST(NativeStacksOffCpu, RawCapturesAreBounded) {
    Symbolizer sym;
    StackStore store{sym, [](uint64_t, pbp_stack&) { return false; }};
    native::NativeStacks ns(store);
    const size_t one = PBP_NATIVE_HEADER_BYTES + PBP_NATIVE_USTACK_OFFCPU;

    // One thread: its last 3.
    for (uint64_t ts = 1; ts <= 5; ts++) feed(ns, capture(1000, ts));
    EXPECT_EQ(ns.offcpu_raw_bytes(), 3 * one);

    // 1000 threads of 64 KiB captures (66 MB): past 32 MiB, each is unwound as it comes.
    for (uint32_t tid = 2000; tid < 3000; tid++) {
        feed(ns, capture(tid, 7));
        ASSERT_LE(ns.offcpu_raw_bytes(), native::NativeStacks::kMaxRawBytes + one) << tid;
    }
    EXPECT_GE(ns.offcpu_raw_bytes(), native::NativeStacks::kMaxRawBytes - one);

    // An interval of one of them finds its capture, unwound now (no registers: nothing, so its
    // stack is marked "[native stack incomplete]"), which then holds no raw bytes; one of a
    // capture not kept (ts 1: one of the first two) keeps its plain stack.
    const size_t before = ns.offcpu_raw_bytes();
    pbp_event e{};
    e.type = PBP_EV_SAMPLE;
    e.kind = PBP_KIND_OFF_CPU;
    e.pid = static_cast<uint32_t>(getpid());
    e.tid = 1000;
    e.cpu_clock_ns = 5;
    const uint32_t plain = store.intern_stack({});
    const uint32_t merged = ns.offcpu_stack_for(e, plain, 0x030b00f0);
    EXPECT_NE(merged, plain);
    EXPECT_EQ(ns.offcpu_raw_bytes(), before - one);
    EXPECT_EQ(ns.offcpu_stack_for(e, plain, 0x030b00f0), merged);  // made once
    e.cpu_clock_ns = 1;
    EXPECT_EQ(ns.offcpu_stack_for(e, plain, 0x030b00f0), plain);

    ns.forget_process(getpid());
    EXPECT_EQ(ns.offcpu_raw_bytes(), 0u);
}
