// Decoding CPython objects (str, bytes, int, dict, instance attributes) out of another
// process's memory. Every read is bounded and every value checked: the memory may be changing
// or garbage, and a reader answers nullopt/false then, never loops or allocates without bound.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cpython/layout.h"
#include "sys/target_memory.h"

namespace pbp::cpython {

// A str object as UTF-8 (compact ASCII, compact latin-1/UCS-2/UCS-4). nullopt if unreadable
// or not a plausible string. Strings longer than max_len code points are refused.
std::optional<std::string> read_unicode(MemoryReader& mem, const ObjectLayout& lay, uint64_t addr,
                                        size_t max_len = 4096);

// A bytes object's contents. Refuses objects larger than max_len.
std::optional<std::string> read_bytes(MemoryReader& mem, const ObjectLayout& lay, uint64_t addr,
                                      size_t max_len = 1 << 20);

// An int object that fits in 64 bits and is not negative (thread idents, pthread_self()).
std::optional<uint64_t> read_uint(MemoryReader& mem, const ObjectLayout& lay, uint64_t addr);

// The type of an object (ob_type); 0 if unreadable.
uint64_t type_of(MemoryReader& mem, const ObjectLayout& lay, uint64_t addr);

struct DictItem {
    uint64_t key = 0, value = 0;  // object addresses
    // The key's hash as the dict stored it (me_hash), where the table keeps one: every dict but
    // 3.11+'s str-keyed ones. Lets a lookup skip reading the keys that cannot match.
    bool has_hash = false;
    uint64_t hash = 0;
};
// hash(v) of a non-negative int v, as CPython stores it in a dict entry (64-bit builds: v mod
// 2**61 - 1, the same on every version this project reads).
uint64_t int_hash(uint64_t v);
// The items of a dict object, in insertion order (deleted slots skipped). False when it is
// unreadable, not plausibly a dict, or holds more than max_items entries (used or deleted).
bool read_dict_items(MemoryReader& mem, const ObjectLayout& lay, uint64_t dict, std::vector<DictItem>& out,
                     size_t max_items = 1 << 16);
// The value of the first item whose key is the str 'key' (0 = none).
uint64_t dict_lookup_str(MemoryReader& mem, const ObjectLayout& lay, const std::vector<DictItem>& items,
                         std::string_view key);

// An instance attribute (what the instance's __dict__ holds; not slots, class attributes or
// properties), wherever the version keeps it: a dict at tp_dictoffset, a managed dict, or
// values shared-keyed by the class (3.11+), inline in the object (3.13+). 0 = not found.
uint64_t read_instance_attr(MemoryReader& mem, const ObjectLayout& lay, uint64_t obj, std::string_view name);

}  // namespace pbp::cpython
