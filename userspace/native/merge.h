// --native: one sample's kernel, native and Python frames made one stack (the merge rule).
//
// Innermost first: the kernel frames, then the native frames; each native frame of the eval
// loop (_PyEval_EvalFrameDefault, its .cold part too) stands for the block of Python frames that
// one call of it ran, from the innermost Python frame not yet placed up to that block's entry
// frame (3.11+: the walk marks entry frames; before 3.11 each call runs one frame). The other
// frames of the interpreter's own file are either call machinery, hidden (hidden_in_interpreter),
// or kept: C functions that do work a user wants to see (time_sleep, list_sort, builtin_sum,
// the GC, the import machinery's C parts).
//
// When the frames do not fit (an eval frame without a Python block left, a Python frame that no
// eval frame claimed, a native unwind that stopped early) the sample keeps all its Python frames,
// in order, and a synthetic "[native stack incomplete]" frame marks where the native part is
// missing. Python frames are never dropped, duplicated or reordered.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pbp::native {

enum class NativeRole : uint8_t {
    Keep,    // shown
    Eval,    // an eval-loop frame: replaced by its block of Python frames
    Hidden,  // the interpreter's call machinery between Python frames and C functions
};

// The eval loop's function: every CPython since 3.6 runs its Python frames in it.
constexpr const char* kEvalLoop = "_PyEval_EvalFrameDefault";

// Is name (a native function's) the eval loop's? "_PyEval_EvalFrameDefault" and its
// compiler-split parts ("_PyEval_EvalFrameDefault.cold", ".part.0").
bool is_eval_loop(const std::string& name);
// Is name, a function of the interpreter's own file (python3.x or libpython), call machinery?
bool hidden_in_interpreter(const std::string& name);

enum class EntryRule : uint8_t {
    OnePerEval,  // <= 3.10
    Marked,      // 3.11+: PythonRef::entry
};

struct PythonRef {
    uint32_t frame;  // an interned frame
    bool entry;      // the first frame of its eval-loop call (EntryRule::Marked)
};

struct NativeRef {
    uint32_t frame;
    NativeRole role;
};

struct MergeInput {
    std::vector<uint32_t> kernel;   // leaf first
    std::vector<NativeRef> native;  // leaf first
    bool native_complete = false;   // the unwind reached the outermost frame
    std::vector<PythonRef> python;  // leaf first
    EntryRule rule = EntryRule::Marked;
};

struct MergeOutput {
    std::vector<uint32_t> leaf_first;
    bool exact = false;  // false: the marker frame is in it
};

// incomplete: the interned "[native stack incomplete]" frame.
MergeOutput merge(const MergeInput& in, uint32_t incomplete);

}  // namespace pbp::native
