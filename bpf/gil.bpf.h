/* SPDX-License-Identifier: GPL-2.0 */
/* The GIL, as BPF reads it: whether the sampled thread holds its interpreter's GIL, and
 * whether a thread being switched out is blocked waiting for it.
 *
 * Where the GIL's struct is comes from userspace/cpython (pbp_py_offsets.gil_*): at a fixed
 * address in _PyRuntime (3.7 .. 3.11, pbp_proc.gil_addr) or through a pointer in the
 * interpreter (3.12+, one GIL per interpreter). 3.6 has no struct: its static variables are at
 * the addresses in pbp_proc (gil_locked_addr, gil_holder_addr; the futexes at gil_addr, over
 * gil_wait_size bytes). Free-threaded builds, and a 3.6 without its symbols: not known. */
#ifndef __PYBPFPROF_GIL_BPF_H__
#define __PYBPFPROF_GIL_BPF_H__

#include <bpf/bpf_core_read.h>

#include "util.bpf.h"

/* x86_64 __NR_futex: glibc's pthread_cond_wait and contended pthread_mutex_lock sleep in it. */
#define PBP_NR_FUTEX 202
/* x86_64 THREAD_SIZE without KASAN (16 KiB): where the user registers sit on a task's kernel
 * stack, for kernels without bpf_task_pt_regs (before 5.15). */
#define PBP_THREAD_SIZE (16u << 10)

/* The GIL struct's address for a thread of interpreter interp (0 when not known). */
static __always_inline __u64 gil_address(const struct pbp_proc *proc, __u64 interp)
{
	if (proc->off.gil_where == PBP_GIL_WHERE_ADDR)
		return proc->gil_addr;
	if (proc->off.gil_where == PBP_GIL_WHERE_INTERP && interp)
		return rd_u64(interp + proc->off.interp_gil_ptr);
	return 0;
}

/* enum pbp_gil of the thread whose PyThreadState is tstate (in interpreter interp), on CPU:
 * HELD, NEITHER, or NA when the layout is unknown or the build is free-threaded. One read of
 * the struct's first PBP_GIL_WINDOW bytes (two reads through the interpreter's pointer; in
 * 3.6 two reads, one per static variable). */
static __always_inline __u8 gil_state_on_cpu(const struct pbp_proc *proc, __u64 interp, __u64 tstate)
{
	if (proc->off.gil_where == PBP_GIL_WHERE_STATICS) {
		__s32 locked;
		__u64 holder;
		if (!tstate || bpf_probe_read_user(&locked, sizeof(locked), (const void *)proc->gil_locked_addr) ||
		    bpf_probe_read_user(&holder, sizeof(holder), (const void *)proc->gil_holder_addr) || locked < 0)
			return PBP_GIL_NA;
		return locked && holder == tstate ? PBP_GIL_HELD : PBP_GIL_NEITHER;
	}
	__u64 gil = gil_address(proc, interp);
	if (!gil || !tstate)
		return PBP_GIL_NA;
	__u8 w[PBP_GIL_WINDOW];
	if (bpf_probe_read_user(w, sizeof(w), (const void *)gil))
		return PBP_GIL_NA;
	/* Offsets checked by userspace (finalize_bpf_offsets); the masks bound them for the verifier. */
	__s32 locked = *(const __s32 *)(w + (proc->off.gil_locked & (PBP_GIL_WINDOW - 4)));
	__u64 holder = *(const __u64 *)(w + (proc->off.gil_last_holder & (PBP_GIL_WINDOW - 8)));
	if (locked < 0) /* not created yet */
		return PBP_GIL_NA;
	return locked && holder == tstate ? PBP_GIL_HELD : PBP_GIL_NEITHER;
}

/* The user registers of prev, the current task, saved at its entry to the kernel: a trusted BTF
 * pointer (plain loads). btf: prev is a trusted BTF pointer (tp_btf), given to bpf_task_pt_regs as
 * it is; the raw_tp program (kernels without bpf_loop) has it only as an untrusted pointer, which
 * bpf_task_pt_regs refuses, hence current's (one more helper call). NULL where the kernel has no
 * bpf_task_pt_regs (before 5.15). */
static __always_inline struct pt_regs *current_user_regs(struct task_struct *prev, int btf)
{
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return NULL;
	return (struct pt_regs *)bpf_task_pt_regs(btf ? prev : bpf_get_current_task_btf());
}

/* Whether prev may be in a futex wait, from its registers (current_user_regs): gil_waiting_at_switch
 * can only say yes then. Always where the kernel has no bpf_task_pt_regs (it reads them itself). */
static __always_inline int gil_futex_possible(struct pt_regs *regs)
{
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return 1;
	return regs && regs->orig_ax == PBP_NR_FUTEX;
}

/* Called in sched_switch for prev (the current task, being switched out asleep): 1 when it is
 * blocked in a futex on the GIL's mutex or condition variable (take_gil), else 0.
 * Sub-interpreters with their own GIL (3.12+) are not seen: the main interpreter's GIL is the
 * one compared with. The futex syscall number is checked first, so a thread asleep in
 * anything else costs one kernel read. */
static __always_inline int gil_waiting_at_switch(const struct pbp_proc *proc, struct task_struct *prev,
						 struct pt_regs *regs)
{
	if (proc->off.gil_where == PBP_GIL_WHERE_NONE)
		return 0;
	long nr;
	__u64 uaddr;
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs)) {
		/* regs: current_user_regs(), prev's (prev is the current task) */
		if (!regs)
			return 0;
		nr = regs->orig_ax;
		if (nr != PBP_NR_FUTEX)
			return 0;
		uaddr = regs->di;
	} else {
		/* task_pt_regs(): the user registers are the top of the task's kernel stack (x86_64
		 * has no TOP_OF_KERNEL_STACK_PADDING). The stack's size is not in BTF: 16 KiB, or
		 * 32 KiB with KASAN. The registers saved on entry from user mode have a user code
		 * segment (CPL 3 in cs's low bits); 16 KiB is taken when they do there, else 32 KiB
		 * when they do there, else the thread is taken not to wait for the GIL. */
		void *stack = BPF_CORE_READ(prev, stack);
		if (!stack)
			return 0;
		__u32 size = bpf_core_type_size(struct pt_regs);
		struct pt_regs *regs = (struct pt_regs *)((__u8 *)stack + PBP_THREAD_SIZE - size);
		if ((BPF_CORE_READ(regs, cs) & 3) != 3) {
			regs = (struct pt_regs *)((__u8 *)stack + 2 * PBP_THREAD_SIZE - size);
			if ((BPF_CORE_READ(regs, cs) & 3) != 3)
				return 0;
		}
		nr = BPF_CORE_READ(regs, orig_ax);
		if (nr != PBP_NR_FUTEX)
			return 0;
		uaddr = BPF_CORE_READ(regs, di);
	}
	if (proc->off.gil_where == PBP_GIL_WHERE_STATICS)
		return uaddr - proc->gil_addr < proc->gil_wait_size;
	__u64 interp = 0;
	if (proc->off.gil_where == PBP_GIL_WHERE_INTERP)
		interp = rd_u64(proc->interp_head_addr);
	__u64 gil = gil_address(proc, interp);
	return gil && uaddr - gil < proc->off.gil_size;
}

#endif /* __PYBPFPROF_GIL_BPF_H__ */
