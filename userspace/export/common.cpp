#include "export/common.h"

#include <zlib.h>

#include <cstdio>
#include <ctime>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

namespace pbp {

class GzipStream::Buf : public std::streambuf {
public:
    explicit Buf(std::ostream& out) : out_(out) {
        if (deflateInit2(&zs_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            failed_ = true;
        setp(in_, in_ + sizeof in_);
    }
    ~Buf() override { deflateEnd(&zs_); }
    uint64_t bytes_in() const { return total_ + static_cast<uint64_t>(pptr() - pbase()); }
    void finish() {
        if (!failed_ && !finished_) deflate_put(Z_FINISH);
        finished_ = true;
        if (failed_) throw std::runtime_error("gzip: compression failed");
    }

protected:
    int_type overflow(int_type c) override {
        if (failed_ || finished_ || !deflate_put(Z_NO_FLUSH)) return traits_type::eof();
        if (!traits_type::eq_int_type(c, traits_type::eof())) {
            *pptr() = traits_type::to_char_type(c);
            pbump(1);
        }
        return traits_type::not_eof(c);
    }
    int sync() override { return failed_ ? -1 : 0; }

private:
    // Compresses the put area to out_ and empties it; with Z_FINISH, ends the gzip member.
    bool deflate_put(int flush) {
        const size_t n = static_cast<size_t>(pptr() - pbase());
        total_ += n;
        zs_.next_in = reinterpret_cast<Bytef*>(pbase());
        zs_.avail_in = static_cast<uInt>(n);
        int rc;
        do {
            zs_.next_out = reinterpret_cast<Bytef*>(packed_);
            zs_.avail_out = sizeof packed_;
            rc = deflate(&zs_, flush);
            if (rc == Z_STREAM_ERROR) {
                failed_ = true;
                return false;
            }
            out_.write(packed_, static_cast<std::streamsize>(sizeof packed_ - zs_.avail_out));
        } while (zs_.avail_out == 0);
        if (flush == Z_FINISH && rc != Z_STREAM_END) failed_ = true;
        setp(in_, in_ + sizeof in_);
        return !failed_;
    }

    std::ostream& out_;
    z_stream zs_{};
    char in_[64 * 1024];
    char packed_[64 * 1024];
    uint64_t total_ = 0;
    bool failed_ = false, finished_ = false;
};

GzipStream::GzipStream(std::ostream& out) : std::ostream(nullptr), buf_(std::make_unique<Buf>(out)) {
    rdbuf(buf_.get());
}
GzipStream::~GzipStream() = default;
void GzipStream::finish() { buf_->finish(); }
uint64_t GzipStream::bytes_in() const { return buf_->bytes_in(); }

std::string gzip(std::string_view data) {
    std::ostringstream out;
    GzipStream gz(out);
    gz.write(data.data(), static_cast<std::streamsize>(data.size()));
    gz.finish();
    return std::move(out).str();
}

uint64_t sampling_period_ns(const RunInfo& run) {
    if (run.period_ns) return run.period_ns;
    if (run.rate_hz > 0) return static_cast<uint64_t>(1e9 / run.rate_hz + 0.5);
    return 1000000;
}

std::string decimal_seconds(int64_t ns) {
    const uint64_t a = ns < 0 ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
    std::string s = (ns < 0 ? "-" : "") + std::to_string(a / 1000000000ULL);
    uint64_t frac = a % 1000000000ULL;
    if (frac) {
        char buf[16];
        std::snprintf(buf, sizeof buf, ".%09llu", static_cast<unsigned long long>(frac));
        std::string f = buf;
        while (f.back() == '0') f.pop_back();
        s += f;
    }
    return s;
}

std::string iso8601_utc_ms(int64_t unix_ns) {
    int64_t sec = unix_ns / 1000000000LL;
    int64_t rem = unix_ns % 1000000000LL;
    if (rem < 0) {
        rem += 1000000000LL;
        sec -= 1;
    }
    time_t t = static_cast<time_t>(sec);
    struct tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(rem / 1000000));
    return buf;
}

const char* wait_name(WaitReason w) {
    switch (w) {
        case WaitReason::None: return "";
        case WaitReason::Sleep: return "sleep";
        case WaitReason::Io: return "io";
        case WaitReason::Gil: return "gil";
        case WaitReason::Runnable: return "runnable";
    }
    return "";
}

bool is_wait_leaf(const Frame& f) {
    if (!f.synthetic) return false;
    for (WaitReason w : {WaitReason::Sleep, WaitReason::Io, WaitReason::Gil, WaitReason::Runnable})
        if (f.name == wait_leaf(w)) return true;
    return false;
}

bool has_off_cpu(const Profile& profile) {
    for (const auto& [_, p] : profile.processes)
        for (const auto& [__, t] : p.threads)
            for (const Sample& s : t.samples)
                if (s.kind == SampleKind::OffCpu) return true;
    return false;
}

bool every_sample_weighs(const Profile& profile, uint64_t weight_ns) {
    for (const auto& [_, p] : profile.processes)
        for (const auto& [__, t] : p.threads)
            for (const Sample& s : t.samples)
                if (s.weight_ns != weight_ns * s.count) return false;  // a bucket weighs its samples
    return true;
}

void StackTotal::add(const Sample& s) {
    samples += s.count;  // a bucket stands for count samples
    (s.kind == SampleKind::OffCpu ? off_cpu_ns : cpu_ns) += s.weight_ns;
}

std::map<uint32_t, StackTotal> thread_stack_totals(const ThreadProfile& thread) {
    std::map<uint32_t, StackTotal> totals;
    for (const Sample& s : thread.samples) totals[s.stack].add(s);
    return totals;
}

std::vector<uint64_t> stack_weights(const Profile& profile) {
    std::vector<uint64_t> w(profile.stacks.size(), 0);
    for (const auto& [_, p] : profile.processes)
        for (const auto& [__, t] : p.threads)
            for (const Sample& s : t.samples)
                if (s.stack < w.size()) w[s.stack] += s.weight_ns;
    return w;
}

FunctionTable::FunctionTable(const FrameTable& frames) {
    of_frame_.resize(frames.size());
    for (uint32_t i = 0; i < frames.size(); i++) {
        const Frame& f = frames.at(i);
        uint32_t fn = intern(frame_display_name(f), f.synthetic ? std::string() : f.file, f.synthetic, f.kind,
                             f.library);
        int& first = functions_[fn].first_line;
        if (!f.synthetic && f.line > 0 && (first == 0 || f.line < first)) first = f.line;
        of_frame_[i] = fn;
    }
}

uint32_t FunctionTable::intern(const std::string& name, const std::string& file, bool synthetic, FrameKind kind,
                               const std::string& library) {
    auto [it, added] = index_.emplace(std::make_tuple(name, file, synthetic, kind, library),
                                      static_cast<uint32_t>(functions_.size()));
    if (added) functions_.push_back({name, file, synthetic, kind, library, 0});
    return it->second;
}

std::string frame_display_name(const Frame& f) {
    if (f.name.empty()) return f.kind == FrameKind::Kernel ? "[k] ?" : "?";
    if (f.kind == FrameKind::Kernel && f.name.rfind("[k] ", 0) != 0) return "[k] " + f.name;
    return f.name;
}

std::string library_basename(const std::string& path) {
    if (path.empty() || path.front() == '[') return path;  // "[kernel]", "[vdso]"
    const size_t slash = path.rfind('/');
    return slash == std::string::npos || slash + 1 == path.size() ? path : path.substr(slash + 1);
}

std::string frame_label(const Frame& f) {
    if (f.synthetic) return f.name.empty() ? std::string("?") : f.name;
    if (f.kind == FrameKind::Kernel) {
        std::string name = f.name.rfind("[k] ", 0) == 0 ? f.name.substr(4) : f.name;
        return (name.empty() ? std::string("?") : name) + "_[k]";
    }
    std::string s = f.name.empty() ? std::string("?") : f.name;
    if (!f.file.empty()) s += " (" + f.file + (f.line > 0 ? ":" + std::to_string(f.line) : std::string()) + ")";
    if (f.kind == FrameKind::Native) {
        const std::string lib = f.library.empty() ? std::string("?") : library_basename(f.library);
        s += lib.front() == '[' ? " " + lib : " [" + lib + "]";  // "[vdso]" as is, not "[[vdso]]"
    }
    return s;
}

const char* frame_kind_tag(FrameKind k) {
    switch (k) {
        case FrameKind::Native: return "native";
        case FrameKind::Kernel: return "kernel";
        case FrameKind::Python: break;
    }
    return "";
}

FunctionTimes function_times(const Profile& profile, const FunctionTable& functions,
                             const std::vector<uint64_t>& stack_weight) {
    FunctionTimes r;
    r.self_ns.assign(functions.size(), 0);
    r.total_ns.assign(functions.size(), 0);
    r.hot_line.assign(functions.size(), 0);
    std::vector<bool> has_line(functions.size(), false);
    for (uint32_t i = 0; i < profile.frames.size(); i++) {
        uint32_t fn = functions.of_frame(i);
        if (!has_line[fn]) has_line[fn] = true, r.hot_line[fn] = profile.frames.at(i).line;
    }
    std::vector<uint64_t> frame_self(profile.frames.size(), 0);
    std::unordered_set<uint32_t> seen;
    for (uint32_t s = 0; s < stack_weight.size() && s < profile.stacks.size(); s++) {
        uint64_t w = stack_weight[s];
        if (!w) continue;
        r.all_ns += w;
        const auto& st = profile.stacks.at(s);
        if (st.empty()) continue;
        seen.clear();
        for (uint32_t f : st)
            if (seen.insert(functions.of_frame(f)).second) r.total_ns[functions.of_frame(f)] += w;
        r.self_ns[functions.of_frame(st.back())] += w;
        frame_self[st.back()] += w;
    }
    std::vector<uint64_t> best(functions.size(), 0);
    for (uint32_t i = 0; i < frame_self.size(); i++) {
        uint32_t fn = functions.of_frame(i);
        if (frame_self[i] > best[fn]) best[fn] = frame_self[i], r.hot_line[fn] = profile.frames.at(i).line;
    }
    return r;
}

std::string base64(std::string_view in) {
    static const char* tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
        for (int sh : {18, 12, 6, 0}) out.push_back(tbl[(v >> sh) & 63]);
    }
    if (i < in.size()) {
        uint32_t v = uint8_t(in[i]) << 16;
        if (i + 1 < in.size()) v |= uint8_t(in[i + 1]) << 8;
        out.push_back(tbl[v >> 18]);
        out.push_back(tbl[(v >> 12) & 63]);
        out.push_back(i + 1 < in.size() ? tbl[(v >> 6) & 63] : '=');
        out.push_back('=');
    }
    return out;
}

}  // namespace pbp
