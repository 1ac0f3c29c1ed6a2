#include "cpython/gil.h"

#include <algorithm>

namespace pbp::cpython {

namespace {
// 3.6's Python/ceval_gil.h: 'static _Py_atomic_int gil_locked = {-1};' and
// 'static _Py_atomic_address gil_last_holder = {0};', and the futexes take_gil sleeps on
// (gil_cond, gil_mutex; switch_mutex once it has the GIL) and drop_gil on (switch_cond, for
// the thread that asked for the GIL to take it: FORCE_SWITCHING, on in every build).
constexpr const char* kSymGilLocked = "gil_locked";
constexpr const char* kSymGilLastHolder = "gil_last_holder";
constexpr const char* const kSymGilFutexes[] = {"gil_cond", "gil_mutex", "switch_cond", "switch_mutex"};
// The four futex variables are one range, tested with one comparison in BPF. gcc puts a
// file's static variables together; between them only alignment padding (glibc's
// pthread_cond_t is 48 bytes, pthread_mutex_t 40, each aligned to at most 32 here), so no
// other variable (that might be a futex of something else) lies inside.
constexpr uint64_t kMaxPaddingEach = 32;
}  // namespace

const std::vector<std::string>& gil_static_symbols() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v = {kSymGilLocked, kSymGilLastHolder};
        for (const char* n : kSymGilFutexes) v.push_back(n);
        return v;
    }();
    return names;
}

std::optional<GilStatics> locate_gil_statics(Layout& layout, const std::map<std::string, ElfFile::Symbol>& syms,
                                             uint64_t bias, std::string& why) {
    if (layout.bpf.gil_where != PBP_GIL_WHERE_STATICS) return std::nullopt;
    auto fail = [&](std::string w) -> std::optional<GilStatics> {
        why = std::move(w);
        layout.bpf.gil_where = PBP_GIL_WHERE_NONE;
        return std::nullopt;
    };
    for (const std::string& n : gil_static_symbols())
        if (!syms.count(n))
            return fail("its GIL's static variables (" + n +
                        ", ...) are not in its ELF symbol table (a stripped build)");
    const auto& locked = syms.at(kSymGilLocked);
    const auto& holder = syms.at(kSymGilLastHolder);
    if (locked.size != 4 || holder.size != 8)
        return fail("its gil_locked/gil_last_holder symbols have unexpected sizes (" + std::to_string(locked.size) +
                    "/" + std::to_string(holder.size) + " bytes)");
    uint64_t lo = UINT64_MAX, hi = 0, sum = 0;
    for (const char* n : kSymGilFutexes) {
        const auto& s = syms.at(n);
        if (!s.size) return fail(std::string("its ") + n + " symbol has no size");
        lo = std::min(lo, s.value);
        hi = std::max(hi, s.value + s.size);
        sum += s.size;
    }
    if (hi - lo > sum + kMaxPaddingEach * std::size(kSymGilFutexes))
        return fail("its GIL's mutexes and condition variables are not next to each other (" + std::to_string(hi - lo) +
                    " bytes apart)");
    GilStatics g;
    g.locked = bias + locked.value;
    g.last_holder = bias + holder.value;
    g.wait_addr = bias + lo;
    g.wait_size = hi - lo;
    return g;
}

std::string gil_unknown_reason(const Layout& layout, const std::string& statics_why) {
    if (layout.bpf.gil_where != PBP_GIL_WHERE_NONE) return "";
    if (layout.free_threaded) return "a free-threaded build: it has no GIL";
    if (!statics_why.empty()) return "CPython " + layout.version.str() + ": " + statics_why;
    return "CPython " + layout.version.str() + ": its GIL's layout is not known";
}

uint64_t gil_fixed_address(const Layout& layout, uint64_t runtime_addr) {
    if (layout.bpf.gil_where != PBP_GIL_WHERE_ADDR || !layout.runtime_gil || !runtime_addr) return 0;
    return runtime_addr + *layout.runtime_gil;
}

std::optional<GilRange> gil_range(const Layout& layout, uint64_t runtime_addr, uint64_t interp_head_addr,
                                  const GilStatics* statics, MemoryReader& mem) {
    const pbp_py_offsets& o = layout.bpf;
    GilRange r;
    r.size = o.gil_size;
    switch (o.gil_where) {
    case PBP_GIL_WHERE_ADDR:
        r.addr = gil_fixed_address(layout, runtime_addr);
        break;
    case PBP_GIL_WHERE_INTERP: {
        uint64_t interp = 0;
        if (!interp_head_addr || !mem.read_value(interp_head_addr, interp) || !interp) return std::nullopt;
        if (!mem.read_value(interp + o.interp_gil_ptr, r.addr)) return std::nullopt;
        break;
    }
    case PBP_GIL_WHERE_STATICS:
        if (!statics) return std::nullopt;
        r.addr = statics->wait_addr;
        r.size = statics->wait_size;
        r.locked_at = statics->locked;
        r.holder_at = statics->last_holder;
        return r;
    default:
        return std::nullopt;
    }
    if (!r.addr || !r.size) return std::nullopt;
    r.locked_at = r.addr + o.gil_locked;
    r.holder_at = r.addr + o.gil_last_holder;
    return r;
}

std::optional<GilSnapshot> read_gil(const GilRange& gil, MemoryReader& mem) {
    GilSnapshot s;
    if (!gil.locked_at || !mem.read_value(gil.locked_at, s.locked) || !mem.read_value(gil.holder_at, s.last_holder))
        return std::nullopt;
    return s;
}

}  // namespace pbp::cpython
