// read_unicode / read_bytes: against real interpreters (every one on the machine) and
// against synthetic objects in a fake address space.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "cpython/layout.h"
#include "cpython/objects.h"
#include "cpython/thread_names.h"
#include "targets/discovery.h"
#include "sys/target_memory.h"
#include "test_support.h"

using namespace pbp::cpython;
using pbp::test::Interpreter;

namespace {

// ---- synthetic ----------------------------------------------------------------------------

class FakeMemory final : public pbp::MemoryReader {
public:
    void put(uint64_t addr, const std::vector<uint8_t>& b) { regions_[addr] = b; }
    bool read(uint64_t addr, void* buf, size_t n) override {
        for (auto& [base, b] : regions_) {
            if (addr >= base && addr + n <= base + b.size()) {
                std::memcpy(buf, b.data() + (addr - base), n);
                return true;
            }
        }
        return false;
    }

private:
    std::map<uint64_t, std::vector<uint8_t>> regions_;
};

ObjectLayout layout312() {
    auto l = builtin_layout(Version::from_hex(0x030C01F0), false);
    return l->obj;
}

// A compact str object as CPython 3.12 lays it out (PyASCIIObject 40 bytes, compact 56).
std::vector<uint8_t> make_str(const ObjectLayout& lay, std::vector<uint32_t> cps, unsigned kind, bool ascii,
                              bool compact = true, bool terminate = true,
                              std::optional<int64_t> length = std::nullopt) {
    size_t hdr = ascii ? lay.unicode_ascii_size : lay.unicode_compact_size;
    std::vector<uint8_t> b(hdr + (cps.size() + 1) * kind, 0);
    int64_t len = length ? *length : static_cast<int64_t>(cps.size());
    std::memcpy(b.data() + lay.unicode_length, &len, 8);
    uint32_t state = (kind << lay.state_kind_shift) | (uint32_t(compact) << lay.state_compact_bit) |
                     (uint32_t(ascii) << lay.state_ascii_bit);
    std::memcpy(b.data() + lay.unicode_state, &state, 4);
    if (!terminate) cps.push_back(0x41);
    for (size_t i = 0; i < cps.size(); i++) {
        if (kind == 1) b[hdr + i] = static_cast<uint8_t>(cps[i]);
        if (kind == 2) {
            uint16_t c = static_cast<uint16_t>(cps[i]);
            std::memcpy(b.data() + hdr + 2 * i, &c, 2);
        }
        if (kind == 4) std::memcpy(b.data() + hdr + 4 * i, &cps[i], 4);
    }
    return b;
}

TEST(ObjectsUnicodeSynthetic, Kinds) {
    auto lay = layout312();
    FakeMemory m;
    m.put(0x1000, make_str(lay, {'h', 'i'}, 1, true));
    m.put(0x2000, make_str(lay, {'c', 'a', 'f', 0xE9}, 1, false));
    m.put(0x3000, make_str(lay, {0x41F, 0x440}, 2, false));
    m.put(0x4000, make_str(lay, {0x1F600, 'x'}, 4, false));
    m.put(0x5000, make_str(lay, {}, 1, true));
    EXPECT_EQ(read_unicode(m, lay, 0x1000), "hi");
    EXPECT_EQ(read_unicode(m, lay, 0x2000), "caf\xc3\xa9");
    EXPECT_EQ(read_unicode(m, lay, 0x3000), "\xd0\x9f\xd1\x80");
    EXPECT_EQ(read_unicode(m, lay, 0x4000), "\xf0\x9f\x98\x80x");
    EXPECT_EQ(read_unicode(m, lay, 0x5000), "");
}

TEST(ObjectsUnicodeSynthetic, LoneSurrogateBecomesReplacementChar) {
    auto lay = layout312();
    FakeMemory m;
    m.put(0x1000, make_str(lay, {'a', 0xD800, 'b'}, 2, false));
    EXPECT_EQ(read_unicode(m, lay, 0x1000), "a\xef\xbf\xbd" "b");
}

TEST(ObjectsUnicodeSynthetic, RefusesImplausible) {
    auto lay = layout312();
    FakeMemory m;
    m.put(0x1000, make_str(lay, {'a', 'b'}, 1, true, /*compact=*/false));
    m.put(0x2000, make_str(lay, {'a', 'b'}, 3, false));                  // no such kind
    m.put(0x3000, make_str(lay, {'a', 0x80}, 1, true));                  // 'ascii' with a non-ASCII byte
    m.put(0x4000, make_str(lay, {0x110000}, 4, false));                  // beyond U+10FFFF
    m.put(0x5000, make_str(lay, {'a', 'b'}, 1, true, true, /*terminate=*/false));
    m.put(0x6000, make_str(lay, {'a', 'b'}, 1, true, true, true, /*length=*/-5));
    m.put(0x7000, make_str(lay, {'a', 'b'}, 1, true, true, true, /*length=*/1000));  // data unreadable
    m.put(0x8000, make_str(lay, {0x41F}, 2, true));                      // 'ascii' but kind 2
    for (uint64_t a : {0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 0x8000})
        EXPECT_FALSE(read_unicode(m, lay, a).has_value()) << std::hex << a;
    EXPECT_FALSE(read_unicode(m, lay, 0).has_value());
    EXPECT_FALSE(read_unicode(m, lay, 0x1004).has_value());  // misaligned
    EXPECT_FALSE(read_unicode(m, lay, 0x9000).has_value());  // unmapped
}

TEST(ObjectsUnicodeSynthetic, MaxLen) {
    auto lay = layout312();
    FakeMemory m;
    std::vector<uint32_t> cps(100, 'z');
    m.put(0x1000, make_str(lay, cps, 1, true));
    EXPECT_FALSE(read_unicode(m, lay, 0x1000, 99).has_value());
    EXPECT_EQ(read_unicode(m, lay, 0x1000, 100), std::string(100, 'z'));
}

TEST(ObjectsUnicodeSynthetic, FreeThreaded314StateBits) {
    // 3.14 free-threaded: PyObject is 32 bytes; 'unsigned char interned' puts kind at bit 8.
    ObjectLayout lay;
    lay.unicode_length = 32;
    lay.unicode_state = 48;
    lay.unicode_ascii_size = 56;
    lay.unicode_compact_size = 72;
    lay.state_kind_shift = 8;
    lay.state_compact_bit = 11;
    lay.state_ascii_bit = 12;
    FakeMemory m;
    m.put(0x1000, make_str(lay, {0x65E5, 0x672C}, 2, false));
    m.put(0x2000, make_str(lay, {'o', 'k'}, 1, true));
    EXPECT_EQ(read_unicode(m, lay, 0x1000), "\xe6\x97\xa5\xe6\x9c\xac");
    EXPECT_EQ(read_unicode(m, lay, 0x2000), "ok");
    // the same bytes read with the default-build bit positions are refused, not misread
    ObjectLayout wrong = lay;
    wrong.state_kind_shift = 2;
    wrong.state_compact_bit = 5;
    wrong.state_ascii_bit = 6;
    EXPECT_FALSE(read_unicode(m, wrong, 0x1000).has_value());
}

TEST(ObjectsBytesSynthetic, Basic) {
    auto lay = layout312();
    FakeMemory m;
    auto make = [&](const std::string& s, int64_t size, bool nul) {
        std::vector<uint8_t> b(lay.bytes_sval + s.size() + 1, 0);
        std::memcpy(b.data() + lay.bytes_size, &size, 8);
        std::memcpy(b.data() + lay.bytes_sval, s.data(), s.size());
        b.back() = nul ? 0 : 'X';
        return b;
    };
    m.put(0x1000, make(std::string("a\0b", 3), 3, true));
    m.put(0x2000, make("", 0, true));
    m.put(0x3000, make("abc", -1, true));
    m.put(0x4000, make("abc", 3, false));
    EXPECT_EQ(read_bytes(m, lay, 0x1000), std::string("a\0b", 3));
    EXPECT_EQ(read_bytes(m, lay, 0x2000), "");
    EXPECT_FALSE(read_bytes(m, lay, 0x3000).has_value());
    EXPECT_FALSE(read_bytes(m, lay, 0x4000).has_value());
    EXPECT_FALSE(read_bytes(m, lay, 0x1000, 2).has_value());
    EXPECT_FALSE(read_bytes(m, lay, 0x5000).has_value());
}

// ---- live interpreters --------------------------------------------------------------------

std::vector<uint64_t> numbers(const std::string& line) {
    std::vector<uint64_t> v;
    std::istringstream is(line);
    for (uint64_t x; is >> x;) v.push_back(x);
    return v;
}

// Built from code points so that no interpreter (3.6 in a C locale included) has to decode
// non-ASCII source text.
const char* const kScript = R"PY(
import ctypes, sys, time
try:
    rt = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
except ValueError:
    rt = 0
def s(*cps):
    return "".join(chr(c) for c in cps)
strs = [
    s(0x68, 0x65, 0x6C, 0x6C, 0x6F),
    s(0x63, 0x61, 0x66, 0xE9),
    s(0x41F, 0x440, 0x438, 0x432, 0x435, 0x442),
    s(0x65E5, 0x672C, 0x8A9E),
    s(0x192, 0x20BB7, 0x6E, 0x63),
    s(0x1F600, 0x78),
    s(),
    "a" * 5000,
]
FN = s(0x192, 0x20BB7, 0x6E, 0x63)
ns = {}
exec("def " + FN + "():\n    pass\n", ns)
code = ns[FN].__code__
class Sub(str):
    pass
legacy = Sub("abc")
bs = [b"", b"\x00\x01abc\xff", bytes(bytearray(range(256)))]
print(sys.hexversion, rt)
print(" ".join(str(id(x)) for x in strs))
print(id(code), id(legacy))
print(" ".join(str(id(x)) for x in bs))
sys.stdout.flush()
time.sleep(600)
)PY";

class ObjectsLive : public testing::TestWithParam<Interpreter> {};

TEST_P(ObjectsLive, ReadsStringsAndBytes) {
    const Interpreter& in = GetParam();
    pbp::test::Reporter p(pbp::test::with_args(in.argv, {"-c", kScript}));
    auto lines = p.read_lines(4);
    PBP_REQUIRE(lines.size() >= 4, in.name + " did not report its objects: " + p.err());
    auto head = numbers(lines[0]), strs = numbers(lines[1]), objs = numbers(lines[2]),
         bytes = numbers(lines[3]);
    ASSERT_EQ(head.size(), 2u);
    ASSERT_EQ(strs.size(), 8u);
    ASSERT_EQ(objs.size(), 2u);
    ASSERT_EQ(bytes.size(), 3u);

    pbp::ProcessMemory mem(p.pid());
    Version v = Version::from_hex(static_cast<uint32_t>(head[0]));
    std::optional<Layout> l;
    if (v.at_least(3, 13)) {
        std::vector<uint8_t> raw(kDebugOffsetsReadSize);
        ASSERT_TRUE(mem.read(head[1], raw.data(), raw.size())) << "cannot read _PyRuntime";
        std::string err, warn;
        l = layout_from_debug_offsets(raw, err, warn);
        ASSERT_TRUE(l) << err;
    } else {
        l = builtin_layout(v, false);
        ASSERT_TRUE(l) << v.str();
    }
    const ObjectLayout& lay = l->obj;
    SCOPED_TRACE(in.name + " " + l->source);

    const char* want[] = {
        "hello",
        "caf\xc3\xa9",
        "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",  // Privet
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",              // nihongo
        "\xc6\x92\xf0\xa0\xae\xb7nc",                        // f-hook, U+20BB7, n, c
        "\xf0\x9f\x98\x80x",                                 // emoji, x
        "",
    };
    for (size_t i = 0; i < std::size(want); i++)
        EXPECT_EQ(read_unicode(mem, lay, strs[i]), std::string(want[i])) << "string " << i;
    // 5000 code points: refused by default (4096), read in full with a larger limit
    EXPECT_FALSE(read_unicode(mem, lay, strs[7]).has_value());
    EXPECT_EQ(read_unicode(mem, lay, strs[7], 10000), std::string(5000, 'a'));

    // a non-ASCII identifier through the code object's fields
    uint64_t code = objs[0], name = 0, filename = 0;
    ASSERT_TRUE(mem.read_value(code + lay.co_name, name));
    ASSERT_TRUE(mem.read_value(code + lay.co_filename, filename));
    EXPECT_EQ(read_unicode(mem, lay, name), std::string(want[4]));
    EXPECT_EQ(read_unicode(mem, lay, filename), "<string>");
    if (lay.co_qualname != PBP_OFF_NONE) {
        uint64_t qualname = 0;
        ASSERT_TRUE(mem.read_value(code + lay.co_qualname, qualname));
        EXPECT_EQ(read_unicode(mem, lay, qualname), std::string(want[4]));
    }
    // a str subclass instance is not compact: refused
    EXPECT_FALSE(read_unicode(mem, lay, objs[1]).has_value());

    EXPECT_EQ(read_bytes(mem, lay, bytes[0]), "");
    EXPECT_EQ(read_bytes(mem, lay, bytes[1]), std::string("\x00\x01" "abc\xff", 6));
    std::string all(256, '\0');
    for (int i = 0; i < 256; i++) all[i] = static_cast<char>(i);
    EXPECT_EQ(read_bytes(mem, lay, bytes[2]), all);
    EXPECT_FALSE(read_bytes(mem, lay, bytes[2], 255).has_value());
}

// ---- ints, dicts and instance attributes (thread names) -----------------------------------

TEST(ObjectsDictSynthetic, GarbageIsRefusedWithoutHangingOrHugeReads) {
    // Random bytes everywhere a dict, its keys or an int could be: every reader answers
    // (false / nullopt / 0), and no read asks for more than the caps allow.
    struct Counting final : pbp::MemoryReader {
        std::vector<uint8_t> bytes;
        uint64_t base = 0x10000;
        size_t biggest = 0;
        bool read(uint64_t addr, void* buf, size_t n) override {
            biggest = std::max(biggest, n);
            if (addr < base || addr + n > base + bytes.size()) return false;
            std::memcpy(buf, bytes.data() + (addr - base), n);
            return true;
        }
    } m;
    uint64_t seed = 42;
    auto rnd = [&] { return seed = seed * 6364136223846793005ULL + 1442695040888963407ULL; };
    for (bool py311 : {false, true}) {
        ObjectLayout lay = builtin_layout(Version::from_hex(py311 ? 0x030C01F0 : 0x030A0DF0), false)->obj;
        for (int round = 0; round < 2000; round++) {
            m.bytes.assign(4096, 0);
            for (auto& b : m.bytes) b = static_cast<uint8_t>(rnd() >> 56);
            // pointers that land inside the region, so the readers go deeper than the first read
            for (int i = 0; i < 64; i++) {
                uint64_t p = m.base + (rnd() % 4000 & ~7ULL);
                std::memcpy(m.bytes.data() + (rnd() % 4088 & ~7ULL), &p, 8);
            }
            const uint64_t obj = m.base + (rnd() % 2048 & ~7ULL);
            std::vector<DictItem> items;
            read_dict_items(m, lay, obj, items, 1 << 10);
            EXPECT_LE(items.size(), 1u << 10);
            read_uint(m, lay, obj);
            read_instance_attr(m, lay, obj, "_name");
        }
    }
    EXPECT_LE(m.biggest, size_t(1 << 10) * 24) << "a read beyond what max_items allows";
}

const char* const kObjScript = R"PY(
import ctypes, sys, time
try:
    rt = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
except ValueError:
    rt = 0
def s(*cps):
    return "".join(chr(c) for c in cps)
ints = [0, 1, 2**30 - 1, 2**30, 2**60 + 5, 2**64 - 1, 140234567891234]
bad_ints = [-5, 2**64, 2**100]
by_str = {"alpha": 1, "beta": 2, s(0x8A08, 0x7B97): 3}
by_int = {10: "x", 2**40: "y", 3: "z", 2**61 + 7: "w", 2**64 - 1: "v", 2**61 - 1: "u"}
holes = {"k%d" % i: i for i in range(40)}
for i in range(0, 40, 3):
    del holes["k%d" % i]
big = {"n%d" % i: i for i in range(3000)}
class T(object):
    def __init__(self, name):
        self._target = None
        self._name = name
        self._ident = 7
class Many(object):
    pass
class Slots(object):
    __slots__ = ("_name",)
plain = T(s(0x6B, 0x69, 0x6C, 0x6E))
materialized = T("mat")
materialized.__dict__["extra"] = 1
renamed = T("old")
renamed._name = s(0x72, 0xE9)
many = Many()
for i in range(60):
    setattr(many, "a%d" % i, i)
many._name = "many"
deleted = T("gone")
del deleted._name
slotted = Slots()
slotted._name = "slot"
print(sys.hexversion, rt)
print(" ".join(str(id(x)) for x in ints))
print(" ".join(str(id(x)) for x in bad_ints))
print(id(by_str), id(by_int), id(holes), id(big))
print(id(plain), id(materialized), id(renamed), id(many), id(deleted), id(slotted))
sys.stdout.flush()
time.sleep(600)
)PY";

TEST_P(ObjectsLive, ReadsIntsDictsAndInstanceAttributes) {
    const Interpreter& in = GetParam();
    pbp::test::Reporter p(pbp::test::with_args(in.argv, {"-c", kObjScript}));
    auto lines = p.read_lines(5);
    PBP_REQUIRE(lines.size() >= 5, in.name + " did not report its objects: " + p.err());
    auto head = numbers(lines[0]), ints = numbers(lines[1]), bad = numbers(lines[2]), dicts = numbers(lines[3]),
         objs = numbers(lines[4]);
    ASSERT_EQ(ints.size(), 7u);
    ASSERT_EQ(dicts.size(), 4u);
    ASSERT_EQ(objs.size(), 6u);
    pbp::ProcessMemory mem(p.pid());
    Version v = Version::from_hex(static_cast<uint32_t>(head[0]));
    std::optional<Layout> l;
    if (v.at_least(3, 13)) {
        std::vector<uint8_t> raw(kDebugOffsetsReadSize);
        ASSERT_TRUE(mem.read(head[1], raw.data(), raw.size()));
        std::string err, warn;
        l = layout_from_debug_offsets(raw, err, warn);
        ASSERT_TRUE(l) << err;
    } else {
        l = builtin_layout(v, false);
    }
    ASSERT_TRUE(l);
    const ObjectLayout& lay = l->obj;
    SCOPED_TRACE(in.name + " " + l->source);
    ASSERT_NE(lay.interp_modules, PBP_OFF_NONE) << "no thread-name offsets";

    const uint64_t want_ints[] = {0, 1, (1u << 30) - 1, 1u << 30, (1ULL << 60) + 5, ~0ULL, 140234567891234ULL};
    for (size_t i = 0; i < 7; i++) EXPECT_EQ(read_uint(mem, lay, ints[i]), want_ints[i]) << "int " << i;
    for (uint64_t b : bad) EXPECT_FALSE(read_uint(mem, lay, b).has_value());

    std::vector<DictItem> items;
    ASSERT_TRUE(read_dict_items(mem, lay, dicts[0], items));
    ASSERT_EQ(items.size(), 3u);
    EXPECT_EQ(read_unicode(mem, lay, items[0].key), "alpha");
    EXPECT_EQ(read_unicode(mem, lay, items[2].key), "\xe8\xa8\x88\xe7\xae\x97");
    EXPECT_EQ(read_uint(mem, lay, dict_lookup_str(mem, lay, items, "beta")), 2u);
    EXPECT_EQ(dict_lookup_str(mem, lay, items, "gamma"), 0u);

    ASSERT_TRUE(read_dict_items(mem, lay, dicts[1], items));
    ASSERT_EQ(items.size(), 6u);
    EXPECT_EQ(read_uint(mem, lay, items[1].key), 1ULL << 40);
    EXPECT_EQ(read_unicode(mem, lay, items[1].value), "y");
    // An int-keyed dict keeps each key's hash: thread naming skips keys by it (int_hash must be
    // CPython's, past 2**61 - 1 too, or a wanted thread would be skipped and stay unnamed).
    for (const auto& it : items) {
        auto k = read_uint(mem, lay, it.key);
        ASSERT_TRUE(k.has_value());
        ASSERT_TRUE(it.has_hash) << *k;
        EXPECT_EQ(it.hash, int_hash(*k)) << *k;
    }
    EXPECT_EQ(int_hash((1ULL << 61) + 7), 8u);
    EXPECT_EQ(int_hash(~0ULL), 7u);
    EXPECT_EQ(int_hash((1ULL << 61) - 1), 0u);

    ASSERT_TRUE(read_dict_items(mem, lay, dicts[2], items));  // deleted entries are skipped
    ASSERT_EQ(items.size(), 26u);
    EXPECT_EQ(read_unicode(mem, lay, items[0].key), "k1");
    EXPECT_EQ(read_uint(mem, lay, dict_lookup_str(mem, lay, items, "k38")), 38u);
    EXPECT_EQ(dict_lookup_str(mem, lay, items, "k39"), 0u);

    ASSERT_TRUE(read_dict_items(mem, lay, dicts[3], items));
    EXPECT_EQ(items.size(), 3000u);
    EXPECT_FALSE(read_dict_items(mem, lay, dicts[3], items, 1000)) << "more entries than allowed";

    auto attr = [&](uint64_t obj) { return read_unicode(mem, lay, read_instance_attr(mem, lay, obj, "_name")); };
    EXPECT_EQ(attr(objs[0]), "kiln");
    EXPECT_EQ(attr(objs[1]), "mat") << "an instance whose __dict__ was used";
    EXPECT_EQ(attr(objs[2]), "r\xc3\xa9") << "the latest value";
    EXPECT_EQ(attr(objs[3]), "many") << "more attributes than shared keys hold";
    EXPECT_EQ(read_instance_attr(mem, lay, objs[4], "_name"), 0u) << "a deleted attribute";
    EXPECT_EQ(read_instance_attr(mem, lay, objs[5], "_name"), 0u) << "slots are not instance attributes";
    EXPECT_EQ(read_uint(mem, lay, read_instance_attr(mem, lay, objs[0], "_ident")), 7u);
}

// ---- thread names: a few wanted among many ---------------------------------------------------

class CountingMemory final : public pbp::MemoryReader {
public:
    explicit CountingMemory(pid_t pid) : mem_(pid) {}
    bool read(uint64_t addr, void* buf, size_t n) override {
        reads++;
        return mem_.read(addr, buf, n);
    }
    size_t reads = 0;

private:
    pbp::ProcessMemory mem_;
};

const char* const kPoolScript = R"PY(
import sys, threading
threading.stack_size(256 * 1024)
go = threading.Event()
ts = [threading.Thread(target=go.wait, name="w-%d" % i) for i in range(300)]
for t in ts:
    t.start()
print(sys.hexversion)
print(" ".join("%d" % ts[i].ident for i in (0, 150, 299)))
sys.stdout.flush()
go.wait(600)
)PY";

// The naming tick names the few threads it wants: the keys of threading._active that cannot be
// theirs (by their stored hash) are not read, so a turn costs a few reads however many threads
// the process has (each key was 2 reads: 600 for this pool). (3.13t takes 10-20 s to start
// a few hundred threads on 2 busy CPUs.)
TEST_P(ObjectsLive, NamingAFewThreadsOfManyReadsOnlyTheirKeys) {
    const Interpreter& in = GetParam();
    pbp::test::Reporter p(pbp::test::with_args(in.argv, {"-c", kPoolScript}));
    auto lines = p.read_lines(2, 180);
    PBP_REQUIRE(lines.size() >= 2, in.name + " did not start its pool: " + p.err());
    auto idents = numbers(lines[1]);
    ASSERT_EQ(idents.size(), 3u);
    pbp::Discoverer d;
    auto found = d.discover(p.pid());
    ASSERT_EQ(found.status, pbp::Discovery::Python) << found.reason;
    ASSERT_TRUE(found.target.has_value());
    const pbp_proc proc = found.target->bpf_config(0, 0);
    const ObjectLayout& lay = found.target->layout.obj;
    SCOPED_TRACE(in.name);
    ASSERT_NE(lay.interp_modules, PBP_OFF_NONE) << "no thread-name offsets";

    CountingMemory mem(p.pid());
    ThreadNameCache cache;
    std::map<uint64_t, std::string> all, few;
    std::string err;
    ASSERT_TRUE(read_thread_names(mem, proc, lay, cache, all, err)) << err;
    const size_t all_reads = mem.reads;
    EXPECT_EQ(all.size(), 301u) << "300 workers and the main thread";
    EXPECT_EQ(all[idents[1]], "w-150");

    const std::set<uint64_t> wanted(idents.begin(), idents.end());
    mem.reads = 0;
    ASSERT_TRUE(read_thread_names(mem, proc, lay, cache, few, err, &wanted)) << err;
    EXPECT_EQ(few, (std::map<uint64_t, std::string>{{idents[0], "w-0"}, {idents[1], "w-150"}, {idents[2], "w-299"}}));
    EXPECT_LT(mem.reads, 100u) << "all " << all.size() << " threads' names took " << all_reads << " reads";
}

INSTANTIATE_TEST_SUITE_P(Interpreters, ObjectsLive, testing::ValuesIn(pbp::test::all_interpreters()),
                         pbp::test::interpreter_test_name);

}  // namespace
