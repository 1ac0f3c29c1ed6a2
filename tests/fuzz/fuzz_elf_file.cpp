// libFuzzer target for the ELF reader (sys/elf_file.h): pybpfprof opens the executables and
// libraries mapped by every process it profiles, and any user can map a file of their own.
// Run by tests/tools/run-fuzz --target elf_file (ctest: Fuzz.ElfFile), with ASan and UBSan.
//
// The input is the file (through a memfd, as ElfFile opens a path). Every question the
// engine asks of a mapped file is asked: CPython's runtime symbols with sizes, the sections
// it looks for, bytes at each load segment and section, the version strings. Checks,
// besides "no crash, no leak, no timeout": a refused file has a one-line error, and an
// address range that wraps around is never read.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "sys/elf_file.h"

namespace {

const char* const kName = "fuzz_elf_file";

int memfd() {
    static int fd = memfd_create("fuzz_elf", MFD_CLOEXEC);
    if (fd < 0) pbp::fuzz::broken(kName, "memfd_create", "failed");
    return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const int fd = memfd();
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != ssize_t(size)))
        pbp::fuzz::broken(kName, "writing the memfd", "failed");
    std::string error;
    auto elf = pbp::ElfFile::open("/proc/self/fd/" + std::to_string(fd), error);
    if (!elf) {
        if (!pbp::fuzz::one_line(error)) pbp::fuzz::broken(kName, "refused without a one-line error", error);
        return 0;
    }
    const std::vector<std::string> names = {"_PyRuntime", "Py_Version", "PyRuntime", "interp_head", "_PyThreadState_Current",
                                            "gil_locked", "gil_last_holder", "_Py_AsyncioDebug", "Py_GetVersion"};
    (void)elf->find_symbols(names);
    for (const auto& [sym, s] : elf->find_sized_symbols(names)) {
        uint8_t buf[64];
        (void)elf->read_vaddr(s.value, buf, std::min<uint64_t>(s.size, sizeof buf));
    }
    for (const char* sec : {".PyRuntime", ".data", ".bss", ".rodata", "AsyncioDebug", ".dynamic"}) {
        if (auto s = elf->section(sec)) {
            uint8_t buf[256];
            (void)elf->read_vaddr(s->addr, buf, std::min<uint64_t>(s->size, sizeof buf));
        }
    }
    for (const auto& seg : elf->loads()) {
        uint8_t buf[128];
        (void)elf->read_vaddr(seg.vaddr, buf, sizeof buf);
        (void)elf->read_vaddr(seg.vaddr + seg.filesz - 1, buf, 1);
        (void)elf->read_vaddr(seg.vaddr + seg.memsz - 1, buf, 1);
        // A wrapping address must be refused, not read at a wrapped file offset.
        if (elf->read_vaddr(~uint64_t(0) - 3, buf, 8)) pbp::fuzz::broken(kName, "read at a wrapping address", "");
    }
    (void)elf->version_strings();
    (void)elf->soname();
    return 0;
}
