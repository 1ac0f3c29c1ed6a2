#include "cli/terminal.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <utility>

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
    // A message gets a line of its own: a status line drawn in place is cleared, and redrawn
    // next tick (one on the bottom row is not in the way).
    if (clear_first_ && (e.kind != EngineEvent::TargetAdded || (e.announce && !o_.quiet))) std::cerr << "\r\033[K";
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

void say_launched_still_running(const Options& o, pid_t pid) {
    // (Under -q too: it is a warning, not progress.)
    if (pid <= 0 || g_stop_signal == SIGINT) return;
    char by[64];
    if (g_stop_signal == SIGTERM) snprintf(by, sizeof by, "SIGTERM");
    else if (g_stop_signal == SIGHUP) snprintf(by, sizeof by, "SIGHUP");
    else snprintf(by, sizeof by, "-d %g", o.duration_s);
    err("PID " + std::to_string(pid) + " (the launched command) is still running: " + std::string(by) +
        " ended the profile, not the program; stop it with: kill " + std::to_string(pid));
}

std::string status_text(const Options& o, uint64_t elapsed_ns, uint64_t samples, size_t procs, uint64_t lost) {
    char took[64];
    if (o.duration_s > 0) snprintf(took, sizeof took, "%.1fs of %gs", elapsed_ns / 1e9, o.duration_s);
    else snprintf(took, sizeof took, "%.1fs", elapsed_ns / 1e9);
    char buf[256];
    snprintf(buf, sizeof buf, "%s  %llu samples  %zu process%s  %llu lost", took, (unsigned long long)samples, procs,
             procs == 1 ? "" : "es", (unsigned long long)lost);
    return buf;
}

namespace {

// What gives the terminal back, kept ready for the SIGTSTP handler (only async-signal-safe
// calls there). Written by the thread that draws, with the length cleared while it changes.
char g_give_back[64];
volatile sig_atomic_t g_give_back_len = 0;
// Set by SIGCONT (the row was given back at the stop) and by SIGWINCH (the terminal was resized):
// the row is taken again at once, without waiting for the next quarter second.
volatile sig_atomic_t g_retake = 0;

void on_winch(int) { g_retake = 1; }

void on_tstp(int) {
    const int saved = errno;
    if (g_give_back_len > 0) (void)!write(2, g_give_back, static_cast<size_t>(g_give_back_len));
    signal(SIGTSTP, SIG_DFL);
    raise(SIGTSTP);  // pending until this returns (blocked in its handler): then the default, a stop
    errno = saved;
}

void on_cont(int) {
    struct sigaction sa{};
    sa.sa_handler = on_tstp;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTSTP, &sa, nullptr);
    g_retake = 1;
}

void write_all_stderr(const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
        ssize_t n = write(2, s.data() + done, s.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        done += static_cast<size_t>(n);
    }
}

// The terminal's size, or {0, 0} when stderr's terminal does not know it (a pty made without
// one, as script(1) makes under a test runner, reports 0 rows).
std::pair<unsigned, unsigned> terminal_size() {
    struct winsize ws{};
    if (ioctl(2, TIOCGWINSZ, &ws) != 0) return {0, 0};
    return {ws.ws_row, ws.ws_col};
}

bool terminal_moves_its_cursor() {
    const char* term = getenv("TERM");
    return term && *term && strcmp(term, "dumb") != 0;
}

}  // namespace

StatusLine::StatusLine(const Options& o, bool enabled) : o_(o), enabled_(enabled) {
    if (!enabled_ || !terminal_moves_its_cursor()) return;
    auto [rows, cols] = terminal_size();
    if (rows < 3 || cols < 20) return;  // drawn in place
    cols_ = cols;
    take_bottom_row(rows);
    struct sigaction sa{};
    sa.sa_handler = on_tstp;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTSTP, &sa, nullptr);
    sa.sa_handler = on_cont;
    sigaction(SIGCONT, &sa, nullptr);
    // No SA_RESTART: the run's poll returns at once (EINTR) and the row is taken again then.
    sa.sa_flags = 0;
    sa.sa_handler = on_winch;
    sigaction(SIGWINCH, &sa, nullptr);
}

StatusLine::~StatusLine() {
    if (rows_ == 0) return;
    give_back();
    signal(SIGTSTP, SIG_DFL);
    signal(SIGCONT, SIG_DFL);
    signal(SIGWINCH, SIG_DFL);
}

// A new line first, so that the row the cursor is on stays where it is: on the bottom row the
// screen scrolls up by one and the cursor comes back up into the region (apt's progress bar
// does the same). DECSTBM homes the cursor, hence the save and restore around it. The cursor's
// row is then cleared: it is the blank row a program writes its next line on, except after a
// resize that a program's line raced, where it is the old status line.
void StatusLine::take_bottom_row(unsigned rows) {
    set_rows(rows);
    write_all_stderr("\n\0337\033[1;" + std::to_string(rows - 1) + "r\0338\033[1A\033[K");
}

// Keeps what gives the row back ready (for the SIGTSTP handler too): the whole screen scrolls
// again, and the status row is cleared.
void StatusLine::set_rows(unsigned rows) {
    rows_ = rows;
    g_give_back_len = 0;
    int n = snprintf(g_give_back, sizeof g_give_back, "\0337\033[r\033[%u;1H\033[K\0338", rows);
    g_give_back_len = n > 0 && static_cast<size_t>(n) < sizeof g_give_back ? n : 0;
}

void StatusLine::give_back() {
    if (g_give_back_len > 0) write_all_stderr(std::string(g_give_back, static_cast<size_t>(g_give_back_len)));
    g_give_back_len = 0;
}

void StatusLine::paint(uint64_t start, uint64_t samples, size_t procs, uint64_t lost) {
    std::string text = "pybpfprof: " + status_text(o_, mono_ns() - start, samples, procs, lost);
    if (rows_ == 0) {
        write_all_stderr("\r\033[K" + text);
        return;
    }
    if (text.size() >= cols_) text.resize(cols_ - 1);  // never wraps: the row is the screen's last
    write_all_stderr("\0337\033[" + std::to_string(rows_) + ";1H\033[K" + text + "\0338");
}

void StatusLine::draw(uint64_t start, uint64_t samples, size_t procs, uint64_t lost) {
    if (!enabled_) return;
    const uint64_t now = mono_ns();
    if (last_draw_ns_ && now - last_draw_ns_ < 250000000ULL && !g_retake) return;
    last_draw_ns_ = now;
    if (rows_ != 0) {
        auto [rows, cols] = terminal_size();
        // Taken again after Ctrl-Z and fg (the row was given back at the stop), or after a
        // resize: terminals reset the scroll region then (tmux, xterm) and may have moved the
        // cursor onto the new bottom row, so the region is reset here too, to be sure, and the
        // bottom row taken from where the cursor is now.
        if (rows < 3 || cols < 20) {  // too small for it now: no status line for the rest of the run
            give_back();
            enabled_ = false;
            return;
        }
        if (g_retake || rows != rows_) {
            g_retake = 0;
            write_all_stderr("\0337\033[r\0338");
            take_bottom_row(rows);
        }
        cols_ = cols;
    }
    paint(start, samples, procs, lost);
}

void StatusLine::finish() {
    if (!enabled_) return;
    if (rows_ == 0) write_all_stderr("\r\033[K");
    else give_back();
    enabled_ = false;
}

}  // namespace pbp
