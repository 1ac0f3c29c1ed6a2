// All per-CPython-version struct knowledge lives in userspace/cpython/.
// This header: the layout of one interpreter build, as BPF and the symbolizer need it.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "pybpfprof/abi.h"

namespace pbp::cpython {

struct Version {
    uint8_t major = 0, minor = 0, micro = 0;
    uint8_t level = 0xF;  // PY_RELEASE_LEVEL: 0xA alpha, 0xB beta, 0xC rc, 0xF final
    uint8_t serial = 0;

    static Version from_hex(uint32_t hex);
    uint32_t hex() const;
    std::string str() const;  // "3.11.7", "3.14.0rc2"
    bool at_least(int maj, int min) const { return major > maj || (major == maj && minor >= min); }
    bool known() const { return major != 0; }
};

enum class LineTableFormat {
    Lnotab,       // <= 3.9: co_lnotab, byte offsets
    Linetable310, // 3.10: co_linetable, byte offsets
    Locations311, // 3.11+: co_linetable location table, code units
};

// PyDictKeysObject's shape.
enum class DictKeysFormat : uint8_t {
    Py36,   // 3.6 .. 3.10 (Objects/dict-common.h): {dk_refcnt, dk_size @8, dk_lookup,
            // dk_usable, dk_nentries @32, dk_indices @40}; entries {hash, key, value}
    Py311,  // 3.11+ (internal/pycore_dict.h): {dk_refcnt, u8 dk_log2_size @8, u8
            // dk_log2_index_bytes @9, u8 dk_kind @10, dk_version, dk_usable, dk_nentries @24,
            // dk_indices @32}; entries {hash, key, value} (general) or {key, value} (str keys)
};

// Where an instance's attributes live when its class has no plain __dict__ slot.
enum class ManagedDict : uint8_t {
    None,      // <= 3.10: a dict at tp_dictoffset
    Py311,     // Py_TPFLAGS_MANAGED_DICT: values at managed_dict_off - 8, or a dict at managed_dict_off
    Py312,     // at managed_dict_off: a dict, or the values' address - 1 (odd)
    Py313,     // Py_TPFLAGS_INLINE_VALUES: values inside the object at tp_basicsize; a dict at
               // managed_dict_off (authoritative when the inline values are not 'valid')
};

// What userspace needs to decode code objects and strings (BPF never reads these).
struct ObjectLayout {
    // PyCodeObject
    uint16_t co_filename = PBP_OFF_NONE;
    uint16_t co_name = PBP_OFF_NONE;
    uint16_t co_qualname = PBP_OFF_NONE;  // 3.11+
    uint16_t co_firstlineno = PBP_OFF_NONE;
    uint16_t co_linetable = PBP_OFF_NONE; // co_lnotab (<= 3.9) or co_linetable
    // PyBytesObject
    uint16_t bytes_size = PBP_OFF_NONE;   // ob_size
    uint16_t bytes_sval = PBP_OFF_NONE;   // ob_sval
    // PyUnicodeObject: PyASCIIObject {.., length, hash, state}; data follows the header
    uint16_t unicode_length = PBP_OFF_NONE;
    uint16_t unicode_state = PBP_OFF_NONE;
    uint16_t unicode_ascii_size = 0;      // sizeof(PyASCIIObject): compact ASCII data starts here
    uint16_t unicode_compact_size = 0;    // sizeof(PyCompactUnicodeObject): compact non-ASCII data
    uint8_t state_kind_shift = 2;         // bit position of the 3-bit 'kind'
    uint8_t state_compact_bit = 5;
    uint8_t state_ascii_bit = 6;

    // Python thread names (thread_names.cpp): interp -> modules dict -> "threading" -> its
    // module dict -> "_active" (ident -> Thread) -> the Thread's "_name". interp_modules
    // PBP_OFF_NONE = not known: threads keep their OS names.
    uint16_t interp_modules = PBP_OFF_NONE;  // PyInterpreterState.modules / imports.modules (3.12+)
    uint16_t ob_type = 8;                    // PyObject.ob_type
    uint16_t object_size = 16;               // sizeof(PyObject): 32 in free-threaded builds
    // PyDictObject {PyObject_HEAD, ma_used, ma_version_tag, ma_keys, ma_values}
    uint16_t dict_ma_keys = PBP_OFF_NONE, dict_ma_values = PBP_OFF_NONE;
    DictKeysFormat dict_keys = DictKeysFormat::Py36;
    uint8_t dict_values_skip = 0;            // bytes before PyDictValues.values: 8 from 3.13
    // PyTypeObject / PyHeapTypeObject
    uint16_t tp_basicsize = PBP_OFF_NONE, tp_flags = PBP_OFF_NONE, tp_dictoffset = PBP_OFF_NONE;
    uint16_t ht_cached_keys = PBP_OFF_NONE;  // the shared keys of a class's instances (3.11+)
    ManagedDict managed_dict = ManagedDict::None;
    int16_t managed_dict_off = 0;            // MANAGED_DICT_OFFSET: -24, free-threaded -8
    // PyLongObject: ob_size (<= 3.11) or lv_tag (3.12+), then 30-bit digits
    uint16_t long_size = PBP_OFF_NONE, long_digits = PBP_OFF_NONE;
    bool long_tagged = false;                // 3.12+: lv_tag = ndigits << 3 | sign (0 +, 1 zero, 2 -)
};

// 3.14+ (_Py_DebugOffsets): what the asyncio task reader needs beyond ObjectLayout
// (userspace/cpython/asyncio.h). known = false before 3.14.
struct AsyncObjectLayout {
    bool known = false;
    uint64_t ob_type = 0;                                  // PyObject.ob_type
    uint64_t tp_flags = 0;                                 // PyTypeObject.tp_flags
    uint64_t long_lv_tag = 0, long_ob_digit = 0;           // PyLongObject (3.12+ compact ints)
    uint64_t set_used = 0, set_table = 0, set_mask = 0;    // PySetObject
    uint64_t gen_iframe = 0, gen_frame_state = 0;          // PyGenObject / PyCoroObject
    uint64_t frame_stackpointer = 0, frame_owner = 0;      // _PyInterpreterFrame
    uint64_t llist_next = 0;                               // struct llist_node
};

struct Layout {
    Version version;
    bool free_threaded = false;
    LineTableFormat line_format = LineTableFormat::Locations311;
    pbp_py_offsets bpf{};  // handed to BPF as-is (frame_read_len/code_read_len filled in)
    ObjectLayout obj;
    // Offset inside _PyRuntime of the interpreters list head (PyInterpreterState*).
    // nullopt for 3.6, where the list head is the static 'interp_head' variable.
    std::optional<uint64_t> runtime_interp_head;
    // Offset inside _PyRuntime of the GIL struct (bpf.gil_where == PBP_GIL_WHERE_ADDR, 3.7 ..
    // 3.11); nullopt elsewhere (3.12+ find it through the interpreter: bpf.interp_gil_ptr).
    std::optional<uint64_t> runtime_gil;
    // Offsets inside _PyRuntime of 'initialized' (an int: Py_Initialize has completed) and
    // '_finalizing' (a PyThreadState *: Py_FinalizeEx has begun; never cleared). nullopt for 3.6,
    // whose static variables say the same (runtime_phase.h). They tell a sample without Python
    // frames taken in start-up or finalization.
    std::optional<uint64_t> runtime_initialized, runtime_finalizing;
    AsyncObjectLayout async_objects;  // 3.14+, for --async
    std::string source;  // where it came from: "table 3.11" / "_Py_DebugOffsets 3.13.0"
};

// The newest minor version whose layout has been tested against a real interpreter.
constexpr int kNewestTestedMinor = 15;

// Built-in tables, derived from CPython's headers at each release tag (3.6 .. 3.12).
std::optional<Layout> builtin_layout(Version v, bool free_threaded);

// 3.13+: decode _Py_DebugOffsets, the first member of _PyRuntimeState (read from the
// target at &_PyRuntime). Checks the "xdebugpy" cookie, the version and free_threaded.
// A valid table for a version newer than kNewestTestedMinor is accepted with a warning.
std::optional<Layout> layout_from_debug_offsets(std::span<const uint8_t> raw, std::string& error,
                                                std::string& warning);
// How many bytes of _PyRuntime to read for layout_from_debug_offsets().
constexpr size_t kDebugOffsetsReadSize = 4096;

// Copies where a code object's identity lies (co_name, co_qualname, co_filename, co_linetable,
// co_firstlineno: layout.obj) into layout.bpf, for BPF's once-per-code-object capture
// (pbp_py_offsets.code_ident). Before finalize_bpf_offsets.
void set_code_identity(Layout& layout);

// Fills frame_read_len / code_read_len / code_ident_len and checks every BPF offset fits in
// PBP_WINDOW.
bool finalize_bpf_offsets(pbp_py_offsets& off, std::string& error);

}  // namespace pbp::cpython
