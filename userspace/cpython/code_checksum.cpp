#include "cpython/code_checksum.h"

#include <cstring>

namespace pbp::cpython {

uint32_t code_checksum(const pbp_py_offsets& off, const uint8_t* w, size_t len, MemoryReader* mem) {
    uint32_t acc = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t sz = off.csum_size[i];
        uint16_t o = off.csum_off[i];
        if ((sz != 4 && sz != 8) || o + sz > len) continue;
        uint64_t v = 0;
        memcpy(&v, w + o, sz);
        if (sz == 8 && (off.csum_str_mask & (1u << i))) {  // a str: its hash, as BPF reads it
            uint64_t h = 0;
            if (!mem || !mem->read(v + PBP_STR_HASH_OFF, &h, sizeof h)) h = 0;
            v = h;
        }
        acc = pbp_csum_step(acc, v);
    }
    return acc;
}

}  // namespace pbp::cpython
