// A synthetic profile with the shape of a real --all-python run of one application, for the
// exporters' size and speed (tools/bench/export_bench.cpp, tests/unit/test_html_report.cpp):
// per process a main thread busy 90% of the time and two helper threads (10% and 3%); ~400
// functions in 40 files; a pool of 6000 distinct stacks (depth 6-40, leaf and call-site lines
// vary) drawn with a Zipf-like weight, 1 / (1 + rank)^1.1, whose ranks rotate every 5 minutes;
// CPU/RSS readings at 1 Hz. Every sample is on CPU and weighs one period. Deterministic (seeded).
//
// Defined in synthetic_profile.cpp, which is compiled with -O2 in every build (the tests' own
// code is -O0): drawing an hour-long 100-process run's 37 million samples took 17 s at -O0
// (33 s with ASan), 1-2 s at -O2.
#pragma once
#include <cstdint>

#include "engine/profile.h"

namespace pbp::test {

Profile synthetic_profile(int procs, double seconds, double rate, uint64_t start_mono_ns = 1'000'000'000'000ULL);

}  // namespace pbp::test
