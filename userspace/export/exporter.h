// One interface for every output format; each format lives in its own file.
#pragma once
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/profile.h"

namespace pbp {

class Exporter {
public:
    virtual ~Exporter() = default;
    virtual std::string name() const = 0;       // the -f value: "speedscope", "collapsed"
    virtual std::string extension() const = 0;  // default file extension, without dot
    virtual std::string how_to_open(const std::string& path) const = 0;  // one line for the user
    virtual void write(const Profile& profile, std::ostream& out) const = 0;
};

// nullptr for an unknown format.
std::unique_ptr<Exporter> make_exporter(const std::string& format);
std::vector<std::string> exporter_names();

}  // namespace pbp
