// The wire protocol of `pybpfprof agent` (docs/agent-protocol.md): framing, the strict
// parsing and validation of client requests, and the encoding of messages.
//
// Anyone may connect to the agent's socket, so everything a client sends goes through
// parse_request/FrameReader, which never throw, never abort, never recurse on input, and
// bound what they allocate by the size of the frame (kMaxRequestBytes). This file depends
// on nothing of the engine or the exporters (the format names are passed in), so that it
// compiles alone into the fuzzer (tests/fuzz/fuzz_agent_request.cpp).
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace pbp::agent {

constexpr int kProtocolVersion = 1;
constexpr size_t kMaxRequestBytes = 64 * 1024;       // a request frame's payload, client -> agent
constexpr size_t kMaxHeaderBytes = 1 << 20;          // a message header, agent -> client
constexpr uint64_t kMaxAttachmentBytes = 1ull << 30;  // one attachment, agent -> client
constexpr const char* kDefaultSocket = "/run/pybpfprof/agent.sock";

// Further limits of a request (docs/agent-protocol.md lists them all).
constexpr size_t kMaxRequestDepth = 4;        // nesting of arrays/objects, the request object being 1
constexpr size_t kMaxHeaderDepth = 32;        // nesting in an agent's header (read_message)
constexpr size_t kMaxAttachments = 16;        // attachments of one agent message
constexpr size_t kMaxPids = 64;
constexpr pid_t kMaxPid = 4194304;           // the kernel's PID_MAX_LIMIT
constexpr size_t kMaxCgroups = 16;
constexpr size_t kMaxCgroupBytes = 4096;
constexpr size_t kMaxCommandArgs = 256;
constexpr size_t kMaxCommandBytes = 16 * 1024;  // all of the command's strings together
constexpr size_t kMaxOutputNameBytes = 4096;
constexpr double kMinRateHz = 1;
constexpr double kMaxRateHz = 10000;
constexpr double kMaxDurationS = 31 * 24 * 3600;  // 31 days
constexpr int64_t kMinMinBlockUs = 10;         // 'min_block_us': 10 us ...
constexpr int64_t kMaxMinBlockUs = 1'000'000;  // ... to 1 s
constexpr int64_t kDefaultMinBlockUs = 1000;   // 1 ms, the engine's default

// The code of an error message (docs/agent-protocol.md, "Errors").
enum class ErrorCode { Protocol, BadInput, Forbidden, CannotProfile, Limit, Internal };
// "protocol", "bad_input", "forbidden", "cannot_profile", "limit", "internal".
const char* error_code_name(ErrorCode code);

struct StartRequest {
    // The target: exactly one of pids, all_python, cgroups, launched_pid.
    std::vector<pid_t> pids;
    bool all_python = false;
    std::vector<std::string> cgroups;
    pid_t launched_pid = 0;
    bool children = false;             // only with pids: their descendants too, new ones included
    std::vector<std::string> command;  // only with launched_pid; for display
    double rate_hz = 99;
    double duration_s = 0;  // 0: until stopped
    int max_depth = 0;      // 0: the most the kernel allows
    std::string format = "speedscope";
    bool report = false;
    std::string group_by = "process";  // "process" or "pod"
    bool progress = true;
    std::string mode = "cpu";          // "cpu", "wall" or "gil" (the engine's ProfileMode)
    int64_t min_block_us = kDefaultMinBlockUs;  // only with mode "wall"
    bool async_tasks = false;          // "async": samples under their asyncio task chain (--async)
    bool native = false;               // "native": kernel and native frames with the Python ones (--native)
    bool operator==(const StartRequest&) const = default;
};
struct SnapshotRequest {
    std::string format;  // empty: the session's
    bool report = false;
    bool operator==(const SnapshotRequest&) const = default;
};
struct StopRequest {
    std::string output_name;  // empty: not given
    bool operator==(const StopRequest&) const = default;
};
// `pybpfprof dump` through the agent: every thread's current stack of the targets, read once
// and answered at once (no session). The target: exactly one of pids, all_python, cgroups.
struct DumpStacksRequest {
    std::vector<pid_t> pids;
    bool all_python = false;
    std::vector<std::string> cgroups;
    int max_depth = 0;  // 0: as BPF walks (PBP_MAX_DEPTH)
    bool async_tasks = false;  // "async": every asyncio task too (dump --async)
    bool operator==(const DumpStacksRequest&) const = default;
};
struct Request {
    enum class Op { Start, Snapshot, Stop, Status, Dump } op = Op::Status;
    StartRequest start;
    SnapshotRequest snapshot;
    StopRequest stop;
    DumpStacksRequest dump;
    bool operator==(const Request&) const = default;
};

// "start", "snapshot", "stop", "status", "dump".
const char* op_name(Request::Op op);

// Strict parse + validation of one request frame's payload (JSON text, at most
// kMaxRequestBytes), against the format names the agent can write (`formats`). true: `out` holds the request (the fields
// of other ops at their defaults). false: `error` is one line (ASCII, no control
// characters, at most a few hundred bytes) naming the field and what it must be; `out` is
// unspecified. Never throws.
bool parse_request(std::string_view json, const std::vector<std::string>& formats, Request& out,
                   std::string& error);
// The same, with the code the agent answers the error with: Protocol when the text is not
// a request of this protocol (over kMaxRequestBytes, not JSON, nested too deep, a duplicate
// field, not an object, a bad "v" or "op", "attachments", an unknown field), BadInput when
// it is one but a field's value is refused (type, range, duplicates, the start target).
// The agent closes the connection after a Protocol error only.
bool parse_request(std::string_view json, const std::vector<std::string>& formats, Request& out,
                   std::string& error, ErrorCode& code);
// The JSON text of a request (what a client sends); parse_request(encode_request(r)) == r
// for a valid r whose other ops' fields are at their defaults and whose text fits in
// kMaxRequestBytes (every field is written, defaults included: the text of a request that
// was parsed can be a few hundred bytes longer than what was parsed).
std::string encode_request(const Request& r);

// The strict JSON parser parse_request uses, for any JSON text: one value, UTF-8 (no BOM,
// no NUL byte), no comments, no trailing bytes, no duplicate keys, arrays/objects nested at
// most max_depth deep (a scalar is depth 0, [] is 1). Iterative: stops at the first
// container too deep, so its time and memory are linear in the text whatever the text.
// false + one-line error. Never throws.
bool parse_json_strict(std::string_view text, size_t max_depth, nlohmann::json& out, std::string& error);

// Framing. A frame = 4-byte big-endian length + payload. Throws std::length_error when the
// payload is over 4 GiB - 1 (unframable).
std::string frame(std::string_view json);
// A message = header frame + the attachments. The header must be a JSON object (else
// std::invalid_argument); "v" is set to kProtocolVersion when absent; "attachments" is set
// to the attachments' sizes when there are any and removed when there are none. Strings
// that are not valid UTF-8 are written with U+FFFD replacing the bad bytes. Throws
// std::length_error when the header is over kMaxHeaderBytes, an attachment over
// kMaxAttachmentBytes, or there are more than kMaxAttachments (a client would refuse it).
std::string encode_message(nlohmann::json header, const std::vector<std::string>& attachments = {});
// The header frame alone of a message whose attachments have these sizes (the caller then
// writes the attachments itself, without copying them into one string). Same rules.
std::string encode_message_header(nlohmann::json header, const std::vector<uint64_t>& attachment_sizes);

// ---- the agent's messages (docs/agent-protocol.md, "Messages from the agent") -----------
// Header builders: each returns the header object of one message type, to pass to
// encode_message (with the attachments, for "profile") or encode_message_header.

// {"v":1,"type":"error","code":...,"message":...}; the message is made one line (control
// characters become spaces).
nlohmann::json error_header(ErrorCode code, std::string_view message);
// error_header, framed: what the agent writes (after a Protocol error it then closes).
std::string encode_error(ErrorCode code, std::string_view message);

nlohmann::json started_header(int64_t session, double rate_hz, std::string_view scope, uint64_t targets);

enum class EventKind { TargetAdded, CgroupWaiting, CgroupWatching, AllPythonScanned, Warning, Error };
// "target_added", "cgroup_waiting", "cgroup_watching", "all_python_scanned", "warning", "error".
const char* event_kind_name(EventKind kind);
struct Event {
    EventKind kind = EventKind::Warning;
    pid_t pid = 0;          // written when not 0
    bool announce = false;  // written for target_added only
    uint64_t count = 0;     // written for cgroup_watching and all_python_scanned only
    std::string message, comm, python, description;  // each written when not empty
    std::map<std::string, std::string> labels;       // written when not empty
};
nlohmann::json event_header(const Event& event);

nlohmann::json progress_header(double elapsed_s, uint64_t samples, uint64_t processes, uint64_t lost);
nlohmann::json done_header(std::string_view reason);
// The answer to a dump request: {"v":1,"type":"dump","format":"json"}, whose one attachment
// is the dump as the JSON document of docs/dump.md.
nlohmann::json dump_header();
// The deepest nesting of that document (processes[].threads[].frames[] objects), for a
// client's parse_json_strict.
constexpr size_t kMaxDumpDepth = 8;
// The header of a profile whose attachments are the profile and, when report, the HTML
// report. summary is passed through as it is (an object: "lines", "exit_code", ...).
nlohmann::json profile_header(std::string_view format, bool final, bool report, nlohmann::json summary);

struct SessionStatus {
    int64_t session = 0;
    int64_t uid = 0;
    std::string user;
    pid_t pid = 0;  // the client's
    std::string target;
    double rate_hz = 0;
    double elapsed_s = 0;
    uint64_t samples = 0;
    uint64_t processes = 0;
};
nlohmann::json status_header(const std::vector<SessionStatus>& sessions);

// Incremental request reader for a non-blocking server: push bytes as they arrive, then
// take frames with next() until it says NeedMore. What is buffered stays below
// max_frame + 4 + the size of the last push as long as next() is called after each push.
// After an Error, next() keeps returning the same Error and push() ignores its bytes: the
// stream cannot be resynchronised (the agent answers a protocol error and closes).
class FrameReader {
public:
    explicit FrameReader(size_t max_frame = kMaxRequestBytes);
    void push(const char* data, size_t n);
    enum class Next { NeedMore, Frame, Error };
    // Frame: frame_out is the next payload. Error: a zero length or one over max_frame
    // (one line, naming the size).
    Next next(std::string& frame_out, std::string& error);
    size_t buffered() const;

private:
    size_t max_frame_;
    std::string buf_;
    size_t pos_ = 0;  // start of the unread bytes in buf_
    std::string error_;
};

// Blocking, for clients: one whole message (header parsed as JSON + attachments), with a
// deadline for the whole message (timeout_ms < 0: none). false + one-line error on EOF,
// timeout, a read error, a header of length 0 or over kMaxHeaderBytes, a header that is not
// a JSON object (parse_json_strict, depth kMaxHeaderDepth), a bad "attachments" field
// (not an array of at most kMaxAttachments integers each <= kMaxAttachmentBytes), or EOF
// inside an attachment. Works on blocking and non-blocking descriptors (sockets, pipes).
struct Message {
    nlohmann::json header;
    std::vector<std::string> attachments;
};
bool read_message(int fd, Message& out, std::string& error, int timeout_ms = -1);
// Writes all of bytes: retries on EINTR and partial writes, waits (poll) on EAGAIN, never
// raises SIGPIPE on a socket (MSG_NOSIGNAL; a pipe falls back to write()). false + error
// ("write: Broken pipe").
bool write_all(int fd, std::string_view bytes, std::string& error);

}  // namespace pbp::agent
