/* Prints, for the CPython headers it is compiled against, every struct offset that
 * userspace/cpython/layout_tables.cpp and debug_offsets.cpp hard-code. Run through
 * tests/tools/gen_layout_offsets.sh; the tables were transcribed from its output and
 * are then verified against live interpreters by tests/unit/test_layout.cpp. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <frameobject.h>
#if PY_VERSION_HEX >= 0x03070000 && PY_VERSION_HEX < 0x03080000
#include "internal/pystate.h"
#elif PY_VERSION_HEX >= 0x03080000 && PY_VERSION_HEX < 0x03090000
#include "internal/pycore_pystate.h"
#elif PY_VERSION_HEX >= 0x03090000
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#endif
#if PY_VERSION_HEX >= 0x030D0000
#include "internal/pycore_code.h"
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_dict.h"
#include "internal/pycore_object.h"
#endif
#if PY_VERSION_HEX >= 0x03080000
#include "internal/pycore_gil.h"
#elif PY_VERSION_HEX >= 0x03070000
#include "internal/gil.h"
#endif

#define P(name, expr) printf("%-28s %zu\n", name, (size_t)(expr))
#define O(name, type, field) P(name, offsetof(type, field))

int main(void)
{
	printf("PY_VERSION_HEX %#x\n", PY_VERSION_HEX);
#if PY_VERSION_HEX >= 0x03070000
	O("runtime.interpreters.head", _PyRuntimeState, interpreters.head);
#endif
#if PY_VERSION_HEX >= 0x030D0000
	O("runtime.debug_offsets", _PyRuntimeState, debug_offsets);
	P("sizeof(_Py_DebugOffsets)", sizeof(_Py_DebugOffsets));
	/* where each section starts inside _Py_DebugOffsets (mirrored in debug_offsets.cpp) */
	O("dbg.runtime_state", _Py_DebugOffsets, runtime_state);
	O("dbg.interpreter_state", _Py_DebugOffsets, interpreter_state);
	O("dbg.thread_state", _Py_DebugOffsets, thread_state);
	O("dbg.thread_state.thread_id", _Py_DebugOffsets, thread_state.thread_id);
	O("dbg.interpreter_frame", _Py_DebugOffsets, interpreter_frame);
	O("dbg.code_object", _Py_DebugOffsets, code_object);
	O("dbg.pyobject", _Py_DebugOffsets, pyobject);
	O("dbg.bytes_object", _Py_DebugOffsets, bytes_object);
	O("dbg.unicode_object", _Py_DebugOffsets, unicode_object);
	O("dbg.gc", _Py_DebugOffsets, gc);
#endif
#if PY_VERSION_HEX >= 0x030E0000
	O("dbg.gen_object", _Py_DebugOffsets, gen_object);
	O("dbg.debugger_support", _Py_DebugOffsets, debugger_support);
#ifdef Py_GIL_DISABLED
	O("iframe.tlbc_index", _PyInterpreterFrame, tlbc_index);
	O("code.co_tlbc", PyCodeObject, co_tlbc);
#endif
#endif
#if PY_VERSION_HEX >= 0x030F0000
	O("dbg.heap_type_object", _Py_DebugOffsets, heap_type_object);
#endif
	/* The GIL (gil.bpf.h): 3.7-3.11 embedded in _PyRuntime.ceval, 3.12+ a pointer in the
	 * interpreter (3.13+ also in _Py_DebugOffsets, interpreter-relative). */
#if PY_VERSION_HEX >= 0x03070000
#if PY_VERSION_HEX >= 0x030C0000
	O("interp.ceval.gil", PyInterpreterState, ceval.gil);
	O("interp._gil", PyInterpreterState, _gil);
#else
	O("runtime.ceval.gil", _PyRuntimeState, ceval.gil);
#endif
	O("gil.last_holder", struct _gil_runtime_state, last_holder);
	O("gil.locked", struct _gil_runtime_state, locked);
	O("gil.cond", struct _gil_runtime_state, cond);
	O("gil.mutex", struct _gil_runtime_state, mutex);
	P("sizeof(gil)", sizeof(struct _gil_runtime_state));
#endif
	O("interp.next", PyInterpreterState, next);
#if PY_VERSION_HEX >= 0x030B0000 /* struct pythreads appeared in 3.11 */
	O("interp.threads.head", PyInterpreterState, threads.head);
#else
	O("interp.tstate_head", PyInterpreterState, tstate_head);
#endif
	O("tstate.next", PyThreadState, next);
	O("tstate.interp", PyThreadState, interp);
	O("tstate.thread_id", PyThreadState, thread_id);
	P("sizeof(tstate.thread_id)", sizeof(((PyThreadState *)0)->thread_id));
#if PY_VERSION_HEX >= 0x030D0000
	O("tstate.current_frame", PyThreadState, current_frame);
#elif PY_VERSION_HEX >= 0x030B0000
	O("tstate.cframe", PyThreadState, cframe);
	O("tstate.root_cframe", PyThreadState, root_cframe);
	O("cframe.current_frame", _PyCFrame, current_frame);
	O("cframe.previous", _PyCFrame, previous);
	P("sizeof(_PyCFrame)", sizeof(_PyCFrame));
#if PY_VERSION_HEX < 0x030C0000
	O("iframe.is_entry", _PyInterpreterFrame, is_entry);
	P("sizeof(iframe.is_entry)", sizeof(((_PyInterpreterFrame *)0)->is_entry));
#else
	P("FRAME_OWNED_BY_CSTACK", FRAME_OWNED_BY_CSTACK);
#endif
#else
	O("tstate.frame", PyThreadState, frame);
#endif
#if PY_VERSION_HEX >= 0x030B0000
	O("iframe.previous", _PyInterpreterFrame, previous);
#if PY_VERSION_HEX >= 0x030D0000
	O("iframe.f_executable", _PyInterpreterFrame, f_executable);
	O("iframe.instr_ptr", _PyInterpreterFrame, instr_ptr);
#else
	O("iframe.f_code", _PyInterpreterFrame, f_code);
	O("iframe.prev_instr", _PyInterpreterFrame, prev_instr);
#endif
	O("iframe.owner", _PyInterpreterFrame, owner);
	P("sizeof(iframe.owner)", sizeof(((_PyInterpreterFrame *)0)->owner));
#else
	O("frame.f_back", PyFrameObject, f_back);
	O("frame.f_code", PyFrameObject, f_code);
	O("frame.f_lasti", PyFrameObject, f_lasti);
	P("sizeof(frame.f_lasti)", sizeof(((PyFrameObject *)0)->f_lasti));
#endif
	O("code.ob_type", PyObject, ob_type); /* every object starts with PyObject */
	O("code.co_filename", PyCodeObject, co_filename);
	O("code.co_name", PyCodeObject, co_name);
#if PY_VERSION_HEX >= 0x030B0000
	O("code.co_qualname", PyCodeObject, co_qualname);
	O("code.co_code_adaptive", PyCodeObject, co_code_adaptive);
#endif
	O("code.co_firstlineno", PyCodeObject, co_firstlineno);
	P("sizeof(code.co_firstlineno)", sizeof(((PyCodeObject *)0)->co_firstlineno));
#if PY_VERSION_HEX >= 0x030A0000
	O("code.co_linetable", PyCodeObject, co_linetable);
#else
	O("code.co_lnotab", PyCodeObject, co_lnotab);
#endif
#if PY_VERSION_HEX >= 0x030C0000
	O("code.co_version", PyCodeObject, co_version);
	P("sizeof(code.co_version)", sizeof(((PyCodeObject *)0)->co_version));
#endif
	O("bytes.ob_size", PyBytesObject, ob_base.ob_size);
	O("bytes.ob_sval", PyBytesObject, ob_sval);
	O("unicode.length", PyASCIIObject, length);
	O("unicode.hash", PyASCIIObject, hash);
	/* state is a bitfield struct; its offset is right after hash */
	P("unicode.state", offsetof(PyASCIIObject, hash) + sizeof(Py_hash_t));
	P("sizeof(PyASCIIObject)", sizeof(PyASCIIObject));
	P("sizeof(PyCompactUnicodeObject)", sizeof(PyCompactUnicodeObject));
	{
		/* bit positions of the state bitfields (GCC allocates from bit 0 on x86_64) */
		PyASCIIObject a;
		unsigned int w;
		int i;
		memset(&a, 0, sizeof a);
		a.state.kind = 7;
		memcpy(&w, (char *)&a + offsetof(PyASCIIObject, hash) + sizeof(Py_hash_t), 4);
		for (i = 0; i < 32 && !(w >> i & 1); i++) ;
		P("state.kind_shift", i);
		memset(&a, 0, sizeof a);
		a.state.compact = 1;
		memcpy(&w, (char *)&a + offsetof(PyASCIIObject, hash) + sizeof(Py_hash_t), 4);
		for (i = 0; i < 32 && !(w >> i & 1); i++) ;
		P("state.compact_bit", i);
		memset(&a, 0, sizeof a);
		a.state.ascii = 1;
		memcpy(&w, (char *)&a + offsetof(PyASCIIObject, hash) + sizeof(Py_hash_t), 4);
		for (i = 0; i < 32 && !(w >> i & 1); i++) ;
		P("state.ascii_bit", i);
		memset(&a, 0, sizeof a);
		a.state.interned = 3;
		memcpy(&w, (char *)&a + offsetof(PyASCIIObject, hash) + sizeof(Py_hash_t), 4);
		for (i = 0; i < 32 && !(w >> i & 1); i++) ;
		P("state.interned_shift", i);
	}
	/* Thread names (cpython/thread_names.cpp): interp->modules, dicts, ints, types, modules. */
#if PY_VERSION_HEX >= 0x030C0000
	O("interp.imports.modules", PyInterpreterState, imports.modules);
#else
	O("interp.modules", PyInterpreterState, modules);
#endif
	O("dict.ma_used", PyDictObject, ma_used);
	O("dict.ma_keys", PyDictObject, ma_keys);
	O("dict.ma_values", PyDictObject, ma_values);
#if PY_VERSION_HEX >= 0x030B0000
	O("dictkeys.dk_log2_size", PyDictKeysObject, dk_log2_size);
	O("dictkeys.dk_log2_index_bytes", PyDictKeysObject, dk_log2_index_bytes);
	O("dictkeys.dk_kind", PyDictKeysObject, dk_kind);
	O("dictkeys.dk_nentries", PyDictKeysObject, dk_nentries);
	O("dictkeys.dk_indices", PyDictKeysObject, dk_indices);
	P("sizeof(PyDictKeyEntry)", sizeof(PyDictKeyEntry));
	P("sizeof(PyDictUnicodeEntry)", sizeof(PyDictUnicodeEntry));
#endif
#if PY_VERSION_HEX >= 0x030D0000
	O("dictvalues.values", PyDictValues, values);
	P("MANAGED_DICT_OFFSET(+1000)", (long)MANAGED_DICT_OFFSET + 1000);
	P("Py_TPFLAGS_INLINE_VALUES", Py_TPFLAGS_INLINE_VALUES);
#elif defined(MANAGED_DICT_OFFSET)
	P("MANAGED_DICT_OFFSET(+1000)", (long)MANAGED_DICT_OFFSET + 1000);
#endif
#if PY_VERSION_HEX >= 0x030B0000
	P("Py_TPFLAGS_MANAGED_DICT", Py_TPFLAGS_MANAGED_DICT);
#endif
	O("type.tp_basicsize", PyTypeObject, tp_basicsize);
	O("type.tp_flags", PyTypeObject, tp_flags);
	O("type.tp_dictoffset", PyTypeObject, tp_dictoffset);
	O("heaptype.ht_cached_keys", PyHeapTypeObject, ht_cached_keys);
	O("object.ob_type", PyObject, ob_type);
	P("sizeof(PyObject)", sizeof(PyObject));
#if PY_VERSION_HEX >= 0x030C0000
	O("long.lv_tag", PyLongObject, long_value.lv_tag);
	O("long.ob_digit", PyLongObject, long_value.ob_digit);
#else
	O("long.ob_size", PyLongObject, ob_base.ob_size);
	O("long.ob_digit", PyLongObject, ob_digit);
#endif
	P("PyLong_SHIFT", PyLong_SHIFT);
	return 0;
}
