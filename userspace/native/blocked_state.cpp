#include "native/blocked_state.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "native/task_regs.h"
#include "pybpfprof/abi.h"
#include "sys/procfs.h"
#include "sys/target_memory.h"

namespace pbp::native {

std::vector<std::string> parse_kernel_stack(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream is(text);
    for (std::string line; std::getline(is, line);) {
        const size_t b = line.find("] ");
        if (line.rfind("[<", 0) != 0 || b == std::string::npos) continue;
        std::string name = line.substr(b + 2);
        const size_t plus = name.find('+');
        if (plus != std::string::npos) name.resize(plus);
        if (const size_t sp = name.find(' '); sp != std::string::npos) name.resize(sp);  // " [module]"
        if (!name.empty()) out.push_back("[k] " + name);
    }
    return out;
}

namespace {

// Up to n bytes at addr in pid's memory, page by page: as far as the mapping goes.
size_t read_stack(pid_t pid, uint64_t addr, uint8_t* buf, size_t n) {
    ProcessMemory mem(pid);
    size_t got = 0;
    while (got < n) {
        const size_t want = std::min(n - got, PBP_NATIVE_PAGE - ((addr + got) & (PBP_NATIVE_PAGE - 1)));
        if (!mem.read(addr + got, buf + got, want)) break;
        got += want;
    }
    return got;
}

}  // namespace

std::optional<BlockedState> read_blocked_state(pid_t pid, pid_t tid, uint64_t ts_ns) {
    const std::string task = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
    auto before = procfs::read_task_status(pid, tid);
    if (!before || (before->state != 'S' && before->state != 'D')) return std::nullopt;
    auto place = procfs::read_syscall(pid, tid);
    if (!place || !place->sp || !place->pc) return std::nullopt;
    // The frame pointer too, where BPF can read the registers: taken when they are the ones
    // /proc shows (the same entry into the kernel; the check below says it stayed so).
    uint64_t bp = 0;
    if (auto regs = read_task_regs(pid, tid); regs && regs->ip == place->pc && regs->sp == place->sp) bp = regs->bp;
    BlockedState st;
    st.kernel = parse_kernel_stack(procfs::read_text(task + "/stack"));
    st.record.assign(PBP_NATIVE_HEADER_BYTES + PBP_NATIVE_USTACK_OFFCPU, 0);
    const size_t got = read_stack(pid, place->sp, st.record.data() + PBP_NATIVE_HEADER_BYTES, PBP_NATIVE_USTACK_OFFCPU);
    if (!got) return std::nullopt;
    // Still blocked where it was, and never switched in meanwhile: the copy is of that place.
    auto after = procfs::read_task_status(pid, tid);
    if (!after || after->switches != before->switches || procfs::read_syscall(pid, tid) != place)
        return std::nullopt;
    st.record.resize(std::max(PBP_NATIVE_HEADER_BYTES + got, sizeof(pbp_native_event)));  // read as one
    pbp_native_event h{};
    h.ts_ns = ts_ns;
    h.type = PBP_EV_NATIVE;
    h.pid = static_cast<uint32_t>(pid);
    h.tid = static_cast<uint32_t>(tid);
    h.ip = place->pc;
    h.sp = place->sp;
    h.bp = bp;
    h.ustack_len = static_cast<uint32_t>(got);
    h.flags = PBP_NATIVE_F_OFFCPU | PBP_NATIVE_F_KERNEL | (got < PBP_NATIVE_USTACK_OFFCPU ? PBP_NATIVE_F_SHORT : 0);
    std::memcpy(st.record.data(), &h, PBP_NATIVE_HEADER_BYTES);
    return st;
}

}  // namespace pbp::native
