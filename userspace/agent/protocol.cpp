#include "agent/protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <set>
#include <stdexcept>

#include "pybpfprof/abi.h"

namespace pbp::agent {

using json = nlohmann::json;

namespace {

// ---- one-line, ASCII-only text for error messages ------------------------------------

// s with printable ASCII kept and every other byte written \n, \t, \r or \xNN; cut to
// about max characters ("..." marks a cut).
std::string sanitize(std::string_view s, size_t max) {
    static const char hex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) {
        if (out.size() >= max) {
            out += "...";
            break;
        }
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

constexpr size_t kEchoChars = 40;  // a value echoed in an error message

// A received value as JSON text (ASCII: \u escapes), cut to kEchoChars.
std::string describe(const json& v) {
    std::string text;
    try {
        text = v.dump(-1, ' ', true, json::error_handler_t::replace);
    } catch (const std::exception&) {
        text = "?";
    }
    if (text.size() > kEchoChars) text = text.substr(0, kEchoChars - 3) + "...";
    return sanitize(text, kEchoChars + 8);  // already ASCII; belt and braces
}

std::string got_text(const json& v) { return " (got " + describe(v) + ")"; }
std::string quote_key(std::string_view k) { return "'" + sanitize(k, kEchoChars) + "'"; }

bool fail(std::string& error, std::string message) {
    error = std::move(message);
    return false;
}

// ---- the strict JSON parser (SAX, iterative) -----------------------------------------

class StrictSax final : public json::json_sax_t {
public:
    StrictSax(json& root, size_t max_depth) : root_(root), max_depth_(max_depth) {}
    const std::string& error() const { return error_; }

    bool null() override { return put(json(nullptr)) != nullptr; }
    bool boolean(bool v) override { return put(json(v)) != nullptr; }
    bool number_integer(number_integer_t v) override { return put(json(v)) != nullptr; }
    bool number_unsigned(number_unsigned_t v) override { return put(json(v)) != nullptr; }
    bool number_float(number_float_t v, const string_t&) override { return put(json(v)) != nullptr; }
    bool string(string_t& v) override { return put(json(std::move(v))) != nullptr; }
    bool binary(binary_t&) override { return fail(error_, "invalid JSON: binary value"); }
    bool start_object(std::size_t) override { return open(json::value_t::object); }
    bool key(string_t& k) override {
        auto& obj = stack_.back()->get_ref<json::object_t&>();
        auto [it, inserted] = obj.try_emplace(k);
        if (!inserted) return fail(error_, "duplicate field " + quote_key(k));
        element_ = &it->second;
        return true;
    }
    bool end_object() override {
        stack_.pop_back();
        return true;
    }
    bool start_array(std::size_t) override { return open(json::value_t::array); }
    bool end_array() override {
        stack_.pop_back();
        return true;
    }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
        // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error
        // while parsing value - invalid literal; last read: 'x'" -> the part after the column.
        std::string_view what = ex.what();
        if (auto col = what.find("column "); col != std::string_view::npos) {
            if (auto colon = what.find(": ", col); colon != std::string_view::npos) what.remove_prefix(colon + 2);
        } else if (auto br = what.find("] "); br != std::string_view::npos) {
            what.remove_prefix(br + 2);
        }
        // position counts the bytes read, the offending one included (approximate: "near").
        return fail(error_, "invalid JSON near byte " + std::to_string(position > 0 ? position - 1 : 0) + ": " +
                                sanitize(what, 160));
    }

private:
    // Stores v where the parser is (the root, the next array element or the value of the
    // last key) and returns where it went.
    json* put(json&& v) {
        if (stack_.empty()) {
            root_ = std::move(v);
            return &root_;
        }
        json& top = *stack_.back();
        if (top.is_array()) {
            auto& arr = top.get_ref<json::array_t&>();
            arr.push_back(std::move(v));
            return &arr.back();
        }
        *element_ = std::move(v);
        return element_;
    }
    bool open(json::value_t type) {
        if (stack_.size() >= max_depth_)
            return fail(error_, "JSON nested deeper than " + std::to_string(max_depth_) + " levels");
        // A container's address is stable while it is open: its parent gets no new element
        // (an array) or is a std::map node (an object) until it closes.
        stack_.push_back(put(json(type)));
        return true;
    }

    json& root_;
    size_t max_depth_;
    std::vector<json*> stack_;
    json* element_ = nullptr;
    std::string error_;
};

// ---- typed field access ---------------------------------------------------------------

bool get_int(const json& v, int64_t lo, int64_t hi, int64_t& out) {
    if (v.is_number_unsigned()) {
        auto u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(INT64_MAX)) return false;
        out = static_cast<int64_t>(u);
    } else if (v.is_number_integer()) {
        out = v.get<int64_t>();
    } else {
        return false;
    }
    return out >= lo && out <= hi;
}

bool get_number(const json& v, double lo, double hi, double& out) {
    if (!v.is_number()) return false;
    out = v.get<double>();
    return std::isfinite(out) && out >= lo && out <= hi;
}

// No C0 control characters, DEL, nor C1 control characters (U+0080..U+009F, UTF-8 C2 80..C2 9F).
bool no_controls(std::string_view s) {
    for (size_t i = 0; i < s.size(); i++) {
        auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7f) return false;
        if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9f) return false;
    }
    return true;
}

std::string format_list(const std::vector<std::string>& formats) {
    std::string s;
    for (const auto& f : formats) s += (s.empty() ? "\"" : ", \"") + sanitize(f, kEchoChars) + "\"";
    return s;
}

bool check_format(const json& v, const std::vector<std::string>& formats, std::string& out, std::string& error) {
    if (v.is_string()) {
        const auto& s = v.get_ref<const std::string&>();
        if (std::find(formats.begin(), formats.end(), s) != formats.end()) {
            out = s;
            return true;
        }
    }
    if (formats.empty()) return fail(error, "field 'format' must be a format of the agent, which has none" + got_text(v));
    return fail(error, "field 'format' must be one of " + format_list(formats) + got_text(v));
}

bool check_bool(const json& obj, const char* name, bool& out, std::string& error) {
    auto it = obj.find(name);
    if (it == obj.end()) return true;
    if (!it->is_boolean()) return fail(error, std::string("field '") + name + "' must be true or false" + got_text(*it));
    out = it->get<bool>();
    return true;
}

bool check_pid(const json& v, const std::string& name, pid_t& out, std::string& error) {
    int64_t x;
    if (!get_int(v, 1, kMaxPid, x))
        return fail(error, "field '" + name + "' must be an integer from 1 to " + std::to_string(kMaxPid) + got_text(v));
    out = static_cast<pid_t>(x);
    return true;
}

const char* const kOps[] = {"start", "snapshot", "stop", "status", "dump"};
const char* const kOpList = "\"start\", \"snapshot\", \"stop\", \"status\", \"dump\"";

const std::set<std::string>& allowed_fields(Request::Op op) {
    static const std::set<std::string> start = {"v",          "op",        "pids",   "all_python", "cgroups",
                                                "launched_pid", "command",   "rate_hz", "duration_s", "max_depth",
                                                "format",     "report",    "group_by", "progress", "children",
                                                "mode",       "min_block_us", "async",   "native"};
    static const std::set<std::string> snapshot = {"v", "op", "format", "report"};
    static const std::set<std::string> stop = {"v", "op", "output_name"};
    static const std::set<std::string> status = {"v", "op"};
    static const std::set<std::string> dump = {"v", "op", "pids", "all_python", "cgroups", "max_depth", "async"};
    switch (op) {
        case Request::Op::Start: return start;
        case Request::Op::Snapshot: return snapshot;
        case Request::Op::Stop: return stop;
        case Request::Op::Dump: return dump;
        case Request::Op::Status: break;
    }
    return status;
}

// The target fields a start and a dump share: 'pids', 'all_python', 'cgroups' (when present).
bool parse_targets(const json& obj, std::vector<pid_t>& pids, bool& all_python, std::vector<std::string>& cgroups,
                   std::string& error) {
    if (auto it = obj.find("pids"); it != obj.end()) {
        const json& v = *it;
        if (!v.is_array() || v.empty() || v.size() > kMaxPids)
            return fail(error, "field 'pids' must be an array of 1 to " + std::to_string(kMaxPids) + " process IDs" +
                                   got_text(v));
        for (size_t i = 0; i < v.size(); i++) {
            pid_t pid;
            if (!check_pid(v[i], "pids[" + std::to_string(i) + "]", pid, error)) return false;
            if (std::find(pids.begin(), pids.end(), pid) != pids.end())
                return fail(error, "field 'pids' lists process " + std::to_string(pid) + " twice");
            pids.push_back(pid);
        }
    }
    if (auto it = obj.find("all_python"); it != obj.end()) {
        if (!it->is_boolean() || !it->get<bool>())
            return fail(error, "field 'all_python' must be true (omit it otherwise)" + got_text(*it));
        all_python = true;
    }
    if (auto it = obj.find("cgroups"); it != obj.end()) {
        const json& v = *it;
        if (!v.is_array() || v.empty() || v.size() > kMaxCgroups)
            return fail(error, "field 'cgroups' must be an array of 1 to " + std::to_string(kMaxCgroups) +
                                   " cgroup names" + got_text(v));
        for (size_t i = 0; i < v.size(); i++) {
            const json& e = v[i];
            if (!e.is_string() || e.get_ref<const std::string&>().empty() ||
                e.get_ref<const std::string&>().size() > kMaxCgroupBytes || !no_controls(e.get_ref<const std::string&>()))
                return fail(error, "field 'cgroups[" + std::to_string(i) + "]' must be a string of 1 to " +
                                       std::to_string(kMaxCgroupBytes) + " bytes without control characters" +
                                       got_text(e));
            cgroups.push_back(e.get<std::string>());
        }
    }
    return true;
}

bool parse_max_depth(const json& obj, int& out, std::string& error) {
    auto it = obj.find("max_depth");
    if (it == obj.end()) return true;
    int64_t d;
    if (!get_int(*it, 0, PBP_MAX_DEPTH, d))
        return fail(error, "field 'max_depth' must be an integer from 0 to " + std::to_string(PBP_MAX_DEPTH) +
                               got_text(*it));
    out = static_cast<int>(d);
    return true;
}

bool parse_dump(const json& obj, DumpStacksRequest& d, std::string& error) {
    std::vector<std::string> kinds;
    for (const char* k : {"pids", "all_python", "cgroups"})
        if (obj.contains(k)) kinds.emplace_back(k);
    if (kinds.size() != 1) {
        std::string which = kinds.empty() ? "none" : "'" + kinds[0] + "' and '" + kinds[1] + "'";
        if (kinds.size() > 2) which += " and more";
        return fail(error, "a dump request needs exactly one target field: 'pids', 'all_python' or 'cgroups' (got " +
                               which + ")");
    }
    if (!check_bool(obj, "async", d.async_tasks, error)) return false;
    return parse_targets(obj, d.pids, d.all_python, d.cgroups, error) && parse_max_depth(obj, d.max_depth, error);
}

bool parse_start(const json& obj, const std::vector<std::string>& formats, StartRequest& s, std::string& error) {
    // The target: exactly one kind.
    std::vector<std::string> kinds;
    for (const char* k : {"pids", "all_python", "cgroups", "launched_pid"})
        if (obj.contains(k)) kinds.emplace_back(k);
    if (kinds.size() != 1) {
        std::string which = kinds.empty() ? "none" : "'" + kinds[0] + "' and '" + kinds[1] + "'";
        if (kinds.size() > 2) which += " and more";
        return fail(error,
                    "a start request needs exactly one target field: 'pids', 'all_python', 'cgroups' or "
                    "'launched_pid' (got " + which + ")");
    }
    if (!parse_targets(obj, s.pids, s.all_python, s.cgroups, error)) return false;
    if (auto it = obj.find("launched_pid"); it != obj.end())
        if (!check_pid(*it, "launched_pid", s.launched_pid, error)) return false;
    if (auto it = obj.find("children"); it != obj.end()) {
        if (s.pids.empty()) return fail(error, "field 'children' is only allowed with 'pids'");
        if (!check_bool(obj, "children", s.children, error)) return false;
    }
    if (auto it = obj.find("command"); it != obj.end()) {
        if (s.launched_pid == 0) return fail(error, "field 'command' is only allowed with 'launched_pid'");
        const json& v = *it;
        if (!v.is_array() || v.size() > kMaxCommandArgs)
            return fail(error, "field 'command' must be an array of at most " + std::to_string(kMaxCommandArgs) +
                                   " strings" + got_text(v));
        size_t total = 0;
        for (size_t i = 0; i < v.size(); i++) {
            if (!v[i].is_string())
                return fail(error, "field 'command[" + std::to_string(i) + "]' must be a string" + got_text(v[i]));
            total += v[i].get_ref<const std::string&>().size();
        }
        if (total > kMaxCommandBytes)
            return fail(error, "field 'command' must have at most " + std::to_string(kMaxCommandBytes) +
                                   " bytes of strings (got " + std::to_string(total) + ")");
        for (const auto& e : v) s.command.push_back(e.get<std::string>());
    }
    if (auto it = obj.find("rate_hz"); it != obj.end())
        if (!get_number(*it, kMinRateHz, kMaxRateHz, s.rate_hz))
            return fail(error, "field 'rate_hz' must be a number from 1 to 10000" + got_text(*it));
    if (auto it = obj.find("duration_s"); it != obj.end())
        if (!get_number(*it, 0, kMaxDurationS, s.duration_s))
            return fail(error, "field 'duration_s' must be a number of seconds from 0 to 2678400 (31 days)" + got_text(*it));
    if (!parse_max_depth(obj, s.max_depth, error)) return false;
    if (auto it = obj.find("format"); it != obj.end())
        if (!check_format(*it, formats, s.format, error)) return false;
    if (!check_bool(obj, "report", s.report, error)) return false;
    if (auto it = obj.find("group_by"); it != obj.end()) {
        if (!it->is_string() || (*it != "process" && *it != "pod"))
            return fail(error, "field 'group_by' must be \"process\" or \"pod\"" + got_text(*it));
        s.group_by = it->get<std::string>();
    }
    if (auto it = obj.find("mode"); it != obj.end()) {
        if (!it->is_string() || (*it != "cpu" && *it != "wall" && *it != "gil"))
            return fail(error, "field 'mode' must be \"cpu\", \"wall\" or \"gil\"" + got_text(*it));
        s.mode = it->get<std::string>();
    }
    if (auto it = obj.find("min_block_us"); it != obj.end()) {
        // Like the CLI's --min-block: a value that would change nothing is refused, not ignored.
        if (s.mode != "wall") return fail(error, "field 'min_block_us' is only allowed with 'mode' \"wall\"");
        if (!get_int(*it, kMinMinBlockUs, kMaxMinBlockUs, s.min_block_us))
            return fail(error, "field 'min_block_us' must be an integer number of microseconds from " +
                                   std::to_string(kMinMinBlockUs) + " to " + std::to_string(kMaxMinBlockUs) +
                                   got_text(*it));
    }
    if (!check_bool(obj, "async", s.async_tasks, error)) return false;
    if (!check_bool(obj, "native", s.native, error)) return false;
    return check_bool(obj, "progress", s.progress, error);
}

bool parse_validated(std::string_view text, const std::vector<std::string>& formats, Request& out,
                     std::string& error, ErrorCode& code) {
    code = ErrorCode::Protocol;
    if (text.size() > kMaxRequestBytes)
        return fail(error, "request of " + std::to_string(text.size()) + " bytes: a request must have at most " +
                               std::to_string(kMaxRequestBytes) + " bytes");
    json root;
    if (!parse_json_strict(text, kMaxRequestDepth, root, error)) return false;
    if (!root.is_object()) return fail(error, "a request must be a JSON object" + got_text(root));

    auto v = root.find("v");
    if (v == root.end()) return fail(error, "field 'v' is missing: it must be 1, the protocol version");
    if (int64_t version; !get_int(*v, 1, 1, version))
        return fail(error, "field 'v' must be 1, the protocol version this agent speaks" + got_text(*v));

    auto op = root.find("op");
    if (op == root.end()) return fail(error, std::string("field 'op' is missing: it must be one of ") + kOpList);
    out = Request{};
    bool known = false;
    if (op->is_string()) {
        for (size_t i = 0; i < std::size(kOps); i++)
            if (*op == kOps[i]) {
                out.op = static_cast<Request::Op>(i);
                known = true;
            }
    }
    if (!known) return fail(error, std::string("field 'op' must be one of ") + kOpList + got_text(*op));

    if (root.contains("attachments")) return fail(error, "field 'attachments': a request must not carry attachments");
    const auto& allowed = allowed_fields(out.op);
    for (const auto& [key, value] : root.items())
        if (!allowed.count(key))
            return fail(error, "unknown field " + quote_key(key) + " in a " + op_name(out.op) + " request");

    // A request of this protocol: what is wrong from here on is a field's value.
    code = ErrorCode::BadInput;
    switch (out.op) {
        case Request::Op::Start: return parse_start(root, formats, out.start, error);
        case Request::Op::Snapshot:
            if (auto it = root.find("format"); it != root.end())
                if (!check_format(*it, formats, out.snapshot.format, error)) return false;
            return check_bool(root, "report", out.snapshot.report, error);
        case Request::Op::Stop:
            if (auto it = root.find("output_name"); it != root.end()) {
                if (!it->is_string() || it->get_ref<const std::string&>().size() > kMaxOutputNameBytes ||
                    !no_controls(it->get_ref<const std::string&>()))
                    return fail(error, "field 'output_name' must be a string of at most " +
                                           std::to_string(kMaxOutputNameBytes) + " bytes without control characters" +
                                           got_text(*it));
                out.stop.output_name = it->get<std::string>();
            }
            return true;
        case Request::Op::Dump: return parse_dump(root, out.dump, error);
        case Request::Op::Status: return true;
    }
    return true;
}

// ---- blocking I/O ---------------------------------------------------------------------

class Deadline {
public:
    explicit Deadline(int timeout_ms)
        : none_(timeout_ms < 0), ms_(timeout_ms),
          end_(std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0))) {}
    // For poll(): -1 (none) or the milliseconds left, rounded up, >= 0.
    int remaining() const {
        if (none_) return -1;
        auto left = std::chrono::ceil<std::chrono::milliseconds>(end_ - std::chrono::steady_clock::now()).count();
        return static_cast<int>(std::max<decltype(left)>(left, 0));
    }
    int ms() const { return ms_; }

private:
    bool none_;
    int ms_;
    std::chrono::steady_clock::time_point end_;
};

std::string errno_text(const char* what, int err) { return std::string(what) + ": " + std::strerror(err); }

enum class ReadResult { Ok, Eof, Failed };

// Reads exactly n bytes (appended to out), waiting for each at most until the deadline.
// Eof: the peer closed before n bytes (got counts what came). Failed: error set.
ReadResult read_exact(int fd, size_t n, std::string& out, const Deadline& deadline, std::string& error,
                      size_t& got) {
    got = 0;
    char chunk[1 << 16];
    while (got < n) {
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, deadline.remaining());
        if (r < 0) {
            if (errno == EINTR) continue;
            error = errno_text("poll", errno);
            return ReadResult::Failed;
        }
        if (r == 0) {
            error = "timed out after " + std::to_string(deadline.ms()) + " ms waiting for a message from the agent";
            return ReadResult::Failed;
        }
        ssize_t k = read(fd, chunk, std::min(n - got, sizeof chunk));
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            error = errno_text("read", errno);
            return ReadResult::Failed;
        }
        if (k == 0) return ReadResult::Eof;
        out.append(chunk, static_cast<size_t>(k));
        got += static_cast<size_t>(k);
    }
    return ReadResult::Ok;
}

uint32_t load_be32(const char* p) {
    auto b = [p](int i) { return static_cast<uint32_t>(static_cast<unsigned char>(p[i])); };
    return b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
}

}  // namespace

const char* op_name(Request::Op op) {
    auto i = static_cast<size_t>(op);
    return i < std::size(kOps) ? kOps[i] : "?";
}

bool parse_json_strict(std::string_view text, size_t max_depth, json& out, std::string& error) {
    try {
        // nlohmann's lexer takes a NUL byte for the end of the input (and would accept
        // "{}\0garbage"), and skips a UTF-8 byte order mark: refuse both here.
        if (auto nul = text.find('\0'); nul != std::string_view::npos)
            return fail(error, "invalid JSON at byte " + std::to_string(nul) + ": NUL byte");
        if (text.substr(0, 3) == "\xEF\xBB\xBF") return fail(error, "invalid JSON at byte 0: byte order mark");
        out = json();
        StrictSax sax(out, max_depth);
        bool ok = json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json, true, false);
        if (!ok) {
            error = sax.error().empty() ? "invalid JSON" : sax.error();
            out = json();
            return false;
        }
        return true;
    } catch (const std::exception& e) {
        out = json();
        return fail(error, "invalid JSON: " + sanitize(e.what(), 160));
    }
}

bool parse_request(std::string_view text, const std::vector<std::string>& formats, Request& out, std::string& error,
                   ErrorCode& code) {
    try {
        return parse_validated(text, formats, out, error, code);
    } catch (const std::exception& e) {  // std::bad_alloc: nothing else throws
        code = ErrorCode::Internal;
        return fail(error, "internal error while parsing the request: " + sanitize(e.what(), 160));
    }
}

bool parse_request(std::string_view text, const std::vector<std::string>& formats, Request& out, std::string& error) {
    ErrorCode code;
    return parse_request(text, formats, out, error, code);
}

std::string encode_request(const Request& r) {
    nlohmann::ordered_json j;
    j["v"] = kProtocolVersion;
    j["op"] = op_name(r.op);
    switch (r.op) {
        case Request::Op::Start: {
            const StartRequest& s = r.start;
            if (!s.pids.empty()) j["pids"] = s.pids;
            if (s.children) j["children"] = true;
            if (s.all_python) j["all_python"] = true;
            if (!s.cgroups.empty()) j["cgroups"] = s.cgroups;
            if (s.launched_pid != 0) {
                j["launched_pid"] = s.launched_pid;
                if (!s.command.empty()) j["command"] = s.command;
            }
            j["rate_hz"] = s.rate_hz;
            j["duration_s"] = s.duration_s;
            j["max_depth"] = s.max_depth;
            j["format"] = s.format;
            j["report"] = s.report;
            j["group_by"] = s.group_by;
            j["progress"] = s.progress;
            j["mode"] = s.mode;
            if (s.mode == "wall") j["min_block_us"] = s.min_block_us;
            if (s.async_tasks) j["async"] = true;
            if (s.native) j["native"] = true;
            break;
        }
        case Request::Op::Snapshot:
            if (!r.snapshot.format.empty()) j["format"] = r.snapshot.format;
            j["report"] = r.snapshot.report;
            break;
        case Request::Op::Stop:
            if (!r.stop.output_name.empty()) j["output_name"] = r.stop.output_name;
            break;
        case Request::Op::Dump: {
            const DumpStacksRequest& d = r.dump;
            if (!d.pids.empty()) j["pids"] = d.pids;
            if (d.all_python) j["all_python"] = true;
            if (!d.cgroups.empty()) j["cgroups"] = d.cgroups;
            j["max_depth"] = d.max_depth;
            if (d.async_tasks) j["async"] = true;
            break;
        }
        case Request::Op::Status: break;
    }
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string frame(std::string_view payload) {
    if (payload.size() > 0xffffffffu) throw std::length_error("frame: payload over 4 GiB - 1 bytes");
    auto n = static_cast<uint32_t>(payload.size());
    std::string out;
    out.reserve(4 + payload.size());
    out += static_cast<char>(n >> 24);
    out += static_cast<char>(n >> 16);
    out += static_cast<char>(n >> 8);
    out += static_cast<char>(n);
    out.append(payload);
    return out;
}

std::string encode_message_header(json header, const std::vector<uint64_t>& attachment_sizes) {
    if (!header.is_object()) throw std::invalid_argument("encode_message: the header must be a JSON object");
    if (!header.contains("v")) header["v"] = kProtocolVersion;
    if (attachment_sizes.size() > kMaxAttachments)
        throw std::length_error("encode_message: more than " + std::to_string(kMaxAttachments) + " attachments");
    if (attachment_sizes.empty()) {
        header.erase("attachments");
    } else {
        for (uint64_t n : attachment_sizes)
            if (n > kMaxAttachmentBytes)
                throw std::length_error("encode_message: an attachment of " + std::to_string(n) +
                                        " bytes is over the 1 GiB limit");
        header["attachments"] = attachment_sizes;
    }
    std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > kMaxHeaderBytes)
        throw std::length_error("encode_message: a header of " + std::to_string(text.size()) +
                                " bytes is over the 1 MiB limit");
    return frame(text);
}

std::string encode_message(json header, const std::vector<std::string>& attachments) {
    std::vector<uint64_t> sizes;
    size_t total = 0;
    for (const auto& a : attachments) {
        sizes.push_back(a.size());
        total += a.size();
    }
    std::string out = encode_message_header(std::move(header), sizes);
    out.reserve(out.size() + total);
    for (const auto& a : attachments) out += a;
    return out;
}

// ---- the agent's messages -------------------------------------------------------------

namespace {

json header(const char* type) { return json{{"v", kProtocolVersion}, {"type", type}}; }

}  // namespace

const char* error_code_name(ErrorCode code) {
    switch (code) {
        case ErrorCode::Protocol: return "protocol";
        case ErrorCode::BadInput: return "bad_input";
        case ErrorCode::Forbidden: return "forbidden";
        case ErrorCode::CannotProfile: return "cannot_profile";
        case ErrorCode::Limit: return "limit";
        case ErrorCode::Internal: break;
    }
    return "internal";
}

json error_header(ErrorCode code, std::string_view message) {
    std::string line(message);
    for (char& c : line)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    json h = header("error");
    h["code"] = error_code_name(code);
    h["message"] = std::move(line);
    return h;
}

std::string encode_error(ErrorCode code, std::string_view message) {
    return encode_message(error_header(code, message));
}

json started_header(int64_t session, double rate_hz, std::string_view scope, uint64_t targets) {
    json h = header("started");
    h["session"] = session;
    h["rate_hz"] = rate_hz;
    h["scope"] = scope;
    h["targets"] = targets;
    return h;
}

const char* event_kind_name(EventKind kind) {
    switch (kind) {
        case EventKind::TargetAdded: return "target_added";
        case EventKind::CgroupWaiting: return "cgroup_waiting";
        case EventKind::CgroupWatching: return "cgroup_watching";
        case EventKind::AllPythonScanned: return "all_python_scanned";
        case EventKind::Warning: return "warning";
        case EventKind::Error: break;
    }
    return "error";
}

json event_header(const Event& e) {
    json h = header("event");
    h["kind"] = event_kind_name(e.kind);
    if (e.pid != 0) h["pid"] = e.pid;
    if (e.kind == EventKind::TargetAdded) h["announce"] = e.announce;
    if (e.kind == EventKind::CgroupWatching || e.kind == EventKind::AllPythonScanned) h["count"] = e.count;
    if (!e.message.empty()) h["message"] = e.message;
    if (!e.comm.empty()) h["comm"] = e.comm;
    if (!e.python.empty()) h["python"] = e.python;
    if (!e.description.empty()) h["description"] = e.description;
    if (!e.labels.empty()) h["labels"] = e.labels;
    return h;
}

json progress_header(double elapsed_s, uint64_t samples, uint64_t processes, uint64_t lost) {
    json h = header("progress");
    h["elapsed_s"] = elapsed_s;
    h["samples"] = samples;
    h["processes"] = processes;
    h["lost"] = lost;
    return h;
}

json done_header(std::string_view reason) {
    json h = header("done");
    h["reason"] = reason;
    return h;
}

json dump_header() {
    json h = header("dump");
    h["format"] = "json";
    return h;
}

json profile_header(std::string_view format, bool final, bool report, json summary) {
    json h = header("profile");
    h["format"] = format;
    h["final"] = final;
    h["report"] = report;
    h["summary"] = std::move(summary);
    return h;
}

json status_header(const std::vector<SessionStatus>& sessions) {
    json list = json::array();
    for (const auto& s : sessions)
        list.push_back({{"session", s.session},
                        {"uid", s.uid},
                        {"user", s.user},
                        {"pid", s.pid},
                        {"target", s.target},
                        {"rate_hz", s.rate_hz},
                        {"elapsed_s", s.elapsed_s},
                        {"samples", s.samples},
                        {"processes", s.processes}});
    json h = header("status");
    h["sessions"] = std::move(list);
    return h;
}

// ---- FrameReader ----------------------------------------------------------------------

FrameReader::FrameReader(size_t max_frame) : max_frame_(max_frame) {}

void FrameReader::push(const char* data, size_t n) {
    if (!error_.empty() || n == 0) return;
    if (pos_ > 0) {  // drop what was taken before growing
        buf_.erase(0, pos_);
        pos_ = 0;
    }
    buf_.append(data, n);
}

FrameReader::Next FrameReader::next(std::string& frame_out, std::string& error) {
    if (!error_.empty()) {
        error = error_;
        return Next::Error;
    }
    size_t avail = buf_.size() - pos_;
    if (avail < 4) return Next::NeedMore;
    uint32_t len = load_be32(buf_.data() + pos_);
    if (len == 0 || len > max_frame_) {
        error_ = "frame of " + std::to_string(len) + " bytes: a frame must have 1 to " + std::to_string(max_frame_) +
                 " bytes";
        buf_.clear();
        buf_.shrink_to_fit();
        pos_ = 0;
        error = error_;
        return Next::Error;
    }
    if (avail - 4 < len) return Next::NeedMore;
    frame_out.assign(buf_, pos_ + 4, len);
    pos_ += 4 + len;
    if (pos_ == buf_.size()) {
        buf_.clear();
        pos_ = 0;
    }
    return Next::Frame;
}

size_t FrameReader::buffered() const { return buf_.size() - pos_; }

// ---- blocking client side ------------------------------------------------------------------

bool read_message(int fd, Message& out, std::string& error, int timeout_ms) {
    try {
        Deadline deadline(timeout_ms);
        out = Message{};
        std::string buf;
        size_t got = 0;
        switch (read_exact(fd, 4, buf, deadline, error, got)) {
            case ReadResult::Ok: break;
            case ReadResult::Eof:
                return fail(error, got == 0 ? "the agent closed the connection"
                                            : "the agent closed the connection in the middle of a message");
            case ReadResult::Failed: return false;
        }
        uint32_t len = load_be32(buf.data());
        if (len == 0 || len > kMaxHeaderBytes)
            return fail(error, "message header of " + std::to_string(len) + " bytes: a header must have 1 to " +
                                   std::to_string(kMaxHeaderBytes) + " bytes");
        buf.clear();
        buf.reserve(len);
        switch (read_exact(fd, len, buf, deadline, error, got)) {
            case ReadResult::Ok: break;
            case ReadResult::Eof: return fail(error, "the agent closed the connection in the middle of a message");
            case ReadResult::Failed: return false;
        }
        std::string jerr;
        if (!parse_json_strict(buf, kMaxHeaderDepth, out.header, jerr))
            return fail(error, "message header: " + jerr);
        if (!out.header.is_object()) return fail(error, "message header is not a JSON object" + got_text(out.header));
        std::vector<uint64_t> sizes;
        if (auto it = out.header.find("attachments"); it != out.header.end()) {
            bool ok = it->is_array() && it->size() <= kMaxAttachments;
            for (size_t i = 0; ok && i < it->size(); i++) {
                ok = (*it)[i].is_number_unsigned() && (*it)[i].get<uint64_t>() <= kMaxAttachmentBytes;
                if (ok) sizes.push_back((*it)[i].get<uint64_t>());
            }
            if (!ok)
                return fail(error, "message header field 'attachments' must be an array of at most " +
                                       std::to_string(kMaxAttachments) + " sizes from 0 to " +
                                       std::to_string(kMaxAttachmentBytes) + got_text(*it));
        }
        for (uint64_t n : sizes) {
            std::string a;
            switch (read_exact(fd, static_cast<size_t>(n), a, deadline, error, got)) {
                case ReadResult::Ok: break;
                case ReadResult::Eof:
                    return fail(error, "the agent closed the connection in the middle of an attachment (" +
                                           std::to_string(got) + " of " + std::to_string(n) + " bytes)");
                case ReadResult::Failed: return false;
            }
            out.attachments.push_back(std::move(a));
        }
        return true;
    } catch (const std::exception& e) {
        return fail(error, "reading a message: " + sanitize(e.what(), 160));
    }
}

bool write_all(int fd, std::string_view bytes, std::string& error) {
    bool is_socket = true;
    size_t off = 0;
    while (off < bytes.size()) {
        ssize_t w = is_socket ? send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL)
                              : write(fd, bytes.data() + off, bytes.size() - off);
        if (w < 0) {
            if (is_socket && errno == ENOTSOCK) {
                is_socket = false;
                continue;
            }
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd p = {fd, POLLOUT, 0};
                if (poll(&p, 1, -1) < 0 && errno != EINTR) return fail(error, errno_text("poll", errno));
                continue;
            }
            return fail(error, errno_text("write", errno));
        }
        off += static_cast<size_t>(w);
    }
    return true;
}

}  // namespace pbp::agent
