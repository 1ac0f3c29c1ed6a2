#include "engine/asyncio_tasks.h"

#include <unordered_set>

#include "sys/clock.h"

namespace pbp {

std::optional<cpython::AsyncioOffsets> AsyncioTasks::add_process(pid_t pid, const cpython::Layout& layout,
                                                                  const std::string& interp_path,
                                                                  const pbp_proc& proc, std::string& why) {
    if (!layout.version.at_least(3, 14)) {
        why = "asyncio task names need CPython 3.14+ (this is " + layout.version.str() +
              "): --async shows its coroutine frames as without it";
        return std::nullopt;
    }
    if (!layout.async_objects.known) {
        why = "its _Py_DebugOffsets do not describe asyncio's objects: no task names";
        return std::nullopt;
    }
    auto ao = cpython::find_asyncio_offsets(pid, interp_path, layout.version, why);
    if (!ao) return std::nullopt;
    Proc p{layout, *ao, proc, std::make_unique<ProcessMemory>(pid)};
    p.proc.off.tstate_async_task = static_cast<uint16_t>(ao->tstate_running_task);
    procs_[pid] = std::move(p);
    return ao;
}

void AsyncioTasks::remove_process(pid_t pid) {
    procs_.erase(pid);
    cache_.erase(cache_.lower_bound({pid, 0}), cache_.lower_bound({pid + 1, 0}));
    known_.erase(known_.lower_bound({pid, 0}), known_.lower_bound({pid + 1, 0}));
}

void AsyncioTasks::new_turn() {
    cache_.clear();
    const uint64_t now = mono_ns();
    if (now - last_prune_ns_ < kKeepNs) return;
    last_prune_ns_ = now;
    for (auto it = known_.begin(); it != known_.end();)
        it = now - it->second.read_ns > kKeepNs ? known_.erase(it) : std::next(it);
}

const AsyncioTasks::Chain* AsyncioTasks::chain(pid_t pid, uint64_t task) {
    auto key = std::make_pair(pid, task);
    auto c = cache_.find(key);
    if (c != cache_.end()) return c->second ? &*c->second : nullptr;
    auto& slot = cache_[key];
    auto p = procs_.find(pid);
    if (p == procs_.end()) return nullptr;
    cpython::AsyncioReader r(*p->second.mem, p->second.layout, p->second.ao, p->second.proc);
    auto name = r.task_name(task);
    if (!name) {  // ended (or its process did) since the sample: its last chain, if read lately
        auto k = known_.find(key);
        if (k == known_.end() || mono_ns() - k->second.read_ns > kKeepNs) return nullptr;
        slot = k->second.chain;
        return &*slot;
    }
    Chain ch;
    ch.coro_code = r.coro_code(task);
    // Up the awaiters: a task awaited by several (a set) goes on under the first that reads as
    // a task; a Future that is not a task (is_task 0) ends the chain, as do a cycle and the bound.
    std::vector<std::string> leaf_first{"<task " + *name + ">"};
    std::unordered_set<uint64_t> seen{task};
    for (uint64_t cur = task; leaf_first.size() < kMaxChain;) {
        uint64_t up = 0;
        std::string up_name;
        for (uint64_t a : r.awaited_by(cur)) {
            auto t = r.task(a);
            if (t && !seen.count(a)) {
                up = a;
                up_name = t->name;
                break;
            }
        }
        if (!up) break;
        seen.insert(up);
        leaf_first.push_back("<task " + up_name + ">");
        cur = up;
    }
    ch.names.assign(leaf_first.rbegin(), leaf_first.rend());
    known_[key] = {ch, mono_ns()};
    slot = std::move(ch);
    return &*slot;
}

}  // namespace pbp
