#include "native/process_modules.h"

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <gelf.h>
#include <unistd.h>

#include <sys/mman.h>

#include <cstring>
#include <map>
#include <vector>

#include "sys/clock.h"
#include "sys/procfs.h"
#include "sys/target_memory.h"

namespace pbp::native {

namespace {

char* debuginfo_path = nullptr;  // libdwfl's default search: the file's directory, .debug, /usr/lib/debug

const Dwfl_Callbacks kCallbacks = {
    dwfl_build_id_find_elf,
    dwfl_standard_find_debuginfo,  // build-id (/usr/lib/debug/.build-id) and .gnu_debuglink
    dwfl_offline_section_address,
    &debuginfo_path,
};

// The load bias of file path mapped at start from file offset pgoff: start minus the address
// the ELF's program headers give that offset (0 for a non-PIE executable). False when the file
// is not an ELF or no PT_LOAD holds the offset.
bool load_bias(const std::string& path, uint64_t start, uint64_t pgoff, uint64_t& bias) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = false;
    elf_version(EV_CURRENT);
    if (Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr)) {
        size_t n = 0;
        if (elf_kind(elf) == ELF_K_ELF && elf_getphdrnum(elf, &n) == 0) {
            for (size_t i = 0; i < n && !ok; i++) {
                GElf_Phdr ph;
                if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
                const uint64_t seg_off = ph.p_offset & ~(ph.p_align ? ph.p_align - 1 : 0);
                if (pgoff < seg_off || pgoff >= ph.p_offset + ph.p_filesz) continue;
                bias = start - (ph.p_vaddr - ph.p_offset + pgoff);
                ok = true;
            }
        }
        elf_end(elf);
    }
    ::close(fd);
    return ok;
}

// The vDSO: the kernel's code mapped into every process ("[vdso]" in its maps), with no file
// behind it. clock_gettime, gettimeofday and time run there (time.monotonic(), time.time(),
// perf_counter), and so does the system call of the clocks it cannot read itself
// (time.process_time(), thread_time): a sample taken there unwinds only with its CFI. Its image
// is read from the process (a few pages, the same for every process of a kernel) into a memory
// file that libdwfl reads as it reads a library; reported under the name "[vdso]".
void report_vdso(Dwfl* dwfl, pid_t pid, const procfs::Mapping& m, FileCache& files,
                 std::unordered_map<Dwfl_Module*, std::shared_ptr<FileSymbols>>& files_of) {
    const uint64_t len = m.end - m.start;
    if (m.start >= m.end || len > (1u << 20)) return;  // a few pages; more is not a vDSO
    std::vector<char> image(len);
    ProcessMemory mem(pid);
    if (!mem.read(m.start, image.data(), image.size())) return;
    if (image.size() < 4 || std::memcmp(image.data(), "\x7f" "ELF", 4) != 0) return;
    const int fd = ::memfd_create("pybpfprof-vdso", MFD_CLOEXEC);
    if (fd < 0) return;
    size_t done = 0;
    while (done < image.size()) {
        const ssize_t w = ::write(fd, image.data() + done, image.size() - done);
        if (w <= 0) break;
        done += static_cast<size_t>(w);
    }
    // As for a file (its first PT_LOAD's vaddr is 0 on today's kernels); on success the fd is
    // libdwfl's (closed by dwfl_end).
    uint64_t bias = 0;
    Dwfl_Module* mod = nullptr;
    if (done != image.size() || !load_bias("/proc/self/fd/" + std::to_string(fd), m.start, 0, bias) ||
        !(mod = dwfl_report_elf(dwfl, "[vdso]", "[vdso]", fd, bias, true))) {
        ::close(fd);
        return;
    }
    // Named with the other processes' (the same image for every process of a kernel).
    if (auto f = files.get_vdso(std::move(image))) files_of[mod] = std::move(f);
}

}  // namespace

ProcessModules::ProcessModules(pid_t pid, FileCache& files) : pid_(pid), files_(files) {}

ProcessModules::~ProcessModules() {
    if (dwfl_) dwfl_end(dwfl_);
}

bool ProcessModules::refresh() {
    struct Timed {
        FileCache& files;
        uint64_t cpu0 = files.timing ? thread_cpu_ns() : 0;
        ~Timed() {
            if (files.timing) files.counters.refresh_cpu_ns += thread_cpu_ns() - cpu0;
        }
    } timed{files_};
    last_refresh_ns_ = mono_ns();
    files_.counters.maps_reads++;
    auto maps = procfs::read_maps(pid_);
    if (!maps) return false;
    // The same files at the same places: keep the Dwfl and all it has parsed (CFI), which a new
    // one would read again (the names are the files', file_symbols.h: they outlive it). A pc in
    // no file (JIT code, a bad return address at the end of a stack copy) asks for a refresh
    // often.
    std::string signature;
    for (const auto& m : *maps)
        if ((!m.path.empty() && m.path[0] == '/' && m.perms.size() >= 3 && m.perms[2] == 'x') || m.path == "[vdso]")
            signature += std::to_string(m.start) + m.path + '\n';
    if (dwfl_ && signature == signature_) return true;
    signature_ = std::move(signature);
    files_of_.clear();
    if (dwfl_) dwfl_end(dwfl_);
    dwfl_ = dwfl_begin(&kCallbacks);
    epoch_++;
    if (!dwfl_) return false;
    dwfl_report_begin(dwfl_);
    const std::string root = "/proc/" + std::to_string(pid_) + "/root";
    std::map<std::string, bool> done;  // each file once: by its executable mapping
    for (const auto& m : *maps) {
        if (m.path == "[vdso]") {
            report_vdso(dwfl_, pid_, m, files_, files_of_);
            continue;
        }
        if (m.path.empty() || m.path[0] != '/' || m.perms.size() < 3 || m.perms[2] != 'x') continue;
        if (done.count(m.path)) continue;
        done[m.path] = true;
        // The file as the process sees it, through its root (a container's mount namespace: its
        // maps show paths inside it); a chroot's maps show the path from our root instead. The
        // inode tells which one is the mapped file.
        std::string file = root + m.path;
        struct stat st {};
        if (::stat(file.c_str(), &st) != 0 || st.st_ino != m.inode) {
            if (::stat(m.path.c_str(), &st) != 0 || st.st_ino != m.inode) continue;
            file = m.path;
        }
        // The file's shared state: its program headers were read when any process first
        // mapped it, and its symbols and debug information are parsed once, for all of them.
        std::shared_ptr<FileSymbols> shared = files_.get(file, st, m.path);
        uint64_t bias = 0;
        if (!shared || !shared->load_bias(m.start, m.offset, bias)) continue;
        // base = the bias, added to the first PT_LOAD's address (an ET_EXEC's is taken as is).
        Dwfl_Module* mod = dwfl_report_elf(dwfl_, m.path.c_str(), file.c_str(), -1, bias, true);
        files_.counters.files_reported++;
        if (mod) files_of_[mod] = std::move(shared);
    }
    dwfl_report_end(dwfl_, nullptr, nullptr);
    return true;
}

Dwfl_Module* ProcessModules::module_at(uint64_t pc) {
    if (!dwfl_ && !refresh()) return nullptr;
    Dwfl_Module* m = dwfl_addrmodule(dwfl_, pc);
    if (m) return m;
    // Not more than every 20 ms for the same pages (a pc in no file at all, JIT code, would read
    // the maps at every sample), but a page not asked about within the last second at once,
    // up to 50 such pages a second: a library just loaded (an import) is found by the first
    // stack that shows it, and JIT code spread over many pages reads the maps at most about
    // 100 times a second, as it did at most 50.
    const uint64_t now = mono_ns();
    if (asked_ns_.size() > 4096) asked_ns_.clear();
    uint64_t& asked = asked_ns_[pc >> 12];
    bool new_page = !asked || now - asked > 1000000000ULL;
    asked = now;
    if (now - new_pages_since_ns_ > 1000000000ULL) {
        new_pages_since_ns_ = now;
        new_pages_ = 0;
    }
    if (new_page && new_pages_ >= 50) new_page = false;
    if (new_page) new_pages_++;
    if ((new_page || now - last_refresh_ns_ > 20000000ULL) && refresh()) m = dwfl_addrmodule(dwfl_, pc);
    return m;
}

std::string ProcessModules::path_of(Dwfl_Module* m) {
    const char* name = dwfl_module_info(m, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    return name ? name : "";
}

}  // namespace pbp::native
