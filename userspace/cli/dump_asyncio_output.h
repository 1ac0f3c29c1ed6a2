// `pybpfprof dump --async`: a process's asyncio tasks (engine/dump_asyncio.h) as the await tree
// `python -m asyncio pstree PID` prints (the JSON is export/dump_document.h's).
#pragma once
#include <ostream>

#include "engine/dump_asyncio.h"

namespace pbp {

void write_asyncio_text(const DumpAsyncio& a, std::ostream& out);

}  // namespace pbp
