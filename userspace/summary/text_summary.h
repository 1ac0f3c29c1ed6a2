// The end-of-run text for the terminal: the one-line "Wrote ..." summary and the top
// functions by self time, which users read before opening any file.
#pragma once
#include <string>

#include "engine/profile.h"

namespace pbp {

std::string summary_line(const Profile& p, const std::string& path);
std::string top_functions(const Profile& p, size_t n = 10);

}  // namespace pbp
