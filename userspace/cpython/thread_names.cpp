#include "cpython/thread_names.h"

#include <unordered_set>
#include <vector>

#include "cpython/objects.h"
#include "cpython/thread_stacks.h"

namespace pbp::cpython {

namespace {

constexpr size_t kMaxModules = 1 << 16;   // sys.modules entries
constexpr size_t kMaxGlobals = 1 << 14;   // threading's module globals
constexpr size_t kMaxThreads = 1 << 14;   // threading._active entries
constexpr size_t kMaxNameLen = 1024;      // code points of a thread name

uint64_t pointer_at(MemoryReader& mem, uint64_t addr) {
    uint64_t v = 0;
    return mem.read(addr, &v, sizeof v) ? v : 0;
}

// threading._active of one interpreter; 0 when threading is not imported (or unreadable).
uint64_t find_active(MemoryReader& mem, const ObjectLayout& lay, uint64_t interp, ThreadNameCache& cache) {
    const uint64_t modules = pointer_at(mem, interp + lay.interp_modules);
    const uint64_t dict_type = type_of(mem, lay, modules);
    if (!dict_type) return 0;
    if (auto it = cache.active.find(interp); it != cache.active.end()) {
        if (type_of(mem, lay, it->second) == dict_type) return it->second;
        cache.active.erase(it);
    }
    std::vector<DictItem> items;
    if (!read_dict_items(mem, lay, modules, items, kMaxModules)) return 0;
    const uint64_t threading = dict_lookup_str(mem, lay, items, "threading");
    if (!threading) return 0;  // not imported (yet): asked again next time
    // PyModuleObject {PyObject_HEAD, md_dict, ..}
    const uint64_t globals = pointer_at(mem, threading + lay.object_size);
    if (type_of(mem, lay, globals) != dict_type || !read_dict_items(mem, lay, globals, items, kMaxGlobals)) return 0;
    const uint64_t active = dict_lookup_str(mem, lay, items, "_active");
    if (type_of(mem, lay, active) != dict_type) return 0;
    cache.active[interp] = active;
    return active;
}

}  // namespace

bool read_thread_names(MemoryReader& mem, const pbp_proc& proc, const ObjectLayout& lay, ThreadNameCache& cache,
                       std::map<uint64_t, std::string>& out, std::string& err, const std::set<uint64_t>* wanted) {
    out.clear();
    err.clear();
    if (lay.interp_modules == PBP_OFF_NONE || lay.dict_ma_keys == PBP_OFF_NONE) {
        err = "no thread-name offsets for this interpreter";
        return false;
    }
    bool ok = false;
    uint64_t interp = 0;
    ok = mem.read(proc.interp_head_addr, &interp, sizeof interp);
    if (!ok) {
        err = "interpreter list unreadable (process gone?)";
        return false;
    }
    std::unordered_set<uint64_t> seen;
    std::vector<DictItem> items;
    // With 'wanted', the entries' stored hashes say which keys can be a wanted ident: the others
    // are skipped unread (a 1000-thread pool's turn naming a few threads reads a few keys, not
    // 1000; each key is 2 reads).
    std::unordered_set<uint64_t> wanted_hashes;
    if (wanted)
        for (uint64_t ident : *wanted) wanted_hashes.insert(int_hash(ident));
    for (uint32_t n = 0; interp && n < PBP_MAX_INTERPRETERS && seen.insert(interp).second; n++) {
        const uint64_t active = find_active(mem, lay, interp, cache);
        if (active && read_dict_items(mem, lay, active, items, kMaxThreads)) {
            for (const auto& it : items) {
                if (wanted && it.has_hash && !wanted_hashes.count(it.hash)) continue;
                auto ident = read_uint(mem, lay, it.key);
                if (!ident || out.count(*ident) || (wanted && !wanted->count(*ident))) continue;
                const uint64_t name = read_instance_attr(mem, lay, it.value, "_name");
                if (auto s = read_unicode(mem, lay, name, kMaxNameLen); s && !s->empty()) out[*ident] = *s;
            }
        }
        interp = pointer_at(mem, interp + proc.off.interp_next);
    }
    return true;
}

bool read_thread_names_by_tid(pid_t pid, const pbp_proc& proc, const ObjectLayout& lay, ThreadNameCache& cache,
                              std::map<uint32_t, std::string>& out, std::string& err, const std::set<uint32_t>* tids) {
    out.clear();
    ProcessMemory mem(pid);
    // The thread states first (unless every tid asked for is known): their idents are the
    // only ones worth reading a name for.
    bool walk = !tids;
    for (uint32_t tid : tids ? *tids : std::set<uint32_t>{}) walk |= !cache.ident_of.count(tid);
    if (walk) {
        std::vector<ThreadStack> threads;
        if (!read_thread_stacks(mem, pid, proc, threads, err, /*walk_frames=*/false)) return false;
        cache.ident_of.clear();
        for (const auto& t : threads)
            if (t.tid) cache.ident_of[t.tid] = t.thread_id;
    }
    std::set<uint64_t> wanted;
    for (const auto& [tid, ident] : cache.ident_of)
        if (!tids || tids->count(tid)) wanted.insert(ident);
    if (wanted.empty()) return true;
    std::map<uint64_t, std::string> by_ident;
    if (!read_thread_names(mem, proc, lay, cache, by_ident, err, &wanted)) return false;
    for (const auto& [tid, ident] : cache.ident_of) {
        auto it = by_ident.find(ident);
        if (it != by_ident.end() && (!tids || tids->count(tid))) out.emplace(tid, it->second);
    }
    return true;
}

}  // namespace pbp::cpython
