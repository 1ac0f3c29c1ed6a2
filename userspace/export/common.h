// What the exporters and the end-of-run summary share: gzip, the sampling period, time
// formatting, per-stack totals and the function table (self/total time per function).
// Every total here sums the samples' weights (Sample::weight_ns): one sample is not one
// period.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "engine/profile.h"

namespace pbp {

// gzip (RFC 1952) of data at zlib's default level, as a .pb.gz is; throws
// std::runtime_error when zlib fails.
std::string gzip(std::string_view data);
// An output stream that gzips what is written to it (RFC 1952, zlib's default level) as it
// comes, 64 KiB at a time, writing the compressed bytes to out: a large document is never held
// whole (the .pbp file; the HTML report's embedded speedscope JSON, 28 MB after a 1-hour run at
// 999 Hz, BENCHMARKS.md). finish() ends the gzip member; it throws std::runtime_error when
// zlib failed. Errors writing to out are out's to report (its state), as for any stream.
class GzipStream : public std::ostream {
public:
    explicit GzipStream(std::ostream& out);
    ~GzipStream() override;
    void finish();
    uint64_t bytes_in() const;  // written so far, before compression

private:
    class Buf;
    std::unique_ptr<Buf> buf_;
};
// Standard base64 (RFC 4648, with padding).
std::string base64(std::string_view in);

// The run's sampling period: period_ns, else 1/rate_hz, else 1 ms (an unknown rate).
uint64_t sampling_period_ns(const RunInfo& run);

// Exact decimal seconds of a nanosecond count: "0.01010101", "-1.5", "3".
std::string decimal_seconds(int64_t ns);

// UTC with milliseconds: "2026-11-21T11:38:00.123Z".
std::string iso8601_utc_ms(int64_t unix_ns);

// A wait reason's short name, for labels and keys: "sleep", "io", "gil", "runnable"; "" for
// None (an on-CPU sample).
const char* wait_name(WaitReason w);

// True for the synthetic leaf that ends an off-CPU sample's stack (wait_leaf(): "[sleeping]",
// "[waiting for I/O]", ...): the outputs that draw frames draw these apart.
bool is_wait_leaf(const Frame& f);

// How the outputs name native and kernel frames (--native, issue 17; docs/native-frames.md):
// a kernel frame is "[k] name" (as perf and /proc/kallsyms readers show them; a name that
// already starts with "[k] " is kept), any other frame its name ("?" for none).
std::string frame_display_name(const Frame& f);
// The last component of a library's path: "libc.so.6" for "/usr/lib/x86_64-linux-gnu/libc.so.6",
// "[kernel]" for "[kernel]".
std::string library_basename(const std::string& path);
// A frame as one line of text, for folded stacks and the SVG flame graph:
//   Python  "qualname (file:line)"
//   native  "symbol [libc.so.6]", "symbol (source.c:line) [lib.so]" with debug information,
//           "__vdso_clock_gettime [vdso]" (a library named in brackets, "[vdso]", is not bracketed again)
//   kernel  "vfs_read_[k]" (perf's and flamegraph.pl's kernel annotation; --color=java
//           colours it as kernel)
//   marker  "[truncated]" (a synthetic frame: its name)
std::string frame_label(const Frame& f);
// The short tag of a frame's kind: "" for Python, "native", "kernel".
const char* frame_kind_tag(FrameKind k);

// True when the profile holds an off-CPU sample.
bool has_off_cpu(const Profile& profile);

// True when every sample of the profile weighs exactly weight_ns (true for no samples).
bool every_sample_weighs(const Profile& profile, uint64_t weight_ns);

// What the samples of one stack add up to.
struct StackTotal {
    uint64_t samples = 0;
    uint64_t cpu_ns = 0;      // weights of the SampleKind::Cpu samples
    uint64_t off_cpu_ns = 0;  // weights of the SampleKind::OffCpu samples
    uint64_t weight_ns() const { return cpu_ns + off_cpu_ns; }
    void add(const Sample& s);
};

// One thread's samples by stack (StackTable index), in stack order.
std::map<uint32_t, StackTotal> thread_stack_totals(const ThreadProfile& thread);

// The weight of every sample of the profile, by stack (indexed like the StackTable; samples
// whose stack is out of range are left out).
std::vector<uint64_t> stack_weights(const Profile& profile);

// The profile's functions: one per (name, file, synthetic, kind, library) of the frame table, in order of
// first appearance ("?" for an empty name, no file for a synthetic frame).
struct Function {
    std::string name;  // frame_display_name: "[k] name" for a kernel function
    std::string file;
    bool synthetic = false;
    FrameKind kind = FrameKind::Python;
    std::string library;  // a native or kernel function's library (Frame::library)
    // The smallest line sampled in the function (frames only know the line of the sampled
    // instruction; on 3.11+ a sampled entry, RESUME, is the def line); 0 = none.
    int first_line = 0;
};

class FunctionTable {
public:
    explicit FunctionTable(const FrameTable& frames);
    uint32_t of_frame(uint32_t frame) const { return of_frame_[frame]; }
    const Function& at(uint32_t fn) const { return functions_[fn]; }
    size_t size() const { return functions_.size(); }
    const std::vector<Function>& all() const { return functions_; }
    // A function that is no frame's (the report's "[rare stacks]"): added once.
    uint32_t intern(const std::string& name, const std::string& file, bool synthetic,
                    FrameKind kind = FrameKind::Python, const std::string& library = {});

private:
    std::vector<Function> functions_;
    std::vector<uint32_t> of_frame_;
    std::map<std::tuple<std::string, std::string, bool, FrameKind, std::string>, uint32_t> index_;
};

// Self and total time per function of a FunctionTable, from the weight of each stack
// (stack_weights): self is the time a function was the leaf, total the time it was
// anywhere on the stack (a recursive function counts once per stack).
struct FunctionTimes {
    std::vector<uint64_t> self_ns, total_ns;
    // Per function, the line with the most self time (without any: the line of its first
    // frame in the frame table).
    std::vector<int> hot_line;
    uint64_t all_ns = 0;        // every stack's weight
};
FunctionTimes function_times(const Profile& profile, const FunctionTable& functions,
                             const std::vector<uint64_t>& stack_weight);

}  // namespace pbp
