// native/merge.h: the merge rule of --native stacks. Frames are plain numbers here: Python
// frames 100+, native 200+, kernel 300+, the marker 999.
#include <gtest/gtest.h>

#include <vector>

#include "native/merge.h"

namespace {

using namespace pbp::native;

constexpr uint32_t kMarker = 999;

NativeRef keep(uint32_t f) { return {f, NativeRole::Keep}; }
NativeRef eval(uint32_t f = 250) { return {f, NativeRole::Eval}; }
NativeRef hidden(uint32_t f = 260) { return {f, NativeRole::Hidden}; }
PythonRef py(uint32_t f, bool entry = false) { return {f, entry}; }

TEST(NativeMerge, EvalNamesAndHiddenMachinery) {
    EXPECT_TRUE(is_eval_loop("_PyEval_EvalFrameDefault"));
    EXPECT_TRUE(is_eval_loop("_PyEval_EvalFrameDefault.cold"));
    EXPECT_FALSE(is_eval_loop("_PyEval_EvalFrame"));
    EXPECT_FALSE(is_eval_loop("PyEval_EvalCode"));
    EXPECT_TRUE(hidden_in_interpreter("_PyEval_Vector"));
    EXPECT_TRUE(hidden_in_interpreter("cfunction_vectorcall_O"));
    EXPECT_TRUE(hidden_in_interpreter("_PyObject_MakeTpCall.cold"));
    EXPECT_TRUE(hidden_in_interpreter("pymain_run_python"));
    EXPECT_FALSE(hidden_in_interpreter("time_sleep"));
    EXPECT_FALSE(hidden_in_interpreter("list_sort_impl"));
    EXPECT_FALSE(hidden_in_interpreter("builtin_sum"));
}

// 3.11+: two eval-loop calls, the inner running two Python frames (the outer of them its entry
// frame), the outer one running one; a C function between them, libc at the root.
TEST(NativeMerge, BlocksUpToTheirEntryFrames) {
    MergeInput in;
    in.kernel = {300, 301};
    in.native = {keep(200), hidden(), eval(), hidden(), keep(201), hidden(), eval(), keep(202)};
    in.native_complete = true;
    in.python = {py(100), py(101, true), py(102, true)};
    in.rule = EntryRule::Marked;
    MergeOutput m = merge(in, kMarker);
    EXPECT_TRUE(m.exact);
    EXPECT_EQ(m.leaf_first, (std::vector<uint32_t>{300, 301, 200, 100, 101, 201, 102, 202}));
}

TEST(NativeMerge, OneFramePerEvalCallBefore311) {
    MergeInput in;
    in.native = {keep(200), eval(), eval(), keep(202)};
    in.native_complete = true;
    in.python = {py(100), py(101)};
    in.rule = EntryRule::OnePerEval;
    MergeOutput m = merge(in, kMarker);
    EXPECT_TRUE(m.exact);
    EXPECT_EQ(m.leaf_first, (std::vector<uint32_t>{200, 100, 101, 202}));
}

// The unwind stopped early (the stack copy ended): what it saw is placed, then the marker, then
// the outer Python frames, none lost.
TEST(NativeMerge, IncompleteUnwindKeepsTheOuterPythonFrames) {
    MergeInput in;
    in.native = {keep(200), eval()};
    in.native_complete = false;
    in.python = {py(100, true), py(101, true), py(102, true)};
    MergeOutput m = merge(in, kMarker);
    EXPECT_FALSE(m.exact);
    EXPECT_EQ(m.leaf_first, (std::vector<uint32_t>{200, 100, kMarker, 101, 102}));
}

// More eval-loop calls than Python blocks: not the same stacks. The native frames above the
// first block, the marker, every Python frame once, in order.
TEST(NativeMerge, MismatchKeepsEveryPythonFrameOnceInOrder) {
    MergeInput in;
    in.kernel = {300};
    in.native = {keep(200), eval(), keep(201), eval(), eval(), keep(202)};
    in.native_complete = true;
    in.python = {py(100, true), py(101, true)};
    MergeOutput m = merge(in, kMarker);
    EXPECT_FALSE(m.exact);
    EXPECT_EQ(m.leaf_first, (std::vector<uint32_t>{300, 200, kMarker, 100, 101}));
}

// A block whose entry frame never comes (the marks are missing): the same fallback.
TEST(NativeMerge, MissingEntryMarkFallsBack) {
    MergeInput in;
    in.native = {eval(), keep(202)};
    in.native_complete = true;
    in.python = {py(100), py(101)};
    MergeOutput m = merge(in, kMarker);
    EXPECT_FALSE(m.exact);
    EXPECT_EQ(m.leaf_first, (std::vector<uint32_t>{kMarker, 100, 101}));
}

// Python frames no eval-loop call claimed, with a complete unwind: not exact, none lost.
TEST(NativeMerge, UnclaimedPythonFramesFallBack) {
    MergeInput in;
    in.native = {keep(200), eval(), keep(202)};
    in.native_complete = true;
    in.python = {py(100, true), py(101, true)};
    MergeOutput m = merge(in, kMarker);
    EXPECT_FALSE(m.exact);
    EXPECT_EQ(m.leaf_first, (std::vector<uint32_t>{200, kMarker, 100, 101}));
}

// A thread in C only: its native and kernel frames.
TEST(NativeMerge, NoPythonFrames) {
    MergeInput in;
    in.kernel = {300};
    in.native = {keep(200), keep(201)};
    in.native_complete = true;
    MergeOutput m = merge(in, kMarker);
    EXPECT_TRUE(m.exact);
    EXPECT_EQ(m.leaf_first, (std::vector<uint32_t>{300, 200, 201}));
}

}  // namespace
