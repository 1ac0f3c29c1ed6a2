// What `pybpfprof dump` prints for people: the gathered stacks (engine/dump.h) as text. The
// JSON document (--json, and what the agent sends) is export/dump_document.h's.
#pragma once
#include <ostream>

#include "engine/dump.h"

namespace pbp {

void write_dump_text(const DumpResult& dump, std::ostream& out);

}  // namespace pbp
