// The userspace twin of bpf/thread_state.bpf.h and bpf/frame_walk.bpf.h: same offsets, same
// rules, same frames. Where this file departs from BPF it says why.
#include "cpython/thread_stacks.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_set>

#include "cpython/code_checksum.h"
#include "sys/procfs.h"

namespace pbp::cpython {

namespace {

// glibc on x86_64: offsetof(struct pthread, tid), after tcbhead_t (0x2c0) and the list_t
// links (nptl/descr.h; the same since glibc 2.x put the TCB first). pthread_self() is the
// PyThreadState.thread_id. Used only before 3.11 (no native_thread_id), and only a value that
// names a task of the process is believed.
constexpr uint64_t kGlibcPthreadTidOff = 0x2d0;

uint64_t u64_at(const uint8_t* w, uint32_t off) {
    uint64_t v;
    memcpy(&v, w + off, sizeof v);
    return v;
}
uint32_t u32_at(const uint8_t* w, uint32_t off) {
    uint32_t v;
    memcpy(&v, w + off, sizeof v);
    return v;
}

// The process's tasks: the tid each has in the process's own pid namespace (what
// native_thread_id and glibc hold) -> its host tid.
std::map<uint64_t, uint32_t> task_ids(pid_t pid) {
    std::map<uint64_t, uint32_t> ids;
    std::string dir = "/proc/" + std::to_string(pid) + "/task";
    DIR* d = opendir(dir.c_str());
    if (!d) return ids;
    auto st = procfs::read_status(pid);
    const bool nested = st && st->nspid.size() > 1;
    while (dirent* e = readdir(d)) {
        char* end = nullptr;
        long tid = strtol(e->d_name, &end, 10);
        if (tid <= 0 || *end) continue;
        uint64_t inner = static_cast<uint64_t>(tid);
        if (nested) {
            auto ts = procfs::read_task_status(pid, static_cast<pid_t>(tid));
            if (!ts || ts->nspid.empty()) continue;
            inner = static_cast<uint64_t>(ts->nspid.back());
        }
        ids[inner] = static_cast<uint32_t>(tid);
    }
    closedir(d);
    return ids;
}

struct Walker {
    MemoryReader& mem;
    const pbp_proc& proc;
    const pbp_py_offsets& off;

    uint64_t rd_u64(uint64_t addr, bool* ok = nullptr) {
        uint64_t v = 0;
        bool good = mem.read(addr, &v, sizeof v);
        if (ok) *ok = good;
        return good ? v : 0;
    }

    // The bytecode base instr_ptr points into (bytecode_base in BPF).
    uint64_t bytecode_base(uint64_t code, const uint8_t* fw, const uint8_t* cw) {
        uint64_t base = code + off.code_adaptive;
        if (off.frame_tlbc_index != PBP_OFF_NONE && off.code_tlbc != PBP_OFF_NONE) {
            int32_t idx = static_cast<int32_t>(u32_at(fw, off.frame_tlbc_index));
            uint64_t arr = u64_at(cw, off.code_tlbc);
            if (idx > 0 && arr) {  // _PyCodeArray { Py_ssize_t size; char *entries[]; }
                uint64_t e = rd_u64(arr + 8 + 8 * static_cast<uint64_t>(idx & 0xffff));
                if (e) base = e;
            }
        }
        return base;
    }

    // One thread's frames (first_frame + frame_walk_step + finish_walk in BPF).
    void walk(uint64_t ts, ThreadStack& t) {
        bool ok = false;
        uint64_t frame = rd_u64(ts + off.tstate_frame, &ok);
        if (!ok) {
            t.reason = PBP_ERR_READ_RUNTIME;
            return;
        }
        // 3.11/3.12: the cframe check, as BPF (see pbp_py_offsets.cframe_previous).
        bool pending = false, stale = false;
        uint64_t expect = 0;
        if (frame && off.frame_kind == PBP_FRAME_INTERP_CFRAME) {
            uint8_t cw[PBP_CFRAME_WINDOW];
            uint64_t cf = frame;
            if (!mem.read(cf, cw, sizeof cw)) {
                t.reason = PBP_ERR_READ_FRAME;
                return;
            }
            frame = u64_at(cw, off.cframe_current_frame);
            if (off.frame_entry_off != PBP_OFF_NONE) {
                uint64_t pcf = u64_at(cw, off.cframe_previous);
                bool root = cf == ts + off.tstate_root_cframe;
                if ((!frame) != root || (!pcf) != root ||
                    (pcf && !mem.read(pcf + off.cframe_current_frame, &expect, sizeof expect))) {
                    t.reason = PBP_ERR_CFRAME_STALE;
                    return;
                }
                pending = true;
            }
        }
        if (!frame) {
            t.reason = PBP_ERR_NO_FRAME;
            return;
        }

        uint32_t max_depth = proc.max_depth && proc.max_depth < PBP_MAX_DEPTH ? proc.max_depth : PBP_MAX_DEPTH;
        const uint32_t flen = std::min<uint32_t>(off.frame_read_len, PBP_WINDOW);
        const uint32_t clen = std::min<uint32_t>(off.code_read_len, PBP_WINDOW);
        uint8_t fw[PBP_WINDOW] = {}, cw[PBP_WINDOW] = {};
        uint64_t last_code = 0;
        uint32_t last_csum = 0;
        // Not in BPF (whose walk is bounded by max_depth alone): a running thread can be read
        // mid-change, and a chain that loops back is no stack, not max_depth copies of one.
        std::unordered_set<uint64_t> seen;
        // Bounds the frames skipped (owners, non-code executables), which max_depth does not:
        // BPF's bpf_loop stops after PBP_MAX_DEPTH + 1 steps of either kind.
        uint32_t steps = 0;
        for (;; steps++) {
            if (!frame) {  // the chain's end: before its first entry frame, a stale cframe
                stale |= pending;
                break;
            }
            if (t.frames.size() >= max_depth || steps > PBP_MAX_DEPTH) {
                t.flags |= PBP_F_TRUNCATED;
                break;
            }
            if (!seen.insert(frame).second) {
                t.flags |= PBP_F_PARTIAL;
                t.reason = PBP_ERR_READ_FRAME;
                break;
            }
            uint64_t cur = frame;
            if (flen == 0 || !mem.read(cur, fw, flen)) {
                stale |= pending;
                t.flags |= PBP_F_PARTIAL;
                t.reason = PBP_ERR_READ_FRAME;
                break;
            }
            frame = u64_at(fw, off.frame_previous);
            if (frame == cur) frame = 0;  // self-loop in freed memory
            if (off.frame_entry_off != PBP_OFF_NONE && fw[off.frame_entry_off] == off.frame_entry_val) {
                stale |= pending && frame != expect;
                pending = false;
            }
            if (off.frame_owner != PBP_OFF_NONE) {
                uint8_t owner = fw[off.frame_owner];
                if (off.native_entry == PBP_NATIVE_ENTRY_SHIM && owner == off.native_shim_owner && !t.entry.empty() &&
                    t.frames.back().instr != PBP_INSTR_UNKNOWN)
                    t.entry.back() = true;  // the shim follows its call's entry frame (as native_mark_entry)
                if (owner < 32 && (off.skip_owner_mask & (1u << owner))) continue;  // C-stack / shim
            }
            const bool entry = off.native_entry == PBP_NATIVE_ENTRY_FLAG && off.frame_entry_off != PBP_OFF_NONE &&
                               fw[off.frame_entry_off] == off.frame_entry_val;
            uint64_t code = u64_at(fw, off.frame_code) & ~static_cast<uint64_t>(off.executable_tag_mask);
            if (!code) continue;

            uint32_t csum;
            if (code == last_code) {
                csum = last_csum;
            } else {
                if (clen == 0 || !mem.read(code, cw, clen)) {
                    stale |= pending;
                    t.flags |= PBP_F_PARTIAL;
                    t.reason = PBP_ERR_READ_CODE;
                    break;
                }
                if (proc.code_type_addr && u64_at(cw, off.code_ob_type) != proc.code_type_addr) {
                    stale |= pending;  // 3.11/3.12 frames always hold a code object
                    continue;          // 3.13+: f_executable may be None or another object
                }
                csum = code_checksum(off, cw, clen, &mem);
                last_code = code;
                last_csum = csum;
            }

            uint32_t instr = PBP_INSTR_UNKNOWN;
            if (off.instr_kind == PBP_INSTR_PTR) {
                uint64_t ip = u64_at(fw, off.frame_instr);
                // cw still holds this code object: read above, or for the previous frame of
                // the same code object (BPF's window is in the same state then).
                uint64_t base = bytecode_base(code, fw, cw);
                if (ip >= base && ip - base < 0x1ffffffffULL)
                    instr = static_cast<uint32_t>((ip - base) >> 1);
                else if (ip && ip < base)
                    instr = 0;  // 3.11/3.12: prev_instr is one before the first unit
            } else {
                int32_t lasti = static_cast<int32_t>(u32_at(fw, off.frame_instr));
                instr = lasti < 0 ? 0 : static_cast<uint32_t>(lasti);
            }
            t.frames.push_back({code, instr, csum});
            t.entry.push_back(entry && instr != PBP_INSTR_UNKNOWN);
        }
        if (stale) {  // what was walked is stale: no stack
            t.frames.clear();
            t.entry.clear();
            t.flags = 0;
            t.reason = PBP_ERR_CFRAME_STALE;
            return;
        }
        if (t.frames.empty() && !t.reason) t.reason = PBP_ERR_NO_FRAME;
    }
};

}  // namespace

bool read_thread_stacks(MemoryReader& mem, pid_t pid, const pbp_proc& proc, std::vector<ThreadStack>& out,
                        std::string& err, bool walk_frames) {
    out.clear();
    err.clear();
    const pbp_py_offsets& off = proc.off;
    Walker w{mem, proc, off};
    bool ok = false;
    uint64_t interp = w.rd_u64(proc.interp_head_addr, &ok);
    if (!ok) {
        err = "interpreter list unreadable (process gone?)";
        return false;
    }
    if (!interp) {
        err = "interpreter starting or exiting";
        return false;
    }
    std::unordered_set<uint64_t> seen_interp, seen_ts;
    for (uint32_t ni = 0; interp && ni < PBP_MAX_INTERPRETERS && seen_interp.insert(interp).second; ni++) {
        uint64_t ts = w.rd_u64(interp + off.interp_threads_head);
        for (uint32_t nt = 0; ts && nt < PBP_MAX_THREAD_WALK && seen_ts.insert(ts).second; nt++) {
            ThreadStack t;
            t.tstate = ts;
            t.interp = interp;
            t.thread_id = w.rd_u64(ts + off.tstate_thread_id);
            if (off.tstate_active_mask) {
                uint32_t status = 0;
                mem.read(ts + off.tstate_status, &status, sizeof status);
                t.active = (status & off.tstate_active_mask) != 0;
            }
            if (walk_frames) w.walk(ts, t);
            out.push_back(std::move(t));
            ts = w.rd_u64(ts + off.tstate_next);
        }
        interp = w.rd_u64(interp + off.interp_next);
    }

    // Host tids.
    auto ids = task_ids(pid);
    auto host = [&](uint64_t inner) -> uint32_t {
        auto it = ids.find(inner);
        return it == ids.end() ? 0 : it->second;
    };
    for (auto& t : out) {
        if (off.tstate_native_thread_id != PBP_OFF_NONE) {
            t.tid = host(w.rd_u64(t.tstate + off.tstate_native_thread_id));
        } else if (t.thread_id) {
            int32_t tid = 0;
            if (mem.read(t.thread_id + kGlibcPthreadTidOff, &tid, sizeof tid) && tid > 0) t.tid = host(tid);
        }
    }
    // No other way: a process with one thread state runs it on its main thread (3.6/3.7 with
    // another libc); with several, a thread stays unknown (tid 0).
    if (out.size() == 1 && !out[0].tid && off.tstate_native_thread_id == PBP_OFF_NONE &&
        std::any_of(ids.begin(), ids.end(), [&](auto& kv) { return kv.second == static_cast<uint32_t>(pid); }))
        out[0].tid = static_cast<uint32_t>(pid);
    return true;
}

bool read_frame_at(MemoryReader& mem, const pbp_proc& proc, uint64_t frame, pbp_frame& out) {
    const pbp_py_offsets& off = proc.off;
    if (off.frame_kind == PBP_FRAME_OBJECT || off.instr_kind != PBP_INSTR_PTR || !frame) return false;
    Walker w{mem, proc, off};
    const uint32_t flen = std::min<uint32_t>(off.frame_read_len, PBP_WINDOW);
    const uint32_t clen = std::min<uint32_t>(off.code_read_len, PBP_WINDOW);
    uint8_t fw[PBP_WINDOW] = {}, cw[PBP_WINDOW] = {};
    if (flen == 0 || clen == 0 || !mem.read(frame, fw, flen)) return false;
    uint64_t code = u64_at(fw, off.frame_code) & ~static_cast<uint64_t>(off.executable_tag_mask);
    if (!code || !mem.read(code, cw, clen)) return false;
    if (proc.code_type_addr && u64_at(cw, off.code_ob_type) != proc.code_type_addr) return false;
    out.code = code;
    out.csum = code_checksum(off, cw, clen, &mem);
    out.instr = PBP_INSTR_UNKNOWN;
    uint64_t ip = u64_at(fw, off.frame_instr);
    uint64_t base = w.bytecode_base(code, fw, cw);
    if (ip >= base && ip - base < 0x1ffffffffULL) out.instr = static_cast<uint32_t>((ip - base) >> 1);
    else if (ip && ip < base) out.instr = 0;
    return true;
}

bool read_thread_stacks(pid_t pid, const pbp_proc& proc, std::vector<ThreadStack>& out, std::string& err) {
    ProcessMemory mem(pid);
    return read_thread_stacks(mem, pid, proc, out, err);
}

}  // namespace pbp::cpython
