#include "engine/offcpu_table.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pbp {

namespace {
uint32_t load(const uint32_t& v) { return __atomic_load_n(&v, __ATOMIC_ACQUIRE); }
void add(uint32_t& v, int32_t n) { __atomic_add_fetch(&v, static_cast<uint32_t>(n), __ATOMIC_SEQ_CST); }
}  // namespace

std::unique_ptr<OffcpuTable> OffcpuTable::map(int slots_fd, uint32_t count, std::string& error) {
    // An mmapable array's values start at offset 0, each rounded up to 8 bytes (pbp_offcpu_slot
    // is a multiple of 8), the whole rounded up to pages.
    static_assert(sizeof(pbp_offcpu_slot) % 8 == 0, "the kernel rounds an array's values up to 8 bytes");
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t bytes = (static_cast<size_t>(count) * sizeof(pbp_offcpu_slot) + page - 1) / page * page;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, slots_fd, 0);
    if (p == MAP_FAILED) {
        error = std::string("cannot map wall mode's slot table: ") + strerror(errno);
        return nullptr;
    }
    auto t = std::make_unique<OffcpuTable>(static_cast<pbp_offcpu_slot*>(p), count);
    t->mapped_bytes_ = bytes;
    return t;
}

OffcpuTable::~OffcpuTable() {
    if (mapped_bytes_) munmap(slots_, mapped_bytes_);
}

bool OffcpuTable::claim(pbp_offcpu_slot& s) {
    // As BPF's offcpu_make: add 1, hold it when that made 1 (its tid is then 0: a holder clears
    // it before it takes its 1 back).
    if (__atomic_add_fetch(&s.claims, 1, __ATOMIC_SEQ_CST) == 1 && load(s.tid) == 0) return true;
    add(s.claims, -1);
    return false;
}

void OffcpuTable::release(pbp_offcpu_slot& s) {
    __atomic_store_n(&s.tid, 0, __ATOMIC_RELEASE);
    add(s.claims, -1);
}

pbp_offcpu_slot* OffcpuTable::find(uint32_t tid) const {
    pbp_offcpu_slot& home = probe(tid, 0);
    if (load(home.tid) == tid) return &home;
    if (!load(home.spill)) return nullptr;
    for (uint32_t j = 1; j < PBP_OFFCPU_PROBES; j++)
        if (load(probe(tid, j).tid) == tid) return &probe(tid, j);
    return nullptr;
}

std::vector<std::pair<uint32_t, pbp_offcpu>> OffcpuTable::entries(uint32_t tgid) const {
    std::vector<std::pair<uint32_t, pbp_offcpu>> out;
    for (uint32_t i = 0; i < count_; i++) {
        const pbp_offcpu_slot& s = slots_[i];
        const uint32_t tid = load(s.tid);
        if (!tid || load(s.e.tgid) != tgid) continue;
        pbp_offcpu e;
        memcpy(&e, &s.e, sizeof e);
        // still that thread's (not freed and taken meanwhile)
        if (load(s.tid) == tid && e.tgid == tgid) out.emplace_back(tid, e);
    }
    return out;
}

bool OffcpuTable::seed(uint32_t tid, const pbp_offcpu& e) {
    if (!tid || !e.tgid) return false;
    if (pbp_offcpu_slot* s = find(tid)) {
        if (load(s->e.tgid)) return false;  // BPF's
        // Dormant (an earlier target's): this process's entry from now on, its tgid written last.
        pbp_offcpu fresh = e;
        fresh.tgid = 0;
        memcpy(&s->e, &fresh, sizeof fresh);
        __atomic_store_n(&s->e.tgid, e.tgid, __ATOMIC_RELEASE);
        return true;
    }
    pbp_offcpu_slot& home = probe(tid, 0);
    for (uint32_t j = 0; j < PBP_OFFCPU_PROBES; j++) {
        pbp_offcpu_slot& s = probe(tid, j);
        if (load(s.tid) || load(s.claims)) continue;
        if (j) add(home.spill, 1);  // before BPF can find it there
        if (claim(s)) {
            memcpy(&s.e, &e, sizeof e);
            __atomic_store_n(&s.tid, tid, __ATOMIC_RELEASE);  // whole before BPF sees it
            if (j) spilled_++;
            return true;
        }
        if (j) add(home.spill, -1);
    }
    full_++;
    return false;
}

void OffcpuTable::clear() { memset(static_cast<void*>(slots_), 0, static_cast<size_t>(count_) * sizeof(pbp_offcpu_slot)); }

void OffcpuTable::forget(uint32_t tgid) {
    for (uint32_t i = 0; i < count_; i++) {
        pbp_offcpu_slot& s = slots_[i];
        if (!load(s.tid) || load(s.e.tgid) != tgid) continue;
        // Dormant: no process, nothing pending.
        __atomic_store_n(&s.e.tgid, 0, __ATOMIC_RELEASE);
        pbp_offcpu idle{};
        memcpy(&s.e, &idle, sizeof idle);
    }
}

}  // namespace pbp
