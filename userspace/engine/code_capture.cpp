#include "engine/code_capture.h"

#include <cstring>

namespace pbp {

CapturedCode::CapturedCode(const pbp_code_event& e, const cpython::ObjectLayout& obj) {
    for (int i = 0; i < PBP_CODE_REGIONS; i++) {
        const size_t len = e.len[i];
        if (len > PBP_CODE_DATA_CAP(i)) return;  // not valid
        if (!e.addr[i] || !len) continue;
        Region r;
        r.addr = e.addr[i];
        r.bytes.assign(reinterpret_cast<const char*>(e.data) + PBP_CODE_DATA_OFF(i), len);
        if (i == 1 + PBP_CODE_LINETABLE && obj.bytes_size != PBP_OFF_NONE && obj.bytes_sval != PBP_OFF_NONE &&
            len >= obj.bytes_sval + 1u && len >= obj.bytes_size + 8u) {
            // Cut short: its size lowered to what was copied, and the NUL every bytes object
            // ends with put after it, so read_bytes takes the part copied.
            int64_t size = 0;
            memcpy(&size, r.bytes.data() + obj.bytes_size, sizeof size);
            const int64_t room = static_cast<int64_t>(len) - obj.bytes_sval - 1;
            if (size > room) {
                memcpy(r.bytes.data() + obj.bytes_size, &room, sizeof room);
                r.bytes[obj.bytes_sval + static_cast<size_t>(room)] = '\0';
                linetable_cut_ = true;
            }
        }
        regions_.push_back(std::move(r));
    }
    valid_ = e.addr[0] == e.code && e.len[0] > 0;
}

bool CapturedCode::read(uint64_t addr, void* buf, size_t n) {
    for (const Region& r : regions_) {
        if (addr < r.addr || addr - r.addr > r.bytes.size() || n > r.bytes.size() - (addr - r.addr)) continue;
        memcpy(buf, r.bytes.data() + (addr - r.addr), n);
        return true;
    }
    return false;
}

}  // namespace pbp
