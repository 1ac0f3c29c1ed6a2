// `pybpfprof merge FILE.pbp... -o OUT [-f FORMAT] [--label [N:]KEY=VALUE]...`: profiles in
// pybpfprof's own format (-f pbp), from one machine or several, merged on one clock
// (engine/merge.h) and written in any output format, atomically as a recorded profile is.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace pbp {

// argv[0] is "merge". Returns the exit code: 0 ok; 1 the output could not be written (the
// merged profile then goes to a fallback file named on stderr); 2 bad input.
int merge_command(int argc, char** argv);

// One --label: "[N:]KEY=VALUE" for n_inputs inputs, into labels (one map per input; without
// N: every input). false + a one-line error.
bool parse_merge_label(const std::string& spec, size_t n_inputs, std::vector<std::map<std::string, std::string>>& labels,
                       std::string& error);

}  // namespace pbp
