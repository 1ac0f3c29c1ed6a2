// The files a run writes, the same for a local engine and through the agent: the -o path
// (or its default name) checked before anything starts, then the profile and the report
// written atomically (to a fallback file if that fails: samples are never lost), and the
// end-of-run lines. Returns the exit code.
#pragma once
#include <functional>
#include <ostream>
#include <string>

#include "cli/options.h"
#include "export/exporter.h"
#include "summary/run_outcome.h"

namespace pbp {

// The -o path (or the default name), checked before anything is loaded.
bool resolve_output(const Options& o, const Exporter& ex, std::string& path, std::string& error);
// --report's directory exists and is writable, and the name is not a directory.
bool report_path_ok(const std::string& report);

// -o - with a launched command: the command's standard output goes to standard error, so that
// standard output holds the profile alone. Made before the command is forked (its fd 1 is then
// pybpfprof's fd 2), undone once it is (pybpfprof's own fd 1 is the caller's again).
class CommandStdoutToStderr {
public:
    explicit CommandStdoutToStderr(bool on);
    void undo();
    ~CommandStdoutToStderr() { undo(); }
    CommandStdoutToStderr(const CommandStdoutToStderr&) = delete;
    CommandStdoutToStderr& operator=(const CommandStdoutToStderr&) = delete;

private:
    int saved_ = -1;
};

using Fill = std::function<void(std::ostream&)>;
// Writes the profile (fill) to out_path ("-": standard output) and the report (fill_report,
// when --report), then prints the outcome's lines, how to open the files and the top
// functions. tmpdir: where the fallback file goes.
int finish(const Options& o, const RunOutcome& outcome, const Exporter& ex, const std::string& out_path,
           const Fill& fill, const Fill& fill_report, const std::string& tmpdir);

}  // namespace pbp
