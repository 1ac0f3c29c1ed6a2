// libFuzzer target for what anyone who can connect to the agent controls: the request
// frames (FrameReader) and the request parser (parse_request), agent/protocol.h.
// Run by tests/tools/run-fuzz (ctest: Fuzz.AgentRequest), with ASan and UBSan.
//
// Besides "no crash, no leak, no timeout", it checks the parser's promises:
//  - an accepted request satisfies every documented limit, and its encoding parses back
//    to the same request and encodes to the same text;
//  - a refused one has an error of one ASCII line, at most a few hundred bytes, and the
//    code protocol or bad_input;
//  - the frame reader hands out frames of 1..kMaxRequestBytes bytes, never more bytes
//    than it was given, and stays failed after an error.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/protocol.h"
#include "pybpfprof/abi.h"

using namespace pbp::agent;

namespace {

const std::vector<std::string> kFormats = {"speedscope", "collapsed", "html", "pprof"};

[[noreturn]] void broken(const char* what, std::string_view detail) {
    fprintf(stderr, "fuzz_agent_request: invariant broken: %s: %.*s\n", what, static_cast<int>(std::min<size_t>(detail.size(), 500)),
            detail.data());
    abort();
}

void require(bool ok, const char* what, std::string_view detail = {}) {
    if (!ok) broken(what, detail);
}

bool one_line_ascii(const std::string& s) {
    for (unsigned char c : s)
        if (c < 0x20 || c >= 0x7f) return false;
    return true;
}

bool no_controls(const std::string& s) {
    for (size_t i = 0; i < s.size(); i++) {
        auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7f) return false;
        if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9f) return false;
    }
    return true;
}

void check_limits(const Request& r, const std::string& text) {
    switch (r.op) {
        case Request::Op::Start: {
            const StartRequest& s = r.start;
            int kinds = !s.pids.empty() + s.all_python + !s.cgroups.empty() + (s.launched_pid != 0);
            require(kinds == 1, "start: exactly one target", text);
            require(s.pids.size() <= kMaxPids, "start: pids count", text);
            for (size_t i = 0; i < s.pids.size(); i++) {
                require(s.pids[i] >= 1 && s.pids[i] <= kMaxPid, "start: pid range", text);
                for (size_t j = 0; j < i; j++) require(s.pids[i] != s.pids[j], "start: duplicate pid", text);
            }
            require(s.cgroups.size() <= kMaxCgroups, "start: cgroups count", text);
            for (const auto& c : s.cgroups)
                require(!c.empty() && c.size() <= kMaxCgroupBytes && no_controls(c), "start: cgroup name", text);
            require(s.launched_pid >= 0 && s.launched_pid <= kMaxPid, "start: launched_pid range", text);
            require(s.command.empty() || s.launched_pid != 0, "start: command without launched_pid", text);
            size_t total = 0;
            for (const auto& a : s.command) total += a.size();
            require(s.command.size() <= kMaxCommandArgs && total <= kMaxCommandBytes, "start: command size", text);
            require(std::isfinite(s.rate_hz) && s.rate_hz >= 1 && s.rate_hz <= 10000, "start: rate_hz", text);
            require(std::isfinite(s.duration_s) && s.duration_s >= 0 && s.duration_s <= kMaxDurationS,
                    "start: duration_s", text);
            require(s.max_depth >= 0 && s.max_depth <= PBP_MAX_DEPTH, "start: max_depth", text);
            require(std::find(kFormats.begin(), kFormats.end(), s.format) != kFormats.end(), "start: format", text);
            require(s.group_by == "process" || s.group_by == "pod", "start: group_by", text);
            require(s.mode == "cpu" || s.mode == "wall" || s.mode == "gil", "start: mode", text);
            require(s.min_block_us >= kMinMinBlockUs && s.min_block_us <= kMaxMinBlockUs, "start: min_block_us", text);
            require(s.mode == "wall" || s.min_block_us == kDefaultMinBlockUs, "start: min_block_us without wall", text);
            break;
        }
        case Request::Op::Snapshot:
            require(r.snapshot.format.empty() ||
                        std::find(kFormats.begin(), kFormats.end(), r.snapshot.format) != kFormats.end(),
                    "snapshot: format", text);
            break;
        case Request::Op::Stop:
            require(r.stop.output_name.size() <= kMaxOutputNameBytes && no_controls(r.stop.output_name),
                    "stop: output_name", text);
            break;
        case Request::Op::Dump: {
            const DumpStacksRequest& d = r.dump;
            int kinds = !d.pids.empty() + d.all_python + !d.cgroups.empty();
            require(kinds == 1, "dump: exactly one target", text);
            require(d.pids.size() <= kMaxPids, "dump: pids count", text);
            for (size_t i = 0; i < d.pids.size(); i++) {
                require(d.pids[i] >= 1 && d.pids[i] <= kMaxPid, "dump: pid range", text);
                for (size_t j = 0; j < i; j++) require(d.pids[i] != d.pids[j], "dump: duplicate pid", text);
            }
            require(d.cgroups.size() <= kMaxCgroups, "dump: cgroups count", text);
            for (const auto& c : d.cgroups)
                require(!c.empty() && c.size() <= kMaxCgroupBytes && no_controls(c), "dump: cgroup name", text);
            require(d.max_depth >= 0 && d.max_depth <= PBP_MAX_DEPTH, "dump: max_depth", text);
            break;
        }
        case Request::Op::Status: break;
    }
    // The fields of the other ops stay at their defaults.
    if (r.op != Request::Op::Dump) require(r.dump == DumpStacksRequest{}, "dump fields set by another op", text);
    if (r.op != Request::Op::Start) require(r.start == StartRequest{}, "start fields set by another op", text);
}

void check_request(std::string_view text) {
    Request r;
    std::string error;
    ErrorCode code = ErrorCode::Limit;
    if (!parse_request(text, kFormats, r, error, code)) {
        require(!error.empty() && error.size() <= 400 && one_line_ascii(error), "error message", error);
        require(code == ErrorCode::Protocol || code == ErrorCode::BadInput, "error code", error);
        return;
    }
    require(error.empty(), "error set on success", error);
    require(text.size() <= kMaxRequestBytes, "accepted an oversize request");
    check_limits(r, std::string(text));
    std::string enc = encode_request(r);
    require(enc.size() <= text.size() + 512, "encoding much longer than the request", enc);
    if (enc.size() > kMaxRequestBytes) return;  // the defaults written out pushed it over
    Request back;
    std::string e2;
    require(parse_request(enc, kFormats, back, e2), "encoding refused", e2 + " <- " + enc);
    require(back == r, "encoding parsed to another request", enc);
    require(encode_request(back) == enc, "encoding not stable", enc);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view input(reinterpret_cast<const char*>(data), size);

    // The input as one request payload.
    check_request(input);

    // The input as a byte stream from a client, arriving in two reads cut where its last
    // byte says; every frame is a request.
    FrameReader reader;
    size_t cut = size ? data[size - 1] * size / 256 : 0;
    size_t taken = 0;
    bool failed = false;
    for (std::string_view part : {input.substr(0, cut), input.substr(cut)}) {
        reader.push(part.data(), part.size());
        for (;;) {
            std::string f, e;
            auto n = reader.next(f, e);
            if (n == FrameReader::Next::NeedMore) break;
            if (n == FrameReader::Next::Error) {
                require(!e.empty() && one_line_ascii(e), "frame error message", e);
                require(reader.buffered() == 0, "buffer kept after an error");
                failed = true;
                break;
            }
            require(!failed, "a frame after an error");
            require(!f.empty() && f.size() <= kMaxRequestBytes, "frame size");
            taken += 4 + f.size();
            require(taken <= size, "more bytes out than in");
            check_request(f);
        }
    }
    if (!failed) require(taken + reader.buffered() == size, "bytes lost by the frame reader");
    return 0;
}
