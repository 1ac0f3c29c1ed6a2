// --mode wall: the off-CPU entries of tracked threads where BPF keeps them, the open-addressed
// offcpu_slots table mapped into this process. Userspace's half of bpf/offcpu_table.bpf.h; the
// protocol is described at struct pbp_offcpu_slot in include/pybpfprof/abi.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pybpfprof/abi.h"

namespace pbp {

class OffcpuTable {
public:
    // slots: count (a power of 2) slots, shared with BPF (or plain memory, for tests).
    OffcpuTable(pbp_offcpu_slot* slots, uint32_t count) : slots_(slots), count_(count) {}
    // The table of a loaded BPF object: the offcpu_slots map's fd (count slots) mapped.
    static std::unique_ptr<OffcpuTable> map(int slots_fd, uint32_t count, std::string& error);
    ~OffcpuTable();
    OffcpuTable(const OffcpuTable&) = delete;
    OffcpuTable& operator=(const OffcpuTable&) = delete;

    // The entries of process tgid's threads, by tid.
    std::vector<std::pair<uint32_t, pbp_offcpu>> entries(uint32_t tgid) const;
    // An entry for thread tid of a process that has just become a target (e.tgid: not 0). One
    // BPF made meanwhile (the thread born since) is kept: false. One an earlier target left
    // dormant (see forget) is replaced. False too when its probe sequence's slots are all held.
    bool seed(uint32_t tid, const pbp_offcpu& e);
    // Process tgid is no longer a target: its threads' entries are left dormant (tgid 0, nothing
    // pending); BPF frees each at the thread's next switch-out, its process no longer a target.
    void forget(uint32_t tgid);
    // Every slot freed: once the scheduler program is detached and no process is a wall target
    // (the fork tracepoint's program then makes no entry). Entries left dormant by forget are
    // freed by BPF only if their thread switches out while the program is attached.
    void clear();
    // Seeds that went to a slot other than their home (it was held), and seeds with no slot.
    uint64_t spilled() const { return spilled_; }
    uint64_t full() const { return full_; }

    // The claim protocol on one slot (also BPF's: exposed for tests). claim: true when the caller
    // now holds the slot; release: the holder frees it.
    static bool claim(pbp_offcpu_slot& s);
    static void release(pbp_offcpu_slot& s);

private:
    pbp_offcpu_slot& probe(uint32_t tid, uint32_t j) const { return slots_[PBP_OFFCPU_PROBE(tid, j, count_ - 1)]; }
    pbp_offcpu_slot* find(uint32_t tid) const;

    pbp_offcpu_slot* slots_;
    uint32_t count_;
    size_t mapped_bytes_ = 0;  // what map() mapped: unmapped at the end
    uint64_t spilled_ = 0, full_ = 0;
};

}  // namespace pbp
