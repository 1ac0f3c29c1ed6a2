#include "cli/record.h"

#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <set>

#include "cli/bpf_summary.h"
#include "cli/text_summary.h"
#include "engine/engine.h"
#include "export/exporter.h"
#include "export/html_report.h"
#include "export/output_file.h"
#include "sys/clock.h"
#include "sys/procfs.h"

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

int exit_code(const Status& s) { return s.failure == Failure::BadInput ? kExitBadInput : kExitError; }

// The -o path (or the default name), checked before anything is loaded.
bool resolve_output(const Options& o, const Exporter& ex, std::string& path, std::string& error) {
    if (o.output.empty()) {
        std::string target;
        if (!o.cgroups.empty()) {
            target = "cgroup-" + sanitize_for_name(o.cgroups[0]);
            if (o.cgroups.size() > 1) target += "+" + std::to_string(o.cgroups.size() - 1);
        } else if (o.all_python) target = "all-python";
        else if (!o.command.empty()) target = sanitize_for_name(std::filesystem::path(o.command[0]).filename());
        else {
            target = "pid" + std::to_string(o.pids[0]);
            if (o.pids.size() > 1) target += "+" + std::to_string(o.pids.size() - 1);
        }
        path = "pybpfprof-" + target + "-" + timestamp_for_name() + "." + ex.extension();
    } else {
        path = o.output;
    }
    if (path == "-") return true;  // standard output
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

bool report_path_ok(const std::string& report) {
    std::filesystem::path rp(report);
    std::string dir = rp.has_parent_path() ? rp.parent_path().string() : ".";
    struct stat st{};
    return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && access(dir.c_str(), W_OK) == 0 &&
           !(stat(report.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
}

// What the engine reports while it runs, as lines on stderr.
class Printer {
public:
    Printer(const Options& o, bool status_line) : o_(o), status_line_(status_line) {}
    void operator()(const EngineEvent& e) const {
        // A message gets a line of its own: the status line is cleared, and redrawn next tick.
        if (status_line_ && (e.kind != EngineEvent::TargetAdded || (e.announce && !o_.quiet))) std::cerr << "\r\033[K";
        switch (e.kind) {
            case EngineEvent::TargetAdded:
                if (!e.announce || o_.quiet) break;
                std::cerr << "pybpfprof: profiling PID " << e.pid << " (" << e.comm << ", CPython " << e.python << ")";
                if (e.labels.count("pod")) std::cerr << " in pod " << e.labels.at("namespace") << "/" << e.labels.at("pod");
                if (e.labels.count("container")) std::cerr << ", container " << e.labels.at("container");
                std::cerr << "\n";
                break;
            case EngineEvent::CgroupWaiting:
                if (!o_.quiet)
                    std::cerr << "pybpfprof: " << e.message << "; waiting for it (up to " << o_.duration_s << " s)\n";
                break;
            case EngineEvent::CgroupWatching:
                if (o_.quiet) break;
                std::cerr << "pybpfprof: watching " << e.description << ": " << e.count << " CPython process"
                          << (e.count == 1 ? "" : "es") << " now";
                if (e.count == 0) std::cerr << "; none yet, waiting for one" << (o_.duration_s > 0 ? "" : " (Ctrl-C to stop)");
                std::cerr << "\n";
                break;
            case EngineEvent::AllPythonScanned:
                if (!o_.quiet)
                    std::cerr << "pybpfprof: profiling every CPython process: " << e.count
                              << " running now, new ones as they start" << (o_.duration_s > 0 ? "" : ". Ctrl-C to stop")
                              << ".\n";
                break;
            case EngineEvent::Warning: err("warning: " + e.message); break;
            case EngineEvent::Error: err(e.message); break;
            case EngineEvent::Debug: err("debug: " + e.message); break;
        }
    }

private:
    const Options& o_;
    bool status_line_;
};

void status_line(const Options& o, const Engine& engine, const Session& s, uint64_t start, bool final) {
    static uint64_t last = 0;
    uint64_t now = mono_ns();
    if (!final && now - last < 250000000ULL) return;
    last = now;
    char took[64];
    if (o.duration_s > 0) snprintf(took, sizeof took, "%.1fs of %gs", (now - start) / 1e9, o.duration_s);
    else snprintf(took, sizeof took, "%.1fs", (now - start) / 1e9);
    const size_t procs = s.targets_ever();  // profiled so far
    char buf[256];
    snprintf(buf, sizeof buf, "\r\033[Kpybpfprof: %s  %llu samples  %zu process%s  %llu lost", took,
             (unsigned long long)s.sample_count(), procs, procs == 1 ? "" : "es", (unsigned long long)engine.lost());
    std::cerr << buf << (final ? "\r\033[K" : "") << std::flush;
}

struct SessionFacts {
    size_t targets_ever;
    bool launched;
    std::set<pid_t> exited_early;
};

int finish(const Options& o, const Engine& engine, const SessionFacts& s, Profile& profile, const Exporter& ex,
           const std::string& out_path) {
    auto& run = profile.run;
    // A command, a machine or a cgroup with no CPython process in it: nothing to write, and
    // no empty file left behind.
    if (s.targets_ever == 0 && (s.launched || o.all_python || !o.cgroups.empty())) {
        err("no CPython process was found " +
            (s.launched ? std::string("in the launched command") : !o.cgroups.empty() ? "in " + run.target : "on this machine") +
            " during the " + std::to_string(static_cast<int>(run.duration_s() + 0.5)) + " s run; nothing was written");
        return kExitBadInput;
    }
    const ExportOptions options{o.group_by};
    int code = kExitOk;
    std::string error, written = out_path;
    auto fill = [&](std::ostream& f) { ex.write(profile, options, f); };
    const bool to_stdout = out_path == "-";
    if (to_stdout) {
        fill(std::cout);
        std::cout.flush();
        written = "standard output";
        if (!std::cout) {
            err("cannot write the profile to standard output (" + std::string(strerror(errno)) + ")");
            code = kExitError;
        }
    } else if (!write_file_atomically(out_path, fill, error)) {
        std::string fallback = engine.config().knobs.tmpdir + "/pybpfprof-fallback-" + timestamp_for_name() + "-" +
                               std::to_string(getpid()) + "." + ex.extension();
        std::string e2;
        if (!write_file_atomically(fallback, fill, e2)) {
            err("cannot write " + out_path + " (" + error + ") nor the fallback " + fallback + " (" + e2 +
                "); free some space or choose another -o path");
            return kExitError;
        }
        err("cannot write " + out_path + " (" + error + "); the samples were saved to " + fallback + " instead");
        written = fallback;
        code = kExitError;
    }
    bool report_written = false;
    if (!o.report.empty()) {
        if (write_file_atomically(o.report, [&](std::ostream& f) { f << render_html_report(profile, options); }, error))
            report_written = true;
        else {
            err("cannot write the report " + o.report + " (" + error + ")");
            if (!code) code = kExitError;
        }
    }

    // Per-target notes: idle targets are not errors.
    for (auto& [pid, p] : profile.processes)
        if (p.threads.empty() && !o.all_python)
            std::cerr << "pybpfprof: PID " << pid << " (" << p.comm << ") was not sampled during the " << std::fixed
                      << std::setprecision(1) << run.duration_s()
                      << " s run (it used less than one sample period of CPU); its profile is empty\n";
    for (pid_t p : s.exited_early) {
        auto it = profile.processes.find(static_cast<uint32_t>(p));
        uint64_t n = 0;
        if (it != profile.processes.end())
            for (auto& [_, t] : it->second.threads) n += t.samples.size();
        err("PID " + std::to_string(p) + " exited during the run; its " + std::to_string(n) + " samples are kept in " +
            written);
        if (!code) code = kExitTargetExited;
    }

    std::cerr << summary_line(profile, written) << "\n";
    if (run.truncated)
        std::cerr << "  " << run.truncated << " samples were deeper than " << run.max_depth
                  << " frames: their innermost " << run.max_depth
                  << " frames are kept, under a [truncated] frame where the outer ones were\n";
    std::cerr << bpf_cost_lines(run, engine.bpf_stats(), engine.config().knobs.debug);
    if (!to_stdout) std::cerr << "  " << ex.how_to_open(written) << "\n";
    if (report_written) std::cerr << "  report " << o.report << ": " << html_report_how_to_open(o.report) << "\n";
    if (!o.no_summary) std::cerr << top_functions(profile);
    return code;
}

}  // namespace

int run_record(const Options& o) {
    auto exporter = make_exporter(o.format);
    EngineConfig ec;
    ec.rate_hz = o.rate_hz;
    ec.max_depth = o.max_depth;
    ec.btf_path = o.btf_path;
    ec.node_root = o.node_root;
    ec.execs_only_in_cgroups = !o.cgroups.empty();
    ec.knobs = Knobs::from_environment();
    SessionConfig sc;
    sc.targets = {o.pids, o.all_python, o.cgroups, o.command};
    sc.duration_s = o.duration_s;

    std::string out_path, error;
    if (Status st = Engine::preflight(ec); !st.ok()) return err(st.message), exit_code(st);
    if (!resolve_output(o, *exporter, out_path, error)) return err(error), kExitBadInput;
    if (!o.report.empty() && !report_path_ok(o.report)) {
        err("cannot write the report " + o.report + ": " + std::filesystem::path(o.report).parent_path().string() +
            " is not a writable directory or the name is a directory; choose another --report path");
        return kExitBadInput;
    }
    // Bad targets are reported before anything is loaded.
    if (Status st = Engine::validate(ec, sc); !st.ok()) return err(st.message), exit_code(st);

    Status st;
    auto engine = Engine::start(ec, st);
    if (!engine) return err(st.message), exit_code(st);
    install_signals();
    const bool tty = isatty(2) && !o.quiet;
    Printer printer(o, tty);
    Session* s = engine->subscribe(sc, printer, st);
    if (!s) return err(st.message), exit_code(st);
    const uint64_t start = mono_ns();
    while (!s->done() && !g_stop_signal) {
        int n = engine->poll(100);
        if (n < 0 && n != -EINTR) {
            err(std::string("ring buffer poll failed: ") + strerror(-n));
            break;
        }
        if (tty && !g_stop_signal) status_line(o, *engine, *s, start, false);
    }
    if (tty) status_line(o, *engine, *s, start, true);
    SessionFacts facts{s->targets_ever(), s->launched(), s->exited_early()};
    Profile profile = engine->stop(s);
    return finish(o, *engine, facts, profile, *exporter, out_path);
}

}  // namespace pbp
