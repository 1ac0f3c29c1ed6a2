// The one writer of process and thread metadata: command line, executable, Python version,
// PID-namespace ids, container and pod labels, thread names, whether a process has exited,
// and its CPU and RSS over time. Sessions' profiles take a copy at each snapshot.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "cpython/thread_names.h"
#include "engine/profile.h"
#include "engine/resource_sampler.h"
#include "targets/discovery.h"

namespace pbp {

class ProcessRegistry {
public:
    // A process became a target (again, after an exec): its metadata read now from /proc.
    void add(const PythonTarget& t, std::map<std::string, std::string> labels);
    // A sample of (pid, tid): the thread's name and namespace id are read the first time.
    void on_sample(uint32_t pid, uint32_t tid);
    // Re-reads the names of threads still alive: the Python name (threading.Thread.name, read
    // from the interpreter) or else the OS name (comm). Both change after a thread starts
    // (Thread.name = .., prctl). Every thread of every process (the end of a run).
    void refresh_thread_names();
    // The periodic re-read of the threads sampled since their last naming, process by process
    // at its own pace: a
    // process is read again 1 s after its last read, then, each time no name changed, twice as
    // long after (up to 16 s); a change brings it back to 1 s. A thread whose first naming was
    // put off (a burst) is read at the next call regardless. A thread named by its OS name
    // while its process's Python names could be read is read again at the next 3 turns, 1 s
    // apart, sampled since or not. Names rarely change, and a read costs about twenty
    // process_vm_readv calls per thread.
    void refresh_due_thread_names(uint64_t now_ns);
    // pid's threads sampled since their naming, now (it is ending: its last chance).
    void refresh_thread_names_of(pid_t pid);
    // A thread of pid ended under this OS name (BPF's PBP_EV_THREAD_EXIT): a thread that was
    // sampled takes it, unless the interpreter named it (a Python name wins over comm).
    void on_thread_exit(uint32_t pid, uint32_t tid, const std::string& comm);
    void mark_exited(pid_t pid);
    // pid exec'd another program: what is known of the program it ran (command line, names,
    // CPU and RSS so far) is kept under key (Engine::retire_exec, a key no pid takes), as an
    // exited process, for the samples it took; pid's own entry starts again with no thread
    // and no resource point (add reads the new program's when it is one).
    void retire(uint32_t pid, uint32_t key);
    // Drops everything known of a process (no session has it any more): a pid, or a retired
    // program's key.
    void forget(uint32_t key);
    size_t size() const { return meta_.processes.size(); }
    // Marks every process that no longer exists (the end of a run: exit events can be lost).
    void mark_gone_exited();
    // CPU % and RSS of these processes, about once a second (see ResourceSampler).
    void sample_resources(const std::set<pid_t>& pids, uint64_t now_ns) { resources_.maybe_sample(meta_, pids, now_ns); }
    // A last reading at the end of a run (ResourceSampler::final_sample).
    void sample_resources_at_end(const std::set<pid_t>& pids, uint64_t now_ns) {
        resources_.final_sample(meta_, pids, now_ns);
    }

    // The metadata of one process (threads hold names, no samples), by pid or by a retired
    // program's key; nullptr when unknown.
    const ProcessProfile* find(uint32_t key) const;
    // Copies the metadata of the process under key into out, keeping out's samples (and threads).
    void fill(uint32_t key, ProcessProfile& out) const;

private:
    ThreadProfile& thread(ProcessProfile& p, uint32_t tid);
    static bool exec_since_added(const ProcessProfile& p);
    // Reads the Python names of pid's threads tids into its Names; false when not read now
    // (rate-limited unless forced).
    bool read_python_names(uint32_t pid, const std::set<uint32_t>& tids, bool force);
    // Re-reads the names of p's threads in want; true when one of them changed.
    bool rename_threads(uint32_t pid, ProcessProfile& p, const std::set<uint32_t>& want);
    // Which of a process's threads to name again: all of them, those sampled since their
    // last naming, or only those whose first naming was put off (a burst).
    enum class Due { All, SampledSince, PutOff };
    std::set<uint32_t> threads_to_name(uint32_t pid, const ProcessProfile& p, Due due) const;
    Profile meta_;  // processes and threads without samples
    std::map<uint32_t, ProcessProfile> retired_;  // programs a process ran before an exec, by key
    struct Seen {
        uint64_t samples = 0, named_at = 0;
        bool python_named = false;  // its name came from the interpreter: comm no longer applies
        // Named by comm while its process's names could be read: read again at the process's
        // next turns (kNameRetries at most), sampled since or not. A thread not yet in
        // threading._active (starting, or registered later), or missed by a read that raced
        // the dict's growth, would otherwise keep its OS name when it is not sampled again.
        bool retry = false;
        uint8_t retries = 0;
    };
    static constexpr uint8_t kNameRetries = 3;
    // s was named by comm: whether to read it again (see Seen::retry).
    void unnamed(uint32_t pid, Seen& s);
    // Per Python process: how to read its thread names, and the last names read.
    struct Names {
        pbp_proc proc{};
        cpython::ObjectLayout layout;
        cpython::ThreadNameCache cache;
        std::map<uint32_t, std::string> by_tid;  // host tid -> Python name, as last read
        uint64_t read_ns = 0;                    // when (CLOCK_MONOTONIC); 0 = never
        bool failed = false;                     // the layout has no offsets for names
    };
    std::unordered_map<uint32_t, Names> names_;
    std::unordered_map<uint64_t, Seen> seen_;  // (pid << 32 | tid)
    struct Pace {
        uint64_t next_ns = 0, interval_ns = 1000000000ULL;
    };
    std::unordered_map<uint32_t, Pace> pace_;  // refresh_due_thread_names's, per process
    ResourceSampler resources_;
};

}  // namespace pbp
