#include <algorithm>
#include "engine/session.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "engine/abi_names.h"
#include "engine/aggregator.h"
#include "engine/bpf_sampler.h"
#include "targets/cgroup_target.h"
#include "targets/cgroups.h"
#include "targets/discovery.h"
#include "export/exporter.h"
#include "export/html_report.h"
#include "export/output_file.h"
#include "targets/kube.h"
#include "targets/launcher.h"
#include "sys/preflight.h"
#include "sys/procfs.h"
#include "engine/profile.h"
#include "engine/resource_sampler.h"
#include "engine/symbolizer.h"
#include "cli/text_summary.h"

namespace pbp {

namespace {

std::atomic<int> g_stop_signal{0};

void on_signal(int sig) { g_stop_signal = sig; }

void install_signals() {
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: poll() returns EINTR
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGHUP, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
}

uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + ts.tv_nsec;
}
int64_t real_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

std::string timestamp_for_name() {
    time_t t = time(nullptr);
    tm tmv;
    localtime_r(&t, &tmv);
    char buf[32];
    strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tmv);
    return buf;
}

std::string sanitize_for_name(std::string s) {
    for (char& c : s)
        if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
    if (s.size() > 40) s.resize(40);
    return s;
}

void err(const std::string& msg) { std::cerr << "pybpfprof: " << msg << "\n"; }

// Discovery retry schedule after an exec/fork, in ms since the event: dense at first
// (shared-libpython builds map libpython within a few ms), then sparse.
constexpr int kRetryMs[] = {0, 2, 5, 10, 20, 35, 50, 75, 100, 150, 200, 300, 500, 1000, 2000};

struct Pending {
    uint64_t since_ns;
    size_t attempt;
    uint64_t event_ns = 0;  // BPF timestamp of the exec/fork event (0: found by a scan)
};

class Session {
public:
    explicit Session(const Options& o) : o_(o), node_(o.node_root) {}
    int run();

private:
    bool resolve_output(std::string& path, std::string& error);
    bool add_target(const PythonTarget& t, bool announce);
    size_t scan(const std::vector<pid_t>& pids, bool announce);  // discover these now
    bool cgroup_mode() const { return !o_.cgroups.empty(); }
    int setup_cgroups();              // resolve --cgroup; exit code, or -1 to go on
    bool attach_cgroup(size_t i, std::string& error);  // into the BPF filter, then scan it
    void retry_cgroups();             // the ones not found yet (with --duration)
    void on_event(const pbp_event& e);
    void schedule(pid_t pid, uint64_t event_ns = 0) { pending_[pid] = {mono_ns(), 0, event_ns}; }
    void run_pending();
    bool in_launch_tree(pid_t pid, pid_t ppid);
    bool asked_for(pid_t pid) const {  // named with --pid
        return std::find(o_.pids.begin(), o_.pids.end(), pid) != o_.pids.end();
    }
    void target_gone(pid_t pid);
    void status_line(bool final);
    int finish();
    bool write_output(const std::string& path, std::string& error);
    bool write_report(std::string& error);  // --report FILE

    const Options& o_;
    kube::Node node_;                 // pod and container names on this node
    struct WatchedCgroup {
        std::string spec;
        bool attached = false;
        CgroupTarget target;
    };
    std::vector<WatchedCgroup> cgroups_;
    std::string cg_mount_;
    uint32_t cg_slots_ = 0;
    uint64_t last_cg_retry_ns_ = 0;
    Profile profile_;
    Symbolizer symbolizer_;
    Discoverer discoverer_;
    std::unique_ptr<BpfSampler> sampler_;
    std::unique_ptr<Aggregator> agg_;
    ResourceSampler resources_;  // CPU % and RSS of the targets, ~1 Hz (for the HTML report)
    std::unique_ptr<Exporter> exporter_;
    Launcher launcher_;
    bool launched_ = false;
    std::string out_path_;
    std::map<pid_t, Pending> pending_;
    std::set<pid_t> targets_;       // currently registered with BPF
    std::set<pid_t> ever_targets_;
    std::set<pid_t> launch_tree_;   // launched command and its descendants
    std::set<pid_t> exited_early_;  // --pid targets that exited during the run
    std::set<pid_t> warned_;
    std::vector<pid_t> exits_;      // exit events seen by the last poll
    uint32_t generation_ = 0;
    uint32_t max_depth_ = PBP_MAX_DEPTH;
    bool tty_ = false;
    uint64_t last_status_ns_ = 0;
    uint64_t last_liveness_ns_ = 0;
    uint64_t last_names_ns_ = 0;
    // PYBPFPROF_DEBUG: when each target was registered and first sampled (tools/bench/run
    // measures exec-to-first-sample latency from these lines).
    const bool debug_ = getenv("PYBPFPROF_DEBUG") != nullptr;
    std::set<pid_t> first_seen_, first_stack_;
};

bool Session::resolve_output(std::string& path, std::string& error) {
    if (o_.output.empty()) {
        std::string target;
        if (cgroup_mode()) {
            target = "cgroup-" + sanitize_for_name(o_.cgroups[0]);
            if (o_.cgroups.size() > 1) target += "+" + std::to_string(o_.cgroups.size() - 1);
        } else if (o_.all_python) target = "all-python";
        else if (!o_.command.empty()) target = sanitize_for_name(std::filesystem::path(o_.command[0]).filename());
        else {
            target = "pid" + std::to_string(o_.pids[0]);
            if (o_.pids.size() > 1) target += "+" + std::to_string(o_.pids.size() - 1);
        }
        path = "pybpfprof-" + target + "-" + timestamp_for_name() + "." + exporter_->extension();
    } else {
        path = o_.output;
    }
    std::filesystem::path p(path);
    std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
    struct stat st{};
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        error = "cannot write " + path + ": directory " + dir + " does not exist; create it or choose another -o path";
        return false;
    }
    if (access(dir.c_str(), W_OK) != 0) {
        error = "cannot write " + path + ": directory " + dir + " is not writable; choose another -o path";
        return false;
    }
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        error = "cannot write " + path + ": it is a directory; give a file name to -o";
        return false;
    }
    return true;
}

bool Session::add_target(const PythonTarget& t, bool announce) {
    std::string error;
    pbp_proc cfg = t.bpf_config(max_depth_, ++generation_);
    // For before/after measurements (tools/bench/run): every code object read, as before 3.14.
    if (getenv("PYBPFPROF_NO_CODE_CACHE")) cfg.off.interp_code_gen = PBP_OFF_NONE;
    symbolizer_.add_process(t.pid, t.layout, t.code_type_addr);
    agg_->add_process(t);
    profile_.processes[static_cast<uint32_t>(t.pid)].labels = node_.labels_for(t.pid);
    if (!sampler_->add_process(t.pid, cfg, error)) {
        err(error);
        return false;
    }
    targets_.insert(t.pid);
    ever_targets_.insert(t.pid);
    if (!t.warning.empty()) err("warning: PID " + std::to_string(t.pid) + ": " + t.warning);
    if (announce && !o_.quiet) {
        std::cerr << "pybpfprof: profiling PID " << t.pid << " (" << procfs::comm(t.pid) << ", CPython "
                  << t.describe() << ")";
        const auto& labels = profile_.processes[static_cast<uint32_t>(t.pid)].labels;
        if (labels.count("pod")) std::cerr << " in pod " << labels.at("namespace") << "/" << labels.at("pod");
        if (labels.count("container")) std::cerr << ", container " << labels.at("container");
        std::cerr << "\n";
    }
    return true;
}

size_t Session::scan(const std::vector<pid_t>& pids, bool announce) {
    size_t n = 0;
    for (pid_t pid : pids) {
        if (pid == getpid() || targets_.count(pid) || pending_.count(pid)) continue;
        auto r = discoverer_.discover(pid);
        if (r.status == Discovery::Python) {
            if (add_target(*r.target, announce)) n++;
        } else if (r.status == Discovery::NotYet) {
            schedule(pid);
        }
    }
    return n;
}

int Session::setup_cgroups() {
    struct stat st{};
    if (stat(o_.node_root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        err("--node-root " + o_.node_root + " is not a directory; give the path where the node's / is mounted");
        return kExitBadInput;
    }
    // An agent container with hostPID may still be in a cgroup namespace of its own.
    cgroups::enter_init_cgroup_namespace();
    std::string error;
    auto mount = cgroups::hierarchy_mount(error);
    if (!mount) {
        err(error);
        return kExitError;
    }
    cg_mount_ = *mount;
    for (const auto& spec : o_.cgroups) {
        WatchedCgroup w;
        w.spec = spec;
        auto r = resolve_cgroup(spec, cg_mount_, node_);
        if (r.status == CgroupResolve::Found) {
            w.target = r.target;
        } else if (r.status == CgroupResolve::Ambiguous || o_.duration_s <= 0) {
            err(r.message());
            return kExitBadInput;
        } else if (!o_.quiet) {
            std::cerr << "pybpfprof: " << r.cause << "; waiting for it (up to " << o_.duration_s << " s)\n";
        }
        cgroups_.push_back(std::move(w));
    }
    return -1;
}

bool Session::attach_cgroup(size_t i, std::string& error) {
    auto& w = cgroups_[i];
    if (!sampler_->set_cgroup(cg_slots_, w.target.abs_path, error)) return false;
    cg_slots_++;
    w.attached = true;
    // Execs from now on are reported by BPF; the processes already there are scanned.
    size_t n = scan(cgroups::procs_under(w.target.abs_path), true);
    if (!o_.quiet) {
        std::cerr << "pybpfprof: watching " << w.target.describe() << ": " << n << " CPython process"
                  << (n == 1 ? "" : "es") << " now";
        if (n == 0) std::cerr << "; none yet, waiting for one" << (o_.duration_s > 0 ? "" : " (Ctrl-C to stop)");
        std::cerr << "\n";
    }
    return true;
}

void Session::retry_cgroups() {
    for (size_t i = 0; i < cgroups_.size(); i++) {
        if (cgroups_[i].attached) continue;
        auto r = resolve_cgroup(cgroups_[i].spec, cg_mount_, node_);
        if (r.status != CgroupResolve::Found) continue;
        cgroups_[i].target = r.target;
        std::string error;
        if (!attach_cgroup(i, error)) err(error);
    }
}

bool Session::in_launch_tree(pid_t pid, pid_t ppid) {
    if (!launched_) return false;
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

void Session::target_gone(pid_t pid) {
    if (!targets_.count(pid)) return;
    // Samples already in the ring buffer are ordered before this point: consume them
    // while we still have the process's caches, then forget it.
    sampler_->drain();
    agg_->refresh_thread_names(true);
    sampler_->remove_process(pid);
    symbolizer_.remove_process(pid);
    agg_->mark_exited(pid);
    targets_.erase(pid);
    if (!o_.pids.empty()) exited_early_.insert(pid);
}

void Session::on_event(const pbp_event& e) {
    switch (e.type) {
        case PBP_EV_SAMPLE:
            agg_->on_sample(e);
            if (debug_ && first_seen_.insert(static_cast<pid_t>(e.pid)).second)
                std::cerr << "pybpfprof: debug: PID " << e.pid << " first sample at mono_ns " << e.ts_ns << "\n";
            if (debug_ && e.stack_id && first_stack_.insert(static_cast<pid_t>(e.pid)).second)
                std::cerr << "pybpfprof: debug: PID " << e.pid << " first python stack at mono_ns " << e.ts_ns
                          << "\n";
            break;
        case PBP_EV_EXEC:
        case PBP_EV_FORK: {
            pid_t pid = static_cast<pid_t>(e.pid);
            if (pid == getpid()) break;
            // A --pid target is followed through exec: out of Python (dropped, BPF already
            // forgot it) and back into Python (profiled again).
            // With --cgroup, BPF reports only execs under the cgroups.
            bool wanted = o_.all_python || cgroup_mode() || in_launch_tree(pid, static_cast<pid_t>(e.ppid)) ||
                          (e.type == PBP_EV_EXEC && (targets_.count(pid) || asked_for(pid)));
            if (!wanted) break;
            if (e.type == PBP_EV_EXEC && targets_.count(pid)) {
                // Same PID, new program: its old layout and caches are void.
                sampler_->remove_process(pid);
                symbolizer_.remove_process(pid);
                targets_.erase(pid);
            }
            if (debug_ && e.type == PBP_EV_EXEC) {
                first_seen_.erase(pid);
                first_stack_.erase(pid);
            }
            schedule(pid, e.ts_ns);
            break;
        }
        case PBP_EV_EXIT:
            // Handled after the poll returns: never drain from inside the ring-buffer callback.
            pending_.erase(static_cast<pid_t>(e.pid));
            exits_.push_back(static_cast<pid_t>(e.pid));
            break;
    }
}

void Session::run_pending() {
    uint64_t now = mono_ns();
    for (auto it = pending_.begin(); it != pending_.end();) {
        pid_t pid = it->first;
        Pending& p = it->second;
        if (now < p.since_ns + kRetryMs[p.attempt] * 1000000ULL) {
            ++it;
            continue;
        }
        auto r = discoverer_.discover(pid);
        bool done = true;
        switch (r.status) {
            case Discovery::Python:
                if (add_target(*r.target, true) && debug_)
                    std::cerr << "pybpfprof: debug: PID " << pid << " registered at mono_ns " << mono_ns()
                              << " (event at " << p.event_ns << ", attempt " << p.attempt << ")\n";
                break;
            case Discovery::NotYet:
                done = ++p.attempt >= std::size(kRetryMs);
                break;
            case Discovery::Unsupported:
                if (warned_.insert(pid).second) err("skipping PID " + std::to_string(pid) + ": " + r.reason);
                break;
            default:
                break;
        }
        it = done ? pending_.erase(it) : std::next(it);
    }
}

void Session::status_line(bool final) {
    if (!tty_ || o_.quiet) return;
    uint64_t now = mono_ns();
    if (!final && now - last_status_ns_ < 250000000ULL) return;
    last_status_ns_ = now;
    auto st = sampler_->stats();
    char buf[256];
    snprintf(buf, sizeof buf, "\r\033[Kpybpfprof: %.1fs  %llu samples  %zu processes  %llu lost",
             (now - profile_.run.start_mono_ns) / 1e9, (unsigned long long)profile_.total_samples(), targets_.size(),
             (unsigned long long)st[PBP_STAT_RINGBUF_DROP]);
    std::cerr << buf << (final ? "\r\033[K" : "") << std::flush;
}

int Session::run() {
    exporter_ = make_exporter(o_.format);
    std::string error;
    if (!check_privileges(error) || !check_kernel(o_.btf_path, error)) {
        err(error);
        return kExitError;
    }
    if (!resolve_output(out_path_, error)) {
        err(error);
        return kExitBadInput;
    }
    if (!o_.report.empty()) {
        std::filesystem::path rp(o_.report);
        std::string dir = rp.has_parent_path() ? rp.parent_path().string() : ".";
        struct stat rst{};
        if (stat(dir.c_str(), &rst) != 0 || !S_ISDIR(rst.st_mode) || access(dir.c_str(), W_OK) != 0 ||
            (stat(o_.report.c_str(), &rst) == 0 && S_ISDIR(rst.st_mode))) {
            err("cannot write the report " + o_.report + ": " + dir +
                " is not a writable directory or the name is a directory; choose another --report path");
            return kExitBadInput;
        }
    }

    if (cgroup_mode())
        if (int code = setup_cgroups(); code >= 0) return code;

    // Validate --pid targets before loading anything.
    std::vector<PythonTarget> initial;
    for (pid_t pid : o_.pids) {
        if (pid == getpid()) {
            err("PID " + std::to_string(pid) + " is pybpfprof itself; pass the PID of a Python process");
            return kExitBadInput;
        }
        DiscoveryResult r;
        for (int i = 0; i < 20; i++) {
            r = discoverer_.discover(pid);
            if (r.status != Discovery::NotYet) break;
            usleep(10000);
        }
        if (r.status == Discovery::Gone) {
            err("no process with PID " + std::to_string(pid) + "; check it with: ps -p " + std::to_string(pid));
            return kExitBadInput;
        }
        if (r.status == Discovery::Unsupported) {
            err("PID " + std::to_string(pid) + " (" + procfs::comm(pid) + ") cannot be profiled: " + r.reason);
            return kExitBadInput;
        }
        if (r.status != Discovery::Python) {
            std::string comm = procfs::comm(pid);
            err("PID " + std::to_string(pid) + " (" + comm + ") is not a CPython process we can profile: " + r.reason +
                "; pass the PID of a python process");
            return kExitBadInput;
        }
        initial.push_back(*r.target);
    }

    if (!o_.command.empty()) {
        if (!launcher_.start(o_.command, error)) {
            err("cannot start " + o_.command[0] + ": " + error);
            return kExitError;
        }
        launched_ = true;
        launch_tree_.insert(launcher_.pid());
    }

    SamplerConfig cfg;
    cfg.rate_hz = o_.rate_hz;
    // Every mode follows exec: --all-python and launched commands pick up new Python
    // programs; a --pid target may exec into Python again.
    cfg.watch_exec = true;
    cfg.cgroup_filter = cgroup_mode();
    cfg.btf_path = o_.btf_path;
    sampler_ = BpfSampler::open(cfg, [this](const pbp_event& e) { on_event(e); }, error);
    if (!sampler_) {
        err(error);
        if (launched_) {
            kill(launcher_.pid(), SIGKILL);
            while (!launcher_.poll_exit()) usleep(1000);
        }
        return kExitError;
    }
    max_depth_ = sampler_->max_depth();
    if (o_.max_depth > 0) max_depth_ = std::min<uint32_t>(max_depth_, static_cast<uint32_t>(o_.max_depth));

    auto& run = profile_.run;
    run.rate_hz = o_.rate_hz;
    run.period_ns = sampler_->period_ns();
    run.kernel = kernel_release();
    run.version = PYBPFPROF_VERSION;
    run.max_depth = static_cast<int>(max_depth_);
    run.bpf_loop = sampler_->uses_bpf_loop();
    run.command = o_.command;
    if (cgroup_mode()) {
        for (auto& c : o_.cgroups) run.target += (run.target.empty() ? "cgroup " : ", ") + c;
    } else if (o_.all_python) run.target = "all-python";
    else if (launched_) {
        for (auto& a : o_.command) run.target += (run.target.empty() ? "" : " ") + a;
    } else {
        for (pid_t p : o_.pids) run.target += (run.target.empty() ? "pid " : ", pid ") + std::to_string(p);
    }
    agg_ = std::make_unique<Aggregator>(profile_, symbolizer_,
                                        [this](uint64_t id, pbp_stack& out) { return sampler_->lookup_stack(id, out); });

    install_signals();
    tty_ = isatty(2);
    run.start_mono_ns = mono_ns();
    run.start_unix_ns = real_ns();

    for (auto& t : initial) add_target(t, true);
    if (cgroup_mode()) {
        for (size_t i = 0; i < cgroups_.size(); i++) {
            if (cgroups_[i].target.abs_path.empty()) continue;
            if (!attach_cgroup(i, error)) {
                err(error);
                return kExitError;
            }
        }
    } else if (o_.all_python) {
        size_t n = scan(procfs::all_pids(), false);
        if (!o_.quiet)
            std::cerr << "pybpfprof: profiling every CPython process: " << n
                      << " running now, new ones as they start. Ctrl-C to stop.\n";
    }
    if (launched_) {
        launcher_.release();
        if (int e = launcher_.wait_exec()) {
            err("cannot run " + o_.command[0] + ": " + strerror(e) + "; check the command and your PATH");
            sampler_.reset();
            while (!launcher_.poll_exit()) usleep(1000);
            return kExitBadInput;
        }
        schedule(launcher_.pid());
    }

    const uint64_t deadline = o_.duration_s > 0 ? run.start_mono_ns + static_cast<uint64_t>(o_.duration_s * 1e9) : 0;
    std::string stop_reason;
    while (true) {
        int timeout = pending_.empty() ? 100 : 2;
        int n = sampler_->poll(timeout);
        if (n < 0 && n != -EINTR) {
            err(std::string("ring buffer poll failed: ") + strerror(-n));
            break;
        }
        if (g_stop_signal) {
            stop_reason = g_stop_signal == SIGINT ? "interrupted" : "stopped by signal";
            break;
        }
        uint64_t now = mono_ns();
        if (deadline && now >= deadline) {
            stop_reason = "duration reached";
            break;
        }
        for (pid_t p : std::exchange(exits_, {})) target_gone(p);
        run_pending();
        if (cgroup_mode() && now - last_cg_retry_ns_ > 250000000ULL) {
            last_cg_retry_ns_ = now;
            retry_cgroups();
        }
        resources_.maybe_sample(profile_, targets_, now);
        if (launched_ && launcher_.poll_exit()) {
            // The launched program is done: its last samples are already queued.
            for (pid_t p : std::set<pid_t>(targets_))
                if (!procfs::exists(p)) target_gone(p);
            stop_reason = "program exited";
            break;
        }
        if (now - last_names_ns_ > 1000000000ULL) {
            last_names_ns_ = now;
            agg_->refresh_thread_names(true);
        }
        if (now - last_liveness_ns_ > 500000000ULL) {  // safety net for lost exit events
            last_liveness_ns_ = now;
            for (pid_t p : std::set<pid_t>(targets_))
                if (!procfs::exists(p)) target_gone(p);
        }
        // A --pid target that exec'd out of Python is waited for: it may exec back.
        if (!o_.pids.empty() && targets_.empty() && pending_.empty() &&
            std::none_of(o_.pids.begin(), o_.pids.end(), [](pid_t p) { return procfs::exists(p); })) {
            stop_reason = "all targets exited";
            break;
        }
        status_line(false);
    }
    status_line(true);
    return finish();
}

bool Session::write_output(const std::string& path, std::string& error) {
    return write_file_atomically(
        path, [&](std::ostream& f) { exporter_->write(profile_, ExportOptions{o_.group_by}, f); }, error);
}

bool Session::write_report(std::string& error) {
    return write_file_atomically(
        o_.report, [&](std::ostream& f) { f << render_html_report(profile_, ExportOptions{o_.group_by}); }, error);
}

int Session::finish() {
    sampler_->stop_sampling();
    while (sampler_->drain() > 0) {
    }
    auto& run = profile_.run;
    run.end_mono_ns = mono_ns();
    auto st = sampler_->stats();
    run.lost = st[PBP_STAT_RINGBUF_DROP];
    auto ps = sampler_->prog_stats();
    run.bpf_run_time_ns = ps.run_time_ns;
    run.bpf_run_cnt = ps.run_cnt;
    agg_->refresh_thread_names();
    for (pid_t p : ever_targets_) {
        auto it = profile_.processes.find(static_cast<uint32_t>(p));
        if (it != profile_.processes.end() && !procfs::exists(p)) it->second.exited = true;
    }

    int code = kExitOk;
    std::string error;
    std::string written = out_path_;
    if (!write_output(out_path_, error)) {
        std::string fallback = (getenv("TMPDIR") ? std::string(getenv("TMPDIR")) : std::string("/tmp")) +
                               "/pybpfprof-fallback-" + timestamp_for_name() + "-" + std::to_string(getpid()) + "." +
                               exporter_->extension();
        std::string e2;
        if (write_output(fallback, e2)) {
            err("cannot write " + out_path_ + " (" + error + "); the samples were saved to " + fallback +
                " instead");
            written = fallback;
        } else {
            err("cannot write " + out_path_ + " (" + error + ") nor the fallback " + fallback + " (" + e2 +
                "); free some space or choose another -o path");
            return kExitError;
        }
        code = kExitError;
    }

    bool report_written = false;
    if (!o_.report.empty()) {
        if (write_report(error)) report_written = true;
        else {
            err("cannot write the report " + o_.report + " (" + error + ")");
            if (!code) code = kExitError;
        }
    }

    // Per-target notes: idle targets are not errors.
    for (auto& [pid, p] : profile_.processes) {
        if (!ever_targets_.count(static_cast<pid_t>(pid))) continue;
        if (p.threads.empty() && !o_.all_python)
            std::cerr << "pybpfprof: PID " << pid << " (" << p.comm << ") used no CPU during the "
                      << std::fixed << std::setprecision(1) << run.duration_s() << " s run; its profile is empty\n";
    }
    if (ever_targets_.empty() && (launched_ || o_.all_python || cgroup_mode())) {
        std::cerr << "pybpfprof: no CPython process was found "
                  << (launched_ ? "in the launched command" : cgroup_mode() ? "in " + run.target : "on this machine")
                  << " during the run\n";
        if (launched_) code = code ? code : kExitBadInput;
    }
    for (pid_t p : exited_early_) {
        auto it = profile_.processes.find(static_cast<uint32_t>(p));
        uint64_t n = 0;
        if (it != profile_.processes.end())
            for (auto& [_, t] : it->second.threads) n += t.samples.size();
        err("PID " + std::to_string(p) + " exited during the run; its " + std::to_string(n) + " samples are kept in " +
            written);
        if (!code) code = kExitTargetExited;
    }

    std::cerr << summary_line(profile_, written) << "\n";
    if (run.truncated)
        std::cerr << "  " << run.truncated << " samples were deeper than " << run.max_depth
                  << " frames and are marked [truncated]\n";
    if (st[PBP_STAT_SAMPLES])
        std::cerr << "  BPF: " << st[PBP_STAT_SAMPLE_NS] / st[PBP_STAT_SAMPLES] << " ns per profiled sample ("
                  << st[PBP_STAT_SAMPLES] << " samples), max depth " << run.max_depth
                  << (run.bpf_loop ? " (bpf_loop)" : " (no bpf_loop on this kernel)") << "\n";
    if (run.bpf_run_cnt)
        std::cerr << "  bpf_stats: " << run.bpf_run_time_ns / run.bpf_run_cnt << " ns per perf event over all CPUs ("
                  << run.bpf_run_cnt << " events)\n";
    if (getenv("PYBPFPROF_DEBUG")) {
        std::cerr << "  BPF stats:";
        for (uint32_t i = 0; i < PBP_STAT_COUNT; i++)
            if (st[i]) std::cerr << " " << stat_label(i) << "=" << st[i];
        std::cerr << "\n";
        if (st[PBP_STAT_T_TSTATE] && st[PBP_STAT_SAMPLES]) {  // PYBPFPROF_TIMING
            uint64_t n = st[PBP_STAT_SAMPLES];
            uint64_t parts = st[PBP_STAT_T_TSTATE] + st[PBP_STAT_T_FRAME0] + st[PBP_STAT_T_WALK] + st[PBP_STAT_T_STACKMAP];
            std::cerr << "  BPF sections, ns per sample: thread state " << st[PBP_STAT_T_TSTATE] / n << ", first frame "
                      << st[PBP_STAT_T_FRAME0] / n << ", walk " << st[PBP_STAT_T_WALK] / n << ", stack map "
                      << st[PBP_STAT_T_STACKMAP] / n << ", record "
                      << (st[PBP_STAT_SAMPLE_NS] > parts ? (st[PBP_STAT_SAMPLE_NS] - parts) / n : 0)
                      << "; per sample " << double(st[PBP_STAT_N_FRAME_READS]) / n << " frame reads, "
                      << double(st[PBP_STAT_N_CODE_READS]) / n << " code reads, "
                      << double(st[PBP_STAT_N_STR_READS]) / n << " str reads, "
                      << double(st[PBP_STAT_N_CODE_CACHED]) / n << " code checksums from the cache\n";
        }
    }
    std::cerr << "  " << exporter_->how_to_open(written) << "\n";
    if (report_written) std::cerr << "  report " << o_.report << ": " << html_report_how_to_open(o_.report) << "\n";
    if (!o_.no_summary) {
        std::string top = top_functions(profile_);
        if (!top.empty()) std::cerr << top;
    }
    return code;
}

}  // namespace

int run_session(const Options& opts) {
    Session s(opts);
    return s.run();
}

}  // namespace pbp
