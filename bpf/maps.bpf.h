/* SPDX-License-Identifier: GPL-2.0 */
/* The sampler's maps, the types of their values, and the knobs userspace sets before load. */
#ifndef __PYBPFPROF_MAPS_BPF_H__
#define __PYBPFPROF_MAPS_BPF_H__

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "pybpfprof/abi.h"

/* Set by userspace before load. */
const volatile __u32 watch_flags = 0;
/* Samples do not wake the consumer (it drains on a timer) until this much is queued. */
const volatile __u64 wakeup_bytes = 1 << 18;
/* Frames per run of walk_nolp, <= PBP_NOLP_CHUNK. "nolp" (here, in the programs' names and in
 * PBP_NOLP_*) = no bpf_loop: the tail-call frame walk for kernels 5.8 .. 5.16. */
const volatile __u32 nolp_chunk = PBP_NOLP_CHUNK;
/* Time the sampler's sections into PBP_STAT_T_* (PYBPFPROF_TIMING); off, the verifier
 * removes every timing instruction. */
const volatile __u32 section_timing = 0;
/* --mode wall: off-CPU intervals shorter than this are summed per thread and wait reason, and
 * emitted once the sum reaches it. Not a load-time constant: the engine sets it (the smallest of
 * the live wall sessions') whenever a wall session starts or stops. */
volatile __u64 min_block_ns = 1000000;
/* --mode wall: bumped by userspace whenever a process becomes a wall target, so each CPU looks
 * up the task it switches out once more (it may be one of the new target's threads, already
 * running when its entry was made; see offcpu_cpu). Starts at 1: a CPU's first switch looks. */
volatile __u32 offcpu_epoch = 1;
/* --mode wall: the offcpu_slots table's size - 1 (its size a power of 2, set with it). */
const volatile __u32 offcpu_slot_mask = PBP_OFFCPU_SLOTS - 1;
/* --mode wall: bumped whenever the procs map changes (userspace: a process added, rewritten or
 * removed; BPF: at an exec), so switch-outs copy anew what they keep of their process
 * (pbp_offcpu.pc). Starts at 1: an entry's 0 is never current. */
volatile __u32 offcpu_proc_epoch = 1;
/* --mode wall: at most one stack walk per thread per this much wall time (see offcpu.bpf.h). */
const volatile __u64 offcpu_walk_budget_ns = 100000;
/* --native: the program may capture machine state (bpf/native.bpf.h) for the processes marked
 * PBP_PROC_NATIVE. Set only on kernels with bpf_task_pt_regs (5.15+): off, the verifier drops
 * the capture code, helper call included. */
const volatile __u32 native_capture = 0;
/* No sampling period here: an on-CPU sample's weight is its perf event's period
 * (ctx->sample_period), so userspace changes the rate by reopening the perf events alone, and
 * a record keeps the period it was made with. */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22); /* resized by userspace */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct pbp_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 2048); /* resized by userspace */
	__type(key, __u64);
	__type(value, struct pbp_stack);
} stacks SEC(".maps");

struct tstate_entry {
	__u64 tstate;   /* 0 = known to have none (negative entry) */
	__u64 ts_ns;    /* when made (negative entry) or last checked active (positive) */
	__u64 interp;   /* the PyInterpreterState the thread state is in */
	__u64 start;    /* the task's start_time: a tid reused by a later thread is another key */
	__u32 generation;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct tstate_entry);
} tstates SEC(".maps");

/* Thread-state hints: every thread state a walk of a thread list passed, keyed by its thread_id
 * (the fsbase of its thread), so that a thread sampled for the first time finds its state
 * without walking the list again: in a pool of 1000 threads that run in turn, a walk (~1000
 * pairs of reads) for each thread's first sample cost more than the rest of its samples
 * together. A hint is only a candidate: it is used when still valid (see thread_state.bpf.h),
 * checked like a tstates entry, and then becomes the thread's tstates entry. */
struct tstate_hint_key {
	__u64 thread_id;
	__u32 tgid;
	__u32 _pad;
};

/* Written in place by a walk in this order (walk_ns, generation, interp, then tstate) and read
 * in the reverse one, so that a state read with a walk_ns belongs to that walk. */
struct tstate_hint {
	__u64 tstate;   /* 0: two thread states had this thread_id in one walk (ambiguous), or none yet */
	__u64 interp;
	__u64 walk_ns;  /* when the walk that wrote it began (its id) */
	/* When the last thread with this fsbase was created (on_fork). A walk begun before then
	 * may have read the state of an earlier thread with this fsbase (glibc hands an exited
	 * thread's stack, and so its fsbase, to a new thread), freed since while its bytes,
	 * thread_id included, still read as before. Never written by a walk. */
	__u64 void_ns;
	__u32 generation;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct tstate_hint_key);
	__type(value, struct tstate_hint);
} tstate_hints SEC(".maps");

/* Per process that has hints (host tgid): the last walk that finished leaving them. Only its
 * hints count: one walk sees every state with a thread_id, so it alone can tell an ambiguous
 * thread_id. Removed when the process exits. */
struct tstate_fill {
	__u64 walk_ns;  /* when it began (its hints' walk_ns) */
	__u64 head;     /* the first interpreter's first thread state, when it began: a state made
			 * since is pushed there (tstate_only_one) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct tstate_fill);
} tstate_fills SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PBP_STAT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* Frame cache: on 3.11+ the interpreter frames of a thread are contiguous in its data
 * stack (callers below callees), so one read of the page below a frame covers many
 * callers. A view into it may extend PBP_WINDOW past the cached bytes (never read). */
#define FRAME_CACHE 4096 /* bytes */

/* The frame walk's state. No pointers: the no-bpf_loop walk keeps it in the scratch value
 * between its tail calls (copied there and back whole); struct frame_walk holds the pointers. */
struct walk_state {
	__u64 frame;       /* the next frame to read; 0 = the chain's end */
	__u64 hash;        /* the stack id of the frames walked so far */
	__u64 fc_base;     /* user address of frame_cache[0] */
	__u64 last_code;   /* csum cache: recursion repeats the same code object */
	__u32 fc_len;      /* bytes valid in frame_cache */
	__u32 last_csum;
	__u32 depth;
	__u32 max_depth;
	__u32 flags;       /* PBP_F_* */
	__u32 reason;      /* enum pbp_reason */
};

/* The sample being made: what each of its records carries. Set at entry, read again by the
 * no-bpf_loop walk in its tail calls (the process is looked up again by tgid: a pointer to it
 * cannot be kept in a map). */
struct sample_info {
	__u64 now;
	__u64 period;      /* the perf event's period, ns: the weight */
	__u64 clock;       /* the CPU's sampled clock after this event (pbp_event.cpu_clock_ns) */
	__u32 tgid, tid;
	__u16 kind;        /* enum pbp_sample_kind */
	__u16 flags;       /* PBP_F_AGGREGATE for an aggregate off-CPU sample; ORed into the record's */
	__u8 gil;          /* enum pbp_gil */
	__u8 wait;         /* enum pbp_wait (off CPU) */
	__u64 async_task;  /* --async: the thread's running asyncio task, 0 for none */
	__u8 runtime;      /* PBP_RT_*: read at entry while the process was not seen initialized */
};

/* Per-CPU caches in front of two maps, so a sample of a thread that keeps running on this
 * CPU touches neither map's memory (each map access is a likely TLB miss: the maps are
 * vmalloc'ed in 4 KiB pages, and a miss costs a two-level page walk in a VM):
 * - the thread-state entries of the last threads sampled here (a copy of the tstates
 *   entry, validated exactly as the entry itself is);
 * - the stack ids stored lately from this CPU: such a stack is in the stacks map, or was
 *   read by userspace when it was stored (a new stack wakes the consumer at once). */
#define TSTATE_CACHE 8
#define SEEN 256
struct tstate_cache_entry {
	__u64 pid_tgid;
	struct tstate_entry e;
};

/* 3.11/3.12: the check of tstate->cframe against its previous cframe (see abi.h). Kept in the
 * map value, not in struct frame_walk on the stack: the verifier does not track map memory, so the
 * frame walk's states still converge. */
struct cframe_check {
	__u64 expect;   /* tstate->cframe->previous->current_frame */
	__u32 pending;  /* the first entry frame (or the chain's end) is still to be checked */
	__u32 stale;    /* the check failed: no stack, PBP_ERR_CFRAME_STALE */
};

/* 3.14+: PyInterpreterState._code_object_generation counts the code objects freed (code_dealloc
 * bumps it first thing). While it stands still, a code object seen at an address is still the one
 * there, so its checksum comes from this cache instead of a probe read (~250 ns each, most
 * of a deep walk's cost). Per CPU; keyed by the code object's address, valid for the same
 * process (and entry generation), interpreter and code generation, and at most CODE_CACHE_TTL_NS
 * (bounds what a read racing a code object's construction could leave). */
#define CODE_CACHE_SLOTS 256
#define CODE_CACHE_TTL_NS 250000000ULL
struct code_cache_entry {
	__u64 code, interp, gen, ts;
	__u32 tgid, pgen, csum, _pad;
};
struct code_cache {
	struct code_cache_entry e[CODE_CACHE_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct code_cache);
} code_cache_map SEC(".maps");

/* This sample's code generation (in the map value: it lives across the no-bpf_loop tail calls). */
struct code_gen_sample {
	__u64 interp, gen, now;
	__u32 on, tgid;  /* on: the generation was read, the cache may be used */
};

/* Per-CPU scratch space of a sample. Hot parts first: a shallow walk then touches two pages
 * of it, and a perf event of a process not profiled only the first. */
struct scratch {
	/* The sum of the periods of every perf event on this CPU (pbp_event.cpu_clock_ns). */
	__u64 cpu_clock_ns;
	struct tstate_cache_entry tstate_cache[TSTATE_CACHE];
	__u64 seen[SEEN];             /* stack ids stored lately from this CPU */
	__u8 code_window[PBP_WINDOW]; /* a code object (before the walk: a thread state, a cframe) */
	__u8 frame_cache[FRAME_CACHE + PBP_WINDOW];
	struct pbp_stack stack;
	struct walk_state walk;       /* between the tail calls of the no-bpf_loop walk */
	__u32 capture_next;           /* ... and of its capture (emit.bpf.h): the next frame */
	struct sample_info cur;       /* the sample being made */
	struct sample_info off_si;    /* --mode wall: an off-CPU interval's record (offcpu_emit), made
				       * while cur may hold a sample (offcpu_running) */
	struct cframe_check cframe_check;
	struct code_gen_sample code_gen;
	/* --mode wall's switch-out (offcpu.bpf.h): its place and the identity check's fields, here
	 * rather than on the stack (5.10-6.1 count the program's stack and its callbacks' against 512
	 * bytes together). */
	struct {
		__u64 uip, usp, leaf_prev, leaf_code, leaf_instr, caller_instr;
	} ids;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch_map SEC(".maps");

/* --cgroup: a process is reported at exec only if it is under one of these cgroups
 * (bpf_current_task_under_cgroup tests ancestry, so a pod's containers that start later
 * are caught too). Processes elsewhere cost one array scan per exec, nothing per sample. */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, PBP_MAX_CGROUPS);
	__type(key, __u32);
	__type(value, __u32);
} cgroup_filter SEC(".maps");

/* walk_nolp (0) and capture_nolp (1), for the tail calls of the no-bpf_loop walk and of its
 * code object capture (filled in by userspace). */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} nolp_progs SEC(".maps");

/* The same for the off-CPU switch-out walk without bpf_loop (walk_nolp_rt, capture_nolp_rt;
 * raw_tp): a tail call stays within one program type, and a program array belongs to the type
 * of its first program. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} nolp_rtprogs SEC(".maps");

/* --mode wall: the off-CPU state of every tracked thread (see abi.h, struct pbp_offcpu_slot, and
 * offcpu_table.bpf.h). Made with the program: sched_switch never allocates. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, PBP_OFFCPU_SLOTS); /* set by userspace with offcpu_slot_mask */
	__type(key, __u32);
	__type(value, struct pbp_offcpu_slot);
} offcpu_slots SEC(".maps");

/* --mode wall, per CPU: the task running here, if it is a wall target's thread (tid, 0 if not),
 * as the last sched_switch on this CPU found it, so the prev side of the next switch needs no
 * lookup. epoch: offcpu_epoch when that was found. */
struct offcpu_cpu {
	__u32 tid;
	__u32 epoch;
	__u32 last_in;  /* the task the last switch here brought on, target or not */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_cpu);
} offcpu_cpu_map SEC(".maps");

/* --native: the machine-state record being made (per CPU; too big for the BPF stack). The slack
 * lets the verifier see that a page read at any offset the mask allows stays in the value. */
struct native_scratch {
	struct pbp_native_event ev;
	__u8 slack[PBP_NATIVE_PAGE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct native_scratch);
} native_scratch SEC(".maps");

/* The set of code objects the consumer has been shown (see emit.bpf.h). */
#define SHOWN_SLOTS 2048 /* 2-way: slots 2n and 2n+1; 16 KiB (a per-CPU value is at most 32 KiB) */
struct shown_set {
	__u64 key[SHOWN_SLOTS];
	__u32 unwoken;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct shown_set);
} shown_map SEC(".maps");

/* The code objects whose identity was captured (code_capture.bpf.h): one record per code
 * object. LRU: one evicted is captured again if met again (at most a duplicate record). */
struct code_known_key {
	__u32 tgid;
	__u32 generation;  /* pbp_proc.generation: a new image (exec) captures anew */
	__u64 code;
	__u32 csum;
	__u32 _pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct code_known_key);
	__type(value, __u8);
} code_known SEC(".maps");

#endif /* __PYBPFPROF_MAPS_BPF_H__ */
