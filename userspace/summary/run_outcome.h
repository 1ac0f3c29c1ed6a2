// What a finished run says to the user, computed from its profile where the profile is (the
// CLI, or the agent for its clients) and printed where the files are written (the CLI, or the
// agent's client): the text depends on the path finally written, which only the writer knows.
// It crosses the agent's socket as JSON, so a run through the agent reads exactly as a root
// run does.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/profile.h"
#include "summary/text_summary.h"

namespace pbp {

// Facts of the session the profile alone does not hold.
struct RunFacts {
    size_t targets_ever = 0;
    bool launched = false;     // a command was launched
    bool all_python = false;   // --all-python (idle processes are not worth a note)
    bool cgroups = false;      // --cgroup
    std::set<pid_t> exited_early;
    // Why the first process found but not profiled was refused (Session::first_refusal), or "".
    std::string first_refusal;
    // The duration asked (-d, or the agent's cap), 0 for none: a run that reached it lasted it.
    double duration_s = 0;
};

struct RunOutcome {
    // Not empty: no CPython process was found, nothing is written (exit 2).
    std::string nothing_found;
    std::string counts;                // after "Wrote PATH": ": 512 samples, 1 process, ..."
    uint64_t truncated = 0;
    int max_depth = 0;
    std::string bpf_cost;              // bpf_cost_lines(), may be empty
    double duration_s = 0;             // the run's: as asked when it ran that long, else as measured
    // Targets with no sample, and the CPU time each used during the run (from its resource
    // readings; -1: not known), against the sampling period.
    struct NotSampled {
        pid_t pid = 0;
        std::string comm;
        double cpu_s = -1;
    };
    std::vector<NotSampled> not_sampled;
    double rate_hz = 0;                // the run's -r
    std::vector<std::pair<pid_t, uint64_t>> exited_early;    // pid, its samples kept
    std::string top;                   // top_functions()
    ModeTotals mode;                   // the mode, time on and off CPU, GIL states (mode_lines())

    // The lines before "open it with", for the file written at 'written'.
    std::string text(const std::string& written) const;
};

// A run's length in seconds as a person says it: two significant digits, whole seconds from
// 10 s up, no trailing zeros ("1.5", "10", "0.3", "0.042", "125").
std::string run_seconds_text(double s);

// The CPU time a process used over its resource readings, -1 when not known.
double cpu_seconds(const std::vector<ResourcePoint>& points);
// Why a target has no sample, for "was not sampled during the 1.1 s run (...)": it used less
// than one sample period of CPU (with how much, when known), or it used more and no sample
// fell in it (a low -r).
std::string not_sampled_why(double cpu_s, double rate_hz);

RunOutcome run_outcome(const Profile& profile, const RunFacts& facts, const std::vector<uint64_t>& bpf_stats,
                       int debug, bool with_bpf_cost = true);

nlohmann::json to_json(const RunOutcome& o);
// false + error when j is not a RunOutcome (a client reading the agent's answer).
bool from_json(const nlohmann::json& j, RunOutcome& out, std::string& error);

}  // namespace pbp
