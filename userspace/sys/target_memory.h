// Reading another process's memory (process_vm_readv). No ptrace, no stop.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/types.h>

namespace pbp {

class MemoryReader {
public:
    virtual ~MemoryReader() = default;
    // Reads exactly n bytes at addr; false if any byte is unreadable.
    virtual bool read(uint64_t addr, void* buf, size_t n) = 0;

    template <typename T> bool read_value(uint64_t addr, T& out) { return read(addr, &out, sizeof(T)); }
};

class ProcessMemory final : public MemoryReader {
public:
    explicit ProcessMemory(pid_t pid) : pid_(pid) {}
    bool read(uint64_t addr, void* buf, size_t n) override;
    pid_t pid() const { return pid_; }

private:
    pid_t pid_;
};

}  // namespace pbp
