#include "cli/terminal.h"

#include <signal.h>

#include <cstdio>
#include <iostream>

#include "sys/clock.h"

namespace pbp {

std::atomic<int> g_stop_signal{0};

namespace {
void on_signal(int sig) { g_stop_signal = sig; }
}  // namespace

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

void err(const std::string& msg) { std::cerr << "pybpfprof: " << msg << "\n"; }

void Printer::operator()(const EngineEvent& e) const {
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
                std::cerr << "pybpfprof: profiling "
                          << (e.description.empty() ? std::string("every CPython process") : e.description) << ": " << e.count
                          << " running now, new ones as they start" << (o_.duration_s > 0 ? "" : ". Ctrl-C to stop")
                          << ".\n";
            break;
        case EngineEvent::Warning: err("warning: " + e.message); break;
        case EngineEvent::Error: err(e.message); break;
        case EngineEvent::Debug: err("debug: " + e.message); break;
    }
}

void status_line(const Options& o, uint64_t start, uint64_t samples, size_t procs, uint64_t lost, bool final) {
    static uint64_t last = 0;
    uint64_t now = mono_ns();
    if (!final && now - last < 250000000ULL) return;
    last = now;
    char took[64];
    if (o.duration_s > 0) snprintf(took, sizeof took, "%.1fs of %gs", (now - start) / 1e9, o.duration_s);
    else snprintf(took, sizeof took, "%.1fs", (now - start) / 1e9);
    char buf[256];
    snprintf(buf, sizeof buf, "\r\033[Kpybpfprof: %s  %llu samples  %zu process%s  %llu lost", took,
             (unsigned long long)samples, procs, procs == 1 ? "" : "es", (unsigned long long)lost);
    std::cerr << buf << (final ? "\r\033[K" : "") << std::flush;
}

}  // namespace pbp
