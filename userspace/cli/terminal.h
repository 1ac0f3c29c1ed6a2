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

// What the engine reports while it runs, as lines on stderr. clear_first: the live status line
// is drawn in place on the cursor's row (StatusLine::in_place), so it is cleared before a message.
class Printer {
public:
    Printer(const Options& o, bool clear_first) : o_(o), clear_first_(clear_first) {}
    void operator()(const EngineEvent& e) const;

private:
    const Options& o_;
    bool clear_first_;
};

// The live status line, when stderr is a terminal and not --quiet: the time against -d, the
// samples, the processes profiled so far and the samples lost, at most 4 times a second.
//
// On a terminal whose size is known (3 rows or more), the bottom row is kept for it: the rows
// above become the scroll region, so what the launched program prints, and this program's own
// messages, scroll there and never glue onto the status line. Each draw is one write(2), so a
// program writing at the same time cannot split it. A resize takes the new bottom row at once.
// Ctrl-Z gives the terminal back whole (fg takes the row again); Ctrl-C, the end of the run or an
// early return gives it back for good. Where the size is not
// known, the line is drawn in place with a carriage return, as before.
class StatusLine {
public:
    // Takes the bottom row now, before anything is launched: the row must be free when it is taken.
    StatusLine(const Options& o, bool enabled);
    ~StatusLine();
    StatusLine(const StatusLine&) = delete;
    StatusLine& operator=(const StatusLine&) = delete;

    bool enabled() const { return enabled_; }
    // Drawn where the cursor is (so a message must clear it first).
    bool in_place() const { return enabled_ && rows_ == 0; }
    void draw(uint64_t start_mono_ns, uint64_t samples, size_t processes, uint64_t lost);
    // Cleared, and the whole terminal given back; the run's summary follows.
    void finish();

private:
    void take_bottom_row(unsigned rows);
    void set_rows(unsigned rows);
    void give_back();
    void paint(uint64_t start, uint64_t samples, size_t processes, uint64_t lost);

    const Options& o_;
    bool enabled_;
    unsigned rows_ = 0;  // the terminal's rows while the bottom row is kept; 0: drawn in place
    unsigned cols_ = 0;
    uint64_t last_draw_ns_ = 0;
};

// A launched command that outlived the run (-d, or a signal to pybpfprof alone) goes on running,
// and its output may follow the shell's prompt: said on stderr, with how to stop it. Not after
// Ctrl-C, which the terminal sends the command too; said under -q too. pid 0: nothing to say.
void say_launched_still_running(const Options& o, pid_t pid);

// The text of the status line, without escapes: "1.2s of 10s  345 samples  2 processes  0 lost".
std::string status_text(const Options& o, uint64_t elapsed_ns, uint64_t samples, size_t processes, uint64_t lost);

}  // namespace pbp
