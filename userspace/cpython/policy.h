// Per-version policy: what the facts found about an interpreter (its ELF symbols, sections
// and strings, the memory at _PyRuntime, a code object's fields) mean for its CPython
// version. Discovery (targets/) finds the facts and the symbolizer (engine/) reads code
// objects; both ask here what they mean, so no version check lives outside cpython/.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cpython/layout.h"
#include "sys/target_memory.h"

namespace pbp::cpython {

// ---- ELF symbols --------------------------------------------------------------------------

inline constexpr const char* kSymRuntime = "_PyRuntime";    // _PyRuntimeState, 3.7+
inline constexpr const char* kSymVersion = "Py_Version";    // PY_VERSION_HEX, 3.11+
inline constexpr const char* kSymCodeType = "PyCode_Type";  // every version
inline constexpr const char* kSymTstateCurrent = "_PyThreadState_Current";  // 3.6
inline constexpr const char* kSymInterpHead = "interp_head";  // 3.6: the static list head
// The section _PyRuntime lives in (3.7+): still there when the symbols are stripped.
inline constexpr const char* kRuntimeSection = ".PyRuntime";

// Every symbol above, to look them all up in one pass over an ELF file.
const std::vector<std::string>& runtime_symbols();

// Whether an ELF file holds a CPython runtime, given which of runtime_symbols() it has:
// _PyRuntime (or its .PyRuntime section), or, in 3.6, which has neither,
// _PyThreadState_Current with PyCode_Type.
bool holds_runtime(const std::map<std::string, uint64_t>& syms, bool has_runtime_section);

// ---- the version ----------------------------------------------------------------------------

// "python3.11" anywhere in 'name' (a soname, a path, "python" + a version string):
// major and minor only. nullopt when there is none.
std::optional<Version> version_from_name(const std::string& name);

// The version of the interpreter in an ELF file, from the best fact it has: the contents of
// Py_Version (3.11+, exact), else "pythonX.Y" in its soname, then in its path, else the
// first X.Y.Z string of its .rodata. Unknown (Version::known() false) when none says.
Version infer_version(std::optional<uint32_t> py_version, const std::string& soname,
                      const std::string& path, const std::vector<std::string>& version_strings);

// ---- the layout -----------------------------------------------------------------------------

struct LayoutChoice {
    std::optional<Layout> layout;
    std::string error;    // why there is none: what reading _Py_DebugOffsets said; may be empty
    std::string warning;  // e.g. a version newer than the newest tested
};

// The layout of an interpreter of version 'ver' (unknown allowed) whose _PyRuntime is at
// runtime_addr in mem (0: it has none). 3.13+ and unknown versions: _Py_DebugOffsets, read
// at _PyRuntime (which also tells the version). 3.6 .. 3.12: the built-in tables. The
// layout's version is always known.
LayoutChoice choose_layout(Version ver, uint64_t runtime_addr, MemoryReader& mem);

// The address of the pointer to the first PyInterpreterState: a field of _PyRuntime (3.7+),
// or 3.6's static interp_head (interp_head_sym: its address in the target, 0 when the
// symbol is missing). 0 with 'error' set when the layout's way is not available.
uint64_t interp_head_address(const Layout& layout, uint64_t runtime_addr, uint64_t interp_head_sym,
                             std::string& error);

// ---- code objects -------------------------------------------------------------------------

// Whether a code object is 3.13+'s _Py_InitCleanup shim rather than Python code: a static
// code object pushed between a caller and the Python __init__ a specialized class call runs
// (CALL_ALLOC_AND_ENTER_INIT). Its frame is owned by the thread like a real one; it is known
// by its co_filename, co_name and co_qualname all being the one "__init__" string.
// qualname/name/filename: the fields' values (object addresses, 0 when absent); name_text:
// the name read from them.
bool is_init_cleanup_shim(Version v, uint64_t qualname, uint64_t name, uint64_t filename,
                          std::string_view name_text);

}  // namespace pbp::cpython
