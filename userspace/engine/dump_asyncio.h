// `pybpfprof dump --async`: every asyncio task of a process (CPython 3.14+), running or not,
// with its name, state, coroutine stack and the tasks that await it: the await graph
// `python -m asyncio pstree PID` shows. Read from userspace like the rest of the dump
// (cpython/asyncio.h: bounded, a task that ends while read is left out).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cpython/thread_stacks.h"
#include "engine/profile.h"

namespace pbp {

class StackStore;
struct PythonTarget;

struct DumpTask {
    uint64_t id = 0;        // the task object's address (what awaited_by refers to)
    std::string name;       // as Python names it: the name given, or Task-N
    std::string state;      // "running" (a thread's running task now), "pending", "done"
    uint32_t thread = 0;    // host tid of the thread whose task list holds it (0: the interpreter's
                            // list, tasks of threads that ended; or not known)
    std::vector<Frame> coroutine_stack;  // innermost first: where the task is now
    std::vector<uint64_t> awaited_by;    // ids of the tasks awaiting it (listed tasks only)
};

struct DumpAsyncio {
    std::string note;              // "" when tasks were read; else why not (CPython < 3.14, ...)
    std::vector<DumpTask> tasks;   // in task-list order: per thread, then the interpreter's
};

// The tasks of process t, whose thread stacks were just read (read), their frames named
// through store. max_depth bounds each coroutine stack.
DumpAsyncio dump_asyncio(const PythonTarget& t, const pbp_proc& proc, const std::vector<cpython::ThreadStack>& read,
                         StackStore& store, uint32_t max_depth);

}  // namespace pbp
