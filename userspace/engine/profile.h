// The aggregated profile: what every exporter reads. Samples keep their timestamps per
// (process, thread), so timelines and flame graphs are built from the same data.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace pbp {

// What ran in a frame. Python frames come from the interpreter's frame walk; native and
// kernel frames from unwinding the machine stack (`--native`, issue 17).
enum class FrameKind : uint8_t { Python = 0, Native = 1, Kernel = 2 };

struct Frame {
    std::string name;  // qualified name (co_qualname on 3.11+), a native symbol, or a synthetic "[...]" marker
    std::string file;  // co_filename; for native frames the source file when debug information has it
    int line = 0;      // exact line of the sampled instruction; 0 = unknown
    bool synthetic = false;
    FrameKind kind = FrameKind::Python;
    std::string library;  // native and kernel frames: the ELF file's path ("[kernel]" for the kernel); empty for Python

    bool operator==(const Frame& o) const {
        return line == o.line && synthetic == o.synthetic && kind == o.kind && name == o.name &&
               file == o.file && library == o.library;
    }
};

struct FrameHash {
    size_t operator()(const Frame& f) const;
};

class FrameTable {
public:
    uint32_t intern(const Frame& f);
    const Frame& at(uint32_t i) const { return frames_[i]; }
    size_t size() const { return frames_.size(); }
    const std::vector<Frame>& all() const { return frames_; }
    bool operator==(const FrameTable& o) const { return frames_ == o.frames_; }

private:
    std::vector<Frame> frames_;
    std::unordered_map<Frame, uint32_t, FrameHash> index_;
};

// Stacks are frame-index vectors, outermost (root) frame first.
class StackTable {
public:
    uint32_t intern(const std::vector<uint32_t>& root_first);
    const std::vector<uint32_t>& at(uint32_t i) const { return stacks_[i]; }
    size_t size() const { return stacks_.size(); }
    bool operator==(const StackTable& o) const { return stacks_ == o.stacks_; }

private:
    struct VecHash {
        size_t operator()(const std::vector<uint32_t>& v) const;
    };
    std::vector<std::vector<uint32_t>> stacks_;
    std::unordered_map<std::vector<uint32_t>, uint32_t, VecHash> index_;
};

// What a sample stands for (the ABI's enum pbp_sample_kind).
enum class SampleKind : uint8_t {
    Cpu = 1,     // on CPU: its weight is the sampling period
    OffCpu = 2,  // off CPU: its weight is the interval the thread waited
};
const char* kind_name(SampleKind k);  // "cpu", "off-cpu"

// The sampled thread and its interpreter's GIL (the ABI's enum pbp_gil).
enum class GilState : uint8_t {
    NA = 0,       // not known (free-threaded build, layout unknown): shown as n/a
    Held = 1,
    Waiting = 2,  // off CPU in take_gil
    Neither = 3,
};
const char* gil_name(GilState g);  // "n/a", "held", "waiting", "neither"

// Why an off-CPU sample's thread was off CPU (the ABI's enum pbp_wait); None on CPU. The
// symbolized stack ends in the matching synthetic leaf (wait_leaf).
enum class WaitReason : uint8_t {
    None = 0,
    Sleep = 1,     // "[sleeping]"
    Io = 2,        // "[waiting for I/O]"
    Gil = 3,       // "[waiting for the GIL]"
    Runnable = 4,  // "[runnable, waiting for a CPU]"
};
const char* wait_leaf(WaitReason w);  // the leaf frame's name; "" for None

// What a run keeps (--mode).
enum class ProfileMode : uint8_t {
    Cpu = 0,   // on-CPU samples
    Wall = 1,  // on-CPU samples and off-CPU intervals: every thread's whole wall time
    Gil = 2,   // the on-CPU samples that hold the GIL
};
const char* mode_name(ProfileMode m);                 // "cpu", "wall", "gil"
bool parse_mode(const std::string& s, ProfileMode& m);  // false for anything else

// A stack with a weight and a kind. Exporters sum weights: one sample is not one period.
// A sample covers the weight_ns that ended at ts_ns (an off-CPU interval: [ts - weight, ts];
// an aggregate one stands for several short intervals up to ts, not one span).
// A bucket (span_ns > 0) stands for `count` samples of one stack, kind, GIL state and wait
// taken in [ts - span, ts), their weights summed: what a session keeps of the samples older
// than its window (engine/aggregator.h). Its weight is spread over that span in timelines;
// count may be 0 for the part of an off-CPU interval that began in an earlier bucket.
struct Sample {
    uint64_t ts_ns = 0;      // CLOCK_MONOTONIC, as stamped by BPF
    uint32_t stack = 0;      // StackTable index
    uint16_t cpu = 0;
    SampleKind kind = SampleKind::Cpu;
    uint64_t weight_ns = 0;  // what the sample stands for, in ns
    GilState gil = GilState::NA;
    WaitReason wait = WaitReason::None;
    bool aggregate = false;  // off CPU: the sum of intervals shorter than the minimum
    uint32_t count = 1;      // samples it stands for (1 unless a bucket)
    uint64_t span_ns = 0;    // a bucket: the span [ts - span, ts) its samples were taken in
    bool operator==(const Sample&) const = default;
};

// The thread of a process that holds what its vforked children (sharing its memory until their
// exec: subprocess's child on its way to exec uname, say) were sampled doing before their exec
// of another program: their parent's call's cost, not processes of their own
// (Aggregator::fold_fork, Engine::on_exec_or_fork). No thread has tid 0.
constexpr uint32_t kForkedChildrenTid = 0;
constexpr const char* kForkedChildrenName = "[forked children, until their exec]";

struct ThreadProfile {
    uint32_t tid = 0;     // host tid
    uint32_t ns_tid = 0;  // tid inside the process's PID namespace (== tid when none)
    std::string name;     // the Python name (threading), else the OS name (/proc/PID/task/TID/comm)
    std::vector<Sample> samples;  // in time order (a bucket at its end)
    uint64_t sample_count() const;  // the samples they stand for (buckets count theirs)
    bool operator==(const ThreadProfile&) const = default;
};

// One reading of a process's resource use (ResourceSampler, about once a second).
struct ResourcePoint {
    uint64_t mono_ns = 0;   // CLOCK_MONOTONIC when read
    double cpu_pct = -1;    // CPU time (user + system, all threads) since the previous reading,
                            // in % of one CPU; -1 = unknown (first reading)
    uint64_t rss_bytes = 0; // resident set size
    bool operator==(const ResourcePoint&) const = default;
};

struct ProcessProfile {
    uint32_t pid = 0;     // host pid
    uint32_t ns_pid = 0;  // pid inside its PID namespace (NSpid), == pid when none
    std::string comm;
    std::string cmdline;  // argv joined by spaces
    std::string exe;
    std::string python;   // "3.11.7 (static /usr/bin/python3.11)"
    uint64_t first_sample_ns = 0, last_sample_ns = 0;
    bool exited = false;
    bool execd = false;  // (with exited) it ended by an exec into another program, the PID going on
    // Container / pod labels, when known (cgroup, container_id, container, pod_uid, pod,
    // namespace); in a merged profile also its input's labels (role=scheduler, host=node-a).
    std::map<std::string, std::string> labels;
    std::map<uint32_t, ThreadProfile> threads;  // by host tid
    std::vector<ResourcePoint> resources;       // in time order

    std::string display_name() const;  // "python3 app.py (pid 1234)"
    // From the labels: "namespace/name" (or the pod UID when its name is not known), "" for
    // a process in no pod.
    std::string pod_name() const;
    // "pod default/web-1, container app" / "container 0123456789ab" / "" (no container),
    // then every label but the container/pod/cgroup ones as key=value, and the host last:
    // "role=worker, worker=tcp://10.0.0.2:4000, host node-b" (a merged profile's).
    std::string where() const;
    bool operator==(const ProcessProfile&) const = default;
};

struct RunInfo {
    std::string target;                 // "pid 1234", "all-python", "python3 app.py"
    std::vector<std::string> command;   // launched command, if any
    uint64_t start_mono_ns = 0;         // CLOCK_MONOTONIC at start of sampling
    uint64_t end_mono_ns = 0;
    int64_t start_unix_ns = 0;          // CLOCK_REALTIME at start_mono_ns
    double rate_hz = 0;
    uint64_t period_ns = 0;             // each sample stands for this much CPU time
    std::string kernel;                 // uname -r
    std::string host;                   // the machine's host name (uname -n) at record time
    std::string version;                // pybpfprof version
    uint64_t lost = 0;                  // ring-buffer drops
    uint64_t truncated = 0;             // samples deeper than the walk limit (marked [truncated])
    std::map<std::string, uint64_t> unresolved;  // reason -> samples without a full stack
    uint64_t bpf_run_time_ns = 0, bpf_run_cnt = 0;  // from bpf_stats, when enabled
    int max_depth = 0;                  // deepest stack BPF walks in this run (kernel limit or --max-depth)
    bool bpf_loop = false;              // the kernel has bpf_loop (else the tail-call walk)
    ProfileMode mode = ProfileMode::Cpu;  // what the run kept (--mode)
    uint64_t min_block_ns = 0;          // wall: the minimum off-CPU interval kept alone
    // For the run's summary (summary/), not written to profile files:
    std::map<uint32_t, std::string> gil_unknown;   // targets (pid) whose GIL state is n/a, and why
    std::map<GilState, uint64_t> gil_left_out_ns;  // gil: on-CPU samples left out (not holding it), by state
    uint64_t gil_left_out_samples = 0;

    bool operator==(const RunInfo&) const = default;

    int64_t unix_ns(uint64_t mono_ns) const {
        return start_unix_ns + static_cast<int64_t>(mono_ns - start_mono_ns);
    }
    double duration_s() const { return (end_mono_ns - start_mono_ns) / 1e9; }
};

// One span of a task that a framework's scheduler ran in a profiled thread (Dask's task
// stream: a task's compute, or a transfer, deserialize, disk-read or disk-write step),
// attached from its task file (engine/tasks.h). Timestamps are on the profile's clock
// (CLOCK_MONOTONIC like Sample::ts_ns; RunInfo::unix_ns gives the wall-clock time).
struct TaskSpan {
    uint32_t process = 0;  // the key of its process in Profile::processes
    uint32_t tid = 0;      // its thread: a ThreadProfile key when the thread was sampled, else the
                           // thread's id in the process's PID namespace
    uint64_t start_ns = 0, stop_ns = 0;
    std::string key;       // the task's key, as text ("('groupby-agg-1f2e', 3)")
    std::string prefix;    // its key prefix (distributed.utils.key_split: "groupby-agg")
    std::string action;    // "compute", "transfer", "deserialize", "disk-read", "disk-write"
    bool operator==(const TaskSpan&) const = default;
};

// One of the profiles a merged profile was made of (engine/merge.h): its run as recorded,
// on its own machine's clock, and the labels the merge gave its processes.
struct MergedInput {
    RunInfo run;
    std::map<std::string, std::string> labels;
    bool operator==(const MergedInput&) const = default;
};

struct Profile {
    RunInfo run;
    FrameTable frames;
    StackTable stacks;
    // By host pid in a recorded profile. In a merged profile (engine/merge.h) processes of
    // several machines may share a pid, so the key is a synthetic number (1, 2, ... in input
    // order): read a process's pid from ProcessProfile::pid, never from the key.
    std::map<uint32_t, ProcessProfile> processes;
    std::vector<MergedInput> merged_from;  // a merged profile's inputs, in order; empty when recorded
    std::vector<TaskSpan> tasks;  // sorted by (process, tid, start_ns); empty when none were attached

    bool operator==(const Profile&) const = default;

    uint64_t total_samples() const;
    uint64_t total_weight_ns(SampleKind k) const;
    size_t total_threads() const;
    uint64_t unresolved_total() const;
};

}  // namespace pbp
