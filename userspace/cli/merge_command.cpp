#include "cli/merge_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli/option_values.h"
#include "cli/options.h"
#include "cli/outputs.h"
#include "cli/record.h"
#include "cli/terminal.h"
#include "engine/knobs.h"
#include "engine/merge.h"
#include "engine/tasks.h"
#include "export/exporter.h"
#include "export/html_report.h"
#include "export/raw.h"
#include "summary/run_outcome.h"

namespace pbp {

namespace {

constexpr const char* kMergeExitCodes =
    "Exit codes: 0 ok; 1 the output could not be written (the merged profile then goes to a fallback file named on\n"
    "stderr); 2 bad input (arguments, an input that cannot be read or is not in pybpfprof's own format, profiles\n"
    "that cannot be lined up, an output directory that does not exist).";

constexpr const char* kLabelSyntax =
    "[N:]KEY=VALUE, N the input's position (1 = the first file; without N: every input), KEY letters, digits, "
    "'_', '.' or '-' (e.g. --label 1:role=scheduler)";

// The whole file, or false + the reason.
bool slurp(const std::string& path, std::string& out, std::string& error) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        error = strerror(errno ? errno : ENOENT);
        return false;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) {
        error = strerror(errno ? errno : EIO);
        return false;
    }
    out = std::move(ss).str();
    return true;
}

}  // namespace

bool parse_merge_label(const std::string& spec, size_t n_inputs, std::vector<std::map<std::string, std::string>>& labels,
                       std::string& error) {
    auto fail = [&](const std::string& why) {
        error = "--label " + spec + ": " + why;
        return false;
    };
    labels.resize(n_inputs);
    std::string rest = spec;
    size_t first = 0, last = n_inputs;  // the inputs it applies to: [first, last)
    size_t digits = 0;
    while (digits < rest.size() && isdigit(static_cast<unsigned char>(rest[digits]))) digits++;
    if (digits && digits < rest.size() && rest[digits] == ':') {
        if (digits > 6) return fail("there is no input " + rest.substr(0, digits) + "; " + kLabelSyntax);
        size_t n = std::stoul(rest.substr(0, digits));
        if (n < 1 || n > n_inputs)
            return fail("there is no input " + std::to_string(n) + " (inputs are 1 to " + std::to_string(n_inputs) +
                        ")");
        first = n - 1, last = n;
        rest = rest.substr(digits + 1);
    }
    size_t eq = rest.find('=');
    if (eq == std::string::npos || eq == 0) return fail(std::string("must be ") + kLabelSyntax);
    std::string key = rest.substr(0, eq), value = rest.substr(eq + 1);
    bool key_ok = isalpha(static_cast<unsigned char>(key[0])) || key[0] == '_';
    for (char c : key) key_ok &= isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
    if (!key_ok) return fail("the key '" + key + "' must start with a letter or '_' and hold only letters, digits, '_', '.' or '-'");
    if (value.empty()) return fail("the value is empty; " + std::string(kLabelSyntax));
    for (size_t i = first; i < last; i++) labels[i][key] = value;
    return true;
}

int merge_command(int argc, char** argv) {
    CLI::App app{"pybpfprof merge: merge profiles in pybpfprof's own format (record them with -f pbp or -o NAME.pbp),\n"
                 "taken on one machine or several, into one profile in any format. Each profile is placed by its\n"
                 "wall-clock start time, so runs on different machines line up; every process keeps its real PID\n"
                 "and is labelled with its machine's host name.",
                 "pybpfprof merge"};
    app.footer(kMergeExitCodes);
    app.formatter(help_formatter(false));
    Options o;
    std::vector<std::string> inputs, label_specs;
    std::string format;
    std::string formats;
    for (auto& n : exporter_names()) formats += (formats.empty() ? "" : "|") + n;
    OptionValues values;  // what each option wants, for the one given none
    // Both needed, and checked after the parse: CLI11's "inputs is required" is no sentence.
    app.add_option("inputs", inputs, "Profiles in pybpfprof's own format (.pbp), gzipped or not");
    values.add(app.add_option("-o,--output", o.output, "Output file, or - for standard output (required)"),
               "a file name, or - for standard output", "merged.html");
    values.add(app.add_option("-f,--format", format,
                              "Output format: " + formats + " (default: from the -o extension; speedscope for -o -)"),
               "an output format, one of " + formats, "html");
    values
        .add(app.add_option("--label", label_specs,
                            std::string("Label every process of an input (repeatable): ") + kLabelSyntax),
             "a label, [N:]KEY=VALUE", "1:role=scheduler")
        ->allow_extra_args(false);  // one value each: the files may follow
    std::string target;
    values.add(app.add_option("--target", target,
                              "What the merged run is called (default: from the inputs and their labels)"),
               "a name for the merged run", "nightly-etl");
    values.add(app.add_option("--group-by", o.group_by, "Group outputs by process (default) or by pod"),
               "process or pod", "pod")
        ->check(group_by_check());
    values.add(app.add_option("--report", o.report, "Also write the HTML performance report to this file"),
               "a file name for the HTML report", "report.html");
    std::vector<std::string> task_files;
    values
        .add(app.add_option("--tasks", task_files,
                            "A task file (\"pybpfprof-tasks\", written by pybpfprof.dask: Dask's task stream) to "
                            "attach: each task's spans go to the process labelled worker=<its worker> (else its pid) "
                            "and its thread (repeatable; docs/dask.md)"),
             "a task file written by pybpfprof.dask", "tasks.json")
        ->allow_extra_args(false);
    app.add_flag("--no-summary", o.no_summary, "Do not print the top-functions summary");
    const std::vector<std::string> words(argv + 1, argv + argc);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        err("merge: " + values.parse_error(app, e, words, "pybpfprof merge"));
        return kExitBadInput;
    }
    if (std::string e = values.value_taken_from_an_option(app, words, "pybpfprof merge"); !e.empty()) {
        err("merge: " + e);
        return kExitBadInput;
    }
    if (o.output.empty()) {
        err("merge: -o is needed: the file to write the merged run to (e.g. pybpfprof merge -o merged.html a.pbp "
            "b.pbp)");
        return kExitBadInput;
    }
    if (inputs.empty()) {
        err("merge: no runs to merge; give one or more of pybpfprof's .pbp files (e.g. pybpfprof merge -o "
            "merged.html a.pbp b.pbp)");
        return kExitBadInput;
    }

    if (!format.empty()) {
        const auto names = exporter_names();
        if (std::find(names.begin(), names.end(), lower(format)) == names.end()) {
            err("merge: -f " + format + " is not an output format; choose one of " + formats);
            return kExitBadInput;
        }
        o.format = lower(format);
    } else if (o.output != "-") {
        o.format = format_for_path(o.output);
        if (o.format.empty()) {
            err("merge: cannot tell the output format from the name " + o.output + "; give -f " + formats +
                ", or end the name in " + known_extensions_text());
            return kExitBadInput;
        }
    }
    MergeOptions mo;
    mo.target = target;
    std::string error;
    for (const std::string& spec : label_specs)
        if (!parse_merge_label(spec, inputs.size(), mo.labels, error)) return err("merge: " + error), kExitBadInput;

    auto exporter = make_exporter(o.format);
    std::string out_path;
    if (!resolve_output(o, *exporter, out_path, error)) return err("merge: " + error), kExitBadInput;
    if (!o.report.empty() && !report_path_ok(o.report)) {
        err("merge: cannot write the report " + o.report +
            ": its directory is not writable or the name is a directory; choose another --report path");
        return kExitBadInput;
    }

    std::vector<Profile> profiles;
    profiles.reserve(inputs.size());
    for (const std::string& path : inputs) {
        std::string data;
        if (!slurp(path, data, error)) return err("merge: cannot read " + path + " (" + error + ")"), kExitBadInput;
        Profile p;
        RawFailure why = RawFailure::None;
        if (!read_raw(data, p, error, RawLimits{}, &why)) {
            if (why == RawFailure::NotRaw)
                err("merge: " + path + " is " + error +
                    "; merge reads pybpfprof's own format (-f pbp): record with -o NAME.pbp");
            else
                err("merge: " + path + ": " + error);
            return kExitBadInput;
        }
        profiles.push_back(std::move(p));
    }

    Profile merged = merge_profiles(std::move(profiles), mo, error);
    if (!error.empty()) return err("merge: " + error), kExitBadInput;
    for (const std::string& path : task_files) {
        std::string text;
        if (!slurp(path, text, error)) return err("merge: cannot read " + path + " (" + error + ")"), kExitBadInput;
        AttachedTasks attached;
        if (!attach_tasks(merged, text, attached, error)) return err("merge: " + path + ": " + error), kExitBadInput;
        for (const std::string& w : attached.warnings) err("merge: warning: " + path + ": " + w);
    }

    RunFacts facts;
    facts.targets_ever = merged.processes.size();
    facts.all_python = true;
    const RunOutcome outcome = run_outcome(merged, facts, {}, 0, /*with_bpf_cost=*/false);
    const ExportOptions options{o.group_by};
    return finish(
        o, outcome, *exporter, out_path, [&](std::ostream& f) { exporter->write(merged, options, f); },
        [&](std::ostream& f) { f << render_html_report(merged, options); }, Knobs::from_environment().tmpdir);
}

}  // namespace pbp
