/* SPDX-License-Identifier: GPL-2.0 */
/* The GIL, as BPF reads it: whether the sampled thread holds its interpreter's GIL, and
 * whether a thread being switched out is blocked waiting for it.
 *
 * Integration seam (round 2, issue 15): the layout work fills these in from
 * pbp_py_offsets; until it lands both answer "not known". */
#ifndef __PYBPFPROF_GIL_BPF_H__
#define __PYBPFPROF_GIL_BPF_H__

#include "util.bpf.h"

/* enum pbp_gil of the thread whose PyThreadState is tstate (in interpreter interp), on CPU:
 * HELD, NEITHER, or NA when the layout is unknown or the build is free-threaded. */
static __always_inline __u8 gil_state_on_cpu(const struct pbp_proc *proc, __u64 interp, __u64 tstate)
{
	(void)proc;
	(void)interp;
	(void)tstate;
	return PBP_GIL_NA;
}

/* Called in sched_switch for prev (the current task, being switched out asleep): 1 when it is
 * blocked in a futex on the GIL's mutex or condition variable (take_gil), else 0. */
static __always_inline int gil_waiting_at_switch(const struct pbp_proc *proc, struct task_struct *prev)
{
	(void)proc;
	(void)prev;
	return 0;
}

#endif /* __PYBPFPROF_GIL_BPF_H__ */
