// Collapsed ("folded") stacks: flamegraph.pl's input format, also read by speedscope,
// inferno, Pyroscope and others. One line per distinct stack, outermost frame first:
//   process;thread;frame;...;leaf COUNT
// (with --group-by pod, "pod <namespace>/<name>;" comes first for processes in a pod, so
// flame graphs have one root per pod)
// COUNT is a weight in a stated unit. A cpu mode run whose samples all weigh one sampling
// period writes the number of samples (flamegraph.pl's and py-spy's meaning; the file is
// what it always was). Anything else (wall or gil mode, off-CPU samples, samples of different
// weights) writes each stack's summed weight in nanoseconds, on- and off-CPU alike, so widths
// stay true to time (a stack that weighs nothing has no line), and states the unit in a first
// line that is a comment:
//   # pybpfprof folded stacks: values in nanoseconds (mode wall, on-CPU and off-CPU time)
// Every folded reader skips it: flamegraph.pl and inferno ignore (and count) lines that do not
// end in " COUNT", speedscope's importer keeps only lines matching /^(.*) (\d+)$/; the comment
// therefore never ends in a digit. Off-CPU stacks end in their wait leaf ("[sleeping]", ...).
// process = display_name() plus its container, if any, thread = "<name> (tid N)", frame = "qualname (file:line)";
// with --native a native frame is "symbol [libc.so.6]" (its library's base name) and a kernel
// frame "vfs_read_[k]", perf's annotation (export/common.h frame_label, docs/native-frames.md).
// Lines are sorted (bytewise) so equal profiles give identical files.
#include <map>
#include <string>
#include <vector>

#include "export/common.h"
#include "export/exporter.h"

namespace pbp {

namespace {

// ';' separates frames and '\n' separates lines: neither may appear inside a frame.
std::string sanitize(const std::string& s) {
    std::string r = s;
    for (char& c : r) {
        if (c == ';') c = ':';
        else if (c == '\n' || c == '\r') c = ' ';
    }
    if (r.empty()) r = "?";
    return r;
}

std::string frame_text(const Frame& f) { return sanitize(frame_label(f)); }

std::string thread_text(const ThreadProfile& t) {
    std::string s = t.name.empty() ? std::string("thread") : t.name;
    return sanitize(s + " (tid " + std::to_string(t.tid) + ")");
}

class CollapsedExporter : public Exporter {
public:
    std::string name() const override { return "collapsed"; }
    std::vector<std::string> extensions() const override { return {"folded", "collapsed"}; }
    std::string how_to_open(const std::string& path) const override {
        return "flamegraph.pl " + path + " > flame.svg";
    }
    void write(const Profile& profile, const ExportOptions& options, std::ostream& out) const override;
};

void CollapsedExporter::write(const Profile& prof, const ExportOptions& options, std::ostream& out) const {
    const bool counts =
        prof.run.mode == ProfileMode::Cpu && every_sample_weighs(prof, sampling_period_ns(prof.run));
    std::vector<std::string> frame_texts;
    frame_texts.reserve(prof.frames.size());
    for (const auto& f : prof.frames.all()) frame_texts.push_back(frame_text(f));

    std::map<std::string, uint64_t> lines;
    for (const auto& [pid, p] : prof.processes) {
        std::string where = p.where();
        std::string proc = sanitize(p.display_name() + (where.empty() ? "" : " [" + where + "]"));
        if (options.group_by == "pod" && !p.pod_name().empty()) proc = sanitize("pod " + p.pod_name()) + ";" + proc;
        for (const auto& [tid, t] : p.threads) {
            if (t.samples.empty()) continue;
            const std::string prefix = proc + ";" + thread_text(t);
            for (const auto& [stack, total] : thread_stack_totals(t)) {
                std::string line = prefix;
                if (stack < prof.stacks.size())
                    for (uint32_t fi : prof.stacks.at(stack)) {
                        line += ';';
                        line += fi < frame_texts.size() ? frame_texts[fi] : std::string("?");
                    }
                lines[line] += counts ? total.samples : total.weight_ns();
            }
        }
    }
    if (!counts && !lines.empty())
        out << "# pybpfprof folded stacks: values in nanoseconds (mode " << mode_name(prof.run.mode)
            << (has_off_cpu(prof) ? ", on-CPU and off-CPU time)" : ", on-CPU time)") << '\n';
    for (const auto& [line, value] : lines)
        if (value) out << line << ' ' << value << '\n';
}

}  // namespace

std::unique_ptr<Exporter> make_collapsed_exporter() {
    return std::make_unique<CollapsedExporter>();
}

}  // namespace pbp
