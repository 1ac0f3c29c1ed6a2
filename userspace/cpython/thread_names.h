// Python thread names (threading.Thread(name=...), "ThreadPoolExecutor-0_1", "MainThread"),
// read from the interpreter with process_vm_readv, as py-spy does: the interpreter's modules
// dict -> "threading" -> its module dict -> "_active", a dict of ident (get_ident(), which is
// PyThreadState.thread_id, i.e. pthread_self()) -> Thread object -> its "_name" attribute.
// Only threads the threading module knows are named (started by it, or the main thread, or a
// foreign thread that called threading.current_thread(): "Dummy-N"); the others keep their
// OS names. No signal, no stop, no write; every read bounded (a changing or hostile process
// yields fewer names, never a hang).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "cpython/layout.h"
#include "pybpfprof/abi.h"
#include "sys/target_memory.h"

namespace pbp::cpython {

// What one process's reads can reuse: each interpreter's threading._active dict, found once
// (a walk of sys.modules) and checked to still be a dict before each use.
struct ThreadNameCache {
    std::map<uint64_t, uint64_t> active;  // PyInterpreterState* -> threading._active
    // host tid -> PyThreadState.thread_id, from the last walk of the thread states: a thread's
    // ident is its own for its life, so the walk is redone only for a tid not in it.
    std::map<uint32_t, uint64_t> ident_of;
};

// ident -> name for every thread in threading._active, in every interpreter (only those in
// 'wanted' when given: the others are skipped by their stored hash, unread). False (err says
// why) when the interpreter list cannot be read or the layout has no thread-name offsets; an
// interpreter that has not imported threading adds nothing.
bool read_thread_names(MemoryReader& mem, const pbp_proc& proc, const ObjectLayout& lay, ThreadNameCache& cache,
                       std::map<uint64_t, std::string>& out, std::string& err,
                       const std::set<uint64_t>* wanted = nullptr);

// Host tid -> Python name for pid's threads (only those in 'tids' when given): its thread
// states' thread_id matched to tids as read_thread_stacks does, without walking frames.
bool read_thread_names_by_tid(pid_t pid, const pbp_proc& proc, const ObjectLayout& lay, ThreadNameCache& cache,
                              std::map<uint32_t, std::string>& out, std::string& err,
                              const std::set<uint32_t>* tids = nullptr);

}  // namespace pbp::cpython
