/* SPDX-License-Identifier: GPL-2.0 */
/* --mode wall: a target thread's off-CPU intervals, from the scheduler.
 *
 * sched_switch (prev side) stores, for a thread of a process with PBP_PROC_WALL, when it was
 * switched out and why (the offcpu map). finish_task_switch runs in the resumed thread's own
 * context, so its user memory is readable and its Python stack is still the one it blocked
 * with: there the interval ends, and one of min_block_ns or longer is walked and emitted as an
 * OFF_CPU record weighing the interval. Shorter ones are summed per thread and wait reason;
 * a sum that reaches min_block_ns is walked and emitted as one PBP_F_AGGREGATE record (the stack
 * at the last of its intervals). Processes that are not targets cost one failed procs lookup
 * per program run. */
#ifndef __PYBPFPROF_OFFCPU_BPF_H__
#define __PYBPFPROF_OFFCPU_BPF_H__

#include <bpf/bpf_core_read.h>

#include "sample.bpf.h"

/* include/linux/sched.h, the same on every supported kernel */
#define PBP_TASK_UNINTERRUPTIBLE 0x0002
#define PBP_TASK_DEAD 0x0080

/* task_struct.state before 5.14 (renamed __state) */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return (__u32)BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

/* The gil field of an off-CPU record: WAITING when the thread waits for the GIL; otherwise NA
 * in a free-threaded build, else NEITHER (a blocked thread that does not wait for the GIL is
 * taken not to hold it; a C extension blocking with the GIL held is the exception this misses). */
static __always_inline __u8 offcpu_gil(const struct pbp_proc *proc, __u8 wait)
{
	if (wait == PBP_WAIT_GIL)
		return PBP_GIL_WAITING;
	return proc->off.free_threaded ? PBP_GIL_NA : PBP_GIL_NEITHER;
}

/* An off-CPU record without a stack (the thread is gone: its last switch-out). */
static __always_inline void offcpu_emit_stackless(__u32 tgid, __u32 tid, __u64 now, __u64 weight,
						  __u8 wait, __u8 gil, __u16 flags)
{
	struct sample_info si = {};
	si.now = now;
	si.period = weight;
	si.tgid = tgid;
	si.tid = tid;
	si.kind = PBP_KIND_OFF_CPU;
	si.flags = flags;
	si.gil = gil;
	si.wait = wait;
	emit(&si, 0, 0, 0, PBP_ERR_NO_FRAME, 0);
}

/* sched_switch, prev side (prev is the current task). */
static __always_inline int offcpu_switch_out(int preempt, struct task_struct *prev)
{
	__u32 tgid = BPF_CORE_READ(prev, tgid);
	if (!tgid)
		return 0;
	const struct pbp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
	if (!proc || !(proc->flags & PBP_PROC_WALL))
		return 0;
	__u32 tid = BPF_CORE_READ(prev, pid);
	__u32 state = task_state(prev);
	__u64 now = bpf_ktime_get_ns();
	struct pbp_offcpu *e = bpf_map_lookup_elem(&offcpu, &tid);
	if (state & PBP_TASK_DEAD) {
		/* The thread's last switch: what it summed is emitted now, without a stack (its
		 * Python frames are gone), and its entry freed. */
		if (e) {
			__u8 gil = offcpu_gil(proc, 0);
			for (__u32 w = 1; w < PBP_WAIT_COUNT; w++)
				if (e->sum_ns[w])
					offcpu_emit_stackless(tgid, tid, now, e->sum_ns[w], w,
							      w == PBP_WAIT_GIL ? PBP_GIL_WAITING : gil,
							      PBP_F_AGGREGATE);
			bpf_map_delete_elem(&offcpu, &tid);
		}
		return 0;
	}
	if (!e) {
		struct pbp_offcpu fresh = {};
		fresh.tgid = tgid;
		bpf_map_update_elem(&offcpu, &tid, &fresh, BPF_NOEXIST);
		e = bpf_map_lookup_elem(&offcpu, &tid);
		if (!e) {
			stat_add(PBP_STAT_OFFCPU_FULL, 1);
			return 0;
		}
	}
	/* Preempted (or woken before it could sleep): still TASK_RUNNING, waiting for a CPU. */
	__u8 wait;
	if (preempt || state == 0)
		wait = PBP_WAIT_RUNNABLE;
	else if (gil_waiting_at_switch(proc, prev))
		wait = PBP_WAIT_GIL;
	else if (state & PBP_TASK_UNINTERRUPTIBLE)
		wait = PBP_WAIT_IO;
	else
		wait = PBP_WAIT_SLEEP;
	e->tgid = tgid;
	e->wait = wait;
	e->gil = offcpu_gil(proc, wait);
	e->out_ns = now;
	return 0;
}

/* finish_task_switch: the current task has just been switched in. progs: the kprobe program
 * array of walk_nolp_k (no bpf_loop). */
static __always_inline int offcpu_switch_in(void *ctx, void *progs, int use_loop)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	if (!tgid)
		return 0;
	const struct pbp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
	if (!proc || !(proc->flags & PBP_PROC_WALL))
		return 0;
	struct pbp_offcpu *e = bpf_map_lookup_elem(&offcpu, &tid);
	if (!e || !e->out_ns)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 dt = now - e->out_ns;
	__u8 wait = e->wait, gil = e->gil;
	e->out_ns = 0;
	__u16 flags = 0;
	__u64 min_block = min_block_ns;
	if (dt < min_block) {
		__u32 w = wait & 7;
		if (w >= PBP_WAIT_COUNT)
			return 0;
		__u64 sum = e->sum_ns[w] + dt;
		if (sum < min_block) {
			e->sum_ns[w] = sum;
			return 0;
		}
		e->sum_ns[w] = 0;
		dt = sum;
		flags = PBP_F_AGGREGATE;
	}

	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return 0;
	struct sample_info *si = &s->cur;
	si->now = now;
	si->period = dt;
	si->clock = 0; /* only on-CPU samples are decimated by the CPU's sampled clock */
	si->tgid = tgid;
	si->tid = tid;
	si->kind = PBP_KIND_OFF_CPU;
	si->flags = flags;
	si->gil = gil;
	si->wait = wait;
	return walk_and_emit(ctx, progs, s, proc, pid_tgid, now, use_loop, 0);
}

#endif /* __PYBPFPROF_OFFCPU_BPF_H__ */
