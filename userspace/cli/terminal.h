// The terminal while a run goes on, the same for a local engine and through the agent:
// the engine's events as lines on stderr, the live status line, and the stop signals.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "cli/options.h"
#include "engine/engine.h"

namespace pbp {

// The signal that asked the run to stop (SIGINT, SIGTERM, SIGHUP), or 0.
extern std::atomic<int> g_stop_signal;
// Those signals set g_stop_signal (no SA_RESTART: a blocking poll returns EINTR); SIGPIPE ignored.
void install_signals();

// "pybpfprof: msg" on stderr.
void err(const std::string& msg);

// What the engine reports while it runs, as lines on stderr.
class Printer {
public:
    Printer(const Options& o, bool status_line) : o_(o), status_line_(status_line) {}
    void operator()(const EngineEvent& e) const;

private:
    const Options& o_;
    bool status_line_;
};

// The live status line (at most 4 times a second; final: drawn once more, then cleared).
void status_line(const Options& o, uint64_t start_mono_ns, uint64_t samples, size_t processes, uint64_t lost,
                 bool final);

}  // namespace pbp
