// pybpfprof's own profile format, "pbp" (NAME.pbp): everything a Profile holds, so that the
// profile read back is the profile written (read_raw of write_raw(p) == p). It is what
// `pybpfprof merge` reads and what crosses machines (the agent, Dask's RPC) before the
// profiles are merged into one report. Layout and rules: docs/raw-format.md.
//
// The writer (raw.cpp, the "pbp" exporter) and the reader (raw_reader.cpp) sit side by
// side on purpose: the layout is defined once, here and in the doc, and both halves change
// together in one commit.
//
// A file is gzip-compressed JSON: {"format":"pybpfprof","version":1,"run":{...},...}.
// The reader takes it gzipped or not, and treats it as untrusted: it comes from other
// machines. Every index is checked against its table, every number against its field's
// range, sizes are bounded (RawLimits), and what is wrong is one line naming the field:
// "processes[2].threads[0].stack[17]: 912 is not a stack index (the file has 40 stacks)".
#pragma once
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

#include "engine/profile.h"

namespace pbp {

inline constexpr const char* kRawFormatName = "pybpfprof";  // the "format" field
// The "version" field: the newest layout this pybpfprof reads and writes. Version 2 is
// version 1 and task spans ("tasks", engine/tasks.h); version 3 is version 2 and the wall/GIL
// fields (the run's mode and min_block_ns; each sample's gil, wait and aggregate); version 4 is
// version 3 and buckets (each sample's count and span_ns: the older samples of a run longer
// than its sample window, engine/aggregator.h); version 5 is version 4 and each frame's kind
// (Python, native, kernel) and library (--native); version 6 is version 5 and each process's
// execd (its program ended by an exec into another). A profile is written in the oldest version
// that holds it whole (1 without tasks or wall/GIL fields), and every older version is read.
inline constexpr int kRawFormatVersion = 6;

// The JSON text of p (not compressed).
std::string raw_json(const Profile& p);
// The file's bytes: raw_json(p), gzipped, streamed to out as they are made (the JSON is
// never all in memory). Throws std::runtime_error when zlib fails.
void write_raw(const Profile& p, std::ostream& out);

// Reading holds the JSON text, its parsed document (~16 bytes per number) and the Profile
// at once: a file over these limits is refused before it is parsed.
struct RawLimits {
    size_t max_bytes = size_t{1} << 31;  // the JSON text, after decompression
    size_t max_values = 200'000'000;     // numbers, strings, ... in it (a sample is 3)
};

// Why read_raw failed.
enum class RawFailure {
    None,
    NotRaw,    // another format (speedscope, HTML, pprof, folded stacks, ...) or not a profile at all
    TooNew,    // a pybpfprof file of a newer format version
    Invalid,   // a pybpfprof file, but truncated, corrupt or inconsistent
    TooLarge,  // over limits.max_bytes
};

// Reads a .pbp file's bytes (gzipped or plain JSON) into out. false + one line in error
// (never throws, except std::bad_alloc); out is then left empty.
bool read_raw(std::string_view data, Profile& out, std::string& error);
bool read_raw(std::string_view data, Profile& out, std::string& error, const RawLimits& limits,
              RawFailure* failure = nullptr);

}  // namespace pbp
