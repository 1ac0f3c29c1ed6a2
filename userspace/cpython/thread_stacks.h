// Every Python thread's stack of a running process, read from userspace with process_vm_readv:
// no signal, no ptrace stop, no write. The walk is BPF's (bpf/thread_state.bpf.h,
// bpf/frame_walk.bpf.h) over the same pbp_proc, and its frames are BPF's pbp_frames (code
// address with the tag bits cleared, instruction, code checksum), so the StackStore and the
// Symbolizer turn them into exactly the frames a BPF sample of the same stack gets.
//
// For the threads BPF never sees in a run (blocked from before it began to after it ended:
// wall mode) and for `pybpfprof dump`. A thread that runs while it is read may yield a mixed
// or broken chain: the walk is bounded (max_depth, a cycle guard) and stops on the first
// unreadable frame or code object, marking the stack PBP_F_PARTIAL with the reason.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "pybpfprof/abi.h"
#include "sys/target_memory.h"

namespace pbp::cpython {

struct ThreadStack {
    // Host tid of the thread; 0 = not known. From PyThreadState.native_thread_id (3.11+,
    // translated from the process's pid namespace to the host's), else from glibc's
    // struct pthread at thread_id (3.6 .. 3.10, checked against /proc/PID/task), else the
    // main thread when the process has one thread state.
    uint32_t tid = 0;
    uint64_t thread_id = 0;  // PyThreadState.thread_id (pthread_self())
    uint64_t tstate = 0;     // address of the PyThreadState
    uint64_t interp = 0;     // address of its PyInterpreterState
    // PyThreadState._status.active (3.12+): attached, i.e. running Python (a thread blocked in
    // a call that released the GIL is not). A thread that entered several interpreters has a
    // thread state in each; BPF takes the active one. Always true where not known (< 3.12).
    bool active = true;
    std::vector<pbp_frame> frames;  // leaf (innermost) first, like pbp_stack
    // Per frame of frames: the first of an eval-loop call (what BPF's walk marks with
    // PBP_INSTR_ENTRY under --native; enum pbp_native_entry): 3.11's entry frames, 3.12+'s frame
    // before a shim frame; all false up to 3.10 (one frame per call, unmarked).
    std::vector<bool> entry;
    uint16_t flags = 0;             // PBP_F_TRUNCATED, PBP_F_PARTIAL
    uint16_t reason = PBP_OK;       // why frames is empty or partial (enum pbp_reason)
};

// One entry per PyThreadState of every interpreter, in list order. False (err says why) when
// the interpreter list cannot be read at all (process gone, not started, finalised); a thread
// whose stack cannot be read is still listed, with its reason.
bool read_thread_stacks(pid_t pid, const pbp_proc& proc, std::vector<ThreadStack>& out, std::string& err);
// The same through mem (tests: memory that changes between reads).
// pid is used for /proc/PID/task (the tid mapping) only. walk_frames false: the thread states
// and tids only (frames empty, reason PBP_OK).
bool read_thread_stacks(MemoryReader& mem, pid_t pid, const pbp_proc& proc, std::vector<ThreadStack>& out,
                        std::string& err, bool walk_frames = true);

// One _PyInterpreterFrame (3.11+) at frame, read as the walk reads each frame: its code object
// (checked like the walk's), instruction and checksum. False when unreadable or not a code
// object's frame. For frames that are not on a thread's chain: a suspended coroutine's
// (userspace/cpython/asyncio.h).
bool read_frame_at(MemoryReader& mem, const pbp_proc& proc, uint64_t frame, pbp_frame& out);

}  // namespace pbp::cpython
