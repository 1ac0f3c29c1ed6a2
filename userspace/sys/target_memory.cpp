#include "sys/target_memory.h"

#include <sys/uio.h>

namespace pbp {

bool ProcessMemory::read(uint64_t addr, void* buf, size_t n) {
    if (n == 0) return true;
    if (addr == 0) return false;
    struct iovec local{buf, n};
    struct iovec remote{reinterpret_cast<void*>(addr), n};
    ssize_t got = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    return got == static_cast<ssize_t>(n);
}

}  // namespace pbp
