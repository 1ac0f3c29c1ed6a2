// The profiling engine: discover -> configure BPF -> sample -> drain -> symbolize ->
// aggregate, behind one object that every front-end drives (the CLI today; the agent, the
// Python API and a live view next). It prints nothing and never exits: what happens reaches
// the caller as events, and failures as a Status.
//
// One engine holds one BPF program. Several sessions subscribe to it, each with its own
// targets and its own aggregation; what BPF samples is the union of their targets, each
// sample goes to the sessions that want its process, and the work per stack (reading the
// BPF stack map, symbolizing) is done once for all of them.
//
// Each session has its own rate. The perf events sample every CPU at the fastest live
// session's rate (raised when a faster session subscribes, before its targets are
// registered; lowered when the fastest one stops), and every on-CPU record carries its CPU's
// sampled clock: a slower session keeps the samples a timer at its own rate on that CPU would
// have taken, each weighing its own period (engine/decimate.h). With idle_without_sessions
// the perf events are closed while no session exists, and reopened by the next subscribe.
//
//   auto engine = Engine::start(config, status);
//   Session* s = engine->subscribe(session_config, on_event, status);
//   while (!s->done()) engine->poll(100);    // snapshot() at any time
//   Profile final = engine->stop(s);
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cpython/thread_stacks.h"
#include "engine/asleep_snapshot.h"
#include "engine/knobs.h"
#include "engine/profile.h"
#include "pybpfprof/abi.h"

namespace pbp {

namespace native {
class NativeStacks;
}
class BpfSampler;
class Symbolizer;
class StackStore;
class AsyncioTasks;
class ProcessRegistry;
class Discoverer;
class Aggregator;
class Launcher;
struct PythonTarget;
struct DiscoveryResult;

// What went wrong, as the CLI's exit codes tell it.
enum class Failure {
    None,
    BadInput,       // a PID that does not exist or is not CPython, a cgroup that does not resolve, ...
    CannotProfile,  // privileges, kernel, BPF, a command that cannot be started
    Forbidden,      // the session's admission rule refuses a target (the agent's access policy)
};

struct Status {
    Failure failure = Failure::None;
    std::string message;  // one line: the cause and the fix
    // With PYBPFPROF_DEBUG, a failed Engine::start, or a subscribe refused because the kernel
    // refused the scheduler programs: the engine's debug lines from its start (PYBPFPROF_DEBUG=2:
    // libbpf's and the verifier's log), for the front end to show its operator.
    std::vector<std::string> debug;
    bool ok() const { return failure == Failure::None; }
    static Status bad_input(std::string m) { return {Failure::BadInput, std::move(m)}; }
    static Status cannot_profile(std::string m) { return {Failure::CannotProfile, std::move(m)}; }
    static Status forbidden(std::string m) { return {Failure::Forbidden, std::move(m)}; }
};

struct EngineConfig {
    double rate_hz = 99;           // samples per second per CPU
    int max_depth = 0;             // deepest Python stack walked; 0 = the most the kernel allows
    std::string btf_path;          // BTF when the kernel has none at /sys/kernel/btf/vmlinux
    std::string node_root = "/";   // where the node's /var/log/pods etc. are (pod and container labels)
    // Which execs BPF reports: every exec (--all-python, launched commands, a --pid followed
    // through exec), or only those under the cgroups the sessions watch (--cgroup).
    bool execs_only_in_cgroups = false;
    // No perf event is open while no session exists (at start, and after the last session
    // stops): an agent waiting for sessions costs nothing per sample. Off: the last session's
    // stop ends sampling for good (the CLI).
    bool idle_without_sessions = false;
    // --native: load the capture of registers and user stacks (kernels 5.17+), for sessions
    // with SessionConfig::native. Off, the sampler is exactly as without it.
    bool native = false;
    // Whether sessions may ask for --mode wall. Off, the scheduler programs are not loaded:
    // the kernel verifies less at start (about 1.4 s -> 0.6 s of CPU on 6.18), and a wall
    // session is refused with the reason.
    bool wall_sessions = true;
    Knobs knobs;
};

// What one session profiles: one of these kinds.
struct TargetSpec {
    std::vector<pid_t> pids;           // running processes (followed through exec)
    bool children = false;             // with pids: their descendants too, present and future
    bool all_python = false;           // every CPython process, new ones too
    std::vector<std::string> cgroups;  // cgroup paths, pod UIDs, namespace/name, container IDs
    std::vector<std::string> command;  // launched, with its descendants
    // A child that the session's owner forked and holds before exec (the agent's clients
    // launch their own commands): followed with its descendants from its exec on, like a
    // launched command. The owner releases it once subscribe has returned. 'command' then
    // says what it runs (it is not launched again).
    pid_t held_child = 0;
};

// May a session profile this process? Asked before a process is read at all and again when
// it is registered (after every exec: credentials change at exec). false + why (one line).
using AdmitRule = std::function<bool(pid_t pid, std::string& why)>;

struct SessionConfig {
    TargetSpec targets;
    // Stop after this long (0: when stopped, or when the targets are gone). A --cgroup that
    // does not exist yet is waited for this long (without a duration it is an error).
    double duration_s = 0;
    // Samples per second per CPU for this session (0: EngineConfig::rate_hz), at most 10000.
    // Its samples weigh 1 / rate_hz s each, whatever the engine's rate.
    double rate_hz = 0;
    // Empty: every process. The agent sets the caller's access rule here.
    AdmitRule admit;
    // What the session keeps (--mode): cpu, on-CPU samples; wall, on-CPU samples and every
    // off-CPU interval of its targets' threads; gil, the on-CPU samples that hold the GIL.
    ProfileMode mode = ProfileMode::Cpu;
    // wall: off-CPU intervals shorter than this are summed per thread and wait reason, and
    // emitted as one aggregate sample once the sum reaches it (never dropped).
    uint64_t min_block_ns = 1'000'000;
    // --async: each sample of a thread running an asyncio task (CPython 3.14+) is put under the
    // task's chain ("<task main>" -> "<task fetch-42>" -> its coroutine frames); older
    // interpreters keep their frames, and a Warning says task names need 3.14+.
    bool async_tasks = false;
    // --native: each on-CPU sample's stack holds its kernel and native frames with its Python
    // frames at their place (userspace/native/merge.h). Needs EngineConfig::native.
    bool native = false;
    // With native: the kernel frames too. Off, they are left out (the agent's callers who may
    // not see kernel stacks: agent/server.cpp).
    bool kernel_frames = true;
};

// What the engine tells a session's owner while it runs.
struct EngineEvent {
    enum Kind {
        TargetAdded,      // pid is profiled from now on (announce: say so to the user)
        CgroupWaiting,    // a --cgroup target does not exist yet: message says why; waited for
        CgroupWatching,   // a --cgroup target is watched: count CPython processes in it now
        AllPythonScanned, // --all-python: count CPython processes were running at the start
                          // (description: whose, when an admission rule narrows it)
        Warning,          // message: something the user should know (the run goes on)
        Error,            // message: something failed (the run goes on)
        Debug,            // message: Knobs::debug lines
    };
    Kind kind;
    pid_t pid = 0;
    bool announce = false;
    size_t count = 0;
    std::string message;
    // TargetAdded: the process as found; CgroupWatching: what is watched.
    std::string comm, python, description;
    std::map<std::string, std::string> labels;
};
using EventSink = std::function<void(const EngineEvent&)>;

class Engine;

// One subscription: its targets, its aggregation, its events.
class Session {
public:
    ~Session();
    // A consistent copy of the profile so far, while sampling goes on.
    Profile snapshot() const;
    // Finished by itself: the duration was reached, the launched program exited, or every
    // --pid target is gone. done_reason() says which.
    bool done() const { return !done_reason_.empty(); }
    const std::string& done_reason() const { return done_reason_; }

    uint64_t sample_count() const;
    size_t targets_now() const { return targets_.size(); }
    // Processes profiled so far: announced (TargetAdded), i.e. seen running Python.
    size_t targets_ever() const { return announced_.size(); }
    // Processes profiled so far, as the live status line counts them: those announced and
    // those with samples (a forked child that ran Python briefly and exec'd is never announced,
    // yet its samples are in the profile and in the summary's count).
    size_t processes_so_far() const;
    // --pid targets that exited during the run (their samples are kept).
    const std::set<pid_t>& exited_early() const { return exited_early_; }
    // Why the first process it found but could not profile was refused ("PID 12 (python):
    // Python 2 is not supported (...)"), or "": what a run that found no CPython says.
    const std::string& first_refusal() const { return first_refusal_; }

    bool launched() const { return launched_pid_ > 0; }
    // The launched command's PID while it runs on (the run ended before it: -d, a signal to
    // pybpfprof alone), else 0. Only for a command this session launched.
    pid_t launched_running() const;
    // Bytes this session's samples hold (for the agent's per-session memory limit).
    size_t memory_bytes() const;
    const SessionConfig& config() const { return cfg_; }
    // What it profiles, for people: "pid 1234", "all-python", "python3 app.py", "cgroup X".
    const std::string& target_text() const { return target_text_; }
    double rate_hz() const { return rate_hz_; }  // its own (SessionConfig::rate_hz resolved)

private:
    friend class Engine;
    Session(Engine& engine, SessionConfig cfg, EventSink sink);
    void event(EngineEvent e) const {
        if (sink_) sink_(e);
    }
    // Does this session want pid, seen at an exec or fork (parent ppid)?
    bool wants_new(pid_t pid, pid_t ppid, bool exec);
    bool admits(pid_t pid, std::string* why = nullptr) const;
    bool in_launch_tree(pid_t pid, pid_t ppid);
    RunInfo run_info(uint64_t end_mono_ns) const;

    Engine& engine_;
    SessionConfig cfg_;
    EventSink sink_;
    std::unique_ptr<Aggregator> agg_;
    std::set<pid_t> targets_, ever_, exited_early_, launch_tree_;
    // The keys its profile holds the programs of exec'd targets under (Engine::retire_exec).
    std::set<uint32_t> retired_;
    // Announced once per PID (an exec into Python again is not news). A child found at its
    // fork is only a copy of its parent until it runs Python or execs: its TargetAdded waits
    // for a Python stack sampled 50 ms or more after it was found, or for 200 ms without an
    // exec (unannounced_), and an exec first drops it.
    std::set<pid_t> announced_;
    struct Unannounced {
        EngineEvent event;
        std::string exe;  // /proc/PID/exe when found: another one later means it has exec'd
        uint64_t found_ns = 0;
        pid_t parent = 0;  // the process that forked it
        bool shares_mm = false;  // with it (vfork: it can run nothing of its own before its exec)
    };
    std::map<pid_t, Unannounced> unannounced_;
    std::string first_refusal_;
    // A wall session's start: the threads of its --pid targets (of every process, when it finds
    // targets later: --all-python, --cgroup, children) asleep then (AsleepSnapshot, taken just
    // before the session's start). Each wall session keeps its own (until 2026-11-29 the engine
    // kept the last subscribe's, and any subscribe cleared it); a target's entries go when it
    // exits (Engine::target_gone), before its PID can be reused.
    AsleepSnapshot asleep_at_start_;
    std::set<pid_t> refusals_said_;  // processes running a Python it cannot profile, said at once
    // Its targets whose GIL state is not known, and why; --mode gil: the on-CPU samples left
    // out for not holding the GIL, by state (RunInfo::gil_*).
    std::map<uint32_t, std::string> gil_unknown_;
    std::map<GilState, uint64_t> gil_left_out_ns_;
    uint64_t gil_left_out_samples_ = 0;
    bool async_note_given_ = false;  // --async: the "task names need 3.14+" note, once
    pid_t launched_pid_ = 0;
    std::unique_ptr<Launcher> launcher_;
    struct WatchedCgroup;
    std::vector<WatchedCgroup> cgroups_;
    uint64_t start_mono_ns_ = 0, deadline_ns_ = 0, last_cgroup_retry_ns_ = 0;
    uint64_t end_mono_ns_ = 0;  // set by stop(): records stamped later are not its own
    int64_t start_unix_ns_ = 0;
    std::string done_reason_;
    std::string target_text_;
    double rate_hz_ = 0;
};

class Engine {
public:
    // Before anything is loaded: root or CAP_BPF + CAP_PERFMON, kernel BTF and version.
    static Status preflight(const EngineConfig& cfg);
    // The same checks a session's subscribe makes, without loading BPF (to fail fast):
    // every --pid is a CPython process, every --cgroup resolves (or is waited for).
    static Status validate(const EngineConfig& cfg, const SessionConfig& s);

    // Loads and attaches the BPF program (preflight included). nullptr and status on failure.
    static std::unique_ptr<Engine> start(const EngineConfig& cfg, Status& status);
    ~Engine();

    // A new session. Its targets are registered now; a launched command is started (and
    // profiled from its first instruction). nullptr and status when its targets are invalid.
    Session* subscribe(const SessionConfig& cfg, EventSink sink, Status& status);

    // One turn of the loop: waits up to timeout_ms for samples, then hands them to the
    // sessions, registers newly discovered processes, forgets exited ones, retries cgroups
    // and reads resource use. Returns records consumed, or -errno (-EINTR on a signal).
    int poll(int timeout_ms);
    // A descriptor that is readable when samples wait, for a front-end with its own epoll
    // loop (the agent): it then calls poll(0). -1 when not sampling.
    int wait_fd() const;

    // Ends a session and returns its final profile (everything BPF holds drained first).
    // When it was the last session, sampling stops for good: a later subscribe fails (with
    // idle_without_sessions, sampling pauses instead until the next subscribe). When it was
    // the fastest, the engine's rate drops to the fastest left.
    Profile stop(Session* s);

    // Engine-wide facts for status lines and summaries.
    uint64_t lost() const;
    uint32_t max_depth() const { return max_depth_; }
    bool uses_bpf_loop() const;
    uint64_t period_ns() const;  // of the engine's rate
    // The rate the perf events sample at now: the fastest session's; 0 while paused or stopped.
    double rate_hz() const;
    const EngineConfig& config() const { return cfg_; }
    // BPF statistics (summed over CPUs), indexed by enum pbp_stat.
    std::vector<uint64_t> bpf_stats() const;

private:
    friend class Session;
    explicit Engine(const EngineConfig& cfg);
    void debug(const std::string& m);
    void on_record(const pbp_event& e);
    void on_sample(const pbp_event& e);
    void on_exec_or_fork(const pbp_event& e);
    bool add_target(Session& s, pid_t pid, bool announce);      // discover now; register
    // fork_parent: the target was found at its fork by that process (0: not a fork);
    // shares_mm: that fork was a vfork (PBP_F_SHARES_MM).
    bool register_target(Session& s, const PythonTarget& t, bool announce, pid_t fork_parent = 0,
                         bool shares_mm = false);
    void announce(Session& s, EngineEvent e);
    void announce_settled_forks(uint64_t now);
    void release_target(Session& s, pid_t pid);
    void target_gone(pid_t pid);                                  // exited: every session
    void forget_in_bpf(pid_t pid);
    // A target exec'd another program: the samples and metadata of the one it ran move under a
    // key of their own in every session that has it (Aggregator/ProcessRegistry::retire).
    void retire_exec(pid_t pid);
    size_t scan(Session& s, const std::vector<pid_t>& pids, bool announce);
    // A process found that it cannot profile (DiscoveryResult Unsupported): why, kept for the end
    // of a run that found nothing; a Python it cannot profile is said at once.
    void refused(Session& s, pid_t pid, const DiscoveryResult& r);
    void schedule(pid_t pid, uint64_t event_ns = 0);
    void run_pending();
    void retry_cgroups(Session& s, uint64_t now);
    bool attach_cgroup(Session& s, size_t i, Status& st);
    void check_done(Session& s, uint64_t now);
    void stop_sampling();
    void forget_unused(const Session& gone);
    void launch_tree_roots(Session& s);
    void reset_caches();
    void pause_sampling();
    // --mode wall. Does a wall session want pid? Then its threads are tracked off CPU (BPF's
    // PBP_PROC_WALL, the threads asleep now seeded), else no longer (their entries dropped).
    void update_wall(pid_t pid);
    // Its threads asleep now, seeded from now or, when the snapshot of one of the wall sessions
    // that want it says they slept since its start, from then.
    void seed_offcpu(pid_t pid, const pbp_proc& proc, const std::vector<const Session*>& wall);
    // The scheduler programs attached while a wall session lives, at the smallest min_block.
    void apply_wall();
    // A wall session's end: its targets' threads still off CPU, and their sums of short
    // intervals not emitted yet, become its samples up to end_ns.
    void flush_offcpu(Session& s, uint64_t end_ns);
    // --native: sample e's stack with its kernel and native frames, for the sessions that want
    // them (stack: its Python-only stack); stack itself when it has no machine state.
    // bare_stack: e's Python-only stack without its wait leaf, when not e's own (read at the end).
    uint32_t native_stack_for(const pbp_event& e, uint32_t stack, std::optional<uint32_t> bare_stack = std::nullopt);
    void deliver(Session& s, const pbp_event& e, uint32_t stack);
    // The stack of a sample record (StackStore::stack_for), or for an off-CPU record of a thread
    // BPF never walked, the stack read when it was seeded.
    uint32_t stack_for(const pbp_event& e);
    // --async: does a session that wants pid want its tasks? Then BPF records the running task
    // of its samples (the process's asyncio offsets found once), else no longer.
    void update_async(pid_t pid);
    // --native: does a session that wants pid want native frames? Then BPF sends its samples'
    // machine state (PBP_PROC_NATIVE), else no longer.
    void update_native(pid_t pid);
    // --async: stack under the task chain of e's running task (its plain stack when none).
    // over: e's --native stack, whose Python frames are stack's, to put under the chain instead.
    uint32_t with_task(const pbp_event& e, uint32_t stack, std::optional<uint32_t> over = std::nullopt);
    // Samples at the fastest rate among the sessions and one about to join (joining_hz, 0 for
    // none); false and error when the perf events cannot be reopened (the old rate is kept).
    bool apply_rate(double joining_hz, std::string& error);

    EngineConfig cfg_;
    std::unique_ptr<BpfSampler> sampler_;
    std::unique_ptr<Symbolizer> symbolizer_;
    std::unique_ptr<StackStore> store_;
    std::unique_ptr<AsyncioTasks> asyncio_;  // --async: the tasks of the processes that want them
    std::set<pid_t> async_pids_;             // those whose samples BPF records the task of
    std::unique_ptr<native::NativeStacks> native_;  // --native, when the sampler captures
    std::map<pid_t, uint32_t> native_pids_;          // PBP_PROC_NATIVE set: pid -> PY_VERSION_HEX
    std::unique_ptr<ProcessRegistry> registry_;
    std::unique_ptr<Discoverer> discoverer_;
    struct NodeNames;
    std::unique_ptr<NodeNames> node_;
    std::vector<std::unique_ptr<Session>> sessions_;

    // Processes registered with BPF, and the sessions that want each.
    std::map<pid_t, std::set<Session*>> targets_;
    std::set<pid_t> live_;  // the keys of targets_ (what the resource sampler reads)
    // When each was found (PythonTarget::found_ns): an exec record from before is of the
    // program found, queued before a session began and drained after it (on_exec_or_fork).
    std::map<pid_t, uint64_t> found_ns_;
    std::set<pid_t> wall_pids_;  // those tracked off CPU (PBP_PROC_WALL)
    struct SeedStack {
        pid_t pid;
        cpython::ThreadStack stack;
        uint32_t stack_id;  // the stack (StackStore), symbolized when seeded: its code objects may be
                            // gone by the time its record comes (the process exits as it wakes)
        uint8_t wait;       // the wait leaf stack_id ends in
    };
    std::map<uint32_t, SeedStack> seed_stacks_;  // by tid: threads asleep when seeded, as read then
    uint64_t offcpu_stackless_ = 0;  // pending intervals at a session's end whose stack could not be read
    struct Pending {
        uint64_t since_ns;
        size_t attempt;
        uint64_t event_ns;            // BPF timestamp of the exec/fork (0: found by a scan)
        bool fork = false;            // found at a fork, no exec since: announced at its first Python stack
        pid_t parent = 0;             // (fork) the process that forked it
        bool shares_mm = false;       // (fork) PBP_F_SHARES_MM: a vfork
        std::set<Session*> for_sessions;
    };
    std::map<pid_t, Pending> pending_;
    std::vector<pid_t> exits_;        // exit events of the last poll
    uint32_t generation_ = 0;         // bumped at each BPF registration
    // The next key for a program a target ran before an exec: above any pid (PID_MAX_LIMIT is
    // 2^22), so a profile's key is its pid for a running program and one of these otherwise.
    uint32_t next_retired_key_ = 0x80000000u;
    uint32_t max_depth_ = 0;
    uint32_t cgroup_slots_ = 0;
    std::string cgroup_mount_;
    uint64_t last_names_ns_ = 0, last_liveness_ns_ = 0, last_admit_ns_ = 0;
    std::set<pid_t> first_seen_, first_stack_;  // Knobs::debug: first-sample lines
    bool sampling_ = false;
    std::vector<std::string> early_debug_;  // debug lines from start(), before any session
    std::vector<uint64_t> final_stats_;
};

}  // namespace pbp
