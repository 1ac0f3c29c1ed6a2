#include "sys/elf_file.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <regex>
#include <set>

namespace pbp {

std::unique_ptr<ElfFile> ElfFile::open(const std::string& path, std::string& error) {
    if (elf_version(EV_CURRENT) == EV_NONE) {
        error = "libelf initialisation failed";
        return nullptr;
    }
    std::unique_ptr<ElfFile> f(new ElfFile());
    f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f->fd_ < 0) {
        error = path + ": " + strerror(errno);
        return nullptr;
    }
    f->elf_ = elf_begin(f->fd_, ELF_C_READ_MMAP, nullptr);
    if (!f->elf_ || elf_kind(f->elf_) != ELF_K_ELF) {
        error = path + ": not an ELF file";
        return nullptr;
    }
    GElf_Ehdr eh;
    if (!gelf_getehdr(f->elf_, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64) {
        error = path + ": not a 64-bit ELF file";
        return nullptr;
    }
    f->type_ = eh.e_type;
    size_t nph = 0;
    if (elf_getphdrnum(f->elf_, &nph) != 0) nph = 0;
    // The count may come from section 0 (PN_XNUM) and be anything up to 2^32: a table that
    // cannot fit in the file is not read entry by entry (libelf would retry loading it each
    // time), and the first entry libelf cannot give ends the walk.
    size_t file_size = 0;
    if (elf_rawfile(f->elf_, &file_size) == nullptr || nph > file_size / sizeof(Elf64_Phdr)) nph = 0;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(f->elf_, static_cast<int>(i), &ph)) break;
        // A segment whose addresses or file range wrap around cannot be mapped: the loader
        // refuses it too, so it is left out rather than read.
        if (ph.p_type == PT_LOAD && ph.p_filesz <= ph.p_memsz &&
            ph.p_vaddr + ph.p_memsz >= ph.p_vaddr && ph.p_offset + ph.p_filesz >= ph.p_offset &&
            ph.p_offset + ph.p_filesz <= uint64_t(INT64_MAX))
            f->loads_.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz});
    }
    // DT_SONAME
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(f->elf_, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC) continue;
        Elf_Data* d = elf_getdata(scn, nullptr);
        if (!d || sh.sh_entsize == 0) continue;  // (an entry size of 0 is a broken file, not a divisor)
        for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Dyn dyn;
            if (!gelf_getdyn(d, static_cast<int>(i), &dyn)) break;
            if (dyn.d_tag == DT_SONAME) {
                const char* s = elf_strptr(f->elf_, sh.sh_link, dyn.d_un.d_val);
                if (s) f->soname_ = s;
            }
        }
    }
    return f;
}

ElfFile::~ElfFile() {
    if (elf_) elf_end(elf_);
    if (fd_ >= 0) ::close(fd_);
}

std::map<std::string, uint64_t> ElfFile::find_symbols(const std::vector<std::string>& names) const {
    std::map<std::string, uint64_t> found;
    for (auto& [name, sym] : find_sized_symbols(names)) found[name] = sym.value;
    return found;
}

std::map<std::string, ElfFile::Symbol> ElfFile::find_sized_symbols(const std::vector<std::string>& names) const {
    std::map<std::string, Symbol> found;
    std::set<std::string> want(names.begin(), names.end());
    std::set<std::string> want_files;  // the FILE of each "FILE:NAME" asked for
    for (const std::string& n : names)
        if (auto c = n.find(':'); c != std::string::npos) want_files.insert(n.substr(0, c));
    for (int pass = 0; pass < 2 && found.size() < want.size(); pass++) {
        Elf_Scn* scn = nullptr;
        while ((scn = elf_nextscn(elf_, scn))) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh)) continue;
            if (sh.sh_type != (pass == 0 ? SHT_DYNSYM : SHT_SYMTAB) || !sh.sh_entsize) continue;
            Elf_Data* d = elf_getdata(scn, nullptr);
            if (!d) continue;
            size_t n = sh.sh_size / sh.sh_entsize;
            std::string file;     // the source file of the local symbols that follow (STT_FILE)
            bool file_wanted = false;  // ... one a "FILE:NAME" asks for
            for (size_t i = 0; i < n; i++) {
                GElf_Sym sym;
                if (!gelf_getsym(d, static_cast<int>(i), &sym)) break;
                if (GELF_ST_TYPE(sym.st_info) == STT_FILE) {
                    const char* f = elf_strptr(elf_, sh.sh_link, sym.st_name);
                    file = f ? f : "";
                    file_wanted = want_files.count(file) > 0;
                    continue;
                }
                if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
                const char* nm = elf_strptr(elf_, sh.sh_link, sym.st_name);
                if (!nm || !*nm) continue;
                if (want.count(nm) && !found.count(nm)) found[nm] = Symbol{sym.st_value, sym.st_size};
                if (file_wanted && GELF_ST_BIND(sym.st_info) == STB_LOCAL) {
                    std::string q = file + ":" + nm;  // a static variable named after its file
                    if (want.count(q) && !found.count(q)) found[q] = Symbol{sym.st_value, sym.st_size};
                }
            }
        }
    }
    return found;
}

std::optional<ElfSection> ElfFile::section(const std::string& name) const {
    size_t shstrndx = 0;
    if (elf_getshdrstrndx(elf_, &shstrndx)) return std::nullopt;
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(elf_, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh)) continue;
        const char* nm = elf_strptr(elf_, shstrndx, sh.sh_name);
        if (nm && name == nm) return ElfSection{sh.sh_addr, sh.sh_offset, sh.sh_size};
    }
    return std::nullopt;
}

bool ElfFile::read_vaddr(uint64_t vaddr, void* buf, size_t n) const {
    for (auto& s : loads_) {
        // (Written so that no sum can wrap: a file's header values are anyone's.)
        if (vaddr >= s.vaddr && vaddr - s.vaddr <= s.filesz && n <= s.filesz - (vaddr - s.vaddr)) {
            off_t off = static_cast<off_t>(s.offset + (vaddr - s.vaddr));
            return pread(fd_, buf, n, off) == static_cast<ssize_t>(n);
        }
    }
    return false;
}

std::vector<std::string> ElfFile::version_strings() const {
    std::vector<std::string> out;
    auto ro = section(".rodata");
    if (!ro || ro->size == 0 || ro->size > (64u << 20)) return out;
    std::string data(ro->size, '\0');
    if (pread(fd_, data.data(), data.size(), static_cast<off_t>(ro->offset)) !=
        static_cast<ssize_t>(data.size()))
        return out;
    static const std::regex re(R"(^3\.(\d{1,2})\.(\d{1,2})((a|b|rc)\d{1,2})?\+?$)");
    size_t i = 0;
    while (i < data.size()) {
        size_t end = data.find('\0', i);
        if (end == std::string::npos) break;
        size_t len = end - i;
        if (len >= 5 && len <= 12 && data[i] == '3') {
            std::string s = data.substr(i, len);
            if (std::regex_match(s, re)) out.push_back(s);
        }
        i = end + 1;
    }
    return out;
}

}  // namespace pbp
