// Instruction offset -> line number, decoded exactly as CPython does it.
//
// Each decoder mirrors the interpreter's own PyCode_Addr2Line for that format, with
// one difference: every read is bounds-checked, so a truncated or garbage table
// (e.g. read from a process that was freeing the code object) yields 0 or a
// meaningless line, never an out-of-bounds read. Every loop advances through the
// table at least one byte per iteration, so decoding is O(table size).
#include "cpython/linetable.h"

#include <climits>

#include "pybpfprof/abi.h"

namespace pbp::cpython {
namespace {

// A line as the caller sees it: CPython's "no line" (-1) and anything a garbage table
// can produce that is not a plausible line number become 0.
int as_line(int64_t line) {
    if (line < 0 || line > INT_MAX) return 0;
    return static_cast<int>(line);
}

// <= 3.9, co_lnotab: pairs (byte offset increment: uint8, line increment: int8).
// Line increments are signed since 3.6 (bpo-26107). CPython 3.6-3.9:
//
//     while (--size >= 0) {           // size = len(co_lnotab) / 2
//         addr += *p++;
//         if (addr > addrq) break;
//         line += (signed char)*p; p++;
//     }
//     return line;                    // starts at co_firstlineno
//
// The table does not say how long the bytecode is, so an offset past the last entry
// gets the last line, as in CPython. A trailing odd byte is ignored (size rounds down).
int lnotab_line(std::string_view t, int firstlineno, uint32_t addrq) {
    const auto* p = reinterpret_cast<const uint8_t*>(t.data());
    const size_t pairs = t.size() / 2;
    int64_t line = firstlineno;
    uint64_t addr = 0;
    for (size_t i = 0; i < pairs; i++) {
        addr += p[2 * i];
        if (addr > addrq) break;
        line += static_cast<int8_t>(p[2 * i + 1]);
    }
    return as_line(line);
}

// 3.10, co_linetable: pairs (byte length of the range: uint8, line delta: int8), where
// a line delta of -128 means "this range has no line" (and leaves the running line
// unchanged). Ranges of length 0 only carry line deltas (deltas > 127 are split that
// way). PyCode_Addr2Line(co, f_lasti * 2) walks the ranges until one ends after the
// offset; ranges are contiguous from 0, so that range contains it. An offset past the
// last range has no line (-1 in CPython).
int linetable310_line(std::string_view t, int firstlineno, uint32_t instr) {
    const auto* p = reinterpret_cast<const uint8_t*>(t.data());
    const uint64_t addrq = uint64_t{instr} * 2;  // f_lasti counts code units
    int64_t computed = firstlineno;
    uint64_t end = 0;
    for (size_t i = 0; i + 1 < t.size(); i += 2) {
        end += p[i];
        const int ldelta = static_cast<int8_t>(p[i + 1]);
        int64_t line = -1;
        if (ldelta != -128) {
            computed += ldelta;
            line = computed;
        }
        if (addrq < end) return as_line(line);
    }
    return 0;
}

// 3.11+ location table (Objects/locations.md). Each entry starts with a byte that has
// bit 7 set: bits 3-6 are the code, bits 0-2 the length in code units minus 1.
// Following bytes (bit 7 clear) hold the entry's data:
//   0-9   short form: 1 byte of columns; same line
//   10-12 one-line form: line delta = code - 10; 2 bytes of columns
//   13    no columns: svarint line delta
//   14    long form: svarint line delta, varint end-line delta, varint col, varint end col
//   15    no location: the range has no line; running line unchanged
// varint: 6-bit chunks, least significant first, bit 6 = "more follows".
// svarint: varint v, value = (v & 1) ? -(v >> 1) : (v >> 1).
//
// Mirrors advance()/_PyCode_CheckLineNumber() in Objects/codeobject.c: the line delta
// is decoded from the bytes after the entry's first byte (continuing while bit 6 is
// set, whatever bit 7 says), and the next entry is the next byte with bit 7 set.
// Only the very first byte of the table is taken as an entry start without checking
// bit 7 (CPython asserts it; release builds decode it anyway).

// CPython's scan_varint, stopping at the end of the table instead of reading past it.
uint32_t scan_varint(const uint8_t* p, size_t pos, size_t n) {
    if (pos >= n) return 0;
    uint32_t read = p[pos++];
    uint32_t val = read & 63;
    unsigned shift = 0;
    while ((read & 64) && pos < n) {
        read = p[pos++];
        shift += 6;
        if (shift < 32) val |= (read & 63u) << shift;
    }
    return val;
}

int64_t scan_signed_varint(const uint8_t* p, size_t pos, size_t n) {
    const uint32_t uval = scan_varint(p, pos, n);
    if (uval & 1) return -static_cast<int64_t>(uval >> 1);
    return static_cast<int64_t>(uval >> 1);
}

int64_t location_line_delta(const uint8_t* p, size_t pos, size_t n) {
    switch ((p[pos] >> 3) & 15) {
        case 13:  // PY_CODE_LOCATION_INFO_NO_COLUMNS
        case 14:  // PY_CODE_LOCATION_INFO_LONG
            return scan_signed_varint(p, pos + 1, n);
        case 11:  // PY_CODE_LOCATION_INFO_ONE_LINE1
            return 1;
        case 12:  // PY_CODE_LOCATION_INFO_ONE_LINE2
            return 2;
        default:  // 15 NONE, 10 ONE_LINE0, 0-9 short forms: same line
            return 0;
    }
}

int locations311_line(std::string_view t, int firstlineno, uint32_t instr) {
    const auto* p = reinterpret_cast<const uint8_t*>(t.data());
    const size_t n = t.size();
    const uint64_t target = instr;  // code units, like the table's lengths
    int64_t computed = firstlineno;
    uint64_t end = 0;
    size_t pos = 0;
    while (pos < n) {
        const uint8_t first = p[pos];
        computed += location_line_delta(p, pos, n);
        const bool no_line = (first >> 3) == 0x1f;  // code 15 (with bit 7 set)
        end += (first & 7u) + 1;
        if (target < end) return no_line ? 0 : as_line(computed);
        do {
            pos++;
        } while (pos < n && (p[pos] & 128) == 0);
    }
    return 0;  // past the end of the table: CPython says -1
}

}  // namespace

int line_for_instr(LineTableFormat fmt, std::string_view table, int firstlineno, uint32_t instr) {
    if (instr == PBP_INSTR_UNKNOWN) return 0;
    switch (fmt) {
        case LineTableFormat::Lnotab:
            return lnotab_line(table, firstlineno, instr);
        case LineTableFormat::Linetable310:
            return linetable310_line(table, firstlineno, instr);
        case LineTableFormat::Locations311:
            return locations311_line(table, firstlineno, instr);
    }
    return 0;
}

const char* line_table_format_name(LineTableFormat fmt) {
    switch (fmt) {
        case LineTableFormat::Lnotab: return "lnotab";
        case LineTableFormat::Linetable310: return "linetable310";
        case LineTableFormat::Locations311: return "locations311";
    }
    return "?";
}

}  // namespace pbp::cpython
