// What `pybpfprof dump` prints: the gathered stacks (engine/dump.h) as text for people, or as
// one JSON document (docs/dump.md).
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>

#include "engine/dump.h"

namespace pbp {

void write_dump_text(const DumpResult& dump, std::ostream& out);
nlohmann::json dump_json(const DumpResult& dump);

}  // namespace pbp
