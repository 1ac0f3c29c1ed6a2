// SVG flame graph: one self-contained, interactive file, as flamegraph.pl and inferno make
// (and py-spy's default output). Open it in a browser; it makes no request.
//
// Layout: a classic flame graph, the root at the bottom and callees stacked above their
// callers. From the bottom: "all", then (with --group-by pod) "pod <namespace>/<name>" for
// processes in a pod, then the process (as collapsed names it: display_name() and its
// container), then the thread ("<name> (tid N)"), then the Python frames, outermost first,
// each labelled "qualname (file:line)". Identical paths are merged; a frame's width is the
// summed weight (Sample::weight_ns) of the samples under it, so off-CPU time, when a profile
// has it, is as wide as the time it stands for, and its wait leaf ("[sleeping]", "[waiting
// for the GIL]", ...) is drawn in blue, apart from the warm colours of code on CPU. Children are ordered by label (bytewise), so
// equal profiles give identical files. A frame narrower than 0.1 px is not drawn (nor what
// is above it); the subtitle says how many were left out.
//
// Each frame is <g class="f"><title>label\nN samples, time, P%</title><rect/><text/></g>, in
// pre-order (a frame's descendants follow it), which the embedded script uses to rebuild
// the tree. The script: click a frame to zoom into it (its ancestors stay, full width and
// dimmed), "Reset Zoom" or Escape to zoom out; "Search", Ctrl-F or "/" asks for a
// JavaScript regular expression (matched as plain text when it is not a valid one), paints
// the matching frames magenta and shows the share of the profile they cover; "Reset
// Search" or Escape clears it. Labels are truncated ("..") to fit their frame, and refitted
// on zoom.
//
// All text is XML-escaped; invalid UTF-8 becomes U+FFFD and characters XML forbids become
// spaces, so any frame name gives a well-formed document. A profile without samples gives
// a valid SVG that says so.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "export/common.h"
#include "export/exporter.h"

#ifndef PYBPFPROF_VERSION
#define PYBPFPROF_VERSION "unknown"
#endif

namespace pbp {

namespace {

constexpr double kImageWidth = 1200;
constexpr double kMargin = 10;                              // left and right
constexpr double kInner = kImageWidth - 2 * kMargin;        // the width of "all"
constexpr double kFrameHeight = 16;
constexpr double kFontSize = 12;
constexpr double kCharWidth = 0.62 * kFontSize;              // monospace, with a little to spare
constexpr double kTextPad = 3;
constexpr double kTop = 64;                                  // title, subtitle, buttons
constexpr double kBottom = 34;                               // details and "Matched"
constexpr double kMinWidth = 0.1;                            // narrower frames are not drawn
constexpr const char* kMatchFill = "rgb(230,0,230)";

// ---- text ------------------------------------------------------------------------------

// The code points of s: an invalid UTF-8 sequence is U+FFFD, a character XML 1.0 does not
// allow (C0 controls but tab, newline and CR; U+FFFE, U+FFFF) a space or U+FFFD.
std::vector<uint32_t> code_points(std::string_view s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    const auto* b = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        const unsigned char c = b[i];
        const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        bool ok = len && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) ok = (b[i + k] & 0xc0) == 0x80;
        uint32_t cp = c;
        if (ok && len > 1) {
            cp = c & (0x7f >> len);
            for (size_t k = 1; k < len; k++) cp = (cp << 6) | (b[i + k] & 0x3f);
            static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
            ok = cp >= kMin[len] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
        }
        if (!ok) {
            out.push_back(0xfffd);
            i++;
            continue;
        }
        i += len;
        if (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') cp = ' ';
        else if (cp == 0xfffe || cp == 0xffff) cp = 0xfffd;
        out.push_back(cp);
    }
    return out;
}

// Appends code points [from, to) of cps, escaped for XML text and attribute values.
void append_xml(std::string& out, const std::vector<uint32_t>& cps, size_t from, size_t to) {
    for (size_t i = from; i < to && i < cps.size(); i++) {
        const uint32_t cp = cps[i];
        switch (cp) {
            case '&': out += "&amp;"; continue;
            case '<': out += "&lt;"; continue;
            case '>': out += "&gt;"; continue;
            case '"': out += "&quot;"; continue;
            case '\'': out += "&apos;"; continue;
            default: break;
        }
        if (cp < 0x80) out += static_cast<char>(cp);
        else if (cp < 0x800) {
            out += static_cast<char>(0xc0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xe0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (cp & 0x3f));
        } else {
            out += static_cast<char>(0xf0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (cp & 0x3f));
        }
    }
}

std::string xml(std::string_view s) {
    std::string out;
    const auto cps = code_points(s);
    append_xml(out, cps, 0, cps.size());
    return out;
}

// A label cut to what fits in width px: whole, or its start and "..", or nothing. The script
// does the same when it refits labels after a zoom.
void append_fitted(std::string& out, const std::vector<uint32_t>& label, double width) {
    const double room = width - 2 * kTextPad;
    if (room < 3 * kCharWidth) return;
    const size_t fits = static_cast<size_t>(room / kCharWidth);
    if (label.size() <= fits) return append_xml(out, label, 0, label.size());
    append_xml(out, label, 0, fits - 2);
    out += "..";
}

std::string fixed(double v, int decimals = 2) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    std::string s = buf;
    if (s.find('.') != std::string::npos) {
        while (s.back() == '0') s.pop_back();
        if (s.back() == '.') s.pop_back();
    }
    return s == "-0" ? "0" : s;
}

std::string duration_text(uint64_t ns) {
    char buf[64];
    if (ns >= 1000000000ULL) std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
    else if (ns >= 1000000ULL) std::snprintf(buf, sizeof buf, "%.1f ms", ns / 1e6);
    else std::snprintf(buf, sizeof buf, "%.0f \xC2\xB5s", ns / 1e3);
    return buf;
}

std::string percent(uint64_t part, uint64_t whole) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f%%", whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
    return buf;
}

std::string samples_text(uint64_t n) { return std::to_string(n) + (n == 1 ? " sample" : " samples"); }

// ---- the merged tree -------------------------------------------------------------------

enum class Kind : uint8_t { Root, Pod, Process, Thread, Frame, Native, Kernel, Synthetic, OffCpu };

struct Node {
    uint32_t label = 0;
    Kind kind = Kind::Frame;
    uint32_t color_key = 0;  // for frames: the function name's label
    uint64_t weight = 0, samples = 0;
    std::vector<uint32_t> children;
};

class Tree {
public:
    Tree() { nodes_.push_back(Node{intern("all"), Kind::Root, 0, 0, 0, {}}); }

    uint32_t intern(const std::string& s) {
        auto [it, added] = ids_.emplace(s, static_cast<uint32_t>(labels_.size()));
        if (added) labels_.push_back(s);
        return it->second;
    }
    // The child of parent with this label (made when missing).
    uint32_t child(uint32_t parent, uint32_t label, Kind kind, uint32_t color_key = 0) {
        const uint64_t key = (uint64_t{parent} << 32) | label;
        auto it = edges_.find(key);
        if (it != edges_.end()) return it->second;
        const auto id = static_cast<uint32_t>(nodes_.size());
        nodes_.push_back(Node{label, kind, color_key, 0, 0, {}});
        nodes_[parent].children.push_back(id);
        edges_.emplace(key, id);
        return id;
    }
    Node& at(uint32_t n) { return nodes_[n]; }
    const Node& at(uint32_t n) const { return nodes_[n]; }
    const std::string& label(uint32_t id) const { return labels_[id]; }
    size_t size() const { return nodes_.size(); }

private:
    std::vector<Node> nodes_;
    std::vector<std::string> labels_;
    std::unordered_map<std::string, uint32_t> ids_;
    std::unordered_map<uint64_t, uint32_t> edges_;
};

std::string thread_label(const ThreadProfile& t) {
    std::string s = (t.name.empty() ? std::string("thread") : t.name) + " (tid " + std::to_string(t.tid);
    if (t.ns_tid && t.ns_tid != t.tid) s += ", ns tid " + std::to_string(t.ns_tid);
    return s + ")";
}

// FNV-1a: colors that depend only on the name, so a function keeps its color everywhere.
uint32_t fnv1a(std::string_view s) {
    uint32_t h = 2166136261u;
    for (unsigned char c : s) h = (h ^ c) * 16777619u;
    return h;
}

// flamegraph.pl's "hot" palette for Python frames, aqua for native ones and orange for the
// kernel's; blues for the process and thread levels.
std::string color(const Tree& tree, const Node& n) {
    int r = 0, g = 0, b = 0;
    switch (n.kind) {
        case Kind::Root: r = 200, g = 200, b = 200; break;
        case Kind::Pod: r = 140, g = 170, b = 215; break;
        case Kind::Process: r = 160, g = 190, b = 230; break;
        case Kind::Thread: r = 185, g = 210, b = 240; break;
        case Kind::Synthetic: r = 190, g = 190, b = 190; break;
        case Kind::OffCpu: r = 90, g = 140, b = 225; break;  // flamegraph.pl's "io" blues: time off CPU
        case Kind::Native: {  // flamegraph.pl's "aqua": C and C++ code under Python
            const double v = (fnv1a(tree.label(n.color_key)) & 0xff) / 255.0;
            r = 50 + static_cast<int>(60 * v);
            g = 165 + static_cast<int>(55 * v);
            b = 165 + static_cast<int>(55 * v);
            break;
        }
        case Kind::Kernel: {  // flamegraph.pl's kernel orange (--color=java, "_[k]")
            const double v = (fnv1a(tree.label(n.color_key)) & 0xff) / 255.0;
            r = 190 + static_cast<int>(65 * v);
            g = 90 + static_cast<int>(65 * v);
            b = 0;
            break;
        }
        case Kind::Frame: {
            const uint32_t h = fnv1a(tree.label(n.color_key));
            const double v1 = (h & 0xff) / 255.0, v2 = ((h >> 8) & 0xff) / 255.0, v3 = ((h >> 16) & 0xff) / 255.0;
            r = 205 + static_cast<int>(50 * v3);
            g = static_cast<int>(230 * v1);
            b = static_cast<int>(55 * v2);
            break;
        }
    }
    return "rgb(" + std::to_string(r) + "," + std::to_string(g) + "," + std::to_string(b) + ")";
}

// ---- the page's script -----------------------------------------------------------------

// Reads the frames back from the document (pre-order, depth from y), then handles zoom,
// search and hover. Layout constants come first, from the exporter's own.
constexpr const char* kScript = R"JS(
  var svg = document.getElementById('pbp-flame');
  var $ = function (id) { return document.getElementById(id); };
  var frames = [], zoomed = null, searching = '';
  (function read() {
    var gs = svg.querySelectorAll('#frames > g'), stack = [];
    for (var i = 0; i < gs.length; i++) {
      var g = gs[i], r = g.querySelector('rect'), t = g.querySelector('text'), title = g.querySelector('title');
      var all = title.textContent, nl = all.indexOf('\n');
      var f = { i: i, g: g, r: r, t: t, label: nl < 0 ? all : all.slice(0, nl), info: nl < 0 ? '' : all.slice(nl + 1),
                x: +r.getAttribute('x'), w: +r.getAttribute('width'), y: +r.getAttribute('y'),
                fill: r.getAttribute('fill'), end: gs.length };
      f.chars = Array.from(f.label);
      f.depth = Math.round((BASE - f.y) / FH);
      while (stack.length && stack[stack.length - 1].depth >= f.depth) stack.pop().end = i;
      f.parent = stack.length ? stack[stack.length - 1] : null;
      stack.push(f);
      frames.push(f);
    }
  })();
  function fit(f, w) {
    var room = w - 2 * PAD;
    if (room < 3 * CW) return '';
    var n = Math.floor(room / CW);
    return f.chars.length <= n ? f.label : f.chars.slice(0, n - 2).join('') + '..';
  }
  function place(f, x, w) {
    f.r.setAttribute('x', x.toFixed(2));
    f.r.setAttribute('width', w.toFixed(2));
    f.t.setAttribute('x', (x + PAD).toFixed(2));
    f.t.textContent = fit(f, w);
  }
  function show(el, on) { el.classList.toggle('hide', !on); }
  function zoom(z) {
    zoomed = z;
    var chain = {};
    for (var a = z; a; a = a.parent) chain[a.i] = true;
    var scale = W / z.w;
    frames.forEach(function (f) {
      if (chain[f.i]) { place(f, X0, W); show(f.g, true); f.g.classList.toggle('parent', f !== z); }
      else if (f.i > z.i && f.i < z.end) { place(f, X0 + (f.x - z.x) * scale, f.w * scale); show(f.g, true); f.g.classList.remove('parent'); }
      else show(f.g, false);
    });
    show($('unzoom'), true);
  }
  function resetZoom() {
    zoomed = null;
    frames.forEach(function (f) { place(f, f.x, f.w); show(f.g, true); f.g.classList.remove('parent'); });
    show($('unzoom'), false);
  }
  function search(term) {
    if (!term) return resetSearch();
    var re = null;
    try { re = new RegExp(term); } catch (e) { re = null; }
    var test = re ? function (s) { return re.test(s); } : function (s) { return s.indexOf(term) >= 0; };
    var spans = [];
    frames.forEach(function (f) {
      var m = test(f.label);
      f.r.setAttribute('fill', m ? MATCH : f.fill);
      f.g.classList.toggle('match', m);
      if (m) spans.push([f.x, f.x + f.w]);
    });
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var covered = 0, end = -Infinity;
    spans.forEach(function (s) {
      if (s[0] > end) { covered += s[1] - s[0]; end = s[1]; }
      else if (s[1] > end) { covered += s[1] - end; end = s[1]; }
    });
    searching = term;
    $('matched').textContent = 'Matched: ' + (100 * covered / W).toFixed(1) + '% (' + spans.length + ' frames)';
    show($('unsearch'), true);
  }
  function resetSearch() {
    searching = '';
    frames.forEach(function (f) { f.r.setAttribute('fill', f.fill); f.g.classList.remove('match'); });
    $('matched').textContent = '';
    show($('unsearch'), false);
  }
  function askSearch() {
    var term = window.prompt('Search frames (a regular expression; plain text if it is not one):', searching);
    if (term !== null) search(term);
  }
  frames.forEach(function (f) {
    f.g.addEventListener('click', function () { zoom(f); });
    f.g.addEventListener('mouseover', function () { $('details').textContent = f.label + ': ' + f.info; });
    f.g.addEventListener('mouseout', function () { $('details').textContent = ''; });
  });
  $('unzoom').addEventListener('click', resetZoom);
  $('search').addEventListener('click', askSearch);
  $('unsearch').addEventListener('click', resetSearch);
  document.addEventListener('keydown', function (e) {
    if (((e.ctrlKey || e.metaKey) && (e.key === 'f' || e.key === 'F')) || (e.key === '/' && !e.ctrlKey)) {
      e.preventDefault();
      askSearch();
    } else if (e.key === 'Escape') {
      resetZoom();
      resetSearch();
    }
  });
  window.pbpFlame = { ready: true, frames: frames.length, zoom: function (i) { zoom(frames[i]); },
                      resetZoom: resetZoom, search: search, resetSearch: resetSearch };
)JS";

constexpr const char* kStyle = R"CSS(
  text { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; fill: #000; }
  #title { font-size: 17px; }
  #subtitle { fill: #555; }
  .btn { cursor: pointer; fill: #1a4fa0; }
  .btn:hover { text-decoration: underline; }
  .hide { display: none; }
  #frames g { cursor: pointer; }
  #frames g:hover rect { stroke: #000; stroke-width: 0.5; }
  #frames g.parent { opacity: 0.55; }
  #frames text { pointer-events: none; }
)CSS";

class SvgExporter : public Exporter {
public:
    std::string name() const override { return "svg"; }
    std::vector<std::string> extensions() const override { return {"svg"}; }
    std::string how_to_open(const std::string& path) const override {
        return "open it in a web browser (click a frame to zoom, Ctrl-F to search): " + path;
    }
    void write(const Profile& profile, const ExportOptions& options, std::ostream& out) const override;
};

void SvgExporter::write(const Profile& prof, const ExportOptions& options, std::ostream& out) const {
    Tree tree;
    // Frame labels and the function name that colors them, once per frame.
    std::vector<uint32_t> frame_label_id(prof.frames.size()), frame_color(prof.frames.size());
    std::vector<Kind> frame_kind(prof.frames.size());
    for (uint32_t i = 0; i < prof.frames.size(); i++) {
        const Frame& f = prof.frames.at(i);
        frame_label_id[i] = tree.intern(frame_label(f));
        frame_color[i] = tree.intern(f.name.empty() ? std::string("?") : f.name);
        frame_kind[i] = is_wait_leaf(f)                 ? Kind::OffCpu
                        : f.synthetic                   ? Kind::Synthetic
                        : f.kind == FrameKind::Native   ? Kind::Native
                        : f.kind == FrameKind::Kernel   ? Kind::Kernel
                                                        : Kind::Frame;
    }
    auto add = [&](uint32_t n, const StackTotal& t) {
        tree.at(n).weight += t.weight_ns();
        tree.at(n).samples += t.samples;
    };
    for (const auto& [pid, p] : prof.processes) {
        const std::string where = p.where();
        const uint32_t proc_label = tree.intern(p.display_name() + (where.empty() ? "" : " [" + where + "]"));
        const bool by_pod = options.group_by == "pod" && !p.pod_name().empty();
        for (const auto& [tid, t] : p.threads) {
            if (t.samples.empty()) continue;
            const uint32_t thread_label_id = tree.intern(thread_label(t));
            for (const auto& [stack, total] : thread_stack_totals(t)) {
                if (!total.weight_ns()) continue;
                uint32_t n = 0;
                add(n, total);
                if (by_pod) add(n = tree.child(n, tree.intern("pod " + p.pod_name()), Kind::Pod), total);
                add(n = tree.child(n, proc_label, Kind::Process), total);
                add(n = tree.child(n, thread_label_id, Kind::Thread), total);
                if (stack >= prof.stacks.size()) continue;
                for (uint32_t fi : prof.stacks.at(stack)) {
                    if (fi >= frame_label_id.size()) {
                        add(n = tree.child(n, tree.intern("?"), Kind::Synthetic), total);
                        continue;
                    }
                    add(n = tree.child(n, frame_label_id[fi], frame_kind[fi], frame_color[fi]), total);
                }
            }
        }
    }

    // Lay out in pre-order, children by label; count what is too narrow to draw.
    const uint64_t total = tree.at(0).weight;
    struct Placed {
        uint32_t node;
        int depth;
        double x, w;
    };
    std::vector<Placed> placed;
    size_t elided = 0;
    int max_depth = 0;
    if (total) {
        struct Todo {
            uint32_t node;
            int depth;
            uint64_t start;  // in weight units, from the left of "all"
        };
        std::vector<Todo> todo{{0, 0, 0}};
        const double px_per_ns = kInner / static_cast<double>(total);
        std::vector<uint32_t> order;
        while (!todo.empty()) {
            const Todo t = todo.back();
            todo.pop_back();
            const Node& n = tree.at(t.node);
            const double w = static_cast<double>(n.weight) * px_per_ns;
            if (w < kMinWidth) {
                // This frame and everything above it.
                std::vector<uint32_t> sub{t.node};
                while (!sub.empty()) {
                    const uint32_t s = sub.back();
                    sub.pop_back();
                    elided++;
                    for (uint32_t c : tree.at(s).children) sub.push_back(c);
                }
                continue;
            }
            placed.push_back({t.node, t.depth, kMargin + static_cast<double>(t.start) * px_per_ns, w});
            max_depth = std::max(max_depth, t.depth);
            order = n.children;
            std::sort(order.begin(), order.end(),
                      [&](uint32_t a, uint32_t b) { return tree.label(tree.at(a).label) < tree.label(tree.at(b).label); });
            std::vector<Todo> kids;
            uint64_t start = t.start;
            for (uint32_t c : order) {
                kids.push_back({c, t.depth + 1, start});
                start += tree.at(c).weight;
            }
            // Pushed last-first, so the first child comes out next: pre-order, left to right.
            for (auto it = kids.rbegin(); it != kids.rend(); ++it) todo.push_back(*it);
        }
    }

    const int levels = total ? max_depth + 1 : 1;
    const double height = kTop + levels * kFrameHeight + kBottom + (total ? 0 : 40);
    const double base = kTop + (levels - 1) * kFrameHeight;  // y of "all"

    // Subtitle: what was profiled, for how long, how many samples, when.
    const RunInfo& run = prof.run;
    std::string subtitle = run.target.empty() ? std::string("pybpfprof") : run.target;
    if (run.end_mono_ns > run.start_mono_ns) {
        char d[32];
        std::snprintf(d, sizeof d, "%.1f s", run.duration_s());
        subtitle += std::string(" \xC2\xB7 ") + d;
    }
    if (run.rate_hz > 0) subtitle += " at " + fixed(run.rate_hz, 0) + " Hz";
    subtitle += " \xC2\xB7 " + samples_text(total ? tree.at(0).samples : 0);
    if (run.lost) subtitle += " (" + std::to_string(run.lost) + " lost)";
    if (run.start_unix_ns) subtitle += " \xC2\xB7 " + iso8601_utc_ms(run.start_unix_ns);
    if (elided)
        subtitle += " \xC2\xB7 " + std::to_string(elided) + (elided == 1 ? " frame" : " frames") +
                    " narrower than 0.1 px not drawn";

    const std::string H = fixed(height);
    std::string s;
    s.reserve(4096 + placed.size() * 256);
    s += "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n";
    s += "<svg version=\"1.1\" id=\"pbp-flame\" width=\"" + fixed(kImageWidth) + "\" height=\"" + H +
         "\" viewBox=\"0 0 " + fixed(kImageWidth) + " " + H + "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
    s += "<title>" + xml("pybpfprof flame graph: " + (run.target.empty() ? std::string("profile") : run.target)) +
         "</title>\n";
    s += "<desc>" + xml(std::string("pybpfprof ") + PYBPFPROF_VERSION +
                        ": Python stacks, root at the bottom; a frame's width is its share of the sampled time") +
         "</desc>\n";
    s += "<style>" + std::string(kStyle) + "</style>\n";
    s += "<defs><linearGradient id=\"bg\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\"><stop stop-color=\"#eeeeee\" "
         "offset=\"5%\"/><stop stop-color=\"#eeeeb0\" offset=\"95%\"/></linearGradient></defs>\n";
    s += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"url(#bg)\"/>\n";
    s += "<text id=\"title\" x=\"" + fixed(kImageWidth / 2) + "\" y=\"24\" text-anchor=\"middle\">Flame Graph</text>\n";
    {
        auto cps = code_points(subtitle);
        std::string sub;
        append_fitted(sub, cps, kInner - 220);  // leaves room for the buttons on either side
        s += "<text id=\"subtitle\" x=\"" + fixed(kImageWidth / 2) + "\" y=\"44\" text-anchor=\"middle\">" + sub +
             "</text>\n";
    }
    s += "<text id=\"unzoom\" class=\"btn hide\" x=\"" + fixed(kMargin) + "\" y=\"24\">Reset Zoom</text>\n";
    s += "<text id=\"search\" class=\"btn\" x=\"" + fixed(kImageWidth - kMargin) +
         "\" y=\"24\" text-anchor=\"end\">Search</text>\n";
    s += "<text id=\"unsearch\" class=\"btn hide\" x=\"" + fixed(kImageWidth - kMargin) +
         "\" y=\"44\" text-anchor=\"end\">Reset Search</text>\n";
    s += "<text id=\"details\" x=\"" + fixed(kMargin) + "\" y=\"" + fixed(height - 12) + "\"></text>\n";
    s += "<text id=\"matched\" x=\"" + fixed(kImageWidth - kMargin) + "\" y=\"" + fixed(height - 12) +
         "\" text-anchor=\"end\"></text>\n";
    if (!total)
        s += "<text id=\"empty\" x=\"" + fixed(kImageWidth / 2) + "\" y=\"" + fixed(kTop + 30) +
             "\" text-anchor=\"middle\">No samples: no profiled Python thread ran on a CPU during the run</text>\n";
    s += "<g id=\"frames\">\n";
    for (const Placed& p : placed) {
        const Node& n = tree.at(p.node);
        const auto label = code_points(tree.label(n.label));
        const double y = base - p.depth * kFrameHeight;
        s += "<g class=\"f\"><title>";
        append_xml(s, label, 0, label.size());
        s += "\n" + samples_text(n.samples) + ", " + duration_text(n.weight) + ", " +
             percent(n.weight, total) + "</title><rect x=\"" +
             fixed(p.x) + "\" y=\"" + fixed(y) + "\" width=\"" + fixed(p.w) + "\" height=\"" +
             fixed(kFrameHeight - 1) + "\" rx=\"2\" ry=\"2\" fill=\"" + color(tree, n) + "\"/><text x=\"" +
             fixed(p.x + kTextPad) + "\" y=\"" + fixed(y + 11.5) + "\">";
        append_fitted(s, label, p.w);
        s += "</text></g>\n";
    }
    s += "</g>\n";
    s += "<script type=\"text/ecmascript\"><![CDATA[\n(function () {\n  'use strict';\n";
    s += "  var W = " + fixed(kInner) + ", X0 = " + fixed(kMargin) + ", FH = " + fixed(kFrameHeight) +
         ", BASE = " + fixed(base) + ", PAD = " + fixed(kTextPad) + ", CW = " + fixed(kCharWidth, 3) +
         ", MATCH = '" + kMatchFill + "';";
    s += kScript;
    s += "})();\n]]></script>\n</svg>\n";
    out << s;
}

}  // namespace

std::unique_ptr<Exporter> make_svg_exporter() { return std::make_unique<SvgExporter>(); }

}  // namespace pbp
