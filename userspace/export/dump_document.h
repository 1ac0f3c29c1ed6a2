// The dump's JSON document (docs/dump.md): what `pybpfprof dump --json` prints, what the
// agent sends for a dump request, and what `pybpfprof.dump()` returns; and that document read
// back (a dump that came from the agent is rendered by the client as one read here). The
// text a person reads is the CLI's (cli/dump_output.h).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "engine/dump.h"

namespace pbp {

nlohmann::json dump_json(const DumpResult& dump);
// A process's asyncio tasks (dump --async): its "asyncio" object.
nlohmann::json asyncio_json(const DumpAsyncio& a);
// The document of dump_json back into out. false + one-line error when a field is missing or
// of another type; fields it does not know are ignored (a newer agent may add some).
bool dump_from_json(const nlohmann::json& doc, DumpResult& out, std::string& error);
// "0x7f3a2c1e8a40": how a task id is written.
std::string task_id_text(uint64_t id);

}  // namespace pbp
