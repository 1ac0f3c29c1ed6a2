// libFuzzer target for the line-table decoders (cpython/linetable.h) of every format CPython
// has used: co_lnotab (<= 3.9), 3.10's co_linetable and 3.11+'s location table. The table
// comes from a profiled process's memory, which is not trusted. Run by tests/tools/run-fuzz
// --target line_table (ctest: Fuzz.LineTable), with ASan and UBSan.
//
// The input: byte 0 picks the format, bytes 1-4 the first line number, bytes 5-8 the
// instruction offset; the rest is the table. Checks, besides "no crash, no leak, no
// timeout": the same question gives the same answer, and PBP_INSTR_UNKNOWN gives 0.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "cpython/linetable.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using pbp::cpython::LineTableFormat;
    if (size < 9) return 0;
    const LineTableFormat formats[] = {LineTableFormat::Lnotab, LineTableFormat::Linetable310,
                                       LineTableFormat::Locations311};
    const LineTableFormat fmt = formats[data[0] % 3];
    int32_t first = 0;
    uint32_t instr = 0;
    std::memcpy(&first, data + 1, 4);
    std::memcpy(&instr, data + 5, 4);
    const std::string_view table(reinterpret_cast<const char*>(data + 9), size - 9);

    const int line = pbp::cpython::line_for_instr(fmt, table, first, instr);
    if (pbp::cpython::line_for_instr(fmt, table, first, instr) != line)
        pbp::fuzz::broken("fuzz_line_table", "the same lookup gave two lines", std::to_string(line));
    if (pbp::cpython::line_for_instr(fmt, table, first, PBP_INSTR_UNKNOWN) != 0)
        pbp::fuzz::broken("fuzz_line_table", "an unknown instruction has a line",
                          pbp::cpython::line_table_format_name(fmt));
    // 64 instructions spread over what the table could cover, as the symbolizer asks for
    // them (each lookup walks the table: more would time out on long tables).
    const uint64_t end = uint64_t(table.size()) * 16 + 2;
    for (uint64_t k = 0; k < 64; k++)
        (void)pbp::cpython::line_for_instr(fmt, table, first, uint32_t(std::min<uint64_t>(k * end / 64, 0xfffffffe)));
    return 0;
}
