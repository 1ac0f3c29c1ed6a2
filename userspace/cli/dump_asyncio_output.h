// `pybpfprof dump --async`: a process's asyncio tasks (engine/dump_asyncio.h) as the await tree
// `python -m asyncio pstree PID` prints, or as JSON (docs/dump.md, docs/asyncio.md).
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>

#include "engine/dump_asyncio.h"

namespace pbp {

void write_asyncio_text(const DumpAsyncio& a, std::ostream& out);
nlohmann::json asyncio_json(const DumpAsyncio& a);

}  // namespace pbp
