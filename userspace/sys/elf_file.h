// Reading ELF facts (symbols, sections, load segments) of a target's mapped files.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <libelf.h>

namespace pbp {

struct ElfSegment {
    uint64_t vaddr, offset, filesz, memsz;
};

struct ElfSection {
    uint64_t addr, offset, size;
};

class ElfFile {
public:
    // Opens path (e.g. /proc/PID/root/usr/bin/python3.11 or /proc/PID/map_files/a-b).
    static std::unique_ptr<ElfFile> open(const std::string& path, std::string& error);
    ~ElfFile();
    ElfFile(const ElfFile&) = delete;
    ElfFile& operator=(const ElfFile&) = delete;

    // Values (link-time virtual addresses) of the named symbols that exist, from .dynsym
    // and .symtab (local symbols too). One pass over the symbol tables. "FILE:NAME" names the
    // local symbol NAME of source file FILE (after its STT_FILE entry): a static variable whose
    // name other files use too.
    std::map<std::string, uint64_t> find_symbols(const std::vector<std::string>& names) const;
    // The same, with each symbol's size (st_size: the bytes of a variable).
    struct Symbol {
        uint64_t value = 0, size = 0;
    };
    std::map<std::string, Symbol> find_sized_symbols(const std::vector<std::string>& names) const;
    std::optional<ElfSection> section(const std::string& name) const;
    const std::vector<ElfSegment>& loads() const { return loads_; }
    const std::string& soname() const { return soname_; }
    bool is_exec() const { return type_ == 2; /* ET_EXEC */ }

    // Reads bytes stored in the file at a link-time virtual address.
    bool read_vaddr(uint64_t vaddr, void* buf, size_t n) const;
    // NUL-terminated strings in .rodata matching a CPython version ("3.9.18").
    std::vector<std::string> version_strings() const;

private:
    ElfFile() = default;
    int fd_ = -1;
    Elf* elf_ = nullptr;
    uint16_t type_ = 0;
    std::vector<ElfSegment> loads_;
    std::string soname_;
};

}  // namespace pbp
