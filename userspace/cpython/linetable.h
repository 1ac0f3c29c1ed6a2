// Instruction offset -> line number, for each line-table format CPython has used.
#pragma once
#include <cstdint>
#include <string_view>

#include "cpython/layout.h"

namespace pbp::cpython {

// 'instr' is what BPF recorded (enum pbp_instr_kind): a byte offset for <= 3.9,
// a code-unit index for 3.10 (f_lasti) and for 3.11+ (pointer-derived).
// Returns the line of the instruction at that offset, exactly as CPython's
// PyCode_Addr2Line does; 0 when the instruction has no line (3.10+), the offset is past
// the end of the table, or instr is PBP_INSTR_UNKNOWN. (co_lnotab does not record the
// code length, so there an offset past the end gives the last line.) BPF records a
// frame that has not started yet as instr 0, the function's first instruction.
int line_for_instr(LineTableFormat fmt, std::string_view table, int firstlineno, uint32_t instr);

// "lnotab", "linetable310", "locations311".
const char* line_table_format_name(LineTableFormat fmt);

}  // namespace pbp::cpython
