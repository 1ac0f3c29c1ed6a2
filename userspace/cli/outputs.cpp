#include "cli/outputs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/record.h"
#include "cli/terminal.h"
#include "export/html_report.h"
#include "export/output_file.h"

namespace pbp {

namespace {

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

}  // namespace

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

CommandStdoutToStderr::CommandStdoutToStderr(bool on) {
    if (!on) return;
    std::cout.flush();
    saved_ = fcntl(1, F_DUPFD_CLOEXEC, 3);  // close-on-exec: the command does not get it
    if (saved_ >= 0 && dup2(2, 1) < 0) {
        close(saved_);
        saved_ = -1;
    }
}

void CommandStdoutToStderr::undo() {
    if (saved_ < 0) return;
    dup2(saved_, 1);
    close(saved_);
    saved_ = -1;
}

bool report_path_ok(const std::string& report) {
    std::filesystem::path rp(report);
    std::string dir = rp.has_parent_path() ? rp.parent_path().string() : ".";
    struct stat st{};
    return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && access(dir.c_str(), W_OK) == 0 &&
           !(stat(report.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
}

namespace {

// Writes fill to path ("-": standard output), or else to a fallback file in tmpdir, named on
// stderr: samples are never lost. what: "the report", or "" for the profile (named by its path;
// "the profile to standard output"). written gets where it went ("standard output", path or the
// fallback); false when it could not go where it was asked to (or nowhere: written is then
// empty).
bool write_or_fallback(const std::string& what, const std::string& path, const std::string& extension,
                       const Fill& fill, const std::string& tmpdir, std::string& written) {
    std::string error;
    if (path == "-") {
        fill(std::cout);
        std::cout.flush();
        written = "standard output";
        if (std::cout) return true;
        error = strerror(errno);
    } else {
        written = path;
        if (write_file_atomically(path, fill, error)) return true;
    }
    const std::string where = path == "-"      ? (what.empty() ? "the profile" : what) + " to standard output"
                              : what.empty() ? path
                                             : what + " " + path;
    std::string fallback = tmpdir + "/pybpfprof-fallback-" + timestamp_for_name() + "-" + std::to_string(getpid()) +
                           "." + extension, e2;
    if (!write_file_atomically(fallback, fill, e2)) {
        err("cannot write " + where + " (" + error + ") nor the fallback " + fallback + " (" + e2 +
            "); free some space or choose another path");
        written.clear();
        return false;
    }
    // (The fix, when a file was asked for: the cause may pass, the fallback can be moved there.)
    err("cannot write " + where + " (" + error + "); the samples were saved to " + fallback + " instead" +
        (path == "-" ? std::string() : "; once " + path + " can be written: mv " + fallback + " " + path));
    written = fallback;
    return false;
}

}  // namespace

int finish(const Options& o, const RunOutcome& outcome, const Exporter& ex, const std::string& out_path,
           const Fill& fill, const Fill& fill_report, const std::string& tmpdir) {
    if (!outcome.nothing_found.empty()) {
        err(outcome.nothing_found);
        return kExitBadInput;
    }
    int code = kExitOk;
    std::string written;
    if (!write_or_fallback("", out_path, ex.extension(), fill, tmpdir, written)) {
        if (written.empty()) return kExitError;
        code = kExitError;
    }
    std::string report_written;
    if (!o.report.empty() && !write_or_fallback("the report", o.report, "html", fill_report, tmpdir, report_written))
        code = kExitError;
    std::cerr << outcome.text(written);
    if (!outcome.exited_early.empty() && !code) code = kExitTargetExited;
    if (written != "standard output") std::cerr << "  " << ex.how_to_open(written) << "\n";
    if (report_written == "standard output") std::cerr << "  report written to standard output\n";
    else if (!report_written.empty())
        std::cerr << "  report " << report_written << ": " << html_report_how_to_open(report_written) << "\n";
    if (!o.no_summary) std::cerr << outcome.top;
    return code;
}

}  // namespace pbp
