#include "native/file_symbols.h"

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string_view>

#include "native/cold_part.h"
#include "native/merge.h"
#include "native/native_symbols.h"

namespace pbp::native {

namespace {

char* file_debuginfo_path = nullptr;  // libdwfl's default search, as process_modules' Dwfls

const Dwfl_Callbacks kFileCallbacks = {
    dwfl_build_id_find_elf,
    dwfl_standard_find_debuginfo,  // build-id (/usr/lib/debug/.build-id) and .gnu_debuglink
    dwfl_offline_section_address,
    &file_debuginfo_path,
};

constexpr uint64_t kUnusedKeepNs = 60ULL * 1000000000ULL;  // a file no process maps: kept a minute
constexpr size_t kUnusedKeepMax = 32;                      // and at most this many of them

// The PT_LOAD program headers of the ELF file open on fd. False when it is not an ELF file.
template <typename Out>
bool read_loads(int fd, Out&& out) {
    elf_version(EV_CURRENT);
    Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    if (!elf) return false;
    size_t n = 0;
    const bool ok = elf_kind(elf) == ELF_K_ELF && elf_getphdrnum(elf, &n) == 0;
    for (size_t i = 0; ok && i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
            out(ph.p_offset, ph.p_filesz, ph.p_vaddr, ph.p_align);
    }
    elf_end(elf);
    return ok;
}

}  // namespace

FileSymbols::FileSymbols(SetupCounters& counters, int fd, int dirfd, std::string base, std::string name)
    : counters_(counters), fd_(fd), dirfd_(dirfd), base_(std::move(base)), name_(std::move(name)) {
    elf_ = read_loads(fd_, [this](uint64_t off, uint64_t sz, uint64_t va, uint64_t al) {
        loads_.push_back({off, sz, va, al});
    });
}

FileSymbols::FileSymbols(SetupCounters& counters, std::vector<char> vdso_image)
    : counters_(counters), name_("[vdso]"), vdso_(std::move(vdso_image)) {
    elf_ = vdso_.size() >= 4 && std::string_view(vdso_.data(), 4) == "\x7f" "ELF";
}

FileSymbols::~FileSymbols() {
    if (dwfl_) dwfl_end(dwfl_);
    if (fd_ >= 0) ::close(fd_);
    if (dirfd_ >= 0) ::close(dirfd_);
}

bool FileSymbols::load_bias(uint64_t start, uint64_t pgoff, uint64_t& bias) const {
    for (const Load& l : loads_) {
        const uint64_t seg_off = l.offset & ~(l.align ? l.align - 1 : 0);
        if (pgoff < seg_off || pgoff >= l.offset + l.filesz) continue;
        bias = start - (l.vaddr - l.offset + pgoff);
        return true;
    }
    return false;
}

void FileSymbols::load() {
    loaded_ = true;
    counters_.symbol_loads++;
    counters_.loads_by_file[name_]++;
    dwfl_ = dwfl_begin(&kFileCallbacks);
    if (!dwfl_) return;
    int fd = -1;
    std::string file_name;
    if (!vdso_.empty()) {
        // A memory file holding the image, read as a library is (process_modules: report_vdso).
        fd = ::memfd_create("pybpfprof-vdso", MFD_CLOEXEC);
        size_t done = 0;
        while (fd >= 0 && done < vdso_.size()) {
            const ssize_t w = ::write(fd, vdso_.data() + done, vdso_.size() - done);
            if (w <= 0) break;
            done += static_cast<size_t>(w);
        }
        if (fd >= 0 && done != vdso_.size()) {
            ::close(fd);
            fd = -1;
        }
        file_name = name_;
    } else {
        // The file itself, whatever its path has become since; its directory through the fd
        // held on it: the debug file next to it (.gnu_debuglink, .debug/) is found there even
        // once the process whose root it was opened through is gone. (libdwfl also tries the
        // real path of the name, which this resolves as the path it was opened by did.)
        fd = ::dup(fd_);
        file_name = dirfd_ >= 0 ? "/proc/self/fd/" + std::to_string(dirfd_) + "/" + base_ : name_;
    }
    if (fd < 0) return;
    dwfl_report_begin(dwfl_);
    // At the file's own addresses (base 0): an offset from the module's start is the same here
    // as in every process's Dwfl.
    mod_ = dwfl_report_elf(dwfl_, name_.c_str(), file_name.c_str(), fd, 0, true);
    if (!mod_) ::close(fd);  // on success the fd is libdwfl's (closed by dwfl_end)
    dwfl_report_end(dwfl_, nullptr, nullptr);
    Dwarf_Addr low = 0;
    if (mod_ && dwfl_module_info(mod_, nullptr, &low, nullptr, nullptr, nullptr, nullptr, nullptr)) low_ = low;
    else mod_ = nullptr;
}

const FileSymbols::Name& FileSymbols::at(uint64_t off) {
    auto it = names_.find(off);
    if (it != names_.end()) return it->second;
    if (!loaded_) load();
    Name n;
    if (mod_) {
        const uint64_t addr = low_ + off;
        GElf_Off o = 0;
        GElf_Sym sym;
        if (const char* s = dwfl_module_addrinfo(mod_, addr, &o, &sym, nullptr, nullptr, nullptr)) {
            n.symbol = demangle(s);
        } else {
            // No symbol: the eval loop's cold part, found without one (cold_part.h) at the
            // file's first address without a name, is named as its symbol would be.
            if (!eval_cold_looked_) {
                eval_cold_looked_ = true;
                eval_cold_ = find_cold_part(mod_, kEvalLoop);
            }
            if (eval_cold_ && addr >= eval_cold_->start && addr < eval_cold_->end)
                n.symbol = std::string(kEvalLoop) + ".cold";
        }
        if (Dwfl_Line* line = dwfl_module_getsrc(mod_, addr)) {
            int lineno = 0;
            if (const char* src = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
                n.file = src;
                n.line = lineno;
            }
        }
    }
    return names_.emplace(off, std::move(n)).first->second;
}

std::shared_ptr<FileSymbols> FileCache::get(const std::string& path, const struct stat& st, const std::string& name) {
    const FileKey key{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_size),
                      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec};
    auto it = files_.find(key);
    if (it != files_.end()) return it->second.file;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    struct stat now {};
    // The file stat() saw, not one put at its path since.
    if (::fstat(fd, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
        ::close(fd);
        return nullptr;
    }
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const int dirfd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    auto f = std::make_shared<FileSymbols>(counters, fd, dirfd, slash == std::string::npos ? path : path.substr(slash + 1), name);
    if (!f->is_elf()) return nullptr;
    files_[key] = {f, 0};
    return f;
}

std::shared_ptr<FileSymbols> FileCache::get_vdso(std::vector<char> image) {
    const FileKey key{0, 0, image.size(),
                      static_cast<int64_t>(std::hash<std::string_view>{}(std::string_view(image.data(), image.size())))};
    auto it = files_.find(key);
    if (it != files_.end()) return it->second.file;
    auto f = std::make_shared<FileSymbols>(counters, std::move(image));
    if (!f->is_elf()) return nullptr;
    files_[key] = {f, 0};
    return f;
}

void FileCache::trim(uint64_t now_ns) {
    std::vector<std::pair<uint64_t, FileKey>> unused;
    for (auto it = files_.begin(); it != files_.end();) {
        Entry& e = it->second;
        if (e.file.use_count() > 1 || !e.used_ns) e.used_ns = now_ns;  // a process maps it
        if (e.file.use_count() == 1 && now_ns - e.used_ns > kUnusedKeepNs) {
            it = files_.erase(it);
            continue;
        }
        if (e.file.use_count() == 1) unused.push_back({e.used_ns, it->first});
        ++it;
    }
    if (unused.size() <= kUnusedKeepMax) return;
    std::sort(unused.begin(), unused.end());
    for (size_t i = 0; i + kUnusedKeepMax < unused.size(); i++) files_.erase(unused[i].second);
}

}  // namespace pbp::native
