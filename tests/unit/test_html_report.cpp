// The HTML report (-f html / --report): what it embeds, that it is self-contained, that a
// 1-hour 100-process run stays under 20 MB, the /proc resource sampler, and the page itself
// in headless Chromium (tests/js/check_report.mjs).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "export/common.h"
#include "export/exporter.h"
#include "export/html_report.h"
#include "engine/profile.h"
#include "mixed_profile.h"
#include "synthetic_profile.h"
#include "engine/resource_sampler.h"
#include "test_support.h"
#include "wall_profile.h"
#include "weighted_profile.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace pbp {
namespace {

constexpr uint64_t kStart = 7'000'000'000ULL;
constexpr int64_t kStartUnix = 1'795'260'680'123'456'789LL;  // 2026-11-21T11:31:20.123Z
constexpr uint64_t kPeriod = 10'101'010;                     // 99 Hz

struct Builder {
    Profile p;
    Builder(uint64_t duration_ns = 4'000'000'000ULL) {
        p.run.target = "python3 app.py";
        p.run.command = {"python3", "app.py"};
        p.run.start_mono_ns = kStart;
        p.run.end_mono_ns = kStart + duration_ns;
        p.run.start_unix_ns = kStartUnix;
        p.run.rate_hz = 99;
        p.run.period_ns = kPeriod;
        p.run.version = "0.1.0";
        p.run.kernel = "6.1.0-test";
        p.run.max_depth = 1024;
    }
    uint32_t frame(const std::string& name, const std::string& file, int line) {
        return p.frames.intern(Frame{name, file, line, false});
    }
    ProcessProfile& process(uint32_t pid, const std::string& cmdline) {
        auto& pr = p.processes[pid];
        pr.pid = pr.ns_pid = pid;
        pr.comm = "python3";
        pr.cmdline = cmdline;
        pr.python = "3.11.2 (static /usr/bin/python3.11)";
        return pr;
    }
    ThreadProfile& thread(uint32_t pid, uint32_t tid, const std::string& name) {
        auto& t = p.processes.at(pid).threads[tid];
        t.tid = t.ns_tid = tid;
        t.name = name;
        return t;
    }
    // n samples of stack, one period apart, from at_ms.
    void add(uint32_t pid, uint32_t tid, const std::vector<uint32_t>& stack, uint64_t at_ms, int n) {
        uint32_t s = p.stacks.intern(stack);
        auto& pr = p.processes.at(pid);
        auto& t = pr.threads.at(tid);
        for (int k = 0; k < n; k++) {
            uint64_t ts = kStart + at_ms * 1'000'000ULL + k * kPeriod;
            t.samples.push_back({ts, s, 0, SampleKind::Cpu, kPeriod});
            if (!pr.first_sample_ns || ts < pr.first_sample_ns) pr.first_sample_ns = ts;
            pr.last_sample_ns = std::max(pr.last_sample_ns, ts);
        }
    }
    void resources(uint32_t pid, double cpu, uint64_t rss_mib, int seconds) {
        auto& pr = p.processes.at(pid);
        for (int s = 0; s <= seconds; s++)
            pr.resources.push_back({kStart + s * 1'000'000'000ULL, s ? cpu + (s % 3) : -1.0,
                                    (rss_mib + s) << 20});
    }
};

// Two busy processes with distinct hot functions, one with two threads; the second half of
// the run is spent elsewhere than the first, so a time range changes the totals.
Profile two_process_profile() {
    Builder b;
    uint32_t mod = b.frame("<module>", "/app/app.py", 1);
    uint32_t main_ = b.frame("main", "/app/app.py", 40);
    uint32_t parse = b.frame("Parser.parse_rows", "/app/parse.py", 17);
    uint32_t parse2 = b.frame("Parser.parse_rows", "/app/parse.py", 18);
    uint32_t render = b.frame("render_page", "/app/render.py", 9);
    uint32_t esc = b.frame("html_escape<&>", "/app/render.py", 30);  // hostile characters
    uint32_t crunch = b.frame("crunch_numbers", "/work/calc.py", 5);
    uint32_t gc = b.p.frames.intern(Frame{"[native]", "", 0, true});

    b.process(100, "python3 app.py --serve");
    b.thread(100, 100, "MainThread");
    b.thread(100, 101, "renderer");
    b.add(100, 100, {mod, main_, parse}, 0, 150);      // 0 - 1.5 s
    b.add(100, 100, {mod, main_, parse2}, 1600, 40);
    b.add(100, 101, {mod, render, esc}, 2000, 120);   // 2 - 3.2 s
    b.add(100, 101, {gc}, 3300, 10);
    b.process(200, "python3 calc.py");
    b.thread(200, 200, "MainThread");
    b.add(200, 200, {mod, crunch}, 500, 300);         // 0.5 - 3.5 s
    b.resources(100, 95, 40, 4);
    b.resources(200, 99, 120, 4);
    b.p.run.unresolved["stack evicted before it was read"] = 3;
    b.p.run.lost = 2;
    return b.p;
}

// ---- reading the page back -------------------------------------------------------------

std::string between(const std::string& s, const std::string& a, const std::string& b) {
    size_t i = s.find(a);
    if (i == std::string::npos) return "";
    i += a.size();
    size_t j = s.find(b, i);
    return j == std::string::npos ? "" : s.substr(i, j - i);
}

json embedded_data(const std::string& html) {
    std::string text = between(html, "<script type=\"application/json\" id=\"pbp-data\">", "</script>");
    return json::parse(text, nullptr, false);
}

std::vector<uint64_t> varints(const std::string& b64) {
    static const std::string tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : b64) {
        if (c == '=') break;
        acc = (acc << 6) | static_cast<uint32_t>(tbl.find(c));
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            bytes.push_back(static_cast<char>((acc >> bits) & 0xff));
        }
    }
    std::vector<uint64_t> out;
    uint64_t v = 0;
    int shift = 0;
    for (unsigned char x : bytes) {
        v |= uint64_t(x & 0x7f) << shift;
        if (x & 0x80) shift += 7;
        else out.push_back(v), v = 0, shift = 0;
    }
    return out;
}

std::string unbase64(const std::string& b64) {
    static const std::string tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : b64) {
        if (c == '=') break;
        acc = (acc << 6) | static_cast<uint32_t>(tbl.find(c));
        bits += 6;
        if (bits >= 8) bits -= 8, bytes.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
    return bytes;
}

std::string gunzip(const std::string& gz) {
    z_stream zs{};
    EXPECT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
    std::string out;
    char buf[65536];
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
    zs.avail_in = static_cast<uInt>(gz.size());
    int rc;
    do {
        zs.next_out = reinterpret_cast<Bytef*>(buf);
        zs.avail_out = sizeof buf;
        rc = inflate(&zs, Z_NO_FLUSH);
        out.append(buf, sizeof buf - zs.avail_out);
    } while (rc == Z_OK);
    inflateEnd(&zs);
    EXPECT_EQ(rc, Z_STREAM_END);
    return out;
}

// Sum of the decoded cells of every thread, per function name at the leaf.
struct Decoded {
    uint64_t total = 0, fine_total = 0;
    std::map<std::string, uint64_t> leaf_self;  // function name -> samples
    std::map<uint32_t, uint64_t> per_pid;
};

Decoded decode(const json& d) {
    Decoded r;
    auto nodes = varints(d["nodes"]["b64"]);
    size_t nn = d["nodes"]["n"];
    std::vector<uint64_t> func(nn, 0);
    EXPECT_EQ(nodes.size(), (nn - 1) * 3);
    for (size_t n = 1; n < nn && 3 * (n - 1) + 2 < nodes.size(); n++) {
        EXPECT_GE(n, nodes[3 * (n - 1)]) << "parent before child";
        func[n] = nodes[3 * (n - 1) + 1];
    }
    auto stacks = varints(d["stacks"]["b64"]);
    EXPECT_EQ(stacks.size(), d["stacks"]["n"].get<size_t>());
    for (const auto& p : d["procs"])
        for (const auto& t : p["threads"]) {
            auto c = varints(t["cells"]);
            uint64_t thread_total = 0;
            for (size_t i = 0; i < c.size();) {
                i++;  // bin delta
                uint64_t n = c[i++], s = 0;
                for (uint64_t j = 0; j < n; j++) {
                    s += c[i++];
                    uint64_t count = c[i++];
                    thread_total += count;
                    EXPECT_LT(s, stacks.size());
                    if (s < stacks.size()) r.leaf_self[d["fn"]["name"][func[stacks[s]]].get<std::string>()] += count;
                }
            }
            EXPECT_EQ(thread_total, t["n"].get<uint64_t>()) << "tid " << t["tid"];
            if (t.contains("whole")) {  // the exact whole-run cells of a lossy report: one bin
                auto w = varints(t["whole"]);
                uint64_t whole_total = 0;
                if (!w.empty()) {
                    EXPECT_EQ(w[0], 1u) << "bin 0";
                    for (size_t i = 3; i < w.size(); i += 2) whole_total += w[i];
                    EXPECT_EQ(w[1] * 2 + 2, w.size());
                }
                EXPECT_EQ(whole_total, thread_total);
            }
            r.total += thread_total;
            r.per_pid[p["pid"].get<uint32_t>()] += thread_total;
            auto f = varints(t["fine"]);
            EXPECT_EQ(f.size() % 3, 0u);
            for (size_t i = 1; i < f.size(); i += 3) r.fine_total += f[i];
        }
    return r;
}

// --------------------------------------------------------------------------- content

TEST(HtmlReport, RegisteredAsAFormat) {
    auto e = make_exporter("html");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->extension(), "html");
    EXPECT_NE(e->how_to_open("/tmp/r.html").find("file:///tmp/r.html"), std::string::npos);
}

TEST(HtmlReport, EmbedsTheAggregatedRun) {
    Profile p = two_process_profile();
    std::ostringstream os;
    make_exporter("html")->write(p, {}, os);
    std::string html = os.str();
    ASSERT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
    json d = embedded_data(html);
    ASSERT_FALSE(d.is_discarded());
    EXPECT_EQ(d["format"], "pybpfprof-report");
    EXPECT_EQ(d["run"]["samples"], p.total_samples());
    EXPECT_EQ(d["run"]["target"], "python3 app.py");
    EXPECT_EQ(d["run"]["start_iso"], "2026-11-21T11:31:20.123Z");
    EXPECT_EQ(d["run"]["lost"], 2);
    EXPECT_EQ(d["run"]["unresolved"]["stack evicted before it was read"], 3);
    EXPECT_EQ(d["run"]["kernel"], "6.1.0-test");
    EXPECT_EQ(d["procs"].size(), 2u);
    std::set<std::string> names;
    for (auto& n : d["fn"]["name"]) names.insert(n);
    for (auto n : {"<module>", "main", "Parser.parse_rows", "render_page", "html_escape<&>", "crunch_numbers", "[native]"})
        EXPECT_TRUE(names.count(n)) << n;
    EXPECT_EQ(d["fn"]["name"].size(), names.size()) << "one entry per (function, file): lines merged";

    Decoded r = decode(d);
    EXPECT_EQ(r.total, p.total_samples());
    EXPECT_EQ(r.fine_total, p.total_samples());
    EXPECT_EQ(r.leaf_self["Parser.parse_rows"], 190u);
    EXPECT_EQ(r.leaf_self["crunch_numbers"], 300u);
    EXPECT_EQ(r.leaf_self["html_escape<&>"], 120u);
    EXPECT_EQ(r.per_pid[100], 320u);
    EXPECT_EQ(r.per_pid[200], 300u);
    // The leaf lines survive (the top table's file:line).
    auto nodes = varints(d["nodes"]["b64"]);
    std::set<uint64_t> lines;
    for (size_t i = 2; i < nodes.size(); i += 3) lines.insert(nodes[i]);
    EXPECT_TRUE(lines.count(17) && lines.count(18)) << "leaf lines of Parser.parse_rows";
    // Resources: seconds since start, CPU (null for the first reading), RSS in KiB.
    const json& res = d["procs"][1]["res"];
    EXPECT_EQ(res["t"].size(), 5u);
    EXPECT_TRUE(res["cpu"][0].is_null());
    EXPECT_DOUBLE_EQ(res["cpu"][1].get<double>(), 100.0);
    EXPECT_EQ(res["rss_kib"][0], 120u * 1024);
    EXPECT_DOUBLE_EQ(res["t"][4].get<double>(), 4.0);
    // Timeline bins: 5 periods (50.5 ms) rounded up to 1-2-5 steps: 100 ms over the 4 s run.
    EXPECT_EQ(d["bins"]["fine_ns"], 100'000'000u);
    EXPECT_EQ(d["bins"]["nfine"], 40u);
    EXPECT_EQ(d["bins"]["k"], 1u);
}

TEST(HtmlReport, SelfContainedWithNoNetworkReferences) {
    std::string html = render_html_report(two_process_profile());
    // Every script and style is inline: no src= / href= to anything, no <link>.
    EXPECT_EQ(html.find("<link"), std::string::npos);
    std::regex src(R"(<(script|img|iframe|link|source|embed)\b[^>]*\b(src|href)\s*=)", std::regex::icase);
    EXPECT_FALSE(std::regex_search(html, src));
    std::regex remote(R"((src|href)\s*=\s*["']?\s*(https?:)?//)", std::regex::icase);
    EXPECT_FALSE(std::regex_search(html, remote));
    EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
    EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
    // The libraries are in: d3, d3-flame-graph, uPlot, and the report's own code.
    EXPECT_NE(html.find("d3js.org v7"), std::string::npos);
    EXPECT_NE(html.find("d3-flame-graph"), std::string::npos);
    EXPECT_NE(html.find("uPlot"), std::string::npos);
    EXPECT_NE(html.find("window.pbpReport"), std::string::npos);
    // The template placeholders are all filled, the title escaped.
    EXPECT_EQ(html.find("<!--PBP:"), std::string::npos);
    EXPECT_EQ(html.find("{{"), std::string::npos);
    EXPECT_NE(html.find("<title>pybpfprof report: python3 app.py</title>"), std::string::npos);
    // '<' inside the data cannot close the script element.
    std::string data = between(html, "id=\"pbp-data\">", "</script>");
    EXPECT_EQ(data.find('<'), std::string::npos);
    EXPECT_NE(data.find("html_escape\\u003c&>"), std::string::npos);
}

TEST(HtmlReport, RawDownloadIsTheSpeedscopeJson) {
    Profile p = two_process_profile();
    std::string html = render_html_report(p);
    std::string b64 = between(html, "id=\"pbp-raw\" data-encoding=\"gzip+base64\"", "</script>");
    ASSERT_FALSE(b64.empty());
    b64 = b64.substr(b64.find('>') + 1);
    std::ostringstream want;
    make_exporter("speedscope")->write(p, {}, want);
    EXPECT_EQ(gunzip(unbase64(b64)), want.str());
}

// The report's embedded speedscope JSON is compressed as it is written (GzipStream), never
// held whole: a document many times the stream's 64 KiB buffer, written in pieces of every
// size that fall across its boundaries, inflates back to itself, byte for byte.
TEST(GzipStream, ADocumentWrittenInPiecesInflatesToItself) {
    std::mt19937 rng(7);
    std::string doc;
    std::ostringstream packed;
    GzipStream gz(packed);
    EXPECT_EQ(gz.bytes_in(), 0u);
    for (int i = 0; doc.size() < 3 * 1024 * 1024; i++) {
        std::string piece;
        switch (i % 4) {
            case 0: piece = std::string(1, static_cast<char>('a' + rng() % 26)); gz.put(piece[0]); break;
            case 1: piece = "[" + std::to_string(rng()) + ",1.001001]"; gz << piece; break;
            case 2: piece.assign(70000 + rng() % 5000, static_cast<char>(rng())); gz.write(piece.data(), piece.size()); break;
            default: for (int k = 0; k < 300; k++) piece += static_cast<char>(rng()); gz << piece; break;
        }
        doc += piece;
    }
    EXPECT_TRUE(gz.good());
    EXPECT_EQ(gz.bytes_in(), doc.size());
    gz.finish();
    EXPECT_LT(packed.str().size(), doc.size());
    EXPECT_EQ(gunzip(packed.str()), doc);
    EXPECT_EQ(gunzip(gzip(doc)), doc);
    // Nothing written: still a whole gzip member, of nothing.
    std::ostringstream empty;
    GzipStream none(empty);
    none.finish();
    EXPECT_EQ(gunzip(empty.str()), "");
}

// ... and what the report embeds of a profile whose JSON is megabytes long is that JSON.
TEST(HtmlReport, RawDownloadOfALargeRunIsItsSpeedscopeJson) {
    Profile p = test::synthetic_profile(4, 600, 99);
    std::ostringstream want;
    make_exporter("speedscope")->write(p, {}, want);
    ASSERT_GT(want.str().size(), 1000000u);
    std::string html = render_html_report(p);
    std::string b64 = between(html, "id=\"pbp-raw\" data-encoding=\"gzip+base64\"", "</script>");
    ASSERT_FALSE(b64.empty()) << "not embedded";
    EXPECT_NE(b64.find("data-bytes=\"" + std::to_string(want.str().size()) + "\""), std::string::npos);
    b64 = b64.substr(b64.find('>') + 1);
    EXPECT_EQ(gunzip(unbase64(b64)), want.str());
}

TEST(HtmlReport, EmptyAndIdleRuns) {
    Builder b;
    std::string html = render_html_report(b.p);  // nothing at all
    json d = embedded_data(html);
    ASSERT_FALSE(d.is_discarded());
    EXPECT_EQ(d["run"]["samples"], 0);
    EXPECT_EQ(d["procs"].size(), 0u);
    b.process(5, "python3 idle.py");
    b.thread(5, 5, "MainThread");
    b.resources(5, 0, 10, 2);
    d = embedded_data(render_html_report(b.p));
    ASSERT_FALSE(d.is_discarded());
    EXPECT_EQ(d["procs"][0]["threads"][0]["n"], 0);
    EXPECT_EQ(d["procs"][0]["res"]["t"].size(), 3u);
}

// Samples of different weights (tests/support/weighted_profile.h): the cells, the timeline
// bins and the run totals count weight in units of run.weight_unit_ns, not samples.
TEST(HtmlReport, ExportsSampleWeights) {
    test::WeightedProfile w;
    json d = embedded_data(render_html_report(w.profile));
    ASSERT_FALSE(d.is_discarded());
    const uint64_t unit = d["run"]["weight_unit_ns"];
    EXPECT_EQ(unit, 1u) << "the gcd of these weights";
    EXPECT_EQ(d["run"]["samples"], 8u);
    EXPECT_EQ(d["run"]["cpu_ns"], w.profile.total_weight_ns(SampleKind::Cpu));
    EXPECT_EQ(d["run"]["off_cpu_ns"], w.profile.total_weight_ns(SampleKind::OffCpu));
    const uint64_t all = w.weight_ns("waits") + w.weight_ns("cpu_hot") + w.weight_ns("cpu_cold");
    EXPECT_EQ(d["run"]["weight_units"].get<uint64_t>() * unit, all);
    uint64_t fine = 0, cells = 0;
    std::map<std::string, uint64_t> leaf;
    for (const auto& p : d["procs"])
        for (const auto& t : p["threads"]) {
            auto f = varints(t["fine"]);
            for (size_t i = 1; i < f.size(); i += 3) fine += f[i];
            auto c = varints(t["cells"]);
            auto nodes = varints(d["nodes"]["b64"]);
            auto stacks = varints(d["stacks"]["b64"]);
            for (size_t i = 0; i < c.size();) {
                i++;  // bin delta
                uint64_t n = c[i++], s = 0;
                for (uint64_t j = 0; j < n; j++, i += 2) {
                    s += c[i];
                    cells += c[i + 1];
                    leaf[d["fn"]["name"][nodes[3 * (stacks[s] - 1) + 1]]] += c[i + 1] * unit;
                }
            }
        }
    EXPECT_EQ(fine * unit, all);
    EXPECT_EQ(cells * unit, all);
    EXPECT_EQ(leaf, (std::map<std::string, uint64_t>{{"cpu_cold", w.weight_ns("cpu_cold")},
                                                     {"cpu_hot", w.weight_ns("cpu_hot")},
                                                     {"waits", w.weight_ns("waits")}}));
}

// Weights too fine for 31 bits per thread: the unit grows (1-2-5 steps), totals stay within
// one unit per sample.
TEST(HtmlReport, CoarserUnitForHugeWeights) {
    test::WeightedProfile w;
    auto& t = w.profile.processes.at(10).threads.at(10);
    for (int k = 0; k < 3; k++) t.samples.push_back({t.samples.back().ts_ns + 1, t.samples.back().stack, 0, SampleKind::OffCpu, 3'000'000'001ULL});
    json d = embedded_data(render_html_report(w.profile));
    ASSERT_FALSE(d.is_discarded());
    const uint64_t unit = d["run"]["weight_unit_ns"];
    EXPECT_EQ(unit, 5u) << "9.3 s in one thread: > 2^31 ns";
    const uint64_t all = w.profile.total_weight_ns(SampleKind::Cpu) + w.profile.total_weight_ns(SampleKind::OffCpu);
    const uint64_t got = d["run"]["weight_units"].get<uint64_t>() * unit;
    EXPECT_LE(got > all ? got - all : all - got, 11 * unit / 2);
}

// ------------------------------------------------------------------- the large run

// 100 processes x 1 hour x 99 Hz: a main thread busy 90% of the time and two helper
// threads (10% and 3%), all running one application: ~400 functions in 40 files, a pool
// of ~6000 distinct stacks (depth 6-40, leaf lines and call-site lines vary) drawn with a
// Zipf-like weight that shifts every 5 minutes (phases), plus 1 Hz CPU/RSS readings.
Profile large_profile(int procs, double seconds) { return test::synthetic_profile(procs, seconds, 99, kStart); }

TEST(HtmlReport, HourLongHundredProcessRunStaysUnder20MB) {
    auto t0 = std::chrono::steady_clock::now();
    Profile p = large_profile(100, 3600);
    double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    HtmlReportStats st;
    std::string html = render_html_report(p, {}, {}, &st);
    EXPECT_LT(html.size(), 20'000'000u);
    EXPECT_EQ(st.bytes, html.size());
    std::cout << "[ report   ] " << p.total_samples() << " samples, " << p.processes.size() << " processes, "
              << p.total_threads() << " threads, " << p.stacks.size() << " distinct stacks (generated in " << gen_s
              << " s)\n"
              << "[ report   ] " << html.size() << " bytes in " << st.seconds << " s: timeline bins "
              << st.fine_ns / 1e9 << " s x " << st.nfine << ", selection step " << st.coarse_k << " bins, " << st.cells
              << " cells, " << st.stacks << " report stacks, " << st.nodes << " call-tree nodes, raw "
              << (st.raw_embedded ? "embedded" : "not embedded") << " (" << st.note << ")\n";
    // Still a faithful aggregate: every sample is in the cells.
    json d = embedded_data(html);
    ASSERT_FALSE(d.is_discarded());
    Decoded r = decode(d);
    EXPECT_EQ(r.total, p.total_samples());
    EXPECT_LE(st.nfine, 1000u);
    if (const char* keep = getenv("PBP_REPORT_KEEP")) std::ofstream(std::string(keep) + "/large.html") << html;
}

// The same run with a GIL state on every sample (varying from sample to sample, the worst
// case for the lanes' run-length encoding): the GIL lanes of all 300 threads fit too, and
// the report stays under 20 MB with every sample in its cells.
TEST(HtmlReport, HourLongRunWithGilLanesStaysUnder20MB) {
    Profile p = large_profile(100, 3600);
    uint64_t k = 0;
    for (auto& [_, pr] : p.processes)
        for (auto& [__, t] : pr.threads)
            for (Sample& s : t.samples) s.gil = (++k * 2654435761u >> 7) % 3 ? GilState::Held : GilState::Waiting;
    HtmlReportStats st;
    std::string html = render_html_report(p, {}, {}, &st);
    EXPECT_LT(html.size(), 20'000'000u);
    json d = embedded_data(html);
    ASSERT_FALSE(d.is_discarded());
    EXPECT_EQ(decode(d).total, p.total_samples());
    size_t lanes = 0, bytes = 0;
    for (const auto& pr : d["procs"]) {
        EXPECT_TRUE(pr["gil"].is_object());
        for (const auto& t : pr["threads"])
            if (t["gil"].is_object()) lanes++, bytes += t["gil"]["held"].get<std::string>().size() + t["gil"]["waiting"].get<std::string>().size();
    }
    EXPECT_EQ(lanes, 300u);
    std::cout << "[ report   ] " << html.size() << " bytes with GIL lanes (" << bytes << " bytes of lanes), " << st.note << "\n";
}

// Under a tight budget the report degrades (coarser selection steps, then merged lines,
// then merged cold stacks) but stays complete and within the limit.
TEST(HtmlReport, TightBudgetsDegradeGracefully) {
    Profile p = large_profile(4, 300);
    for (size_t cells : {20000, 2000, 100}) {
        HtmlReportLimits lim;
        lim.max_cells = cells;
        HtmlReportStats st;
        std::string html = render_html_report(p, {}, lim, &st);
        json d = embedded_data(html);
        ASSERT_FALSE(d.is_discarded());
        EXPECT_LE(st.cells, cells) << st.note;
        EXPECT_EQ(decode(d).total, p.total_samples()) << cells;
    }
    HtmlReportLimits small;
    small.max_raw_embed_bytes = 1000;
    HtmlReportStats st;
    std::string html = render_html_report(p, {}, small, &st);
    EXPECT_FALSE(st.raw_embedded);
    EXPECT_NE(html.find("id=\"pbp-raw-missing\""), std::string::npos);
    EXPECT_NE(html.find("write it with -f speedscope"), std::string::npos);
}

// ------------------------------------------------------------------ resource sampler

TEST(ResourceSampler, ParsesProcStat) {
    std::string text =
        "1234 (python3 (x) y) S 1 1234 1234 0 -1 4194560 5000 0 0 0 250 75 0 0 20 0 3 0 987654 123456789 4321 "
        "18446744073709551615 1 1 0 0 0 0 0 16781312 134234626 0 0 0 17 1 0 0 0 0 0\n";
    auto st = parse_proc_stat(text);
    ASSERT_TRUE(st);
    EXPECT_EQ(st->cpu_ticks, 325u);
    EXPECT_EQ(st->start_ticks, 987654u);
    EXPECT_EQ(st->rss_pages, 4321u);
    EXPECT_FALSE(parse_proc_stat("garbage"));
    EXPECT_FALSE(parse_proc_stat("1 (x) S 1 2 3"));
}

TEST(ResourceSampler, ReadsItsOwnProcessAboutOnceASecond) {
    Profile p;
    pid_t self = getpid();
    p.processes[self].pid = self;
    ResourceSampler rs(200'000'000ULL);  // 5 Hz to keep the test short
    std::set<pid_t> pids{self, 4194000 /* no such process */};
    auto now = [] {
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return uint64_t(ts.tv_sec) * 1000000000ULL + ts.tv_nsec;
    };
    auto cpu_now = [] {
        timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return uint64_t(ts.tv_sec) * 1000000000ULL + ts.tv_nsec;
    };
    size_t reads = 0;
    // The CPU time this process used between the readings, as the kernel counts it to the ns:
    // what the sampler's CPU % must match (on a loaded machine the test gets less than a CPU;
    // a fixed floor of 30% failed there with 20-26%).
    std::vector<std::pair<uint64_t, uint64_t>> at;  // (wall, cpu) of each reading
    auto end = now() + 650'000'000ULL;
    volatile double sink = 0;
    while (now() < end) {
        for (int i = 0; i < 100000; i++) sink = sink + std::sqrt(i);  // burn CPU
        const uint64_t wall = now(), cpu = cpu_now();
        if (size_t n = rs.maybe_sample(p, pids, wall)) {
            reads += n;
            at.emplace_back(wall, cpu);
        }
    }
    const auto& v = p.processes[self].resources;
    ASSERT_GE(v.size(), 3u);
    EXPECT_LE(v.size(), 5u);
    EXPECT_EQ(reads, v.size());
    ASSERT_EQ(at.size(), v.size());
    EXPECT_LT(v[0].cpu_pct, 0) << "first reading: no CPU % yet";
    const double used = 100.0 * double(at[1].second - at[0].second) / double(at[1].first - at[0].first);
    EXPECT_GT(used, 5) << "the test burns CPU";
    // /proc counts 10 ms ticks: over 200 ms, 5 points of rounding, and a tick either side.
    EXPECT_NEAR(v[1].cpu_pct, used, 15) << "the kernel's count: " << used << "%";
    EXPECT_LT(v[1].cpu_pct, 150);
    EXPECT_GT(v[1].rss_bytes, 1u << 20);
    for (size_t i = 1; i < v.size(); i++) EXPECT_GT(v[i].mono_ns, v[i - 1].mono_ns);
}

// ------------------------------------------------------------------- in Chromium

bool report_checker_available(std::string& why) {
    const std::string js = test::source_dir() + "/tests/js";
    if (!fs::exists(js + "/node_modules/playwright-core/package.json")) {
        why = "tests/js/node_modules missing: run npm ci in tests/js (tools/install-deps)";
        return false;
    }
    if (!fs::exists("/usr/bin/chromium")) {
        why = "/usr/bin/chromium missing: apt-get install -y chromium";
        return false;
    }
    if (test::run({"node", "--version"}, 30).status != 0) {
        why = "node not found";
        return false;
    }
    return true;
}

test::CmdResult check_report(const std::string& file, const json& expect) {
    std::string exp = file + ".expect.json";
    std::ofstream(exp) << expect.dump();
    return test::run({"node", test::source_dir() + "/tests/js/check_report.mjs", file, exp}, 600);
}

// The page works in a real browser: no errors, no requests, the flame graph shows the
// functions, search highlights, a process click changes the top table and a dragged time
// range changes the totals.
TEST(HtmlReport, WorksInHeadlessChromium) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    std::string dir = test::temp_dir();
    std::string file = dir + "/two.html";
    std::ofstream(file) << render_html_report(two_process_profile());
    if (const char* keep = getenv("PBP_REPORT_KEEP")) fs::copy_file(file, std::string(keep) + "/two.html", fs::copy_options::overwrite_existing);
    PBP_SKIP_BROWSER_CHECK();
    auto r = check_report(file, {{"functions", {"Parser.parse_rows", "crunch_numbers", "render_page"}},
                                 {"search", "parse_rows"},
                                 {"min_processes", 2},
                                 {"resources", true}});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("ok " + file), std::string::npos) << r.out << r.err;
}

// --native: each function's kind and library are embedded (only when a frame is not Python's).
TEST(HtmlReport, EmbedsFrameKindsAndLibraries) {
    test::MixedProfile m;
    json d = embedded_data(render_html_report(m.profile));
    ASSERT_FALSE(d.is_discarded());
    ASSERT_TRUE(d["fn"].contains("kind") && d["fn"].contains("lib"));
    std::map<std::string, std::pair<int, std::string>> by;
    for (size_t i = 0; i < d["fn"]["name"].size(); i++)
        by[d["fn"]["name"][i]] = {d["fn"]["kind"][i].get<int>(), d["files"][d["fn"]["lib"][i].get<size_t>()]};
    using K = std::pair<int, std::string>;
    EXPECT_EQ(by["outer"], K(0, ""));
    EXPECT_EQ(by["b"], K(1, test::MixedProfile::kExtLib));
    EXPECT_EQ(by["read"], K(1, test::MixedProfile::kLibc));
    EXPECT_EQ(by["[k] vfs_read"], K(2, "[kernel]"));
    // A profile of Python frames only has neither.
    json py = embedded_data(render_html_report(two_process_profile()));
    EXPECT_FALSE(py["fn"].contains("kind") || py["fn"].contains("lib"));
}

// In Chromium: Python, native and kernel frames each in their colour; hiding native or
// kernel frames gives their time to their callers (MixedProfile's numbers: with native
// frames hidden, outer's own 15 samples + b's 60; the kernel frames then hang from
// read_loop and worker), in the flame graph and the top table.
TEST(HtmlReport, NativeAndKernelFramesColouredAndHiddenInChromium) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    std::string dir = test::temp_dir();
    std::string file = dir + "/mixed.html";
    std::ofstream(file) << render_html_report(test::MixedProfile().profile);
    if (const char* keep = getenv("PBP_REPORT_KEEP")) fs::copy_file(file, std::string(keep) + "/mixed.html", fs::copy_options::overwrite_existing);
    json kinds = {
        {"native", {"b", "a", "read", "_Py_read", "dgemm_kernel_HASWELL"}},
        {"kernel", {"[k] vfs_read", "[k] ksys_read", "[k] asm_exc_page_fault"}},
        {"python", {"outer", "read_loop", "worker"}},
        {"hide_native", {{"outer", 75}, {"[k] vfs_read", 25}, {"[k] asm_exc_page_fault", 40}}},
        {"hide_kernel", {{"b", 60}, {"read", 25}, {"dgemm_kernel_HASWELL", 40}, {"outer", 15}}},
        {"hide_both", {{"outer", 75}, {"read_loop", 25}, {"worker", 40}}},
        {"top_loc", {{"read", "libc.so.6"}, {"b", "_ext.cpython-311-x86_64-linux-gnu.so (…/ext/ext.c:7)"},
                     {"[k] vfs_read", "[kernel]"}, {"outer", "…/app/main.py:12"}}},
    };
    PBP_SKIP_BROWSER_CHECK();
    auto r = check_report(file, {{"functions", {"outer", "b", "[k] vfs_read"}}, {"search", "vfs_"}, {"kinds", kinds}});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("ok " + file), std::string::npos) << r.out << r.err;
    EXPECT_NE(r.out.find("#hide-native: [k] asm_exc_page_fault=40, [k] vfs_read=25, outer=75"), std::string::npos) << r.out;
    // The checker can fail: a wrong expectation is reported.
    kinds["hide_native"]["outer"] = 15;
    auto bad = check_report(file, {{"functions", {"outer"}}, {"kinds", kinds}});
    EXPECT_NE(bad.status, 0) << bad.out;
    EXPECT_NE(bad.out.find("\"outer\" has self 75, want 15"), std::string::npos) << bad.out;
}

// Processes in Kubernetes pods: a Pods table (one row per pod) that scopes everything to
// the pod's processes; without pod labels there is no Pods section.
TEST(HtmlReport, PodsTableScopesToThePodsProcesses) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    Profile p = two_process_profile();
    auto label = [&](uint32_t pid, const std::string& pod, const std::string& container) {
        auto& l = p.processes.at(pid).labels;
        l["namespace"] = "ray";
        l["pod"] = pod;
        l["pod_uid"] = "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f";
        l["container"] = container;
    };
    label(100, "raycluster-head", "ray-head");
    label(200, "raycluster-worker-1", "ray-worker");
    // a second process in the head pod, and one process in no pod
    auto& pr = p.processes[300];
    pr.pid = pr.ns_pid = 300;
    pr.comm = "python3";
    pr.cmdline = "python3 dashboard.py";
    pr.labels = p.processes.at(100).labels;
    pr.threads[300].tid = 300;
    pr.threads[300].samples.push_back({p.run.start_mono_ns + 100'000'000ULL, 0, 0, SampleKind::Cpu, kPeriod});
    auto& loose = p.processes[400];
    loose.pid = loose.ns_pid = 400;
    loose.cmdline = "python3 host_tool.py";
    loose.threads[400].tid = 400;
    loose.threads[400].samples.push_back({p.run.start_mono_ns + 200'000'000ULL, 0, 0, SampleKind::Cpu, kPeriod});
    std::string dir = test::temp_dir();
    std::ofstream(dir + "/pods.html") << render_html_report(p);
    std::ofstream(dir + "/nopods.html") << render_html_report(two_process_profile());
    PBP_SKIP_BROWSER_CHECK();
    auto r = check_report(dir + "/pods.html", {{"functions", {"crunch_numbers"}},
                                               {"pods", 2},
                                               {"pod_processes", {{"ray/raycluster-head", 2}, {"ray/raycluster-worker-1", 1}}}});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("pod ray/raycluster-worker-1 click scopes to 1 processes"), std::string::npos) << r.out;
    auto r0 = check_report(dir + "/nopods.html", {{"functions", {"crunch_numbers"}}, {"pods", 0}});
    EXPECT_EQ(r0.status, 0) << r0.out << r0.err;
}

// A profile of weighted on- and off-CPU samples draws and totals by weight in the browser.
TEST(HtmlReport, WeightedSamplesWorkInHeadlessChromium) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    std::string file = test::temp_dir() + "/weighted.html";
    std::ofstream(file) << render_html_report(test::WeightedProfile().profile);
    if (const char* keep = getenv("PBP_REPORT_KEEP")) fs::copy_file(file, std::string(keep) + "/weighted.html", fs::copy_options::overwrite_existing);
    PBP_SKIP_BROWSER_CHECK();
    auto r = check_report(file, {{"functions", {"waits", "cpu_hot"}}, {"search", "cpu_"}, {"min_processes", 2}});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("ok " + file), std::string::npos) << r.out << r.err;
}

// A wall mode run with GIL states (tests/support/wall_profile.h): the data carries the
// lanes and utilisation (n/a for the free-threaded process), and Chromium draws them.
TEST(HtmlReport, GilLanesAndUtilisation) {
    test::WallProfile w;
    const std::string html = render_html_report(w.profile);
    json d = embedded_data(html);
    EXPECT_EQ(d["run"]["mode"], "wall");
    EXPECT_EQ(d["run"]["min_block_ns"], 1'000'000u);
    EXPECT_EQ(d["run"]["cpu_ns"], w.profile.total_weight_ns(SampleKind::Cpu));
    EXPECT_EQ(d["run"]["off_cpu_ns"], w.profile.total_weight_ns(SampleKind::OffCpu));
    ASSERT_EQ(d["procs"].size(), 2u);
    EXPECT_EQ(d["procs"][0]["gil"]["held_ns"], 800'000'000u);
    EXPECT_EQ(d["procs"][0]["gil"]["wall_ns"], 1'000'000'000u);
    EXPECT_DOUBLE_EQ(d["procs"][0]["gil"]["share"].get<double>(), 0.8);
    EXPECT_TRUE(d["procs"][1]["gil"].is_null()) << "free-threaded: n/a, not a guess";
    EXPECT_EQ(d["procs"][0]["threads"][0]["gil"]["held_ns"], w.held_ns.at(10));
    EXPECT_EQ(d["procs"][0]["threads"][1]["gil"]["waiting_ns"], w.waiting_ns.at(11));
    EXPECT_TRUE(d["procs"][1]["threads"][0]["gil"].is_null());
    // The timeline spreads an off-CPU interval over the bins it covers: pid 20's thread sleeps
    // 200-1000 ms, so (50 ms bins) it has weight in every bin from 200 ms on, and still the
    // run's total.
    const double fine_ms = d["bins"]["fine_ns"].get<double>() / 1e6;
    const auto fine = varints(d["procs"][1]["threads"][0]["fine"]);
    std::set<uint64_t> bins;
    uint64_t units = 0;
    for (size_t i = 0, b = 0; i + 2 < fine.size(); i += 3) {  // [bin delta, units, function]
        b += fine[i] - (i ? 0 : 1);  // the first delta is from bin -1
        bins.insert(b);
        units += fine[i + 1];
    }
    EXPECT_EQ(units * d["run"]["weight_unit_ns"].get<uint64_t>(), 1'000'000'000u) << "one second of weight";
    for (double ms = 250; ms < 1000; ms += fine_ms) EXPECT_TRUE(bins.count(static_cast<uint64_t>(ms / fine_ms))) << ms;

    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    std::string file = test::temp_dir() + "/gil.html";
    std::ofstream(file) << html;
    if (const char* keep = getenv("PBP_REPORT_KEEP")) fs::copy_file(file, std::string(keep) + "/gil.html", fs::copy_options::overwrite_existing);
    PBP_SKIP_BROWSER_CHECK();
    auto r = check_report(file, {{"functions", {"spin", "crunch", "[waiting for the GIL]"}},
                                 {"min_processes", 2},
                                 {"gil", {{"lanes", 4},
                                          {"held_s", {{"10", 0.5}, {"11", 0.3}}},
                                          {"waiting_s", {{"10", 0.3}, {"11", 0.5}}},
                                          {"na", {20}},
                                          {"util", {{"10", "80%"}, {"20", "n/a"}}},
                                          {"mode", "wall"}}}});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("ok " + file), std::string::npos) << r.out << r.err;
    EXPECT_NE(r.out.find("4 GIL lanes drawn"), std::string::npos) << r.out;
}

// A profile that is hard to lay out: long function names, deep paths, long command lines (the
// launched one, in the title, with a 190-character word), merge labels (a Where column), three
// processes with CPU/RSS readings.
Profile wide_profile() {
    Profile p = two_process_profile();
    Builder b;
    b.p = p;
    std::string word = "--run_id=nightly";
    while (word.size() < 190) word += "_feature_engineering_backfill";
    b.p.run.command = {"python3", "-m", "analytics.worker", word};
    b.p.run.target = "python3 -m analytics.worker " + word;
    uint32_t mod = b.frame("<module>", "/app/app.py", 1);
    uint32_t deep = b.frame("analytics.pipelines.FeatureEngineeringPipeline.compute_rolling_window_statistics_for_every_column",
                            "/opt/venvs/analytics-prod-2026/lib/python3.11/site-packages/analytics/pipelines/feature_engineering.py", 1234);
    uint32_t other = b.frame("ReportRenderer.render_everything_with_a_name_that_keeps_going",
                             "/srv/applications/reporting/very/deep/package/structure/renderer_implementation.py", 77);
    b.process(300, "/opt/venvs/analytics-prod-2026/bin/python3.11 -m analytics.worker --config /etc/analytics/worker-production.yaml "
                   "--queue=high-priority-feature-engineering --concurrency=16 --log-level=info");
    b.thread(300, 300, "MainThread");
    b.thread(300, 301, "ThreadPoolExecutor-0_0-feature-worker");
    b.add(300, 300, {mod, deep}, 100, 200);
    b.add(300, 301, {mod, other}, 1500, 150);
    b.resources(300, 180, 2400, 4);
    for (uint32_t pid : {100u, 200u, 300u}) {
        b.p.processes.at(pid).labels["role"] = pid == 100 ? "scheduler-with-a-long-role-name" : "worker";
        b.p.processes.at(pid).labels["host"] = "node-" + std::to_string(pid) + ".cluster.example.internal";
    }
    return b.p;
}

// At 1400x1000 and 1000x800 every column of every table is in view, nothing sideways (the
// title with its long word is cut to one line, its full text in its tooltip; screenshots kept in
// the test's temp dir); the charts share the timeline's axis.
TEST(HtmlReport, EveryColumnVisibleAt1400And1000Wide) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    std::string dir = test::temp_dir();
    std::string file = dir + "/wide.html";
    std::ofstream(file) << render_html_report(wide_profile());
    if (const char* keep = getenv("PBP_REPORT_KEEP")) fs::copy_file(file, std::string(keep) + "/wide.html", fs::copy_options::overwrite_existing);
    PBP_SKIP_BROWSER_CHECK();
    auto r = check_report(file, {{"functions", {"crunch_numbers"}},
                                 {"min_processes", 3},
                                 {"resources", true},
                                 {"layout", {{"dir", dir}, {"min_columns", 15}}}});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("1400x1000: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("1000x800: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("charts on the timeline's axis"), std::string::npos) << r.out;
    for (const char* png : {"report-1400x1000.png", "report-1000x800.png"}) {
        EXPECT_TRUE(fs::exists(dir + "/" + png)) << png;
        if (const char* keep = getenv("PBP_REPORT_KEEP"))  // the temp dir goes with the test
            fs::copy_file(dir + "/" + png, std::string(keep) + "/" + png, fs::copy_options::overwrite_existing);
    }
    std::cout << r.out << "screenshots in " << dir << "\n";
}

// A 950-deep recursion: the flame graph keeps a bounded box (its own scroll), the chain is
// collapsed into one bar that expands on click, and the tables start within a screen.
TEST(HtmlReport, DeepRecursionKeepsTheFlameGraphBounded) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    Builder b;
    uint32_t mod = b.frame("<module>", "/app/deep.py", 1);
    uint32_t main_ = b.frame("main", "/app/deep.py", 20);
    uint32_t rec = b.frame("recurse", "/app/deep.py", 8);
    uint32_t leaf = b.frame("leaf_work", "/app/deep.py", 3);
    uint32_t side = b.frame("side_task", "/app/deep.py", 30);
    std::vector<uint32_t> stack = {mod, main_};
    for (int i = 0; i < 947; i++) stack.push_back(rec);
    stack.push_back(leaf);
    ASSERT_EQ(stack.size(), 950u);
    b.process(100, "python3 deep.py");
    b.thread(100, 100, "MainThread");
    b.add(100, 100, stack, 0, 300);
    b.add(100, 100, {mod, main_, side}, 3000, 60);
    b.resources(100, 99, 30, 4);
    std::string file = test::temp_dir() + "/deep.html";
    std::ofstream(file) << render_html_report(b.p);
    if (const char* keep = getenv("PBP_REPORT_KEEP")) fs::copy_file(file, std::string(keep) + "/deep.html", fs::copy_options::overwrite_existing);
    PBP_SKIP_BROWSER_CHECK();
    auto r = check_report(file, {{"functions", {"main", "side_task"}},
                                 {"flame_bounded", {{"collapsed_at_least", 900}}},
                                 {"resources", true}});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("flame graph: box"), std::string::npos) << r.out;
    std::cout << r.out;
}

// 160 threads over 5 processes: the timeline groups them by process (collapsible), every row
// keeps a readable label named after its thread, down to the last row.
TEST(HtmlReport, ManyThreadsTimelineGroupedByProcess) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    Builder b;
    uint32_t mod = b.frame("<module>", "/app/pool.py", 1);
    uint32_t work = b.frame("work", "/app/pool.py", 10);
    json names = json::object();
    for (uint32_t pid = 1000; pid < 1005; pid++) {
        b.process(pid, "python3 pool.py --worker " + std::to_string(pid));
        for (uint32_t i = 0; i < 32; i++) {
            uint32_t tid = pid * 100 + i;
            std::string name = "pool-" + std::to_string(pid) + "-thread-" + std::to_string(i);
            b.thread(pid, tid, name);
            b.add(pid, tid, {mod, work}, (i * 97) % 3500, 20);
            if (i % 8 == 0) names[std::to_string(tid)] = name;
        }
    }
    std::string file = test::temp_dir() + "/threads.html";
    std::ofstream(file) << render_html_report(b.p);
    if (const char* keep = getenv("PBP_REPORT_KEEP")) fs::copy_file(file, std::string(keep) + "/threads.html", fs::copy_options::overwrite_existing);
    PBP_SKIP_BROWSER_CHECK();
    auto r = check_report(file, {{"functions", {"work"}},
                                 {"timeline", {{"min_rows", 165}, {"groups", 5}, {"thread_names", names}}}});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("timeline: 165 rows (5 process groups, 160 thread rows)"), std::string::npos) << r.out;
    std::cout << r.out;
}

// 1000 threads with GIL states over 2 processes: the GIL section groups them as the timeline
// does and, with more than 300 rows, starts with both groups closed (the legend counts the
// threads in them, none is left out); opened, a group draws each of its 500 threads' lanes. Its
// box stays at most 300 px high and the flame graph starts within 1.5 window heights, at
// 1400x1000 and 1000x800.
TEST(HtmlReport, ThousandThreadGilLanesStayBoundedAndGrouped) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    Builder b;
    b.p.run.mode = ProfileMode::Wall;
    uint32_t mod = b.frame("<module>", "/app/pool.py", 1);
    uint32_t work = b.frame("work", "/app/pool.py", 10);
    const uint32_t s = b.p.stacks.intern({mod, work});
    for (uint32_t pid : {1000u, 2000u}) {
        auto& pr = b.process(pid, "python3 pool.py --workers 500");
        for (uint32_t i = 0; i < 500; i++) {
            auto& t = b.thread(pid, pid + 1 + i, "worker-" + std::to_string(i));
            for (uint64_t k = 0; k < 20; k++) {  // (no real GIL: many hold it at once; the layout is checked)
                const uint64_t ts = kStart + (k * 190 + i % 97) * 1'000'000ULL;
                Sample smp{ts, s, 0, SampleKind::Cpu, kPeriod};
                smp.gil = k % 4 ? GilState::Held : GilState::Waiting;
                t.samples.push_back(smp);
                if (!pr.first_sample_ns || ts < pr.first_sample_ns) pr.first_sample_ns = ts;
                pr.last_sample_ns = std::max(pr.last_sample_ns, ts);
            }
        }
    }
    std::string file = test::temp_dir() + "/gil1000.html";
    std::ofstream(file) << render_html_report(b.p);
    if (const char* keep = getenv("PBP_REPORT_KEEP")) fs::copy_file(file, std::string(keep) + "/gil1000.html", fs::copy_options::overwrite_existing);
    PBP_SKIP_BROWSER_CHECK();
    auto r = check_report(file, {{"functions", {"work"}},
                                 {"gil", {{"groups", 2}, {"threads", 1000}, {"scrolls", false},
                                          {"max_box_h", 300}, {"flame_within_screens", 1.5}}}});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("GIL rows: 2 (2 process groups, 0 threads, 1000 in closed groups"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("opening pid 1000: 1000 GIL lanes drawn"), std::string::npos) << r.out;
    std::cout << r.out;
}

// Two processes running the same functions, one of them recursing deep: the flame graph has
// one node per process under the root, each with its own total.
TEST(HtmlReport, FlameGraphHasAProcessLevel) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    Builder b;
    uint32_t mod = b.frame("<module>", "/app/worker.py", 1);
    uint32_t run = b.frame("run_task", "/app/worker.py", 12);
    uint32_t rec = b.frame("walk_tree", "/app/worker.py", 40);
    uint32_t hot = b.frame("hash_block", "/app/worker.py", 55);
    std::vector<uint32_t> deep = {mod, run};
    for (int i = 0; i < 60; i++) deep.push_back(rec);
    deep.push_back(hot);
    for (uint32_t pid : {100u, 200u}) {
        b.process(pid, "python3 worker.py");
        b.thread(pid, pid, "MainThread");
    }
    b.add(100, 100, deep, 0, 400);
    b.add(100, 100, {mod, run, hot}, 3000, 20);
    b.add(200, 200, {mod, run, hot}, 0, 150);
    b.add(200, 200, {mod, run, rec, hot}, 2000, 30);
    std::string file = test::temp_dir() + "/procs.html";
    std::ofstream(file) << render_html_report(b.p);
    if (const char* keep = getenv("PBP_REPORT_KEEP")) fs::copy_file(file, std::string(keep) + "/procs.html", fs::copy_options::overwrite_existing);
    PBP_SKIP_BROWSER_CHECK();
    auto r = check_report(file, {{"functions", {"run_task", "hash_block"}},
                                 {"min_processes", 2},
                                 {"process_level", {{"100", 420}, {"200", 180}}}});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("flame graph process level: 100=420, 200=180"), std::string::npos) << r.out;
    std::cout << r.out;
}

// The checker fails on a broken page.
TEST(HtmlReport, CheckerRejectsABrokenPage) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    std::string dir = test::temp_dir();
    std::string html = render_html_report(two_process_profile());
    std::string net = html;
    net.replace(net.find("</body>"), 7, "<img src=\"http://127.0.0.1:9/x.png\"></body>");
    std::string broken = html;
    const std::string init = "window.pbpReport = {";
    ASSERT_NE(broken.find(init), std::string::npos);
    broken.replace(broken.find(init), init.size(), "window.pbpReport.x.y = {");  // a TypeError at load
    std::ofstream(dir + "/net.html") << net;
    std::ofstream(dir + "/broken.html") << broken;
    json expect = {{"functions", {"crunch_numbers"}}, {"search", "crunch"}};
    PBP_SKIP_BROWSER_CHECK();
    auto r1 = check_report(dir + "/net.html", expect);
    EXPECT_EQ(r1.status, 1) << r1.out << r1.err;
    EXPECT_NE(r1.out.find("request"), std::string::npos) << r1.out;
    auto r2 = check_report(dir + "/broken.html", expect);
    EXPECT_EQ(r2.status, 1) << r2.out << r2.err;
    auto r3 = check_report(dir + "/net.html", {{"functions", {"no_such_function_anywhere"}}});
    EXPECT_EQ(r3.status, 1) << r3.out << r3.err;
}

// The large report stays usable: it loads and re-scopes within seconds.
TEST(HtmlReport, LargeReportIsUsableInChromium) {
    std::string why;
    PBP_REQUIRE(report_checker_available(why), why);
    std::string dir = test::temp_dir();
    std::string file = dir + "/large.html";
    // Skipped before the profile is drawn: the same profile (its generator's seed is fixed)
    // is drawn and rendered by HourLongHundredProcessRunStaysUnder20MB.
    PBP_SKIP_BROWSER_CHECK();
    {
        Profile p = large_profile(100, 3600);
        std::ofstream(file) << render_html_report(p);
    }
    auto r = check_report(file, {{"functions", {"<module>"}}, {"search", "function_1"}, {"min_processes", 2},
                                 {"max_ready_ms", 30000}, {"max_update_ms", 10000}});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    std::cout << r.out;
}

}  // namespace
}  // namespace pbp
