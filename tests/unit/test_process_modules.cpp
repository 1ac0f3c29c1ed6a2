// native/process_modules: when a pc in no known file reads the process's maps again.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "native/process_modules.h"

namespace pbp::native {
namespace {

// A library loaded since the maps were read (an extension module imported) is found by the
// first pc that shows it, even within 20 ms of the last read: an unwind that stopped there is
// retried with it at once (before, a pc asked about within 20 ms of a read stayed unknown).
TEST(ProcessModules, LibraryLoadedSinceTheMapsWereReadIsFoundAtOnce) {
    FileCache files;
    ProcessModules modules(getpid(), files);
    ASSERT_TRUE(modules.refresh());
    void* h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    const auto pc = reinterpret_cast<uint64_t>(dlsym(h, "ZSTD_versionNumber"));
    ASSERT_NE(pc, 0u);
    Dwfl_Module* m = modules.module_at(pc);
    ASSERT_NE(m, nullptr);
    EXPECT_NE(ProcessModules::path_of(m).find("libzstd"), std::string::npos) << ProcessModules::path_of(m);
    dlclose(h);
}

// pcs in no file at all (JIT code) on many pages: each page reads the maps at most once a
// second, and at most 50 such pages a second do; the same page again waits 20 ms.
TEST(ProcessModules, PcsInNoFileReadTheMapsBoundedTimes) {
    FileCache files;
    ProcessModules modules(getpid(), files);
    ASSERT_TRUE(modules.refresh());
    const size_t pages = 200, page = 4096;
    void* mem = mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    const auto base = reinterpret_cast<uint64_t>(mem);
    const uint64_t reads0 = files.counters.maps_reads;
    for (size_t i = 0; i < pages; i++) EXPECT_EQ(modules.module_at(base + i * page + 16), nullptr);
    const uint64_t spread = files.counters.maps_reads - reads0;
    EXPECT_GE(spread, 50u);
    EXPECT_LE(spread, 52u);  // (and one or two by the 20 ms rule, on a slow machine)
    const uint64_t reads1 = files.counters.maps_reads;
    for (int i = 0; i < 1000; i++) EXPECT_EQ(modules.module_at(base + 16), nullptr);
    EXPECT_LE(files.counters.maps_reads - reads1, 2u);
    munmap(mem, pages * page);
}

}  // namespace
}  // namespace pbp::native
