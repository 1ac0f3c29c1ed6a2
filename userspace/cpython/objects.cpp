// Reading str and bytes objects out of another process.
//
// PEP 393 strings (3.3+): a compact string is one allocation, the characters right after
// the header: after PyASCIIObject when state.ascii is set, after PyCompactUnicodeObject
// otherwise. The data of a compact string is always NUL-terminated. Non-compact ("legacy")
// strings only come from str subclasses and are refused here.
#include "cpython/objects.h"

#include <cstring>
#include <vector>

namespace pbp::cpython {

namespace {

void put_utf8(std::string& out, uint32_t cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // lone surrogate: not encodable as UTF-8
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

}  // namespace

std::optional<std::string> read_unicode(MemoryReader& mem, const ObjectLayout& lay, uint64_t addr,
                                        size_t max_len) {
    if (!addr || (addr & 7)) return std::nullopt;  // objects are 8-byte aligned
    if (lay.unicode_length == PBP_OFF_NONE || lay.unicode_state == PBP_OFF_NONE ||
        lay.unicode_ascii_size == 0 || lay.unicode_compact_size < lay.unicode_ascii_size ||
        lay.unicode_ascii_size < lay.unicode_state + 4 || lay.unicode_ascii_size < lay.unicode_length + 8)
        return std::nullopt;

    // The PyASCIIObject header is the smallest any str has: read only that first.
    std::vector<uint8_t> hdr(lay.unicode_ascii_size);
    if (!mem.read(addr, hdr.data(), hdr.size())) return std::nullopt;
    int64_t length;
    uint32_t state;
    std::memcpy(&length, hdr.data() + lay.unicode_length, sizeof length);
    std::memcpy(&state, hdr.data() + lay.unicode_state, sizeof state);
    const unsigned kind = (state >> lay.state_kind_shift) & 7;
    const bool compact = (state >> lay.state_compact_bit) & 1;
    const bool ascii = (state >> lay.state_ascii_bit) & 1;

    if (!compact) return std::nullopt;  // legacy string (str subclass): data elsewhere
    if (kind != 1 && kind != 2 && kind != 4) return std::nullopt;
    if (ascii && kind != 1) return std::nullopt;
    if (length < 0 || static_cast<uint64_t>(length) > max_len) return std::nullopt;

    const uint64_t data = addr + (ascii ? lay.unicode_ascii_size : lay.unicode_compact_size);
    const size_t n = static_cast<size_t>(length);
    std::vector<uint8_t> buf((n + 1) * kind);  // + the NUL terminator
    if (!mem.read(data, buf.data(), buf.size())) return std::nullopt;

    std::string out;
    out.reserve(n * (kind == 1 ? 2 : 3));
    for (size_t i = 0; i <= n; i++) {
        uint32_t cp;
        if (kind == 1) {
            cp = buf[i];
        } else if (kind == 2) {
            uint16_t c;
            std::memcpy(&c, buf.data() + 2 * i, 2);
            cp = c;
        } else {
            std::memcpy(&cp, buf.data() + 4 * i, 4);
        }
        if (i == n) {
            if (cp != 0) return std::nullopt;  // compact data is NUL-terminated
            break;
        }
        if (ascii && cp >= 0x80) return std::nullopt;
        if (cp > 0x10FFFF) return std::nullopt;
        put_utf8(out, cp);
    }
    return out;
}

std::optional<std::string> read_bytes(MemoryReader& mem, const ObjectLayout& lay, uint64_t addr,
                                      size_t max_len) {
    if (!addr || (addr & 7)) return std::nullopt;
    if (lay.bytes_size == PBP_OFF_NONE || lay.bytes_sval == PBP_OFF_NONE) return std::nullopt;
    int64_t size;
    if (!mem.read_value(addr + lay.bytes_size, size)) return std::nullopt;
    if (size < 0 || static_cast<uint64_t>(size) > max_len) return std::nullopt;
    std::string out(static_cast<size_t>(size) + 1, '\0');
    if (!mem.read(addr + lay.bytes_sval, out.data(), out.size())) return std::nullopt;
    if (out.back() != '\0') return std::nullopt;  // ob_sval is always NUL-terminated
    out.pop_back();
    return out;
}

}  // namespace pbp::cpython
