// Built-in struct offsets for CPython 3.6 .. 3.12 (x86_64, default GIL build).
//
// Every number below was taken from the CPython headers of that minor version
// (Include/pystate.h, Include/cpython/pystate.h, Include/internal/pycore_{interp,runtime,
// pystate,frame}.h, Include/frameobject.h / cpython/frameobject.h, Include/code.h /
// cpython/code.h, Include/bytesobject.h, Include/cpython/unicodeobject.h) by compiling
// tests/tools/gen_layout_offsets.c against them (tests/tools/gen_layout_offsets.sh), and is
// checked against the live interpreter by tests/unit/test_layout.cpp.
// Headers used: 3.6.15, 3.7.16, 3.8.18, 3.9.18, 3.10.13, 3.11.7, 3.12.1 (pyenv builds)
// and Debian's 3.11.2.
//
// 3.13 and later are not here: they publish _Py_DebugOffsets (debug_offsets.cpp).
#include "cpython/layout.h"

namespace pbp::cpython {

namespace {

constexpr uint16_t NONE = PBP_OFF_NONE;

// One minor version's offsets. Defaults: NONE (or 0) for what a version does not have; the
// str sizes of 3.6 .. 3.11.
struct Table {
    int minor = 0;
    pbp_frame_kind frame_kind = PBP_FRAME_OBJECT;
    pbp_instr_kind instr_kind = PBP_INSTR_LASTI_BYTES;
    // offsetof(_PyRuntimeState, interpreters.head); NONE for 3.6 (static interp_head)
    uint16_t runtime_interp_head = NONE;
    // PyInterpreterState
    uint16_t interp_next = 0, interp_threads_head = 0;  // tstate_head (<= 3.10), threads.head (3.11+)
    // PyThreadState
    uint16_t tstate_next = 0, tstate_thread_id = 0;
    uint16_t tstate_frame = 0;                 // frame (<= 3.10), cframe (3.11/3.12)
    uint16_t cframe_current_frame = NONE;      // _PyCFrame.current_frame
    // PyFrameObject (<= 3.10) / _PyInterpreterFrame (3.11+)
    uint16_t frame_previous = 0, frame_code = 0, frame_instr = 0, frame_owner = NONE;
    uint32_t skip_owner_mask = 0;
    // PyCodeObject
    uint16_t co_filename = 0, co_name = 0, co_qualname = NONE, co_firstlineno = 0, co_linetable = 0;
    uint16_t co_version = NONE, code_adaptive = NONE;
    // PyASCIIObject / PyCompactUnicodeObject sizes (3.12 dropped wstr and 'ready')
    uint16_t unicode_ascii_size = 48, unicode_compact_size = 72;
    // The eval loop's entry (see pbp_py_offsets.cframe_previous in abi.h): _PyCFrame.previous,
    // the byte and value that mark an entry frame, PyThreadState.root_cframe.
    uint16_t cframe_previous = NONE, frame_entry_off = NONE;
    uint8_t frame_entry_val = 0;
    uint16_t tstate_root_cframe = NONE;
    // PyThreadState._status and its 'active' bit; 0, 0 = not known
    uint16_t tstate_status = 0;
    uint8_t tstate_active_mask = 0;
    // PyThreadState.native_thread_id (3.11+)
    uint16_t tstate_native_thread_id = NONE;
    // The GIL: offsetof(_PyRuntimeState, ceval.gil) (3.7 .. 3.11), or
    // offsetof(PyInterpreterState, ceval.gil), a pointer (3.12); NONE where not.
    uint16_t runtime_gil = NONE, interp_gil_ptr = NONE;    // PyInterpreterState.modules (imports.modules in 3.12); offsetof(PyHeapTypeObject,
    // ht_cached_keys) (only read from 3.11, where instances keep values apart from a dict)
    uint16_t interp_modules = 0, ht_cached_keys = NONE;
    // offsetof(_PyRuntimeState, initialized) (an int) and _finalizing (a PyThreadState *, set by
    // Py_FinalizeEx and never cleared); NONE for 3.6 (static variables: runtime_phase.h).
    uint16_t runtime_initialized = NONE, runtime_finalizing = NONE;
};

// struct _gil_runtime_state {unsigned long interval; last_holder @8; int locked @16;
// unsigned long switch_number; pthread_cond_t cond @32; pthread_mutex_t mutex @80;
// switch_cond, switch_mutex (FORCE_SWITCHING, always defined)}: 208 bytes, the same in every
// version from 3.7 (ceval_gil.h / internal/gil.h / internal/pycore_gil.h) to 3.15 (default
// builds; the free-threaded one starts with 'int enabled').
constexpr uint16_t kGilLastHolder = 8, kGilLocked = 16, kGilSize = 208;

// A version whose offsets are an older one's but for those 'change' sets: each row below
// says only what its headers changed.
template <typename F> constexpr Table from(Table t, int minor, F change) {
    t.minor = minor;
    change(t);
    return t;
}

// 3.6: pystate.h struct _is {next, tstate_head}; struct _ts {prev, next, interp, frame, ..,
//      long thread_id @152}; frameobject.h PyFrameObject {PyObject_VAR_HEAD, f_back @24,
//      f_code @32, .., int f_lasti @120}; code.h PyCodeObject {.., int co_firstlineno @36,
//      .., co_filename @96, co_name @104, co_lnotab @112}.
constexpr Table k36 = {
    .minor = 6,
    .interp_next = 0, .interp_threads_head = 8,
    .tstate_next = 8, .tstate_thread_id = 152, .tstate_frame = 24,
    .frame_previous = 24, .frame_code = 32, .frame_instr = 120,
    .co_filename = 96, .co_name = 104, .co_firstlineno = 36, .co_linetable = 112,
    .interp_modules = 16,
};
// 3.7: _PyRuntimeState (internal/pystate.h) {initialized, core_initialized, finalizing,
//      interpreters{mutex, head @24}}; struct _ts gained exc_state etc: thread_id @176;
//      PyFrameObject lost f_exc_*: f_lasti @104.
//      The GIL: _PyRuntimeState.ceval.gil @1264 (3.6 has static variables instead).
constexpr Table k37 = from(k36, 7, [](Table& t) {
    t.runtime_interp_head = 24;
    t.runtime_gil = 1264;
    t.runtime_initialized = 0, t.runtime_finalizing = 8;
    t.tstate_thread_id = 176, t.frame_instr = 104;
    t.interp_modules = 40;
});
// 3.8: internal/pycore_pystate.h; _PyRuntimeState {4 ints, finalizing, interpreters{mutex,
//      head @32}}; cpython/code.h added co_posonlyargcount: co_firstlineno @40,
//      co_filename @104, co_name @112, co_lnotab @120. _PyRuntimeState.ceval.gil @1152.
constexpr Table k38 = from(k37, 8, [](Table& t) {
    t.runtime_interp_head = 32;
    t.runtime_gil = 1152;
    t.runtime_initialized = 12, t.runtime_finalizing = 16;  // after preinitializing, preinitialized, core_initialized
    t.co_firstlineno = 40, t.co_filename = 104, t.co_name = 112, t.co_linetable = 120;
    t.interp_modules = 56;
});
// 3.9: internal/pycore_runtime.h, pycore_interp.h; same offsets as 3.8 but the GIL:
//      _PyRuntimeState.ceval is smaller, ceval.gil @352 (3.10 too).
//      PyInterpreterState.modules @856 (3.10 too).
constexpr Table k39 = from(k38, 9, [](Table& t) {
    t.runtime_gil = 352;
    t.interp_modules = 856;
});
// 3.10: cpython/frameobject.h PyFrameObject {.., f_trace, f_stackdepth, f_trace_lines,
//       f_trace_opcodes, f_gen, int f_lasti @96} counts code units; co_linetable @120.
constexpr Table k310 = from(k39, 10, [](Table& t) {
    t.instr_kind = PBP_INSTR_LASTI_UNITS;
    t.frame_instr = 96;
});

// 3.11: _PyRuntimeState {5 ints (.., initialized @16), _finalizing @24, interpreters{mutex, head @40}};
//       struct _is {next, struct pythreads {next_unique_id, head @16}};
//       cpython/pystate.h struct _ts {prev, next, interp, .., _PyCFrame *cframe @56, ..,
//       thread_id @152}, _PyCFrame {use_tracing, current_frame @8, previous};
//       internal/pycore_frame.h _PyInterpreterFrame {f_func, f_globals, f_builtins,
//       f_locals, f_code @32, frame_obj, previous @48, prev_instr @56, stacktop, is_entry,
//       char owner @69}; cpython/code.h co_firstlineno @72, co_filename @112,
//       co_name @120, co_qualname @128, co_linetable @136, co_code_adaptive @184.
//       Owners: THREAD 0, GENERATOR 1, FRAME_OBJECT 2; nothing to skip.
//       The eval loop's entry: cpython/pystate.h _PyCFrame {uint8_t use_tracing,
//       current_frame @8, previous @16}; the frame a _PyEval_EvalFrameDefault call was
//       entered with has bool is_entry @68 set (internal/pycore_frame.h);
//       PyThreadState.root_cframe @336, native_thread_id @160.
constexpr Table k311 = {
    .minor = 11, .frame_kind = PBP_FRAME_INTERP_CFRAME, .instr_kind = PBP_INSTR_PTR,
    .runtime_interp_head = 40,
    .interp_next = 0, .interp_threads_head = 16,
    .tstate_next = 8, .tstate_thread_id = 152, .tstate_frame = 56, .cframe_current_frame = 8,
    .frame_previous = 48, .frame_code = 32, .frame_instr = 56, .frame_owner = 69,
    .co_filename = 112, .co_name = 120, .co_qualname = 128, .co_firstlineno = 72, .co_linetable = 136,
    .code_adaptive = 184,
    .cframe_previous = 16, .frame_entry_off = 68, .frame_entry_val = 1, .tstate_root_cframe = 336,
    .tstate_native_thread_id = 160,
    .runtime_gil = 360,  // _PyRuntimeState.ceval.gil (3.11.2 and 3.11.7 alike)
    .interp_modules = 888, .ht_cached_keys = 872,
    .runtime_initialized = 16, .runtime_finalizing = 24,  // after _initialized, preinitializing, ..
};
// 3.12: struct _is {next, id, id_refcount, requires_idref, id_mutex, _initialized,
//       finalizing, monitoring_version, last_restart_version, threads{.., head @72}};
//       struct _ts {prev, next, interp, struct {initialized:1, bound:1, unbound:1,
//       bound_gilstate:1, active:1, ..} _status @24, .., thread_id @136, cframe @56};
//       _PyCFrame {current_frame @0, previous @8};
//       _PyInterpreterFrame {f_code @0, previous @8, f_funcobj, f_globals, f_builtins,
//       f_locals, frame_obj, prev_instr @56, stacktop, return_offset, char owner @70};
//       code.h co_firstlineno @68, uint32_t co_version @92, co_filename @112,
//       co_name @120, co_qualname @128, co_linetable @136, co_code_adaptive @192.
//       unicodeobject.h: wstr removed, sizeof(PyASCIIObject) 40, compact 56.
//       FRAME_OWNED_BY_CSTACK = 3 (pycore_frame.h): each _PyEval_EvalFrameDefault call
//       links its frame to such an entry frame on the C stack, and no other frame has that
//       owner (Python/ceval.c). PyThreadState.root_cframe @272, native_thread_id @144.
//       The GIL moved into the interpreter (per-interpreter GIL, PEP 684): struct _is
//       {.., struct _ceval_state ceval {eval_breaker, gil_drop_request, recursion_limit,
//       struct _gil_runtime_state *gil @384 (in the interpreter), ..}, .., _gil}.
constexpr Table k312 = from(k311, 12, [](Table& t) {
    t.runtime_gil = NONE, t.interp_gil_ptr = 384;
    t.interp_threads_head = 72;
    t.tstate_thread_id = 136, t.cframe_current_frame = 0;
    t.tstate_status = 24, t.tstate_active_mask = 1u << 4;  // _status.active
    t.frame_previous = 8, t.frame_code = 0, t.frame_owner = 70, t.skip_owner_mask = 1u << 3;
    t.co_firstlineno = 68, t.co_version = 92, t.code_adaptive = 192;
    t.unicode_ascii_size = 40, t.unicode_compact_size = 56;
    t.cframe_previous = 8, t.frame_entry_off = 70, t.frame_entry_val = 3, t.tstate_root_cframe = 272;
    t.tstate_native_thread_id = 144;
    t.interp_modules = 944, t.ht_cached_keys = 880;  // interp->imports.modules
});

constexpr Table kTables[] = {k36, k37, k38, k39, k310, k311, k312};

}  // namespace

std::optional<Layout> builtin_layout(Version v, bool free_threaded) {
    if (free_threaded || v.major != 3) return std::nullopt;  // free-threading is 3.13+
    const Table* t = nullptr;
    for (const auto& row : kTables)
        if (row.minor == v.minor) t = &row;
    if (!t) return std::nullopt;

    Layout l;
    l.version = v;
    l.free_threaded = false;
    l.line_format = v.minor <= 9    ? LineTableFormat::Lnotab
                    : v.minor == 10 ? LineTableFormat::Linetable310
                                    : LineTableFormat::Locations311;
    l.source = "table 3." + std::to_string(v.minor);
    if (t->runtime_interp_head != NONE) l.runtime_interp_head = t->runtime_interp_head;
    if (t->runtime_initialized != NONE) l.runtime_initialized = t->runtime_initialized;
    if (t->runtime_finalizing != NONE) l.runtime_finalizing = t->runtime_finalizing;

    pbp_py_offsets& o = l.bpf;
    o = pbp_py_offsets{};
    o.py_version_hex = v.hex();
    o.frame_kind = static_cast<uint8_t>(t->frame_kind);
    o.instr_kind = static_cast<uint8_t>(t->instr_kind);
    o.free_threaded = 0;
    o.executable_tag_mask = 0;  // f_code is a plain PyObject* before 3.14
    o.interp_next = t->interp_next;
    o.interp_threads_head = t->interp_threads_head;
    o.tstate_next = t->tstate_next;
    o.tstate_thread_id = t->tstate_thread_id;
    o.tstate_frame = t->tstate_frame;
    o.cframe_current_frame = t->cframe_current_frame;
    o.frame_previous = t->frame_previous;
    o.frame_code = t->frame_code;
    o.frame_instr = t->frame_instr;
    o.frame_owner = t->frame_owner;
    o.frame_tlbc_index = NONE;
    o.code_ob_type = 8;  // PyObject {ob_refcnt, ob_type}
    o.code_adaptive = t->code_adaptive;
    o.code_tlbc = NONE;
    // Checksum: immutable fields only. co_name, co_filename, co_firstlineno, then co_version
    // (a per-creation counter, 3.12+) or else the line table object pointer.
    o.csum_off[0] = t->co_name;
    o.csum_size[0] = 8;
    o.csum_off[1] = t->co_filename;
    o.csum_size[1] = 8;
    o.csum_off[2] = t->co_firstlineno;
    o.csum_size[2] = 4;
    if (t->co_version != NONE) {
        o.csum_off[3] = t->co_version;
        o.csum_size[3] = 4;
    } else {
        o.csum_off[3] = t->co_linetable;
        o.csum_size[3] = 8;
        // No per-creation field before 3.12: check co_name by its contents (its hash, cached
        // since names are interned) rather than by its address, which is often reused.
        o.csum_str_mask = 1u << 0;
    }
    o.skip_owner_mask = t->skip_owner_mask;
    o.cframe_previous = t->cframe_previous;
    o.frame_entry_off = t->frame_entry_off;
    o.frame_entry_val = t->frame_entry_val;
    // --native: how an eval-loop call's first frame is told. 3.11 marks it (is_entry); 3.12
    // pushes a shim frame owned by FRAME_OWNED_BY_CSTACK (3) below it; before 3.11 each call
    // evaluates one frame.
    if (t->frame_entry_val == 1) {
        o.native_entry = PBP_NATIVE_ENTRY_FLAG;
    } else if (t->frame_owner != NONE) {
        o.native_entry = PBP_NATIVE_ENTRY_SHIM;
        o.native_shim_owner = 3;
    } else {
        o.native_entry = PBP_NATIVE_ENTRY_ONE;
    }
    o.tstate_root_cframe = t->tstate_root_cframe;
    o.interp_code_gen = NONE;  // 3.14+ only (_Py_DebugOffsets)
    o.tstate_status = t->tstate_status;
    o.tstate_active_mask = t->tstate_active_mask;
    o.tstate_native_thread_id = t->tstate_native_thread_id;
    o.interp_gil_ptr = t->interp_gil_ptr;
    if (t->runtime_gil != NONE) {
        l.runtime_gil = t->runtime_gil;
        o.gil_where = PBP_GIL_WHERE_ADDR;
    } else if (t->interp_gil_ptr != NONE) {
        o.gil_where = PBP_GIL_WHERE_INTERP;
    } else {  // 3.6: gil_locked, gil_last_holder, gil_mutex, .. are separate static variables
        // whose addresses come from the ELF symbol table (cpython/gil.h: locate_gil_statics).
        o.gil_where = PBP_GIL_WHERE_STATICS;
    }
    if (o.gil_where != PBP_GIL_WHERE_STATICS) {
        o.gil_locked = kGilLocked;
        o.gil_last_holder = kGilLastHolder;
        o.gil_size = kGilSize;
    } else {
        o.gil_locked = o.gil_last_holder = NONE;
        o.gil_size = 0;
    }

    ObjectLayout& ob = l.obj;
    ob.co_filename = t->co_filename;
    ob.co_name = t->co_name;
    ob.co_qualname = t->co_qualname;
    ob.co_firstlineno = t->co_firstlineno;
    ob.co_linetable = t->co_linetable;
    // PyBytesObject {PyObject_VAR_HEAD, ob_shash, ob_sval[1]} in every version here.
    ob.bytes_size = 16;
    ob.bytes_sval = 32;
    // PyASCIIObject {PyObject_HEAD, length @16, hash @24, state @32, ..}. The state bitfield
    // is {interned:2, kind:3, compact:1, ascii:1, ready:1 (<= 3.11) | statically_allocated:1
    // (3.12)}, allocated from bit 0 by GCC on x86_64.
    ob.unicode_length = 16;
    ob.unicode_state = 32;
    ob.unicode_ascii_size = t->unicode_ascii_size;
    ob.unicode_compact_size = t->unicode_compact_size;
    ob.state_kind_shift = 2;
    ob.state_compact_bit = 5;
    ob.state_ascii_bit = 6;

    // Thread names. PyObject {ob_refcnt, ob_type}; PyDictObject {.., ma_keys @32,
    // ma_values @40}; PyTypeObject {PyVarObject, tp_name, tp_basicsize @32, .., tp_flags
    // @168, .., tp_dictoffset @288}; PyLongObject {PyVarObject ob_size @16 | 3.12:
    // _PyLongValue {lv_tag @16, ob_digit @24}}. Managed dicts (pycore_object.h): 3.11
    // keeps a values pointer at -32 and a dict pointer at -24 (MANAGED_DICT_OFFSET), 3.12
    // one tagged PyDictOrValues at -24.
    ob.interp_modules = t->interp_modules;
    ob.ob_type = 8;
    ob.object_size = 16;
    ob.dict_ma_keys = 32;
    ob.dict_ma_values = 40;
    ob.dict_keys = v.minor >= 11 ? DictKeysFormat::Py311 : DictKeysFormat::Py36;
    ob.dict_values_skip = 0;
    ob.tp_basicsize = 32;
    ob.tp_flags = 168;
    ob.tp_dictoffset = 288;
    ob.ht_cached_keys = t->ht_cached_keys;
    ob.managed_dict = v.minor >= 12 ? ManagedDict::Py312 : v.minor == 11 ? ManagedDict::Py311 : ManagedDict::None;
    ob.managed_dict_off = v.minor >= 11 ? -24 : 0;
    ob.long_size = 16;
    ob.long_digits = 24;
    ob.long_tagged = v.minor >= 12;

    set_code_identity(l);
    std::string err;
    if (!finalize_bpf_offsets(o, err)) return std::nullopt;  // a broken table is a bug
    return l;
}

}  // namespace pbp::cpython
