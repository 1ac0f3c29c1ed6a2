#include "native/cold_part.h"

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

namespace pbp::native {

namespace {

// DW_EH_PE_*: how .eh_frame encodes a pointer (the CIE's 'R' augmentation for its FDEs').
constexpr uint8_t kPeOmit = 0xff, kPePcrel = 0x10;

// One encoded pointer at p (end: the data's end), as at address (the field's own address, for
// pcrel); advances p. False on an encoding not handled or the data's end.
bool read_encoded(const uint8_t*& p, const uint8_t* end, uint8_t enc, uint64_t address, uint64_t& out) {
    auto fixed = [&](size_t n, bool sign) {
        if (static_cast<size_t>(end - p) < n) return false;
        uint64_t v = 0;
        std::memcpy(&v, p, n);  // little-endian (x86_64)
        if (sign && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t(0) << (8 * n);
        p += n;
        out = v;
        return true;
    };
    auto leb = [&](bool sign) {
        uint64_t v = 0;
        unsigned shift = 0;
        uint8_t b = 0;
        do {
            if (p == end || shift >= 64) return false;
            b = *p++;
            v |= uint64_t(b & 0x7f) << shift;
            shift += 7;
        } while (b & 0x80);
        if (sign && shift < 64 && (b & 0x40)) v |= ~uint64_t(0) << shift;
        out = v;
        return true;
    };
    bool ok = false;
    switch (enc & 0x0f) {
        case 0x00: ok = fixed(8, false); break;  // absptr
        case 0x01: ok = leb(false); break;       // uleb128
        case 0x02: ok = fixed(2, false); break;  // udata2
        case 0x03: ok = fixed(4, false); break;  // udata4
        case 0x04: ok = fixed(8, false); break;  // udata8
        case 0x09: ok = leb(true); break;        // sleb128
        case 0x0a: ok = fixed(2, true); break;   // sdata2
        case 0x0b: ok = fixed(4, true); break;   // sdata4
        case 0x0c: ok = fixed(8, true); break;   // sdata8
        default: return false;
    }
    if (!ok) return false;
    switch (enc & 0x70) {
        case 0x00: return true;
        case kPePcrel: out += address; return true;
        default: return false;  // textrel, datarel, funcrel: not used by .eh_frame's FDEs on x86_64
    }
}

// The FDE pointer encoding a CIE gives (its 'R'), absptr without one; false when its
// augmentation string has a letter not known (its data cannot be walked then).
bool fde_encoding(const Dwarf_CIE& cie, uint8_t& enc) {
    enc = 0;
    const char* a = cie.augmentation;
    if (!a || a[0] != 'z') return a && !a[0];
    const uint8_t* p = cie.augmentation_data;
    const uint8_t* end = p ? p + cie.augmentation_data_size : nullptr;
    for (a++; *a; a++) {
        if (*a == 'R' || *a == 'L') {
            if (p == end) return false;
            if (*a == 'R') enc = *p;
            p++;
        } else if (*a == 'P') {  // the personality routine: its encoding, then the pointer
            if (p == end) return false;
            const uint8_t penc = *p++;
            uint64_t ignored = 0;
            if (!read_encoded(p, end, penc & 0x7f, 0, ignored)) return false;
        } else if (*a != 'S' && *a != 'B') {
            return false;
        }
    }
    return true;
}

}  // namespace

std::vector<CodeRange> eh_frame_ranges(Elf* elf) {
    std::vector<CodeRange> out;
    size_t shstrndx = 0;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) return out;
    const unsigned char* ident = reinterpret_cast<const unsigned char*>(elf_getident(elf, nullptr));
    if (!ident) return out;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS) continue;
        const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
        if (!name || std::strcmp(name, ".eh_frame") != 0) continue;
        Elf_Data* data = elf_getdata(scn, nullptr);
        if (!data || !data->d_buf) return out;
        const auto* base = static_cast<const uint8_t*>(data->d_buf);
        std::map<Dwarf_Off, uint8_t> encodings;  // CIE offset -> its FDEs' pointer encoding
        Dwarf_Off off = 0, next = 0;
        for (; off != static_cast<Dwarf_Off>(-1); off = next) {
            Dwarf_CFI_Entry e;
            const int rc = dwarf_next_cfi(ident, data, true, off, &next, &e);
            if (rc == 1) break;
            if (rc != 0) {
                if (next == off || next == static_cast<Dwarf_Off>(-1)) break;
                continue;
            }
            if (dwarf_cfi_cie_p(&e)) {
                uint8_t enc = 0;
                if (fde_encoding(e.cie, enc)) encodings[off] = enc;
                continue;
            }
            auto c = encodings.find(e.fde.CIE_pointer);
            if (c == encodings.end() || c->second == kPeOmit) continue;
            const uint8_t* p = e.fde.start;
            uint64_t start = 0, len = 0;
            if (!read_encoded(p, e.fde.end, c->second, sh.sh_addr + (p - base), start)) continue;
            if (!read_encoded(p, e.fde.end, c->second & 0x0f, 0, len) || !len) continue;
            out.push_back({start, start + len});
        }
        break;
    }
    std::sort(out.begin(), out.end(), [](const CodeRange& a, const CodeRange& b) { return a.start < b.start; });
    return out;
}

std::vector<uint64_t> rel32_jump_targets(const uint8_t* code, size_t size, uint64_t addr) {
    std::vector<uint64_t> out;
    for (size_t i = 0; i < size; i++) {
        size_t len = 0;
        if (code[i] == 0xe9) len = 5;                                                              // jmp rel32
        else if (code[i] == 0x0f && i + 1 < size && (code[i + 1] & 0xf0) == 0x80) len = 6;  // jcc rel32
        if (!len || i + len > size) continue;
        int32_t rel = 0;
        std::memcpy(&rel, code + i + len - 4, 4);
        const uint64_t target = addr + i + len + static_cast<int64_t>(rel);
        if (target < addr || target >= addr + size) out.push_back(target);
    }
    return out;
}

std::optional<CodeRange> pick_cold_part(const std::vector<uint64_t>& targets,
                                        const std::function<std::optional<CodeRange>(uint64_t)>& fde_at,
                                        const std::function<bool(const CodeRange&)>& covered) {
    std::map<uint64_t, std::pair<CodeRange, std::set<uint64_t>>> by_fde;  // FDE start -> its targets
    for (uint64_t t : targets) {
        const std::optional<CodeRange> f = fde_at(t);
        if (!f) continue;
        auto& e = by_fde[f->start];
        e.first = *f;
        e.second.insert(t);
    }
    const CodeRange* best = nullptr;
    size_t most = 0, second = 0;
    for (const auto& [start, e] : by_fde) {
        const size_t n = e.second.size();
        if (n > most) {
            second = most;
            most = n;
            best = &e.first;
        } else if (n > second) {
            second = n;
        }
    }
    if (!best || most < kMinColdTargets || most <= 2 * second || covered(*best)) return std::nullopt;
    return *best;
}

std::optional<CodeRange> find_cold_part(Dwfl_Module* m, const std::string& function) {
    // The function's symbol, and every function symbol's range (the cold part has none).
    const int nsyms = dwfl_module_getsymtab(m);
    if (nsyms <= 0) return std::nullopt;
    std::optional<CodeRange> hot;
    std::vector<CodeRange> named;
    for (int i = 0; i < nsyms; i++) {
        GElf_Sym sym;
        GElf_Addr addr = 0;
        GElf_Word shndx = 0;
        const char* name = dwfl_module_getsym_info(m, i, &sym, &addr, &shndx, nullptr, nullptr);
        if (!name || GELF_ST_TYPE(sym.st_info) != STT_FUNC || shndx == SHN_UNDEF) continue;
        named.push_back({addr, addr + (sym.st_size ? sym.st_size : 1)});
        if (!hot && sym.st_size && function == name) hot = CodeRange{addr, addr + sym.st_size};
    }
    if (!hot) return std::nullopt;

    // Its bytes, from the file's section holding them.
    Dwarf_Addr off = hot->start, sbias = 0;
    Elf_Scn* scn = dwfl_module_address_section(m, &off, &sbias);
    GElf_Shdr sh;
    if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS) return std::nullopt;
    Elf_Data* data = elf_getdata(scn, nullptr);
    const uint64_t size = hot->end - hot->start;
    if (!data || !data->d_buf || off + size > data->d_size) return std::nullopt;
    const auto targets =
        rel32_jump_targets(static_cast<const uint8_t*>(data->d_buf) + off, size, hot->start);

    // The FDEs, from the file's .eh_frame (libdw's CFI lookup gives a row of an FDE, not its range).
    Dwarf_Addr ebias = 0;
    const std::vector<CodeRange> fdes = eh_frame_ranges(dwfl_module_getelf(m, &ebias));
    auto fde_at = [&](uint64_t pc) -> std::optional<CodeRange> {
        if (pc < ebias) return std::nullopt;
        const uint64_t a = pc - ebias;
        auto it = std::upper_bound(fdes.begin(), fdes.end(), a,
                                   [](uint64_t x, const CodeRange& r) { return x < r.start; });
        if (it == fdes.begin() || a >= (--it)->end) return std::nullopt;
        return CodeRange{it->start + ebias, it->end + ebias};
    };
    auto covered = [&](const CodeRange& r) {
        for (const CodeRange& s : named)
            if (s.start < r.end && r.start < s.end) return true;
        return false;
    };
    return pick_cold_part(targets, fde_at, covered);
}

}  // namespace pbp::native
