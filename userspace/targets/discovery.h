// discover: is this process CPython, where is its runtime, which layout does it use?
// Decided by ELF facts (the _PyRuntime symbol or .PyRuntime section, Py_Version, a mapped
// libpython), never by file names alone. ELF files are read through /proc/PID/map_files
// or /proc/PID/root, so chroots and containers work.
#pragma once
#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cpython/gil.h"
#include "cpython/layout.h"
#include "cpython/runtime_phase.h"
#include "pybpfprof/abi.h"

namespace pbp {

struct PythonTarget {
    pid_t pid = 0;
    std::string interp_path;      // ELF holding the runtime, as the target sees it
    std::string exe;              // /proc/PID/exe when its maps were read: another one later means an exec
    uint64_t found_ns = 0;        // CLOCK_MONOTONIC before exe and the maps were read: an exec
                                  // record older than that is of the program found
    bool shared_lib = false;      // runtime lives in libpython (not the executable)
    cpython::Layout layout;
    uint64_t runtime_addr = 0;    // &_PyRuntime in the target (0 for 3.6)
    uint64_t interp_head_addr = 0;
    uint64_t code_type_addr = 0;  // &PyCode_Type in the target
    std::string warning;          // e.g. newer-than-tested CPython
    std::optional<cpython::GilStatics> gil_statics;  // 3.6: its GIL's static variables
    std::string gil_unknown;      // why its samples' GIL state is n/a; "" when it is known
    cpython::RuntimePhaseAddrs runtime_phase;  // where BPF reads start-up / finalization

    std::string describe() const;  // "3.11.7 (static /usr/bin/python3.11)"
    pbp_proc bpf_config(uint32_t max_depth, uint32_t generation) const;
};

enum class Discovery {
    Python,      // target filled in
    NotPython,   // definitely not CPython (reason says why)
    NotYet,      // may become Python: still in the dynamic loader, runtime not mapped yet
    Gone,        // process does not exist (any more)
    Unsupported, // CPython, but a version or build we cannot walk (reason says why)
    Zombie,      // it has exited and its parent has not reaped it yet (reason names the parent)
};

struct DiscoveryResult {
    Discovery status = Discovery::Gone;
    std::optional<PythonTarget> target;
    std::string reason;
    // Unsupported: a Python that pybpfprof does not profile (Python 2, a CPython too old or too
    // new), not a process whose memory or files cannot be read (which may not be Python at all).
    bool python_refused = false;
};

// Caches per-file ELF facts (keyed by device + inode), so scanning many processes that run
// the same interpreter parses it once.
class Discoverer {
public:
    DiscoveryResult discover(pid_t pid);

private:
    struct ElfFacts;
    std::shared_ptr<const ElfFacts> facts_for(pid_t pid, const std::string& open_path,
                                              const std::string& key);
    std::map<std::string, std::shared_ptr<const ElfFacts>> cache_;
};

}  // namespace pbp
