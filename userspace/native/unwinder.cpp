#include "native/unwinder.h"

#include <elfutils/libdwfl.h>

#include <cstring>

namespace pbp::native {

namespace {

// The one thread a Dwfl here ever has: the sampled one, named by its host tid.
pid_t next_thread(Dwfl*, void* arg, void** thread_argp) {
    if (*thread_argp) return 0;
    *thread_argp = arg;
    auto* cur = static_cast<Unwinder::Current*>(arg);
    return static_cast<pid_t>(cur->ev->tid);
}

bool get_thread(Dwfl*, pid_t, void* arg, void** thread_argp) {
    *thread_argp = arg;
    return true;
}

// Stack words come from the copy only: the process is never read (it has moved on anyway).
bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
    auto* cur = static_cast<Unwinder::Current*>(arg);
    const uint64_t sp = cur->ev->sp;
    if (addr < sp || addr - sp + sizeof(Dwarf_Word) > cur->len) return false;
    std::memcpy(result, cur->ev->ustack + (addr - sp), sizeof(Dwarf_Word));
    return true;
}

// x86_64 DWARF register numbers: 6 rbp, 7 rsp; the pc apart. The others are unknown (a CFA
// rule needing one ends the unwind there).
bool set_initial_registers(Dwfl_Thread* thread, void* arg) {
    auto* cur = static_cast<Unwinder::Current*>(arg);
    Dwarf_Word regs[2] = {cur->ev->bp, cur->ev->sp};
    if (!dwfl_thread_state_registers(thread, 6, 2, regs)) return false;
    dwfl_thread_state_register_pc(thread, cur->ev->ip);
    return true;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {
    next_thread, get_thread, memory_read, set_initial_registers, nullptr, nullptr,
};

struct Walk {
    UnwoundStack* out;
};

int on_frame(Dwfl_Frame* frame, void* arg) {
    auto* w = static_cast<Walk*>(arg);
    Dwarf_Addr pc = 0;
    bool activation = false;
    if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
    if (!pc) return DWARF_CB_ABORT;
    w->out->pcs.push_back(activation ? pc : pc - 1);
    return w->out->pcs.size() >= kMaxNativeFrames ? DWARF_CB_ABORT : DWARF_CB_OK;
}

}  // namespace

bool Unwinder::attach() {
    if (!modules_.dwfl() && !modules_.refresh()) return false;
    if (attached_epoch_ == modules_.epoch()) return true;
    if (!dwfl_attach_state(modules_.dwfl(), nullptr, modules_.pid(), &kThreadCallbacks, &cur_)) return false;
    attached_epoch_ = modules_.epoch();
    return true;
}

UnwoundStack Unwinder::unwind(const pbp_native_event& ev, size_t size) {
    UnwoundStack out;
    if (!ev.ip || (ev.flags & PBP_NATIVE_F_NO_REGS)) return out;
    // A pc outside every known file (a library loaded since the maps were read): read them again.
    if (!modules_.module_at(ev.ip)) return out;
    if (!attach()) return out;
    cur_.ev = &ev;
    const size_t have = size > PBP_NATIVE_HEADER_BYTES ? size - PBP_NATIVE_HEADER_BYTES : 0;
    cur_.len = std::min<uint64_t>(ev.ustack_len, have);
    Walk w{&out};
    int rc = dwfl_getthread_frames(modules_.dwfl(), static_cast<pid_t>(ev.tid), on_frame, &w);
    // A return address in no known file: a library loaded since the maps were read (an
    // extension module imported), which the first pc did not show. libdwfl went on from it by
    // frame pointer, without its CFI: what follows is a guess (select.select's caller read as
    // the timeout's microseconds). Once more, with the maps read again.
    size_t unknown = 1;
    while (unknown < out.pcs.size() && dwfl_addrmodule(modules_.dwfl(), out.pcs[unknown])) unknown++;
    if (unknown < out.pcs.size()) {
        const uint32_t epoch = modules_.epoch();
        if (modules_.module_at(out.pcs[unknown]) && modules_.epoch() != epoch && attach()) {
            out.pcs.clear();
            rc = dwfl_getthread_frames(modules_.dwfl(), static_cast<pid_t>(ev.tid), on_frame, &w);
        }
    }
    // 0: unwound to a frame without a caller (the CFI says the return address is undefined).
    out.complete = rc == 0;
    cur_.ev = nullptr;
    return out;
}

}  // namespace pbp::native
