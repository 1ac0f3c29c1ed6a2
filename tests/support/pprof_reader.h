// Reading pprof output in tests: our own parse (zlib + the generated protobuf classes) and
// the real consumer, `go tool pprof` (Debian's golang-go), with its text outputs parsed.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "profile.pb.h"
#include "test_support.h"

namespace pbp::test {

namespace pprof = perftools::profiles;

// gunzip (gzip or zlib header); throws on corrupt input.
inline std::string gunzip(const std::string& in) {
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 32) != Z_OK) throw std::runtime_error("inflateInit2");
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = static_cast<uInt>(in.size());
    std::string out;
    char buf[65536];
    int rc;
    do {
        zs.next_out = reinterpret_cast<Bytef*>(buf);
        zs.avail_out = sizeof buf;
        rc = inflate(&zs, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) {
            inflateEnd(&zs);
            throw std::runtime_error("inflate failed: " + std::to_string(rc));
        }
        out.append(buf, sizeof buf - zs.avail_out);
    } while (rc != Z_STREAM_END);
    bool trailing = zs.avail_in != 0;
    inflateEnd(&zs);
    if (trailing) throw std::runtime_error("bytes after the gzip stream");
    return out;
}

// Parses gzip-compressed profile.proto bytes; throws when they are not.
inline pprof::Profile parse_pprof(const std::string& gz) {
    pprof::Profile p;
    if (!p.ParseFromString(gunzip(gz))) throw std::runtime_error("not a profile.proto message");
    return p;
}

inline uint64_t pprof_total(const pprof::Profile& p, int index) {
    uint64_t n = 0;
    for (const auto& s : p.sample()) n += s.value(index);
    return n;
}

// `go tool pprof` is there (Debian's golang-go).
inline bool have_go() { return run({"go", "version"}, 30).status == 0; }

// go tool pprof ARGS... FILE with its own HOME/GOCACHE; -symbolize=none unless told
// otherwise (no symbol lookups, no network).
inline CmdResult go_pprof(std::vector<std::string> args, const std::string& file, bool symbolize_none = true) {
    static const std::string home = temp_dir();
    std::vector<std::string> argv{"env", "HOME=" + home, "GOCACHE=" + home + "/gocache",
                                  "PPROF_TMPDIR=" + home, "GOTOOLCHAIN=local", "go", "tool", "pprof"};
    if (symbolize_none) argv.push_back("-symbolize=none");
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(file);
    return run(argv, 120);
}

// What `go tool pprof -raw` printed.
struct GoRaw {
    std::vector<std::string> sample_types;  // "samples/count", "cpu/nanoseconds[dflt]"
    std::vector<std::vector<int64_t>> values;  // per sample
    std::vector<std::vector<uint64_t>> locations;  // per sample, as printed (leaf first)
    std::vector<std::string> labels;  // per sample: its label lines joined by " "
    std::map<uint64_t, std::string> location_text;  // id -> "name file:line s=start"
    std::string period_type;          // "cpu nanoseconds"
    int64_t period = -1;
    int64_t total(size_t i) const {
        int64_t n = 0;
        for (auto& v : values) n += v.at(i);
        return n;
    }
};

inline GoRaw parse_go_raw(const std::string& text) {
    GoRaw r;
    std::istringstream in(text);
    std::string line;
    enum { kHead, kSampleTypes, kSamples, kLocations, kMappings } state = kHead;
    static const std::regex sample_re(R"(^\s*((?:-?\d+\s+)*-?\d+):((?:\s+\d+)*)\s*$)");
    static const std::regex loc_re(R"(^\s*(\d+): 0x[0-9a-f]+ (?:M=\d+ )?(.*)$)");
    std::smatch m;
    while (std::getline(in, line)) {
        if (state == kHead) {
            if (line.rfind("PeriodType: ", 0) == 0) r.period_type = line.substr(12);
            else if (line.rfind("Period: ", 0) == 0) r.period = std::stoll(line.substr(8));
            else if (line == "Samples:") state = kSampleTypes;
        } else if (state == kSampleTypes) {
            std::istringstream ws(line);
            for (std::string w; ws >> w;) r.sample_types.push_back(w);
            state = kSamples;
        } else if (state == kSamples) {
            if (line == "Locations") {
                state = kLocations;
            } else if (std::regex_match(line, m, sample_re)) {
                std::vector<int64_t> v;
                std::istringstream vs(m[1].str());
                for (int64_t x; vs >> x;) v.push_back(x);
                std::vector<uint64_t> locs;
                std::istringstream ls(m[2].str());
                for (uint64_t x; ls >> x;) locs.push_back(x);
                r.values.push_back(v);
                r.locations.push_back(locs);
                r.labels.emplace_back();
            } else if (!r.labels.empty()) {
                size_t b = line.find_first_not_of(' ');
                if (b != std::string::npos) r.labels.back() += (r.labels.back().empty() ? "" : " ") + line.substr(b);
            }
        } else if (state == kLocations) {
            if (line == "Mappings") state = kMappings;
            else if (std::regex_match(line, m, loc_re)) r.location_text[std::stoull(m[1].str())] = m[2].str();
        }
    }
    return r;
}

// One row of `go tool pprof -top`: flat and cum as printed ("1.23s", "12"), and the name.
struct GoTopRow {
    std::string flat, cum, name;
    double flat_pct = 0, cum_pct = 0;
};

inline std::vector<GoTopRow> parse_go_top(const std::string& text) {
    std::vector<GoTopRow> rows;
    std::istringstream in(text);
    std::string line;
    bool table = false;
    static const std::regex row_re(
        R"(^\s*(\S+)\s+(-?[\d.]+)%\s+(-?[\d.]+)%\s+(\S+)\s+(-?[\d.]+)%\s+(.+?)\s*$)");
    std::smatch m;
    while (std::getline(in, line)) {
        if (!table) {
            table = line.find("flat%") != std::string::npos && line.find("cum%") != std::string::npos;
            continue;
        }
        if (std::regex_match(line, m, row_re))
            rows.push_back({m[1].str(), m[4].str(), m[6].str(), std::stod(m[2].str()), std::stod(m[5].str())});
    }
    return rows;
}

}  // namespace pbp::test
