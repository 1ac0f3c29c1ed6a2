// The asyncio task reader (cpython/asyncio.h) on synthetic memory: the AsyncioDebug section
// decoded (the bytes of Debian's 3.14 _asyncio module) and refused when implausible; task names
// (str, and the int asyncio counts unnamed tasks with); and hostile memory: task rings that
// never come back to their head, awaiter sets with absurd sizes, garbage names. Everything ends.
#include <cstring>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "cpython/asyncio.h"
#include "cpython/layout.h"
#include "sys/target_memory.h"

using namespace pbp::cpython;

namespace {

class FakeMemory final : public pbp::MemoryReader {
public:
    void put(uint64_t addr, const std::vector<uint8_t>& b) { regions_[addr] = b; }
    void put_u64(uint64_t addr, uint64_t v) {
        std::vector<uint8_t> b(8);
        std::memcpy(b.data(), &v, 8);
        put(addr, b);
    }
    bool read(uint64_t addr, void* buf, size_t n) override {
        // Reads may span adjacent regions (put_u64 makes many small ones).
        auto* out = static_cast<uint8_t*>(buf);
        for (size_t done = 0; done < n;) {
            bool found = false;
            for (auto& [base, b] : regions_)
                if (addr + done >= base && addr + done < base + b.size()) {
                    size_t k = std::min<size_t>(n - done, base + b.size() - (addr + done));
                    std::memcpy(out + done, b.data() + (addr + done - base), k);
                    done += k;
                    found = true;
                    break;
                }
            if (!found) return false;
        }
        return true;
    }

private:
    std::map<uint64_t, std::vector<uint8_t>> regions_;
};

// Debian's python3.14 _asyncio module, its AsyncioDebug section as bytes (13 u64).
std::vector<uint8_t> section314() {
    const uint64_t v[13] = {168, 136, 96, 108, 109, 128, 152, 225864, 10880, 936, 864, 872, 880};
    std::vector<uint8_t> b(sizeof v);
    std::memcpy(b.data(), v, sizeof v);
    return b;
}

struct Fixture {
    Layout lay;
    AsyncioOffsets ao;
    pbp_proc proc{};
    FakeMemory mem;
    static constexpr uint64_t kLongType = 0x1000, kStrType = 0x2000, kOtherType = 0x3000;

    Fixture() {
        lay = *builtin_layout(Version::from_hex(0x030C01F0), false);  // 3.12's str layout
        lay.version = Version::from_hex(0x030E0AF0);                 // read as 3.14
        auto& o = lay.async_objects;
        o.known = true;
        o.ob_type = 8;
        o.tp_flags = 168;
        o.long_lv_tag = 16;
        o.long_ob_digit = 24;
        o.set_used = 24;
        o.set_mask = 32;
        o.set_table = 40;
        o.gen_iframe = 64;
        o.gen_frame_state = 43;
        o.frame_stackpointer = 56;
        o.llist_next = 0;
        std::string err;
        ao = *decode_asyncio_offsets(section314(), err);
        mem.put_u64(kLongType + 168, 1ull << 24);
        mem.put_u64(kStrType + 168, 1ull << 28);
        mem.put_u64(kOtherType + 168, 0);
    }
    void int_object(uint64_t addr, uint32_t value) {
        std::vector<uint8_t> b(32, 0);
        std::memcpy(b.data() + 8, &kLongType, 8);
        uint64_t tag = value ? (1u << 3) : 1;  // one digit, positive; or zero
        std::memcpy(b.data() + 16, &tag, 8);
        std::memcpy(b.data() + 24, &value, 4);
        mem.put(addr, b);
    }
    void str_object(uint64_t addr, const std::string& s) {
        const ObjectLayout& l = lay.obj;
        std::vector<uint8_t> b(l.unicode_ascii_size + s.size() + 1, 0);
        std::memcpy(b.data() + 8, &kStrType, 8);
        int64_t len = static_cast<int64_t>(s.size());
        std::memcpy(b.data() + l.unicode_length, &len, 8);
        uint32_t state = (1u << l.state_kind_shift) | (1u << l.state_compact_bit) | (1u << l.state_ascii_bit);
        std::memcpy(b.data() + l.unicode_state, &state, 4);
        std::memcpy(b.data() + l.unicode_ascii_size, s.data(), s.size());
        mem.put(addr, b);
    }
    // A task object: is_task set, name at name_obj, awaited_by.
    void task(uint64_t addr, uint64_t name_obj, uint64_t awaited_by = 0, bool by_set = false) {
        std::vector<uint8_t> b(ao.task_size, 0);
        b[ao.task_is_task] = 1;
        b[ao.task_awaited_by_is_set] = by_set;
        std::memcpy(b.data() + ao.task_name, &name_obj, 8);
        std::memcpy(b.data() + ao.task_awaited_by, &awaited_by, 8);
        mem.put(addr, b);
    }
};

TEST(AsyncioOffsets, DecodesTheSectionAndRefusesGarbage) {
    std::string err;
    auto a = decode_asyncio_offsets(section314(), err);
    ASSERT_TRUE(a) << err;
    EXPECT_EQ(a->task_name, 136u);
    EXPECT_EQ(a->task_node, 152u);
    EXPECT_EQ(a->tstate_running_task, 872u);
    EXPECT_EQ(a->interp_tasks_head, 10880u);
    auto bad = section314();
    const uint64_t far = 4096;  // task_name beyond the task's 168 bytes
    std::memcpy(bad.data() + 8, &far, 8);
    EXPECT_FALSE(decode_asyncio_offsets(bad, err));
    EXPECT_NE(err.find("implausible"), std::string::npos);
    EXPECT_FALSE(decode_asyncio_offsets(std::vector<uint8_t>(50, 0), err));
}

TEST(AsyncioReader, NamesAStrTaskAndAnIntOneAsPythonDoes) {
    Fixture f;
    AsyncioReader r(f.mem, f.lay, f.ao, f.proc);
    f.str_object(0x10000, "fetch-42");
    f.task(0x20000, 0x10000);
    f.int_object(0x11000, 7);
    f.task(0x21000, 0x11000);
    EXPECT_EQ(r.task_name(0x20000).value_or("?"), "fetch-42");
    EXPECT_EQ(r.task_name(0x21000).value_or("?"), "Task-7");
    // A name that is neither (a garbage type), or unreadable: no name, no task.
    f.mem.put_u64(0x12000 + 8, Fixture::kOtherType);
    f.task(0x22000, 0x12000);
    EXPECT_FALSE(r.task_name(0x22000));
    EXPECT_FALSE(r.task(0x22000));
    f.task(0x23000, 0xdead0000);
    EXPECT_FALSE(r.task(0x23000));
    // One awaiter, then a set of two (a deleted slot, the dummy, reads as no task).
    f.task(0x24000, 0x10000, 0x20000);
    EXPECT_EQ(r.awaited_by(0x24000), std::vector<uint64_t>{0x20000});
}

TEST(AsyncioReader, HostileMemoryEnds) {
    Fixture f;
    AsyncioReader r(f.mem, f.lay, f.ao, f.proc);
    // A thread state whose task ring never comes back to its head: node A -> B -> A.
    const uint64_t ts = 0x100000, a = 0x200000 + f.ao.task_node, b = 0x300000 + f.ao.task_node;
    f.mem.put_u64(ts + f.ao.tstate_tasks_head, a);
    f.mem.put_u64(a, b);
    f.mem.put_u64(b, a);
    auto tasks = r.list_tasks({ts}, {});
    EXPECT_EQ(tasks, (std::vector<uint64_t>{0x200000, 0x300000}));
    // The same ring reached from the interpreter too: each task once.
    const uint64_t interp = 0x400000;
    f.mem.put_u64(interp + f.ao.interp_tasks_head, b);
    EXPECT_EQ(r.list_tasks({ts}, {interp}).size(), 2u);

    // An awaiter "set" with an absurd table: nothing read, no huge allocation.
    const uint64_t set = 0x500000;
    f.mem.put_u64(set + 24, 5);             // used
    f.mem.put_u64(set + 32, (1ull << 40) - 1);  // mask
    f.mem.put_u64(set + 40, 0x600000);      // table
    f.str_object(0x10000, "x");
    f.task(0x700000, 0x10000, set, true);
    EXPECT_TRUE(r.awaited_by(0x700000).empty());
    // A sane set of 4 slots: two keys, one empty, used 2.
    f.mem.put_u64(set + 32, 3);
    f.mem.put_u64(set + 24, 2);
    std::vector<uint8_t> table(64, 0);
    const uint64_t k1 = 0x20000, k2 = 0x21000;
    std::memcpy(table.data() + 0, &k1, 8);
    std::memcpy(table.data() + 32, &k2, 8);
    f.mem.put(0x600000, table);
    EXPECT_EQ(r.awaited_by(0x700000), (std::vector<uint64_t>{k1, k2}));

    // A coroutine whose frame cannot be read as a code object's: an empty stack, not a loop.
    std::vector<uint8_t> coro(128, 0);
    f.mem.put(0x800000, coro);
    EXPECT_TRUE(r.coroutine_stack(0x800000).empty());
}

}  // namespace
