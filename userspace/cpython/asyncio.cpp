#include "cpython/asyncio.h"

#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "cpython/objects.h"
#include "cpython/thread_stacks.h"
#include "sys/elf_file.h"
#include "sys/procfs.h"

namespace pbp::cpython {

namespace {

constexpr uint64_t kTpFlagsLongSubclass = 1ull << 24;     // Py_TPFLAGS_LONG_SUBCLASS
constexpr uint64_t kTpFlagsUnicodeSubclass = 1ull << 28;  // Py_TPFLAGS_UNICODE_SUBCLASS
// Object pointers held as _PyStackRef (a frame's stack, from 3.14) carry tag bits; objects
// are 8-aligned, so clearing 3 bits is right for every build.
constexpr uint64_t kTagMask = 7;
// Largest set table read for task_awaited_by (a set of awaiters: a handful in practice).
constexpr uint64_t kMaxSetSlots = 1 << 16;

std::optional<AsyncioOffsets> read_section(const std::string& path, std::string& why) {
    std::string err;
    auto elf = ElfFile::open(path, err);
    if (!elf) {
        why = err;
        return std::nullopt;
    }
    auto sec = elf->section(".AsyncioDebug");
    if (!sec) {
        why = path + ": no AsyncioDebug section";
        return std::nullopt;
    }
    uint8_t raw[kAsyncioDebugSize];
    if (sec->size < sizeof raw || !elf->read_vaddr(sec->addr, raw, sizeof raw)) {
        why = path + ": AsyncioDebug section unreadable";
        return std::nullopt;
    }
    return decode_asyncio_offsets(raw, why);
}

bool is_asyncio_module(const std::string& path) {
    auto slash = path.rfind('/');
    std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    return base.rfind("_asyncio.", 0) == 0 && base.find(".so") != std::string::npos;
}

std::string dirname(const std::string& p) {
    auto slash = p.rfind('/');
    return slash == std::string::npos || slash == 0 ? "/" : p.substr(0, slash);
}

}  // namespace

std::optional<AsyncioOffsets> decode_asyncio_offsets(std::span<const uint8_t> raw, std::string& err) {
    if (raw.size() < kAsyncioDebugSize) {
        err = "AsyncioDebug: only " + std::to_string(raw.size()) + " bytes";
        return std::nullopt;
    }
    uint64_t f[13];
    std::memcpy(f, raw.data(), sizeof f);
    AsyncioOffsets a;
    a.task_size = f[0];
    a.task_name = f[1];
    a.task_awaited_by = f[2];
    a.task_is_task = f[3];
    a.task_awaited_by_is_set = f[4];
    a.task_coro = f[5];
    a.task_node = f[6];
    a.interp_size = f[7];
    a.interp_tasks_head = f[8];
    a.tstate_size = f[9];
    a.tstate_running_loop = f[10];
    a.tstate_running_task = f[11];
    a.tstate_tasks_head = f[12];
    auto in = [](uint64_t off, uint64_t width, uint64_t size) {
        return size > 0 && size < (1u << 24) && off + width <= size;
    };
    if (!in(a.task_name, 8, a.task_size) || !in(a.task_awaited_by, 8, a.task_size) ||
        !in(a.task_is_task, 1, a.task_size) || !in(a.task_awaited_by_is_set, 1, a.task_size) ||
        !in(a.task_coro, 8, a.task_size) || !in(a.task_node, 16, a.task_size) || a.task_size > 4096 ||
        !in(a.interp_tasks_head, 16, a.interp_size) || !in(a.tstate_running_loop, 8, a.tstate_size) ||
        !in(a.tstate_running_task, 8, a.tstate_size) || !in(a.tstate_tasks_head, 16, a.tstate_size) ||
        a.tstate_running_task == 0 || a.tstate_running_task >= PBP_OFF_NONE) {
        err = "AsyncioDebug: implausible offsets";
        return std::nullopt;
    }
    return a;
}

std::optional<AsyncioOffsets> find_asyncio_offsets(pid_t pid, const std::string& interp_path, Version v,
                                                   std::string& why) {
    if (!v.at_least(3, 14)) {
        why = "asyncio task names need CPython 3.14+ (this is " + v.str() + ")";
        return std::nullopt;
    }
    const std::string root = "/proc/" + std::to_string(pid) + "/root";
    std::string first_why = interp_path + ": not mapped";
    auto maps = procfs::read_maps(pid);
    if (maps) {
        // 1. Built into the interpreter (3.15, and builds with _asyncio static).
        for (auto& m : *maps)
            if (m.path == interp_path) {
                if (auto a = read_section(procfs::openable_path(pid, m), first_why)) return a;
                break;
            }
        // 2. The extension module, once asyncio was imported.
        for (auto& m : *maps)
            if (is_asyncio_module(m.path)) {
                std::string w;
                if (auto a = read_section(procfs::openable_path(pid, m), w)) return a;
            }
    }
    // 3. Not imported yet: the module its interpreter will load, PREFIX/lib/pythonX.Y/lib-dynload
    //    with PREFIX the executable's grandparent (/usr/bin/python3.14 -> /usr). /proc/PID/exe
    //    reads as our path to it (a chroot's shows the chroot), its root's as the process's.
    const std::string exe = procfs::exe(pid);
    const std::string sub = "/lib/python" + std::to_string(v.major) + "." + std::to_string(v.minor) + "/lib-dynload";
    for (const std::string& dir : {dirname(dirname(exe)) + sub, root + dirname(dirname(exe)) + sub}) {
        if (exe.empty()) break;
        DIR* d = opendir(dir.c_str());
        if (!d) continue;
        std::vector<std::string> names;
        while (dirent* e = readdir(d))
            if (is_asyncio_module(e->d_name)) names.push_back(e->d_name);
        closedir(d);
        std::sort(names.begin(), names.end());
        for (auto& n : names) {
            std::string w;
            if (auto a = read_section(dir + "/" + n, w)) return a;
        }
    }
    why = "no AsyncioDebug section in the interpreter nor in an _asyncio module (" + first_why + ")";
    return std::nullopt;
}

std::optional<int64_t> AsyncioReader::read_small_int(uint64_t addr) {
    // PyLongObject (3.12+): lv_tag = ndigits << 3 | sign (0 positive, 1 zero, 2 negative), then
    // 30-bit digits. Two digits hold every task counter.
    const auto& ao = lay_.async_objects;
    uint64_t tag = 0;
    if (!rd(addr + ao.long_lv_tag, tag)) return std::nullopt;
    const uint64_t sign = tag & 3, ndigits = tag >> 3;
    if (sign == 1) return 0;
    if (sign == 3 || ndigits == 0 || ndigits > 2) return std::nullopt;
    uint32_t d[2] = {0, 0};
    if (!mem_.read(addr + ao.long_ob_digit, d, 4 * ndigits)) return std::nullopt;
    if ((d[0] >> 30) || (d[1] >> 30)) return std::nullopt;
    int64_t v = static_cast<int64_t>(d[0]) | (static_cast<int64_t>(d[1]) << 30);
    return sign == 2 ? -v : v;
}

std::optional<std::string> AsyncioReader::task_name(uint64_t addr) {
    const auto& ao = lay_.async_objects;
    uint64_t name = 0, type = 0, flags = 0;
    if (!ao.known || !rd(addr + ao_.task_name, name)) return std::nullopt;
    name &= ~kTagMask;
    if (!name || !rd(name + ao.ob_type, type) || !type || !rd(type + ao.tp_flags, flags)) return std::nullopt;
    if (flags & kTpFlagsLongSubclass) {  // asyncio names an unnamed task by a counter
        auto n = read_small_int(name);
        if (!n) return std::nullopt;
        return "Task-" + std::to_string(*n);
    }
    if (!(flags & kTpFlagsUnicodeSubclass)) return std::nullopt;
    return read_unicode(mem_, lay_.obj, name, 255);
}

std::vector<uint64_t> AsyncioReader::awaited_by(uint64_t addr) {
    const auto& ao = lay_.async_objects;
    std::vector<uint64_t> out;
    uint64_t ab = 0;
    uint8_t is_set = 0;
    if (!rd(addr + ao_.task_awaited_by, ab) || !(ab &= ~kTagMask)) return out;
    if (!mem_.read(addr + ao_.task_awaited_by_is_set, &is_set, 1)) return out;
    if (!is_set) {
        out.push_back(ab);
        return out;
    }
    // A set: its table of {key, hash} slots; empty slots are NULL, deleted ones the dummy key
    // (which reads as no task: callers keep only what reads as a task).
    uint64_t used = 0, mask = 0, table = 0;
    if (!rd(ab + ao.set_used, used) || !rd(ab + ao.set_mask, mask) || !rd(ab + ao.set_table, table)) return out;
    if (mask >= kMaxSetSlots || ((mask + 1) & mask) || used > mask + 1 || !table) return out;
    std::vector<uint64_t> slots(2 * (mask + 1));
    if (!mem_.read(table, slots.data(), slots.size() * 8)) return out;
    for (uint64_t i = 0; i <= mask && out.size() < std::min<uint64_t>(used, kMaxAwaiters); i++)
        if (uint64_t key = slots[2 * i] & ~kTagMask) out.push_back(key);
    return out;
}

uint64_t AsyncioReader::coro_code(uint64_t task) {
    const auto& ao = lay_.async_objects;
    uint64_t coro = 0, code = 0;
    if (!ao.known || !rd(task + ao_.task_coro, coro) || !(coro &= ~kTagMask)) return 0;
    if (!rd(coro + ao.gen_iframe + proc_.off.frame_code, code)) return 0;
    return code & ~static_cast<uint64_t>(proc_.off.executable_tag_mask);
}

bool AsyncioReader::is_coroutine_like(uint64_t obj, uint64_t type) {
    uint64_t t = 0;
    return obj && !(obj & 7) && rd(obj + lay_.async_objects.ob_type, t) && t == type;
}

std::vector<pbp_frame> AsyncioReader::coroutine_stack(uint64_t coro, uint32_t max_depth) {
    const auto& ao = lay_.async_objects;
    std::vector<pbp_frame> outer_first;
    if (!ao.known) return outer_first;
    // gi_frame_state (pycore_frame.h): 3.14 CREATED -3, SUSPENDED -2, SUSPENDED_YIELD_FROM -1,
    // EXECUTING 0, COMPLETED 1, CLEARED 4; 3.15 CREATED 0, SUSPENDED 1, SUSPENDED_YIELD_FROM 2,
    // .._LOCKED 3, EXECUTING 4, CLEARED 5.
    const bool v315 = lay_.version.at_least(3, 15);
    std::unordered_set<uint64_t> seen;
    for (uint32_t n = 0; coro && n < max_depth && seen.insert(coro).second; n++) {
        int8_t state = 0;
        uint64_t type = 0;
        if (!mem_.read(coro + ao.gen_frame_state, &state, 1) || !rd(coro + ao.ob_type, type)) break;
        const bool finished = v315 ? state == 5 : state >= 1;
        const bool yield_from = v315 ? (state == 2 || state == 3) : state == -1;
        if (finished) break;
        const uint64_t frame = coro + ao.gen_iframe;
        pbp_frame f{};
        if (!read_frame_at(mem_, proc_, frame, f)) break;
        outer_first.push_back(f);
        if (!yield_from) break;
        // Suspended in `await x`: x sits on the frame's value stack, just below its top (SEND
        // keeps it there; 3.14 and 3.15 differ by one slot, so both are tried). Followed only
        // when it is an object of the coroutine's own type, as CPython's readers do: an
        // awaited Future or iterator ends the chain.
        uint64_t sp = 0, next = 0;
        if (!rd(frame + ao.frame_stackpointer, sp) || !sp) break;
        for (uint64_t back : {8ull, 16ull}) {
            uint64_t cand = 0;
            if (rd(sp - back, cand) && is_coroutine_like(cand & ~kTagMask, type)) {
                next = cand & ~kTagMask;
                break;
            }
        }
        coro = next;
    }
    std::reverse(outer_first.begin(), outer_first.end());
    return outer_first;  // now leaf first
}

std::optional<TaskInfo> AsyncioReader::task(uint64_t addr) {
    if (!addr || (addr & 7) || !lay_.async_objects.known) return std::nullopt;
    uint8_t is_task = 0;
    if (!mem_.read(addr + ao_.task_is_task, &is_task, 1) || is_task != 1) return std::nullopt;
    auto name = task_name(addr);
    if (!name) return std::nullopt;
    TaskInfo t;
    t.addr = addr;
    t.name = *name;
    uint64_t coro = 0;
    if (rd(addr + ao_.task_coro, coro)) t.coro = coro & ~kTagMask;
    t.awaited_by = awaited_by(addr);
    if (!t.coro) {
        t.done = true;
    } else {
        int8_t state = 0;
        if (mem_.read(t.coro + lay_.async_objects.gen_frame_state, &state, 1))
            t.done = lay_.version.at_least(3, 15) ? state == 5 : state >= 1;
    }
    return t;
}

uint64_t AsyncioReader::running_task(uint64_t tstate) {
    uint64_t loop = 0, task = 0;
    if (!rd(tstate + ao_.tstate_running_loop, loop) || !loop) return 0;
    if (!rd(tstate + ao_.tstate_running_task, task)) return 0;
    return task & ~kTagMask;
}

void AsyncioReader::ring(uint64_t head, std::vector<uint64_t>& out, std::unordered_set<uint64_t>& seen_nodes) {
    const uint64_t next_off = lay_.async_objects.llist_next;
    uint64_t node = 0;
    if (!rd(head + next_off, node)) return;
    std::unordered_set<uint64_t> here;
    while (node && node != head && out.size() < kMaxTasks && here.insert(node).second) {
        if (seen_nodes.insert(node).second) out.push_back(node - ao_.task_node);
        if (!rd(node + next_off, node)) break;
    }
}

std::vector<uint64_t> AsyncioReader::list_tasks(const std::vector<uint64_t>& tstates,
                                                const std::vector<uint64_t>& interps) {
    std::vector<uint64_t> out;
    std::unordered_set<uint64_t> seen;
    if (!lay_.async_objects.known) return out;
    for (uint64_t ts : tstates) ring(ts + ao_.tstate_tasks_head, out, seen);
    for (uint64_t in : interps) ring(in + ao_.interp_tasks_head, out, seen);
    return out;
}

}  // namespace pbp::cpython
