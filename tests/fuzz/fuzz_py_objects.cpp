// libFuzzer target for the decoders of CPython objects read out of a target's memory
// (cpython/objects.h: str, bytes, int, dict, instance attributes): a profiled process is not trusted, and its memory may be
// garbage or change under the reader. Run by tests/tools/run-fuzz --target py_objects
// (ctest: Fuzz.PyObjects), with ASan and UBSan.
//
// The input: byte 0 picks the interpreter's object layout (3.6 .. 3.12's built-in tables),
// byte 1 where the object starts; the rest is the "process memory", mapped at kBase. Checks,
// besides "no crash, no leak, no timeout": a decoded str is well-formed UTF-8 of at most
// max_len code points, a bytes object is at most max_len long, a dict read gives at most
// max_items items, and reading the same memory twice gives the same answer.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cpython/layout.h"
#include "cpython/objects.h"
#include "fuzz_common.h"
#include "sys/target_memory.h"

namespace {

constexpr uint64_t kBase = 0x7f0000001000;
const char* const kName = "fuzz_py_objects";

class BufferMemory final : public pbp::MemoryReader {
public:
    BufferMemory(const uint8_t* data, size_t size) : data_(data), size_(size) {}
    bool read(uint64_t addr, void* buf, size_t n) override {
        if (addr < kBase || n > size_ || addr - kBase > size_ - n) return false;
        std::memcpy(buf, data_ + (addr - kBase), n);
        return true;
    }

private:
    const uint8_t* data_;
    size_t size_;
};

size_t code_points(const std::string& utf8) {
    size_t n = 0;
    for (unsigned char c : utf8) n += (c & 0xC0) != 0x80;
    return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const int minor = 6 + data[0] % 7;  // 3.6 .. 3.12
    const bool use_max = data[0] & 0x80;
    const auto layout = pbp::cpython::builtin_layout(pbp::cpython::Version{3, uint8_t(minor), 0}, false);
    if (!layout) pbp::fuzz::broken(kName, "no built-in layout", std::to_string(minor));
    BufferMemory mem(data + 2, size - 2);
    const uint64_t addr = kBase + 8 * uint64_t(data[1] & 0x7f) + (data[1] & 0x80 ? 4 : 0);
    const size_t max_len = use_max ? 16 : 4096;

    const auto s = pbp::cpython::read_unicode(mem, layout->obj, addr, max_len);
    if (s) {
        if (!pbp::fuzz::valid_utf8(*s)) pbp::fuzz::broken(kName, "str is not valid UTF-8", *s);
        if (code_points(*s) > max_len) pbp::fuzz::broken(kName, "str longer than max_len", *s);
    }
    if (pbp::cpython::read_unicode(mem, layout->obj, addr, max_len) != s)
        pbp::fuzz::broken(kName, "str read twice differs", s.value_or("(none)"));

    const auto b = pbp::cpython::read_bytes(mem, layout->obj, addr, max_len);
    if (b && b->size() > max_len) pbp::fuzz::broken(kName, "bytes longer than max_len", *b);
    if (pbp::cpython::read_bytes(mem, layout->obj, addr, max_len) != b)
        pbp::fuzz::broken(kName, "bytes read twice differs", b.value_or("(none)"));

    // What thread names read (cpython/thread_names.cpp): a dict's items, a str key's value, an
    // int ident, an object's type and an instance attribute.
    const size_t max_items = use_max ? 4 : 64;
    std::vector<pbp::cpython::DictItem> items;
    if (pbp::cpython::read_dict_items(mem, layout->obj, addr, items, max_items)) {
        if (items.size() > max_items) pbp::fuzz::broken(kName, "more dict items than max_items", std::to_string(items.size()));
        (void)pbp::cpython::dict_lookup_str(mem, layout->obj, items, "_active");
        for (const auto& it : items) (void)pbp::cpython::read_uint(mem, layout->obj, it.key);
    }
    const auto n = pbp::cpython::read_uint(mem, layout->obj, addr);
    if (pbp::cpython::read_uint(mem, layout->obj, addr) != n) pbp::fuzz::broken(kName, "int read twice differs", "");
    (void)pbp::cpython::type_of(mem, layout->obj, addr);
    (void)pbp::cpython::read_instance_attr(mem, layout->obj, addr, "_name");
    return 0;
}
