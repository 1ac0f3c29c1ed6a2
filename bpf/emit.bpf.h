/* SPDX-License-Identifier: GPL-2.0 */
/* The emit path: sample and process records, the stack store, and the set of code objects
 * the consumer has been shown (when a new stack wakes it). */
#ifndef __PYBPFPROF_EMIT_BPF_H__
#define __PYBPFPROF_EMIT_BPF_H__

#include "util.bpf.h"
#include "code_capture.bpf.h"
#include "offcpu_table.bpf.h"

/* The runtime's phase (PBP_RT_*) of process proc, read from it (it must be current: an on-CPU
 * sample). 0 when its addresses are not known, PBP_RT_UNREADABLE when they cannot be read. */
static __always_inline __u8 runtime_phase_of(const struct pbp_proc *proc)
{
	if (!proc->runtime_initialized_addr || !proc->runtime_finalizing_addr)
		return 0;
	__u32 initialized = 0;
	__u64 finalizing = 0;
	if (bpf_probe_read_user(&initialized, sizeof(initialized), (const void *)proc->runtime_initialized_addr) ||
	    bpf_probe_read_user(&finalizing, sizeof(finalizing), (const void *)proc->runtime_finalizing_addr))
		return PBP_RT_UNREADABLE;
	return PBP_RT_KNOWN | (initialized ? PBP_RT_INITIALIZED : 0) | (finalizing ? PBP_RT_FINALIZING : 0);
}

/* The same, of the process with host tgid tgid (a sample without Python frames). */
static __always_inline __u8 runtime_phase(__u32 tgid)
{
	const struct pbp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
	return proc ? runtime_phase_of(proc) : 0;
}

#define PBP_PF_EXITING 0x00000004 /* include/linux/sched.h: getting shut down */

/* Is the current thread in the kernel's exit path (do_exit has begun)? */
static __always_inline int current_exiting(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	return (BPF_CORE_READ(t, flags) & PBP_PF_EXITING) != 0;
}

/* The record of sample si, of kind (si's, given as a constant where the caller knows it: the
 * verifier then leaves out the other kind's paths). wake: the consumer must see this record now
 * (a new stack: its code objects may be short-lived, e.g. module bodies, so symbolize before they
 * are freed). Other samples are batched until wakeup_bytes are queued; the consumer also drains
 * on a timer. */
static __always_inline int emit_kind(const struct sample_info *si, __u16 kind, __u64 stack_id, __u32 depth,
				     __u32 flags, __u32 reason, int wake)
{
	struct pbp_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		stat_add(PBP_STAT_RINGBUF_DROP, 1);
		return 0;
	}
	e->ts_ns = si->now;
	e->type = PBP_EV_SAMPLE;
	e->pid = si->tgid;
	e->tid = si->tid;
	e->cpu = bpf_get_smp_processor_id();
	e->stack_id = stack_id;
	e->flags = flags | si->flags;
	e->reason = reason;
	e->depth = depth;
	e->kind = kind;
	e->ppid = 0;
	e->gil = si->gil;
	e->wait = si->wait;
	e->runtime = si->runtime;
	e->_pad2 = 0;
	if (kind == PBP_KIND_CPU && (reason == PBP_ERR_NO_FRAME || reason == PBP_ERR_NO_INTERPRETER ||
					 reason == PBP_ERR_NO_TSTATE))
		e->runtime = runtime_phase(si->tgid);
	if (kind == PBP_KIND_CPU && reason && !stack_id && current_exiting())
		e->runtime |= PBP_RT_EXITING;
	e->weight_ns = si->period;
	e->cpu_clock_ns = si->clock;
	e->async_task = si->async_task;
	if (!wake)
		wake = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > wakeup_bytes;
	bpf_ringbuf_submit(e, wake ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	stat_add(PBP_STAT_EMITTED, 1);
	if (reason)
		stat_add(PBP_STAT_REASON_BASE + reason, 1);
	/* a perf event's cost (pbp_event's ts_ns is when it began); an off-CPU record's ts_ns is
	 * its interval's end, which can be well before now (offcpu_switch_out) */
	if (kind == PBP_KIND_CPU)
		stat_add(PBP_STAT_SAMPLE_NS, bpf_ktime_get_ns() - si->now);
	return 0;
}

/* The record of sample si, of the kind si says. */
static __always_inline int emit(const struct sample_info *si, __u64 stack_id, __u32 depth, __u32 flags,
				__u32 reason, int wake)
{
	return emit_kind(si, si->kind, stack_id, depth, flags, reason, wake);
}

/* The end of a walk: an on-CPU sample is emitted; an off-CPU switch-out's walk (kind
 * PBP_KIND_OFF_CPU) is kept in the thread's offcpu entry, and emitted with the interval at the
 * thread's switch-in (offcpu.bpf.h). */
static __always_inline int walk_done(const struct sample_info *si, __u64 stack_id, __u32 depth,
				     __u32 flags, __u32 reason, int wake)
{
	if (si->kind != PBP_KIND_OFF_CPU)
		return emit(si, stack_id, depth, flags, reason, wake);
	__u32 tid = si->tid;
	struct pbp_offcpu *e = offcpu_entry(tid);
	if (!e)
		return 0;
	e->stack_id = stack_id;
	e->depth = depth;
	e->stack_flags = flags;
	e->reason = reason;
	e->fresh = 0;
	if (e->walk_slot < 2) {
		struct pbp_offcpu_seen *seen = &e->seen[e->walk_slot & 1];
		seen->stack_id = stack_id;
		seen->depth = depth;
		seen->stack_flags = flags;
		seen->reason = reason;
	}
	if (wake) { /* the interval's record may come long after: have the stack read now */
		struct pbp_event *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
		if (!r) {
			e->fresh = 1; /* then its record wakes the consumer */
			stat_add(PBP_STAT_EVENT_DROP, 1);
			return 0;
		}
		__builtin_memset(r, 0, sizeof(*r));
		r->ts_ns = si->now;
		r->type = PBP_EV_STACK;
		r->pid = si->tgid;
		r->tid = tid;
		r->stack_id = stack_id;
		r->depth = depth;
		r->cpu = bpf_get_smp_processor_id();
		bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	}
	return 0;
}

/* A new stack wakes the consumer at once only if it holds a code object the consumer has not
 * been shown yet (it may be short-lived: a module body, exec'd code), or if this CPU has
 * stored FRESH_UNWOKEN new stacks since it last woke it (it reads each from the LRU stacks
 * map, which must not evict one first). A new stack of known code objects waits for the next
 * batch: its names are known, and its lines come from line tables read before. "Shown" is a
 * per-CPU set of (process, code object, checksum) from the new stacks stored here. A code object
 * new to it has its identity captured then, unless it was before (code_capture.bpf.h). Without
 * bpf_loop (5.8 .. 5.16) every new stack wakes the consumer, and the capture goes on in
 * capture_nolp programs (tail calls, CAPTURE_NOLP_CHUNK frames per run, innermost first: the
 * newest code is nearest the leaf) before the record is emitted; the walk's tail calls and
 * these share the kernel's limit of 33 runs, so a stack too deep for both has its outer frames'
 * code objects read live (stat CODE_DROP). */
#define FRESH_UNWOKEN 8
#define CAPTURE_NOLP_CHUNK 8

struct shown_walk {
	struct shown_set *shown;
	struct scratch *s;
	const struct pbp_proc *proc; /* the identity capture's offsets (0: no capture) */
	__u32 depth, tgid, news;
};

/* Frame i (< sw->depth) of the new stack: into this CPU's shown set, and captured if new to it. */
static __always_inline void shown_frame(struct shown_walk *sw, __u32 i)
{
	const struct pbp_frame *f = &sw->s->stack.frames[i & (PBP_MAX_DEPTH - 1)];
	__u64 key = (f->code ^ ((__u64)f->csum << 20) ^ ((__u64)sw->tgid << 44)) | 1;
	__u32 set = (__u32)((key * 0x9E3779B97F4A7C15ULL) >> 40) & (SHOWN_SLOTS - 2);
	__u64 *a = &sw->shown->key[set], *b = &sw->shown->key[set + 1];
	if (*a == key || *b == key)
		return;
	*b = *a; /* the older one goes */
	*a = key;
	sw->news = 1;
	/* New to this CPU's set: captured unless it was before (from any CPU). */
	if (sw->proc)
		code_capture(sw->proc, sw->tgid, sw->s->cur.tid, f, sw->s->cur.now);
}

static long shown_walk_cb(__u32 i, void *ctx)
{
	struct shown_walk *sw = ctx;
	if (i >= sw->depth)
		return 1;
	shown_frame(sw, i);
	return 0;
}

/* One run of the capture without bpf_loop (the body of both capture_nolp programs): frames
 * s->capture_next .. + CAPTURE_NOLP_CHUNK of the new stack in s->walk, then a tail call to the
 * next run through progs (index 1), or the sample's record once all are done (or no tail call
 * is left). */
static __always_inline int capture_nolp_chunk(void *ctx, void *progs)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return 0;
	const struct walk_state *st = &s->walk;
	struct shown_walk sw = {};
	sw.shown = bpf_map_lookup_elem(&shown_map, &zero);
	sw.s = s;
	sw.depth = st->depth;
	sw.tgid = s->cur.tgid;
	sw.proc = bpf_map_lookup_elem(&procs, &sw.tgid);
	/* masked where it is loaded: clang derives the frames' offsets from it before the checks */
	__u32 first = s->capture_next & (PBP_MAX_DEPTH - 1);
	int done = !sw.shown || !sw.proc;
	for (int k = 0; k < CAPTURE_NOLP_CHUNK && !done; k++) {
		__u32 i = first + k;
		if (i >= sw.depth || i >= PBP_MAX_DEPTH) {
			done = 1;
			break;
		}
		shown_frame(&sw, i);
	}
	if (!done && first + CAPTURE_NOLP_CHUNK < sw.depth) {
		s->capture_next = first + CAPTURE_NOLP_CHUNK;
		bpf_tail_call(ctx, progs, 1);
		stat_add(PBP_STAT_CODE_DROP, 1); /* out of tail calls: the rest are read live */
	}
	return walk_done(&s->cur, st->hash ? st->hash : 1, st->depth, st->flags, st->reason, 1);
}

/* Store the walked stack (unless known) and emit the sample (s->cur). use_loop: bpf_loop is
 * there (without it every new stack wakes the consumer, and a new stack's capture goes on in
 * capture_nolp, index 1 of progs, which emits the record; st must then be s->walk). */
static __always_inline int finish_walk(void *ctx, void *progs, struct scratch *s, const struct walk_state *st,
				       __u64 t, int use_loop)
{
	const struct sample_info *si = &s->cur;
	__u32 tgid = si->tgid;
	if (s->cframe_check.stale) /* what was walked is stale: no stack */
		return walk_done(si, 0, 0, 0, PBP_ERR_CFRAME_STALE, 0);
	if (st->flags & PBP_F_TRUNCATED)
		stat_add(PBP_STAT_TRUNCATED, 1);
	if (!st->depth)
		return walk_done(si, 0, 0, st->flags, st->reason ? st->reason : PBP_ERR_NO_FRAME, 0);

	__u64 id = st->hash ? st->hash : 1;
	int fresh = 0;
	__u64 *seen = &s->seen[id & (SEEN - 1)];
	if (*seen != id && !bpf_map_lookup_elem(&stacks, &id)) {
		s->stack.depth = st->depth;
		s->stack.pid = tgid;
		if (bpf_map_update_elem(&stacks, &id, &s->stack, BPF_NOEXIST) == 0) {
			stat_add(PBP_STAT_STACK_NEW, 1);
			fresh = 1;
		} else if (!bpf_map_lookup_elem(&stacks, &id)) {
			return walk_done(si, 0, st->depth, st->flags, PBP_ERR_STACK_MAP, 0);
		}
	}
	*seen = id;
	int wake = fresh;
	if (fresh && use_loop) {
		__u32 zero = 0;
		struct shown_walk sw = {};
		sw.shown = bpf_map_lookup_elem(&shown_map, &zero);
		sw.s = s;
		sw.depth = st->depth;
		sw.tgid = tgid;
		sw.proc = bpf_map_lookup_elem(&procs, &tgid);
		if (sw.shown) {
			bpf_loop(PBP_MAX_DEPTH, shown_walk_cb, &sw, 0);
			wake = sw.news || ++sw.shown->unwoken >= FRESH_UNWOKEN;
			if (wake)
				sw.shown->unwoken = 0;
			else
				stat_add(PBP_STAT_FRESH_UNWOKEN, 1);
		}
	}
	if (fresh && !use_loop) {
		const struct pbp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
		if (proc && proc->off.code_ident_len) {
			s->capture_next = 0;
			bpf_tail_call(ctx, progs, 1);
			stat_add(PBP_STAT_CODE_DROP, 1); /* out of tail calls: read live */
		}
	}
	if (t)
		time_section(PBP_STAT_T_STACKMAP, t);
	return walk_done(si, id, st->depth, st->flags, st->reason, wake);
}

static __always_inline void emit_proc_event(__u32 type, __u32 tgid, __u32 ppid, __u16 flags)
{
	struct pbp_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		stat_add(PBP_STAT_EVENT_DROP, 1);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts_ns = bpf_ktime_get_ns();
	e->type = type;
	e->pid = tgid;
	e->tid = tgid;
	e->ppid = ppid;
	e->flags = flags;
	e->cpu = bpf_get_smp_processor_id();
	/* wake the consumer at once: discovery latency matters more than batching */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* A thread of a profiled process exits (current is that thread): its last name. */
static __always_inline void emit_thread_exit(__u32 tgid, __u32 tid)
{
	struct pbp_thread_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		stat_add(PBP_STAT_EVENT_DROP, 1);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts_ns = bpf_ktime_get_ns();
	e->type = PBP_EV_THREAD_EXIT;
	e->pid = tgid;
	e->tid = tid;
	e->cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

#endif /* __PYBPFPROF_EMIT_BPF_H__ */
