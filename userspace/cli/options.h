// Command-line options, parsed and validated (CLI11).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/profile.h"

namespace pbp {

// --min-block: its default and bounds (the agent's 'min_block_us' has the same ones).
constexpr uint64_t kDefaultMinBlockNs = 1'000'000;  // 1 ms
constexpr uint64_t kMinMinBlockNs = 10'000;         // 10 us
constexpr uint64_t kMaxMinBlockNs = 1'000'000'000;  // 1 s
// The shortest -d: a shorter run ends before a launched Python has started, or before one
// sample period of 99 Hz has passed, and would blame the target for finding nothing.
constexpr double kMinDurationS = 0.1;

struct Options {
    std::vector<pid_t> pids;
    bool subprocesses = false;         // --subprocesses: the --pid processes' descendants too
    bool all_python = false;
    std::vector<std::string> cgroups;  // --cgroup: cgroup paths, pod UIDs, namespace/name, container IDs
    std::string node_root = "/";       // where the node's /var/log/pods etc. are (agent containers: /host)
    std::string group_by = "process";  // "process" or "pod": how outputs group the processes
    std::vector<std::string> command;  // after "--"
    double rate_hz = 99;
    double duration_s = 0;  // 0 = until Ctrl-C / targets exit
    std::string output;     // "" = pybpfprof-<target>-<timestamp>.<ext>
    std::string format = "speedscope";
    std::string report;     // --report FILE: the HTML report too, next to the -o output
    int max_depth = 0;      // 0 = as deep as the kernel allows
    ProfileMode mode = ProfileMode::Cpu;  // --mode cpu|wall|gil
    uint64_t min_block_ns = kDefaultMinBlockNs;  // --min-block (wall only), whole microseconds
    bool async_tasks = false;  // --async: samples under their asyncio task chain (3.14+)
    bool native = false;       // --native: kernel and native frames merged with the Python frames
    std::string btf_path;
    bool quiet = false;
    bool no_summary = false;
};

// Parses argv. On --help/--version prints and returns exit code 0 in 'exit_code' with
// false; on bad input prints a one-line error and returns false with a non-zero code.
bool parse_options(int argc, char** argv, Options& opts, int& exit_code);

// The number parsing both command lines share (pybpfprof's and pybpfprof-py-spy's).
// A finite decimal number, the whole string ("2.5", "1e3"; not " 2", "2s", "inf").
bool parse_double(const std::string& s, double& out);
// A whole number of digits only, from lo to hi.
bool parse_whole(const std::string& s, long long lo, long long hi, long long& out);
// One process ID, given as opt's value ("--pid", "-p/--pid"): a positive whole number below
// the kernel's pid_max, or false + a one-line error (naming pid_max when it is above).
bool parse_pid(const std::string& opt, const std::string& s, pid_t& out, std::string& error);
// --pid values (pybpfprof's and pybpfprof dump's): process IDs, or false + a one-line error.
bool parse_pids(const std::vector<std::string>& given, std::vector<pid_t>& out, std::string& error);
std::string lower(std::string s);
// A duration with its unit, as --min-block takes it: a number and one of us (or µs), ms, s
// ("500us", "1ms", "0.5ms", "0.002s"), rounded to whole microseconds; false when the text is
// not one, or has no unit (a bare "1" would be ambiguous between ms and s).
bool parse_duration_with_unit(const std::string& s, uint64_t& ns);

}  // namespace pbp
