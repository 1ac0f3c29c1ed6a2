// --native: a function's cold part found without a symbol for it. GCC moves a function's
// unlikely paths into a separate piece of code ("f.cold", in .text.unlikely, far from f), with
// an FDE of its own in .eh_frame; the jumps of f's hot part to those paths are rel32 jumps to
// outside f. A stripped file keeps f's symbol (.dynsym, when f is exported) but not "f.cold"'s
// (a local one, only in .symtab): a pc in it has no name. Debian's python3.14 and python3.15
// run the eval loop's bytecode dispatch there (_PyEval_EvalFrameDefault's hot part is 1184 and
// 844 bytes, its cold part 84 and 82 KB), so every eval-loop frame of theirs is such a pc.
//
// Found from the file alone: the hot part's bytes are read for rel32 jumps (E9, 0F 80..8F) at
// every offset, and their targets outside it are counted by the FDE holding them. The cold
// part is the FDE that no symbol covers and that enough distinct targets land in; a linear
// read also sees jumps that are not instructions (bytes of other ones), whose targets scatter.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

typedef struct Dwfl_Module Dwfl_Module;
typedef struct Elf Elf;

namespace pbp::native {

struct CodeRange {
    uint64_t start = 0, end = 0;  // [start, end)
    bool operator==(const CodeRange& o) const { return start == o.start && end == o.end; }
};

// The targets of the rel32 jumps read at every offset of code (size bytes, its first byte at
// address addr) that fall outside [addr, addr + size): jmp (E9) and jcc (0F 80..8F).
std::vector<uint64_t> rel32_jump_targets(const uint8_t* code, size_t size, uint64_t addr);

// Every FDE's address range in .eh_frame of elf (the ELF's own addresses), sorted by start.
std::vector<CodeRange> eh_frame_ranges(Elf* elf);

// Fewest distinct jump targets in one FDE for it to be taken as the cold part (a tail call or
// a stray byte sequence gives one or two; the cold parts seen have 3 to hundreds).
constexpr size_t kMinColdTargets = 3;

// Of targets, the FDE range (fde_at: the FDE holding an address, if any) that the most distinct
// targets fall in, when there are at least kMinColdTargets of them, more than twice as many as
// in any other FDE, and covered(range) is false (no symbol names any of it).
std::optional<CodeRange> pick_cold_part(const std::vector<uint64_t>& targets,
                                        const std::function<std::optional<CodeRange>(uint64_t)>& fde_at,
                                        const std::function<bool(const CodeRange&)>& covered);

// The cold part of function (a symbol of m's, defined there) in module m, in m's addresses:
// none when m has no such symbol, no .eh_frame, or no FDE meets pick_cold_part's rule.
std::optional<CodeRange> find_cold_part(Dwfl_Module* m, const std::string& function);

}  // namespace pbp::native
