// --native: the naming state of one ELF file (its symbol table, its debug information and line
// tables, the names already looked up), shared by every process that maps the file. A second
// process of the same interpreter names its frames with what the first one parsed: nothing of
// libpython, libc or their debug files is read again (it was, once per process, 40-90 ms of CPU
// before its first stack could be merged; BENCHMARKS.md).
//
// A file is known by what stat() says of it through the process's root: device, inode, size and
// modification time. A container's file is not taken for the host's file of the same path, and
// a file replaced or rewritten since is another file. Kept while a process maps it, and for a
// minute after (FileCache::trim): short-lived processes of one interpreter, one after another,
// share it too.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "native/cold_part.h"

typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;

namespace pbp::native {

// What the native set-up did, summed over every process since the start (PYBPFPROF_DEBUG=1's
// lines, and the test that keeps its cost from growing back).
struct SetupCounters {
    uint64_t maps_reads = 0;      // /proc/PID/maps read
    uint64_t files_reported = 0;  // ELF files opened and reported to a Dwfl (a process's refresh)
    uint64_t symbol_loads = 0;    // a file's symbol table and debug information looked up
    std::map<std::string, uint64_t> loads_by_file;  // the same, per file as the process saw it
    uint64_t refresh_cpu_ns = 0;  // CPU in ProcessModules::refresh(), when timing is on
};

struct FileKey {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0;  // the vDSO: a hash of its image
    bool operator<(const FileKey& o) const {
        return std::tie(dev, ino, size, mtime_ns) < std::tie(o.dev, o.ino, o.size, o.mtime_ns);
    }
};

class FileSymbols {
public:
    struct Name {
        std::string symbol;  // demangled; empty when no symbol holds the address
        std::string file;    // source file, when debug information gives it
        int line = 0;
    };

    // A file: fd open on it (owned), dirfd on its directory (owned), base its name in that
    // directory, name the path the process maps it by. The vDSO: its image, fd and dirfd -1.
    FileSymbols(SetupCounters& counters, int fd, int dirfd, std::string base, std::string name);
    FileSymbols(SetupCounters& counters, std::vector<char> vdso_image);
    ~FileSymbols();
    FileSymbols(const FileSymbols&) = delete;
    FileSymbols& operator=(const FileSymbols&) = delete;

    // The name at offset off from the file's first loaded byte (a module's start as libdwfl
    // reports it: the same in every process that maps the file). Parses the file (symbol
    // table, debug information) at the first call only.
    const Name& at(uint64_t off);
    // The load bias of the file mapped at start from file offset pgoff (as process_modules'
    // load_bias, from the program headers read once). False when no PT_LOAD holds pgoff.
    bool load_bias(uint64_t start, uint64_t pgoff, uint64_t& bias) const;
    bool is_elf() const { return elf_; }

private:
    void load();

    struct Load {
        uint64_t offset, filesz, vaddr, align;
    };
    SetupCounters& counters_;
    int fd_ = -1, dirfd_ = -1;
    std::string base_, name_;
    std::vector<char> vdso_;
    bool elf_ = false;
    std::vector<Load> loads_;
    bool loaded_ = false;
    Dwfl* dwfl_ = nullptr;
    Dwfl_Module* mod_ = nullptr;
    uint64_t low_ = 0;
    std::unordered_map<uint64_t, Name> names_;
    // The eval loop's cold part found without a symbol (cold_part.h), in the file's own
    // addresses; looked for once, at the first address no symbol names.
    bool eval_cold_looked_ = false;
    std::optional<CodeRange> eval_cold_;
};

class FileCache {
public:
    // The state of the file opened by path (as stat() gave st) and mapped by the process as
    // name; made at the first sight of the file (its program headers read, nothing parsed).
    // Null when it cannot be opened or is not an ELF file.
    std::shared_ptr<FileSymbols> get(const std::string& path, const struct stat& st, const std::string& name);
    // The vDSO's, by its image (the same for every process of a kernel).
    std::shared_ptr<FileSymbols> get_vdso(std::vector<char> image);
    // Forgets the files no process has used for a minute, and beyond the 32 most recently used
    // of those no process uses.
    void trim(uint64_t now_ns);
    size_t size() const { return files_.size(); }

    SetupCounters counters;
    bool timing = false;  // PYBPFPROF_DEBUG: CPU time read around each step (a system call)

private:
    struct Entry {
        std::shared_ptr<FileSymbols> file;
        uint64_t used_ns = 0;  // last seen in use (by a process, or handed out)
    };
    std::map<FileKey, Entry> files_;
};

}  // namespace pbp::native
