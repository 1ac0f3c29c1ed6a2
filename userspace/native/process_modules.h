// --native: a process's ELF files (executable, libraries, C extensions) as one libdwfl session,
// for unwinding and naming its native frames. Read from /proc/PID/maps; each file opened through
// /proc/PID/root, so a process in a container has its own files, not the host's.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;

namespace pbp::native {

// What the native set-up did, summed over every process since the start (PYBPFPROF_DEBUG=1's
// lines, and the tests that keep its cost from growing back).
struct SetupCounters {
    uint64_t maps_reads = 0;      // /proc/PID/maps read
    uint64_t files_reported = 0;  // ELF files opened and reported to a Dwfl (a process's refresh)
    uint64_t symbol_loads = 0;    // a module's symbol table and debug information looked up
    std::map<std::string, uint64_t> loads_by_file;  // the same, per file as the process saw it
    uint64_t refresh_cpu_ns = 0;  // CPU in refresh() (maps and reporting), when timing is on
};
SetupCounters& setup_counters();
// Timing on (thread CPU clock reads around each step): PYBPFPROF_DEBUG.
extern bool g_setup_timing;

class ProcessModules {
public:
    explicit ProcessModules(pid_t pid);
    ~ProcessModules();
    ProcessModules(const ProcessModules&) = delete;
    ProcessModules& operator=(const ProcessModules&) = delete;

    // (Re)reads the maps and, when its executable file mappings changed, reports each of them
    // to a new Dwfl. False when the maps cannot be read (the process is gone).
    bool refresh();
    // The module holding address pc; one refresh when none does (a library loaded since), at
    // most every 20 ms.
    Dwfl_Module* module_at(uint64_t pc);
    Dwfl* dwfl() const { return dwfl_; }
    pid_t pid() const { return pid_; }
    // Bumped by every refresh (a new Dwfl: what was attached to the old one is void).
    uint32_t epoch() const { return epoch_; }
    // The file of a module as the process sees it ("/usr/lib/.../libc.so.6").
    static std::string path_of(Dwfl_Module* m);

private:
    pid_t pid_;
    Dwfl* dwfl_ = nullptr;
    uint32_t epoch_ = 0;
    uint64_t last_refresh_ns_ = 0;
    std::string signature_;  // the executable file mappings the Dwfl was made from
};

}  // namespace pbp::native
