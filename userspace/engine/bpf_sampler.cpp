#include "engine/bpf_sampler.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <fstream>

#include "engine/decimate.h"
#include "sys/preflight.h"
#include "sys/priority.h"
#include "pybpfprof.skel.h"

namespace pbp {

static_assert(sizeof(pbp_event) == 72, "a ring-buffer record is 72 bytes (include/pybpfprof/abi.h)");
static_assert(sizeof(pbp_thread_event) == 40 && offsetof(pbp_thread_event, type) == offsetof(pbp_event, type) &&
                  offsetof(pbp_thread_event, tid) == offsetof(pbp_event, tid),
              "a thread record starts like pbp_event (include/pybpfprof/abi.h)");
static_assert(offsetof(pbp_native_event, kstack) + sizeof(pbp_native_event::kstack) == PBP_NATIVE_HEADER_BYTES &&
                  offsetof(pbp_native_event, type) == offsetof(pbp_event, type),
              "pbp_native_event: its header and its type field (include/pybpfprof/abi.h)");

namespace {

std::vector<int> online_cpus() {
    std::vector<int> cpus;
    std::ifstream f("/sys/devices/system/cpu/online");
    std::string s;
    if (f >> s) {
        size_t i = 0;
        while (i < s.size()) {
            size_t comma = s.find(',', i);
            std::string part = s.substr(i, comma == std::string::npos ? std::string::npos : comma - i);
            auto dash = part.find('-');
            int a = std::stoi(part.substr(0, dash));
            int b = dash == std::string::npos ? a : std::stoi(part.substr(dash + 1));
            for (int c = a; c <= b; c++) cpus.push_back(c);
            if (comma == std::string::npos) break;
            i = comma + 1;
        }
    }
    if (cpus.empty())
        for (int c = 0; c < libbpf_num_possible_cpus(); c++) cpus.push_back(c);
    return cpus;
}

// libbpf's log is process-wide: the level and sink of the last sampler opened.
int g_libbpf_debug = 0;
std::function<void(const std::string&)> g_libbpf_sink;

int libbpf_log(enum libbpf_print_level level, const char* fmt, va_list args) {
    if (!g_libbpf_sink || level == LIBBPF_INFO) return 0;
    if ((level == LIBBPF_WARN && g_libbpf_debug >= 1) || (level == LIBBPF_DEBUG && g_libbpf_debug >= 2)) {
        // Whole: libbpf hands the verifier's log over as one message (it ends with the reason).
        va_list copy;
        va_copy(copy, args);
        const int n = vsnprintf(nullptr, 0, fmt, copy);
        va_end(copy);
        if (n <= 0) return 0;
        std::string line(static_cast<size_t>(n) + 1, '\0');
        vsnprintf(line.data(), line.size(), fmt, args);
        line.resize(static_cast<size_t>(n));
        while (!line.empty() && line.back() == '\n') line.pop_back();
        g_libbpf_sink(line);
    }
    return 0;
}

size_t pow2_at_least(size_t n) {
    size_t p = 1;
    while (p < n) p <<= 1;
    return p;
}

}  // namespace

std::unique_ptr<BpfSampler> BpfSampler::open(const SamplerConfig& cfg, Handler handler, std::string& error,
                                             NativeHandler native_handler) {
    g_libbpf_debug = cfg.debug;
    g_libbpf_sink = cfg.log;
    libbpf_set_print(libbpf_log);
    std::unique_ptr<BpfSampler> s(new BpfSampler());
    s->handler_ = std::move(handler);
    s->native_handler_ = std::move(native_handler);

    // bpf_loop (5.17+) lets one program walk PBP_MAX_DEPTH frames; older kernels get the
    // program that walks PBP_NOLP_CHUNK frames per run and continues through tail calls.
    s->use_loop_ = libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, nullptr) == 1;
    if (cfg.force_no_bpf_loop) s->use_loop_ = false;

    s->rate_hz_ = cfg.rate_hz;
    s->period_ns_ = period_of_rate(cfg.rate_hz);
    // 1 MiB per CPU (at least 2, at most 16 MiB): code object copies (~5.5 KiB each, taken at
    // a code object's first sample) stop while half of it is queued, and a burst of Python
    // start-ups (~150 code objects each; 25 at once in the exec storm test) filled a quarter of
    // the 1 MiB of before, leaving the frames of processes that exited before pybpfprof read
    // them unnamed. Its pages count in pybpfprof's memory as records first pass through them
    // (the whole of it only after that much has been queued).
    size_t rb = cfg.ringbuf_bytes ? cfg.ringbuf_bytes
                                  : std::clamp<size_t>(online_cpus().size() * (1u << 20), 2u << 20, 16u << 20);
    // --native: a sample moves ~17 KiB (its stack copy): at 999 Hz on 2 CPUs 34 MB/s, drained
    // every 100 ms or at rb / 8 queued.
    s->native_capture_ = cfg.native_capture && s->use_loop_ &&
                         libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, nullptr) == 1;
    if (s->native_capture_ && !cfg.ringbuf_bytes) rb = std::max<size_t>(rb, 32u << 20);
    rb = pow2_at_least(rb);

    // --mode wall: the sched_switch program. Loaded with the rest; a kernel that refuses it gets
    // the sampler without it, and a wall session says why.
    bool wall = cfg.no_scheduler_programs.empty();
    if (!wall) s->wall_error_ = cfg.no_scheduler_programs;

    // Without bpf_loop, the frames walked per program run are a verifier-cost trade-off:
    // try the larger chunk, and a smaller one if this kernel's verifier gives up on it. A
    // kernel that refuses the scheduler programs gets the sampler without them.
    std::vector<uint32_t> chunks{PBP_NOLP_CHUNK};
    if (!s->use_loop_) chunks.push_back(PBP_NOLP_CHUNK_SMALL);
    for (size_t attempt = 0; attempt < chunks.size();) {
        LIBBPF_OPTS(bpf_object_open_opts, opts);
        if (!cfg.btf_path.empty()) opts.btf_custom_path = cfg.btf_path.c_str();
        s->skel_ = pybpfprof_bpf__open_opts(&opts);
        if (!s->skel_) {
            error = std::string("cannot open the BPF object: ") + strerror(errno);
            return nullptr;
        }
        s->skel_->rodata->watch_flags =
            (cfg.watch_exec ? PBP_WATCH_EXEC : 0) | (cfg.cgroup_filter ? PBP_WATCH_CGROUP : 0);
        s->skel_->rodata->nolp_chunk = chunks[attempt];
        s->skel_->rodata->section_timing = cfg.section_timing ? 1 : 0;
        s->skel_->rodata->native_capture = s->native_capture_ ? 1 : 0;
        bpf_program__set_autoload(s->skel_->progs.on_sample, s->use_loop_);
        bpf_program__set_autoload(s->skel_->progs.on_sample_nolp, !s->use_loop_);
        bpf_program__set_autoload(s->skel_->progs.walk_nolp, !s->use_loop_);
        bpf_program__set_autoload(s->skel_->progs.capture_nolp, !s->use_loop_);
        bpf_program__set_autoload(s->skel_->progs.on_switch, wall && s->use_loop_);
        bpf_program__set_autoload(s->skel_->progs.on_switch_nolp, wall && !s->use_loop_);
        bpf_program__set_autoload(s->skel_->progs.walk_nolp_rt, wall && !s->use_loop_);
        bpf_program__set_autoload(s->skel_->progs.capture_nolp_rt, wall && !s->use_loop_);
        bpf_map__set_max_entries(s->skel_->maps.events, static_cast<uint32_t>(rb));
        s->skel_->rodata->wakeup_bytes = rb / 8;
        bpf_map__set_max_entries(s->skel_->maps.stacks, cfg.stack_entries);
        // wall mode's slot table (engine/offcpu_table.h): one slot when it is left out
        const uint32_t slots = wall ? cfg.offcpu_slots : 1;
        bpf_map__set_max_entries(s->skel_->maps.offcpu_slots, slots);
        s->skel_->rodata->offcpu_slot_mask = slots - 1;
        s->offcpu_slots_ = slots;

        int err;
        if (wall && s->native_capture_ && cfg.force_wall_native_e2big) {
            err = -E2BIG;
        } else {
            // Verification is ~1.2 s of CPU here (on_sample: 340,000 instructions), done in
            // this thread: on a machine busy with other work, at nice 0 it got its share and
            // took 16-20 s (BENCHMARKS.md, agent cost).
            sys::PriorityBoost boost(-10);
            err = pybpfprof_bpf__load(s->skel_);
        }
        if (!err) {
            s->nolp_chunk_ = chunks[attempt];
            break;
        }
        pybpfprof_bpf__destroy(s->skel_);
        s->skel_ = nullptr;
        if (wall && err == -E2BIG && s->native_capture_) {  // the same again without native capture
            s->native_capture_ = false;
            s->native_error_ = std::string("its verifier refused wall mode's scheduler programs with native capture (") +
                               strerror(E2BIG) + ": they need more than the 1M instructions it verifies at most)";
            continue;
        }
        if (wall) {  // the same again without the scheduler programs
            wall = false;
            s->wall_error_ = std::string("the kernel refused the scheduler programs: ") + strerror(-err);
            continue;
        }
        if (attempt + 1 < chunks.size() && (err == -E2BIG || err == -EACCES || err == -EINVAL)) {
            attempt++;
            wall = s->wall_error_.rfind("the kernel refused", 0) == 0;
            if (wall) s->wall_error_.clear();
            continue;
        }
        error = std::string("cannot load the BPF program: ") + strerror(-err);
        if (std::string why = err == -EPERM ? memlock_problem() : ""; !why.empty()) error += ": " + why;
        else error += " (run with PYBPFPROF_DEBUG=2 for the verifier log)";
        return nullptr;
    }

    if (cfg.debug) {  // verifier cost per program (kernels 5.16+ report it)
        bpf_program* p;
        bpf_object__for_each_program(p, s->skel_->obj) {
            if (bpf_program__fd(p) < 0) continue;
            bpf_prog_info info{};
            uint32_t len = sizeof info;
            if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) == 0 && cfg.log)
                cfg.log(std::string(bpf_program__name(p)) + ": " + std::to_string(info.verified_insns) +
                        " instructions verified, " + std::to_string(info.xlated_prog_len / 8) + " translated");
        }
    }

    if (!s->use_loop_) {
        // Index 0: the walk's next run; 1: the capture of a new stack's code objects.
        auto set = [](bpf_map* array, bpf_program* walk, bpf_program* capture) {
            uint32_t key = 0;
            int fd = bpf_program__fd(walk);
            if (bpf_map_update_elem(bpf_map__fd(array), &key, &fd, BPF_ANY)) return false;
            key = 1;
            fd = bpf_program__fd(capture);
            return bpf_map_update_elem(bpf_map__fd(array), &key, &fd, BPF_ANY) == 0;
        };
        if (!set(s->skel_->maps.nolp_progs, s->skel_->progs.walk_nolp, s->skel_->progs.capture_nolp)) {
            error = std::string("cannot set up the frame walk's tail calls: ") + strerror(errno);
            return nullptr;
        }
        if (s->wall_error_.empty() &&
            !set(s->skel_->maps.nolp_rtprogs, s->skel_->progs.walk_nolp_rt, s->skel_->progs.capture_nolp_rt))
            s->wall_error_ = std::string("cannot set up the off-CPU walk's tail calls: ") + strerror(errno);
    }

    if (s->wall_error_.empty()) {
        s->offcpu_ = OffcpuTable::map(bpf_map__fd(s->skel_->maps.offcpu_slots), s->offcpu_slots_, error);
        if (!s->offcpu_) return nullptr;
    }

    if (cfg.bpf_stats) s->stats_fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME);

    s->rb_ = ring_buffer__new(bpf_map__fd(s->skel_->maps.events), &BpfSampler::on_record, s.get(), nullptr);
    if (!s->rb_) {
        error = std::string("cannot create the ring buffer: ") + strerror(errno);
        return nullptr;
    }

    // Lifecycle tracepoints (BTF raw tracepoints: no tracefs needed).
    for (bpf_program* p : {s->skel_->progs.on_exec, s->skel_->progs.on_exit, s->skel_->progs.on_fork}) {
        bpf_link* l = bpf_program__attach(p);
        if (!l) {
            error = std::string("cannot attach ") + bpf_program__name(p) + ": " + strerror(errno);
            return nullptr;
        }
        s->tp_links_.push_back(l);
    }

    if (!cfg.start_paused && !s->open_perf_events(error)) return nullptr;
    return s;
}

// One cpu-clock event per online CPU at period_ns_, each running the sampler.
bool BpfSampler::open_perf_events(std::string& error) {
    bpf_program* prog = use_loop_ ? skel_->progs.on_sample : skel_->progs.on_sample_nolp;
    for (int cpu : online_cpus()) {
        perf_event_attr attr{};
        attr.size = sizeof(attr);
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_CPU_CLOCK;
        attr.sample_period = period_ns_;
        attr.freq = 0;
        int fd = static_cast<int>(syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
        if (fd < 0) {
            if (errno == ENODEV) continue;  // CPU went offline
            error = "perf_event_open(cpu-clock) on CPU " + std::to_string(cpu) + " failed: " + strerror(errno);
            pause();
            return false;
        }
        bpf_link* l = bpf_program__attach_perf_event(prog, fd);
        if (!l) {
            error = "cannot attach the sampler to CPU " + std::to_string(cpu) + ": " + strerror(errno);
            close(fd);
            pause();
            return false;
        }
        perf_fds_.push_back(fd);
        perf_links_.push_back(l);
    }
    if (perf_links_.empty()) {
        error = "no online CPU accepted a cpu-clock perf event";
        return false;
    }
    return true;
}

BpfSampler::~BpfSampler() {
    pause();
    detach_wall();
    for (auto* l : tp_links_) bpf_link__destroy(l);
    if (rb_) ring_buffer__free(rb_);
    offcpu_.reset();  // its mapping, before the map goes
    if (skel_) pybpfprof_bpf__destroy(skel_);
    if (stats_fd_ >= 0) close(stats_fd_);
}

void BpfSampler::pause() {
    for (auto* l : perf_links_) bpf_link__destroy(l);
    perf_links_.clear();
    for (int fd : perf_fds_) close(fd);
    perf_fds_.clear();
}

bool BpfSampler::resume(std::string& error) { return !paused() || open_perf_events(error); }

bool BpfSampler::set_rate(double hz, std::string& error) {
    if (!(hz > 0)) {
        error = "invalid sampling rate " + std::to_string(hz);
        return false;
    }
    const uint64_t period = period_of_rate(hz);
    rate_hz_ = hz;
    if (period == period_ns_ && !paused()) return true;
    // Closed before the new ones open: a CPU's clock (BPF) never advances twice for one instant.
    pause();
    period_ns_ = period;
    return open_perf_events(error);
}

int BpfSampler::on_record(void* ctx, void* data, size_t size) {
    auto* self = static_cast<BpfSampler*>(ctx);
    // Every record starts like pbp_event (ts_ns, type, pid, tid, cpu); some are shorter.
    if (size < sizeof(pbp_thread_event)) return 0;
    const auto* e = static_cast<const pbp_event*>(data);
    if (e->type == PBP_EV_THREAD_EXIT) {
        if (self->thread_exit_handler_) self->thread_exit_handler_(*static_cast<const pbp_thread_event*>(data));
        return 0;
    }
    if (size < sizeof(pbp_event)) return 0;
    if (e->type == PBP_EV_NATIVE) {
        if (self->native_handler_ && size >= PBP_NATIVE_HEADER_BYTES)
            self->native_handler_(*static_cast<const pbp_native_event*>(data), size);
        return 0;
    }
    if (e->type == PBP_EV_CODE) {
        if (self->code_handler_ && size >= sizeof(pbp_code_event))
            self->code_handler_(*static_cast<const pbp_code_event*>(data));
        return 0;
    }
    self->handler_(*e);
    return 0;
}

bool BpfSampler::add_process(pid_t pid, const pbp_proc& proc, std::string& error) {
    uint32_t key = static_cast<uint32_t>(pid);
    const int err = bpf_map__update_elem(skel_->maps.procs, &key, sizeof key, &proc, sizeof proc, BPF_ANY);
    procs_changed();
    if (err) {
        error = std::string("cannot add PID ") + std::to_string(pid) + " to the BPF process table: " + strerror(errno);
        return false;
    }
    return true;
}

bool BpfSampler::set_cgroup(uint32_t slot, const std::string& dir, std::string& error) {
    if (slot >= PBP_MAX_CGROUPS) {
        error = "too many --cgroup targets (at most " + std::to_string(PBP_MAX_CGROUPS) + ")";
        return false;
    }
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        error = "cannot open the cgroup " + dir + ": " + strerror(errno);
        return false;
    }
    int err = bpf_map_update_elem(bpf_map__fd(skel_->maps.cgroup_filter), &slot, &fd, BPF_ANY);
    int saved = errno;
    close(fd);  // the map holds its own reference to the cgroup
    if (err) {
        error = "cannot add the cgroup " + dir + " to the BPF filter: " + strerror(saved) +
                " (is it a cgroup v2 directory?)";
        return false;
    }
    return true;
}

void BpfSampler::remove_process(pid_t pid) {
    uint32_t key = static_cast<uint32_t>(pid);
    bpf_map__delete_elem(skel_->maps.procs, &key, sizeof key, 0);
    procs_changed();
}

int BpfSampler::poll(int timeout_ms) {
    // Samples are submitted without a wakeup, so consume after every wait, woken or not.
    int n = ring_buffer__poll(rb_, timeout_ms);
    if (n < 0) return n;
    int m = ring_buffer__consume(rb_);
    return m < 0 ? m : n + m;
}
int BpfSampler::epoll_fd() const { return rb_ ? ring_buffer__epoll_fd(rb_) : -1; }

int BpfSampler::drain() { return ring_buffer__consume(rb_); }

bool BpfSampler::attach_wall(std::string& error) {
    if (wall_attached()) return true;
    if (!wall_error_.empty()) {
        error = wall_error_;
        return false;
    }
    bpf_program* prog = use_loop_ ? skel_->progs.on_switch : skel_->progs.on_switch_nolp;
    bpf_link* l = bpf_program__attach(prog);
    if (!l) {
        error = std::string("cannot attach to sched_switch: ") + strerror(errno);
        return false;
    }
    wall_links_ = {l};
    return true;
}

void BpfSampler::detach_wall() {
    for (auto* l : wall_links_) bpf_link__destroy(l);
    // No wall session is left (each target forgotten first: no process is one): the entries
    // are all dormant, and the threads that die from now on are not seen.
    if (!wall_links_.empty() && offcpu_) offcpu_->clear();
    wall_links_.clear();
}

void BpfSampler::set_min_block(uint64_t ns) { skel_->data->min_block_ns = ns; }

bool BpfSampler::lookup_process(pid_t pid, pbp_proc& out) const {
    uint32_t key = static_cast<uint32_t>(pid);
    return bpf_map__lookup_elem(skel_->maps.procs, &key, sizeof key, &out, sizeof out, 0) == 0;
}

bool BpfSampler::set_process_flags(pid_t pid, uint32_t mask, uint32_t flags, pbp_proc* out) {
    uint32_t key = static_cast<uint32_t>(pid);
    pbp_proc proc{};
    if (bpf_map__lookup_elem(skel_->maps.procs, &key, sizeof key, &proc, sizeof proc, 0)) return false;
    proc.flags = (proc.flags & ~mask) | (flags & mask);
    if (out) *out = proc;
    // BPF_EXIST: an entry BPF deleted meanwhile (the process exec'd) is not brought back.
    const bool ok = bpf_map__update_elem(skel_->maps.procs, &key, sizeof key, &proc, sizeof proc, BPF_EXIST) == 0;
    procs_changed();
    return ok;
}

bool BpfSampler::set_async_task_offset(pid_t pid, uint16_t off) {
    uint32_t key = static_cast<uint32_t>(pid);
    pbp_proc proc{};
    if (bpf_map__lookup_elem(skel_->maps.procs, &key, sizeof key, &proc, sizeof proc, 0)) return false;
    proc.off.tstate_async_task = off;
    const bool ok = bpf_map__update_elem(skel_->maps.procs, &key, sizeof key, &proc, sizeof proc, BPF_EXIST) == 0;
    procs_changed();
    return ok;
}

std::vector<std::pair<uint32_t, pbp_offcpu>> BpfSampler::offcpu_entries(pid_t pid) const {
    if (!offcpu_) return {};
    return offcpu_->entries(static_cast<uint32_t>(pid));
}

bool BpfSampler::seed_offcpu(uint32_t tid, const pbp_offcpu& e) { return offcpu_ && offcpu_->seed(tid, e); }

uint64_t BpfSampler::offcpu_seeds_spilled() const { return offcpu_ ? offcpu_->spilled() : 0; }

uint64_t BpfSampler::offcpu_seeds_full() const { return offcpu_ ? offcpu_->full() : 0; }

// After every write to the procs map: wall mode's switch-outs copy anew what they keep of their
// process (pbp_offcpu.pc), after the write.
void BpfSampler::procs_changed() { __atomic_add_fetch(&skel_->data->offcpu_proc_epoch, 1, __ATOMIC_SEQ_CST); }

void BpfSampler::new_offcpu_epoch() { skel_->data->offcpu_epoch++; }

bool BpfSampler::wall_link_alive() const {
    if (wall_links_.empty()) return false;
    struct bpf_link_info info {};
    uint32_t len = sizeof(info);
    return bpf_obj_get_info_by_fd(bpf_link__fd(wall_links_[0]), &info, &len) == 0 && info.prog_id != 0;
}

void BpfSampler::forget_offcpu(pid_t pid) {
    if (offcpu_) offcpu_->forget(static_cast<uint32_t>(pid));
}

namespace {
BpfSampler::ProgStats stats_of(bpf_program* prog) {
    BpfSampler::ProgStats ps;
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_program__fd(prog) >= 0 && bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0) {
        ps.run_time_ns = info.run_time_ns;
        ps.run_cnt = info.run_cnt;
    }
    return ps;
}
}  // namespace

BpfSampler::ProgStats BpfSampler::switch_stats() const {
    return stats_of(use_loop_ ? skel_->progs.on_switch : skel_->progs.on_switch_nolp);
}

bool BpfSampler::lookup_stack(uint64_t id, pbp_stack& out) const {
    return bpf_map__lookup_elem(skel_->maps.stacks, &id, sizeof id, &out, sizeof out, 0) == 0;
}

std::array<uint64_t, PBP_STAT_COUNT> BpfSampler::stats() const {
    std::array<uint64_t, PBP_STAT_COUNT> total{};
    int ncpu = libbpf_num_possible_cpus();
    std::vector<uint64_t> vals(ncpu);
    for (uint32_t i = 0; i < PBP_STAT_COUNT; i++) {
        if (bpf_map__lookup_elem(skel_->maps.stats, &i, sizeof i, vals.data(), vals.size() * sizeof(uint64_t), 0))
            continue;
        for (auto v : vals) total[i] += v;
    }
    return total;
}

BpfSampler::ProgStats BpfSampler::prog_stats() const {
    ProgStats ps;
    bpf_program* prog = use_loop_ ? skel_->progs.on_sample : skel_->progs.on_sample_nolp;
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0) {
        ps.run_time_ns = info.run_time_ns;
        ps.run_cnt = info.run_cnt;
    }
    return ps;
}

}  // namespace pbp
