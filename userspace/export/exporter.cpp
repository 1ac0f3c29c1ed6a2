// Format registry: construction only. Each format lives in its own file and provides
// one factory function declared below.
#include "export/exporter.h"

#include <cctype>

namespace pbp {

std::unique_ptr<Exporter> make_speedscope_exporter();  // speedscope.cpp
std::unique_ptr<Exporter> make_collapsed_exporter();   // collapsed.cpp
std::unique_ptr<Exporter> make_html_exporter();        // html_report.cpp
std::unique_ptr<Exporter> make_pprof_exporter();       // pprof.cpp
std::unique_ptr<Exporter> make_svg_exporter();         // svg.cpp
std::unique_ptr<Exporter> make_raw_exporter();         // raw.cpp: pybpfprof's own format

namespace {

struct FormatEntry {
    const char* name;
    std::unique_ptr<Exporter> (*make)();
};

// Order is the order shown to users (first = default).
const FormatEntry kFormats[] = {
    {"speedscope", make_speedscope_exporter},
    {"collapsed", make_collapsed_exporter},
    {"html", make_html_exporter},
    {"pprof", make_pprof_exporter},
    {"svg", make_svg_exporter},
    {"pbp", make_raw_exporter},
};

}  // namespace

std::unique_ptr<Exporter> make_exporter(const std::string& format) {
    for (const auto& f : kFormats)
        if (format == f.name) return f.make();
    return nullptr;
}

std::vector<std::string> exporter_names() {
    std::vector<std::string> names;
    for (const auto& f : kFormats) names.emplace_back(f.name);
    return names;
}

std::string format_for_path(const std::string& path_as_given) {
    std::string path = path_as_given, format;
    for (char& c : path) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));  // R.HTML is html
    size_t longest = 0;
    for (const auto& f : kFormats)
        for (const std::string& ext : f.make()->extensions()) {
            const std::string end = "." + ext;
            if (end.size() > longest && path.size() >= end.size() &&
                path.compare(path.size() - end.size(), end.size(), end) == 0) {
                format = f.name;
                longest = end.size();
            }
        }
    return format;
}

std::string known_extensions_text() {
    std::vector<std::string> all;
    for (const auto& f : kFormats)
        for (const std::string& ext : f.make()->extensions()) all.push_back("." + ext);
    std::string s;
    for (size_t i = 0; i < all.size(); i++) s += (i ? (i + 1 == all.size() ? " or " : ", ") : "") + all[i];
    return s;
}

}  // namespace pbp
