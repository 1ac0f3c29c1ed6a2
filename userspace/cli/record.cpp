#include "cli/record.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/outputs.h"
#include "cli/terminal.h"
#include "engine/engine.h"
#include "export/exporter.h"
#include "export/html_report.h"
#include "sys/clock.h"

namespace pbp {

namespace {

int exit_code(const Status& s) { return s.failure == Failure::BadInput ? kExitBadInput : kExitError; }

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
    ec.native = o.native;
    ec.wall_sessions = o.mode == ProfileMode::Wall;  // the one session this engine will have
    SessionConfig sc;
    sc.targets.pids = o.pids;
    sc.targets.children = o.subprocesses;
    sc.targets.all_python = o.all_python;
    sc.targets.cgroups = o.cgroups;
    sc.targets.command = o.command;
    sc.duration_s = o.duration_s;
    sc.mode = o.mode;
    sc.min_block_ns = o.min_block_ns;
    sc.async_tasks = o.async_tasks;
    sc.native = o.native;

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

    // A refusal: the engine's debug lines first (PYBPFPROF_DEBUG=2: the verifier's log), then why.
    auto refused = [](const Status& st) {
        for (const std::string& line : st.debug) err("debug: " + line);
        err(st.message);
        return exit_code(st);
    };
    Status st;
    auto engine = Engine::start(ec, st);
    if (!engine) return refused(st);
    install_signals();
    StatusLine status(o, isatty(2) && !o.quiet);
    Printer printer(o, status.in_place());
    CommandStdoutToStderr redirect(out_path == "-" && !o.command.empty());
    Session* s = engine->subscribe(sc, printer, st);
    redirect.undo();
    if (!s) return refused(st);
    const uint64_t start = mono_ns();
    while (!s->done() && !g_stop_signal) {
        int n = engine->poll(100);
        if (n < 0 && n != -EINTR) {
            err(std::string("ring buffer poll failed: ") + strerror(-n));
            break;
        }
        if (!g_stop_signal) status.draw(start, s->sample_count(), s->processes_so_far(), engine->lost());
    }
    status.finish();
    // (Not when nothing was profiled: that run ends in a one-line error.)
    if (s->targets_ever() > 0) say_launched_still_running(o, s->launched_running());
    RunFacts facts{s->targets_ever(), s->launched(), o.all_python, !o.cgroups.empty(), s->exited_early(),
                   s->first_refusal(), o.duration_s};
    Profile profile = engine->stop(s);
    const RunOutcome outcome = run_outcome(profile, facts, engine->bpf_stats(), engine->config().knobs.debug);
    const ExportOptions options{o.group_by};
    return finish(
        o, outcome, *exporter, out_path, [&](std::ostream& f) { exporter->write(profile, options, f); },
        [&](std::ostream& f) { f << render_html_report(profile, options); }, engine->config().knobs.tmpdir);
}

}  // namespace pbp
