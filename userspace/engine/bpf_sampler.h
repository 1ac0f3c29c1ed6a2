// configure + sample + drain: owns the BPF skeleton, the per-CPU perf events, the process
// table the BPF side reads, and the ring buffer.
#pragma once
#include <sys/types.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/offcpu_table.h"
#include "pybpfprof/abi.h"

struct pybpfprof_bpf;
struct ring_buffer;
struct bpf_link;

namespace pbp {

struct SamplerConfig {
    double rate_hz = 99;           // the perf events' rate (set_rate changes it)
    bool start_paused = false;     // open no perf event until resume() or set_rate()
    bool watch_exec = false;
    bool cgroup_filter = false;    // report execs only under the cgroups given to set_cgroup()
    size_t ringbuf_bytes = 0;      // 0 = sized from the CPU count
    unsigned stack_entries = 2048; // distinct stacks held by BPF until userspace reads them
    std::string btf_path;          // custom BTF instead of /sys/kernel/btf/vmlinux
    bool bpf_stats = false;        // enable run_time_ns/run_cnt accounting while running (Knobs::bpf_stats)
    int debug = 0;                 // Knobs::debug: libbpf warnings (1) and debug log (2), verifier cost
    std::function<void(const std::string&)> log;  // where debug lines go (the sampler prints nothing)
    bool section_timing = false;   // Knobs::section_timing
    bool force_no_bpf_loop = false;  // Knobs::force_no_bpf_loop
    // --native: load the machine-state capture (kernels with bpf_loop and bpf_task_pt_regs),
    // and size the ring buffer for its records (~17 KiB each). Which processes it applies to
    // is their PBP_PROC_NATIVE flag. A kernel whose verifier gives up on the scheduler
    // programs with it (E2BIG: more than the 1M instructions it verifies at most; 6.12's did
    // before the cut of 513a05a, none of the kernels tools/vmtest boots does since) gets them
    // without it: wall mode is kept, and native_error() says why --native is not.
    bool native_capture = false;
    bool force_wall_native_e2big = false;  // Knobs::force_wall_native_e2big
    // Why wall mode's scheduler programs are left out; empty: they are loaded. Verifying them
    // is most of the load time (on 6.18 about 60% of it), so a front-end that will never ask
    // for --mode wall leaves them out. A wall session is then refused with this reason.
    std::string no_scheduler_programs;
    // wall mode: the slots of the table where BPF finds a thread's entry (a power of 2;
    // engine/offcpu_table.h; Knobs::offcpu_slots)
    uint32_t offcpu_slots = PBP_OFFCPU_SLOTS;
};

class BpfSampler {
public:
    using Handler = std::function<void(const pbp_event&)>;
    // --native: a PBP_EV_NATIVE record, size bytes of it valid (its ustack is cut short).
    using NativeHandler = std::function<void(const pbp_native_event&, size_t size)>;
    // A PBP_EV_CODE record: a code object's identity, captured once (before the first sample
    // record whose stack holds it).
    using CodeHandler = std::function<void(const pbp_code_event&)>;
    // A PBP_EV_THREAD_EXIT record: a profiled process's thread ended, under this name.
    using ThreadExitHandler = std::function<void(const pbp_thread_event&)>;
    struct ProgStats {
        uint64_t run_time_ns = 0, run_cnt = 0;
    };

    // Opens, loads and attaches everything; nullptr with a one-line error otherwise.
    static std::unique_ptr<BpfSampler> open(const SamplerConfig& cfg, Handler handler, std::string& error,
                                            NativeHandler native_handler = nullptr);
    // Loaded with the machine-state capture (SamplerConfig::native_capture on a kernel that has it).
    bool native_capture() const { return native_capture_; }
    ~BpfSampler();

    void set_code_handler(CodeHandler h) { code_handler_ = std::move(h); }
    void set_thread_exit_handler(ThreadExitHandler h) { thread_exit_handler_ = std::move(h); }
    bool add_process(pid_t pid, const pbp_proc& proc, std::string& error);
    void remove_process(pid_t pid);
    // --cgroup: report execs under this cgroup v2 directory (and its descendants) too.
    bool set_cgroup(uint32_t slot, const std::string& dir, std::string& error);

    // Waits up to timeout_ms for records and hands each to the handler. Returns records
    // consumed, or -errno (-EINTR when a signal arrived).
    int poll(int timeout_ms);
    // Readable when records are waiting (for a caller's own epoll loop; then poll(0)).
    int epoll_fd() const;
    // Consumes everything already in the ring buffer without waiting.
    int drain();
    // Samples at hz from now on: the per-CPU perf events are closed, then opened anew at the
    // new period (no event counted twice; none for the few ms in between). Resumes a paused
    // sampler. Records already queued keep the period they were made with as their weight.
    // False with a one-line error when no CPU accepts the new events (then paused).
    bool set_rate(double hz, std::string& error);
    // Closes the perf events (nothing sampled, nothing run per sample); the lifecycle
    // tracepoints, maps and ring buffer stay. resume() reopens them at the current rate.
    void pause();
    bool resume(std::string& error);
    bool paused() const { return perf_links_.empty(); }
    // Stops sampling (pause() until destroyed).
    void stop_sampling() { pause(); }

    // --mode wall: the sched_switch program. Loaded with the rest when the kernel takes it,
    // attached only while a wall session runs.
    // wall_error(): why this kernel cannot (one line, "" when it can).
    const std::string& wall_error() const { return wall_error_; }
    // Why native capture was asked for and left out (one line, "" when it was not).
    const std::string& native_error() const { return native_error_; }
    bool attach_wall(std::string& error);
    void detach_wall();
    bool wall_attached() const { return !wall_links_.empty(); }
    // Off-CPU intervals shorter than this are summed (the BPF global min_block_ns).
    void set_min_block(uint64_t ns);
    // Rewrites the PBP_PROC_* flags in mask of a registered process (false when BPF no longer
    // holds it). *out: its entry as rewritten.
    bool set_process_flags(pid_t pid, uint32_t mask, uint32_t flags, pbp_proc* out = nullptr);
    // --async: BPF records the running asyncio task at this thread-state offset (0: not).
    bool set_async_task_offset(pid_t pid, uint16_t off);
    bool lookup_process(pid_t pid, pbp_proc& out) const;  // its entry in BPF's procs map
    // The off-CPU entries (engine/offcpu_table.h): those of one process's threads (by tid),
    // seeding an entry for a thread asleep before it was tracked (kept if BPF has one already),
    // forgetting a process's; how many seeds went to a slot not their home (it was held), and
    // how many found no slot.
    std::vector<std::pair<uint32_t, pbp_offcpu>> offcpu_entries(pid_t pid) const;
    bool seed_offcpu(uint32_t tid, const pbp_offcpu& e);
    void forget_offcpu(pid_t pid);
    uint64_t offcpu_seeds_spilled() const;
    uint64_t offcpu_seeds_full() const;
    // After seeding a new target's entries: each CPU looks the task it switches out up once
    // more (it may be one of them, running since before its entry was made).
    void new_offcpu_epoch();
    // The kernel's view of the sched_switch link: attached and holding its program.
    bool wall_link_alive() const;
    // run_time_ns / run_cnt of the sched_switch program.
    ProgStats switch_stats() const;

    bool lookup_stack(uint64_t id, pbp_stack& out) const;
    std::array<uint64_t, PBP_STAT_COUNT> stats() const;  // summed over CPUs
    ProgStats prog_stats() const;

    bool uses_bpf_loop() const { return use_loop_; }
    // The deepest stack BPF walks on this kernel.
    uint32_t max_depth() const { return use_loop_ ? PBP_MAX_DEPTH : nolp_chunk_ * PBP_NOLP_RUNS; }
    double rate_hz() const { return rate_hz_; }
    uint64_t period_ns() const { return period_ns_; }  // of the current rate (paused too)
    int cpus() const { return static_cast<int>(perf_links_.size()); }

private:
    BpfSampler() = default;
    static int on_record(void* ctx, void* data, size_t size);
    bool open_perf_events(std::string& error);
    void procs_changed();

    pybpfprof_bpf* skel_ = nullptr;
    uint32_t offcpu_slots_ = 1;
    std::unique_ptr<OffcpuTable> offcpu_;  // wall mode's entries (null without the scheduler programs)
    ring_buffer* rb_ = nullptr;
    std::vector<bpf_link*> perf_links_;
    std::vector<int> perf_fds_;
    std::vector<bpf_link*> tp_links_;
    std::vector<bpf_link*> wall_links_;
    std::string wall_error_;
    std::string native_error_;
    Handler handler_;
    NativeHandler native_handler_;
    CodeHandler code_handler_;
    ThreadExitHandler thread_exit_handler_;
    bool native_capture_ = false;
    bool use_loop_ = true;
    uint32_t nolp_chunk_ = PBP_NOLP_CHUNK;  // frames per walk_nolp run, without bpf_loop
    double rate_hz_ = 0;
    uint64_t period_ns_ = 0;
    int stats_fd_ = -1;
};

}  // namespace pbp
