// --native: native addresses named through libdwfl: the function (C++ names demangled), the
// source file and line where debug information is found (next to the file, by build-id or by
// .gnu_debuglink under /usr/lib/debug), and the library. Named by the file's shared state
// (file_symbols.h: each file parsed and each of its addresses looked up once, for every process
// that maps it), the frame then cached per module and offset in it for this process. A pc that
// no symbol names in the eval loop's cold part (cold_part.h: a stripped interpreter's) is named
// "_PyEval_EvalFrameDefault.cold", as its symbol would.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "engine/profile.h"
#include "native/process_modules.h"

namespace pbp::native {

class NativeSymbols {
public:
    explicit NativeSymbols(ProcessModules& modules) : modules_(modules) {}
    // The frame of pc (an unwound pc: a return address already moved into its call). A pc in
    // no known file is "[unknown]" with its address.
    const Frame& frame_at(uint64_t pc);

private:
    ProcessModules& modules_;
    // (module path, offset from the module's start) -> frame
    std::map<std::pair<std::string, uint64_t>, Frame> cache_;
    std::map<uint64_t, Frame> unknown_;
    std::map<std::string, bool> loaded_;  // the modules whose symbols were looked up (SetupCounters)
};

// "_ZN3foo3barEv" -> "foo::bar()"; anything else as it is.
std::string demangle(const char* name);

}  // namespace pbp::native
