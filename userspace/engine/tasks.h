// Task spans from a framework's scheduler, attached to a profile: the "task file" that
// pybpfprof.dask writes (Dask's task stream, with each worker thread's kernel tid) and
// `pybpfprof merge --tasks FILE` reads. docs/dask.md describes the file:
//
//   {"format": "pybpfprof-tasks", "version": 1, "source": "dask",
//    "tasks": [{"key": "hot-1f2e", "prefix": "hot", "worker": "tcp://10.0.0.2:4000",
//               "host": "node-b", "pid": 4242, "tid": 4250,
//               "startstops": [{"action": "compute", "start": 1700000000.25,
//                               "stop": 1700000000.75}, ...]}, ...]}
//
// start and stop are wall-clock seconds (time.time()); a span is put on the profile's clock
// through RunInfo's (start_unix_ns, start_mono_ns) pair, the same way a merged profile
// lines up its inputs. Its process is the one labelled worker=<worker> (pybpfprof.dask
// labels each input of the merge), else the one whose pid (or pid in its namespace) is
// "pid" (and whose host label is "host", when both are known); its thread is the one whose
// tid in the process's namespace is "tid" (a thread's native_id).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "engine/profile.h"

namespace pbp {

struct TaskLimits {
    size_t max_bytes = 512u << 20;      // the file
    size_t max_spans = 10'000'000;
    size_t max_text = 4096;             // a key, prefix, action or worker
};

struct AttachedTasks {
    size_t tasks = 0;         // records in the file
    size_t spans = 0;         // startstops in the file
    size_t attached = 0;      // spans added to the profile
    size_t unmatched = 0;     // spans whose process is not in the profile (left out)
    std::vector<std::string> warnings;  // one line each: which workers matched no process
};

// Parses the task file and adds its spans to profile.tasks (kept sorted). False and a
// one-line error for a file that is not a task file or breaks the limits; then the profile
// is unchanged. Spans of a worker that matches no profiled process are counted and named
// in the warnings, not an error: a worker may not have been profiled.
bool attach_tasks(Profile& profile, std::string_view text, AttachedTasks& result, std::string& error,
                  const TaskLimits& limits = {});

// Sorts profile.tasks by (process, tid, start_ns, stop_ns).
void sort_tasks(Profile& profile);

}  // namespace pbp
