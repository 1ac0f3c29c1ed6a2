/* SPDX-License-Identifier: GPL-2.0 */
/* --mode wall: a target thread's off-CPU intervals, from sched_switch alone (tracepoints are
 * all some kernels have: no kprobes, no fentry).
 *
 * Each thread of a wall target has an entry in the offcpu_slots table (offcpu_table.bpf.h: made by
 * userspace when the process becomes a target, by the fork tracepoint for its new threads). At
 * each context switch:
 * - next side: if next has an entry and an interval pending (it was switched out while
 *   tracked), the interval ends now. One of min_block_ns or longer is emitted as an OFF_CPU
 *   record weighing it, with the stack kept at its switch-out; a shorter one is added to the
 *   thread's sum for its wait reason, and a sum that reaches min_block_ns is emitted as one
 *   PBP_F_AGGREGATE record on the last walked stack (never dropped). No user memory is read
 *   here: next is not the current task.
 * - prev side (prev is the current task: its memory is readable, and its stack is the one it
 *   blocks with): the switch-out time and the wait reason are kept, and the stack.
 *
 * Bounding the cost of the prev side (a switch-heavy target switches out tens of thousands of
 * times a second, mostly from the same place):
 * - Identity check. Before walking, read the thread state (the thread-state cache makes that
 *   one read), the leaf frame (address, code object, instruction word) and its caller (address,
 *   instruction word), and compare them with those two of the thread's last walks started from
 *   (seen[]: a thread that alternates between two places, such as a write that wakes a peer
 *   and a read, reuses both): equal, that walk's stack id is reused and nothing is walked.
 *   Each probe read of user memory costs 150-250 ns here, most of the check, so the leaf and its
 *   caller come from one read where they can (offcpu_frame_ids), and 3.11/3.12's cframe check
 *   (one more read) is made only before a walk. Limit: frames below the caller are not
 *   compared, so a thread that blocks at the same instruction of the same two innermost frames
 *   (same frame addresses too) under different outer frames gets the stack of the first of
 *   them. With 3.11+'s frames in a per-thread stack, the same addresses under different callers
 *   happen only when both paths have the same depth, and both innermost frames' instructions
 *   match; before 3.11 frame objects are reused from free lists, and the code object compared
 *   keeps a reused frame of another function from matching.
 * - Place check. The identity check's first reads find the thread state and its current frame
 *   (the thread-state cache's lookup and a read, and 3.11/3.12's cframe read). A switch-out from
 *   the place in the C code one of seen[] was last checked at (the user ip and sp saved at the
 *   system call's entry: the same C call chain down from the eval loop) skips them, and the
 *   lookup of the process too (what it needs of it is kept in the entry, pbp_offcpu.pc): it reads
 *   that slot's leaf and caller where they were, and compares them as the identity check does.
 *   Python frames live above the place (3.11+: a Python call does not recurse in C, so the same
 *   place is the same eval loop call, whatever Python function runs in it), which is why the
 *   leaf and caller are still read and compared. What it cannot see: a stack that changed to
 *   one whose leaf and caller are where the old ones were, unchanged, yet are not current (a
 *   popped frame's memory, with the same caller, at the same instruction), or a thread state
 *   other than the slot's at the same place with the same frames. A preempted thread's GIL
 *   state (does its runnable interval hold the GIL) is read at the first such switch-out after
 *   a whole check and kept in the slot (preempt_gil). Every
 *   OFFCPU_RECHECK-th switch-out from a place makes the whole check. A switch-out outside a
 *   system call (preempted in user code, where the eval loop's registers are the same under
 *   any Python function) has no place; nor has any on kernels without bpf_task_pt_regs (5.15+).
 * - Walk budget: at most one walk per thread per offcpu_walk_budget_ns (100 us) of wall time
 *   on average, in bursts of up to 8 (OFFCPU_WALK_BURST + 1: a thread that writes its output
 *   and then blocks for a long time somewhere else, within microseconds, has both walked). A
 *   switch-out over the budget reuses the last walked stack, and its interval's record is
 *   flagged PBP_F_AGGREGATE (an approximation, like an aggregate: its stack is one the thread
 *   blocked with shortly before). Its weight and wait reason are exact. Only a thread that
 *   blocks at a new place more than 10,000 times a second for long is over it.
 * Non-targets pay one failed lookup per switch (an array lookup, see offcpu_table.bpf.h): the next
 * side looks next up in the table, and remembers per CPU whether the task now running is a
 * target (offcpu_cpu_map), so the prev
 * side of the next switch on that CPU needs no lookup. A CPU looks prev up once more after a
 * process became a target (offcpu_epoch): its threads may be running already; and when prev is
 * not the task its last switch brought on (offcpu_cpu.last_in: a switch-in never reported). */
#ifndef __PYBPFPROF_OFFCPU_BPF_H__
#define __PYBPFPROF_OFFCPU_BPF_H__

#include <bpf/bpf_core_read.h>

#include "sample.bpf.h"
#include "native.bpf.h"
#include "offcpu_table.bpf.h"

/* include/linux/sched.h, the same on every supported kernel */
#define PBP_TASK_UNINTERRUPTIBLE 0x0002
#define PBP_TASK_DEAD 0x0080

/* Walks a thread may make in a burst beyond its budget (see the top of this file). */
#define OFFCPU_WALK_BURST 7
/* Every this many switch-outs from a place, one makes the whole identity check (a power of 2). */
#define OFFCPU_RECHECK 64

/* task_struct.state before 5.14 (renamed __state) */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

/* btf: t is a trusted BTF pointer (tp_btf), read with a plain load instead of a probe read. */
static __always_inline __u32 task_state(struct task_struct *t, int btf)
{
	if (bpf_core_field_exists(t->__state))
		return btf ? t->__state : BPF_CORE_READ(t, __state);
	return (__u32)BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

/* The gil field of an off-CPU record: WAITING when the thread waits for the GIL; otherwise NA
 * where the GIL is not known (a free-threaded build, a 3.6 without its symbols), else NEITHER
 * (a blocked thread that does not wait for the GIL is taken not to hold it; a C extension
 * blocking with the GIL held is the exception this misses). */
static __always_inline __u8 offcpu_gil(__u8 gil_where, __u8 wait)
{
	if (wait == PBP_WAIT_GIL)
		return PBP_GIL_WAITING;
	return gil_where == PBP_GIL_WHERE_NONE ? PBP_GIL_NA : PBP_GIL_NEITHER;
}

/* e->pc from the process's entry (see struct pbp_offcpu_proc), as of epoch. */
static __always_inline void offcpu_keep_proc(struct pbp_offcpu *e, const struct pbp_proc *proc, __u32 epoch)
{
	e->pc.frame_previous = proc->off.frame_previous;
	e->pc.frame_code = proc->off.frame_code;
	e->pc.frame_instr = proc->off.frame_instr;
	e->pc.frame_read_len = proc->off.frame_read_len;
	e->pc.tstate_async_task = proc->off.tstate_async_task;
	e->pc.frame_kind = proc->off.frame_kind;
	e->pc.gil_where = proc->off.gil_where;
	e->pc.native = (proc->flags & PBP_PROC_NATIVE) != 0;
	e->pc.epoch = epoch;
}

/* The thread's process's entry, when it is still a wall target; else NULL. */
static __always_inline const struct pbp_proc *offcpu_proc(__u32 tgid)
{
	const struct pbp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
	return proc && (proc->flags & PBP_PROC_WALL) ? proc : NULL;
}

/* The CPU time task t has run (se.sum_exec_runtime: brought up to date before sched_switch). */
static __always_inline __u64 task_exec_ns(struct task_struct *t, int btf)
{
	return btf ? t->se.sum_exec_runtime : BPF_CORE_READ(t, se.sum_exec_runtime);
}

/* The record of an interval (or a sum) of thread tid, on the stack kept in its entry. */
static __always_inline void offcpu_emit(struct pbp_offcpu *e, __u32 tid, __u64 now, __u64 weight,
					__u8 wait, __u8 gil, __u16 flags)
{
	/* In the scratch map, not on the stack: the scheduler program inlines this at three
	 * places, and 5.10-6.1 count its stack and its callbacks' against 512 bytes together. */
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return;
	struct sample_info *si = &s->off_si;
	si->now = now;
	si->period = weight;
	/* --native: the machine state of one interval (a sum of several has none) */
	si->clock = (flags & PBP_F_AGGREGATE) ? 0 : e->native_ts;
	si->tgid = e->tgid;
	si->tid = tid;
	si->flags = flags;
	si->gil = gil;
	si->wait = wait;
	si->async_task = e->async_task;
	si->runtime = 0;
	/* the kind a constant: the verifier leaves out emit's paths for on-CPU samples */
	emit_kind(si, PBP_KIND_OFF_CPU, e->stack_id, e->depth, e->stack_flags, e->reason, e->fresh);
	e->fresh = 0;
}

/* A new thread of a wall target: tracked from its first switch-in (fork tracepoint). */
static __always_inline void offcpu_new_thread(__u32 tgid, __u32 tid)
{
	const struct pbp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
	if (!proc || !(proc->flags & PBP_PROC_WALL))
		return;
	offcpu_make(tid, tgid);
}

/* The place the current task blocks at: the user ip and sp saved at its system call's entry
 * (blocked in it, or preempted on its way out). A system call's entry leaves its number in
 * orig_ax and the return address in cx as well as in ip (what the kernel itself checks before
 * it returns with sysret); an interrupt leaves a negative orig_ax, an exception the user's cx.
 * 0 when it is not in a system call (its registers are those of the code it interrupted) or
 * where the kernel has no bpf_task_pt_regs (5.15+). regs: current_user_regs(). */
static __always_inline void offcpu_place(struct pt_regs *regs, __u64 *ip, __u64 *sp)
{
	*ip = 0;
	*sp = 0;
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return;
	if (!regs || (long)regs->orig_ax < 0 || regs->cx != regs->ip)
		return;
	*ip = regs->ip;
	*sp = regs->sp;
}

/* Whether prev (the current task, thread of tgid, entry e) waits for the GIL (gil_waiting_at_switch):
 * its process's entry looked up only for a wait in a futex of a process whose GIL is known. */
static __always_inline int offcpu_gil_wait(const struct pbp_offcpu *e, __u32 tgid, struct task_struct *prev,
					   struct pt_regs *regs)
{
	if (e->pc.gil_where == PBP_GIL_WHERE_NONE || !gil_futex_possible(regs))
		return 0;
	const struct pbp_proc *proc = offcpu_proc(tgid);
	return proc && gil_waiting_at_switch(proc, prev, regs);
}

/* --native for this thread's process's off-CPU intervals (bpf_loop kernels only, as on CPU). */
static __always_inline int offcpu_native_wanted(const struct pbp_offcpu *e, int use_loop)
{
	return native_capture && use_loop && e->pc.native;
}

/* --async: the thread's running asyncio task, with the kept offset. */
static __always_inline __u64 offcpu_async_task(const struct pbp_offcpu *e, __u64 ts)
{
	return async_task_at(e->pc.tstate_async_task, ts);
}

/* next side: e is the entry of tid, switched in now. */
static __always_inline void offcpu_switch_in(struct pbp_offcpu *e, __u32 tid, __u64 now)
{
	__u64 out = e->out_ns;
	if (!out)
		return;
	e->out_ns = 0;
	__u64 dt = now > out ? now - out : 0;
	__u32 wait = e->wait;
	if (wait == PBP_WAIT_NONE || wait >= PBP_WAIT_COUNT)
		return;
	__u16 flags = e->approx ? PBP_F_AGGREGATE : 0;
	__u8 gil = e->gil;
	__u64 min_block = min_block_ns;
	if (dt < min_block) {
		__u64 sum = e->sum_ns[wait] + dt;
		if (sum < min_block) {
			e->sum_ns[wait] = sum;
			return;
		}
		e->sum_ns[wait] = 0;
		dt = sum;
		flags = PBP_F_AGGREGATE;
		/* A sum of short intervals: whether the GIL was held in each is not kept. */
		if (gil == PBP_GIL_HELD)
			gil = PBP_GIL_NEITHER;
	}
	offcpu_emit(e, tid, now, dt, wait, gil, flags);
}

/* pbp_offcpu_seen.preempt_gil from a whole check's e->gil: only a preempted thread's is read.
 * From the entry, not the switch-out's local wait reason: a constant the verifier would keep
 * apart (one state per reason) through the walk that follows. */
static __always_inline __u8 offcpu_preempt_gil(const struct pbp_offcpu *e)
{
	if (e->wait != PBP_WAIT_RUNNABLE)
		return 0;
	return (e->gil == PBP_GIL_HELD ? PBP_GIL_HELD : PBP_GIL_NEITHER) + 1;
}

/* The fields the identity check compares, from the frame window w. */
static __always_inline void offcpu_frame_fields(const struct pbp_offcpu_proc *off, const __u8 *w, __u64 *prev,
						__u64 *code, __u64 *instr)
{
	*prev = win_u64(w, off->frame_previous);
	*code = win_u64(w, off->frame_code);
	*instr = off->frame_kind == PBP_FRAME_OBJECT ? win_u32(w, off->frame_instr) : win_u64(w, off->frame_instr);
}

/* Bytes read below a 3.11+ leaf frame for the identity check, in the hope of its caller. */
#define OFFCPU_ID_READ 1024

/* The identity check's fields of the leaf frame at leaf and of its caller, in one probe read where
 * it can be (a probe read costs about 150-250 ns, most of the check): 3.11+ frames lie in a
 * per-thread data stack, the caller just below its callee, so a read of the OFFCPU_ID_READ bytes
 * up to the leaf's end (not below its page) holds both unless the caller has many locals or sits
 * in another chunk; then the caller is read on its own. The place check knows where the caller
 * was (caller_hint; 0: not known): the read starts there when that is within those bytes (a
 * read of 1 KiB costs about 20 ns more than one of a few hundred bytes). Frame objects (<= 3.10)
 * are scattered: two reads. Returns -1 when a frame is unreadable. */
static __always_inline int offcpu_frame_ids(const struct pbp_offcpu_proc *off, struct scratch *s, __u64 leaf,
					    __u64 caller_hint, __u64 *leaf_prev, __u64 *leaf_code,
					    __u64 *leaf_instr, __u64 *caller_instr)
{
	__u32 len = off->frame_read_len;
	if (len > PBP_WINDOW)
		len = PBP_WINDOW;
	if (len == 0)
		return -1;
	__u64 end = leaf + len;
	__u64 start = leaf;
	if (off->frame_kind != PBP_FRAME_OBJECT) {
		start = end - OFFCPU_ID_READ;
		if (caller_hint > start && caller_hint < leaf)
			start = caller_hint;
		if (start < (leaf & ~4095ULL))
			start = leaf & ~4095ULL;
	}
	/* 1 .. FRAME_CACHE, in a form the verifier can bound */
	__u32 n = (((__u32)(end - start) - 1) & (FRAME_CACHE - 1)) + 1;
	if (bpf_probe_read_user(s->frame_cache, n, (const void *)start))
		return -1;
	offcpu_frame_fields(off, s->frame_cache + ((leaf - start) & (FRAME_CACHE - 1)), leaf_prev, leaf_code,
			    leaf_instr);
	*caller_instr = 0;
	__u64 caller = *leaf_prev, caller_prev, caller_code;
	if (!caller)
		return 0;
	if (caller >= start && caller < leaf && caller + len <= end) {
		offcpu_frame_fields(off, s->frame_cache + ((caller - start) & (FRAME_CACHE - 1)), &caller_prev,
				    &caller_code, caller_instr);
		return 0;
	}
	if (bpf_probe_read_user(s->code_window, len, (const void *)caller))
		return -1;
	offcpu_frame_fields(off, s->code_window, &caller_prev, &caller_code, caller_instr);
	return 0;
}

/* prev side: the current task (pid_tgid), a tracked thread, is switched out now. Walks its stack
 * unless the identity check or the walk budget says not to; must come last in its program (the
 * walk without bpf_loop goes on through tail calls). */
static __always_inline int offcpu_switch_out(void *ctx, void *progs, int use_loop, int preempt,
					     struct task_struct *prev, __u64 pid_tgid, __u64 now)
{
	__u32 tid = (__u32)pid_tgid, tgid = pid_tgid >> 32;
	struct pbp_offcpu *e = offcpu_entry(tid);
	if (!e)
		return 0;
	/* The process's entry is looked up only when what the entry keeps of it is not current,
	 * and below where the switch-out needs more of it (a wait on a futex, a preempted thread's
	 * GIL, a walk), each time anew. */
	__u32 epoch = offcpu_proc_epoch;
	if (e->pc.epoch != epoch) {
		const struct pbp_proc *proc = offcpu_proc(tgid);
		if (!proc) {
			/* no longer a target (its entry left dormant by userspace, or made as it
			 * stopped being one): untracked from here */
			offcpu_free(tid, e);
			return 0;
		}
		offcpu_keep_proc(e, proc, epoch);
	}
	/* An interval still pending as the thread leaves the CPU: its switch-in was never
	 * reported (see offcpu_running), and no sample has ended it. It came on when it began
	 * running the CPU time it has used since that switch-out. */
	__u64 exec = task_exec_ns(prev, use_loop);
	if (e->out_ns) {
		__u64 ran = e->exec_ns && exec > e->exec_ns ? exec - e->exec_ns : 0;
		__u64 back = now > ran && now - ran > e->out_ns ? now - ran : now;
		stat_add(PBP_STAT_OFFCPU_UNSEEN_IN, 1);
		offcpu_switch_in(e, tid, back);
	}
	e->exec_ns = exec;
	__u32 state = task_state(prev, use_loop);
	if (state & PBP_TASK_DEAD) {
		/* The thread's last switch: what it summed is emitted now, on its last stack,
		 * and its entry freed. */
		for (__u32 w = 1; w < PBP_WAIT_COUNT; w++)
			if (e->sum_ns[w])
				offcpu_emit(e, tid, now, e->sum_ns[w], w, offcpu_gil(e->pc.gil_where, w), PBP_F_AGGREGATE);
		offcpu_free(tid, e);
		return 0;
	}
	/* The user registers, for the GIL wait check and the place (one helper call for both). */
	struct pt_regs *regs = current_user_regs(prev, use_loop);
	/* Preempted (or woken before it could sleep): still TASK_RUNNING, waiting for a CPU. One
	 * if-else chain: computed in two steps (a default, then the GIL, then I/O), the wait reason
	 * had the verifier explore the walk twice (942k instructions). And the reason is read back
	 * from the entry (READ_ONCE(e->wait)) where it is needed after this, not kept in a
	 * variable: a value the verifier knows, live across the thread-state search and the walk,
	 * had it explore them once per reason (6.18: 467k instructions, not 344k; 6.12's verifier:
	 * 862k, not 529k, and with --native over its limit of 1M, not 891k; 5.10's program without
	 * bpf_loop 386k, not 199k). */
	__u8 wait;
	if (preempt || state == 0)
		wait = PBP_WAIT_RUNNABLE;
	else if (offcpu_gil_wait(e, tgid, prev, regs))
		wait = PBP_WAIT_GIL;
	else if (state & PBP_TASK_UNINTERRUPTIBLE)
		wait = PBP_WAIT_IO;
	else
		wait = PBP_WAIT_SLEEP;
	e->tgid = tgid;
	e->wait = wait;
	e->gil = offcpu_gil(e->pc.gil_where, wait);
	e->out_ns = now;
	e->approx = 0;
	e->native_ts = 0;

	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return 0;
	struct sample_info *si = &s->cur;
	si->now = now;
	si->period = 0;
	si->clock = 0;
	si->tgid = tgid;
	si->tid = tid;
	si->kind = PBP_KIND_OFF_CPU; /* walk_done keeps the walk in the entry */
	si->flags = 0;
	si->gil = e->gil;
	si->wait = wait;
	si->async_task = 0;
	si->runtime = 0;
	e->async_task = 0;

	e->walk_slot = 2; /* a failure before the walk fills no seen[] slot */

	/* The place check (see the top of this file). Its fields and the identity check's are in
	 * the scratch map, not on the stack (see struct scratch). */
	offcpu_place(regs, &s->ids.uip, &s->ids.usp);
	if (s->ids.uip) {
		for (int k = 0; k < 2; k++) {
			struct pbp_offcpu_seen *seen = &e->seen[k];
			if (seen->uip != s->ids.uip || seen->usp != s->ids.usp)
				continue;
			if (!seen->leaf || !(seen->stack_id || seen->reason != PBP_OK) ||
			    ((seen->place_checks + 1) & (OFFCPU_RECHECK - 1)) == 0)
				break; /* the whole check */
			if (offcpu_frame_ids(&e->pc, s, seen->leaf, seen->caller, &s->ids.leaf_prev,
					     &s->ids.leaf_code, &s->ids.leaf_instr, &s->ids.caller_instr) ||
			    s->ids.leaf_code != seen->leaf_code || s->ids.leaf_instr != seen->leaf_instr ||
			    s->ids.leaf_prev != seen->caller || s->ids.caller_instr != seen->caller_instr)
				break;
			seen->place_checks++;
			e->async_task = offcpu_async_task(e, seen->tstate);
			/* as below: preempted holding the GIL. Read once per whole check: the same C
			 * code under the same Python frames releases the GIL or not alike. */
			if (READ_ONCE(e->wait) == PBP_WAIT_RUNNABLE) {
				if (!seen->preempt_gil) {
					const struct pbp_proc *proc = offcpu_proc(tgid);
					if (proc)
						seen->preempt_gil = gil_state_on_cpu(proc, seen->interp, seen->tstate) + 1;
				}
				if (seen->preempt_gil == PBP_GIL_HELD + 1)
					e->gil = PBP_GIL_HELD;
			}
			e->stack_id = seen->stack_id;
			e->depth = seen->depth;
			e->stack_flags = seen->stack_flags;
			e->reason = seen->reason;
			e->native_ts = seen->native_ts; /* the same place: the same C code */
			if (!e->native_ts) /* walked before --native began */
				seen->native_ts = e->native_ts =
					native_capture_switch(ctx, use_loop, offcpu_native_wanted(e, use_loop), tgid, tid, now);
			stat_add(PBP_STAT_OFFCPU_REUSED, 1);
			stat_add(PBP_STAT_OFFCPU_PLACE_REUSED, 1);
			return 0;
		}
	}

	/* The whole check, and the walk: the process's entry is needed from here. */
	const struct pbp_proc *proc = offcpu_proc(tgid);
	if (!proc) { /* no longer a target since e->pc was kept (an exec: offsets void) */
		offcpu_free(tid, e);
		return 0;
	}
	__u32 reason = PBP_OK;
	__u64 frame = 0, interp = 0;
	int have_frame = 0;
	__u64 ts = find_tstate(proc, s, pid_tgid, now, use_loop, &reason, &frame, &have_frame, &interp);
	if (!ts)
		return walk_done(si, 0, 0, 0, reason, 0);
	e->async_task = offcpu_async_task(e, ts);
	si->async_task = e->async_task;
	/* Preempted while holding the GIL: every other thread of the interpreter waits for this one
	 * while it waits for a CPU, so the interval counts as holding it (one more read, only at
	 * involuntary switches). */
	if (READ_ONCE(e->wait) == PBP_WAIT_RUNNABLE && gil_state_on_cpu(proc, interp, ts) == PBP_GIL_HELD) {
		e->gil = PBP_GIL_HELD;
		si->gil = PBP_GIL_HELD;
	}
	__u64 cframe = 0, pcf = 0;
	reason = first_frame(&proc->off, s, ts, have_frame, &frame, &cframe, &pcf);
	if (reason)
		return walk_done(si, 0, 0, 0, reason, 0);
	/* The identity check (see the top of this file). */
	__u64 *leaf_prev = &s->ids.leaf_prev, *leaf_code = &s->ids.leaf_code, *leaf_instr = &s->ids.leaf_instr,
	      *caller_instr = &s->ids.caller_instr;
	*leaf_prev = *leaf_code = *leaf_instr = *caller_instr = 0;
	if (frame && offcpu_frame_ids(&e->pc, s, frame, 0, leaf_prev, leaf_code, leaf_instr, caller_instr) == 0) {
		for (int k = 0; k < 2; k++) {
			struct pbp_offcpu_seen *seen = &e->seen[k];
			if (seen->tstate == ts && seen->leaf == frame && seen->leaf_code == *leaf_code &&
			    seen->leaf_instr == *leaf_instr && seen->caller == *leaf_prev &&
			    seen->caller_instr == *caller_instr && (seen->stack_id || seen->reason != PBP_OK)) {
				e->stack_id = seen->stack_id;
				e->depth = seen->depth;
				e->stack_flags = seen->stack_flags;
				e->reason = seen->reason;
				/* --native: the machine state taken at this place, if it is the same one (a
				 * place of 0, preempted in user code, is never the same) */
				if (!s->ids.uip || seen->uip != s->ids.uip || seen->usp != s->ids.usp)
					seen->native_ts = 0;
				e->native_ts = seen->native_ts;
				if (!e->native_ts) {
					e->native_ts = native_capture_switch(ctx, use_loop, offcpu_native_wanted(e, use_loop),
									     tgid, tid, now);
					if (s->ids.uip) /* kept for the switch-outs from this place */
						seen->native_ts = e->native_ts;
				}
				seen->uip = s->ids.uip; /* the place this stack was seen at last */
				seen->usp = s->ids.usp;
				seen->interp = interp;
				seen->place_checks = 0;
				seen->preempt_gil = offcpu_preempt_gil(e);
				stat_add(PBP_STAT_OFFCPU_REUSED, 1);
				return 0;
			}
		}
	}
	/* The walk budget, a token bucket kept as one time (walk_ns: when the thread's budget
	 * is used up to): each walk moves it offcpu_walk_budget_ns on, never from further back
	 * than now - OFFCPU_WALK_BURST budgets, and a walk is allowed while it is not that far
	 * ahead of now. */
	__u64 budget = offcpu_walk_budget_ns;
	if (e->walk_ns > now + OFFCPU_WALK_BURST * budget) {
		e->approx = 1;
		stat_add(PBP_STAT_OFFCPU_OVER_BUDGET, 1);
		return 0;
	}
	e->walk_ns = (e->walk_ns > now ? e->walk_ns : now) + budget;
	__u32 slot = e->next_slot & 1;
	e->next_slot = slot ^ 1;
	e->walk_slot = slot;
	struct pbp_offcpu_seen *seen = &e->seen[slot];
	seen->tstate = ts;
	seen->leaf = frame;
	seen->leaf_code = *leaf_code;
	seen->leaf_instr = *leaf_instr;
	seen->caller = *leaf_prev;
	seen->caller_instr = *caller_instr;
	seen->stack_id = 0;
	seen->reason = PBP_OK; /* not walked yet: no match until the walk fills it */
	seen->uip = s->ids.uip;
	seen->usp = s->ids.usp;
	seen->interp = interp;
	seen->place_checks = 0;
	seen->preempt_gil = offcpu_preempt_gil(e);
	/* --native: the machine state as it blocks, for this walk's intervals and the switch-outs
	 * from the same place that reuse its stack (bpf_loop kernels only, as on CPU) */
	seen->native_ts = e->native_ts =
		native_capture_switch(ctx, use_loop, offcpu_native_wanted(e, use_loop), tgid, tid, now);
	stat_add(PBP_STAT_OFFCPU_WALK, 1);
	/* 3.11/3.12: the cframe check, left to here since most switch-outs walk nothing. */
	if (cframe) {
		reason = cframe_check_arm(&proc->off, s, ts, cframe, frame, pcf);
		if (reason)
			return walk_done(si, 0, 0, 0, reason, 0);
	}
	return walk_from(ctx, progs, s, proc, tgid, now, use_loop, frame, interp, 0);
}

/* A CPU sample of tid, a thread of a wall target, running here now. The scheduler program
 * normally saw it switched in (this CPU's offcpu_cpu.tid is tid). When it did not, a switch in
 * happened that sched_switch never reported (seen on this project's Firecracker guest, 6.18:
 * when a higher-priority thread of PID 1 preempts a thread, the switch back to it is in
 * neither ftrace nor BPF; or the process became a target while the thread ran): its pending
 * interval (the preemption's) is still open, and would stay so until the thread's switch-out
 * (offcpu_switch_out ends it there, from the CPU time run since), its run counted as waiting.
 * It ends now instead (at most one sample period late), and this CPU tracks the thread from
 * here. One percpu lookup per sample of a wall target; a hash lookup only when the CPU had not
 * seen the thread come on. */
static __always_inline void offcpu_running(__u32 tid, __u64 now)
{
	__u32 zero = 0;
	struct offcpu_cpu *c = bpf_map_lookup_elem(&offcpu_cpu_map, &zero);
	if (!c || c->tid == tid)
		return;
	struct pbp_offcpu *e = offcpu_entry(tid);
	if (!e)
		return;
	c->tid = tid;
	if (e->out_ns) {
		stat_add(PBP_STAT_OFFCPU_UNSEEN_IN, 1);
		offcpu_switch_in(e, tid, now);
	}
}

/* One sched_switch: prev (the current task) leaves the CPU, next_tid comes on. */
static __always_inline int offcpu_switch(void *ctx, void *progs, int use_loop, int preempt,
					 struct task_struct *prev, __u32 next_tid)
{
	__u32 zero = 0;
	struct offcpu_cpu *c = bpf_map_lookup_elem(&offcpu_cpu_map, &zero);
	if (!c)
		return 0;
	/* prev is the current task: tp_btf reads its ids with plain loads (no helper call) */
	__u64 pid_tgid = use_loop ? ((__u64)(__u32)prev->tgid << 32) | (__u32)prev->pid : bpf_get_current_pid_tgid();
	__u32 prev_tid = (__u32)pid_tgid;
	int prev_tracked = prev_tid && c->tid == prev_tid;
	__u32 last_in = c->last_in;
	c->last_in = next_tid;
	__u32 epoch = offcpu_epoch;
	/* A process became a target since this CPU last looked (prev may be one of its threads,
	 * running since before its entry was made), or prev came on here with no switch naming
	 * it (a switch-in sched_switch never reported, see offcpu_running; or the first switch
	 * here since the program was attached): prev is looked up. */
	if (c->epoch != epoch || (prev_tid && last_in != prev_tid)) {
		if (!prev_tracked && prev_tid)
			prev_tracked = offcpu_entry(prev_tid) != 0;
		c->epoch = epoch;
	}
	c->tid = 0;
	__u64 now = 0;
	if (next_tid) {
		struct pbp_offcpu *n = offcpu_entry(next_tid);
		if (n) {
			c->tid = next_tid;
			now = bpf_ktime_get_ns();
			offcpu_switch_in(n, next_tid, now);
		}
	}
	if (!prev_tracked)
		return 0;
	if (!now)
		now = bpf_ktime_get_ns();
	return offcpu_switch_out(ctx, progs, use_loop, preempt, prev, pid_tgid, now);
}

#endif /* __PYBPFPROF_OFFCPU_BPF_H__ */
