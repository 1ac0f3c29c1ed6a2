// Decoding CPython objects (str, bytes) out of another process's memory.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

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

}  // namespace pbp::cpython
