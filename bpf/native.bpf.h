/* SPDX-License-Identifier: GPL-2.0 */
/* --native: the machine state of an on-CPU sample, for userspace to unwind (as perf's
 * --call-graph dwarf does): the user registers, a copy of the user stack from sp upwards and,
 * when the sample hit the kernel, the kernel stack. Sent as its own variable-length record just
 * before the sample's record, so samples of other processes keep their 72-byte record. */
#ifndef __PYBPFPROF_NATIVE_BPF_H__
#define __PYBPFPROF_NATIVE_BPF_H__

#include "native_stack.bpf.h"
#include "util.bpf.h"

_Static_assert(__builtin_offsetof(struct pbp_native_event, ustack) == PBP_NATIVE_HEADER_BYTES,
	       "the header copied ahead of a whole stack copy is everything before ustack");

/* Bytes copied above the main thread's initial sp (argc, argv, envp and the auxiliary vector:
 * always there, written by exec). */
#define NATIVE_ABOVE_START 256

/* Send n, its stack copy ustack_len bytes long. 1 when sent. */
static __always_inline int native_send(struct pbp_native_event *n)
{
	/* read back from the record (volatile): clang otherwise derives len from how the caller
	 * computed ustack_len, past the bounds below, which 6.1's verifier then cannot see */
	__u32 len = PBP_NATIVE_HEADER_BYTES + (*(volatile __u32 *)&n->ustack_len & (PBP_NATIVE_USTACK * 2 - 1));
	if (len > sizeof(*n))
		len = sizeof(*n);
	if (len < PBP_NATIVE_HEADER_BYTES)
		len = PBP_NATIVE_HEADER_BYTES;
	if (bpf_ringbuf_output(&events, n, len, BPF_RB_NO_WAKEUP)) {
		stat_add(PBP_STAT_NATIVE_DROP, 1);
		return 0;
	}
	stat_add(PBP_STAT_NATIVE_BYTES, len);
	return 1;
}

/* Copy the user stack from n->sp into n (or straight into its record) and send it; n's header is
 * filled. 1 when the record was sent. */
static __always_inline int native_copy_and_send(struct pbp_native_event *n)
{
	if (!n->sp) {
		n->flags |= PBP_NATIVE_F_NO_REGS;
	} else {
		/* The main thread's frames end at the process's initial sp (mm->start_stack, where
		 * argc, argv and the auxiliary vector are): above them the kernel leaves a random gap
		 * (ASLR) whose pages nothing writes, so a read past it fails (a perf event cannot
		 * fault a page in) and was redone page by page. Near it, the copy ends there (plus
		 * a little of what is above: _start's frame), in one read. */
		__u64 top = BPF_CORE_READ(bpf_get_current_task_btf(), mm, start_stack);
		if (top > n->sp && top - n->sp + NATIVE_ABOVE_START < PBP_NATIVE_USTACK) {
			__u32 want = (__u32)(top - n->sp + NATIVE_ABOVE_START) & (PBP_NATIVE_USTACK - 1);
			if (want && !bpf_probe_read_user(n->ustack, want, (const void *)n->sp)) {
				n->ustack_len = want;
				n->flags |= PBP_NATIVE_F_SHORT;
				return native_send(n);
			}
		}
		/* A whole copy (most samples) goes straight into a record of the full size, copied
		 * once: through the scratch value and bpf_ringbuf_output it was copied twice (17 KB
		 * more per sample). A stack whose mapping ends sooner is copied page by page into
		 * the scratch value, and sent with its length alone. */
		struct pbp_native_event *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
		if (r) {
			if (!bpf_probe_read_user(r->ustack, PBP_NATIVE_USTACK, (const void *)n->sp)) {
				n->ustack_len = PBP_NATIVE_USTACK;
				__builtin_memcpy(r, n, PBP_NATIVE_HEADER_BYTES);
				bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
				stat_add(PBP_STAT_NATIVE_BYTES, sizeof(*r));
				return 1;
			}
			bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
		}
		n->ustack_len = native_copy_stack_pages(n, n->sp);
		if (n->ustack_len < PBP_NATIVE_USTACK)
			n->flags |= PBP_NATIVE_F_SHORT;
	}
	return native_send(n);
}

/* An off-CPU capture (n's header filled): up to PBP_NATIVE_USTACK_OFFCPU bytes of the user
 * stack, read straight into a record of that size, since it is taken once per place a thread
 * blocks at; a main thread's copy ends above its initial sp, as native_copy_and_send's. One
 * that fits in PBP_NATIVE_USTACK, or whose wide read fails, is native_copy_and_send's. */
static __always_inline int native_copy_and_send_wide(struct pbp_native_event *n)
{
	__u32 want = PBP_NATIVE_USTACK_OFFCPU;
	__u64 top = BPF_CORE_READ(bpf_get_current_task_btf(), mm, start_stack);
	if (top > n->sp && top - n->sp + NATIVE_ABOVE_START < PBP_NATIVE_USTACK_OFFCPU)
		want = (__u32)(top - n->sp + NATIVE_ABOVE_START);
	struct pbp_native_event *r = 0;
	if (n->sp && want > PBP_NATIVE_USTACK)
		r = bpf_ringbuf_reserve(&events, PBP_NATIVE_HEADER_BYTES + PBP_NATIVE_USTACK_OFFCPU, 0);
	if (r) {
		/* bounded again where the verifier sees it (6.1's does not follow the branches above) */
		__u32 len = *(volatile __u32 *)&want;
		if (len > PBP_NATIVE_USTACK_OFFCPU)
			len = PBP_NATIVE_USTACK_OFFCPU;
		__u32 got = 0;
		if (len && !bpf_probe_read_user(r->ustack, len, (const void *)n->sp)) {
			got = len;
		} else {
			/* Page by page: the stack's mapping ends sooner (a thread's near its top), or
			 * it has pages never written (large locals: select.select's 49 KB), which a
			 * read here cannot fault in. Those come as zeros (a failed read zeroes its
			 * destination), as they would read; got: the end of the last page read. */
			__u32 at = PBP_NATIVE_PAGE - (__u32)(n->sp & (PBP_NATIVE_PAGE - 1));
			if (!bpf_probe_read_user(r->ustack, at, (const void *)n->sp))
				got = at;
			for (int i = 0; got && i < PBP_NATIVE_USTACK_OFFCPU / PBP_NATIVE_PAGE - 1; i++) {
				if (at >= len || at > PBP_NATIVE_USTACK_OFFCPU - PBP_NATIVE_PAGE)
					break;
				if (!bpf_probe_read_user(r->ustack + (at & (PBP_NATIVE_USTACK_OFFCPU - 1)),
							 PBP_NATIVE_PAGE, (const void *)(n->sp + at)))
					got = at + PBP_NATIVE_PAGE;
				at += PBP_NATIVE_PAGE;
			}
		}
		if (got > PBP_NATIVE_USTACK) {
			n->ustack_len = got;
			if (got < PBP_NATIVE_USTACK_OFFCPU)
				n->flags |= PBP_NATIVE_F_SHORT;
			__builtin_memcpy(r, n, PBP_NATIVE_HEADER_BYTES);
			bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
			stat_add(PBP_STAT_NATIVE_BYTES, PBP_NATIVE_HEADER_BYTES + PBP_NATIVE_USTACK_OFFCPU);
			return 1;
		}
		bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
	}
	return native_copy_and_send(n);
}

/* n's header for a record of thread tid of tgid at ts: no registers, no stacks yet. */
static __always_inline struct pbp_native_event *native_header(struct pbp_native_event *n, __u64 ts, __u32 tgid,
								   __u32 tid)
{
	n->ts_ns = ts;
	n->type = PBP_EV_NATIVE;
	n->pid = tgid;
	n->tid = tid;
	n->cpu = bpf_get_smp_processor_id();
	n->flags = 0;
	n->kdepth = 0;
	n->ustack_len = 0;
	n->ip = n->sp = n->bp = 0;
	return n;
}

/* The registers saved at the current task's kernel entry: its user state. */
static __always_inline void native_user_regs(struct pbp_native_event *n)
{
	struct pt_regs *ur = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (ur) {
		n->ip = BPF_CORE_READ(ur, ip);
		n->sp = BPF_CORE_READ(ur, sp);
		n->bp = BPF_CORE_READ(ur, bp);
	}
}

/* What native_user_and_send does (its mode). */
#define NATIVE_SEND_NONE 0     /* nothing: the caller wants no capture */
#define NATIVE_SEND_CPU 1      /* an on-CPU sample whose user registers are in the header */
#define NATIVE_SEND_CPU_REGS 2 /* an on-CPU sample that hit the kernel: the user registers too */
#define NATIVE_SEND_OFFCPU 3   /* an off-CPU capture: the user registers, and the wide copy */

/* The user part of a capture whose header (and kernel stack) the caller filled in the per-CPU
 * scratch record: the user registers at the task's kernel entry, then the copy of the user stack
 * and the send, as mode says. Returns ts when the record was sent, else 0.
 *
 * A global function: the verifier checks it once, on its own, not at each call site in each
 * caller's state; and the scheduler program calls it whether it wants a capture or not (mode
 * NONE), so that what follows (the walk) is explored once, not once per outcome. With the capture
 * inlined at its three sites and called only when wanted, the scheduler program with --native
 * verified at 636k instructions on 6.18, 506k with this (tools/vmtest --kernel 6.12: over the
 * verifier's limit of 1M, E2BIG, before the wait reason was read back from the entry; see
 * offcpu_switch_out). Its arguments are scalars, as a global function's must be on every kernel
 * with bpf_loop (5.17+); programs without bpf_loop never call it (5.10 would verify it, and it
 * uses bpf_task_pt_regs, 5.15+). */
__noinline __u64 native_user_and_send(int mode, __u64 ts)
{
	__u32 zero = 0;
	struct native_scratch *ns = mode != NATIVE_SEND_NONE ? bpf_map_lookup_elem(&native_scratch, &zero) : 0;
	if (!ns)
		return 0;
	struct pbp_native_event *n = &ns->ev;
	if (mode != NATIVE_SEND_CPU)
		native_user_regs(n);
	int sent = mode == NATIVE_SEND_OFFCPU ? native_copy_and_send_wide(n) : native_copy_and_send(n);
	return sent ? ts : 0;
}

/* --mode wall --native: the machine state of a thread of a PBP_PROC_NATIVE process as it blocks
 * (the current task, at the switch-out whose walk follows; ctx: sched_switch's, with bpf_loop),
 * when wanted: the kernel stack down to the scheduler, and the user registers and stack at its
 * kernel entry. Sent with PBP_NATIVE_F_OFFCPU and ts_ns = now; the intervals it stands for carry
 * now in their records (pbp_event.cpu_clock_ns). Returns now when sent, else 0. */
static __always_inline __u64 native_capture_switch(void *ctx, int use_loop, int wanted, __u32 tgid, __u32 tid,
						   __u64 now)
{
	/* Without bpf_loop (a constant: its programs reference no global function), or without
	 * --native (a constant to the verifier): nothing. */
	if (!use_loop || !native_capture)
		return 0;
	__u32 zero = 0;
	struct native_scratch *ns = wanted ? bpf_map_lookup_elem(&native_scratch, &zero) : 0;
	if (ns) {
		struct pbp_native_event *n = native_header(&ns->ev, now, tgid, tid);
		n->flags = PBP_NATIVE_F_KERNEL | PBP_NATIVE_F_OFFCPU;
		long kb = bpf_get_stack(ctx, n->kstack, sizeof(n->kstack), 0);
		if (kb > 0)
			n->kdepth = (__u16)(kb / 8);
	}
	return native_user_and_send(ns ? NATIVE_SEND_OFFCPU : NATIVE_SEND_NONE, now);
}

/* Send the machine state of the sample being made (s->cur) of a PBP_PROC_NATIVE process. Its
 * record goes first; the sample's follows from this CPU with the same ts_ns and tid. */
static __always_inline void native_capture_sample(struct bpf_perf_event_data *ctx,
						  const struct sample_info *si)
{
	__u32 zero = 0;
	struct native_scratch *ns = bpf_map_lookup_elem(&native_scratch, &zero);
	if (!ns)
		return;
	struct pbp_native_event *n = native_header(&ns->ev, si->now, si->tgid, si->tid);

	/* The interrupted registers are the user's when the sample hit user mode; else the user's
	 * are those saved at kernel entry, and the kernel stack is what ran. */
	/* cs is a 16-bit field, but the context allows only whole-word loads of the registers */
	__u64 cs = *(__u64 *)((char *)&ctx->regs + __builtin_offsetof(struct pt_regs, cs));
	int mode = NATIVE_SEND_CPU;
	if (cs & 3) {
		n->ip = ctx->regs.ip;
		n->sp = ctx->regs.sp;
		n->bp = ctx->regs.bp;
	} else {
		n->flags |= PBP_NATIVE_F_KERNEL;
		long kb = bpf_get_stack(ctx, n->kstack, sizeof(n->kstack), 0);
		if (kb > 0)
			n->kdepth = (__u16)(kb / 8);
		mode = NATIVE_SEND_CPU_REGS;
	}
	native_user_and_send(mode, 0);
}

#endif /* __PYBPFPROF_NATIVE_BPF_H__ */
