#include "cli/outputs.h"

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

bool report_path_ok(const std::string& report) {
    std::filesystem::path rp(report);
    std::string dir = rp.has_parent_path() ? rp.parent_path().string() : ".";
    struct stat st{};
    return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && access(dir.c_str(), W_OK) == 0 &&
           !(stat(report.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
}

int finish(const Options& o, const RunOutcome& outcome, const Exporter& ex, const std::string& out_path,
           const Fill& fill, const Fill& fill_report, const std::string& tmpdir) {
    if (!outcome.nothing_found.empty()) {
        err(outcome.nothing_found);
        return kExitBadInput;
    }
    int code = kExitOk;
    std::string error, written = out_path;
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
        std::string fallback = tmpdir + "/pybpfprof-fallback-" + timestamp_for_name() + "-" +
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
        if (write_file_atomically(o.report, fill_report, error))
            report_written = true;
        else {
            err("cannot write the report " + o.report + " (" + error + ")");
            if (!code) code = kExitError;
        }
    }
    std::cerr << outcome.text(written);
    if (!outcome.exited_early.empty() && !code) code = kExitTargetExited;
    if (!to_stdout) std::cerr << "  " << ex.how_to_open(written) << "\n";
    if (report_written) std::cerr << "  report " << o.report << ": " << html_report_how_to_open(o.report) << "\n";
    if (!o.no_summary) std::cerr << outcome.top;
    return code;
}

}  // namespace pbp
