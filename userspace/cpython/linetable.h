// Instruction offset -> line number, for each line-table format CPython has used.
#pragma once
#include <cstdint>
#include <string_view>

#include "cpython/layout.h"

namespace pbp::cpython {

// 'instr' is what BPF recorded (enum pbp_instr_kind): a byte offset for <= 3.9,
// a code-unit index for 3.10 (f_lasti) and for 3.11+ (pointer-derived).
// Returns the line of the instruction at that offset; firstlineno when the table
// has no entry for it; 0 when the line is unknown (e.g. PBP_INSTR_UNKNOWN).
int line_for_instr(LineTableFormat fmt, std::string_view table, int firstlineno, uint32_t instr);

}  // namespace pbp::cpython
