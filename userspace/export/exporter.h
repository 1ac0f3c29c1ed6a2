// One interface for every output format; each format lives in its own file.
#pragma once
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/profile.h"

namespace pbp {

// How to write a profile, as the user asked: not part of the profile's data.
struct ExportOptions {
    std::string group_by = "process";  // "process" or "pod" (--group-by)
};

class Exporter {
public:
    virtual ~Exporter() = default;
    virtual std::string name() const = 0;  // the -f value: "speedscope", "collapsed"
    // The file name endings of this format, without the leading dot ("pb.gz"); the first
    // is the default extension.
    virtual std::vector<std::string> extensions() const = 0;
    std::string extension() const { return extensions().front(); }
    virtual std::string how_to_open(const std::string& path) const = 0;  // one line for the user
    virtual void write(const Profile& profile, const ExportOptions& options, std::ostream& out) const = 0;
};

// nullptr for an unknown format.
std::unique_ptr<Exporter> make_exporter(const std::string& format);
std::vector<std::string> exporter_names();
// The format whose extension path ends with (".pb.gz": "pprof"; the longest ending wins),
// "" when none does.
std::string format_for_path(const std::string& path);
// Every extension format_for_path knows, for messages: ".speedscope.json, .json, ... or .pprof".
std::string known_extensions_text();

}  // namespace pbp
