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
 *                     walk_nolp through tail calls, up to PBP_MAX_DEPTH_NO_LOOP frames
 * Userspace autoloads exactly one of them (walk_nolp goes with on_sample_nolp).
 *
 * This file holds the entry programs; the rest is split by concern:
 *   maps.bpf.h          the maps, their value types and the knobs set before load
 *   util.bpf.h          statistics, section timing, user reads, loads from read windows
 *   thread_state.bpf.h  the search for the sampled thread's PyThreadState
 *   frame_walk.bpf.h    the walk over the thread's frames, one step per frame
 *   gil.bpf.h           the GIL: does the sampled thread hold it, is a blocked thread waiting for it
 *   emit.bpf.h          records, the stack store, and when a new stack wakes the consumer
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "maps.bpf.h"
#include "util.bpf.h"
#include "thread_state.bpf.h"
#include "frame_walk.bpf.h"
#include "gil.bpf.h"
#include "emit.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Both samplers: advance this CPU's sampled clock (every perf event, whatever runs), then for a
 * profiled process find the thread state and the first frame, walk (use_loop: with bpf_loop,
 * else through tail calls to walk_nolp) and emit. */
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

	__u32 reason = PBP_OK;
	__u64 frame = 0, interp = 0;
	int have_frame = 0;
	__u64 ts = find_tstate(proc, s, pid_tgid, now, use_loop, &reason, &frame, &have_frame, &interp);
	__u64 t = time_section(PBP_STAT_T_TSTATE, now);
	if (!ts)
		return emit(si, 0, 0, 0, reason, 0);
	si->gil = gil_state_on_cpu(proc, interp, ts);

	reason = first_frame(&proc->off, s, ts, have_frame, &frame);
	if (reason)
		return emit(si, 0, 0, 0, reason, 0);
	t = time_section(PBP_STAT_T_FRAME0, t);
	if (!frame)
		return emit(si, 0, 0, 0, PBP_ERR_NO_FRAME, 0);
	code_gen_read(&proc->off, s, interp, now, tgid);

	struct frame_walk w = {};
	w.proc = proc;
	w.s = s;
	w.code_cache = bpf_map_lookup_elem(&code_cache_map, &zero);
	w.st.frame = frame;
	w.st.hash = pbp_stack_hash_init(tgid, proc->generation);
	w.st.max_depth = proc->max_depth;
	if (use_loop) {
		if (w.st.max_depth > PBP_MAX_DEPTH)
			w.st.max_depth = PBP_MAX_DEPTH;
		bpf_loop(PBP_MAX_DEPTH + 1, frame_walk_cb, &w, 0);
		t = time_section(PBP_STAT_T_WALK, t);
		return finish_walk(s, &w.st, t, 1);
	}
	/* No bpf_loop: the walk goes on in walk_nolp, nolp_chunk frames per run. */
	if (w.st.max_depth > nolp_chunk * PBP_NOLP_RUNS)
		w.st.max_depth = nolp_chunk * PBP_NOLP_RUNS;
	s->walk = w.st;
	bpf_tail_call(ctx, &nolp_progs, 0);
	return emit(si, 0, 0, 0, PBP_ERR_TAIL_CALL, 0);
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

/* One chunk of the no-bpf_loop frame walk; tail-calls itself until the walk ends. The
 * tail-call limit (33 runs) is above PBP_NOLP_RUNS, so a walk ends by max_depth first;
 * running out of tail calls anyway is marked as truncation. */
SEC("perf_event")
int walk_nolp(struct bpf_perf_event_data *ctx)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return 0;
	__u32 tgid = s->cur.tgid;
	const struct pbp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
	if (!proc)
		return 0;
	struct frame_walk w = {};
	w.proc = proc;
	w.s = s;
	w.code_cache = bpf_map_lookup_elem(&code_cache_map, &zero);
	w.st = s->walk;
	int done = 0;
	for (int i = 0; i < PBP_NOLP_CHUNK; i++) {
		if (i >= nolp_chunk) /* a constant at load time: the verifier drops the rest */
			break;
		if (frame_walk_step(&w)) {
			done = 1;
			break;
		}
	}
	if (!done) {
		s->walk = w.st;
		bpf_tail_call(ctx, &nolp_progs, 0);
		w.st.flags |= PBP_F_TRUNCATED; /* out of tail calls */
	}
	return finish_walk(s, &w.st, 0, 0);
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
	if (!known && !(watch_flags & PBP_WATCH_EXEC))
		return 0;
	if (!known && (watch_flags & PBP_WATCH_CGROUP) && !in_cgroup_filter())
		return 0;
	__u32 ppid = BPF_CORE_READ(p, real_parent, tgid);
	emit_proc_event(PBP_EV_EXEC, tgid, ppid);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	__u32 pid = BPF_CORE_READ(p, pid);
	if (pid != tgid)
		return 0;
	if (!bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	emit_proc_event(PBP_EV_EXIT, tgid, 0);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	if (!(watch_flags & PBP_WATCH_EXEC))
		return 0;
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	if (!bpf_map_lookup_elem(&procs, &ptgid))
		return 0;
	__u32 cpid = BPF_CORE_READ(child, pid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	if (cpid != ctgid) /* a new thread, not a new process */
		return 0;
	emit_proc_event(PBP_EV_FORK, ctgid, ptgid);
	return 0;
}
