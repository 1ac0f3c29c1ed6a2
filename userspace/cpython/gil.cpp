#include "cpython/gil.h"

namespace pbp::cpython {

uint64_t gil_fixed_address(const Layout& layout, uint64_t runtime_addr) {
    if (layout.bpf.gil_where != PBP_GIL_WHERE_ADDR || !layout.runtime_gil || !runtime_addr) return 0;
    return runtime_addr + *layout.runtime_gil;
}

std::optional<GilRange> gil_range(const Layout& layout, uint64_t runtime_addr,
                                  uint64_t interp_head_addr, MemoryReader& mem) {
    const pbp_py_offsets& o = layout.bpf;
    GilRange r;
    r.size = o.gil_size;
    switch (o.gil_where) {
    case PBP_GIL_WHERE_ADDR:
        r.addr = gil_fixed_address(layout, runtime_addr);
        break;
    case PBP_GIL_WHERE_INTERP: {
        uint64_t interp = 0;
        if (!interp_head_addr || !mem.read_value(interp_head_addr, interp) || !interp) return std::nullopt;
        if (!mem.read_value(interp + o.interp_gil_ptr, r.addr)) return std::nullopt;
        break;
    }
    default:
        return std::nullopt;
    }
    if (!r.addr || !r.size) return std::nullopt;
    return r;
}

std::optional<GilSnapshot> read_gil(const Layout& layout, const GilRange& gil, MemoryReader& mem) {
    const pbp_py_offsets& o = layout.bpf;
    if (o.gil_where == PBP_GIL_WHERE_NONE) return std::nullopt;
    GilSnapshot s;
    if (!mem.read_value(gil.addr + o.gil_locked, s.locked) ||
        !mem.read_value(gil.addr + o.gil_last_holder, s.last_holder))
        return std::nullopt;
    return s;
}

}  // namespace pbp::cpython
