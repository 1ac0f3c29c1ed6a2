// Version helpers and the BPF offset validation shared by the built-in tables
// (layout_tables.cpp) and the _Py_DebugOffsets decoder (debug_offsets.cpp).
#include "cpython/layout.h"

#include <algorithm>
#include <cstdio>

namespace pbp::cpython {

Version Version::from_hex(uint32_t hex) {
    Version v;
    v.major = static_cast<uint8_t>(hex >> 24);
    v.minor = static_cast<uint8_t>(hex >> 16);
    v.micro = static_cast<uint8_t>(hex >> 8);
    v.level = static_cast<uint8_t>((hex >> 4) & 0xF);
    v.serial = static_cast<uint8_t>(hex & 0xF);
    return v;
}

uint32_t Version::hex() const {
    return (uint32_t(major) << 24) | (uint32_t(minor) << 16) | (uint32_t(micro) << 8) |
           (uint32_t(level & 0xF) << 4) | uint32_t(serial & 0xF);
}

std::string Version::str() const {
    std::string s = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(micro);
    switch (level) {
    case 0xA: s += "a" + std::to_string(serial); break;
    case 0xB: s += "b" + std::to_string(serial); break;
    case 0xC: s += "rc" + std::to_string(serial); break;
    default: break;  // 0xF final (anything else is not a CPython release level)
    }
    return s;
}

namespace {

std::string num(unsigned v) {
    char b[16];
    std::snprintf(b, sizeof b, "%u", v);
    return b;
}

// One field BPF reads out of a window: it must lie inside PBP_WINDOW at its natural
// alignment (BPF masks the offset with PBP_WINDOW - size, see win_u64/win_u32/win_u8).
struct WinField {
    const char* name;
    uint16_t off;
    unsigned size;  // 1, 4 or 8
};

bool check_window(const char* what, const WinField* f, size_t n, uint16_t& read_len,
                  std::string& error) {
    unsigned end = 0;
    for (size_t i = 0; i < n; i++) {
        if (f[i].off == PBP_OFF_NONE) continue;
        if (f[i].off % f[i].size != 0) {
            error = std::string(what) + "." + f[i].name + " offset " + num(f[i].off) +
                    " is not " + num(f[i].size) + "-byte aligned";
            return false;
        }
        if (unsigned(f[i].off) + f[i].size > PBP_WINDOW) {
            error = std::string(what) + "." + f[i].name + " offset " + num(f[i].off) +
                    " lies beyond the " + num(PBP_WINDOW) + "-byte BPF window";
            return false;
        }
        end = std::max(end, unsigned(f[i].off) + f[i].size);
    }
    if (end == 0) {
        error = std::string(what) + ": no field to read";
        return false;
    }
    read_len = static_cast<uint16_t>((end + 7) & ~7u);
    if (read_len > PBP_WINDOW) {  // cannot happen after the checks above; kept as a guard
        error = std::string(what) + " read length " + num(read_len) + " exceeds PBP_WINDOW";
        return false;
    }
    return true;
}

}  // namespace

void set_code_identity(Layout& l) {
    l.bpf.code_ident[PBP_CODE_NAME] = l.obj.co_name;
    l.bpf.code_ident[PBP_CODE_QUALNAME] = l.obj.co_qualname;
    l.bpf.code_ident[PBP_CODE_FILENAME] = l.obj.co_filename;
    l.bpf.code_ident[PBP_CODE_LINETABLE] = l.obj.co_linetable;
    l.bpf.code_firstlineno = l.obj.co_firstlineno;
}

bool finalize_bpf_offsets(pbp_py_offsets& off, std::string& error) {
    error.clear();
    if (off.frame_kind != PBP_FRAME_OBJECT && off.frame_kind != PBP_FRAME_INTERP_CFRAME &&
        off.frame_kind != PBP_FRAME_INTERP) {
        error = "bad frame_kind " + num(off.frame_kind);
        return false;
    }
    if (off.instr_kind != PBP_INSTR_LASTI_BYTES && off.instr_kind != PBP_INSTR_LASTI_UNITS &&
        off.instr_kind != PBP_INSTR_PTR) {
        error = "bad instr_kind " + num(off.instr_kind);
        return false;
    }
    // Offsets read with a plain probe read (rd_u64): any u16 value works, but they must be set.
// A field of 'off' and its name, as the errors give it.
#define PBP_NAMED(field) #field, off.field
    const struct {
        const char* name;
        uint16_t v;
    } required[] = {
        {PBP_NAMED(interp_next)}, {PBP_NAMED(interp_threads_head)}, {PBP_NAMED(tstate_next)},
        {PBP_NAMED(tstate_thread_id)}, {PBP_NAMED(tstate_frame)}, {PBP_NAMED(frame_previous)},
        {PBP_NAMED(frame_code)}, {PBP_NAMED(frame_instr)}, {PBP_NAMED(code_ob_type)},
    };
    for (auto& r : required) {
        if (r.v == PBP_OFF_NONE) {
            error = std::string(r.name) + " is not set";
            return false;
        }
    }
    if (off.frame_kind == PBP_FRAME_INTERP_CFRAME && off.cframe_current_frame == PBP_OFF_NONE) {
        error = "cframe_current_frame is required for PBP_FRAME_INTERP_CFRAME";
        return false;
    }
    if (off.frame_kind == PBP_FRAME_INTERP_CFRAME &&
        (off.cframe_current_frame % 8 || off.cframe_current_frame + 8 > PBP_CFRAME_WINDOW)) {
        error = "cframe_current_frame " + num(off.cframe_current_frame) + " is not an aligned u64 within " +
                num(PBP_CFRAME_WINDOW) + " bytes";
        return false;
    }
    if (off.frame_entry_off != PBP_OFF_NONE) {  // the eval loop entry check (3.11/3.12)
        if (off.frame_kind != PBP_FRAME_INTERP_CFRAME) {
            error = "frame_entry_off is only for PBP_FRAME_INTERP_CFRAME";
            return false;
        }
        if (off.cframe_previous % 8 || off.cframe_previous + 8 > PBP_CFRAME_WINDOW) {
            error = "cframe_previous " + num(off.cframe_previous) + " is not an aligned u64 within " +
                    num(PBP_CFRAME_WINDOW) + " bytes";
            return false;
        }
        if (off.tstate_root_cframe == PBP_OFF_NONE) {
            error = "tstate_root_cframe is required with frame_entry_off";
            return false;
        }
    }
    if (off.instr_kind == PBP_INSTR_PTR && off.code_adaptive == PBP_OFF_NONE) {
        error = "code_adaptive is required for PBP_INSTR_PTR";
        return false;
    }
    if ((off.frame_tlbc_index == PBP_OFF_NONE) != (off.code_tlbc == PBP_OFF_NONE)) {
        error = "frame_tlbc_index and code_tlbc must be set together";
        return false;
    }
    if (off.executable_tag_mask > 7) {  // objects are at least 8-byte aligned
        error = "executable_tag_mask " + num(off.executable_tag_mask) + " clears pointer bits";
        return false;
    }

    // The GIL: locked and last_holder are read in one PBP_GIL_WINDOW read from its start.
    if (off.gil_where > PBP_GIL_WHERE_STATICS) {
        error = "bad gil_where " + num(off.gil_where);
        return false;
    }
    // (PBP_GIL_WHERE_STATICS: no struct, the addresses are the process's: pbp_proc.)
    if (off.gil_where == PBP_GIL_WHERE_ADDR || off.gil_where == PBP_GIL_WHERE_INTERP) {
        if (off.gil_where == PBP_GIL_WHERE_INTERP && off.interp_gil_ptr == PBP_OFF_NONE) {
            error = "interp_gil_ptr is required for PBP_GIL_WHERE_INTERP";
            return false;
        }
        if (off.gil_locked % 4 || off.gil_locked + 4u > PBP_GIL_WINDOW || off.gil_last_holder % 8 ||
            off.gil_last_holder + 8u > PBP_GIL_WINDOW) {
            error = "gil_locked " + num(off.gil_locked) + " / gil_last_holder " + num(off.gil_last_holder) +
                    " do not lie aligned within the first " + num(PBP_GIL_WINDOW) + " bytes of the GIL";
            return false;
        }
        if (off.gil_size < PBP_GIL_WINDOW) {
            error = "gil_size " + num(off.gil_size) + " is smaller than the fields read from it";
            return false;
        }
    }

    const WinField frame[] = {
        {PBP_NAMED(frame_previous), 8},
        {PBP_NAMED(frame_code), 8},
        {PBP_NAMED(frame_instr), off.instr_kind == PBP_INSTR_PTR ? 8u : 4u},
        {PBP_NAMED(frame_owner), 1},
        {PBP_NAMED(frame_tlbc_index), 4},
        {PBP_NAMED(frame_entry_off), 1},
    };
    if (!check_window("frame", frame, std::size(frame), off.frame_read_len, error)) return false;

    WinField code[6] = {
        {PBP_NAMED(code_ob_type), 8},
        {PBP_NAMED(code_tlbc), 8},
    };
#undef PBP_NAMED
    size_t ncode = 2;
    static const char* const csum_names[4] = {"csum_off[0]", "csum_off[1]", "csum_off[2]",
                                              "csum_off[3]"};
    bool any_csum = false;
    for (int i = 0; i < 4; i++) {
        uint8_t sz = off.csum_size[i];
        if (sz == 0) continue;
        if (sz != 4 && sz != 8) {
            error = std::string("csum_size[") + char('0' + i) + "] must be 0, 4 or 8";
            return false;
        }
        if (off.csum_off[i] == PBP_OFF_NONE) {
            error = std::string(csum_names[i]) + " is not set";
            return false;
        }
        code[ncode++] = {csum_names[i], off.csum_off[i], sz};
        any_csum = true;
    }
    if (!any_csum) {
        error = "no code checksum field";
        return false;
    }
    if (!check_window("code", code, ncode, off.code_read_len, error)) return false;

    // The identity capture copies the code object once, over the checksum's fields and the
    // identity's; it is off (code_ident_len 0) unless the name and first line are known. Offset
    // 0 (ob_refcnt) is never one of them: a table that leaves them zero has none.
    off.code_ident_len = 0;
    auto known = [](uint16_t o) { return o != 0 && o != PBP_OFF_NONE; };
    if (known(off.code_ident[PBP_CODE_NAME]) && known(off.code_firstlineno)) {
        static const char* const ident_names[PBP_CODE_IDENT_PTRS] = {"code_ident[name]", "code_ident[qualname]",
                                                                     "code_ident[filename]", "code_ident[linetable]"};
        WinField ident[PBP_CODE_IDENT_PTRS + 1 + std::size(code)];
        size_t n = 0;
        for (int i = 0; i < PBP_CODE_IDENT_PTRS; i++)
            if (known(off.code_ident[i])) ident[n++] = {ident_names[i], off.code_ident[i], 8};
        ident[n++] = {"code_firstlineno", off.code_firstlineno, 4};
        for (size_t i = 0; i < ncode; i++) ident[n++] = code[i];
        if (!check_window("code identity", ident, n, off.code_ident_len, error)) return false;
    } else {
        for (int i = 0; i < PBP_CODE_IDENT_PTRS; i++) off.code_ident[i] = PBP_OFF_NONE;
        off.code_firstlineno = PBP_OFF_NONE;
    }
    return true;
}

}  // namespace pbp::cpython
