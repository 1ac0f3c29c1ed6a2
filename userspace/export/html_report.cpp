// The performance report: one self-contained HTML file (no network, works from file://).
//
// The page is report/src/template.html with the pinned browser libraries (d3,
// d3-flame-graph, uPlot: report/package-lock.json) and report/src/report.{js,css} inlined;
// all of them are compiled into the binary (report/embed.cmake). The data is aggregated
// here before it is embedded, so a long run with many processes stays small:
//
//  - functions: (qualname, file; with --native also kind and library) -> one entry; lines are kept only where the time is spent
//    (the leaf frame's line), so the flame graph is per function and the top table can
//    still say file:line;
//  - time is counted in weight units (run.weight_unit_ns): a sample counts its weight
//    (Sample::weight_ns) in units, rounded; the unit is the greatest common divisor of the
//    weights (made coarser only if a thread's total would not fit 31 bits), so in an
//    ordinary on-CPU profile, where every sample weighs one sampling period, one unit is
//    one period and every count below is a number of samples;
//  - a call tree of the whole run: node = (parent, function, leaf line or 0); each distinct
//    sampled stack is one node, numbered by weight (hot stacks get small numbers);
//  - per thread, "fine" bins (at most kMaxFineBins per run) with the weight and the
//    hottest leaf function: the timeline (an off-CPU interval is spread over the bins of
//    [ts - weight, ts]; an aggregate one, the sum of many short ones, stays at ts);
//  - per thread, "cells" (coarse bin, stack, weight), coarse bin = k fine bins: what the
//    flame graph, the tables and the totals are computed from for any selected time range /
//    process / thread. k is the smallest that keeps the cells under a budget (max_cells);
//    when that would leave fewer than kMinSteps selection steps (long runs with many
//    threads and stacks), a lossy mode keeps ~kLossySteps steps instead: in each
//    (thread, interval), the stacks that weigh less than min_count units are merged into a
//    "[rare stacks]" frame under their nearest caller that is hot in the whole run. Totals
//    stay exact (every sample is still in its thread and interval), only the rarest deep
//    detail is merged; the whole run's cells (the view the page opens with) are then
//    embedded exactly as well when they take at most half the budget;
//  - per thread, the GIL lanes: per fine bin the share of the bin it held the GIL and waited
//    for it (permille, run-length encoded), from the samples' GIL state and weight spread
//    over [ts - weight, ts]; per process the GIL utilisation (held time / its wall time);
//    both null (shown as n/a) when no sample knows its GIL state;
//  - per process, CPU % and RSS over time (ResourceSampler, ~1 Hz, downsampled to <= 1000
//    points);
//  - the run summary, and the speedscope JSON of the same run (write_speedscope), gzipped,
//    as a download when it fits the size budget (the whole file stays under kMaxFileBytes).
//
// Integer sequences are unsigned LEB128 varints, base64-encoded (report.js decodes them).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <map>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "export/common.h"
#include "export/exporter.h"
#include "export/html_report.h"
#include "export/speedscope.h"

#ifndef PYBPFPROF_VERSION
#define PYBPFPROF_VERSION "unknown"
#endif

namespace pbp {

namespace report_assets {
struct Asset {
    const char* name;
    const unsigned char* data;
    size_t size;
};
extern const Asset kAssets[];
extern const size_t kAssetCount;
}  // namespace report_assets

namespace {

using nlohmann::json;

std::string_view asset(const char* name) {
    for (size_t i = 0; i < report_assets::kAssetCount; i++)
        if (std::string_view(report_assets::kAssets[i].name) == name)
            return {reinterpret_cast<const char*>(report_assets::kAssets[i].data), report_assets::kAssets[i].size};
    throw std::logic_error(std::string("HTML report asset not compiled in: ") + name);
}

// ---- encoding ----------------------------------------------------------------------

void put_varint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<char>((v & 0x7f) | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<char>(v));
}

std::string html_escape(const std::string& s) {
    std::string r;
    for (char c : s) {
        switch (c) {
            case '&': r += "&amp;"; break;
            case '<': r += "&lt;"; break;
            case '>': r += "&gt;"; break;
            case '"': r += "&quot;"; break;
            default: r += c;
        }
    }
    return r;
}

// JSON text that is safe inside <script type="application/json">: '<' (only possible in
// strings) becomes \u003c, so no "</script" or "<!--" can appear.
std::string script_safe_json(const json& j) {
    std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
    std::string r;
    r.reserve(s.size() + 64);
    for (char c : s) {
        if (c == '<') r += "\\u003c";
        else r += c;
    }
    return r;
}

// Smallest 1, 2 or 5 x 10^k that is >= x (x >= 1).
uint64_t nice_ceil(uint64_t x) {
    for (uint64_t p = 1;; p *= 10)
        for (uint64_t m : {1, 2, 5})
            if (m * p >= x) return m * p;
}

// ---- aggregation -------------------------------------------------------------------

constexpr uint32_t kNone = UINT32_MAX;
constexpr uint64_t kCoarseSteps[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000};
// Below this many selection steps per run, exact cells give way to the lossy mode.
constexpr uint64_t kMinSteps = 100;
constexpr uint64_t kLossySteps = 150;  // the selection steps the lossy mode aims for

struct NodeKey {
    uint32_t parent, func;
    int32_t line;
    bool operator==(const NodeKey& o) const { return parent == o.parent && func == o.func && line == o.line; }
};
struct NodeKeyHash {
    size_t operator()(const NodeKey& k) const {
        uint64_t h = (uint64_t(k.parent) << 32 | k.func) * 0x9e3779b97f4a7c15ULL;
        return h ^ (uint64_t(uint32_t(k.line)) * 0xc2b2ae3d27d4eb4fULL) ^ (h >> 29);
    }
};

// The weight (in units) of one report stack in one bin of one thread.
struct Cell {
    uint32_t bin, rs, count;
};
using Cells = std::vector<Cell>;  // one thread's, sorted by (bin, rs)

struct Lossy {
    bool on = false;
    uint64_t min_count = 0;  // a stack weighing fewer units in a (thread, interval) is merged...
    uint64_t hot = 0;        // ...into "[rare stacks]" under its nearest caller with this many
                             // units in the whole run
    uint64_t merged = 0;     // units merged
    bool whole = false;      // exact whole-run cells are embedded too (the default view)
};

class Aggregation {
public:
    Aggregation(const Profile& p, const HtmlReportLimits& lim) : p_(p), lim_(lim), fns_(p.frames) {}
    json build(std::string& note);

private:
    // A synthetic function of the report's own ("[rare stacks]"), made once.
    uint32_t extra_fn(const std::string& name) { return fns_.intern(name, "", true); }
    uint32_t node(uint32_t parent, uint32_t func, int32_t line);
    void choose_unit();
    uint64_t units(const Sample& s) const { return (s.weight_ns + unit_ns_ / 2) / unit_ns_; }
    json functions_json(json& files) const;
    void call_tree();
    template <class F>
    void for_thread_samples(const ThreadProfile& t, F f) const;
    uint32_t fine_bin(uint64_t ts) const {
        uint64_t rel = ts > t0_ ? ts - t0_ : 0;
        return static_cast<uint32_t>(std::min<uint64_t>(rel / fine_ns_, nfine_ - 1));
    }
    Cells fine_cells(const ThreadProfile& t) const;
    static Cells coarsen(const Cells& c, uint64_t k, size_t nrs);
    static uint64_t count_coarse(const std::vector<Cells>& all, uint64_t k, size_t nrs);
    std::vector<uint32_t> hot_callers(uint64_t hot) const;
    uint64_t count_lossy(const std::vector<Cells>& all, uint64_t min_count, const std::vector<uint32_t>& anc) const;
    std::vector<Cells> apply_lossy(const std::vector<Cells>& all, uint64_t min_count, const std::vector<uint32_t>& anc,
                                   uint64_t& merged);
    std::string encode_fine(const Cells& c) const;
    static std::string encode_cells(const Cells& c);
    json tasks_json(std::vector<json>& pcells);
    json gil_lanes(const ThreadProfile& t) const;
    json gil_utilisation(const ProcessProfile& pr) const;

    const Profile& p_;
    const HtmlReportLimits& lim_;
    std::vector<const ThreadProfile*> threads_;  // in output order
    std::vector<uint64_t> stack_count_;          // per Profile stack: its units
    FunctionTable fns_;
    uint64_t unit_ns_ = 1;                       // what one unit of weight stands for
    std::unordered_map<NodeKey, uint32_t, NodeKeyHash> node_index_;
    std::vector<uint32_t> node_parent_, node_func_;
    std::vector<uint64_t> node_incl_;  // units in the node's subtree (whole run)
    std::vector<int32_t> node_line_;
    std::vector<uint32_t> rstack_node_;  // report stack -> node, by units (descending)
    std::vector<uint32_t> rstack_of_;    // Profile stack -> report stack
    std::vector<uint32_t> leaf_func_;    // report stack -> leaf function
    uint64_t t0_ = 0, fine_ns_ = 1, nfine_ = 1, k_ = 1;
    uint64_t span_ns_ = 1;
};

uint32_t Aggregation::node(uint32_t parent, uint32_t func, int32_t line) {
    auto [it, added] = node_index_.emplace(NodeKey{parent, func, line}, static_cast<uint32_t>(node_parent_.size()));
    if (added) {
        node_parent_.push_back(parent);
        node_func_.push_back(func);
        node_line_.push_back(line);
        node_incl_.push_back(0);
    }
    return it->second;
}

void Aggregation::choose_unit() {
    uint64_t g = 0, most = 0;
    for (const auto& [_, pr] : p_.processes)
        for (const auto& [__, t] : pr.threads) {
            uint64_t sum = 0;
            for (const Sample& s : t.samples) g = std::gcd(g, s.weight_ns), sum += s.weight_ns;
            most = std::max(most, sum);
        }
    unit_ns_ = g ? g : sampling_period_ns(p_.run);
    constexpr uint64_t kMaxUnits = 1ULL << 31;
    if (most / unit_ns_ >= kMaxUnits) unit_ns_ = nice_ceil(most / kMaxUnits + 1);
}

// The functions (fn) and their files (files), each file once. With --native (a function
// that is not Python's) also each function's kind (0 Python, 1 native, 2 kernel: coloured
// apart, and hidden by the page's "hide native/kernel frames") and library (an index into
// files, like file).
json Aggregation::functions_json(json& files) const {
    std::unordered_map<std::string, uint32_t> file_idx;
    std::vector<std::string> name, file_names;
    std::vector<uint32_t> file, lib;
    std::vector<int> line, kind;
    bool kinds = false;
    auto file_index = [&](const std::string& f) {
        auto [it, added] = file_idx.emplace(f, static_cast<uint32_t>(file_names.size()));
        if (added) file_names.push_back(f);
        return it->second;
    };
    for (const Function& f : fns_.all()) {
        name.push_back(f.name);
        file.push_back(file_index(f.file));
        line.push_back(f.first_line);
        kind.push_back(static_cast<int>(f.kind));
        lib.push_back(file_index(f.library));
        kinds |= f.kind != FrameKind::Python;
    }
    files = file_names;
    json fn = {{"name", name}, {"file", file}, {"line", line}};
    if (kinds) fn["kind"] = kind, fn["lib"] = lib;
    return fn;
}

// The call tree of the run (node 0 = root; a node's parent comes before it) and the
// report stacks: the distinct sampled stacks, each one node, numbered by sample count.
void Aggregation::call_tree() {
    node_parent_.assign(1, kNone);
    node_func_.assign(1, kNone);
    node_line_.assign(1, 0);
    node_incl_.assign(1, 0);
    node_index_.clear();
    std::vector<uint32_t> node_of_stack(p_.stacks.size(), kNone);
    for (uint32_t s = 0; s < p_.stacks.size(); s++) {
        if (!stack_count_[s]) continue;
        const auto& st = p_.stacks.at(s);
        uint32_t n = st.empty() ? node(0, extra_fn("[no frames]"), 0) : 0;
        for (size_t i = 0; i < st.size(); i++) {
            const Frame& f = p_.frames.at(st[i]);
            bool leaf = i + 1 == st.size();
            n = node(n, fns_.of_frame(st[i]), leaf && !f.synthetic ? f.line : 0);
        }
        node_of_stack[s] = n;
    }
    std::vector<uint64_t> node_count(node_parent_.size(), 0);
    for (uint32_t s = 0; s < p_.stacks.size(); s++)
        if (node_of_stack[s] != kNone) node_count[node_of_stack[s]] += stack_count_[s];
    node_incl_ = node_count;
    for (size_t n = node_incl_.size(); n-- > 1;) node_incl_[node_parent_[n]] += node_incl_[n];
    std::vector<uint32_t> leaves;
    for (uint32_t n = 0; n < node_count.size(); n++)
        if (node_count[n]) leaves.push_back(n);
    std::stable_sort(leaves.begin(), leaves.end(),
                     [&](uint32_t a, uint32_t b) { return node_count[a] > node_count[b]; });
    std::vector<uint32_t> rs_of_node(node_parent_.size(), kNone);
    rstack_node_.clear();
    for (uint32_t n : leaves) rs_of_node[n] = static_cast<uint32_t>(rstack_node_.size()), rstack_node_.push_back(n);
    rstack_of_.assign(p_.stacks.size(), kNone);
    for (uint32_t s = 0; s < p_.stacks.size(); s++)
        if (node_of_stack[s] != kNone) rstack_of_[s] = rs_of_node[node_of_stack[s]];
    leaf_func_.resize(rstack_node_.size());
    for (size_t r = 0; r < rstack_node_.size(); r++) leaf_func_[r] = node_func_[rstack_node_[r]];
}

// Calls f(sample) for t's samples in time order (sorting a copy only if needed).
template <class F>
void Aggregation::for_thread_samples(const ThreadProfile& t, F f) const {
    bool sorted = std::is_sorted(t.samples.begin(), t.samples.end(),
                                 [](const Sample& a, const Sample& b) { return a.ts_ns < b.ts_ns; });
    if (sorted) {
        for (const Sample& s : t.samples) f(s);
        return;
    }
    std::vector<Sample> v = t.samples;
    std::stable_sort(v.begin(), v.end(), [](const Sample& a, const Sample& b) { return a.ts_ns < b.ts_ns; });
    for (const Sample& s : v) f(s);
}

// Exact cells of one thread at the fine bins.
Cells Aggregation::fine_cells(const ThreadProfile& t) const {
    Cells out;
    std::vector<uint32_t> count(rstack_node_.size(), 0), touched;
    int64_t cur = -1;
    auto flush = [&]() {
        std::sort(touched.begin(), touched.end());
        for (uint32_t r : touched) out.push_back({static_cast<uint32_t>(cur), r, count[r]}), count[r] = 0;
        touched.clear();
    };
    // An off-CPU interval longer than a bin covers [ts - weight, ts]: its units are spread
    // over the bins it overlaps (cumulative rounding keeps their sum exact), so the timeline
    // and a selected range show the wait where it happened. The bins before ts's go aside and
    // are merged in at the end; everything else takes the in-order path.
    Cells before;
    for_thread_samples(t, [&](const Sample& s) {
        uint32_t r = s.stack < rstack_of_.size() ? rstack_of_[s.stack] : kNone;
        if (r == kNone) return;
        int64_t b = fine_bin(s.ts_ns);
        if (b != cur) flush(), cur = b;
        uint32_t u = static_cast<uint32_t>(units(s));
        if (!u) return;
        // A bucket (older samples folded, engine/aggregator.h) is spread over its span the same way.
        const uint64_t spread = s.span_ns ? s.span_ns : s.kind == SampleKind::OffCpu && !s.aggregate ? s.weight_ns : 0;
        if (spread > 0) {
            const uint64_t end = s.ts_ns > t0_ ? s.ts_ns - t0_ : 0;
            const uint64_t start = end > spread ? end - spread : 0;
            const int64_t first = fine_bin(t0_ + start);
            uint32_t given = 0;
            for (int64_t k = first; k < b; k++) {
                const uint64_t upto = std::min<uint64_t>(end, static_cast<uint64_t>(k + 1) * fine_ns_);
                const auto cum = static_cast<uint32_t>(std::llround(
                    static_cast<double>(u) * static_cast<double>(spread - (end - upto)) / static_cast<double>(spread)));
                if (cum > given && cum <= u) before.push_back({static_cast<uint32_t>(k), r, cum - given}), given = cum;
            }
            u -= given;  // the rest is ts's own bin
            if (!u) return;
        }
        if (!count[r]) touched.push_back(r);
        count[r] += u;
    });
    flush();
    if (!before.empty()) {
        out.insert(out.end(), before.begin(), before.end());
        std::sort(out.begin(), out.end(), [](const Cell& a, const Cell& b) { return a.bin != b.bin ? a.bin < b.bin : a.rs < b.rs; });
        size_t w = 0;
        for (size_t i = 0; i < out.size(); i++) {
            if (w && out[w - 1].bin == out[i].bin && out[w - 1].rs == out[i].rs) out[w - 1].count += out[i].count;
            else out[w++] = out[i];
        }
        out.resize(w);
    }
    return out;
}

Cells Aggregation::coarsen(const Cells& c, uint64_t k, size_t nrs) {
    if (k == 1) return c;
    Cells out;
    std::vector<uint32_t> count(nrs, 0), touched;
    int64_t cur = -1;
    auto flush = [&]() {
        std::sort(touched.begin(), touched.end());
        for (uint32_t r : touched) out.push_back({static_cast<uint32_t>(cur), r, count[r]}), count[r] = 0;
        touched.clear();
    };
    for (const Cell& x : c) {
        int64_t b = x.bin / k;
        if (b != cur) flush(), cur = b;
        if (!count[x.rs]) touched.push_back(x.rs);
        count[x.rs] += x.count;
    }
    flush();
    return out;
}

uint64_t Aggregation::count_coarse(const std::vector<Cells>& all, uint64_t k, size_t nrs) {
    std::vector<uint64_t> stamp(nrs, UINT64_MAX);
    uint64_t n = 0, seq = 0;
    for (const Cells& c : all) {
        seq++;
        for (const Cell& x : c) {
            uint64_t key = seq << 32 | (x.bin / k);
            if (stamp[x.rs] != key) stamp[x.rs] = key, n++;
        }
    }
    return n;
}

// Per report stack: the node its samples go to when rare, its nearest caller with at
// least hot samples in the run (the root at worst).
std::vector<uint32_t> Aggregation::hot_callers(uint64_t hot) const {
    std::vector<uint32_t> anc(rstack_node_.size());
    for (size_t r = 0; r < anc.size(); r++) {
        uint32_t a = node_parent_[rstack_node_[r]];
        while (a != 0 && node_incl_[a] < hot) a = node_parent_[a];
        anc[r] = a;
    }
    return anc;
}

// Cells after merging, in each (thread, bin), the stacks seen fewer than min_count times
// into "[rare stacks]" under their hot caller (anc).
uint64_t Aggregation::count_lossy(const std::vector<Cells>& all, uint64_t min_count,
                                  const std::vector<uint32_t>& anc) const {
    std::vector<uint64_t> stamp(node_parent_.size(), UINT64_MAX);
    uint64_t n = 0, group = 0;
    for (const Cells& c : all) {
        int64_t cur = -1;
        for (const Cell& x : c) {
            if (x.bin != cur) cur = x.bin, group++;
            if (x.count >= min_count) {
                n++;
            } else if (stamp[anc[x.rs]] != group) {
                stamp[anc[x.rs]] = group;
                n++;
            }
        }
    }
    return n;
}

std::vector<Cells> Aggregation::apply_lossy(const std::vector<Cells>& all, uint64_t min_count,
                                            const std::vector<uint32_t>& anc, uint64_t& merged) {
    const uint32_t rare_fn = extra_fn("[rare stacks]");
    std::vector<uint32_t> target(rstack_node_.size(), kNone);  // made on first use
    std::unordered_map<uint32_t, uint32_t> rs_of_rare_node;
    auto rare_rs = [&](uint32_t r) {
        if (target[r] != kNone) return target[r];
        uint32_t n = node(anc[r], rare_fn, 0);
        auto [it, added] = rs_of_rare_node.emplace(n, static_cast<uint32_t>(rstack_node_.size()));
        if (added) rstack_node_.push_back(n), leaf_func_.push_back(rare_fn);
        return target[r] = it->second;
    };
    std::vector<Cells> out;
    merged = 0;
    for (const Cells& c : all) {
        Cells o;
        std::vector<std::pair<uint32_t, uint32_t>> group;  // (rs, count)
        auto flush = [&](uint32_t bin) {
            std::sort(group.begin(), group.end());
            for (size_t i = 0; i < group.size();) {
                uint32_t r = group[i].first, sum = 0;
                for (; i < group.size() && group[i].first == r; i++) sum += group[i].second;
                o.push_back({bin, r, sum});
            }
            group.clear();
        };
        for (size_t i = 0; i < c.size(); i++) {
            const Cell& x = c[i];
            bool rare = x.count < min_count;
            if (rare) merged += x.count;
            group.push_back({rare ? rare_rs(x.rs) : x.rs, x.count});
            if (i + 1 == c.size() || c[i + 1].bin != x.bin) flush(x.bin);
        }
        out.push_back(std::move(o));
    }
    return out;
}

// Per fine bin: [bin delta, units, hottest leaf function].
std::string Aggregation::encode_fine(const Cells& c) const {
    std::string out;
    std::vector<uint32_t> fn_count(fns_.size(), 0), touched;
    int64_t prev = -1;
    uint32_t total = 0;
    for (size_t i = 0; i < c.size(); i++) {
        uint32_t fn = leaf_func_[c[i].rs];
        if (!fn_count[fn]) touched.push_back(fn);
        fn_count[fn] += c[i].count;
        total += c[i].count;
        if (i + 1 == c.size() || c[i + 1].bin != c[i].bin) {
            uint32_t best = 0, best_n = 0;
            for (uint32_t f : touched) {
                if (fn_count[f] > best_n || (fn_count[f] == best_n && f < best)) best = f, best_n = fn_count[f];
                fn_count[f] = 0;
            }
            touched.clear();
            put_varint(out, static_cast<uint64_t>(c[i].bin - prev));
            put_varint(out, total);
            put_varint(out, best);
            prev = c[i].bin;
            total = 0;
        }
    }
    return base64(out);
}

// Per bin with samples: [bin delta, n, (stack delta, count) x n].
std::string Aggregation::encode_cells(const Cells& c) {
    std::string out;
    int64_t prev_bin = -1;
    for (size_t i = 0; i < c.size();) {
        size_t j = i;
        while (j < c.size() && c[j].bin == c[i].bin) j++;
        put_varint(out, static_cast<uint64_t>(c[i].bin - prev_bin));
        put_varint(out, j - i);
        uint32_t prev = 0;
        for (size_t x = i; x < j; x++) {
            put_varint(out, c[x].rs - prev);
            put_varint(out, c[x].count);
            prev = c[x].rs;
        }
        prev_bin = c[i].bin;
        i = j;
    }
    return base64(out);
}

// ---- task spans (Profile::tasks, engine/tasks.h) --------------------------------------

constexpr size_t kMaxKeyBytes = 4'000'000;  // task keys embedded for tooltips, at most
constexpr size_t kMaxLanes = 512;

// The compute spans as lanes (one per process and thread), their prefixes, and per thread
// the cells of the samples that fall inside each prefix's compute spans of that thread
// (pcells[thread]: [[prefix, cells], ...]), at the selection step k_ (or, if they would take
// more than a quarter of the cell budget, for the whole run only: "whole_only").
json Aggregation::tasks_json(std::vector<json>& pcells) {
    pcells.assign(threads_.size(), json());
    const auto& tasks = p_.tasks;
    if (tasks.empty()) return nullptr;
    std::map<uint32_t, uint32_t> proc_index;
    for (const auto& [key, _] : p_.processes) proc_index.emplace(key, static_cast<uint32_t>(proc_index.size()));
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> thread_index;
    {
        uint32_t ti = 0;
        for (const auto& [key, pr] : p_.processes)
            for (const auto& [tid, _] : pr.threads) thread_index[{key, tid}] = ti++;
    }
    // Prefixes by compute time (the largest first); keys in first-seen order.
    std::map<std::string, uint64_t> compute_ns;
    std::map<std::string, uint64_t> ntasks;
    size_t other = 0;
    for (const TaskSpan& t : tasks) {
        if (t.action != "compute") {
            other++;
            continue;
        }
        compute_ns[t.prefix] += t.stop_ns - t.start_ns;
        ntasks[t.prefix]++;
    }
    std::vector<std::string> prefixes;
    for (const auto& [name, _] : compute_ns) prefixes.push_back(name);
    std::stable_sort(prefixes.begin(), prefixes.end(),
                     [&](const std::string& a, const std::string& b) { return compute_ns[a] > compute_ns[b]; });
    std::unordered_map<std::string, uint32_t> prefix_idx;
    for (uint32_t i = 0; i < prefixes.size(); i++) prefix_idx.emplace(prefixes[i], i);
    std::unordered_map<std::string, uint32_t> key_idx;
    std::vector<std::string> keys;
    size_t key_bytes = 0;
    bool keys_cut = false;

    const uint64_t end_ns = t0_ + span_ns_;
    auto rel_us = [&](uint64_t ns) {
        ns = std::clamp(ns, t0_, end_ns);
        return (ns - t0_ + 500) / 1000;
    };
    json lanes = json::array();
    size_t lanes_cut = 0, clipped = 0;
    std::vector<std::vector<const TaskSpan*>> thread_spans(threads_.size());
    for (size_t i = 0; i < tasks.size();) {
        size_t j = i;
        while (j < tasks.size() && tasks[j].process == tasks[i].process && tasks[j].tid == tasks[i].tid) j++;
        const uint32_t proc = tasks[i].process, tid = tasks[i].tid;
        std::string enc;
        uint64_t prev = 0;
        size_t n = 0;
        auto ti = thread_index.find({proc, tid});
        for (size_t x = i; x < j; x++) {
            const TaskSpan& t = tasks[x];
            if (t.action != "compute") continue;
            if (ti != thread_index.end()) thread_spans[ti->second].push_back(&t);
            if (t.stop_ns < t0_ || t.start_ns > end_ns) {
                clipped++;
                continue;
            }
            uint64_t a = rel_us(t.start_ns), b = rel_us(t.stop_ns);
            uint32_t k = 0;
            if (!keys_cut) {
                auto [it, added] = key_idx.emplace(t.key, static_cast<uint32_t>(keys.size() + 1));
                if (added) {
                    key_bytes += t.key.size() + 3;
                    if (key_bytes > kMaxKeyBytes) {
                        keys_cut = true;
                        key_idx.erase(it);
                    } else {
                        keys.push_back(t.key);
                    }
                }
                if (!keys_cut) k = key_idx[t.key];
            }
            put_varint(enc, a - prev);
            put_varint(enc, b - a);
            put_varint(enc, prefix_idx.at(t.prefix));
            put_varint(enc, k);
            prev = a;
            n++;
        }
        if (n && proc_index.count(proc)) {
            if (lanes.size() >= kMaxLanes) {
                lanes_cut++;
            } else {
                const ProcessProfile& pr = p_.processes.at(proc);
                auto th = pr.threads.find(tid);
                lanes.push_back({{"proc", proc_index.at(proc)},
                                 {"tid", th != pr.threads.end() ? th->second.tid : tid},
                                 {"thread", ti != thread_index.end() ? json(ti->second) : json(-1)},
                                 {"name", th != pr.threads.end() ? th->second.name : std::string()},
                                 {"n", n},
                                 {"spans", base64(enc)}});
            }
        }
        i = j;
    }

    // Samples inside each prefix's compute spans, per thread.
    auto build = [&](bool whole) {
        uint64_t ncells = 0;
        for (size_t ti = 0; ti < threads_.size(); ti++) {
            auto& spans = thread_spans[ti];
            if (spans.empty()) continue;
            std::sort(spans.begin(), spans.end(),
                      [](const TaskSpan* a, const TaskSpan* b) { return a->start_ns < b->start_ns; });
            std::map<uint32_t, std::map<std::pair<uint32_t, uint32_t>, uint32_t>> acc;  // prefix -> (bin, rs) -> units
            size_t j = 0;
            for_thread_samples(*threads_[ti], [&](const Sample& s) {
                while (j < spans.size() && spans[j]->stop_ns < s.ts_ns) j++;
                for (size_t x = j; x < spans.size() && spans[x]->start_ns <= s.ts_ns; x++) {
                    if (spans[x]->stop_ns < s.ts_ns) continue;
                    uint32_t r = s.stack < rstack_of_.size() ? rstack_of_[s.stack] : kNone;
                    uint32_t u = static_cast<uint32_t>(units(s));
                    if (r == kNone || !u) break;
                    uint32_t bin = whole ? 0 : static_cast<uint32_t>(fine_bin(s.ts_ns) / k_);
                    acc[prefix_idx.at(spans[x]->prefix)][{bin, r}] += u;
                    break;
                }
            });
            json list = json::array();
            for (const auto& [pfx, cells] : acc) {
                Cells c;
                for (const auto& [br, n] : cells) c.push_back({br.first, br.second, n});
                ncells += c.size();
                list.push_back({pfx, encode_cells(c)});
            }
            pcells[ti] = list;
        }
        return ncells;
    };
    bool whole_only = false;
    uint64_t ncells = build(false);
    if (ncells > lim_.max_cells / 4) {
        whole_only = true;
        pcells.assign(threads_.size(), json());
        ncells = build(true);
    }
    json pj = json::array();
    for (const std::string& name : prefixes)
        pj.push_back({{"name", name}, {"tasks", ntasks[name]}, {"compute_ns", compute_ns[name]}});
    json out = {{"prefixes", pj}, {"keys", keys}, {"lanes", lanes}, {"whole_only", whole_only}, {"cells", ncells},
                {"spans", tasks.size()}, {"other_spans", other}};
    std::string note;
    if (keys_cut) note += "task keys beyond " + std::to_string(keys.size()) + " are not embedded; ";
    if (lanes_cut) note += std::to_string(lanes_cut) + " more task lanes are not drawn; ";
    if (clipped) note += std::to_string(clipped) + " compute spans outside the profiled time are not drawn; ";
    if (whole_only) note += "prefix scoping covers the whole run only (a time range does not narrow it); ";
    if (!note.empty()) note.resize(note.size() - 2);
    out["note"] = note;
    return out;
}

// Run-length pairs (value, run), as varints, base64-encoded: a lane is mostly runs of 0 and
// 1000, so this is a few bytes per change.
std::string encode_runs(const std::vector<uint32_t>& v) {
    std::string out;
    for (size_t i = 0; i < v.size();) {
        size_t j = i;
        while (j < v.size() && v[j] == v[i]) j++;
        put_varint(out, v[i]);
        put_varint(out, j - i);
        i = j;
    }
    return base64(out);
}

// A thread's GIL lanes: per fine bin, the share (in permille of the bin) of its time it held
// the GIL (samples with gil == Held) and waited for it (gil == Waiting), each sample's weight
// spread over [ts - weight, ts]. null when no sample of the thread knows its GIL state
// (free-threaded, or not known): the page says n/a rather than draw a guess.
json Aggregation::gil_lanes(const ThreadProfile& t) const {
    bool known = false;
    for (const Sample& s : t.samples) known |= s.gil != GilState::NA;
    if (!known) return nullptr;
    std::vector<double> held(nfine_, 0), waiting(nfine_, 0);
    uint64_t held_ns = 0, waiting_ns = 0;
    const uint64_t end = nfine_ * fine_ns_;
    for (const Sample& s : t.samples) {
        if (s.gil != GilState::Held && s.gil != GilState::Waiting) continue;
        auto& lane = s.gil == GilState::Held ? held : waiting;
        (s.gil == GilState::Held ? held_ns : waiting_ns) += s.weight_ns;
        const uint64_t b = s.ts_ns > t0_ ? s.ts_ns - t0_ : 0;
        // A bucket's weight is spread evenly over its span (its samples' share of it).
        const uint64_t len = s.span_ns ? s.span_ns : s.weight_ns;
        const double density = s.span_ns ? static_cast<double>(s.weight_ns) / static_cast<double>(s.span_ns) : 1.0;
        const uint64_t a = b > len ? b - len : 0;
        for (uint64_t x = a; x < std::min(b, end);) {
            const uint64_t bin = x / fine_ns_, next = std::min({(bin + 1) * fine_ns_, b, end});
            lane[bin] += density * static_cast<double>(next - x);
            x = next;
        }
    }
    auto permille = [&](const std::vector<double>& lane) {
        std::vector<uint32_t> v(nfine_);
        for (uint64_t i = 0; i < nfine_; i++)
            v[i] = static_cast<uint32_t>(std::min(1000.0, std::round(1000.0 * lane[i] / static_cast<double>(fine_ns_))));
        return v;
    };
    return {{"held", encode_runs(permille(held))}, {"waiting", encode_runs(permille(waiting))},
            {"held_ns", held_ns}, {"waiting_ns", waiting_ns}};
}

// A process's GIL utilisation: the time its threads held the GIL over its wall time (the run,
// up to its last sample when it exited). null (n/a) when no sample knows its GIL state.
json Aggregation::gil_utilisation(const ProcessProfile& pr) const {
    bool known = false;
    uint64_t held = 0, last = 0;
    for (const auto& [_, t] : pr.threads)
        for (const Sample& s : t.samples) {
            known |= s.gil != GilState::NA;
            if (s.gil == GilState::Held) held += s.weight_ns;
            last = std::max(last, s.ts_ns);
        }
    if (!known) return nullptr;
    const uint64_t run_end = p_.run.end_mono_ns > t0_ ? p_.run.end_mono_ns : t0_ + span_ns_;
    const uint64_t end = pr.exited && last ? std::min(last, run_end) : run_end;
    const uint64_t wall = end > t0_ ? end - t0_ : 0;
    if (!wall) return nullptr;
    return {{"held_ns", held}, {"wall_ns", wall}, {"share", static_cast<double>(held) / static_cast<double>(wall)}};
}

json resources_json(const ProcessProfile& pr, uint64_t t0) {
    const auto& v = pr.resources;
    json t = json::array(), cpu = json::array(), rss = json::array();
    size_t group = std::max<size_t>(1, (v.size() + 999) / 1000);
    for (size_t i = 0; i < v.size(); i += group) {
        size_t end = std::min(v.size(), i + group);
        double cpu_sum = 0;
        size_t cpu_n = 0;
        uint64_t rss_max = 0;
        for (size_t j = i; j < end; j++) {
            if (v[j].cpu_pct >= 0) cpu_sum += v[j].cpu_pct, cpu_n++;
            rss_max = std::max(rss_max, v[j].rss_bytes);
        }
        uint64_t ts = v[end - 1].mono_ns;
        t.push_back(std::round((ts > t0 ? ts - t0 : 0) / 1e6) / 1e3);
        if (cpu_n) cpu.push_back(std::round(cpu_sum / cpu_n * 10) / 10);
        else cpu.push_back(nullptr);
        rss.push_back(rss_max / 1024);
    }
    return {{"t", t}, {"cpu", cpu}, {"rss_kib", rss}};
}

json Aggregation::build(std::string& note) {
    const RunInfo& run = p_.run;
    const uint64_t period = sampling_period_ns(run);
    choose_unit();
    stack_count_.assign(p_.stacks.size(), 0);
    uint64_t total = 0, first_ts = UINT64_MAX, last_ts = 0;
    for (const auto& [_, pr] : p_.processes)
        for (const auto& [__, t] : pr.threads)
            for (const Sample& s : t.samples) {
                if (s.stack < stack_count_.size()) stack_count_[s.stack] += units(s);
                total += s.count;  // a bucket stands for its samples
                first_ts = std::min(first_ts, s.ts_ns);
                last_ts = std::max(last_ts, s.ts_ns);
            }
    t0_ = run.start_mono_ns ? run.start_mono_ns : (total ? first_ts : 0);
    uint64_t span = run.end_mono_ns > t0_ ? run.end_mono_ns - t0_ : 0;
    if (total && last_ts >= t0_) span = std::max(span, last_ts - t0_ + period);
    if (!span) span = period;
    span_ns_ = span;
    fine_ns_ = nice_ceil(std::max<uint64_t>({5 * period, (span + lim_.max_fine_bins - 1) / lim_.max_fine_bins, 1}));
    nfine_ = std::max<uint64_t>(1, (span + fine_ns_ - 1) / fine_ns_);

    call_tree();
    for (const auto& [_, pr] : p_.processes)
        for (const auto& [__, t] : pr.threads) threads_.push_back(&t);
    std::vector<Cells> fine;
    fine.reserve(threads_.size());
    for (const ThreadProfile* t : threads_) fine.push_back(fine_cells(*t));

    // Exact cells at the finest selection step that fits; if that leaves too few steps,
    // the lossy mode at ~kLossySteps steps instead.
    const size_t nrs = rstack_node_.size();
    auto steps = [&](uint64_t k) { return (nfine_ + k - 1) / k; };
    uint64_t exact_k = 0;
    for (uint64_t k : kCoarseSteps) {
        k = std::min(k, nfine_);
        if (count_coarse(fine, k, nrs) <= lim_.max_cells) {
            exact_k = k;
            break;
        }
        if (k == nfine_) break;
    }
    std::vector<Cells> cells, whole;
    Lossy lossy;
    auto use_exact = [&](uint64_t k) {
        k_ = k;
        for (const Cells& c : fine) cells.push_back(coarsen(c, k, nrs));
    };
    if (exact_k && (exact_k == 1 || steps(exact_k) >= kMinSteps)) {
        use_exact(exact_k);
    } else {
        // The whole run stays exact (the view the page opens with) if that takes at most
        // half the budget; the time-scoped cells get the rest.
        uint64_t budget = lim_.max_cells;
        uint64_t whole_cells = count_coarse(fine, nfine_, nrs);
        if (whole_cells <= budget / 2) {
            lossy.whole = true;
            budget -= whole_cells;
            for (const Cells& c : fine) whole.push_back(coarsen(c, nfine_, nrs));
        }
        uint64_t total = 0;
        for (uint64_t c : stack_count_) total += c;
        bool done = false;
        std::vector<Cells> base;
        for (uint64_t k : kCoarseSteps) {
            k = std::min(k, nfine_);
            if (steps(k) > kLossySteps && k != nfine_) continue;
            if (exact_k && k >= exact_k) {  // exact fits at this step anyway
                use_exact(exact_k);
                lossy.whole = false;
                whole.clear();
                done = true;
                break;
            }
            base.clear();
            for (const Cells& c : fine) base.push_back(coarsen(c, k, nrs));
            for (uint64_t mc : {2ULL, 3ULL, 5ULL, 8ULL, 13ULL, 20ULL, 35ULL, 60ULL, 100ULL, 200ULL, 500ULL, 2000ULL,
                                20000ULL, 1ULL << 40}) {
                for (double share : {1e-4, 1e-3, 1e-2, 0.1, 2.0}) {
                    uint64_t hot = static_cast<uint64_t>(std::ceil(share * total));
                    auto anc = hot_callers(hot);
                    if (count_lossy(base, mc, anc) <= budget) {
                        k_ = k;
                        lossy.on = true;
                        lossy.min_count = mc;
                        lossy.hot = hot;
                        cells = apply_lossy(base, mc, anc, lossy.merged);
                        done = true;
                        break;
                    }
                }
                if (done) break;
            }
            if (done || k == nfine_) break;
        }
        if (!done) {  // an absurdly small budget: do what we can
            whole.clear();
            lossy = Lossy{};
            use_exact(exact_k ? exact_k : nfine_);
        }
    }
    uint64_t ncells = 0;
    for (const Cells& c : cells) ncells += c.size();
    for (const Cells& c : whole) ncells += c.size();

    json doc;
    doc["format"] = "pybpfprof-report";
    doc["v"] = 1;
    json r;
    r["target"] = run.target;
    r["command"] = run.command;
    r["start_iso"] = iso8601_utc_ms(run.start_unix_ns);
    r["start_unix_ms"] = static_cast<double>(run.start_unix_ns / 1000000);
    r["duration_s"] = run.end_mono_ns > run.start_mono_ns ? run.duration_s() : span / 1e9;
    r["span_s"] = span / 1e9;
    r["rate_hz"] = run.rate_hz;
    r["period_ns"] = period;
    r["samples"] = total;
    r["weight_unit_ns"] = unit_ns_;
    r["weight_units"] = std::accumulate(stack_count_.begin(), stack_count_.end(), uint64_t{0});
    r["cpu_ns"] = p_.total_weight_ns(SampleKind::Cpu);
    r["off_cpu_ns"] = p_.total_weight_ns(SampleKind::OffCpu);
    r["mode"] = mode_name(run.mode);
    r["min_block_ns"] = run.min_block_ns;
    r["lost"] = run.lost;
    r["truncated"] = run.truncated;
    r["unresolved"] = run.unresolved;
    r["unresolved_total"] = p_.unresolved_total();
    r["kernel"] = run.kernel;
    r["host"] = run.host;
    r["version"] = run.version.empty() ? std::string(PYBPFPROF_VERSION) : run.version;
    // A merged profile's inputs (engine/merge.h), each on its own machine's clock.
    json merged = json::array();
    for (const MergedInput& m : p_.merged_from)
        merged.push_back({{"labels", m.labels}, {"host", m.run.host}, {"target", m.run.target},
                          {"start_iso", iso8601_utc_ms(m.run.start_unix_ns)},
                          {"duration_s", m.run.end_mono_ns > m.run.start_mono_ns ? m.run.duration_s() : 0.0},
                          {"rate_hz", m.run.rate_hz}, {"kernel", m.run.kernel}, {"lost", m.run.lost}});
    r["merged_from"] = merged;
    r["max_depth"] = run.max_depth;
    if (run.bpf_run_cnt) r["bpf_ns_per_event"] = run.bpf_run_time_ns / run.bpf_run_cnt;
    size_t active = 0;
    for (const auto& [_, pr] : p_.processes) active += !pr.threads.empty();
    r["processes"] = p_.processes.size();
    r["active_processes"] = active;
    r["threads"] = p_.total_threads();
    doc["run"] = r;

    json files;
    doc["fn"] = functions_json(files);
    doc["files"] = files;
    std::string nodes;
    for (size_t n = 1; n < node_parent_.size(); n++) {
        put_varint(nodes, n - node_parent_[n]);
        put_varint(nodes, node_func_[n]);
        put_varint(nodes, static_cast<uint32_t>(std::max(0, node_line_[n])));
    }
    std::string stacks;
    for (uint32_t n : rstack_node_) put_varint(stacks, n);
    doc["nodes"] = {{"n", node_parent_.size()}, {"b64", base64(nodes)}};
    doc["stacks"] = {{"n", rstack_node_.size()}, {"b64", base64(stacks)}};
    doc["bins"] = {{"fine_ns", fine_ns_}, {"nfine", nfine_}, {"k", k_}, {"cells", ncells}, {"max_cells", lim_.max_cells}};
    doc["bins"]["lossy"] = lossy.on ? json{{"min_count", lossy.min_count}, {"hot", lossy.hot},
                                           {"merged", lossy.merged}, {"whole", lossy.whole}}
                                    : json(nullptr);

    std::vector<json> pcells;
    doc["tasks"] = tasks_json(pcells);
    json procs = json::array();
    size_t ti = 0;
    for (const auto& [pid, pr] : p_.processes) {
        json pj = {{"pid", pr.pid}, {"ns_pid", pr.ns_pid}, {"comm", pr.comm}, {"cmdline", pr.cmdline},
                   {"exe", pr.exe}, {"python", pr.python}, {"exited", pr.exited}, {"execd", pr.execd}, {"labels", pr.labels},
                   {"name", pr.display_name()}};
        json threads = json::array();
        for (const auto& [tid, t] : pr.threads) {
            threads.push_back({{"tid", t.tid}, {"ns_tid", t.ns_tid}, {"name", t.name}, {"n", t.sample_count()},
                               {"fine", encode_fine(fine[ti])}, {"cells", encode_cells(cells[ti])}});
            if (!whole.empty()) threads.back()["whole"] = encode_cells(whole[ti]);
            if (!pcells[ti].is_null()) threads.back()["pcells"] = pcells[ti];
            threads.back()["gil"] = gil_lanes(t);
            ti++;
        }
        pj["threads"] = threads;
        pj["gil"] = gil_utilisation(pr);
        pj["res"] = resources_json(pr, t0_);
        procs.push_back(pj);
    }
    doc["procs"] = procs;
    if (lossy.on)
        note = "in time ranges, stacks seen fewer than " + std::to_string(lossy.min_count) +
               " times in a thread and interval are merged under their caller with >= " + std::to_string(lossy.hot) +
               " samples (" + std::to_string(lossy.merged) + " samples)" + (lossy.whole ? "; the whole run is exact" : "");
    return doc;
}

// ---- the page ----------------------------------------------------------------------

void replace_once(std::string& s, const std::string& token, std::string_view with) {
    size_t at = s.find(token);
    if (at == std::string::npos) throw std::logic_error("report template lacks " + token);
    s.replace(at, token.size(), with);
}

std::string script(std::string_view js) {
    std::string s = "<script>";
    s.append(js);
    s += "</script>\n";
    return s;
}

std::string style(std::string_view css) {
    std::string s = "<style>";
    s.append(css);
    s += "</style>\n";
    return s;
}

class HtmlExporter : public Exporter {
public:
    std::string name() const override { return "html"; }
    std::vector<std::string> extensions() const override { return {"html", "htm"}; }
    std::string how_to_open(const std::string& path) const override { return html_report_how_to_open(path); }
    void write(const Profile& profile, const ExportOptions& options, std::ostream& out) const override {
        out << render_html_report(profile, options);
    }
};

}  // namespace

std::string html_report_how_to_open(const std::string& path) {
    std::string abs = path;
    if (!abs.empty() && abs[0] != '/') {
        char cwd[4096];
        if (getcwd(cwd, sizeof cwd)) abs = std::string(cwd) + "/" + abs;
    }
    return "open it in a web browser (it needs no network): file://" + abs;
}

std::string render_html_report(const Profile& profile, const ExportOptions& options, const HtmlReportLimits& limits,
                               HtmlReportStats* stats) {
    auto t_start = std::chrono::steady_clock::now();
    HtmlReportLimits lim = limits;
    std::string page;
    json doc;
    std::string note;
    // The raw speedscope JSON, gzipped: made once, embedded if it fits what is left.
    std::string raw_b64, raw_note;
    bool raw_tried = false;
    for (int attempt = 0; attempt < 6; attempt++) {
        Aggregation agg(profile, lim);
        doc = agg.build(note);
        std::string data = script_safe_json(doc);

        page = std::string(asset("template.html"));
        std::string title = "pybpfprof report: " + (profile.run.target.empty() ? std::string("run") : profile.run.target);
        replace_once(page, "{{TITLE}}", html_escape(title));
        std::string styles = style(asset("uPlot.min.css")) + style(asset("report.css"));
        replace_once(page, "<!--PBP:STYLE-->", styles);
        replace_once(page, "<!--PBP:DATA-->", "<script type=\"application/json\" id=\"pbp-data\">" + data + "</script>");
        std::string scripts = script(asset("d3.min.js")) + script(asset("d3-flamegraph.min.js")) +
                              script(asset("uPlot.min.js")) + script(asset("report.js"));
        replace_once(page, "<!--PBP:SCRIPTS-->", scripts);

        if (page.size() > lim.max_file_bytes && lim.max_cells > 1000) {
            lim.max_cells /= 2;  // the estimate per cell was too low for this run: retry
            continue;
        }
        if (!raw_tried) {
            raw_tried = true;
            // Estimate the JSON size before making it: one sample costs its frame indices
            // and a weight.
            uint64_t est = 0;
            std::vector<uint32_t> len(profile.stacks.size(), 0);
            for (uint32_t s = 0; s < profile.stacks.size(); s++) {
                uint32_t n = 3;
                for (uint32_t f : profile.stacks.at(s)) n += f < 10 ? 2 : f < 100 ? 3 : f < 1000 ? 4 : f < 10000 ? 5 : 7;
                len[s] = n;
            }
            for (const auto& [_, pr] : profile.processes)
                for (const auto& [__, t] : pr.threads)
                    for (const Sample& s : t.samples) est += 12 + (s.stack < len.size() ? len[s.stack] : 3);
            if (est > lim.max_raw_json_bytes) {
                raw_note = "the speedscope JSON of this run (about " + std::to_string(est / 1000000) +
                           " MB) is too large to embed; write it with -f speedscope";
            } else {
                // Compressed as it is written: the JSON itself is never held whole (28 MB after
                // an hour at 999 Hz, which the string it was made in held twice over).
                std::ostringstream packed;
                GzipStream gz(packed);
                write_speedscope(profile, options, gz);
                try {
                    gz.finish();
                    raw_b64 = base64(packed.str());
                    raw_note = std::to_string(gz.bytes_in()) + " bytes";
                } catch (const std::runtime_error&) {
                    raw_note = "could not compress the speedscope JSON";
                }
            }
        }
        break;
    }
    std::string raw_block;
    size_t room = lim.max_file_bytes > page.size() + 200 ? lim.max_file_bytes - page.size() - 200 : 0;
    if (!raw_b64.empty() && raw_b64.size() <= std::min(room, lim.max_raw_embed_bytes)) {
        raw_block = "<script type=\"application/octet-stream\" id=\"pbp-raw\" data-encoding=\"gzip+base64\" "
                    "data-bytes=\"" + raw_note.substr(0, raw_note.find(' ')) + "\">" + raw_b64 + "</script>";
    } else {
        if (!raw_b64.empty())
            raw_note = "the speedscope JSON of this run (" + std::to_string(raw_b64.size() / 1000000) +
                       " MB compressed) is too large to embed; write it with -f speedscope";
        raw_block = "<script type=\"application/json\" id=\"pbp-raw-missing\">" +
                    script_safe_json(json(raw_note)) + "</script>";
    }
    replace_once(page, "<!--PBP:RAW-->", raw_block);
    if (stats) {
        stats->bytes = page.size();
        stats->fine_ns = doc["bins"]["fine_ns"].get<uint64_t>();
        stats->nfine = doc["bins"]["nfine"].get<uint64_t>();
        stats->coarse_k = doc["bins"]["k"].get<uint64_t>();
        stats->cells = doc["bins"]["cells"].get<uint64_t>();
        stats->stacks = doc["stacks"]["n"].get<uint64_t>();
        stats->nodes = doc["nodes"]["n"].get<uint64_t>();
        stats->raw_embedded = raw_block.find("id=\"pbp-raw\"") != std::string::npos;
        stats->note = note.empty() ? raw_note : note + "; " + raw_note;
        stats->seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    }
    return page;
}

std::unique_ptr<Exporter> make_html_exporter() { return std::make_unique<HtmlExporter>(); }

}  // namespace pbp
