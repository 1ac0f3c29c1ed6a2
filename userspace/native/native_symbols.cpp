#include "native/native_symbols.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pbp::native {

std::string demangle(const char* name) {
    if (!name) return "";
    if (std::strncmp(name, "_Z", 2) != 0) return name;
    int status = 0;
    char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (!d) return name;
    std::string out = d;
    std::free(d);
    return out;
}

const Frame& NativeSymbols::frame_at(uint64_t pc) {
    Dwfl_Module* m = modules_.module_at(pc);
    if (!m) {
        auto it = unknown_.find(pc);
        if (it != unknown_.end()) return it->second;
        Frame f;
        char buf[32];
        std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(pc));
        f.name = std::string("[unknown] ") + buf;
        f.kind = FrameKind::Native;
        return unknown_.emplace(pc, f).first->second;
    }
    Dwarf_Addr start = 0;
    const char* mname = dwfl_module_info(m, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr);
    const std::string path = mname ? mname : "";
    auto key = std::make_pair(path, pc - start);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;

    Frame f;
    f.kind = FrameKind::Native;
    f.library = path;
    const uint64_t off = pc - start;
    if (FileSymbols* file = modules_.file_of(m)) {
        // The file's names, shared with every process that maps it.
        const FileSymbols::Name& n = file->at(off);
        f.name = n.symbol;
        f.file = n.file;
        f.line = n.line;
    } else {
        if (loaded_.emplace(path, true).second) {
            modules_.files().counters.symbol_loads++;
            modules_.files().counters.loads_by_file[path]++;
        }
        GElf_Off o = 0;
        GElf_Sym sym;
        if (const char* name = dwfl_module_addrinfo(m, pc, &o, &sym, nullptr, nullptr, nullptr)) f.name = demangle(name);
        if (Dwfl_Line* line = dwfl_module_getsrc(m, pc)) {
            int lineno = 0;
            if (const char* src = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
                f.file = src;
                f.line = lineno;
            }
        }
    }
    if (f.name.empty()) {
        // No symbol: the library and the offset in it, stable across runs of the same file.
        char buf[32];
        std::snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(off));
        const auto slash = path.rfind('/');
        f.name = "[" + (slash == std::string::npos ? path : path.substr(slash + 1)) + buf + "]";
    }
    return cache_.emplace(key, std::move(f)).first->second;
}

}  // namespace pbp::native
