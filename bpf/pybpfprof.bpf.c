// SPDX-License-Identifier: GPL-2.0
/*
 * pybpfprof sampler: on every cpu-clock sample of a profiled process, find the
 * sampled thread's PyThreadState, walk its CPython frames, hash them into a stack
 * id and push a small record into the ring buffer. No strings here: userspace
 * turns code-object addresses into names.
 *
 * Two copies of the sampler are built from the same step functions:
 *   on_sample       - bpf_loop (5.17+), walks up to PBP_MAX_DEPTH frames
 *   on_sample_nolp  - for 5.8 .. 5.16: finds the thread state with a bounded loop, then
 *                     walks PBP_NOLP_CHUNK frames per program run, continuing in
 *                     walk_nolp through tail calls, up to PBP_MAX_DEPTH_NO_LOOP frames;
 *                     a new stack's code objects are captured in capture_nolp (tail calls)
 * Userspace autoloads exactly one of them (walk_nolp and capture_nolp go with on_sample_nolp).
 *
 * --mode wall adds one scheduler program (attached only while a wall session runs):
 *   on_switch       - tp_btf/sched_switch: a target thread's stack is kept as it leaves the
 *                     CPU, and its interval emitted when it is back (without bpf_loop:
 *                     on_switch_nolp, raw_tp, + walk_nolp_rt and capture_nolp_rt through
 *                     tail calls)
 *
 * This file holds the entry programs; the rest is split by concern:
 *   maps.bpf.h          the maps, their value types and the knobs set before load
 *   util.bpf.h          statistics, section timing, user reads, loads from read windows
 *   thread_state.bpf.h  the search for the sampled thread's PyThreadState
 *   frame_walk.bpf.h    the walk over the thread's frames, one step per frame
 *   gil.bpf.h           the GIL: does the sampled thread hold it, is a blocked thread waiting for it
 *   emit.bpf.h          records, the stack store, and when a new stack wakes the consumer
 *   code_capture.bpf.h  a copy of each code object new stacks hold, once: names outlive the code
 *   sample.bpf.h        one sample of the current thread: thread state, walk, emit (both samplers)
 *   offcpu.bpf.h        --mode wall: off-CPU intervals from the scheduler
 *   offcpu_table.bpf.h  --mode wall: where a thread's entry is (a slot of a table, or a hash)
 *   native.bpf.h        --native: registers and stack copies for userspace to unwind
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "maps.bpf.h"
#include "sample.bpf.h"
#include "offcpu.bpf.h"
#include "native.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Both samplers: advance this CPU's sampled clock (every perf event, whatever runs), then for a
 * profiled process walk and emit (use_loop: with bpf_loop, else through tail calls to walk_nolp). */
static __always_inline int sample(struct bpf_perf_event_data *ctx, int use_loop)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return 0;
	__u64 period = ctx->sample_period;
	__u64 clock = s->cpu_clock_ns + period;
	s->cpu_clock_ns = clock;

	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	if (!tgid)
		return 0;
	const struct pbp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
	if (!proc)
		return 0;

	__u64 now = bpf_ktime_get_ns();
	stat_add(PBP_STAT_SAMPLES, 1);
	if (proc->flags & PBP_PROC_WALL)
		offcpu_running(tid, now);
	struct sample_info *si = &s->cur;
	si->now = now;
	si->period = period;
	si->clock = clock;
	si->tgid = tgid;
	si->tid = tid;
	si->kind = PBP_KIND_CPU;
	si->flags = 0;
	si->gil = PBP_GIL_NA;
	si->wait = PBP_WAIT_NONE;
	si->async_task = 0;
	/* Until the process is seen initialized, every sample reads its phase: one in start-up (site,
	 * .pth files, sitecustomize) goes under [interpreter start-up]. Then no more reads. */
	si->runtime = 0;
	if (!READ_ONCE(proc->running) && proc->runtime_initialized_addr) {
		si->runtime = runtime_phase_of(proc);
		if ((si->runtime & PBP_RT_INITIALIZED) && !(si->runtime & PBP_RT_FINALIZING))
			WRITE_ONCE(((struct pbp_proc *)proc)->running, 1);
	}
	/* --native (bpf_loop kernels only: bpf_task_pt_regs is 5.15+): the machine state first */
	if (native_capture && use_loop && (proc->flags & PBP_PROC_NATIVE))
		native_capture_sample(ctx, si);
	return walk_and_emit(ctx, &nolp_progs, s, proc, pid_tgid, now, use_loop);
}

/* The sampler with bpf_loop (5.17+). */
SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, 1);
}

/* The sampler without bpf_loop ("nolp", 5.8 .. 5.16): the walk continues in walk_nolp. */
SEC("perf_event")
int on_sample_nolp(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, 0);
}

/* One chunk of the no-bpf_loop frame walk; tail-calls itself until the walk ends. */
SEC("perf_event")
int walk_nolp(struct bpf_perf_event_data *ctx)
{
	return walk_nolp_chunk(ctx, &nolp_progs);
}

/* The capture of a new stack's code objects without bpf_loop (emit.bpf.h); tail-calls itself
 * until it ends, then emits the sample. */
SEC("perf_event")
int capture_nolp(struct bpf_perf_event_data *ctx)
{
	return capture_nolp_chunk(ctx, &nolp_progs);
}

/* ---- off CPU (--mode wall; attached only while a wall session runs) ------------------ */

/* Every context switch while a wall session runs (offcpu.bpf.h): the interval of next ends (its
 * record is emitted), and prev, a wall target's thread, has its stack kept as it blocks. With
 * bpf_loop: tp_btf (the task's fields are plain loads). */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return offcpu_switch(ctx, &nolp_rtprogs, 1, preempt, prev, next->pid);
}

/* Without bpf_loop (5.10 .. 5.16): raw_tp, because the switch-out walk goes on in walk_nolp_rt
 * through tail calls, which tp_btf programs cannot make there. */
SEC("raw_tp/sched_switch")
int on_switch_nolp(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx->args[1];
	struct task_struct *next = (struct task_struct *)ctx->args[2];
	return offcpu_switch(ctx, &nolp_rtprogs, 0, (int)ctx->args[0], prev, BPF_CORE_READ(next, pid));
}

SEC("raw_tp")
int walk_nolp_rt(struct bpf_raw_tracepoint_args *ctx)
{
	return walk_nolp_chunk(ctx, &nolp_rtprogs);
}

SEC("raw_tp")
int capture_nolp_rt(struct bpf_raw_tracepoint_args *ctx)
{
	return capture_nolp_chunk(ctx, &nolp_rtprogs);
}

/* ---- process lifecycle ----------------------------------------------------- */

/* Is the current task under one of the --cgroup cgroups? Empty slots answer < 0. */
static __always_inline int in_cgroup_filter(void)
{
	for (__u32 i = 0; i < PBP_MAX_CGROUPS; i++)
		if (bpf_current_task_under_cgroup(&cgroup_filter, i) == 1)
			return 1;
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	/* A profiled process replaced its program: its offsets and addresses are void from
	 * now on. Forget it here, before any sample of the new program can be walked with
	 * them; userspace re-discovers it from the event. */
	int known = bpf_map_delete_elem(&procs, &tgid) == 0;
	if (known) /* --mode wall: what its threads' entries keep of it is void too */
		__sync_fetch_and_add(&offcpu_proc_epoch, 1);
	if (!known && !(watch_flags & PBP_WATCH_EXEC))
		return 0;
	if (!known && (watch_flags & PBP_WATCH_CGROUP) && !in_cgroup_filter())
		return 0;
	__u32 ppid = BPF_CORE_READ(p, real_parent, tgid);
	emit_proc_event(PBP_EV_EXEC, tgid, ppid, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	__u32 pid = BPF_CORE_READ(p, pid);
	if (pid == tgid)
		bpf_map_delete_elem(&tstate_fills, &tgid);
	if (!bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	/* Every thread of a profiled process: the name it ends with (p is current here). */
	emit_thread_exit(tgid, pid);
	if (pid == tgid)
		emit_proc_event(PBP_EV_EXIT, tgid, 0, 0);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 cpid = BPF_CORE_READ(child, pid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	if (cpid != ctgid) { /* a new thread, not a new process */
		offcpu_new_thread(ctgid, cpid);
		tstate_new_thread(ctgid, BPF_CORE_READ(child, thread.fsbase));
		return 0;
	}
	if (!(watch_flags & PBP_WATCH_EXEC))
		return 0;
	if (!bpf_map_lookup_elem(&procs, &ptgid))
		return 0;
	int shares_mm = BPF_CORE_READ(child, mm) == BPF_CORE_READ(parent, mm);
	emit_proc_event(PBP_EV_FORK, ctgid, ptgid, shares_mm ? PBP_F_SHARES_MM : 0);
	return 0;
}
