/* SPDX-License-Identifier: Apache-2.0
 *
 * The one BPF <-> userspace ABI of pybpfprof.
 *
 * Included by bpf/pybpfprof.bpf.c (compiled with clang -target bpf, after vmlinux.h)
 * and by the C++ userspace. Everything that crosses the boundary is defined here:
 * map value layouts, ring-buffer records, error reasons and the per-interpreter
 * struct offsets. Plain C, fixed-width types only.
 */
#ifndef PYBPFPROF_ABI_H
#define PYBPFPROF_ABI_H

#ifdef __bpf__
/* vmlinux.h provides __u8.. __u64 */
#else
#include <linux/types.h>
#endif

/* ---- limits --------------------------------------------------------------- */

/* Deepest Python stack captured whole (CPython's default recursion limit is 1000). */
#define PBP_MAX_DEPTH 1024
/* Without bpf_loop (kernels 5.8 .. 5.16) the frame walk runs nolp_chunk frames per
 * program run (at most PBP_NOLP_CHUNK; userspace retries with PBP_NOLP_CHUNK_SMALL if a
 * kernel refuses) and continues through tail calls: PBP_NOLP_RUNS runs, within the kernel's
 * limit of 33. The walk's state stays in the scratch map between steps (bpf/sample.bpf.h),
 * so the verifier's cost grows linearly with the chunk: walk_nolp on 5.10 verifies 8 frames
 * a run in 36k instructions (it was 1M and refused with the state on the stack). */
#define PBP_NOLP_CHUNK 8
#define PBP_NOLP_CHUNK_SMALL 4
#define PBP_NOLP_RUNS 32
#define PBP_MAX_DEPTH_NO_LOOP (PBP_NOLP_CHUNK * PBP_NOLP_RUNS)
/* Bounds for the thread-state search (interpreters x threads). */
#define PBP_MAX_INTERPRETERS 16
#define PBP_MAX_THREAD_WALK 4096
#define PBP_MAX_THREAD_WALK_NO_LOOP 8
/* Largest window read from a frame or a code object in one probe read. */
#define PBP_WINDOW 256

/* ---- per-interpreter struct offsets (filled by userspace/cpython) ----------- */

/* pbp_py_offsets.code_ident[]: the objects a code object's identity is read from. */
enum pbp_code_ident {
	PBP_CODE_NAME = 0,      /* co_name (str) */
	PBP_CODE_QUALNAME = 1,  /* co_qualname (str, 3.11+) */
	PBP_CODE_FILENAME = 2,  /* co_filename (str) */
	PBP_CODE_LINETABLE = 3, /* co_linetable / co_lnotab (bytes) */
	PBP_CODE_IDENT_PTRS = 4,
};

/* How frames are linked. */
enum pbp_frame_kind {
	PBP_FRAME_OBJECT = 1,      /* <= 3.10: tstate->frame -> PyFrameObject{f_back,f_code,f_lasti} */
	PBP_FRAME_INTERP_CFRAME = 2, /* 3.11, 3.12: tstate->cframe->current_frame -> _PyInterpreterFrame */
	PBP_FRAME_INTERP = 3,      /* 3.13+: tstate->current_frame -> _PyInterpreterFrame */
};

/* How the instruction position of a frame is stored. */
enum pbp_instr_kind {
	PBP_INSTR_LASTI_BYTES = 1, /* <= 3.9: int f_lasti, a byte offset */
	PBP_INSTR_LASTI_UNITS = 2, /* 3.10: int f_lasti, in 2-byte code units */
	PBP_INSTR_PTR = 3,         /* 3.11+: pointer into co_code_adaptive (prev_instr / instr_ptr) */
};

#define PBP_OFF_NONE 0xffff

/* How an eval-loop call's first (entry) frame is told, for --native. */
enum pbp_native_entry {
	PBP_NATIVE_ENTRY_ONE = 0,   /* <= 3.10: one frame per _PyEval_EvalFrameDefault call, no mark */
	PBP_NATIVE_ENTRY_FLAG = 1,  /* 3.11: the byte at frame_entry_off equals frame_entry_val (is_entry) */
	/* 3.12+: each call pushes a shim frame (owner native_shim_owner, at frame_owner) below its
	 * first frame: the frame walked just before a shim is the entry frame */
	PBP_NATIVE_ENTRY_SHIM = 2,
};

/* Where a process's GIL (struct _gil_runtime_state) is. */
enum pbp_gil_where {
	PBP_GIL_WHERE_NONE = 0,   /* not known (free-threaded builds, 3.6 without its symbols): GIL n/a */
	PBP_GIL_WHERE_ADDR = 1,   /* 3.7 .. 3.11: embedded in _PyRuntime (ceval.gil), at pbp_proc.gil_addr */
	PBP_GIL_WHERE_INTERP = 2, /* 3.12+: PyInterpreterState.ceval.gil points to it (per interpreter) */
	/* 3.6: no struct, separate static variables of ceval.c (gil_locked, gil_last_holder, and
	 * the futexes gil_cond, gil_mutex, switch_cond, switch_mutex) found in the ELF symbol
	 * table: pbp_proc.gil_locked_addr, gil_holder_addr, and gil_addr/gil_wait_size for the
	 * futexes. The gil_locked/gil_last_holder/gil_size offsets are unused. */
	PBP_GIL_WHERE_STATICS = 3,
};
/* Bytes BPF reads from the start of the GIL struct: gil_locked and gil_last_holder lie within.
 * A power of two, so a mask bounds the offsets for the verifier. */
#define PBP_GIL_WINDOW 32

struct pbp_py_offsets {
	__u32 py_version_hex;     /* PY_VERSION_HEX of the interpreter */
	__u8 frame_kind;          /* enum pbp_frame_kind */
	__u8 instr_kind;          /* enum pbp_instr_kind */
	__u8 free_threaded;       /* Py_GIL_DISABLED build */
	__u8 executable_tag_mask; /* low bits to clear from f_executable (3.14: _PyStackRef) */

	/* _PyRuntimeState / interpreter list */
	__u16 interp_next;        /* PyInterpreterState.next */
	__u16 interp_threads_head;/* PyInterpreterState.threads.head (tstate_head before 3.12) */

	/* PyThreadState */
	__u16 tstate_next;
	__u16 tstate_thread_id;   /* unsigned long, == pthread_self() == fsbase on x86_64 */
	__u16 tstate_frame;       /* frame (<=3.10), cframe (3.11/3.12), current_frame (3.13+) */
	__u16 cframe_current_frame; /* _PyCFrame.current_frame (3.11/3.12), else PBP_OFF_NONE */

	/* frame (PyFrameObject or _PyInterpreterFrame) */
	__u16 frame_previous;     /* f_back / previous */
	__u16 frame_code;         /* f_code / f_executable */
	__u16 frame_instr;        /* f_lasti / prev_instr / instr_ptr */
	__u16 frame_owner;        /* char owner (3.11+), else PBP_OFF_NONE */
	__u16 frame_tlbc_index;   /* int32 tlbc_index (3.14 free-threaded), else PBP_OFF_NONE */
	__u16 frame_read_len;     /* bytes to read from a frame to cover the fields above (<= PBP_WINDOW) */

	/* code object */
	__u16 code_ob_type;       /* PyObject.ob_type; checked against code_type_addr when nonzero */
	__u16 code_adaptive;      /* offsetof(PyCodeObject, co_code_adaptive) (3.11+) */
	__u16 code_tlbc;          /* co_tlbc (3.14 free-threaded), else PBP_OFF_NONE */
	__u16 code_read_len;      /* bytes to read from a code object (<= PBP_WINDOW) */
	/* Code-object checksum: up to four immutable fields mixed by pbp_code_csum().
	 * Keys the symbol cache together with the address, so a reused address is never
	 * mislabelled. Size 0 marks an unused slot. */
	__u16 csum_off[4];
	__u8 csum_size[4];        /* 4 or 8 */

	/* Frame owners that are not Python frames are skipped: bit N set = skip owner N
	 * (3.12/3.13: CSTACK=3; 3.14+: INTERPRETER=3 and CSTACK=4). */
	__u32 skip_owner_mask;
	/* PyThreadState._status (3.12+). A thread that entered several interpreters has a
	 * thread state in each, all with its thread_id; the one in use has _status.active set.
	 * tstate_active_mask 0 = not known: the first thread state with the thread_id is used. */
	__u16 tstate_status;
	__u8 tstate_active_mask;  /* bits of the u32 at tstate_status */
	/* Bit i set: checksum slot i (size 8) holds a str pointer, and the str's cached hash
	 * (PyASCIIObject.hash, PBP_STR_HASH_OFF) is mixed instead of the pointer. Before 3.12
	 * no code object field differs between a freed code object and one built anew at its
	 * address (co_name, co_filename and the line table are often reallocated at their old
	 * addresses too), so the name is checked by its contents. */
	__u8 csum_str_mask;

	/* 3.11/3.12 (PBP_OFF_NONE elsewhere): _PyEval_EvalFrameDefault publishes its new _PyCFrame
	 * (tstate->cframe = &cframe) a few instructions before it stores the cframe's
	 * current_frame and previous (gcc writes both with one 16-byte store), so a sample there
	 * reads whatever an earlier call left at that C stack address. A settled cframe always
	 * links its first entry frame (the frame the eval loop was entered with, or the chain's
	 * end) to cframe->previous->current_frame; the walk checks that and marks the sample
	 * PBP_ERR_CFRAME_STALE, without a stack, when it does not hold. */
	__u16 cframe_previous;    /* _PyCFrame.previous */
	__u16 frame_entry_off;    /* the byte marking an entry frame: is_entry (3.11), owner (3.12) */
	__u8 frame_entry_val;     /* its value in an entry frame: 1 (true), 3 (FRAME_OWNED_BY_CSTACK) */
	/* --native: how the walk tells the first frame of each eval-loop call (enum
	 * pbp_native_entry), so each native _PyEval_EvalFrameDefault frame gets its frames. */
	__u8 native_entry;
	/* PyThreadState.root_cframe: the one cframe that settled has neither a frame nor a
	 * previous cframe. Any other (a _PyEval_EvalFrameDefault call's, on the C stack) has
	 * both; in the window above both may still read NULL, which is not "no Python frame". */
	__u16 tstate_root_cframe;
	/* PyInterpreterState._code_object_generation (3.14+, _Py_DebugOffsets), else PBP_OFF_NONE:
	 * bumped by every code object's dealloc, so while it stands still no code object address
	 * has changed hands and the walk may reuse the checksums it took (see code_cache in BPF). */
	__u16 interp_code_gen;
	__u16 _pad1;
	/* PyThreadState.native_thread_id (3.11+: the thread's kernel tid, as the process sees it),
	 * else PBP_OFF_NONE. Not read by BPF (it knows the tid): userspace reads it to name the
	 * thread of a stack it read itself (userspace/cpython/thread_stacks.h). */
	__u16 tstate_native_thread_id;

	/* The GIL (bpf/gil.bpf.h): a sample holds it when locked and last_holder is its thread
	 * state; a thread switched out in a futex on an address inside the struct waits for it
	 * (take_gil sleeps on its cond and mutex). */
	__u8 gil_where;           /* enum pbp_gil_where */
	__u8 native_shim_owner;   /* PBP_NATIVE_ENTRY_SHIM: the owner value of the eval loop's shim frame */
	__u16 interp_gil_ptr;     /* PyInterpreterState.ceval.gil (PBP_GIL_WHERE_INTERP), else PBP_OFF_NONE */
	__u16 gil_locked;         /* int locked (-1 before the GIL is created) */
	__u16 gil_last_holder;    /* PyThreadState *last_holder */
	__u16 gil_size;           /* sizeof(struct _gil_runtime_state) */
	/* --async (3.14+): offsetof(_PyThreadStateImpl, asyncio_running_task), from the _asyncio
	 * module's AsyncioDebug section (userspace/cpython/asyncio.h); 0: not read (never a real offset). BPF
	 * records the pointer with the sample (pbp_event.async_task); userspace names the task and
	 * the tasks that await it while they live. */
	__u16 tstate_async_task;

	/* A code object's identity, captured once per code object (bpf/code_capture.bpf.h) so that
	 * one freed before userspace reads it (a module body, exec'd code) is still named exactly:
	 * the offsets of co_name, co_qualname, co_filename and co_linetable (co_lnotab before
	 * 3.10), pointers followed by BPF, PBP_OFF_NONE where the version has none; co_firstlineno
	 * (an int, in the code window). code_ident_len: bytes of the code object copied (covers
	 * these and the checksum's fields); 0 = no capture (finalize_bpf_offsets fills it). */
	__u16 code_ident[PBP_CODE_IDENT_PTRS];
	__u16 code_firstlineno;
	__u16 code_ident_len;
};
/* Bytes read from tstate->cframe: cframe_current_frame and cframe_previous lie within. */
#define PBP_CFRAME_WINDOW 24
/* offsetof(PyASCIIObject, hash) in default (not free-threaded) builds */
#define PBP_STR_HASH_OFF 24

/* Per profiled process (key: host tgid). */
struct pbp_proc {
	struct pbp_py_offsets off;
	__u64 interp_head_addr;   /* address of the pointer to the first PyInterpreterState */
	__u64 code_type_addr;     /* &PyCode_Type in the target, 0 = no type check */
	__u64 gil_addr;           /* PBP_GIL_WHERE_ADDR: the GIL struct's address; PBP_GIL_WHERE_STATICS:
	                           * the start of the range holding take_gil's futexes; else 0 */
	__u64 gil_locked_addr;    /* PBP_GIL_WHERE_STATICS: &gil_locked (an int), else 0 */
	__u64 gil_holder_addr;    /* PBP_GIL_WHERE_STATICS: &gil_last_holder (a PyThreadState *), else 0 */
	__u64 since_ns;           /* CLOCK_MONOTONIC (bpf_ktime_get_ns) when userspace wrote this entry:
	                           * a thread found without a thread state soon after it (or after the
	                           * thread's start) is looked for again at its next sample
	                           * (NEG_YOUNG_NS, bpf/thread_state.bpf.h) */
	/* The runtime's phase, read for a sample without Python frames (pbp_event.runtime):
	 * &_PyRuntime.initialized (an int; 3.6: pylifecycle.c's static 'initialized') and
	 * &_PyRuntime._finalizing (a PyThreadState *; 3.6: _Py_Finalizing). 0 = not known. */
	__u64 runtime_initialized_addr;
	__u64 runtime_finalizing_addr;
	__u32 generation;         /* bumped by userspace whenever this entry is rewritten */
	__u32 max_depth;          /* frames to collect, <= PBP_MAX_DEPTH */
	__u32 flags;              /* PBP_PROC_* */
	__u32 gil_wait_size;      /* PBP_GIL_WHERE_STATICS: bytes of the futex range at gil_addr, else 0 */
	/* Written by BPF: 1 once a sample read runtime_initialized_addr as set (Py_Initialize had
	 * completed). Until then each on-CPU sample reads the runtime's phase (pbp_event.runtime):
	 * its stack is start-up's. 0 when userspace (re)writes the entry. */
	__u32 running;
	__u32 _pad0;
};
/* --mode wall: the process's threads are tracked off CPU (the scheduler programs). */
#define PBP_PROC_WALL (1u << 0)
/* --native: each on-CPU sample also sends a pbp_native_event (registers, a copy of the user
 * stack, the kernel stack), and the walk marks entry frames (PBP_INSTR_ENTRY). Only where the
 * program was loaded with native capture (a load-time knob); elsewhere ignored. */
#define PBP_PROC_NATIVE (1u << 1)

/* ---- stacks ------------------------------------------------------------------ */

struct pbp_frame {
	__u64 code;               /* code object address (tag bits cleared) */
	__u32 instr;              /* instruction offset, see enum pbp_instr_kind; PBP_INSTR_UNKNOWN if none */
	__u32 csum;               /* pbp_code_csum() of the code object at sample time */
};
#define PBP_INSTR_UNKNOWN 0xffffffffu
/* --native (PBP_PROC_NATIVE), 3.11+: set in instr on a frame the eval loop was entered with (its
 * C _PyEval_EvalFrameDefault call's first frame: is_entry on 3.11, the frame after a
 * FRAME_OWNED_BY_CSTACK one on 3.12+), so userspace can give each native eval-loop frame its
 * block of Python frames. Instruction offsets never reach it; cleared before symbolizing. */
#define PBP_INSTR_ENTRY (1u << 30)

/* Value of the stacks map; frames[0] is the innermost (leaf) frame. */
struct pbp_stack {
	__u32 depth;
	__u32 pid;                /* host tgid the stack belongs to (also mixed into the id) */
	struct pbp_frame frames[PBP_MAX_DEPTH];
};

/* ---- ring-buffer records ----------------------------------------------------- */

enum pbp_event_type {
	PBP_EV_SAMPLE = 1,
	PBP_EV_EXEC = 2,
	PBP_EV_EXIT = 3,
	PBP_EV_FORK = 4,          /* a profiled process forked a new process (pid = child) */
	/* --mode wall: a stack new to the consumer was walked at a switch-out (stack_id, pid, tid).
	 * Its record comes at the thread's switch-in, maybe much later: its code objects are to be
	 * read now, while they live. Not a sample. */
	PBP_EV_STACK = 5,
	/* --native: the machine state of the on-CPU sample whose record comes next from this CPU
	 * (same ts_ns and tid): a struct pbp_native_event, of variable length. */
	PBP_EV_NATIVE = 6,
	/* A code object met for the first time in a new stack (see struct pbp_code_event). It comes
	 * before the record of the sample whose stack holds it. Not a sample. */
	PBP_EV_CODE = 7,
	/* A thread of a profiled process exited (main thread included), with the name it had then
	 * (see struct pbp_thread_event). Not a sample. */
	PBP_EV_THREAD_EXIT = 8,
};

/* Why a sample of a profiled process carries no (or a partial) Python stack:
 * X(NAME, value, label). The label is what outputs and the summary show. */
#define PBP_REASONS(X) \
	X(OK, 0, "ok") \
	X(ERR_NO_INTERPRETER, 1, "interpreter starting or exiting")   /* runtime not initialised yet / finalised */ \
	X(ERR_NO_TSTATE, 2, "native thread without a Python thread state") \
	X(ERR_NO_FRAME, 3, "no Python frame")                          /* starting, or idle in C */ \
	X(ERR_READ_RUNTIME, 4, "interpreter state unreadable")         /* interpreter/thread list */ \
	X(ERR_READ_FRAME, 5, "frame unreadable")                       /* stack partial */ \
	X(ERR_READ_CODE, 6, "code object unreadable")                  /* stack partial */ \
	X(ERR_NOT_CODE, 7, "not a code object")                        /* f_executable: skipped, counted */ \
	X(ERR_STACK_MAP, 8, "BPF stack map full")                      /* could not store the stack */ \
	X(ERR_THREAD_WALK_LIMIT, 9, "thread list longer than the walk limit") \
	X(ERR_TAIL_CALL, 10, "frame walk tail call failed")            /* no-bpf_loop walk */ \
	/* 3.11/3.12: sampled while the eval loop was being entered: tstate->cframe not settled \
	 * yet, no stack (see pbp_py_offsets) */ \
	X(ERR_CFRAME_STALE, 11, "eval loop being entered: stack not settled")

enum pbp_reason {
#define PBP_X_REASON(name, value, label) PBP_##name = value,
	PBP_REASONS(PBP_X_REASON)
#undef PBP_X_REASON
#define PBP_X_COUNT(name, value, label) +1
	PBP_REASON_COUNT = 0 PBP_REASONS(PBP_X_COUNT),
#undef PBP_X_COUNT
};

/* What a sample stands for. Every sample carries its kind and its weight in ns. */
enum pbp_sample_kind {
	PBP_KIND_CPU = 1,     /* on CPU: weight = the sampling period */
	PBP_KIND_OFF_CPU = 2, /* off CPU: weight = the interval the thread waited */
};

/* The sampled thread and its interpreter's GIL (pbp_event.gil), on every sample. */
enum pbp_gil {
	PBP_GIL_NA = 0,       /* not known: free-threaded build, GIL layout unknown, no thread state */
	PBP_GIL_HELD = 1,     /* gil.locked and gil.last_holder == this thread's state */
	PBP_GIL_WAITING = 2,  /* blocked in take_gil (a futex inside the GIL's struct) */
	PBP_GIL_NEITHER = 3,  /* a Python thread that neither holds nor waits for it */
};

/* Why an off-CPU interval's thread was off CPU (pbp_event.wait), from its state when it was
 * switched out. The exporters show it as the stack's leaf. */
enum pbp_wait {
	PBP_WAIT_NONE = 0,     /* on CPU (PBP_KIND_CPU) */
	PBP_WAIT_SLEEP = 1,    /* TASK_INTERRUPTIBLE (and anything else that is not below) */
	PBP_WAIT_IO = 2,       /* TASK_UNINTERRUPTIBLE: disk, FUSE, page faults */
	PBP_WAIT_GIL = 3,      /* sleeping in take_gil */
	PBP_WAIT_RUNNABLE = 4, /* preempted: TASK_RUNNING, waiting for a CPU */
};
#define PBP_WAIT_COUNT 5

/* ---- off-CPU tracking (--mode wall) ----------------------------------------------- */

/* Per thread of a wall target (in the offcpu_slots table: struct pbp_offcpu_slot below). Made by
 * userspace for every thread of a process when it becomes a wall target, and by the fork
 * tracepoint for the threads it makes later; freed at the thread's last switch-out (its exit),
 * or at one after its process stopped being a target. The sched_switch program walks the
 * thread's stack when it is switched out (prev == current: its memory is readable) and keeps the
 * stack id here with the switch-out time and the wait reason; at its switch-in (the next side of a
 * later sched_switch) the interval ends and its record carries that stack id. Userspace reads
 * what is left at a session's end: the pending intervals and the sums not emitted yet. */
/* A stack a thread blocked with lately, and what it was walked from: the thread state, the leaf
 * frame (address, code object, instruction word) and its caller (address, instruction word). A
 * switch-out that reads the same reuses the stack without a walk (see bpf/offcpu.bpf.h). Also
 * the place in the thread's C code it blocked at (the user ip and sp saved at its system call's
 * entry) and the interpreter of the thread state: a switch-out from the same place checks the
 * leaf and caller where they were, without looking for the thread state and its current frame
 * first (the place check). */
struct pbp_offcpu_seen {
	__u64 tstate, leaf, leaf_code, leaf_instr, caller, caller_instr;
	__u64 stack_id;
	__u64 uip, usp;                /* user ip and sp at the system call (0: not in one) */
	__u64 interp;                  /* the interpreter of tstate */
	__u16 depth, reason, stack_flags;
	__u16 place_checks;            /* place checks since the last whole check from this place */
	/* --native: the ts_ns of the machine state captured when this stack was walked at this
	 * place (a pbp_native_event with PBP_NATIVE_F_OFFCPU), 0 for none. A switch-out from the
	 * same place reuses it: the same C code down from the eval loop. */
	__u64 native_ts;
	/* Whether the thread held the GIL when last preempted at this place with this stack
	 * (PBP_GIL_HELD or PBP_GIL_NEITHER, + 1; 0: not read since the last whole check). A
	 * preempted switch-out that passes the place check reuses it instead of reading the GIL. */
	__u8 preempt_gil;
	__u8 pad[7];
};

/* What a switch-out needs of the thread's process (its pbp_proc in the procs map) unless it walks:
 * copied by a switch-out that looked the process up, and used while epoch is offcpu_proc_epoch
 * (bumped at every change to the procs map, by userspace and by BPF), so that a switch-out that
 * passes the place check makes no procs lookup (27-50 ns here). */
struct pbp_offcpu_proc {
	__u32 epoch;                   /* offcpu_proc_epoch when copied (0: never) */
	__u16 frame_previous, frame_code, frame_instr, frame_read_len; /* pbp_py_offsets' */
	__u16 tstate_async_task;       /* pbp_py_offsets' */
	__u8 frame_kind;               /* pbp_py_offsets' */
	__u8 gil_where;                /* pbp_py_offsets' */
	__u8 native;                   /* flags & PBP_PROC_NATIVE */
	__u8 pad[3];
};

struct pbp_offcpu {
	__u64 out_ns;                  /* when switched out; 0 = on CPU (no interval pending) */
	__u64 sum_ns[PBP_WAIT_COUNT];  /* intervals shorter than min_block, per enum pbp_wait, not emitted yet */
	__u64 stack_id;                /* the stack at the last switch-out (0: none, see reason) */
	/* The last two places the thread blocked at (two: a thread that alternates between two,
	 * e.g. a write that wakes a peer and a read, reuses both). */
	struct pbp_offcpu_seen seen[2];
	__u64 walk_ns;                 /* the walk budget: used up to this time (see bpf/offcpu.bpf.h) */
	__u32 tgid;
	__u16 depth;                   /* of stack_id */
	__u16 reason;                  /* enum pbp_reason of the walk (stack_id 0 and PBP_OK: never walked) */
	__u16 stack_flags;             /* PBP_F_TRUNCATED / PBP_F_PARTIAL of the walk */
	__u8 wait;                     /* enum pbp_wait of the pending interval */
	__u8 gil;                      /* enum pbp_gil of the pending interval */
	__u8 approx;                   /* the pending interval's switch-out was over the walk budget:
					* stack_id is an earlier stack, its record is PBP_F_AGGREGATE */
	__u8 fresh;                    /* stack_id is new in the stacks map: its first record wakes the consumer */
	__u8 walk_slot;                /* the seen[] slot the walk under way fills (2: none) */
	__u8 next_slot;                /* the seen[] slot the next walk replaces */
	__u64 async_task;              /* the running asyncio task at the switch-out (see pbp_event) */
	__u64 native_ts;               /* --native: the pending interval's machine state (see seen[]), 0: none */
	__u64 exec_ns;                 /* the thread's CPU time (se.sum_exec_runtime) at its last switch-out,
					* 0: not known (see offcpu_switch_out: a switch-in never reported) */
	struct pbp_offcpu_proc pc;     /* what its switch-outs need of its process's pbp_proc */
};

/* Where a tracked thread's pbp_offcpu lives: an open-addressed table (the offcpu_slots map) of
 * PBP_OFFCPU_SLOTS slots (by default; a power of 2), its home slot tid & (slots - 1), or, when
 * another thread holds that, one of the next PBP_OFFCPU_PROBES - 1 slots of its probe sequence.
 * Finding a thread's entry is one array lookup, a few ns (a hash lookup was 30-60 ns here, and
 * the sched_switch program makes two per switch). The table is a BPF_F_MMAPABLE array:
 * userspace makes and reads entries through its mapping, with the same atomics as BPF.
 * - tid: the thread whose entry the slot holds; 0: free. Written last when a slot is filled:
 *   an entry is whole once a lookup sees its tid.
 * - claims: how many want the slot. A claimant adds 1 and holds the slot when it then reads 1
 *   (two claimants at once may both give up; never both hold it); one that does not takes its
 *   1 back. The holder takes its 1 back when it frees the slot (after clearing tid). Claims
 *   use fetch-less atomic adds, the only atomics 5.10 has: compare-and-swap is 5.12+.
 * - spill: how many entries of tids whose home this slot is are in other slots. Raised before
 *   such an entry is made, lowered after it is freed: a thread whose home neither holds it nor
 *   has a spill has no entry, with no probing (what a non-target pays per switch).
 * Only BPF frees a slot (at the thread's exit, or at a switch-out once its process is no longer a
 * wall target): userspace forgetting a process marks its threads' entries dormant (tgid 0, no
 * interval pending). */
struct pbp_offcpu_slot {
	__u32 tid;
	__u32 claims;
	__u32 spill;
	__u32 pad;
	struct pbp_offcpu e;
};
#define PBP_OFFCPU_SLOTS 32768
#define PBP_OFFCPU_PROBES 4
/* The j-th slot of tid's probe sequence (j = 0: its home), for a table of mask + 1 slots. An odd
 * stride far from 1: the threads of a process have consecutive tids, so a tid whose home one of
 * them holds would find its neighbours' slots taken too. */
#define PBP_OFFCPU_PROBE(tid, j, mask) (((tid) + (__u32)(j) * 0x9E3779B1u) & (mask))

/* pbp_event.runtime: the interpreter's phase when an on-CPU sample was taken, from
 * pbp_proc.runtime_*_addr: for every sample without Python frames (reasons NO_INTERPRETER,
 * NO_TSTATE, NO_FRAME), and for the others until the process is seen initialized (pbp_proc.running).
 * Userspace names a sample without frames [interpreter start-up] (not initialized, not
 * finalizing), [interpreter finalization] (finalizing), or by its reason; a stack sampled in
 * start-up goes under a root [interpreter start-up] frame (userspace/cpython/runtime_phase.h). */
#define PBP_RT_KNOWN (1u << 0)        /* both fields were read (with frames: only until 'running') */
#define PBP_RT_INITIALIZED (1u << 1)  /* initialized != 0: Py_Initialize completed */
#define PBP_RT_FINALIZING (1u << 2)   /* _finalizing != NULL: Py_FinalizeEx began (never cleared) */
/* The addresses are known but could not be read: a page of the runtime not faulted in yet (a
 * process that has not begun its start-up; BPF cannot fault a page in) or gone (the exit). */
#define PBP_RT_UNREADABLE (1u << 3)
/* The sampled thread is in the kernel's exit path (PF_EXITING): past the last Python code it
 * ran, where its memory map may already be gone and every read fails. Set on an on-CPU sample
 * without a stack, whatever its reason; userspace names it [thread exiting]. */
#define PBP_RT_EXITING (1u << 4)

/* Sample flags. */
#define PBP_F_TRUNCATED (1u << 0)  /* deeper than max_depth: outermost frames missing */
#define PBP_F_PARTIAL (1u << 1)    /* the walk stopped on an error (reason says which) */
/* OFF_CPU: the sum of several intervals shorter than the minimum (--min-block) of this
 * thread and wait, attributed to the stack at the last of them. Not one contiguous interval. */
#define PBP_F_AGGREGATE (1u << 2)
/* FORK: the child shares its parent's memory (CLONE_VM: vfork, as subprocess forks on 3.10+):
 * it can run nothing of its own until it execs or exits. */
#define PBP_F_SHARES_MM (1u << 3)

struct pbp_event {
	__u64 ts_ns;              /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	__u32 type;               /* enum pbp_event_type */
	__u32 pid;                /* host tgid */
	__u32 tid;                /* host tid */
	__u32 cpu;
	__u64 stack_id;           /* key into the stacks map; 0 = no stack */
	__u16 flags;              /* PBP_F_* */
	__u16 reason;             /* enum pbp_reason */
	__u16 depth;
	__u16 kind;               /* SAMPLE: enum pbp_sample_kind */
	__u32 ppid;               /* EXEC: parent tgid */
	__u8 gil;                 /* SAMPLE: enum pbp_gil */
	__u8 wait;                /* OFF_CPU SAMPLE: enum pbp_wait */
	__u8 runtime;             /* CPU SAMPLE: PBP_RT_* (0: not read) */
	__u8 _pad2;
	/* SAMPLE: what it stands for, in ns (on CPU: its perf event's period; off CPU: the
	 * interval, which ended at ts_ns; with PBP_F_AGGREGATE the sum of short intervals) */
	__u64 weight_ns;
	/* CPU SAMPLE: this CPU's sampled clock, in ns: the periods of every perf event on this CPU
	 * so far (whatever it ran, idle too), this one's included. The sample stands for
	 * (cpu_clock_ns - weight_ns, cpu_clock_ns] of it: a session at a lower rate than the
	 * engine's keeps the samples whose span holds a multiple of its own period (a timer at its
	 * rate on this CPU; see engine/decimate.h). Never wraps (u64 ns); goes on across rate
	 * changes and pauses. OFF_CPU SAMPLE with --native: the ts_ns of the machine state
	 * (PBP_NATIVE_F_OFFCPU) taken when its stack was walked, 0 for none. */
	__u64 cpu_clock_ns;
	/* SAMPLE with --async (pbp_py_offsets.tstate_async_task set): the thread's running asyncio
	 * task (a TaskObj address) when the sample was taken, 0 for none. An off-CPU interval
	 * carries the task of its switch-out. */
	__u64 async_task;
};                            /* 72 bytes */

/* PBP_EV_THREAD_EXIT: a thread's name (comm) when it exited. A thread may name itself after its
 * first sample (pthread_setname_np, prctl) and end before the consumer reads its name again:
 * this is its last name, which its samples are shown under (unless Python named it). The first
 * fields match pbp_event's (ts_ns, type, pid, tid, cpu). */
#define PBP_COMM_LEN 16
struct pbp_thread_event {
	__u64 ts_ns;
	__u32 type;               /* PBP_EV_THREAD_EXIT */
	__u32 pid;                /* host tgid */
	__u32 tid;                /* host tid */
	__u32 cpu;
	char comm[PBP_COMM_LEN];  /* NUL-terminated */
};                            /* 40 bytes */

/* ---- native stacks (--native) -------------------------------------------------- */

/* Bytes of the user stack copied from sp upwards: enough for ~20 native frames of CPython's
 * eval loop and C extensions (_PyEval_EvalFrameDefault's frame is ~200 bytes, a
 * PyObject_Call chain ~100 each) plus libc's; deeper stacks end in an incomplete native part.
 * A power of two (masks bound the reads for the verifier). */
#define PBP_NATIVE_USTACK 16384
/* An off-CPU capture's copy (PBP_NATIVE_F_OFFCPU), taken once per place a thread blocks at, not
 * per sample: a wait's C callers may keep large locals (select.select's implementation keeps
 * 49 KB of them, above which a 16 KiB copy cannot unwind). Such a record is
 * PBP_NATIVE_HEADER_BYTES + ustack_len bytes long, ustack_len up to this. */
#define PBP_NATIVE_USTACK_OFFCPU 65536
#define PBP_NATIVE_PAGE 4096
/* Kernel frames kept (bpf_get_stack), innermost first. */
#define PBP_NATIVE_KSTACK 64

#define PBP_NATIVE_F_KERNEL (1u << 0)   /* the sample hit kernel mode: user registers from pt_regs */
#define PBP_NATIVE_F_NO_REGS (1u << 1)  /* no user registers (a kernel thread, or unreadable) */
#define PBP_NATIVE_F_SHORT (1u << 2)    /* the copy ends before PBP_NATIVE_USTACK: the stack's mapping does */
/* Taken at a --mode wall switch-out that walked the thread's stack (ts_ns: the switch-out's
 * time), not before a sample record: the off-CPU records of the intervals it stands for come
 * later, carrying this ts_ns in their cpu_clock_ns field. */
#define PBP_NATIVE_F_OFFCPU (1u << 3)

/* Sent with bpf_ringbuf_output, only offsetof(ustack) + ustack_len bytes of it. The first
 * fields match pbp_event's (ts_ns, type, pid, tid, cpu) so a reader dispatches on type. */
struct pbp_native_event {
	__u64 ts_ns;              /* == the sample record's ts_ns */
	__u32 type;               /* PBP_EV_NATIVE */
	__u32 pid;                /* host tgid */
	__u32 tid;                /* host tid */
	__u32 cpu;
	__u64 ip, sp, bp;         /* user registers at the sample (or at kernel entry) */
	__u32 ustack_len;         /* bytes of ustack valid: the user stack at [sp, sp + ustack_len) */
	__u16 kdepth;             /* kernel frames in kstack */
	__u16 flags;              /* PBP_NATIVE_F_* */
	__u64 kstack[PBP_NATIVE_KSTACK]; /* kernel return addresses, innermost first */
	__u8 ustack[PBP_NATIVE_USTACK]; /* (PBP_NATIVE_USTACK_OFFCPU in an off-CPU record) */
};
#define PBP_NATIVE_HEADER_BYTES (56 + 8 * PBP_NATIVE_KSTACK)

/* A thread's user registers as it entered the kernel (bpf_task_pt_regs of any task), written
 * by the iter/task program of bpf/task_regs.bpf.c, one per task it is run over: for a thread
 * asleep since before a --mode wall --native session began, whose /proc/PID/task/TID/syscall
 * line has sp and pc but not the frame pointer that frame-pointer code's unwinding needs. */
struct pbp_task_regs {
	__u32 tgid;               /* host */
	__u32 tid;                /* host */
	__u64 ip, sp, bp;
};

/* ---- code object identities ------------------------------------------------------ */

/* Bytes copied from each str (header and data: 3.11's compact ASCII header is 48 bytes, a
 * non-ASCII one 72) and from the line table (bytes header and data). A longer str is not taken
 * from the copy (userspace reads it live, if it still can); a longer line table is kept cut
 * short: the lines of the instructions it covers. */
#define PBP_CODE_STR 384
#define PBP_CODE_LINES 4096
#define PBP_CODE_REGIONS (1 + PBP_CODE_IDENT_PTRS)

/* The copy of one code object and the objects it points to, taken by BPF when a new stack
 * holds a code object not captured before for its process (and registration generation):
 * region 0 is the code object (code_ident_len bytes at code), region 1 + enum pbp_code_ident
 * the object code_ident[i] points to. Userspace names the code object from this copy as it
 * would from the live process (userspace/engine/code_capture.h), so a code object that is gone
 * before the consumer reads it keeps its name, file and lines. Once per code object, never per
 * sample. The first fields match pbp_event's (ts_ns, type, pid, tid, cpu). */
struct pbp_code_event {
	__u64 ts_ns;
	__u32 type;               /* PBP_EV_CODE */
	__u32 pid;                /* host tgid */
	__u32 tid;
	__u32 cpu;
	__u64 code;               /* the code object's address (as in pbp_frame.code) */
	__u32 csum;               /* its checksum (as in pbp_frame.csum) */
	__u32 generation;         /* pbp_proc.generation when captured */
	__u64 addr[PBP_CODE_REGIONS]; /* where each region was copied from; 0 = not copied */
	__u16 len[PBP_CODE_REGIONS];  /* bytes copied, at data + PBP_CODE_DATA_OFF(i) */
	__u16 _pad[3];
	__u8 data[PBP_WINDOW + 3 * PBP_CODE_STR + PBP_CODE_LINES];
};
/* Where region i starts in pbp_code_event.data, and how many bytes it may hold. */
#define PBP_CODE_DATA_OFF(i) ((i) == 0 ? 0 : PBP_WINDOW + ((i) - 1) * PBP_CODE_STR)
#define PBP_CODE_DATA_CAP(i) ((i) == 0 ? PBP_WINDOW : (i) == 1 + PBP_CODE_LINETABLE ? PBP_CODE_LINES : PBP_CODE_STR)

/* ---- statistics (per-CPU array, index = enum pbp_stat) ---------------------- */

/* X(NAME, label), in index order from 0; the labels are what debug output prints. */
#define PBP_STAT_COUNTERS(X) \
	X(SAMPLES, "samples")                   /* perf events seen for a profiled tgid */ \
	X(EMITTED, "emitted")                   /* sample records committed to the ring buffer */ \
	X(RINGBUF_DROP, "ringbuf_drop")         /* ring buffer full: sample lost */ \
	X(TSTATE_CACHE_HIT, "tstate_cache_hit") \
	X(TSTATE_WALK, "tstate_walk")           /* thread state found by walking the thread list */ \
	X(TSTATE_HINT, "tstate_hint")           /* a thread's first thread state from an earlier walk's hint */ \
	X(TRUNCATED, "truncated") \
	X(STACK_NEW, "stack_new")               /* stack ids inserted into the stacks map */ \
	X(EVENT_DROP, "event_drop")             /* exec/exit record lost */ \
	X(SAMPLE_NS, "sample_ns")               /* time spent on profiled samples (entry to record) */ \
	X(FRESH_UNWOKEN, "fresh_unwoken")       /* new stacks of known code objects, left for the next batch */ \
	X(OFFCPU_FULL, "offcpu_full")           /* wall: a new thread of a target not tracked (its probe sequence's slots all held) */ \
	X(OFFCPU_WALK, "offcpu_walk")           /* wall: stacks walked at switch-out */ \
	X(OFFCPU_REUSED, "offcpu_reused")       /* wall: switch-outs whose stack was the last one walked (identity check) */ \
	X(OFFCPU_OVER_BUDGET, "offcpu_over_budget") /* wall: switch-outs over the walk budget (last stack reused, aggregate) */ \
	X(OFFCPU_PLACE_REUSED, "offcpu_place_reused") /* wall: of the reused, those found by the place check */ \
	X(OFFCPU_UNSEEN_IN, "offcpu_unseen_in") /* wall: a target thread's switch-in never reported, found by a sample or its switch-out */ \
	X(OFFCPU_SPILLED, "offcpu_spilled")     /* wall: new threads' entries made away from their home slot (it was held) */ \
	X(NATIVE_DROP, "native_drop")           /* --native: machine-state record lost (ring buffer full) */ \
	X(NATIVE_BYTES, "native_bytes")         /* --native: bytes of machine-state records sent */ \
	X(CODE_SENT, "code_sent")               /* code object identities captured (PBP_EV_CODE) */ \
	X(CODE_DROP, "code_drop")               /* ... not sent (ring buffer half full): read live, if still there */

/* Section timing (only with section_timing set at load, PYBPFPROF_TIMING): ns spent finding
 * the thread state, reading the first frame pointer, walking the frames, and looking up /
 * storing the stack; and the probe reads the walk made. In index order from PBP_STAT_T_BASE. */
#define PBP_STAT_TIMINGS(X) \
	X(T_TSTATE, "t_tstate_ns") \
	X(T_FRAME0, "t_frame0_ns") \
	X(T_WALK, "t_walk_ns") \
	X(T_STACKMAP, "t_stackmap_ns") \
	X(N_FRAME_READS, "frame_reads")         /* frame-cache misses */ \
	X(N_CODE_READS, "code_reads") \
	X(N_STR_READS, "str_reads")             /* str hashes for the checksum */ \
	X(N_CODE_CACHED, "code_cached")         /* code checksums from the generation cache (3.14+) */

enum pbp_stat {
#define PBP_X_STAT(name, label) PBP_STAT_##name,
	PBP_STAT_COUNTERS(PBP_X_STAT)
	PBP_STAT_REASON_BASE,        /* + enum pbp_reason */
	PBP_STAT_T_BEFORE = PBP_STAT_REASON_BASE + PBP_REASON_COUNT - 1,
	PBP_STAT_TIMINGS(PBP_X_STAT)
#undef PBP_X_STAT
	PBP_STAT_COUNT,
	PBP_STAT_T_BASE = PBP_STAT_T_BEFORE + 1,
};

/* ---- global configuration (BPF .rodata/.bss set before load) ---------------- */

/* Exec/exit tracking modes. */
#define PBP_WATCH_EXEC (1u << 0)     /* report every exec (for --all-python / launched trees) */
#define PBP_WATCH_CGROUP (1u << 1)   /* ... but only of tasks under a cgroup in the cgroup_filter map */

/* --cgroup: cgroups (with all their descendants) whose execs are reported. */
#define PBP_MAX_CGROUPS 64

/* ---- shared algorithms --------------------------------------------------------- */

static inline __u64 pbp_mix64(__u64 x)
{
	/* splitmix64 finaliser */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* Mix one checksum field value (already read, zero-extended). */
static inline __u32 pbp_csum_step(__u32 acc, __u64 field)
{
	return (__u32)pbp_mix64(((__u64)acc << 32) ^ field ^ 0x9e3779b97f4a7c15ULL);
}

/* Stack id: tgid and the registration generation (so a PID that exec'd into a new image
 * never reuses an old id), then every frame, folded in order. Never 0. */
static inline __u64 pbp_stack_hash_init(__u32 tgid, __u32 generation)
{
	return pbp_mix64(0x5042505354414b31ULL ^ tgid ^ ((__u64)generation << 32));
}
static inline __u64 pbp_stack_hash_step(__u64 h, const struct pbp_frame *f)
{
	h = pbp_mix64(h ^ f->code);
	return pbp_mix64(h ^ (((__u64)f->instr << 32) | f->csum));
}

#endif /* PYBPFPROF_ABI_H */
