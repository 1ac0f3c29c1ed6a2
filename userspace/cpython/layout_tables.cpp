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

struct Table {
    int minor;
    pbp_frame_kind frame_kind;
    pbp_instr_kind instr_kind;
    // offsetof(_PyRuntimeState, interpreters.head); NONE for 3.6 (static interp_head)
    uint16_t runtime_interp_head;
    // PyInterpreterState
    uint16_t interp_next, interp_threads_head;  // tstate_head (<= 3.10), threads.head (3.11+)
    // PyThreadState
    uint16_t tstate_next, tstate_thread_id, tstate_frame;  // frame (<= 3.10), cframe (3.11/3.12)
    uint16_t cframe_current_frame;                         // _PyCFrame.current_frame
    // PyFrameObject (<= 3.10) / _PyInterpreterFrame (3.11+)
    uint16_t frame_previous, frame_code, frame_instr, frame_owner;
    uint32_t skip_owner_mask;
    // PyCodeObject
    uint16_t co_filename, co_name, co_qualname, co_firstlineno, co_linetable, co_version;
    uint16_t code_adaptive;
    // PyASCIIObject / PyCompactUnicodeObject sizes (3.12 dropped wstr and 'ready')
    uint16_t unicode_ascii_size, unicode_compact_size;
};

// FRAME_OWNED_BY_CSTACK = 3 in 3.12 (pycore_frame.h): the entry/trampoline frame.
constexpr uint32_t kSkipCstack312 = 1u << 3;

constexpr Table kTables[] = {
    // 3.6: pystate.h struct _is {next, tstate_head}; struct _ts {prev, next, interp, frame, ..,
    //      long thread_id @152}; frameobject.h PyFrameObject {PyObject_VAR_HEAD, f_back @24,
    //      f_code @32, .., int f_lasti @120}; code.h PyCodeObject {.., int co_firstlineno @36,
    //      .., co_filename @96, co_name @104, co_lnotab @112}.
    {6, PBP_FRAME_OBJECT, PBP_INSTR_LASTI_BYTES, NONE,
     0, 8,
     8, 152, 24, NONE,
     24, 32, 120, NONE, 0,
     96, 104, NONE, 36, 112, NONE, NONE,
     48, 72},
    // 3.7: _PyRuntimeState (internal/pystate.h) {initialized, core_initialized, finalizing,
    //      interpreters{mutex, head @24}}; struct _ts gained exc_state etc: thread_id @176;
    //      PyFrameObject lost f_exc_*: f_lasti @104.
    {7, PBP_FRAME_OBJECT, PBP_INSTR_LASTI_BYTES, 24,
     0, 8,
     8, 176, 24, NONE,
     24, 32, 104, NONE, 0,
     96, 104, NONE, 36, 112, NONE, NONE,
     48, 72},
    // 3.8: internal/pycore_pystate.h; _PyRuntimeState {4 ints, finalizing, interpreters{mutex,
    //      head @32}}; cpython/code.h added co_posonlyargcount: co_firstlineno @40,
    //      co_filename @104, co_name @112, co_lnotab @120.
    {8, PBP_FRAME_OBJECT, PBP_INSTR_LASTI_BYTES, 32,
     0, 8,
     8, 176, 24, NONE,
     24, 32, 104, NONE, 0,
     104, 112, NONE, 40, 120, NONE, NONE,
     48, 72},
    // 3.9: internal/pycore_runtime.h, pycore_interp.h; same offsets as 3.8.
    {9, PBP_FRAME_OBJECT, PBP_INSTR_LASTI_BYTES, 32,
     0, 8,
     8, 176, 24, NONE,
     24, 32, 104, NONE, 0,
     104, 112, NONE, 40, 120, NONE, NONE,
     48, 72},
    // 3.10: cpython/frameobject.h PyFrameObject {.., f_trace, f_stackdepth, f_trace_lines,
    //       f_trace_opcodes, f_gen, int f_lasti @96} counts code units; co_linetable @120.
    {10, PBP_FRAME_OBJECT, PBP_INSTR_LASTI_UNITS, 32,
     0, 8,
     8, 176, 24, NONE,
     24, 32, 96, NONE, 0,
     104, 112, NONE, 40, 120, NONE, NONE,
     48, 72},
    // 3.11: _PyRuntimeState {5 ints, _finalizing, interpreters{mutex, head @40}};
    //       struct _is {next, struct pythreads {next_unique_id, head @16}};
    //       cpython/pystate.h struct _ts {prev, next, interp, .., _PyCFrame *cframe @56, ..,
    //       thread_id @152}, _PyCFrame {use_tracing, current_frame @8, previous};
    //       internal/pycore_frame.h _PyInterpreterFrame {f_func, f_globals, f_builtins,
    //       f_locals, f_code @32, frame_obj, previous @48, prev_instr @56, stacktop, is_entry,
    //       char owner @69}; cpython/code.h co_firstlineno @72, co_filename @112,
    //       co_name @120, co_qualname @128, co_linetable @136, co_code_adaptive @184.
    //       Owners: THREAD 0, GENERATOR 1, FRAME_OBJECT 2; nothing to skip.
    {11, PBP_FRAME_INTERP_CFRAME, PBP_INSTR_PTR, 40,
     0, 16,
     8, 152, 56, 8,
     48, 32, 56, 69, 0,
     112, 120, 128, 72, 136, NONE, 184,
     48, 72},
    // 3.12: struct _is {next, id, id_refcount, requires_idref, id_mutex, _initialized,
    //       finalizing, monitoring_version, last_restart_version, threads{.., head @72}};
    //       struct _ts thread_id @136, cframe @56; _PyCFrame {current_frame @0, previous};
    //       _PyInterpreterFrame {f_code @0, previous @8, f_funcobj, f_globals, f_builtins,
    //       f_locals, frame_obj, prev_instr @56, stacktop, return_offset, char owner @70};
    //       code.h co_firstlineno @68, uint32_t co_version @92, co_filename @112,
    //       co_name @120, co_qualname @128, co_linetable @136, co_code_adaptive @192.
    //       unicodeobject.h: wstr removed, sizeof(PyASCIIObject) 40, compact 56.
    {12, PBP_FRAME_INTERP_CFRAME, PBP_INSTR_PTR, 40,
     0, 72,
     8, 136, 56, 0,
     8, 0, 56, 70, kSkipCstack312,
     112, 120, 128, 68, 136, 92, 192,
     40, 56},
};

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
    // The eval loop's entry (see pbp_py_offsets.cframe_previous in abi.h). 3.11:
    // cpython/pystate.h _PyCFrame {uint8_t use_tracing, current_frame @8, previous @16};
    // the frame a _PyEval_EvalFrameDefault call was entered with has bool is_entry @68 set
    // (internal/pycore_frame.h). 3.12: _PyCFrame {current_frame @0, previous @8}; each call
    // links its frame to an entry_frame on the C stack with char owner @70 =
    // FRAME_OWNED_BY_CSTACK (3), no other frame has that owner (Python/ceval.c).
    // PyThreadState.root_cframe (cpython/pystate.h): @336 in 3.11, @272 in 3.12.
    if (v.minor == 11) {
        o.cframe_previous = 16;
        o.frame_entry_off = 68;
        o.frame_entry_val = 1;
        o.tstate_root_cframe = 336;
    } else if (v.minor == 12) {
        o.cframe_previous = 8;
        o.frame_entry_off = 70;
        o.frame_entry_val = 3;
        o.tstate_root_cframe = 272;
    } else {
        o.cframe_previous = NONE;
        o.frame_entry_off = NONE;
        o.frame_entry_val = 0;
        o.tstate_root_cframe = NONE;
    }
    o.interp_code_gen = NONE;  // 3.14+ only (_Py_DebugOffsets)
    // 3.12: struct _ts {prev, next, interp, struct {initialized:1, bound:1, unbound:1,
    // bound_gilstate:1, active:1, ..} _status @24}: active is bit 4.
    if (v.minor == 12) {
        o.tstate_status = 24;
        o.tstate_active_mask = 1u << 4;
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

    std::string err;
    if (!finalize_bpf_offsets(o, err)) return std::nullopt;  // a broken table is a bug
    return l;
}

}  // namespace pbp::cpython
