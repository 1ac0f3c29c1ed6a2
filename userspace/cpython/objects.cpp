// Reading str and bytes objects out of another process.
//
// PEP 393 strings (3.3+): a compact string is one allocation, the characters right after
// the header: after PyASCIIObject when state.ascii is set, after PyCompactUnicodeObject
// otherwise. The data of a compact string is always NUL-terminated. Non-compact ("legacy")
// strings only come from str subclasses and are refused here.
#include "cpython/objects.h"

#include <algorithm>
#include <cstdint>
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

// ---- ints, dicts and instance attributes ----

namespace pbp::cpython {

namespace {

uint64_t rd_ptr(MemoryReader& mem, uint64_t addr) {
    uint64_t v = 0;
    return mem.read(addr, &v, sizeof v) ? v : 0;
}

bool aligned_ptr(uint64_t a) { return a && !(a & 7) && a < (1ULL << 56); }

// The entries of a keys object, their values taken from 'values' (a split table: an array of
// at most values_cap pointers) or from the entries themselves (values == 0).
bool read_keys_entries(MemoryReader& mem, const ObjectLayout& lay, uint64_t keys, uint64_t values,
                       size_t values_cap, std::vector<DictItem>& out, size_t max_items) {
    out.clear();
    if (!aligned_ptr(keys) || (values && !aligned_ptr(values))) return false;
    uint8_t hdr[48];
    uint64_t size, entries;
    int64_t nentries;
    size_t esize = 24, key_at = 8;  // PyDictKeyEntry {me_hash, me_key, me_value}
    if (lay.dict_keys == DictKeysFormat::Py36) {
        if (!mem.read(keys, hdr, 48)) return false;
        std::memcpy(&size, hdr + 8, 8);
        std::memcpy(&nentries, hdr + 32, 8);
        if (size < 8 || (size & (size - 1)) || size > (1ULL << 30)) return false;
        // DK_IXSIZE: the index width grows with the table
        const uint64_t ix = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffffULL ? 4 : 8;
        entries = keys + 40 + size * ix;
    } else {
        if (!mem.read(keys, hdr, 32)) return false;
        const unsigned log2 = hdr[8], log2_index = hdr[9], kind = hdr[10];
        std::memcpy(&nentries, hdr + 24, 8);
        // DICT_KEYS_GENERAL 0, DICT_KEYS_UNICODE 1, DICT_KEYS_SPLIT 2; an index is 1..8 bytes
        if (log2 < 3 || log2 > 30 || log2_index < log2 || log2_index > log2 + 3 || kind > 2) return false;
        if ((kind == 2) != (values != 0)) return false;  // a split table has its values apart
        size = 1ULL << log2;
        entries = keys + 32 + (1ULL << log2_index);
        if (kind != 0) esize = 16, key_at = 0;  // PyDictUnicodeEntry {me_key, me_value}
    }
    if (nentries < 0 || static_cast<uint64_t>(nentries) > size || static_cast<uint64_t>(nentries) > max_items)
        return false;
    size_t n = static_cast<size_t>(nentries);
    if (values) n = std::min(n, values_cap);
    if (n == 0) return true;
    std::vector<uint8_t> buf(n * esize);
    if (!mem.read(entries, buf.data(), buf.size())) return false;
    std::vector<uint64_t> vals;
    if (values) {
        vals.resize(n);
        if (!mem.read(values, vals.data(), n * 8)) return false;
    }
    for (size_t i = 0; i < n; i++) {
        DictItem it;
        std::memcpy(&it.key, buf.data() + i * esize + key_at, 8);
        if (key_at == 8) {
            it.has_hash = true;
            std::memcpy(&it.hash, buf.data() + i * esize, 8);
        }
        if (values) it.value = vals[i];
        else std::memcpy(&it.value, buf.data() + i * esize + key_at + 8, 8);
        if (aligned_ptr(it.key) && aligned_ptr(it.value)) out.push_back(it);  // else deleted / not set
    }
    return true;
}

// PyDictValues from 3.13 {uint8_t capacity, size, embedded, valid; values[]}: the values and
// how many there may be. Before, a bare array whose length the keys bound (at most 30 shared
// keys, SHARED_KEYS_MAX_SIZE).
bool values_array(MemoryReader& mem, const ObjectLayout& lay, uint64_t v, uint64_t& values, size_t& cap,
                  bool* valid = nullptr) {
    if (!aligned_ptr(v)) return false;
    if (!lay.dict_values_skip) {
        values = v;
        cap = SIZE_MAX;
        if (valid) *valid = true;
        return true;
    }
    uint8_t h[4];
    if (!mem.read(v, h, sizeof h)) return false;
    values = v + lay.dict_values_skip;
    cap = h[0];
    if (valid) *valid = h[3] != 0;
    return true;
}

}  // namespace

uint64_t int_hash(uint64_t v) {
    constexpr uint64_t kModulus = (1ULL << 61) - 1;  // _PyHASH_MODULUS (_PyHASH_BITS 61)
    return v % kModulus;  // never -1 for a non-negative int (hash(-1) is the one made -2)
}

uint64_t type_of(MemoryReader& mem, const ObjectLayout& lay, uint64_t addr) {
    if (!aligned_ptr(addr)) return 0;
    uint64_t t = rd_ptr(mem, addr + lay.ob_type);
    return aligned_ptr(t) ? t : 0;
}

std::optional<uint64_t> read_uint(MemoryReader& mem, const ObjectLayout& lay, uint64_t addr) {
    if (!aligned_ptr(addr) || lay.long_size == PBP_OFF_NONE || lay.long_digits == PBP_OFF_NONE) return std::nullopt;
    int64_t head;
    if (!mem.read(addr + lay.long_size, &head, sizeof head)) return std::nullopt;
    uint64_t ndigits;
    if (lay.long_tagged) {  // lv_tag: ndigits << 3 | sign (0 positive, 1 zero, 2 negative)
        const uint64_t tag = static_cast<uint64_t>(head);
        if ((tag & 3) == 1) return 0;
        if ((tag & 3) != 0) return std::nullopt;
        ndigits = tag >> 3;
    } else {  // ob_size: the digit count, negative for negative ints
        if (head < 0) return std::nullopt;
        ndigits = static_cast<uint64_t>(head);
    }
    if (ndigits == 0) return 0;
    if (ndigits > 3) return std::nullopt;  // 3 digits of 30 bits hold 64
    uint32_t d[3] = {};
    if (!mem.read(addr + lay.long_digits, d, ndigits * 4)) return std::nullopt;
    uint64_t v = 0;
    for (uint64_t i = 0; i < ndigits; i++) {
        if (d[i] >> 30) return std::nullopt;
        if (i == 2 && d[i] >> 4) return std::nullopt;  // beyond 64 bits
        v |= static_cast<uint64_t>(d[i]) << (30 * i);
    }
    return v;
}

bool read_dict_items(MemoryReader& mem, const ObjectLayout& lay, uint64_t dict, std::vector<DictItem>& out,
                     size_t max_items) {
    out.clear();
    if (!aligned_ptr(dict) || lay.dict_ma_keys == PBP_OFF_NONE || lay.dict_ma_values == PBP_OFF_NONE) return false;
    const uint64_t keys = rd_ptr(mem, dict + lay.dict_ma_keys);
    const uint64_t mv = rd_ptr(mem, dict + lay.dict_ma_values);
    uint64_t values = 0;
    size_t cap = 0;
    if (mv && !values_array(mem, lay, mv, values, cap)) return false;
    return read_keys_entries(mem, lay, keys, values, cap, out, max_items);
}

uint64_t dict_lookup_str(MemoryReader& mem, const ObjectLayout& lay, const std::vector<DictItem>& items,
                         std::string_view key) {
    for (const auto& it : items) {
        auto s = read_unicode(mem, lay, it.key, key.size());  // longer strings are refused unread
        if (s && *s == key) return it.value;
    }
    return 0;
}

uint64_t read_instance_attr(MemoryReader& mem, const ObjectLayout& lay, uint64_t obj, std::string_view name) {
    if (lay.tp_flags == PBP_OFF_NONE || lay.tp_dictoffset == PBP_OFF_NONE || lay.tp_basicsize == PBP_OFF_NONE)
        return 0;
    const uint64_t type = type_of(mem, lay, obj);
    if (!type) return 0;
    uint64_t flags = 0;
    int64_t basicsize = 0, dictoffset = 0;
    if (!mem.read(type + lay.tp_flags, &flags, 8) || !mem.read(type + lay.tp_basicsize, &basicsize, 8) ||
        !mem.read(type + lay.tp_dictoffset, &dictoffset, 8))
        return 0;
    constexpr uint64_t kManagedDict = 1u << 4;   // Py_TPFLAGS_MANAGED_DICT (3.11+)
    constexpr uint64_t kInlineValues = 1u << 2;  // Py_TPFLAGS_INLINE_VALUES (3.13+)
    constexpr size_t kMaxAttrs = 1024;

    std::vector<DictItem> items;
    uint64_t dict = 0;
    bool have_items = false;
    if (lay.managed_dict == ManagedDict::None || !(flags & kManagedDict)) {
        if (dictoffset <= 0 || dictoffset > (1 << 16)) return 0;  // no __dict__, or a var-sized object's
        dict = rd_ptr(mem, obj + static_cast<uint64_t>(dictoffset));
    } else {
        const uint64_t at = obj + static_cast<uint64_t>(static_cast<int64_t>(lay.managed_dict_off));
        auto shared = [&](uint64_t v) {  // values keyed by the class's shared keys
            uint64_t values;
            size_t cap;
            bool valid = false;
            if (lay.ht_cached_keys == PBP_OFF_NONE || !values_array(mem, lay, v, values, cap, &valid) || !valid)
                return false;
            const uint64_t keys = rd_ptr(mem, type + lay.ht_cached_keys);
            return read_keys_entries(mem, lay, keys, values, cap, items, kMaxAttrs);
        };
        switch (lay.managed_dict) {
            case ManagedDict::Py311:  // values at -32, else a dict at -24
                if (uint64_t v = rd_ptr(mem, at - 8)) have_items = shared(v);
                else dict = rd_ptr(mem, at);
                break;
            case ManagedDict::Py312:  // PyDictOrValues: a dict, or values - 1 (odd)
                if (uint64_t dv = rd_ptr(mem, at); dv & 1) have_items = shared(dv + 1);
                else dict = dv;
                break;
            case ManagedDict::Py313:  // inline values, unless a dict took them over
                if ((flags & kInlineValues) && basicsize >= 16 && basicsize < (1 << 16))
                    have_items = shared(obj + static_cast<uint64_t>(basicsize));
                if (!have_items) dict = rd_ptr(mem, at);
                break;
            case ManagedDict::None:
                break;
        }
    }
    if (!have_items && !(dict && read_dict_items(mem, lay, dict, items, kMaxAttrs))) return 0;
    return dict_lookup_str(mem, lay, items, name);
}

}  // namespace pbp::cpython
