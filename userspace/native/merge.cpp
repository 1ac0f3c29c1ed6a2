#include "native/merge.h"

#include <cstring>

namespace pbp::native {

namespace {

// A name without its compiler-split suffix: "f.cold", "f.part.0", "f.isra.0" -> "f".
std::string base_name(const std::string& name) {
    const auto dot = name.find('.');
    return dot == std::string::npos ? name : name.substr(0, dot);
}

}  // namespace

bool is_eval_loop(const std::string& name) { return base_name(name) == kEvalLoop; }

bool hidden_in_interpreter(const std::string& name) {
    // Calls from one Python frame to the next, or to a C function, and the interpreter's
    // start: they only pass control on, and their number and names change with every minor
    // version, so showing them would make one program's profiles differ by interpreter.
    static const char* const kPrefixes[] = {
        "_PyEval_", "PyEval_", "_PyObject_Vectorcall", "PyObject_Vectorcall", "_PyObject_Call",
        "PyObject_Call", "_PyObject_MakeTpCall", "_PyFunction_Vectorcall", "_PyVectorcall_Call",
        "PyVectorcall_Call", "method_vectorcall", "cfunction_", "vectorcall_", "_PyCFunction",
        "PyCFunction_Call", "slot_tp_call", "object_vacall", "_PyObject_FastCall",
        "gen_send_ex", "gen_iternext", "_PyGen_", "run_eval_code_obj", "run_mod", "pyrun_",
        "PyRun_", "_PyRun_", "pymain_", "Py_RunMain", "Py_BytesMain", "builtin_exec",
        "_PyEval_Vector", "_Py_call_instrumentation",
        // 3.6 .. 3.8
        "call_function", "fast_function", "do_call_core", "_PyFunction_FastCall", "function_code_fastcall",
        "_PyMethodDef_Raw", "_PyMethodDescr_", "Py_Main", "_Py_RunMain",
    };
    const std::string b = base_name(name);
    for (const char* p : kPrefixes)
        if (b.compare(0, std::strlen(p), p) == 0) return true;
    return false;
}

MergeOutput merge(const MergeInput& in, uint32_t incomplete) {
    MergeOutput out;
    out.leaf_first = in.kernel;
    size_t p = 0;  // the next Python frame to place (leaf first)
    bool fits = true;
    for (const NativeRef& n : in.native) {
        if (n.role == NativeRole::Hidden) continue;
        if (n.role == NativeRole::Keep) {
            out.leaf_first.push_back(n.frame);
            continue;
        }
        if (p >= in.python.size()) {  // an eval-loop call with no Python frame left
            fits = false;
            break;
        }
        if (in.rule == EntryRule::OnePerEval) {
            out.leaf_first.push_back(in.python[p++].frame);
            continue;
        }
        bool entry = false;
        while (p < in.python.size() && !entry) {
            entry = in.python[p].entry;
            out.leaf_first.push_back(in.python[p++].frame);
        }
        if (!entry) {  // the block ran out of Python frames before its entry frame
            fits = false;
            break;
        }
    }
    if (fits && in.native_complete && p == in.python.size()) {
        out.exact = true;
        return out;
    }
    if (fits && !in.native_complete) {
        // The unwind stopped early (the stack copy's end): what it saw is placed; the outer
        // Python frames follow the marker.
        out.leaf_first.push_back(incomplete);
        for (; p < in.python.size(); p++) out.leaf_first.push_back(in.python[p].frame);
        return out;
    }
    // Not the same stacks (eval frames and Python blocks do not pair up): the native frames
    // above the first Python block, the marker, and every Python frame.
    out.leaf_first = in.kernel;
    for (const NativeRef& n : in.native) {
        if (n.role == NativeRole::Eval) break;
        if (n.role == NativeRole::Keep) out.leaf_first.push_back(n.frame);
    }
    out.leaf_first.push_back(incomplete);
    for (const PythonRef& r : in.python) out.leaf_first.push_back(r.frame);
    return out;
}

}  // namespace pbp::native
