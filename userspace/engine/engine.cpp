#include "engine/engine.h"

#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "engine/aggregator.h"
#include "engine/asyncio_tasks.h"
#include "engine/bpf_sampler.h"
#include "engine/decimate.h"
#include "engine/find_targets.h"
#include "engine/process_registry.h"
#include "engine/resource_sampler.h"
#include "engine/snapshot.h"
#include "engine/stack_store.h"
#include "native/blocked_state.h"
#include "native/native_stacks.h"
#include "engine/symbolizer.h"
#include "sys/preflight.h"
#include "sys/clock.h"
#include "sys/procfs.h"
#include "targets/cgroup_target.h"
#include "targets/cgroups.h"
#include "targets/discovery.h"
#include "targets/kube.h"
#include "targets/launcher.h"

namespace pbp {

namespace {

// A child found at its fork is announced once it has run Python for itself: sampled with a
// Python stack kForkRunsPythonNs or more after it was found, or still its parent's program
// kForkSettledNs after (Session::unannounced_).
constexpr uint64_t kForkRunsPythonNs = 50'000'000, kForkSettledNs = 200'000'000;

// Discovery retry schedule after an exec/fork, in ms since the event: dense at first
// (shared-libpython builds map libpython within a few ms), then sparse.
constexpr int kRetryMs[] = {0, 2, 5, 10, 20, 35, 50, 75, 100, 150, 200, 300, 500, 1000, 2000};
constexpr int kRefusalSettledMs = 50;  // see run_pending

// A session's rate: its own, or the engine's.
double session_rate(const SessionConfig& s, const EngineConfig& e) { return s.rate_hz > 0 ? s.rate_hz : e.rate_hz; }

Status check_rate(const SessionConfig& s) {
    if (s.rate_hz >= 0 && s.rate_hz <= 10000) return {};
    return Status::bad_input("sampling rate " + std::to_string(s.rate_hz) +
                             ": give a number of samples per second up to 10000 (0: the engine's rate)");
}

std::string describe_targets(const TargetSpec& t) {
    std::string s;
    if (!t.cgroups.empty()) {
        for (auto& c : t.cgroups) s += (s.empty() ? "cgroup " : ", ") + c;
    } else if (t.all_python) {
        s = "all-python";
    } else if (!t.command.empty()) {
        for (auto& a : t.command) s += (s.empty() ? "" : " ") + a;
    } else {
        for (pid_t p : t.pids) s += (s.empty() ? "pid " : ", pid ") + std::to_string(p);
    }
    return s;
}

}  // namespace

// ---- the session -------------------------------------------------------------------------

namespace {
SampleWindow sample_window(const Knobs& k) {
    SampleWindow w;
    if (k.sample_window_s >= 0) w.window_ns = static_cast<uint64_t>(k.sample_window_s * 1e9);
    if (k.sample_bucket_s > 0) w.bucket_ns = std::max<uint64_t>(1, static_cast<uint64_t>(k.sample_bucket_s * 1e9));
    if (k.sample_max_buckets) w.max_buckets = k.sample_max_buckets;
    return w;
}
}  // namespace

struct Session::WatchedCgroup {
    std::string spec;
    bool attached = false;
    CgroupTarget target;
};

Session::Session(Engine& engine, SessionConfig cfg, EventSink sink)
    : engine_(engine), cfg_(std::move(cfg)), sink_(std::move(sink)),
      agg_(new Aggregator(*engine.store_, period_of_rate(session_rate(cfg_, engine.cfg_)),
                          sample_window(engine.cfg_.knobs))) {
    target_text_ = describe_targets(cfg_.targets);
    rate_hz_ = session_rate(cfg_, engine.cfg_);
}

Session::~Session() = default;

uint64_t Session::sample_count() const { return agg_->sample_count(); }

size_t Session::processes_so_far() const {
    std::set<pid_t> seen = announced_;
    for (auto& [_, pr] : agg_->samples().processes)
        if (!pr.threads.empty()) seen.insert(static_cast<pid_t>(pr.pid));
    return seen.size();
}

pid_t Session::launched_running() const {
    return launcher_ && !launcher_->poll_exit() ? launched_pid_ : 0;
}

size_t Session::memory_bytes() const { return agg_->memory_bytes(); }

bool Session::admits(pid_t pid, std::string* why) const {
    if (!cfg_.admit) return true;
    std::string reason;
    bool ok = cfg_.admit(pid, reason);
    if (!ok && why) *why = reason;
    return ok;
}

bool Session::in_launch_tree(pid_t pid, pid_t ppid) {
    if (launch_tree_.empty()) return false;
    if (launch_tree_.count(pid) || launch_tree_.count(ppid)) {
        launch_tree_.insert(pid);
        return true;
    }
    pid_t cur = ppid;
    for (int i = 0; i < 64 && cur > 1; i++) {
        if (launch_tree_.count(cur)) {
            launch_tree_.insert(pid);
            return true;
        }
        auto st = procfs::read_status(cur);
        if (!st) break;
        cur = st->ppid;
    }
    return false;
}

bool Session::wants_new(pid_t pid, pid_t ppid, bool exec) {
    const TargetSpec& t = cfg_.targets;
    if (!admits(pid)) return false;
    if (t.all_python) return true;
    if (!t.cgroups.empty()) {
        // BPF reports only execs under the watched cgroups when the engine was started so;
        // otherwise the process's own cgroup decides.
        if (engine_.cfg_.execs_only_in_cgroups) return true;
        auto path = cgroups::v2_path_of(pid);
        if (!path) return false;
        return std::any_of(cgroups_.begin(), cgroups_.end(), [&](const WatchedCgroup& w) {
            return w.attached && cgroups::is_under(*path, w.target.rel_path);
        });
    }
    if (in_launch_tree(pid, ppid)) return true;
    // A --pid target is followed through exec: out of Python (dropped, BPF already forgot it)
    // and back into Python (profiled again).
    return exec && (targets_.count(pid) || std::find(t.pids.begin(), t.pids.end(), pid) != t.pids.end());
}

RunInfo Session::run_info(uint64_t end_mono_ns) const {
    RunInfo run;
    run.target = target_text_;
    run.command = cfg_.targets.command;
    run.start_mono_ns = start_mono_ns_;
    run.end_mono_ns = end_mono_ns;
    run.start_unix_ns = start_unix_ns_;
    run.rate_hz = rate_hz_;  // the session's own: its samples weigh its period
    run.period_ns = period_of_rate(rate_hz_);
    run.kernel = kernel_release();
    run.host = host_name();
    run.version = PYBPFPROF_VERSION;
    run.max_depth = static_cast<int>(engine_.max_depth_);
    run.bpf_loop = engine_.uses_bpf_loop();
    run.mode = cfg_.mode;
    run.min_block_ns = cfg_.mode == ProfileMode::Wall ? cfg_.min_block_ns : 0;
    run.gil_unknown = gil_unknown_;
    run.gil_left_out_ns = gil_left_out_ns_;
    run.gil_left_out_samples = gil_left_out_samples_;
    run.lost = engine_.lost();
    if (engine_.sampler_) {
        auto ps = engine_.sampler_->prog_stats();
        run.bpf_run_time_ns = ps.run_time_ns;
        run.bpf_run_cnt = ps.run_cnt;
    }
    return run;
}

Profile Session::snapshot() const {
    return make_snapshot(agg_->samples(), *engine_.store_, *engine_.registry_, run_info(mono_ns()));
}

// ---- the engine ----------------------------------------------------------------------------

struct Engine::NodeNames {
    explicit NodeNames(const std::string& root) : node(root) {}
    kube::Node node;  // pod and container names on this node
};

Engine::Engine(const EngineConfig& cfg) : cfg_(cfg) {}

Engine::~Engine() {
    sessions_.clear();
    sampler_.reset();
}

void Engine::debug(const std::string& m) {
    if (!cfg_.knobs.debug) return;
    if (sessions_.empty()) early_debug_.push_back(m);  // from start(): for the first session
    for (auto& s : sessions_) s->event({EngineEvent::Debug, 0, false, 0, m});
}

Status Engine::preflight(const EngineConfig& cfg) {
    std::string error;
    if (!check_privileges(error) || !check_kernel(cfg.btf_path, error)) return Status::cannot_profile(error);
    return {};
}

Status Engine::validate(const EngineConfig& cfg, const SessionConfig& s) {
    if (Status st = check_rate(s); !st.ok()) return st;
    if (!s.targets.cgroups.empty()) {
        std::string mount;
        if (Status st = cgroup_mount(cfg.node_root, mount); !st.ok()) return st;
        kube::Node node(cfg.node_root);
        for (const auto& spec : s.targets.cgroups) {
            auto r = resolve_cgroup(spec, mount, node);
            if (r.status == CgroupResolve::Ambiguous || (r.status == CgroupResolve::NotFound && s.duration_s <= 0))
                return Status::bad_input(r.message());
        }
    }
    Discoverer d;
    for (pid_t pid : s.targets.pids) {
        std::optional<PythonTarget> t;
        if (Status st = discover_pid(d, pid, t); !st.ok()) return st;
    }
    return {};
}

std::unique_ptr<Engine> Engine::start(const EngineConfig& cfg, Status& status) {
    status = preflight(cfg);
    if (!status.ok()) return nullptr;
    std::unique_ptr<Engine> e(new Engine(cfg));
    auto log = [eng = e.get()](const std::string& m) { eng->debug(m); };
    SamplerConfig sc;
    sc.rate_hz = cfg.rate_hz;
    sc.start_paused = cfg.idle_without_sessions;  // until the first subscribe
    // Every kind of target follows exec: --all-python and launched commands pick up new
    // Python programs; a --pid target may exec into Python again.
    sc.watch_exec = true;
    sc.cgroup_filter = cfg.execs_only_in_cgroups;
    sc.btf_path = cfg.btf_path;
    sc.debug = cfg.knobs.debug;
    sc.log = log;
    sc.section_timing = cfg.knobs.section_timing;
    sc.bpf_stats = cfg.knobs.bpf_stats;
    sc.offcpu_slots = cfg.knobs.offcpu_slots;
    sc.force_no_bpf_loop = cfg.knobs.force_no_bpf_loop;
    sc.native_capture = cfg.native;
    sc.force_wall_native_e2big = cfg.knobs.force_wall_native_e2big;
    if (cfg.knobs.force_no_wall)
        sc.no_scheduler_programs = "the scheduler programs were left out (PYBPFPROF_FORCE_NO_WALL, as on a kernel that refuses them)";
    else if (!cfg.wall_sessions)
        sc.no_scheduler_programs = "this engine was started for cpu-mode sessions only";
    std::string error;
    e->sampler_ = BpfSampler::open(
        sc, [eng = e.get()](const pbp_event& ev) { eng->on_record(ev); }, error,
        [eng = e.get()](const pbp_native_event& n, size_t size) {
            if (eng->native_) eng->native_->on_capture(n, size);
        });
    if (!e->sampler_) {
        status = Status::cannot_profile(error);
        status.debug = std::move(e->early_debug_);
        return nullptr;
    }
    // Before the first sample that needs it: its code object may be gone by then.
    e->sampler_->set_code_handler([eng = e.get()](const pbp_code_event& c) {
        if (eng->targets_.count(static_cast<pid_t>(c.pid))) eng->symbolizer_->add_captured(static_cast<pid_t>(c.pid), c);
    });
    // A thread's last name: it may have named itself after the registry last read it.
    e->sampler_->set_thread_exit_handler([eng = e.get()](const pbp_thread_event& t) {
        if (eng->targets_.count(static_cast<pid_t>(t.pid)))
            eng->registry_->on_thread_exit(t.pid, t.tid, std::string(t.comm, strnlen(t.comm, sizeof t.comm)));
    });
    e->max_depth_ = e->sampler_->max_depth();
    if (cfg.max_depth > 0) e->max_depth_ = std::min<uint32_t>(e->max_depth_, static_cast<uint32_t>(cfg.max_depth));
    e->symbolizer_ = std::make_unique<Symbolizer>();
    if (cfg.knobs.debug) e->symbolizer_->set_debug_log(log);
    e->store_ = std::make_unique<StackStore>(
        *e->symbolizer_, [eng = e.get()](uint64_t id, pbp_stack& out) { return eng->sampler_->lookup_stack(id, out); });
    e->registry_ = std::make_unique<ProcessRegistry>();
    e->discoverer_ = std::make_unique<Discoverer>();
    e->asyncio_ = std::make_unique<AsyncioTasks>();
    if (e->sampler_->native_capture()) {
        e->native_ = std::make_unique<native::NativeStacks>(*e->store_);
        e->native_->set_timing(cfg.knobs.debug);
    }
    e->node_ = std::make_unique<NodeNames>(cfg.node_root);
    e->sampling_ = true;
    return e;
}

uint64_t Engine::lost() const {
    if (!sampler_) return final_stats_.size() > PBP_STAT_RINGBUF_DROP ? final_stats_[PBP_STAT_RINGBUF_DROP] : 0;
    return sampler_->stats()[PBP_STAT_RINGBUF_DROP];
}

bool Engine::uses_bpf_loop() const { return sampler_ && sampler_->uses_bpf_loop(); }

int Engine::wait_fd() const { return sampler_ ? sampler_->epoll_fd() : -1; }

uint64_t Engine::period_ns() const { return sampler_ ? sampler_->period_ns() : 0; }

double Engine::rate_hz() const { return sampler_ && !sampler_->paused() ? sampler_->rate_hz() : 0; }

bool Engine::apply_rate(double joining_hz, std::string& error) {
    double want = joining_hz;
    for (auto& s : sessions_) want = std::max(want, s->rate_hz_);
    if (want <= 0 || (!sampler_->paused() && period_of_rate(want) == sampler_->period_ns())) return true;
    const bool was_paused = sampler_->paused();
    const double old = sampler_->rate_hz();
    if (sampler_->set_rate(want, error)) {
        debug("sampling at " + std::to_string(want) + " Hz");
        return true;
    }
    std::string ignored;
    if (!was_paused) sampler_->set_rate(old, ignored);
    return false;
}

std::vector<uint64_t> Engine::bpf_stats() const {
    if (!sampler_) return final_stats_;
    auto st = sampler_->stats();
    return std::vector<uint64_t>(st.begin(), st.end());
}

Session* Engine::subscribe(const SessionConfig& cfg, EventSink sink, Status& status) {
    if (!sampling_) {
        status = Status::cannot_profile("the engine has stopped sampling; start a new one");
        return nullptr;
    }
    if (Status st = check_rate(cfg); !st.ok()) {
        status = st;
        return nullptr;
    }
    if (cfg.mode == ProfileMode::Wall && !cfg_.wall_sessions && !cfg_.knobs.force_no_wall) {
        status = Status::cannot_profile("--mode wall: this engine was started for cpu-mode sessions only "
                                        "(EngineConfig::wall_sessions is off)");
        return nullptr;
    }
    if (cfg.mode == ProfileMode::Wall && !sampler_->wall_error().empty()) {
        status = Status::cannot_profile("--mode wall is not available on kernel " + kernel_release() + ": " +
                                        sampler_->wall_error() +
                                        "; use a kernel with BTF and the sched_switch tracepoint "
                                        "(Debian's 5.10+ kernels have them), or --mode cpu");
        status.debug = early_debug_;  // the verifier's log of the refused programs (PYBPFPROF_DEBUG=2)
        return nullptr;
    }
    if (cfg.native && !native_ && !sampler_->native_error().empty()) {
        status = Status::cannot_profile("--native is not available on kernel " + kernel_release() + " while --mode wall is: " +
                                        sampler_->native_error() +
                                        "; run --mode wall without --native, or --native without --mode wall");
        return nullptr;
    }
    if (cfg.native && !native_) {
        status = Status::cannot_profile(
            cfg_.native ? "--native needs kernel 5.17+ (bpf_loop and bpf_task_pt_regs); kernel " + kernel_release() +
                              " has not: run without --native"
                        : std::string("--native: this engine was started without native capture "
                                      "(EngineConfig::native); start it with it, or run without --native"));
        return nullptr;
    }
    std::unique_ptr<Session> s(new Session(*this, cfg, std::move(sink)));
    for (auto& m : std::exchange(early_debug_, {})) s->event({EngineEvent::Debug, 0, false, 0, m});
    const TargetSpec& t = cfg.targets;

    if (!t.cgroups.empty()) {
        if (cgroup_mount_.empty()) {
            status = cgroup_mount(cfg_.node_root, cgroup_mount_);
            if (!status.ok()) return nullptr;
        }
        for (const auto& spec : t.cgroups) {
            Session::WatchedCgroup w;
            w.spec = spec;
            auto r = resolve_cgroup(spec, cgroup_mount_, node_->node);
            if (r.status == CgroupResolve::Found) {
                w.target = r.target;
            } else if (r.status == CgroupResolve::Ambiguous || cfg.duration_s <= 0) {
                status = Status::bad_input(r.message());
                return nullptr;
            } else {
                s->event({EngineEvent::CgroupWaiting, 0, false, 0, r.cause});
            }
            s->cgroups_.push_back(std::move(w));
        }
    }

    std::vector<PythonTarget> initial;
    for (pid_t pid : t.pids) {
        if (std::string why; !s->admits(pid, &why)) {
            status = Status::forbidden(why);
            return nullptr;
        }
        std::optional<PythonTarget> found;
        status = discover_pid(*discoverer_, pid, found);
        if (!status.ok()) return nullptr;
        initial.push_back(*found);
    }

    if (!t.command.empty() && t.held_child <= 0) {
        s->launcher_ = std::make_unique<Launcher>();
        std::string error;
        if (!s->launcher_->start(t.command, error)) {
            status = Status::cannot_profile("cannot start " + t.command[0] + ": " + error);
            s->launcher_.reset();
            return nullptr;
        }
        s->launched_pid_ = s->launcher_->pid();
        s->launch_tree_.insert(s->launched_pid_);
    } else if (t.held_child > 0) {
        // Its exec (and its children's) arrive as BPF events once the owner releases it.
        if (std::string why; !s->admits(t.held_child, &why)) {
            status = Status::forbidden(why);
            return nullptr;
        }
        if (!procfs::exists(t.held_child)) {
            status = Status::bad_input("no process with PID " + std::to_string(t.held_child) +
                                       " (the launched command's child); it exited before profiling began");
            return nullptr;
        }
        s->launched_pid_ = t.held_child;
        s->launch_tree_.insert(t.held_child);
    }

    if (t.children) launch_tree_roots(*s);
    // The engine samples at the fastest session's rate from before this one's targets are
    // registered. Resuming from a pause, records queued meanwhile (execs) are for no session.
    if (sessions_.empty() && sampler_->paused()) sampler_->drain();
    if (std::string error; !apply_rate(s->rate_hz_, error)) {
        status = Status::cannot_profile(error);
        return nullptr;
    }
    if (std::string error; cfg.mode == ProfileMode::Wall && !sampler_->attach_wall(error)) {
        status = Status::cannot_profile("--mode wall: " + error + " (kernel " + kernel_release() + "); use --mode cpu");
        apply_wall();
        return nullptr;
    }
    Session* sp = s.get();
    sessions_.push_back(std::move(s));
    apply_wall();
    if (cfg.mode == ProfileMode::Wall) {
        // Its --pid targets; and with targets found after its start (--all-python's scan, a
        // --cgroup's processes, children of its --pid targets; not a launched command's, which
        // start after it), every process: which of them are Python is not known yet (a /proc read per thread: 39-51 ms for 1,085 threads here,
        // PYBPFPROF_DEBUG=1 pybpfprof --all-python --mode wall -d 1).
        const uint64_t t0 = mono_ns();
        std::vector<pid_t> pids;
        for (auto& target : initial) pids.push_back(target.pid);
        if (t.all_python || (t.children && !t.pids.empty()) || !t.cgroups.empty()) pids = procfs::all_pids();
        const size_t threads = sp->asleep_at_start_.take(pids);
        if (cfg_.knobs.debug)
            debug("wall: " + std::to_string(sp->asleep_at_start_.size()) + " of " + std::to_string(threads) +
                  " threads asleep at the start, read in " +
                  std::to_string((sp->asleep_at_start_.mono_ns() - t0) / 1000) + " us");
    }
    sp->start_mono_ns_ = mono_ns();
    sp->start_unix_ns_ = real_ns();
    if (cfg.duration_s > 0) sp->deadline_ns_ = sp->start_mono_ns_ + static_cast<uint64_t>(cfg.duration_s * 1e9);

    for (auto& target : initial) register_target(*sp, target, true);
    if (t.children) {
        // Their descendants running now; later ones arrive as forks and execs.
        std::vector<pid_t> found;
        for (pid_t pid : procfs::all_pids())
            if (!sp->launch_tree_.count(pid))
                if (auto st = procfs::read_status(pid); st && sp->in_launch_tree(pid, st->ppid)) found.push_back(pid);
        scan(*sp, found, true);
    }
    if (!t.cgroups.empty()) {
        for (size_t i = 0; i < sp->cgroups_.size(); i++) {
            if (sp->cgroups_[i].target.abs_path.empty()) continue;
            if (!attach_cgroup(*sp, i, status)) {
                stop(sp);
                return nullptr;
            }
        }
    } else if (t.all_python) {
        size_t n = scan(*sp, procfs::all_pids(), false);
        sp->event({EngineEvent::AllPythonScanned, 0, false, n});
    }
    if (sp->launcher_) {
        sp->launcher_->release();
        if (int err = sp->launcher_->wait_exec()) {
            status = Status::bad_input(cannot_run_message(t.command[0], err));
            while (!sp->launcher_->poll_exit()) usleep(1000);
            stop(sp);
            return nullptr;
        }
        schedule(sp->launched_pid_);
        pending_[sp->launched_pid_].for_sessions.insert(sp);
    }
    status = {};
    return sp;
}

size_t Engine::scan(Session& s, const std::vector<pid_t>& pids, bool announce) {
    size_t n = 0;
    for (pid_t pid : pids) {
        if (pid == getpid() || s.targets_.count(pid) || !s.admits(pid)) continue;
        if (auto p = pending_.find(pid); p != pending_.end()) {
            p->second.for_sessions.insert(&s);
            continue;
        }
        auto r = discoverer_->discover(pid);
        if (r.status == Discovery::Python) {
            if (register_target(s, *r.target, announce)) n++;
        } else if (r.status == Discovery::Unsupported) {
            refused(s, pid, r);
        } else if (r.status == Discovery::NotYet) {
            schedule(pid);
            pending_[pid].for_sessions.insert(&s);
        }
    }
    return n;
}

void Engine::refused(Session& s, pid_t pid, const DiscoveryResult& r) {
    // Asked again, as register_target does: it may have exec'd a setuid program since it was found.
    if (!s.admits(pid)) return;
    const std::string who = "PID " + std::to_string(pid) + " (" + procfs::comm(pid) + ")";
    if (s.first_refusal_.empty()) s.first_refusal_ = who + ": " + r.reason;
    // A Python it cannot profile is said at once (before, only at the end of the run, when
    // nothing else was found, and never under --all-python): at most a few per session, each
    // PID once (an exec into the same Python again is not news).
    constexpr size_t kMaxSaid = 5;
    if (!r.python_refused || s.refusals_said_.size() > kMaxSaid || !s.refusals_said_.insert(pid).second) return;
    std::string m = s.refusals_said_.size() > kMaxSaid
                        ? "more processes running a Python that pybpfprof cannot profile were found; they are not named"
                        : who + " is not profiled: " + r.reason;
    if (pid == s.launched_pid_ && s.refusals_said_.size() <= kMaxSaid)
        m += s.deadline_ns_ ? "; the run goes on for the programs it starts, until -d ends it"
                            : "; the run goes on for the programs it starts (Ctrl-C to stop)";
    s.event({EngineEvent::Warning, pid, false, 0, m});
}

bool Engine::attach_cgroup(Session& s, size_t i, Status& st) {
    auto& w = s.cgroups_[i];
    std::string error;
    if (!sampler_->set_cgroup(cgroup_slots_, w.target.abs_path, error)) {
        st = Status::cannot_profile(error);
        return false;
    }
    cgroup_slots_++;
    w.attached = true;
    // Execs from now on are reported by BPF; the processes already there are scanned.
    size_t n = scan(s, cgroups::procs_under(w.target.abs_path), true);
    EngineEvent e{EngineEvent::CgroupWatching, 0, false, n};
    e.description = w.target.describe();
    s.event(e);
    return true;
}

void Engine::retry_cgroups(Session& s, uint64_t now) {
    if (s.cgroups_.empty() || now - s.last_cgroup_retry_ns_ <= 250000000ULL) return;
    s.last_cgroup_retry_ns_ = now;
    for (size_t i = 0; i < s.cgroups_.size(); i++) {
        if (s.cgroups_[i].attached) continue;
        auto r = resolve_cgroup(s.cgroups_[i].spec, cgroup_mount_, node_->node);
        if (r.status != CgroupResolve::Found) continue;
        s.cgroups_[i].target = r.target;
        Status st;
        if (!attach_cgroup(s, i, st)) s.event({EngineEvent::Error, 0, false, 0, st.message});
    }
}

bool Engine::register_target(Session& s, const PythonTarget& t, bool announce, pid_t fork_parent, bool shares_mm) {
    // Asked again now: the process may have exec'd a setuid program since it was found.
    if (std::string why; !s.admits(t.pid, &why)) {
        debug("PID " + std::to_string(t.pid) + " not registered: " + why);
        return false;
    }
    // Or exec'd another program since (a forked child of Python running uname): its exec
    // record, queued, has it found again as what it is now. (An exe that could not be read
    // when found, as happens in the middle of an exec, is not taken for the same one.)
    if (procfs::exe(t.pid) != t.exe) {
        debug("PID " + std::to_string(t.pid) + " not registered: it exec'd since it was found");
        return false;
    }
    auto it = targets_.find(t.pid);
    if (it == targets_.end()) {
        pbp_proc cfg = t.bpf_config(max_depth_, ++generation_);
        cfg.since_ns = mono_ns();
        // For before/after measurements (tools/bench/run): every code object read, as before 3.14.
        if (cfg_.knobs.no_code_cache) cfg.off.interp_code_gen = PBP_OFF_NONE;
        // The same: no code object identity captured, every code object read live.
        if (cfg_.knobs.no_code_capture) cfg.off.code_ident_len = 0;
        symbolizer_->add_process(t.pid, t.layout, t.code_type_addr);
        store_->reset_process(t.pid);
        if (fork_parent) store_->mark_forked(t.pid);  // a copy of a running interpreter
        if (native_) native_->forget_process(t.pid);  // an exec: other files
        registry_->add(t, node_->node.labels_for(t.pid));
        std::string error;
        if (!sampler_->add_process(t.pid, cfg, error)) {
            s.event({EngineEvent::Error, t.pid, false, 0, error});
            return false;
        }
        it = targets_.emplace(t.pid, std::set<Session*>{}).first;
        live_.insert(t.pid);
        found_ns_[t.pid] = t.found_ns;
    }
    it->second.insert(&s);
    s.targets_.insert(t.pid);
    s.ever_.insert(t.pid);
    s.agg_->add_process(t.pid);
    update_native(t.pid);  // first: a wall session's threads asleep now have their state read when seeded
    update_wall(t.pid);
    if (s.cfg_.async_tasks && !asyncio_->has(t.pid)) {
        pbp_proc proc{};
        std::string why;
        if (sampler_->lookup_process(t.pid, proc) && asyncio_->add_process(t.pid, t.layout, t.interp_path, proc, why)) {
            update_async(t.pid);
        } else if (!why.empty() && !s.async_note_given_) {
            s.async_note_given_ = true;  // one line, whatever the number of targets
            s.event({EngineEvent::Warning, t.pid, false, 0, "--async: PID " + std::to_string(t.pid) + ": " + why});
        }
    } else if (s.cfg_.async_tasks) {
        update_async(t.pid);
    }
    if (!t.warning.empty())
        s.event({EngineEvent::Warning, t.pid, false, 0, "PID " + std::to_string(t.pid) + ": " + t.warning});
    if (!t.gil_unknown.empty()) s.gil_unknown_[static_cast<uint32_t>(t.pid)] = t.gil_unknown;
    EngineEvent e{EngineEvent::TargetAdded, t.pid, announce};
    e.python = t.describe();
    if (const ProcessProfile* p = registry_->find(static_cast<uint32_t>(t.pid))) e.labels = p->labels;
    if (fork_parent && !s.announced_.count(t.pid))
        s.unannounced_[t.pid] = {e, t.exe, mono_ns(), fork_parent, shares_mm};  // see on_sample, announce_settled_forks
    else
        this->announce(s, e);
    return true;
}

// A forked child still running its parent's program 200 ms on is a Python worker of its own
// (multiprocessing's fork), even an idle one: announced.
void Engine::announce_settled_forks(uint64_t now) {
    for (auto& s : sessions_) {
        std::vector<EngineEvent> settled;
        for (auto& [pid, u] : s->unannounced_)
            // (now, read before this poll's registrations, can be older than found_ns.)
            if (now >= u.found_ns + kForkSettledNs && procfs::exe(pid) == u.exe) settled.push_back(u.event);
        for (auto& e : settled) announce(*s, e);
    }
}

void Engine::announce(Session& s, EngineEvent e) {
    // The name the registry read when the process was registered, before its executable was
    // checked (ProcessRegistry::add): read from /proc now, after the exe checks of on_sample and
    // announce_settled_forks, it could be that of a program exec'd in between (uname).
    const ProcessProfile* p = registry_->find(static_cast<uint32_t>(e.pid));
    e.comm = p && !p->comm.empty() ? p->comm : procfs::comm(e.pid);
    s.unannounced_.erase(e.pid);
    if (!s.announced_.insert(e.pid).second) e.announce = false;
    s.event(e);
}

void Engine::launch_tree_roots(Session& s) {
    for (pid_t pid : s.cfg_.targets.pids) s.launch_tree_.insert(pid);
}

void Engine::forget_in_bpf(pid_t pid) {
    sampler_->remove_process(pid);
    asyncio_->remove_process(pid);
    async_pids_.erase(pid);
    if (wall_pids_.erase(pid)) sampler_->forget_offcpu(pid);
    native_pids_.erase(pid);
    if (native_) native_->forget_process(pid);
    symbolizer_->remove_process(pid);
    store_->forget_process(pid);
    targets_.erase(pid);
    live_.erase(pid);
    found_ns_.erase(pid);
}

void Engine::retire_exec(pid_t pid) {
    // Every sample of the program it ran is already drained: BPF forgot the process at its
    // exec, and the exec record was reserved after the last of them.
    const uint32_t key = next_retired_key_++;
    registry_->retire(static_cast<uint32_t>(pid), key);
    for (Session* s : targets_[pid]) {
        s->agg_->retire(static_cast<uint32_t>(pid), key);
        s->retired_.insert(key);
    }
}

void Engine::release_target(Session& s, pid_t pid) {
    s.targets_.erase(pid);
    auto it = targets_.find(pid);
    if (it == targets_.end()) return;
    it->second.erase(&s);
    if (it->second.empty()) {
        forget_in_bpf(pid);
    } else {
        update_wall(pid);
        update_async(pid);
        update_native(pid);
    }
}

void Engine::target_gone(pid_t pid) {
    for (auto& s : sessions_)
        s->asleep_at_start_.forget(pid);
    if (!targets_.count(pid)) return;
    // Samples already in the ring buffer are ordered before this point: consume them while
    // the process's caches are still there, then forget it.
    sampler_->drain();
    registry_->refresh_thread_names_of(pid);
    auto it = targets_.find(pid);
    if (it == targets_.end()) return;
    for (Session* s : it->second) {
        s->targets_.erase(pid);
        // A forked child that never ran Python of its own was never news: nor is its end.
        if (s->unannounced_.erase(pid)) {
            s->agg_->forget_if_unsampled(static_cast<uint32_t>(pid));
            continue;
        }
        if (!s->cfg_.targets.pids.empty()) s->exited_early_.insert(pid);
    }
    registry_->mark_exited(pid);
    forget_in_bpf(pid);
}

void Engine::schedule(pid_t pid, uint64_t event_ns) {
    auto& p = pending_[pid];
    p.since_ns = mono_ns();
    p.attempt = 0;
    p.event_ns = event_ns;
}

void Engine::on_record(const pbp_event& e) {
    switch (e.type) {
        case PBP_EV_SAMPLE:
            on_sample(e);
            break;
        case PBP_EV_STACK:  // read (symbolized and cached by id) now, while its code objects live
            if (targets_.count(static_cast<pid_t>(e.pid))) store_->stack_for(e);
            break;
        case PBP_EV_EXEC:
        case PBP_EV_FORK:
            on_exec_or_fork(e);
            break;
        case PBP_EV_EXIT:
            // Handled after the poll returns: never drain from inside the ring-buffer callback.
            pending_.erase(static_cast<pid_t>(e.pid));
            exits_.push_back(static_cast<pid_t>(e.pid));
            break;
    }
}

void Engine::on_sample(const pbp_event& e) {
    auto it = targets_.find(static_cast<pid_t>(e.pid));
    if (it == targets_.end()) return;  // forgotten while its record was queued
    uint32_t stack = stack_for(e);
    registry_->on_sample(e.pid, e.tid);
    // --async: the stack under its task chain, for the sessions that want it (made once).
    const uint32_t task_stack = with_task(e, stack);
    // --native: the stack with its kernel and native frames (made once), for those that want it.
    const uint32_t native_stack = native_stack_for(e, stack);
    if (native_ && cfg_.knobs.debug)
        for (auto& note : native_->take_notes()) debug(note);
    // Made when a session asks for them: without kernel frames, and --native with --async.
    std::optional<uint32_t> user_stack, native_task_stack[2];
    for (Session* s : it->second) {
        if (e.stack_id && !s->unannounced_.empty()) {
            // (Not once it has exec'd, which the exec record queued behind this sample will
            // say: its name would be the new program's. Nor in its first kForkRunsPythonNs:
            // a child of subprocess sampled between its fork and its exec has its parent's
            // stack, and this sample can be drained before the exec. The samples count
            // either way.)
            if (auto u = s->unannounced_.find(it->first); u != s->unannounced_.end() &&
                                                          e.ts_ns >= u->second.found_ns + kForkRunsPythonNs &&
                                                          procfs::exe(it->first) == u->second.exe)
                announce(*s, u->second.event);
        }
        uint32_t stack_here = s->cfg_.async_tasks ? task_stack : stack;
        if (s->cfg_.native && native_stack != stack) {
            // Kernel frames left out (a caller who may not see them), then the task chain.
            const bool k = s->cfg_.kernel_frames;
            uint32_t n = native_stack;
            if (!k) {
                if (!user_stack) user_stack = store_->without_kernel_frames(native_stack);
                n = *user_stack;
            }
            if (s->cfg_.async_tasks && task_stack != stack) {
                auto& t = native_task_stack[k];
                if (!t) t = with_task(e, stack, n);
                n = *t;
            }
            stack_here = n;
        }
        // Not what was queued before it began, nor after it ended (stop() reads what is pending).
        if (e.ts_ns < s->start_mono_ns_ || (s->end_mono_ns_ && e.ts_ns > s->end_mono_ns_)) continue;
        const ProfileMode mode = s->cfg_.mode;
        if (e.kind == PBP_KIND_OFF_CPU) {
            if (mode != ProfileMode::Wall) continue;
            // An interval that began before the session counts from its start.
            const uint64_t since = e.ts_ns - s->start_mono_ns_;
            if (e.weight_ns > since) {
                if (!since) continue;
                pbp_event clipped = e;
                clipped.weight_ns = since;
                s->agg_->on_sample(clipped, stack_here);
                continue;
            }
        } else if (mode == ProfileMode::Gil && e.gil != PBP_GIL_HELD) {
            // Left out, but counted: the summary says how much.
            s->gil_left_out_ns_[e.gil <= PBP_GIL_NEITHER ? static_cast<GilState>(e.gil) : GilState::NA] += e.weight_ns;
            s->gil_left_out_samples_++;
            continue;
        }
        s->agg_->on_sample(e, stack_here);
    }
    if (store_->has_moves()) {
        auto moves = store_->take_moves();
        for (auto& s : sessions_) s->agg_->apply(moves);
    }
    if (cfg_.knobs.debug) {
        pid_t pid = static_cast<pid_t>(e.pid);
        if (first_seen_.insert(pid).second)
            debug("PID " + std::to_string(e.pid) + " first sample at mono_ns " + std::to_string(e.ts_ns));
        if (e.stack_id && first_stack_.insert(pid).second)
            debug("PID " + std::to_string(e.pid) + " first python stack at mono_ns " + std::to_string(e.ts_ns));
    }
}

void Engine::on_exec_or_fork(const pbp_event& e) {
    pid_t pid = static_cast<pid_t>(e.pid);
    if (pid == getpid()) return;
    const bool exec = e.type == PBP_EV_EXEC;
    std::set<Session*> wanting;
    for (auto& s : sessions_)
        if (s->wants_new(pid, static_cast<pid_t>(e.ppid), exec)) wanting.insert(s.get());
    if (wanting.empty()) return;
    if (exec && targets_.count(pid)) {
        // An exec from before the process was found (its record queued before the session
        // began, drained after): the program found is the one it exec'd. Nothing is new for
        // the sessions that have it; finding it again would make its caches and BPF entries
        // anew (and a wall session's sleeping threads would be seeded from then).
        auto f = found_ns_.find(pid);
        if (f != found_ns_.end() && e.ts_ns < f->second &&
            std::all_of(wanting.begin(), wanting.end(), [&](Session* s) { return s->targets_.count(pid) != 0; }))
            return;
        // Same PID, new program: its old layout and caches are void (BPF forgot it at exec).
        // A forked child that never ran Python was never news: it is not announced. One that
        // shared its parent's memory until this exec (a vfork, as subprocess makes on 3.10+)
        // could run nothing of its own: what it was sampled doing (the fork's way out to the
        // exec) is its parent's call's cost, and it is no process of its own. Its samples go to
        // its parent, under one thread for all such children (Aggregator::fold_fork). A plain
        // fork's child may have run Python of its own for a while (under kForkRunsPythonNs):
        // its samples stay its own, under the program they ran.
        for (Session* s : targets_[pid])
            if (auto u = s->unannounced_.find(pid); u != s->unannounced_.end() && u->second.shares_mm)
                s->agg_->fold_fork(static_cast<uint32_t>(pid), static_cast<uint32_t>(u->second.parent));
        retire_exec(pid);
        for (Session* s : targets_[pid]) {
            s->targets_.erase(pid);
            // (Its samples, from before the exec, are kept under the program they ran.)
            if (s->unannounced_.erase(pid)) s->agg_->forget_if_unsampled(static_cast<uint32_t>(pid));
        }
        forget_in_bpf(pid);
    }
    if (cfg_.knobs.debug && exec) {
        first_seen_.erase(pid);
        first_stack_.erase(pid);
    }
    schedule(pid, e.ts_ns);
    pending_[pid].for_sessions.insert(wanting.begin(), wanting.end());
    pending_[pid].fork = !exec;
    pending_[pid].parent = exec ? 0 : static_cast<pid_t>(e.ppid);
    pending_[pid].shares_mm = !exec && (e.flags & PBP_F_SHARES_MM);
}

void Engine::run_pending() {
    uint64_t now = mono_ns();
    for (auto it = pending_.begin(); it != pending_.end();) {
        pid_t pid = it->first;
        Pending& p = it->second;
        if (now < p.since_ns + kRetryMs[p.attempt] * 1000000ULL) {
            ++it;
            continue;
        }
        auto r = discoverer_->discover(pid);
        bool done = true;
        switch (r.status) {
            case Discovery::Python: {
                bool any = false;
                for (Session* s : p.for_sessions) any |= register_target(*s, *r.target, true, p.fork ? p.parent : 0, p.fork && p.shares_mm);
                if (any)
                    debug("PID " + std::to_string(pid) + " registered at mono_ns " + std::to_string(mono_ns()) +
                          " (event at " + std::to_string(p.event_ns) + ", attempt " + std::to_string(p.attempt) + ")");
                break;
            }
            case Discovery::NotYet:
                done = ++p.attempt >= std::size(kRetryMs);
                break;
            case Discovery::Unsupported:  // Python 2, a CPython too old or new, memory not readable
                // A Python refused for its layout is looked at again for its first 50 ms: found
                // at its exec, its runtime's memory may still be being mapped by the dynamic
                // loader (CI run ci8, 2026-11-29: a launched pyenv 3.13 read as "_Py_DebugOffsets: bad cookie"
                // once, and never found again).
                if (r.python_refused && kRetryMs[p.attempt] < kRefusalSettledMs) {
                    ++p.attempt;
                    done = false;
                    break;
                }
                for (Session* s : p.for_sessions) refused(*s, pid, r);
                break;
            default:
                break;
        }
        it = done ? pending_.erase(it) : std::next(it);
    }
}

void Engine::check_done(Session& s, uint64_t now) {
    if (s.done()) return;
    if (s.deadline_ns_ && now >= s.deadline_ns_) {
        s.done_reason_ = "duration reached";
        return;
    }
    if (s.launcher_ && s.launcher_->poll_exit()) {
        // The launched program is done: its last samples are already queued.
        for (pid_t p : std::set<pid_t>(s.targets_))
            if (!procfs::exists(p)) target_gone(p);
        s.done_reason_ = "program exited";
        return;
    }
    if (!s.launcher_ && s.launched_pid_) {
        // A held child is its owner's: gone (or a zombie its owner has not reaped yet) is done.
        if (!procfs::alive(s.launched_pid_)) {
            for (pid_t p : std::set<pid_t>(s.targets_))
                if (!procfs::exists(p)) target_gone(p);
            s.done_reason_ = "program exited";
        }
        return;
    }
    // A --pid target that exec'd out of Python is waited for: it may exec back. One that exited
    // is done, reaped or not (a zombie whose parent is busy elsewhere).
    const auto& pids = s.cfg_.targets.pids;
    if (!pids.empty() && s.targets_.empty() &&
        std::none_of(pending_.begin(), pending_.end(), [&](auto& p) { return p.second.for_sessions.count(&s); }) &&
        std::none_of(pids.begin(), pids.end(), procfs::alive))
        s.done_reason_ = "all targets exited";
}

int Engine::poll(int timeout_ms) {
    if (!pending_.empty()) timeout_ms = std::min(timeout_ms, 2);
    asyncio_->new_turn();  // tasks read before may have ended or moved on
    int n = sampler_->poll(timeout_ms);
    if (n < 0 && n != -EINTR) return n;
    uint64_t now = mono_ns();
    for (pid_t p : std::exchange(exits_, {})) target_gone(p);
    run_pending();
    announce_settled_forks(now);
    registry_->sample_resources(live_, now);
    // Every 200 ms: the threads whose first naming was put off (a burst: a process's names are
    // read at most every 200 ms at first samples) are named then, the others at their
    // process's pace (1 s and more). A pool thread first sampled in its last second was named
    // by its OS name when the read came after it left threading._active.
    if (now - last_names_ns_ > 200000000ULL) {
        last_names_ns_ = now;
        registry_->refresh_due_thread_names(now);
    }
    if (now - last_liveness_ns_ > 500000000ULL) {  // safety net for lost exit events
        last_liveness_ns_ = now;
        for (pid_t p : std::set<pid_t>(live_))
            if (!procfs::exists(p)) target_gone(p);
    }
    if (now - last_admit_ns_ > 1000000000ULL) {
        // Credentials change without exec too (setresuid, prctl(PR_SET_DUMPABLE, 0)): a
        // session's rule is asked again about every target once a second.
        last_admit_ns_ = now;
        for (auto& s : sessions_) {
            if (!s->cfg_.admit) continue;
            for (pid_t pid : std::set<pid_t>(s->targets_)) {
                std::string why;
                if (s->admits(pid, &why) || !procfs::exists(pid)) continue;
                release_target(*s, pid);
                s->event({EngineEvent::Warning, pid, false, 0,
                          why + "; it is no longer profiled (its samples so far are kept)"});
            }
        }
    }
    for (auto& s : sessions_) {
        retry_cgroups(*s, now);
        check_done(*s, now);
    }
    return n;
}

void Engine::stop_sampling() {
    if (!sampling_) return;
    sampling_ = false;
    sampler_->stop_sampling();
    while (sampler_->drain() > 0) {
    }
}

void Engine::pause_sampling() {
    sampler_->pause();
    while (sampler_->drain() > 0) {
    }
}

Profile Engine::stop(Session* s) {
    if (sessions_.size() == 1 && cfg_.idle_without_sessions) pause_sampling();
    else if (sessions_.size() == 1) stop_sampling();
    else sampler_->drain();
    const uint64_t end = mono_ns();
    if (s->cfg_.mode == ProfileMode::Wall) {
        flush_offcpu(*s, end);
        if (cfg_.knobs.debug) {  // the scheduler program's cost so far (bpf_stats: since it was loaded)
            const auto p = sampler_->switch_stats();
            const auto st = sampler_->stats();
            s->event({EngineEvent::Debug, 0, false, 0,
                      "off-CPU program: sched_switch " + std::to_string(p.run_cnt) + " runs, " +
                          std::to_string(p.run_cnt ? p.run_time_ns / p.run_cnt : 0) + " ns each; switch-outs " +
                          std::to_string(st[PBP_STAT_OFFCPU_WALK]) + " walked, " +
                          std::to_string(st[PBP_STAT_OFFCPU_REUSED]) + " reused (identity; " +
                          std::to_string(st[PBP_STAT_OFFCPU_PLACE_REUSED]) + " of them by the place check), " +
                          std::to_string(st[PBP_STAT_OFFCPU_OVER_BUDGET]) + " over the walk budget; " +
                          std::to_string(st[PBP_STAT_OFFCPU_UNSEEN_IN]) +
                          " switch-ins never reported (found by a CPU sample or the switch-out); " +
                          std::to_string(offcpu_stackless_) + " pending intervals without a stack at the end; " +
                          std::to_string(st[PBP_STAT_OFFCPU_SPILLED] + sampler_->offcpu_seeds_spilled()) +
                          " threads' entries away from their home slot, " +
                          std::to_string(st[PBP_STAT_OFFCPU_FULL] + sampler_->offcpu_seeds_full()) +
                          " threads not tracked (no free slot)"});
        }
    }
    if (s->cfg_.native && native_ && cfg_.knobs.debug) {
        const auto st = sampler_->stats();
        const uint64_t n = native_->unwound();
        s->event({EngineEvent::Debug, 0, false, 0,
                  "native: " + std::to_string(n) + " samples unwound, " + std::to_string(native_->exact()) +
                      " merged exactly, " + std::to_string(n ? native_->unwind_ns() / n : 0) +
                      " ns each in userspace; BPF sent " + std::to_string(st[PBP_STAT_NATIVE_BYTES]) +
                      " bytes of machine state, " + std::to_string(st[PBP_STAT_NATIVE_DROP]) + " records lost"});
        const auto& c = native_->counters();
        s->event({EngineEvent::Debug, 0, false, 0,
                  "native set-up: " + std::to_string(c.maps_reads) + " maps reads, " + std::to_string(c.files_reported) +
                      " files reported, " + std::to_string(c.symbol_loads) + " modules' symbols loaded; CPU " +
                      std::to_string(c.refresh_cpu_ns / 1000000) + " ms maps and modules, " +
                      std::to_string(native_->unwind_cpu_ns() / 1000000) + " ms unwinding, " +
                      std::to_string(native_->symbols_cpu_ns() / 1000000) + " ms naming"});
        std::string loads;
        for (const auto& [file, n] : c.loads_by_file) loads += " " + file + "=" + std::to_string(n);
        s->event({EngineEvent::Debug, 0, false, 0, "native symbol loads per file:" + loads});
    }
    registry_->sample_resources_at_end(s->targets_, end);
    registry_->refresh_thread_names();
    registry_->mark_gone_exited();
    RunInfo run = s->run_info(end);
    Profile out = make_snapshot(s->agg_->take(), *store_, *registry_, run);
    for (pid_t pid : std::set<pid_t>(s->targets_)) release_target(*s, pid);
    for (auto it = pending_.begin(); it != pending_.end();) {
        it->second.for_sessions.erase(s);
        it = it->second.for_sessions.empty() ? pending_.erase(it) : std::next(it);
    }
    final_stats_ = bpf_stats();
    forget_unused(*s);
    sessions_.erase(std::remove_if(sessions_.begin(), sessions_.end(), [&](auto& p) { return p.get() == s; }),
                    sessions_.end());
    apply_wall();
    if (sessions_.empty() && sampling_) reset_caches();
    if (std::string error; sampling_ && !sessions_.empty() && !apply_rate(0, error))  // the fastest may be gone
        for (auto& other : sessions_) other->event({EngineEvent::Error, 0, false, 0, error});
    return out;
}

// No session left: every stack, frame and process the engine knows is dropped, so an idle
// engine holds what a new one does however many sessions came and went.
void Engine::reset_caches() {
    for (pid_t pid : std::set<pid_t>(live_)) forget_in_bpf(pid);
    pending_.clear();
    exits_.clear();
    auto log = [this](const std::string& m) { debug(m); };
    symbolizer_ = std::make_unique<Symbolizer>();
    if (cfg_.knobs.debug) symbolizer_->set_debug_log(log);
    store_ = std::make_unique<StackStore>(*symbolizer_,
                                          [this](uint64_t id, pbp_stack& out) { return sampler_->lookup_stack(id, out); });
    registry_ = std::make_unique<ProcessRegistry>();
    discoverer_ = std::make_unique<Discoverer>();
    asyncio_ = std::make_unique<AsyncioTasks>();
    async_pids_.clear();
    // Its frames are interned in the store: a new one with it (the old one's reference to the
    // store it replaced crashed the agent at the first --native sample after an idle spell).
    if (native_) {
        native_ = std::make_unique<native::NativeStacks>(*store_);
        native_->set_timing(cfg_.knobs.debug);
    }
    native_pids_.clear();
    first_seen_.clear();
    first_stack_.clear();
}

// What only the stopped session used is dropped, so a long-lived engine (the agent) does not
// grow with every session that came and went.
void Engine::forget_unused(const Session& gone) {
    for (pid_t pid : gone.ever_) {
        if (targets_.count(pid)) continue;
        bool used = std::any_of(sessions_.begin(), sessions_.end(),
                                [&](auto& o) { return o.get() != &gone && o->ever_.count(pid); });
        if (!used) registry_->forget(static_cast<uint32_t>(pid));
    }
    for (uint32_t key : gone.retired_)
        if (std::none_of(sessions_.begin(), sessions_.end(), [&](auto& o) { return o.get() != &gone && o->retired_.count(key); }))
            registry_->forget(key);
    if (cfg_.knobs.debug)
        for (pid_t pid : gone.ever_) {
            first_seen_.erase(pid);
            first_stack_.erase(pid);
        }
}

// ---- --mode wall ---------------------------------------------------------------------------

void Engine::apply_wall() {
    uint64_t min_block = 0;
    for (auto& s : sessions_)
        if (s->cfg_.mode == ProfileMode::Wall && (!min_block || s->cfg_.min_block_ns < min_block))
            min_block = s->cfg_.min_block_ns ? s->cfg_.min_block_ns : 1;
    if (min_block) {
        sampler_->set_min_block(min_block);
        return;
    }
    sampler_->detach_wall();
}

void Engine::update_wall(pid_t pid) {
    auto it = targets_.find(pid);
    const bool want = it != targets_.end() && std::any_of(it->second.begin(), it->second.end(), [](Session* s) {
                          return s->cfg_.mode == ProfileMode::Wall;
                      });
    if (want == static_cast<bool>(wall_pids_.count(pid))) return;
    pbp_proc proc{};
    if (!sampler_->set_process_flags(pid, PBP_PROC_WALL, want ? PBP_PROC_WALL : 0, &proc)) return;  // exec'd: found again
    if (want) {
        wall_pids_.insert(pid);
        std::vector<const Session*> wall;
        for (Session* s : it->second)
            if (s->cfg_.mode == ProfileMode::Wall) wall.push_back(s);
        seed_offcpu(pid, proc, wall);
    } else {
        wall_pids_.erase(pid);
        sampler_->forget_offcpu(pid);
        for (auto t = seed_stacks_.begin(); t != seed_stacks_.end();)
            t = t->second.pid == pid ? seed_stacks_.erase(t) : std::next(t);
    }
}

void Engine::update_native(pid_t pid) {
    if (!native_) return;
    auto it = targets_.find(pid);
    const bool want = it != targets_.end() &&
                      std::any_of(it->second.begin(), it->second.end(), [](Session* s) { return s->cfg_.native; });
    if (want == static_cast<bool>(native_pids_.count(pid))) return;
    pbp_proc proc{};
    if (!sampler_->set_process_flags(pid, PBP_PROC_NATIVE, want ? PBP_PROC_NATIVE : 0, &proc)) return;
    if (want) {
        native_pids_[pid] = proc.off.py_version_hex;
        native_->watch(pid, mono_ns());
    } else {
        native_pids_.erase(pid);
    }
}

void Engine::update_async(pid_t pid) {
    auto it = targets_.find(pid);
    const bool want = it != targets_.end() && asyncio_->has(pid) &&
                      std::any_of(it->second.begin(), it->second.end(), [](Session* s) { return s->cfg_.async_tasks; });
    if (want == static_cast<bool>(async_pids_.count(pid))) return;
    if (!sampler_->set_async_task_offset(pid, want ? asyncio_->task_offset(pid) : 0)) return;  // exec'd: found again
    if (want) async_pids_.insert(pid);
    else async_pids_.erase(pid);
}

// Every thread gets its entry now (BPF makes entries only for threads created later, at fork):
// one asleep has its interval start now (what came before is before every session that wants
// it), or from a wall session's start when it was asleep then and has not been switched since
// (Session::asleep_at_start_; of the wall sessions that want it, the earliest such start); its
// reason from /proc (S sleeping, D uninterruptible; whether an S thread waits for the GIL
// would need the GIL's layout: it counts as sleeping), and its stack read now
// from its memory: it was never switched out while tracked, so BPF has not walked it, and until
// it runs its stack stays the one it blocks with (seed_stacks_, used by its first record;
// symbolized now, while its code objects live: the record comes when it wakes, maybe to exit).
// One running is on CPU (no interval). An entry BPF made meanwhile is kept: BPF knows better.
void Engine::seed_offcpu(pid_t pid, const pbp_proc& proc, const std::vector<const Session*>& wall) {
    const uint64_t now = mono_ns();
    // --native: an asleep thread's machine state, read now, stands for its pending interval
    // (BPF takes it when a thread blocks, which these did before anything was attached).
    const bool native = native_ && native_pids_.count(pid) &&
                        std::any_of(wall.begin(), wall.end(), [](const Session* s) { return s->cfg_.native; });
    std::vector<cpython::ThreadStack> stacks;
    std::string err;
    bool have_stacks = false;
    // A snapshot's entries are of this process only if it started before it (its PID may be
    // another's, exited and reused since: the entries of processes that were never targets stay).
    std::optional<uint64_t> start_ticks;
    auto process_start_ticks = [&] {
        if (!start_ticks) {
            auto st = parse_proc_stat(procfs::read_text("/proc/" + std::to_string(pid) + "/stat"));
            start_ticks = st ? st->start_ticks : UINT64_MAX;
        }
        return *start_ticks;
    };
    for (pid_t tid : procfs::tids(pid)) {
        auto st = procfs::read_task_status(pid, tid);
        if (!st) continue;
        pbp_offcpu e{};
        e.tgid = static_cast<uint32_t>(pid);
        e.gil = proc.off.gil_where == PBP_GIL_WHERE_NONE ? PBP_GIL_NA : PBP_GIL_NEITHER;  // as BPF's offcpu_gil()
        if (st->state == 'S' || st->state == 'D') {
            e.out_ns = now;
            for (const Session* s : wall)  // asleep since before a session began: from the earliest
                if (auto since = s->asleep_at_start_.asleep_since(pid, static_cast<uint32_t>(tid), st->state,
                                                                  st->switches, process_start_ticks))
                    e.out_ns = std::min<uint64_t>(e.out_ns, *since);
            e.wait = st->state == 'D' ? PBP_WAIT_IO : PBP_WAIT_SLEEP;
            // its CPU time so far: if the switch that brings it back is never reported, its
            // switch-out ends the interval where it began running (bpf/offcpu.bpf.h)
            e.exec_ns = procfs::read_task_cpu_ns(pid, tid).value_or(0);
            if (!have_stacks) {  // once, when the first asleep thread is met
                have_stacks = true;
                if (!cpython::read_thread_stacks(pid, proc, stacks, err)) stacks.clear();
            }
            for (auto& ts : stacks)
                if (ts.tid == static_cast<uint32_t>(tid) && !ts.frames.empty()) {
                    const uint32_t id = store_->stack_for_frames(pid, ts.frames, ts.flags, ts.reason, e.wait);
                    seed_stacks_[static_cast<uint32_t>(tid)] = {pid, ts, id, e.wait};
                }
            if (native)
                if (auto state = native::read_blocked_state(pid, tid, now)) {
                    native_->on_blocked_state(*state);
                    e.native_ts = now;
                }
        }
        sampler_->seed_offcpu(static_cast<uint32_t>(tid), e);
    }
    sampler_->new_offcpu_epoch();
}

uint32_t Engine::stack_for(const pbp_event& e) {
    // Stack id 0 with no reason: the entry was never walked by BPF (seeded asleep): its stack
    // as read when it was seeded, or the wait leaf alone.
    if (e.kind == PBP_KIND_OFF_CPU && !e.stack_id && e.reason == PBP_OK) {
        auto it = seed_stacks_.find(e.tid);
        if (it != seed_stacks_.end() && it->second.pid == static_cast<pid_t>(e.pid)) {
            if (e.wait == it->second.wait) return it->second.stack_id;
            // (Another leaf: its code objects are in the symbolizer's cache since the seeding.)
            const auto& ts = it->second.stack;
            return store_->stack_for_frames(static_cast<pid_t>(e.pid), ts.frames, ts.flags, ts.reason, e.wait,
                                            &ts.entry);
        }
    }
    return store_->stack_for(e);
}

uint32_t Engine::with_task(const pbp_event& e, uint32_t stack, std::optional<uint32_t> over) {
    const uint32_t base = over ? *over : stack;
    if (!e.async_task || !async_pids_.count(static_cast<pid_t>(e.pid))) return base;
    const AsyncioTasks::Chain* ch = asyncio_->chain(static_cast<pid_t>(e.pid), e.async_task);
    return ch ? store_->task_stack(e, stack, ch->names, ch->coro_code, over) : base;
}

uint32_t Engine::native_stack_for(const pbp_event& e, uint32_t stack, std::optional<uint32_t> bare_stack) {
    if (!native_) return stack;
    auto n = native_pids_.find(static_cast<pid_t>(e.pid));
    if (n == native_pids_.end()) return stack;
    if (e.kind == PBP_KIND_CPU) return store_->with_startup_root(stack, native_->stack_for(e, stack, n->second));
    // Off CPU (--mode wall): the machine state of the switch-out its stack was walked at, if it
    // has one; merged without the wait leaf, which goes innermost, below the scheduler's frames.
    if (e.kind != PBP_KIND_OFF_CPU || !e.cpu_clock_ns || e.wait <= PBP_WAIT_NONE || e.wait >= PBP_WAIT_COUNT)
        return stack;
    pbp_event bare = e;
    bare.wait = PBP_WAIT_NONE;
    const uint32_t plain = bare_stack ? *bare_stack : stack_for(bare);
    const uint32_t merged = native_->offcpu_stack_for(e, plain, n->second);
    if (merged == plain) return stack;
    return store_->with_startup_root(stack, store_->with_wait_leaf(merged, e.wait));
}

void Engine::deliver(Session& s, const pbp_event& e, uint32_t stack) {
    registry_->on_sample(e.pid, e.tid);
    s.agg_->on_sample(e, s.cfg_.async_tasks ? with_task(e, stack) : stack);
}

// A wall session's end: what BPF has not emitted yet. A pending interval carries the stack BPF
// walked at its switch-out; one never walked (a thread asleep from before the session to its
// end) gets the thread's stack read now from its memory (the same frames a BPF walk gives), or
// the one read when it was seeded, or, when neither read worked, the wait leaf alone (counted:
// offcpu_stackless_). Sums of short intervals go on the last walked stack.
void Engine::flush_offcpu(Session& s, uint64_t end_ns) {
    s.end_mono_ns_ = end_ns;
    for (pid_t pid : s.targets_) {
        if (!wall_pids_.count(pid)) continue;
        auto entries = sampler_->offcpu_entries(pid);
        std::vector<cpython::ThreadStack> now_stacks;
        bool read_tried = false;
        for (auto& [tid, en] : entries) {
            pbp_event e{};
            e.type = PBP_EV_SAMPLE;
            e.pid = static_cast<uint32_t>(pid);
            e.tid = tid;
            e.ts_ns = end_ns;
            e.kind = PBP_KIND_OFF_CPU;
            e.stack_id = en.stack_id;
            e.depth = en.depth;
            e.reason = en.reason;
            e.flags = en.stack_flags;
            const uint64_t span = end_ns - s.start_mono_ns_;  // nothing counts from before it began
            if (en.out_ns && en.out_ns < end_ns && en.wait > PBP_WAIT_NONE && en.wait < PBP_WAIT_COUNT) {
                pbp_event p = e;
                p.weight_ns = std::min<uint64_t>(end_ns - en.out_ns, span);
                p.wait = en.wait;
                p.gil = en.gil;
                p.async_task = en.async_task;  // the task at its switch-out (--async)
                p.cpu_clock_ns = en.approx ? 0 : en.native_ts;  // --native: its machine state
                if (en.approx) p.flags |= PBP_F_AGGREGATE;
                uint32_t stack = 0;
                std::optional<uint32_t> bare;  // the stack read now, without the wait leaf
                bool have = false;
                // Never walked, or the walk at switch-out found no stack (e.g. the thread state not
                // found yet at the switch-out right after start-up): the thread is still blocked
                // there, so read its stack now.
                if (!en.stack_id) {
                    if (!read_tried) {
                        read_tried = true;
                        pbp_proc proc{};
                        std::string err;
                        if (!sampler_->lookup_process(pid, proc) ||
                            !cpython::read_thread_stacks(pid, proc, now_stacks, err))
                            now_stacks.clear();
                    }
                    for (auto& ts : now_stacks)
                        if (ts.tid == tid && !ts.frames.empty()) {
                            stack = store_->stack_for_frames(pid, ts.frames, ts.flags, ts.reason, p.wait);
                            if (s.cfg_.native)
                                bare = store_->stack_for_frames(pid, ts.frames, ts.flags, ts.reason, PBP_WAIT_NONE,
                                                                &ts.entry);
                            have = true;
                            break;
                        }
                    if (!have && en.reason == PBP_OK && !seed_stacks_.count(tid)) offcpu_stackless_++;
                }
                if (!have) stack = stack_for(p);
                if (s.cfg_.native && !s.cfg_.async_tasks) {  // as on_sample gives them (not under tasks)
                    stack = native_stack_for(p, stack, bare);
                    if (!s.cfg_.kernel_frames) stack = store_->without_kernel_frames(stack);
                }
                if (p.weight_ns) deliver(s, p, stack);
            }
            for (uint8_t w = PBP_WAIT_SLEEP; w < PBP_WAIT_COUNT; w++) {
                if (!en.sum_ns[w]) continue;
                pbp_event a = e;
                a.weight_ns = std::min<uint64_t>(en.sum_ns[w], span);
                a.wait = w;
                a.gil = w == PBP_WAIT_GIL ? PBP_GIL_WAITING : en.gil == PBP_GIL_NA ? PBP_GIL_NA : PBP_GIL_NEITHER;
                a.flags |= PBP_F_AGGREGATE;
                deliver(s, a, stack_for(a));
            }
        }
    }
    // Records BPF queued meanwhile: those up to end_ns are this session's (their threads' entries
    // read as on CPU above); later ones are not (end_mono_ns_).
    sampler_->drain();
}

}  // namespace pbp
