// The HTML performance report (html_report.cpp): -f html, or --report FILE next to any
// other format. Exposed here with its size limits so tests can measure and bound it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/profile.h"
#include "export/exporter.h"

namespace pbp {

struct HtmlReportLimits {
    size_t max_fine_bins = 1000;             // timeline bins per run
    size_t max_cells = 4'000'000;            // (bin, thread, stack) cells embedded (~2.5 bytes each)
    size_t max_file_bytes = 19'500'000;      // the whole file (the promise is < 20 MB)
    size_t max_raw_embed_bytes = 8'000'000;  // the gzipped+base64 speedscope download
    size_t max_raw_json_bytes = 200'000'000; // speedscope JSON larger than this is not even made
};

struct HtmlReportStats {
    size_t bytes = 0;
    uint64_t fine_ns = 0, nfine = 0, coarse_k = 0, cells = 0, stacks = 0, nodes = 0;
    bool raw_embedded = false;
    std::string note;
    double seconds = 0;  // time to render
};

// options.group_by shapes the embedded speedscope download as it does -f speedscope.
std::string render_html_report(const Profile& profile, const ExportOptions& options = {},
                               const HtmlReportLimits& limits = {}, HtmlReportStats* stats = nullptr);
std::string html_report_how_to_open(const std::string& path);

}  // namespace pbp
