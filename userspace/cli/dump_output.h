// What `pybpfprof dump` prints: the gathered stacks (engine/dump.h) as text for people, or as
// one JSON document (docs/dump.md); and that document read back, for a dump that came from
// the agent (it sends the document; the client renders it as a dump read here).
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "engine/dump.h"

namespace pbp {

void write_dump_text(const DumpResult& dump, std::ostream& out);
nlohmann::json dump_json(const DumpResult& dump);
// The document of dump_json back into out. false + one-line error when a field is missing or
// of another type; fields it does not know are ignored (a newer agent may add some).
bool dump_from_json(const nlohmann::json& doc, DumpResult& out, std::string& error);

}  // namespace pbp
