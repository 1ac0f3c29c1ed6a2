// CPython 3.13+: decode _Py_DebugOffsets, the first member of _PyRuntimeState.
//
// The struct is only stable within a minor version, and its shape changed twice:
//   3.13  Include/internal/pycore_runtime.h         (584 bytes)
//   3.14  Include/internal/pycore_debug_offsets.h   (760 bytes): threads_main,
//         code_object_generation, tlbc_generation; frame stackpointer, tlbc_index;
//         code co_tlbc; new set_object, gen_object, llist_node, debugger_support sections
//   3.15  Include/internal/pycore_debug_offsets.h   (888 bytes): thread_state gained
//         base_frame, last_profiled_frame(_seq) (before thread_id) and holds_gil,
//         gil_requested, current_exception, exc_state; new err_stackitem and
//         heap_type_object sections; type_object tp_basicsize/tp_dictoffset; unicode
//         compactunicodeobject_size; gc frame/generation_stats.
// The mirrors below copy those headers field by field (3.13.0, Debian's 3.14.10 and 3.15.2),
// a section that did not change between minors written once; the static_asserts hold the
// sizes and section offsets printed by tests/tools/gen_layout_offsets.sh for the real headers.
//
// What the table does not say, and comes from the same headers instead:
//   - PyASCIIObject.state bit positions: {interned:2, kind:3, compact:1, ascii:1, ..} in
//     default builds and in 3.13 free-threaded builds; 3.14+ free-threaded builds make
//     'interned' an unsigned char, which moves kind/compact/ascii to bits 8/11/12.
//   - sizeof(PyCompactUnicodeObject) = sizeof(PyASCIIObject) + utf8_length + utf8 (3.13,
//     3.14; 3.15 publishes it).
//   - co_version: 'uint32_t co_version' follows co_firstlineno, co_nlocalsplus,
//     co_framesize, co_nlocals, co_ncellvars, co_nfreevars: co_firstlineno + 24 in 3.13,
//     3.14 and 3.15, default and free-threaded (cpython/code.h).
//   - frame owners (pycore_frame.h / pycore_interpframe_structs.h): 3.13 CSTACK = 3;
//     3.14 INTERPRETER = 3, CSTACK = 4; 3.15 INTERPRETER = 3.
//   - f_executable is a _PyStackRef from 3.14: low tag bits (Py_TAG_BITS, 3 or 1) cleared.
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "cpython/layout.h"

namespace pbp::cpython {

namespace {

// Sections, named after the members of _Py_DebugOffsets, each in the field order of every
// minor listed with it. A section that gained fields has one struct per shape.
struct RuntimeState {  // 3.13-3.15
    uint64_t size, finalizing, interpreters_head;
};
struct InterpreterState313 {
    uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
        gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
        gil_runtime_state_holder;
};
struct InterpreterState314 {  // 3.14, 3.15
    uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict, builtins,
        ceval_gil, gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
        gil_runtime_state_holder, code_object_generation, tlbc_generation;
};
struct ThreadState313 {  // 3.13, 3.14
    uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
        datastack_chunk, status;
};
struct ThreadState315 {
    uint64_t size, prev, next, interp, current_frame, base_frame, last_profiled_frame,
        last_profiled_frame_seq, thread_id, native_thread_id, datastack_chunk, status, holds_gil,
        gil_requested, current_exception, exc_state;
};
struct InterpreterFrame313 {
    uint64_t size, previous, executable, instr_ptr, localsplus, owner;
};
struct InterpreterFrame314 {  // 3.14, 3.15
    uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index;
};
struct CodeObject313 {
    uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
        localspluskinds, co_code_adaptive;
};
struct CodeObject314 {  // 3.14, 3.15
    uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
        localspluskinds, co_code_adaptive, co_tlbc;
};
struct PyObject {  // 3.13-3.15
    uint64_t size, ob_type;
};
struct TypeObject313 {  // 3.13, 3.14
    uint64_t size, tp_name, tp_repr, tp_flags;
};
struct TypeObject315 {
    uint64_t size, tp_name, tp_repr, tp_flags, tp_basicsize, tp_dictoffset;
};
struct ItemsObject {  // tuple_object, list_object: 3.13-3.15
    uint64_t size, ob_item, ob_size;
};
struct SetObject {  // 3.14, 3.15
    uint64_t size, used, table, mask;
};
struct DictObject {  // 3.13-3.15
    uint64_t size, ma_keys, ma_values;
};
struct FloatObject {  // 3.13-3.15
    uint64_t size, ob_fval;
};
struct LongObject {  // 3.13-3.15
    uint64_t size, lv_tag, ob_digit;
};
struct BytesObject {  // 3.13-3.15
    uint64_t size, ob_size, ob_sval;
};
struct UnicodeObject313 {  // 3.13, 3.14
    uint64_t size, state, length, asciiobject_size;
};
struct UnicodeObject315 {
    uint64_t size, state, length, asciiobject_size, compactunicodeobject_size;
};
struct Gc313 {  // 3.13, 3.14
    uint64_t size, collecting;
};
struct Gc315 {
    uint64_t size, collecting, frame, generation_stats_size, generation_stats;
};
struct GenObject {  // 3.14, 3.15
    uint64_t size, gi_name, gi_iframe, gi_frame_state;
};
struct LlistNode {  // 3.14, 3.15
    uint64_t next, prev;
};
struct DebuggerSupport {  // 3.14, 3.15
    uint64_t eval_breaker, remote_debugger_support, remote_debugging_enabled,
        debugger_pending_call, debugger_script_path, debugger_script_path_size;
};

namespace v313 {
struct DebugOffsets {
    char cookie[8];
    uint64_t version;
    uint64_t free_threaded;
    RuntimeState runtime_state;
    InterpreterState313 interpreter_state;
    ThreadState313 thread_state;
    InterpreterFrame313 interpreter_frame;
    CodeObject313 code_object;
    PyObject pyobject;
    TypeObject313 type_object;
    ItemsObject tuple_object, list_object;
    DictObject dict_object;
    FloatObject float_object;
    LongObject long_object;
    BytesObject bytes_object;
    UnicodeObject313 unicode_object;
    Gc313 gc;
};
static_assert(sizeof(DebugOffsets) == 584);
static_assert(offsetof(DebugOffsets, runtime_state) == 24);
static_assert(offsetof(DebugOffsets, interpreter_state) == 48);
static_assert(offsetof(DebugOffsets, thread_state) == 152);
static_assert(offsetof(DebugOffsets, thread_state.thread_id) == 192);
static_assert(offsetof(DebugOffsets, interpreter_frame) == 224);
static_assert(offsetof(DebugOffsets, code_object) == 272);
static_assert(offsetof(DebugOffsets, pyobject) == 352);
static_assert(offsetof(DebugOffsets, bytes_object) == 512);
static_assert(offsetof(DebugOffsets, unicode_object) == 536);
static_assert(offsetof(DebugOffsets, gc) == 568);
}  // namespace v313

namespace v314 {
struct DebugOffsets {
    char cookie[8];
    uint64_t version;
    uint64_t free_threaded;
    RuntimeState runtime_state;
    InterpreterState314 interpreter_state;
    ThreadState313 thread_state;
    InterpreterFrame314 interpreter_frame;
    CodeObject314 code_object;
    PyObject pyobject;
    TypeObject313 type_object;
    ItemsObject tuple_object, list_object;
    SetObject set_object;
    DictObject dict_object;
    FloatObject float_object;
    LongObject long_object;
    BytesObject bytes_object;
    UnicodeObject313 unicode_object;
    Gc313 gc;
    GenObject gen_object;
    LlistNode llist_node;
    DebuggerSupport debugger_support;
};
static_assert(sizeof(DebugOffsets) == 760);
static_assert(offsetof(DebugOffsets, runtime_state) == 24);
static_assert(offsetof(DebugOffsets, interpreter_state) == 48);
static_assert(offsetof(DebugOffsets, thread_state) == 176);
static_assert(offsetof(DebugOffsets, thread_state.thread_id) == 216);
static_assert(offsetof(DebugOffsets, interpreter_frame) == 248);
static_assert(offsetof(DebugOffsets, code_object) == 312);
static_assert(offsetof(DebugOffsets, pyobject) == 400);
static_assert(offsetof(DebugOffsets, bytes_object) == 592);
static_assert(offsetof(DebugOffsets, unicode_object) == 616);
static_assert(offsetof(DebugOffsets, gc) == 648);
static_assert(offsetof(DebugOffsets, gen_object) == 664);
static_assert(offsetof(DebugOffsets, debugger_support) == 712);
}  // namespace v314

namespace v315 {
struct DebugOffsets {
    char cookie[8];
    uint64_t version;
    uint64_t free_threaded;
    RuntimeState runtime_state;
    InterpreterState314 interpreter_state;
    ThreadState315 thread_state;
    struct {
        uint64_t exc_value;
    } err_stackitem;
    InterpreterFrame314 interpreter_frame;
    CodeObject314 code_object;
    PyObject pyobject;
    TypeObject315 type_object;
    struct {
        uint64_t size, ht_cached_keys;
    } heap_type_object;
    ItemsObject tuple_object, list_object;
    SetObject set_object;
    DictObject dict_object;
    FloatObject float_object;
    LongObject long_object;
    BytesObject bytes_object;
    UnicodeObject315 unicode_object;
    Gc315 gc;
    GenObject gen_object;
    LlistNode llist_node;
    DebuggerSupport debugger_support;
};
static_assert(sizeof(DebugOffsets) == 888);
static_assert(offsetof(DebugOffsets, runtime_state) == 24);
static_assert(offsetof(DebugOffsets, interpreter_state) == 48);
static_assert(offsetof(DebugOffsets, thread_state) == 176);
static_assert(offsetof(DebugOffsets, thread_state.thread_id) == 240);
static_assert(offsetof(DebugOffsets, interpreter_frame) == 312);
static_assert(offsetof(DebugOffsets, code_object) == 376);
static_assert(offsetof(DebugOffsets, pyobject) == 464);
static_assert(offsetof(DebugOffsets, heap_type_object) == 528);
static_assert(offsetof(DebugOffsets, bytes_object) == 688);
static_assert(offsetof(DebugOffsets, unicode_object) == 712);
static_assert(offsetof(DebugOffsets, gc) == 752);
static_assert(offsetof(DebugOffsets, gen_object) == 792);
static_assert(offsetof(DebugOffsets, debugger_support) == 840);
}  // namespace v315

static_assert(sizeof(v315::DebugOffsets) <= kDebugOffsetsReadSize);

// The newest minor whose struct shape is known. Newer minors with a valid cookie are decoded
// with this shape (and a warning); the plausibility checks below reject a shape that moved.
constexpr int kNewestKnownShape = 15;

// The fields the walker needs, whatever the shape.
struct Decoded {
    uint64_t version = 0, free_threaded = 0;
    uint64_t runtime_size = 0, interpreters_head = 0, finalizing = 0;
    uint64_t interp_size = 0, interp_next = 0, interp_threads_head = 0, interp_code_gen = 0;
    // the GIL: ceval.gil (a pointer), and the interpreter's own _gil and its fields, all
    // offsets inside PyInterpreterState
    uint64_t interp_ceval_gil = 0, interp_gil = 0, interp_gil_locked = 0, interp_gil_holder = 0;
    uint64_t tstate_size = 0, tstate_next = 0, tstate_current_frame = 0, tstate_thread_id = 0,
             tstate_native_thread_id = 0, tstate_status = 0;
    uint64_t frame_size = 0, frame_previous = 0, frame_executable = 0, frame_instr_ptr = 0,
             frame_owner = 0, frame_tlbc_index = 0;
    uint64_t code_size = 0, co_filename = 0, co_name = 0, co_qualname = 0, co_linetable = 0,
             co_firstlineno = 0, co_code_adaptive = 0, co_tlbc = 0;
    uint64_t object_size = 0, ob_type = 0;
    uint64_t bytes_size = 0, bytes_ob_size = 0, bytes_ob_sval = 0;
    uint64_t unicode_size = 0, unicode_state = 0, unicode_length = 0, ascii_size = 0,
             compact_size = 0;  // 0 = not published (before 3.15)
    // thread names (thread_names.cpp) and asyncio tasks (asyncio.cpp) both read ints
    uint64_t type_size = 0, tp_flags = 0, long_size = 0, lv_tag = 0, ob_digit = 0;
    // thread names (thread_names.cpp)
    uint64_t interp_modules = 0, tp_basicsize = 0, tp_dictoffset = 0, heap_type_size = 0,
             ht_cached_keys = 0;  // 0 = not published (before 3.15)
    uint64_t dict_size = 0, ma_keys = 0, ma_values = 0;
    // 3.14+: for the asyncio task reader (AsyncObjectLayout); sizes kept for the checks
    bool has_async = false;
    uint64_t set_size = 0, set_used = 0, set_table = 0, set_mask = 0, gen_size = 0, gen_iframe = 0,
             gen_frame_state = 0, frame_stackpointer = 0, llist_next = 0;
};

// The fields of one shape; those a shape does not have stay 0.
template <typename D> Decoded decode(const D& d) {
    Decoded r;
    r.version = d.version;
    r.free_threaded = d.free_threaded;
    r.runtime_size = d.runtime_state.size;
    r.interpreters_head = d.runtime_state.interpreters_head;
    r.finalizing = d.runtime_state.finalizing;
    r.interp_size = d.interpreter_state.size;
    r.interp_next = d.interpreter_state.next;
    r.interp_threads_head = d.interpreter_state.threads_head;
    r.interp_ceval_gil = d.interpreter_state.ceval_gil;
    r.interp_gil = d.interpreter_state.gil_runtime_state;
    r.interp_gil_locked = d.interpreter_state.gil_runtime_state_locked;
    r.interp_gil_holder = d.interpreter_state.gil_runtime_state_holder;
    r.tstate_size = d.thread_state.size;
    r.tstate_next = d.thread_state.next;
    r.tstate_current_frame = d.thread_state.current_frame;
    r.tstate_thread_id = d.thread_state.thread_id;
    r.tstate_native_thread_id = d.thread_state.native_thread_id;
    r.tstate_status = d.thread_state.status;
    r.frame_size = d.interpreter_frame.size;
    r.frame_previous = d.interpreter_frame.previous;
    r.frame_executable = d.interpreter_frame.executable;
    r.frame_instr_ptr = d.interpreter_frame.instr_ptr;
    r.frame_owner = d.interpreter_frame.owner;
    r.code_size = d.code_object.size;
    r.co_filename = d.code_object.filename;
    r.co_name = d.code_object.name;
    r.co_qualname = d.code_object.qualname;
    r.co_linetable = d.code_object.linetable;
    r.co_firstlineno = d.code_object.firstlineno;
    r.co_code_adaptive = d.code_object.co_code_adaptive;
    r.object_size = d.pyobject.size;
    r.ob_type = d.pyobject.ob_type;
    r.bytes_size = d.bytes_object.size;
    r.bytes_ob_size = d.bytes_object.ob_size;
    r.bytes_ob_sval = d.bytes_object.ob_sval;
    r.unicode_size = d.unicode_object.size;
    r.unicode_state = d.unicode_object.state;
    r.unicode_length = d.unicode_object.length;
    r.ascii_size = d.unicode_object.asciiobject_size;
    r.interp_modules = d.interpreter_state.imports_modules;
    r.type_size = d.type_object.size;
    r.tp_flags = d.type_object.tp_flags;
    r.dict_size = d.dict_object.size;
    r.ma_keys = d.dict_object.ma_keys;
    r.ma_values = d.dict_object.ma_values;
    r.long_size = d.long_object.size;
    r.lv_tag = d.long_object.lv_tag;
    r.ob_digit = d.long_object.ob_digit;
    if constexpr (requires { d.heap_type_object.ht_cached_keys; }) {  // 3.15+
        r.tp_basicsize = d.type_object.tp_basicsize;
        r.tp_dictoffset = d.type_object.tp_dictoffset;
        r.heap_type_size = d.heap_type_object.size;
        r.ht_cached_keys = d.heap_type_object.ht_cached_keys;
    }
    if constexpr (requires { d.gen_object.gi_iframe; }) {  // 3.14+
        r.has_async = true;
        r.set_size = d.set_object.size;
        r.set_used = d.set_object.used;
        r.set_table = d.set_object.table;
        r.set_mask = d.set_object.mask;
        r.gen_size = d.gen_object.size;
        r.gen_iframe = d.gen_object.gi_iframe;
        r.gen_frame_state = d.gen_object.gi_frame_state;
        r.frame_stackpointer = d.interpreter_frame.stackpointer;
        r.llist_next = d.llist_node.next;
    }
    if constexpr (requires { d.code_object.co_tlbc; }) {  // 3.14+
        r.interp_code_gen = d.interpreter_state.code_object_generation;
        r.frame_tlbc_index = d.interpreter_frame.tlbc_index;
        r.co_tlbc = d.code_object.co_tlbc;
    }
    if constexpr (requires { d.unicode_object.compactunicodeobject_size; })  // 3.15+
        r.compact_size = d.unicode_object.compactunicodeobject_size;
    return r;
}

template <typename D> D load(std::span<const uint8_t> raw) {
    static_assert(std::is_trivially_copyable_v<D>);
    D d;
    std::memcpy(&d, raw.data(), sizeof d);
    return d;
}

// A field offset must lie inside its struct and fit the u16 ABI fields.
bool field_ok(uint64_t off, uint64_t struct_size, uint64_t field_size) {
    return struct_size > 0 && struct_size < (1u << 24) && off + field_size <= struct_size &&
           off < PBP_OFF_NONE;
}

}  // namespace

std::optional<Layout> layout_from_debug_offsets(std::span<const uint8_t> raw, std::string& error,
                                                std::string& warning) {
    error.clear();
    warning.clear();
    constexpr size_t kHeader = 24;  // cookie[8], version, free_threaded
    if (raw.size() < kHeader) {
        error = "_Py_DebugOffsets: only " + std::to_string(raw.size()) + " bytes";
        return std::nullopt;
    }
    if (std::memcmp(raw.data(), "xdebugpy", 8) != 0) {
        error = "_Py_DebugOffsets: bad cookie (not \"xdebugpy\")";
        return std::nullopt;
    }
    uint64_t version_hex, ft;
    std::memcpy(&version_hex, raw.data() + 8, 8);
    std::memcpy(&ft, raw.data() + 16, 8);
    if (version_hex >> 32) {
        error = "_Py_DebugOffsets: implausible version field";
        return std::nullopt;
    }
    Version v = Version::from_hex(static_cast<uint32_t>(version_hex));
    if (v.major < 3 || (v.major == 3 && v.minor < 13)) {
        error = "_Py_DebugOffsets: version " + v.str() + " predates _Py_DebugOffsets (3.13)";
        return std::nullopt;
    }
    if (ft > 1) {
        error = "_Py_DebugOffsets: implausible free_threaded field";
        return std::nullopt;
    }

    // Shape: minor-exact for the known ones, the newest known shape beyond.
    int shape = v.major > 3 ? kNewestKnownShape : std::min<int>(v.minor, kNewestKnownShape);
    const bool newer = v.major > 3 || v.minor > kNewestTestedMinor;
    if (newer) {
        warning = "CPython " + v.str() + " is newer than the newest tested (3." +
                  std::to_string(kNewestTestedMinor) + "); decoding its _Py_DebugOffsets as 3." +
                  std::to_string(kNewestKnownShape);
    } else if (v.level == 0xA) {
        warning = "CPython " + v.str() + " is an alpha release; its _Py_DebugOffsets may not "
                  "match the final 3." + std::to_string(v.minor) + " layout";
    }
    size_t need = shape == 13 ? sizeof(v313::DebugOffsets)
                  : shape == 14 ? sizeof(v314::DebugOffsets)
                                : sizeof(v315::DebugOffsets);
    if (raw.size() < need) {
        error = "_Py_DebugOffsets: " + std::to_string(raw.size()) + " bytes, the 3." +
                std::to_string(shape) + " struct needs " + std::to_string(need);
        return std::nullopt;
    }
    const Decoded d = shape == 13   ? decode(load<v313::DebugOffsets>(raw))
                      : shape == 14 ? decode(load<v314::DebugOffsets>(raw))
                                    : decode(load<v315::DebugOffsets>(raw));

    // Plausibility: every offset inside its struct. A table whose shape moved (a newer minor)
    // fails here instead of yielding a walker that reads garbage.
    const struct {
        const char* name;
        uint64_t off, size, width;
    } fields[] = {
        {"runtime_state.interpreters_head", d.interpreters_head, d.runtime_size, 8},
        {"interpreter_state.next", d.interp_next, d.interp_size, 8},
        {"interpreter_state.threads_head", d.interp_threads_head, d.interp_size, 8},
        {"thread_state.next", d.tstate_next, d.tstate_size, 8},
        {"thread_state.current_frame", d.tstate_current_frame, d.tstate_size, 8},
        {"thread_state.thread_id", d.tstate_thread_id, d.tstate_size, 8},
        {"interpreter_frame.previous", d.frame_previous, d.frame_size, 8},
        {"interpreter_frame.executable", d.frame_executable, d.frame_size, 8},
        {"interpreter_frame.instr_ptr", d.frame_instr_ptr, d.frame_size, 8},
        {"interpreter_frame.owner", d.frame_owner, d.frame_size, 1},
        {"code_object.filename", d.co_filename, d.code_size, 8},
        {"code_object.name", d.co_name, d.code_size, 8},
        {"code_object.qualname", d.co_qualname, d.code_size, 8},
        {"code_object.linetable", d.co_linetable, d.code_size, 8},
        {"code_object.firstlineno", d.co_firstlineno, d.code_size, 4},
        {"code_object.co_code_adaptive", d.co_code_adaptive, d.code_size, 0},
        {"pyobject.ob_type", d.ob_type, d.object_size, 8},
        {"bytes_object.ob_size", d.bytes_ob_size, d.bytes_size, 8},
        {"bytes_object.ob_sval", d.bytes_ob_sval, d.bytes_size, 1},
        {"unicode_object.state", d.unicode_state, d.unicode_size, 4},
        {"unicode_object.length", d.unicode_length, d.unicode_size, 8},
        {"unicode_object.asciiobject_size", d.ascii_size, d.unicode_size, 0},
    };
    for (auto& f : fields) {
        if (!field_ok(f.off, f.size, f.width)) {
            error = "_Py_DebugOffsets " + v.str() + ": implausible " + f.name + " (" +
                    std::to_string(f.off) + " in a struct of " + std::to_string(f.size) + ")";
            return std::nullopt;
        }
    }
    const bool has_tlbc = ft && v.at_least(3, 14) && d.frame_tlbc_index && d.co_tlbc;
    if (has_tlbc && (!field_ok(d.frame_tlbc_index, d.frame_size, 4) ||
                     !field_ok(d.co_tlbc, d.code_size, 8))) {
        error = "_Py_DebugOffsets " + v.str() + ": implausible tlbc offsets";
        return std::nullopt;
    }
    if (d.co_code_adaptive < d.co_firstlineno || d.ascii_size < d.unicode_state + 4) {
        error = "_Py_DebugOffsets " + v.str() + ": implausible code/unicode offsets";
        return std::nullopt;
    }

    Layout l;
    l.version = v;
    l.free_threaded = ft != 0;
    l.line_format = LineTableFormat::Locations311;
    l.runtime_interp_head = d.interpreters_head;
    // _PyRuntimeState {_Py_DebugOffsets debug_offsets; int _initialized, preinitializing,
    // preinitialized, core_initialized, initialized; PyThreadState *_finalizing; ..} (3.13 ..
    // 3.15): 'initialized' is the int just before the pointer's 8-byte slot.
    if (d.finalizing >= 8 && d.finalizing % 8 == 0 && d.finalizing + 8 <= d.runtime_size) {
        l.runtime_finalizing = d.finalizing;
        l.runtime_initialized = d.finalizing - 8;
    }
    l.source = "_Py_DebugOffsets " + v.str() + (ft ? " free-threaded" : "");

    auto u16 = [](uint64_t x) { return static_cast<uint16_t>(x); };
    pbp_py_offsets& o = l.bpf;
    o = pbp_py_offsets{};
    o.py_version_hex = v.hex();
    o.frame_kind = PBP_FRAME_INTERP;
    o.instr_kind = PBP_INSTR_PTR;
    o.free_threaded = ft ? 1 : 0;
    // 3.14+: f_executable is a _PyStackRef; Py_TAG_BITS is 3 (default) or 1 (free-threaded),
    // objects are 8-aligned, so clearing 3 is right for both.
    o.executable_tag_mask = v.at_least(3, 14) ? 3 : 0;
    o.interp_next = u16(d.interp_next);
    o.interp_threads_head = u16(d.interp_threads_head);
    o.tstate_next = u16(d.tstate_next);
    o.tstate_thread_id = u16(d.tstate_thread_id);
    // Only for userspace's own reads (thread_stacks.h); a table without it still profiles.
    o.tstate_native_thread_id = field_ok(d.tstate_native_thread_id, d.tstate_size, 8)
                                    ? u16(d.tstate_native_thread_id)
                                    : PBP_OFF_NONE;
    o.tstate_frame = u16(d.tstate_current_frame);
    o.cframe_current_frame = PBP_OFF_NONE;
    o.cframe_previous = PBP_OFF_NONE;  // tstate->current_frame is set once, after the links
    o.frame_entry_off = PBP_OFF_NONE;
    o.tstate_root_cframe = PBP_OFF_NONE;
    // 3.14+: bumped first thing in code_dealloc (Objects/codeobject.c), for remote readers'
    // code object caches. Trusted in tested minors only: what it counts may change.
    o.interp_code_gen = !newer && d.interp_code_gen && field_ok(d.interp_code_gen, d.interp_size, 8)
                            ? u16(d.interp_code_gen)
                            : PBP_OFF_NONE;
    o.frame_previous = u16(d.frame_previous);
    o.frame_code = u16(d.frame_executable);
    o.frame_instr = u16(d.frame_instr_ptr);
    o.frame_owner = u16(d.frame_owner);
    o.frame_tlbc_index = has_tlbc ? u16(d.frame_tlbc_index) : PBP_OFF_NONE;
    o.code_ob_type = u16(d.ob_type);
    o.code_adaptive = u16(d.co_code_adaptive);
    o.code_tlbc = has_tlbc ? u16(d.co_tlbc) : PBP_OFF_NONE;
    o.csum_off[0] = u16(d.co_name);
    o.csum_size[0] = 8;
    o.csum_off[1] = u16(d.co_filename);
    o.csum_size[1] = 8;
    o.csum_off[2] = u16(d.co_firstlineno);
    o.csum_size[2] = 4;
    if (!newer) {
        o.csum_off[3] = u16(d.co_firstlineno + 24);  // uint32_t co_version, see the top
        o.csum_size[3] = 4;
    } else {  // where co_version lives is unknown: the line table pointer is immutable too
        o.csum_off[3] = u16(d.co_linetable);
        o.csum_size[3] = 8;
    }
    // Owners that are not Python frames: 3.13 CSTACK = 3; 3.14 INTERPRETER = 3, CSTACK = 4
    // (3.15 dropped CSTACK; bit 4 is then simply never matched).
    o.skip_owner_mask = v.at_least(3, 14) ? ((1u << 3) | (1u << 4)) : (1u << 3);
    // --native: every _PyEval_EvalFrameDefault call pushes a shim frame below its first frame,
    // owned by FRAME_OWNED_BY_CSTACK (3.13: 3) or FRAME_OWNED_BY_INTERPRETER (3.14+: 3).
    o.native_entry = PBP_NATIVE_ENTRY_SHIM;
    o.native_shim_owner = 3;
    // PyThreadState._status {initialized:1, bound:1, unbound:1, bound_gilstate:1, active:1,
    // ..} (cpython/pystate.h, 3.13-3.15): active is bit 4. Unknown in untested minors.
    if (!newer && field_ok(d.tstate_status, d.tstate_size, 4)) {
        o.tstate_status = u16(d.tstate_status);
        o.tstate_active_mask = 1u << 4;
    }

    // The GIL: interp->ceval.gil points to the interpreter's own _gil or to the main
    // interpreter's (a shared GIL); _Py_DebugOffsets gives locked and last_holder as offsets
    // of the interpreter's own _gil inside PyInterpreterState, the same inside any GIL struct.
    // Not published: the struct's size, 208 from 3.12 to 3.15 (pycore_gil.h, default builds).
    // Free-threaded builds have a GIL that is usually disabled: their samples say n/a.
    constexpr uint64_t kGilSize = 208;
    const bool gil_ok = !ft && field_ok(d.interp_ceval_gil, d.interp_size, 8) &&
                        field_ok(d.interp_gil, d.interp_size, kGilSize) &&
                        d.interp_gil_locked >= d.interp_gil && d.interp_gil_holder >= d.interp_gil &&
                        d.interp_gil_locked - d.interp_gil + 4 <= PBP_GIL_WINDOW &&
                        d.interp_gil_holder - d.interp_gil + 8 <= PBP_GIL_WINDOW &&
                        (d.interp_gil_locked - d.interp_gil) % 4 == 0 &&
                        (d.interp_gil_holder - d.interp_gil) % 8 == 0;
    if (gil_ok) {
        o.gil_where = PBP_GIL_WHERE_INTERP;
        o.interp_gil_ptr = u16(d.interp_ceval_gil);
        o.gil_locked = u16(d.interp_gil_locked - d.interp_gil);
        o.gil_last_holder = u16(d.interp_gil_holder - d.interp_gil);
        o.gil_size = u16(kGilSize);
    } else {
        o.gil_where = PBP_GIL_WHERE_NONE;
        o.interp_gil_ptr = o.gil_locked = o.gil_last_holder = PBP_OFF_NONE;
        o.gil_size = 0;
    }

    ObjectLayout& ob = l.obj;
    ob.co_filename = u16(d.co_filename);
    ob.co_name = u16(d.co_name);
    ob.co_qualname = u16(d.co_qualname);
    ob.co_firstlineno = u16(d.co_firstlineno);
    ob.co_linetable = u16(d.co_linetable);
    ob.bytes_size = u16(d.bytes_ob_size);
    ob.bytes_sval = u16(d.bytes_ob_sval);
    ob.unicode_length = u16(d.unicode_length);
    ob.unicode_state = u16(d.unicode_state);
    ob.unicode_ascii_size = u16(d.ascii_size);
    // PyCompactUnicodeObject {PyASCIIObject; Py_ssize_t utf8_length; char *utf8;}
    ob.unicode_compact_size = u16(d.compact_size ? d.compact_size : d.ascii_size + 16);
    if (ft && v.at_least(3, 14)) {  // unsigned char interned; unsigned int kind:3; ...
        ob.state_kind_shift = 8;
        ob.state_compact_bit = 11;
        ob.state_ascii_bit = 12;
    } else {  // unsigned int interned:2; kind:3; compact:1; ascii:1; ...
        ob.state_kind_shift = 2;
        ob.state_compact_bit = 5;
        ob.state_ascii_bit = 6;
    }

    // Thread names: what the table gives, else the headers (see gen_layout_offsets.c):
    // PyTypeObject {PyVarObject ob_base, tp_name, tp_basicsize, ..} puts tp_basicsize at
    // sizeof(PyObject) + 16 and tp_dictoffset at sizeof(PyObject) + 272;
    // offsetof(PyHeapTypeObject, ht_cached_keys) is 880 in 3.13 and 3.14 (896
    // free-threaded); PyModuleObject {PyObject_HEAD, md_dict}; MANAGED_DICT_OFFSET is -24
    // (-8 free-threaded: no GC pre-header); PyDictValues {capacity, size, embedded, valid,
    // values @8}. Left unknown (names from the OS) when a field does not fit its struct.
    const bool names_ok = !newer && field_ok(d.interp_modules, d.interp_size, 8) &&
                          field_ok(d.tp_flags, d.type_size, 8) && field_ok(d.ma_keys, d.dict_size, 8) &&
                          field_ok(d.ma_values, d.dict_size, 8) && field_ok(d.lv_tag, d.long_size, 8) &&
                          field_ok(d.ob_digit, d.long_size, 0) && d.ob_type + 8 <= d.object_size;
    if (names_ok) {
        ob.interp_modules = u16(d.interp_modules);
        ob.ob_type = u16(d.ob_type);
        ob.object_size = u16(d.object_size);
        ob.dict_ma_keys = u16(d.ma_keys);
        ob.dict_ma_values = u16(d.ma_values);
        ob.dict_keys = DictKeysFormat::Py311;
        ob.dict_values_skip = 8;
        ob.tp_flags = u16(d.tp_flags);
        ob.tp_basicsize = u16(d.tp_basicsize ? d.tp_basicsize : d.object_size + 16);
        ob.tp_dictoffset = u16(d.tp_dictoffset ? d.tp_dictoffset : d.object_size + 272);
        ob.ht_cached_keys = u16(d.ht_cached_keys ? d.ht_cached_keys : ft ? 896 : 880);
        ob.managed_dict = ManagedDict::Py313;
        ob.managed_dict_off = ft ? -8 : -24;
        ob.long_size = u16(d.lv_tag);
        ob.long_digits = u16(d.ob_digit);
        ob.long_tagged = true;
    }
    // --async (3.14+): only a table whose every field lies in its struct; else tasks are not
    // read (the profile is still right, without task names).
    AsyncObjectLayout& ao = l.async_objects;
    if (d.has_async && field_ok(d.tp_flags, d.type_size, 8) && field_ok(d.lv_tag, d.long_size, 8) &&
        d.ob_digit >= d.lv_tag + 8 && field_ok(d.set_used, d.set_size, 8) &&
        field_ok(d.set_table, d.set_size, 8) && field_ok(d.set_mask, d.set_size, 8) &&
        field_ok(d.gen_iframe, d.gen_size, 0) && field_ok(d.gen_frame_state, d.gen_size, 1) &&
        field_ok(d.frame_stackpointer, d.frame_size, 8) && d.llist_next < 16) {
        ao.known = true;
        ao.ob_type = d.ob_type;
        ao.tp_flags = d.tp_flags;
        ao.long_lv_tag = d.lv_tag;
        ao.long_ob_digit = d.ob_digit;
        ao.set_used = d.set_used;
        ao.set_table = d.set_table;
        ao.set_mask = d.set_mask;
        ao.gen_iframe = d.gen_iframe;
        ao.gen_frame_state = d.gen_frame_state;
        ao.frame_stackpointer = d.frame_stackpointer;
        ao.frame_owner = d.frame_owner;
        ao.llist_next = d.llist_next;
    }

    set_code_identity(l);
    std::string ferr;
    if (!finalize_bpf_offsets(o, ferr)) {
        error = "_Py_DebugOffsets " + v.str() + ": " + ferr;
        return std::nullopt;
    }
    return l;
}

}  // namespace pbp::cpython
