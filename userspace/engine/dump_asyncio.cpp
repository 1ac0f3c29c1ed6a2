#include "engine/dump_asyncio.h"

#include <map>
#include <set>

#include "cpython/asyncio.h"
#include "engine/stack_store.h"
#include "sys/target_memory.h"
#include "targets/discovery.h"

namespace pbp {

namespace {

std::vector<Frame> named(StackStore& store, pid_t pid, const std::vector<pbp_frame>& leaf_first) {
    std::vector<Frame> out;
    if (leaf_first.empty()) return out;
    const uint32_t stack = store.stack_for_frames(pid, leaf_first, 0, PBP_OK);
    const auto& ids = store.stacks().at(stack);
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) out.push_back(store.frames().at(*it));
    return out;
}

}  // namespace

DumpAsyncio dump_asyncio(const PythonTarget& t, const pbp_proc& proc, const std::vector<cpython::ThreadStack>& read,
                         StackStore& store, uint32_t max_depth) {
    DumpAsyncio out;
    if (!t.layout.version.at_least(3, 14)) {
        out.note = "asyncio tasks need CPython 3.14+ (this is " + t.layout.version.str() + ")";
        return out;
    }
    if (!t.layout.async_objects.known) {
        out.note = "its _Py_DebugOffsets do not describe asyncio's objects";
        return out;
    }
    std::string why;
    auto ao = cpython::find_asyncio_offsets(t.pid, t.interp_path, t.layout.version, why);
    if (!ao) {
        out.note = why;
        return out;
    }
    ProcessMemory mem(t.pid);
    cpython::AsyncioReader r(mem, t.layout, *ao, proc);

    // The task each thread runs now, and the task list of each thread, then the interpreters'
    // (tasks whose thread ended).
    std::map<uint64_t, const cpython::ThreadStack*> running;
    std::vector<std::pair<uint64_t, uint32_t>> listed;  // task, thread whose list holds it
    std::set<uint64_t> seen;
    std::vector<uint64_t> interps;
    for (const auto& ts : read) {
        if (uint64_t task = r.running_task(ts.tstate)) running[task] = &ts;
        for (uint64_t task : r.list_tasks({ts.tstate}, {}))
            if (listed.size() < cpython::AsyncioReader::kMaxTasks && seen.insert(task).second)
                listed.push_back({task, ts.tid});
        if (std::find(interps.begin(), interps.end(), ts.interp) == interps.end()) interps.push_back(ts.interp);
    }
    for (uint64_t task : r.list_tasks({}, interps))
        if (listed.size() < cpython::AsyncioReader::kMaxTasks && seen.insert(task).second) listed.push_back({task, 0});

    std::set<uint64_t> ids;
    for (auto& [addr, tid] : listed) {
        auto info = r.task(addr);
        if (!info) continue;  // ended (or reused) while read
        DumpTask d;
        d.id = addr;
        d.name = info->name;
        d.thread = tid;
        d.awaited_by = info->awaited_by;
        auto run = running.find(addr);
        if (run != running.end()) {
            // Running: its coroutine is executing, so its stack is its thread's, from the
            // coroutine's frame (the outermost one of its code object) to the leaf.
            d.state = "running";
            const uint64_t code = r.coro_code(addr);
            const auto& frames = run->second->frames;
            size_t outer = frames.size();
            for (size_t i = 0; i < frames.size(); i++)
                if (frames[i].code == code) outer = i;
            if (outer < frames.size())
                d.coroutine_stack = named(store, t.pid, {frames.begin(), frames.begin() + static_cast<long>(outer) + 1});
        } else {
            d.state = info->done ? "done" : "pending";
            if (!info->done) d.coroutine_stack = named(store, t.pid, r.coroutine_stack(info->coro, max_depth));
        }
        ids.insert(addr);
        out.tasks.push_back(std::move(d));
    }
    // Edges to tasks only: a task awaited by a plain Future (not a task) has no parent here.
    for (auto& d : out.tasks) {
        std::vector<uint64_t> keep;
        for (uint64_t a : d.awaited_by)
            if (ids.count(a) && a != d.id) keep.push_back(a);
        d.awaited_by = std::move(keep);
    }
    return out;
}

}  // namespace pbp
