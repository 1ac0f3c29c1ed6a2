// The SVG flame graph (userspace/export/svg.cpp): read back with a real XML parser
// (tests/tools/svg_frames.py, python3's xml.etree) for its structure and widths, and opened
// in its real consumer, headless Chromium (tests/js/check_svg.mjs), for zoom and search.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "export/exporter.h"
#include "synthetic_profile.h"
#include "test_support.h"
#include "mixed_profile.h"
#include "wall_profile.h"
#include "weighted_profile.h"

namespace pbp {
namespace {

using nlohmann::json;
using test::run;
using test::WeightedProfile;

constexpr double kInner = 1180, kLeft = 10, kFrameHeight = 16;

std::string svg_of(const Profile& p, const ExportOptions& options = {}) {
    auto e = make_exporter("svg");
    EXPECT_NE(e, nullptr);
    if (!e) return "";
    std::ostringstream out;
    e->write(p, options, out);
    return out.str();
}

std::string write_file(const std::string& name, const std::string& data) {
    static const std::string dir = test::temp_dir();
    std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << data;
    return path;
}

// The SVG as svg_frames.py reads it; fails the test when it is not well-formed.
json read_svg(const std::string& svg, const std::string& name = "t.svg") {
    std::string path = write_file(name, svg);
    auto r = run({"/usr/bin/python3", test::tool_path("svg_frames.py"), path});
    EXPECT_EQ(r.status, 0) << r.err;
    if (r.status != 0) return json::object({{"frames", json::array()}});
    return json::parse(r.out);
}

// Frames with their depth (0 = "all") and parent index, rebuilt from document order as the
// page's script does.
struct Drawn {
    std::string label, info, text, fill;
    double x, y, w;
    int depth;
    int parent;
};
std::vector<Drawn> frames_of(const json& doc) {
    std::vector<Drawn> out;
    if (doc["frames"].empty()) return out;
    const double base = doc["frames"][0]["y"].get<double>();
    std::vector<int> stack;
    for (const auto& f : doc["frames"]) {
        Drawn d{f["label"], f["info"], f["text"], f["fill"], f["x"], f["y"], f["w"], 0, -1};
        d.depth = static_cast<int>(std::lround((base - d.y) / kFrameHeight));
        while (!stack.empty() && out[stack.back()].depth >= d.depth) stack.pop_back();
        d.parent = stack.empty() ? -1 : stack.back();
        stack.push_back(static_cast<int>(out.size()));
        out.push_back(d);
    }
    return out;
}

const Drawn* find(const std::vector<Drawn>& fs, const std::string& label) {
    for (const auto& f : fs)
        if (f.label == label) return &f;
    return nullptr;
}

Profile hostile_profile() {
    WeightedProfile wp;
    Profile p = wp.profile;
    const uint32_t main_ = p.frames.intern(Frame{"main", "/app/w.py", 1, false});
    const uint32_t evil = p.frames.intern(Frame{"<lambda>&\"quote'\x01\xff]]></script>", "/app/<x>&y.py", 3, false});
    const uint32_t uni = p.frames.intern(Frame{"grüße_λ_\xF0\x9F\x94\xA5", "/app/ünï.py", 7, false});
    const uint32_t syn = p.frames.intern(Frame{"[truncated]", "", 0, true});
    auto& t = p.processes.at(10).threads.at(10);
    t.name = "thr<&>\x7f";
    t.samples.push_back({WeightedProfile::kStart + 1, p.stacks.intern({main_, evil}), 0, SampleKind::Cpu,
                         WeightedProfile::kPeriod});
    t.samples.push_back({WeightedProfile::kStart + 2, p.stacks.intern({syn, main_, uni}), 0, SampleKind::Cpu,
                         WeightedProfile::kPeriod});
    p.processes.at(20).cmdline = "python3 -c 'a < b && c > \"d\"'";
    return p;
}

// ------------------------------------------------------------------------------ registry

TEST(SvgExport, RegisteredAsSvgWithItsExtension) {
    auto e = make_exporter("svg");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->name(), "svg");
    EXPECT_EQ(e->extension(), "svg");
    EXPECT_EQ(format_for_path("/tmp/flame.svg"), "svg");
    EXPECT_EQ(format_for_path("/tmp/FLAME.SVG"), "svg");
    EXPECT_NE(known_extensions_text().find(".svg"), std::string::npos) << known_extensions_text();
    const std::string how = e->how_to_open("/tmp/f.svg");
    EXPECT_NE(how.find("/tmp/f.svg"), std::string::npos);
    EXPECT_EQ(how.find('\n'), std::string::npos);
}

// --------------------------------------------------------------------------- structure

// Root at the bottom; process, thread, then frames above it; a frame's width is its share of
// the summed weights (not of the sample count: by count cpu_cold would be the widest).
TEST(SvgExport, WidthsFollowTheWeightsRootAtTheBottom) {
    WeightedProfile wp;
    json doc = read_svg(svg_of(wp.profile));
    auto fs = frames_of(doc);
    ASSERT_FALSE(fs.empty());
    EXPECT_TRUE(doc["script"].get<bool>());
    EXPECT_EQ(doc["width"].get<double>(), 1200);
    const uint64_t total = wp.weight_ns("cpu_hot") + wp.weight_ns("cpu_cold") + wp.weight_ns("waits");
    const Drawn& all = fs[0];
    EXPECT_EQ(all.label, "all");
    EXPECT_EQ(all.depth, 0);
    EXPECT_NEAR(all.x, kLeft, 0.006);
    EXPECT_NEAR(all.w, kInner, 0.006);
    EXPECT_NE(all.info.find("8 samples"), std::string::npos) << all.info;
    EXPECT_NE(all.info.find("100.00%"), std::string::npos) << all.info;
    // Leaves by weight, summed over both processes for cpu_cold.
    std::map<std::string, double> leaf_w;
    for (const auto& f : fs)
        if (f.depth == 4) leaf_w[f.label.substr(0, f.label.find(' '))] += f.w;
    for (const char* leaf : {"cpu_hot", "cpu_cold", "waits"})
        EXPECT_NEAR(leaf_w[leaf], kInner * static_cast<double>(wp.weight_ns(leaf)) / total, 0.02) << leaf;
    EXPECT_GT(leaf_w["waits"], leaf_w["cpu_hot"]);
    EXPECT_GT(leaf_w["cpu_hot"], leaf_w["cpu_cold"]);
    // The levels: all, process, thread, main, leaf; each child inside its parent, one row up.
    const Drawn* proc = find(fs, "python3 w.py 10 (pid 10)");
    ASSERT_NE(proc, nullptr);
    EXPECT_EQ(proc->depth, 1);
    const Drawn* thread = nullptr;
    for (const auto& f : fs)
        if (f.label == "MainThread (tid 10)") thread = &f;
    ASSERT_NE(thread, nullptr);
    EXPECT_EQ(thread->depth, 2);
    EXPECT_EQ(fs[static_cast<size_t>(thread->parent)].label, proc->label);
    const Drawn* hot = find(fs, "cpu_hot (/app/w.py:10)");
    ASSERT_NE(hot, nullptr);
    EXPECT_NE(hot->info.find("1 sample,"), std::string::npos) << hot->info;
    EXPECT_NE(hot->info.find("60.6 ms"), std::string::npos) << "6 periods of 10.1 ms: " << hot->info;
    for (const auto& f : fs) {
        if (f.parent < 0) continue;
        const Drawn& p = fs[static_cast<size_t>(f.parent)];
        EXPECT_NEAR(f.y, p.y - kFrameHeight, 0.001) << f.label;
        EXPECT_GE(f.x, p.x - 0.006) << f.label;
        EXPECT_LE(f.x + f.w, p.x + p.w + 0.012) << f.label;
    }
    // Process 10's width is the weight of its samples.
    const uint64_t p10 = total - wp.profile.processes.at(20).threads.at(20).samples[0].weight_ns;
    EXPECT_NEAR(proc->w, kInner * static_cast<double>(p10) / total, 0.01);
}

// Wall mode: the wait leaves are as wide as the time waited and drawn in one blue, apart from
// the frames on CPU; every thread is as wide as its wall time.
TEST(SvgExport, OffCpuLeavesAreBlueAndWeighTheirTime) {
    test::WallProfile wp;
    auto fs = frames_of(read_svg(svg_of(wp.profile)));
    ASSERT_FALSE(fs.empty());
    std::map<std::string, double> leaf_w;  // the wait leaves (depth 5) and hashing (a leaf at depth 4)
    std::set<std::string> wait_fills, cpu_fills;
    for (const auto& f : fs) {
        if (f.depth < 4) continue;
        const std::string name = f.label.substr(0, f.label.find(" ("));
        leaf_w[name] += f.w;
        (name.front() == '[' ? wait_fills : cpu_fills).insert(f.fill);
    }
    const double total = 3000.0 * test::WallProfile::kMs;
    for (const char* leaf : {"[sleeping]", "[waiting for the GIL]", "[waiting for I/O]", "hashing"})
        EXPECT_NEAR(leaf_w[leaf], kInner * static_cast<double>(wp.weight_ns(leaf)) / total, 0.02) << leaf;
    EXPECT_EQ(wait_fills, (std::set<std::string>{"rgb(90,140,225)"}));
    EXPECT_EQ(cpu_fills.count("rgb(90,140,225)"), 0u);
    const Drawn* t10 = find(fs, "MainThread (tid 10)");
    ASSERT_NE(t10, nullptr);
    EXPECT_NEAR(t10->w, kInner / 3, 0.01) << "one second of three";
}

// Every label fits its frame: whole, or its beginning and "..", or nothing when too narrow.
TEST(SvgExport, LabelsAreCutToFitTheirFrames) {
    Profile p = test::synthetic_profile(2, 20, 99);
    auto fs = frames_of(read_svg(svg_of(p)));
    ASSERT_GT(fs.size(), 100u);
    size_t whole = 0, cut = 0, none = 0;
    for (const auto& f : fs) {
        const std::string& t = f.text;
        if (t.empty()) {
            none++;
            continue;
        }
        EXPECT_LE(t.size() * 0.62 * 12, f.w - 6 + 0.01) << t << " in " << f.w << " px";
        if (t == f.label) whole++;
        else {
            ASSERT_GE(t.size(), 3u);
            EXPECT_EQ(t.substr(t.size() - 2), "..") << t;
            EXPECT_EQ(f.label.rfind(t.substr(0, t.size() - 2), 0), 0u) << t << " is not the start of " << f.label;
            cut++;
        }
    }
    EXPECT_GT(whole, 0u);
    EXPECT_GT(cut, 0u);
    EXPECT_GT(none, 0u);
}

// Any frame name, thread name or command line gives a well-formed document: markup
// characters escaped, invalid UTF-8 as U+FFFD, control characters as spaces, "]]>" harmless.
TEST(SvgExport, AnyTextGivesWellFormedXml) {
    const std::string svg = svg_of(hostile_profile());
    json doc = read_svg(svg);
    auto fs = frames_of(doc);
    const Drawn* evil = nullptr;
    for (const auto& f : fs)
        if (f.label.rfind("<lambda>", 0) == 0) evil = &f;
    ASSERT_NE(evil, nullptr) << svg;
    EXPECT_EQ(evil->label, "<lambda>&\"quote' \xEF\xBF\xBD]]></script> (/app/<x>&y.py:3)");
    EXPECT_NE(find(fs, "grüße_λ_\xF0\x9F\x94\xA5 (/app/ünï.py:7)"), nullptr);
    EXPECT_NE(find(fs, "[truncated]"), nullptr);
    EXPECT_NE(find(fs, "thr<&>\x7f (tid 10)"), nullptr);
    EXPECT_NE(find(fs, "python3 -c 'a < b && c > \"d\"' (pid 20)"), nullptr);
    // The script is one CDATA section: no frame text can end it.
    EXPECT_EQ(svg.find("]]>"), svg.rfind("]]>")) << "only the script's own CDATA end";
}

TEST(SvgExport, NoSamplesGivesAValidSvgThatSaysSo) {
    Profile p;
    p.run.target = "pid 42";
    p.processes[42].pid = 42;
    p.processes[42].threads[42].tid = 42;  // seen, never on a CPU
    json doc = read_svg(svg_of(p));
    EXPECT_TRUE(doc["frames"].empty());
    ASSERT_TRUE(doc["empty"].is_string());
    EXPECT_NE(doc["empty"].get<std::string>().find("No samples"), std::string::npos);
    EXPECT_NE(doc["subtitle"].get<std::string>().find("0 samples"), std::string::npos);
}

TEST(SvgExport, DeterministicAndIndependentOfInsertionOrder) {
    EXPECT_EQ(svg_of(hostile_profile()), svg_of(hostile_profile()));
    // The same samples, frames and stacks interned in another order.
    auto build = [](bool reversed) {
        Profile p;
        p.run.rate_hz = 99;
        p.run.period_ns = 10'101'010;
        std::vector<Frame> fr = {{"a", "/x.py", 1, false}, {"b", "/x.py", 2, false}, {"c", "/y.py", 3, false}};
        if (reversed) std::reverse(fr.begin(), fr.end());
        std::map<std::string, uint32_t> id;
        for (auto& f : fr) id[f.name] = p.frames.intern(f);
        std::vector<std::vector<uint32_t>> st = {{id["a"], id["b"]}, {id["a"], id["c"]}, {id["c"]}};
        if (reversed) std::reverse(st.begin(), st.end());
        auto& t = p.processes[7].threads[7];
        p.processes[7].pid = 7;
        t.tid = 7;
        for (auto& s : st)
            for (int k = 0; k < 3; k++) t.samples.push_back({0, p.stacks.intern(s), 0, SampleKind::Cpu, 10'101'010});
        return p;
    };
    EXPECT_EQ(svg_of(build(false)), svg_of(build(true)));
}

// A long run of 20 processes: identical paths are one frame each, nothing narrower than
// 0.1 px is drawn, and the subtitle says how many frames were left out.
TEST(SvgExport, LargeProfilesMergePathsAndElideTinyFrames) {
    Profile p = test::synthetic_profile(20, 120, 99);
    const std::string svg = svg_of(p);
    json doc = read_svg(svg, "large.svg");
    auto fs = frames_of(doc);
    ASSERT_GT(fs.size(), 1000u);
    std::set<std::pair<int, std::string>> seen;
    for (const auto& f : fs) {
        EXPECT_GE(f.w, 0.1 - 0.005) << f.label;
        EXPECT_TRUE(seen.insert({f.parent, f.label}).second) << "two frames for one path: " << f.label;
    }
    const std::string sub = doc["subtitle"];
    EXPECT_NE(sub.find("narrower than 0.1 px not drawn"), std::string::npos) << sub;
    EXPECT_NE(sub.find("all-python"), std::string::npos) << sub;
    EXPECT_LT(svg.size(), 20u << 20) << "bytes";
    // 20 processes, 3 threads each, under "all".
    size_t procs = 0, threads = 0;
    for (const auto& f : fs) procs += f.depth == 1, threads += f.depth == 2;
    EXPECT_EQ(procs, 20u);
    EXPECT_EQ(threads, 60u);
}

TEST(SvgExport, GroupByPodPutsThePodBelowItsProcesses) {
    WeightedProfile wp;
    Profile p = wp.profile;
    p.processes.at(10).labels = {{"pod", "worker-0"}, {"namespace", "dask"}, {"container", "w"}};
    auto fs = frames_of(read_svg(svg_of(p, {"pod"})));
    const Drawn* pod = find(fs, "pod dask/worker-0");
    ASSERT_NE(pod, nullptr);
    EXPECT_EQ(pod->depth, 1);
    const Drawn* proc = find(fs, "python3 w.py 10 (pid 10) [pod dask/worker-0, container w]");
    ASSERT_NE(proc, nullptr);
    EXPECT_EQ(proc->depth, 2);
    EXPECT_EQ(fs[static_cast<size_t>(proc->parent)].label, "pod dask/worker-0");
    const Drawn* other = find(fs, "python3 w.py 20 (pid 20)");
    ASSERT_NE(other, nullptr);
    EXPECT_EQ(other->depth, 1) << "a process in no pod stays at the root";
    auto by_process = frames_of(read_svg(svg_of(p)));
    EXPECT_EQ(find(by_process, "pod dask/worker-0"), nullptr) << "grouped by process unless asked";
}

// ------------------------------------------------------------------ the real consumer

bool chromium_checker_available(std::string& why) {
    if (access((test::source_dir() + "/tests/js/node_modules/playwright-core/package.json").c_str(), F_OK) != 0) {
        why = "tests/js/node_modules missing: run tools/install-deps (npm ci in tests/js)";
        return false;
    }
    if (access("/usr/bin/chromium", X_OK) != 0) {
        why = "/usr/bin/chromium missing: apt-get install -y chromium";
        return false;
    }
    return true;
}

// Headless Chromium: the label shows, a click zooms the frame to the full width, the search
// paints exactly the matching frames; with hostile names (the script reads labels back from
// the document) and no request made.
TEST(SvgExport, ZoomAndSearchWorkInChromium) {
    std::string why;
    PBP_REQUIRE(chromium_checker_available(why), why);
    const std::string path = write_file("hostile.svg", svg_of(hostile_profile()));
    const std::string expect = write_file("hostile.expect.json", R"X({"function": "cpu_hot", "search": "cpu_(hot|cold)"})X");
    PBP_SKIP_BROWSER_CHECK();
    auto r = run({"node", test::source_dir() + "/tests/js/check_svg.mjs", path, expect}, 180);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("ok " + path), std::string::npos) << r.out << r.err;
}

// --native: native frames are aqua and kernel frames orange (flamegraph.pl's colours for C
// code and the kernel), Python frames keep the hot palette; labels as in folded stacks.
TEST(SvgExport, NativeAndKernelFramesHaveTheirColours) {
    auto fs = frames_of(read_svg(svg_of(test::MixedProfile().profile), "mixed.svg"));
    ASSERT_FALSE(fs.empty());
    auto rgb = [](const std::string& fill) {
        int r = -1, g = -1, b = -1;
        std::sscanf(fill.c_str(), "rgb(%d,%d,%d)", &r, &g, &b);
        return std::array<int, 3>{r, g, b};
    };
    int native = 0, kernel = 0, python = 0;
    for (const auto& f : fs) {
        if (f.depth < 3) continue;
        auto [r, g, b] = rgb(f.fill);
        if (f.label.size() > 4 && f.label.substr(f.label.size() - 4) == "_[k]") {
            kernel++;
            EXPECT_TRUE(r >= 190 && g >= 90 && g <= 155 && b == 0) << f.label << " " << f.fill;
        } else if (f.label.back() == ']') {
            native++;
            EXPECT_TRUE(r <= 110 && g >= 165 && b >= 165) << f.label << " " << f.fill;
        } else {
            python++;
            EXPECT_TRUE(r >= 205 && b <= 55) << f.label << " " << f.fill;
        }
    }
    EXPECT_EQ(kernel, 3);
    EXPECT_EQ(native, 5);
    EXPECT_GE(python, 4);
    const Drawn* vfs = find(fs, "vfs_read_[k]");
    ASSERT_NE(vfs, nullptr);
    const Drawn* main_thread = find(fs, "MainThread (tid 4242)");
    ASSERT_NE(main_thread, nullptr);
    EXPECT_NEAR(vfs->w / main_thread->w, 0.25, 0.01) << "25 of MainThread's 100 samples";
}

// In Chromium: a native frame shows and zooms, and a search for the kernel's "_[k]" paints
// the kernel frames.
TEST(SvgExport, NativeAndKernelFramesInChromium) {
    std::string why;
    PBP_REQUIRE(chromium_checker_available(why), why);
    const std::string path = write_file("mixed.svg", svg_of(test::MixedProfile().profile));
    const std::string expect = write_file("mixed.expect.json", R"X({"function": "dgemm_kernel_HASWELL", "search": "_\\[k\\]$"})X");
    PBP_SKIP_BROWSER_CHECK();
    auto r = run({"node", test::source_dir() + "/tests/js/check_svg.mjs", path, expect}, 180);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("ok " + path), std::string::npos) << r.out << r.err;
}

// The checker must be able to fail: a label that is not there, a search that matches nothing.
TEST(SvgExport, ChromiumCheckerRejectsWhatIsNotThere) {
    std::string why;
    PBP_REQUIRE(chromium_checker_available(why), why);
    const std::string path = write_file("weighted.svg", svg_of(WeightedProfile().profile));
    const std::string expect = write_file("absent.expect.json", R"({"function": "not_there", "search": "not_there"})");
    PBP_SKIP_BROWSER_CHECK();
    auto r = run({"node", test::source_dir() + "/tests/js/check_svg.mjs", path, expect}, 180);
    EXPECT_EQ(r.status, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("FAIL " + path), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace pbp
