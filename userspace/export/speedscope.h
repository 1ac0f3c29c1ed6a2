// The speedscope writer (speedscope.cpp), for the HTML report's embedded download.
#pragma once
#include <ostream>

#include "engine/profile.h"
#include "export/exporter.h"

namespace pbp {

void write_speedscope(const Profile& profile, const ExportOptions& options, std::ostream& out);

}  // namespace pbp
