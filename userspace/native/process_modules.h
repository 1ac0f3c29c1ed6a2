// --native: a process's ELF files (executable, libraries, C extensions) as one libdwfl session,
// for unwinding its native frames, each with its file's naming state (file_symbols.h, shared
// with the other processes that map the file). Read from /proc/PID/maps; each file opened
// through /proc/PID/root, so a process in a container has its own files, not the host's.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "native/file_symbols.h"

typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;

namespace pbp::native {

class ProcessModules {
public:
    ProcessModules(pid_t pid, FileCache& files);
    ~ProcessModules();
    ProcessModules(const ProcessModules&) = delete;
    ProcessModules& operator=(const ProcessModules&) = delete;

    // (Re)reads the maps and, when its executable file mappings changed, reports each of them
    // to a new Dwfl. False when the maps cannot be read (the process is gone).
    bool refresh();
    // The module holding address pc; one refresh when none does (a library loaded since): at
    // most every 20 ms, or at once for a pc whose page was not asked about in the last second
    // (an unwind stopped at a just-imported extension must not wait), up to 50 such pages a
    // second (JIT code, pcs in no file, spread over many pages).
    Dwfl_Module* module_at(uint64_t pc);
    Dwfl* dwfl() const { return dwfl_; }
    FileCache& files() const { return files_; }
    pid_t pid() const { return pid_; }
    // Bumped by every refresh (a new Dwfl: what was attached to the old one is void).
    uint32_t epoch() const { return epoch_; }
    // The file of a module as the process sees it ("/usr/lib/.../libc.so.6").
    static std::string path_of(Dwfl_Module* m);
    // The naming state of module m's file (null when there is none: not reported here).
    FileSymbols* file_of(Dwfl_Module* m) const {
        auto it = files_of_.find(m);
        return it == files_of_.end() ? nullptr : it->second.get();
    }

private:
    pid_t pid_;
    FileCache& files_;
    Dwfl* dwfl_ = nullptr;
    std::unordered_map<Dwfl_Module*, std::shared_ptr<FileSymbols>> files_of_;  // of this Dwfl
    uint32_t epoch_ = 0;
    uint64_t last_refresh_ns_ = 0;
    std::unordered_map<uint64_t, uint64_t> asked_ns_;  // page of a pc in no module: when last asked
    uint64_t new_pages_since_ns_ = 0;  // the current second of refreshes for new pages
    uint32_t new_pages_ = 0;           // and how many it had
    std::string signature_;  // the executable file mappings the Dwfl was made from
};

}  // namespace pbp::native
