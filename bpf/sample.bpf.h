/* SPDX-License-Identifier: GPL-2.0 */
/* One sample of the current thread, once its sample_info (s->cur) is filled: find its thread
 * state and first frame, walk its frames and emit the record. Shared by the on-CPU sampler
 * (perf_event) and the off-CPU switch-out (sched_switch), which differ in what they put in
 * s->cur (an off-CPU walk is kept in the thread's offcpu entry, not emitted: walk_done) and in
 * the program type their no-bpf_loop walk continues in. */
#ifndef __PYBPFPROF_SAMPLE_BPF_H__
#define __PYBPFPROF_SAMPLE_BPF_H__

#include "util.bpf.h"
#include "thread_state.bpf.h"
#include "frame_walk.bpf.h"
#include "gil.bpf.h"
#include "emit.bpf.h"

/* --async: the thread's running asyncio task (0 when none, or when not asked for: one read
 * per sample only then). */
static __always_inline __u64 async_task_at(__u16 tstate_async_task, __u64 ts)
{
	return tstate_async_task ? rd_u64(ts + tstate_async_task) : 0;
}

static __always_inline __u64 async_task_of(const struct pbp_py_offsets *off, __u64 ts)
{
	return async_task_at(off->tstate_async_task, ts);
}

/* Walk the frames from frame (the thread's first, of thread state ts in interpreter interp) and
 * finish the sample. use_loop: walk with bpf_loop, else through tail calls into progs (a program
 * array of ctx's program type holding the matching walk_nolp). A constant at each call site. */
static __always_inline int walk_from(void *ctx, void *progs, struct scratch *s,
				     const struct pbp_proc *proc, __u32 tgid, __u64 now, int use_loop,
				     __u64 frame, __u64 interp, __u64 t)
{
	struct sample_info *si = &s->cur;
	if (!frame)
		return walk_done(si, 0, 0, 0, PBP_ERR_NO_FRAME, 0);
	code_gen_read(&proc->off, s, interp, now, tgid);

	struct frame_walk w = {};
	w.proc = proc;
	w.s = s;
	__u32 zero = 0;
	w.code_cache = bpf_map_lookup_elem(&code_cache_map, &zero);
	w.st.frame = frame;
	w.st.hash = pbp_stack_hash_init(tgid, proc->generation);
	w.st.max_depth = proc->max_depth;
	if (use_loop) {
		if (w.st.max_depth > PBP_MAX_DEPTH)
			w.st.max_depth = PBP_MAX_DEPTH;
		bpf_loop(PBP_MAX_DEPTH + 1, frame_walk_cb, &w, 0);
		t = time_section(PBP_STAT_T_WALK, t);
		return finish_walk(ctx, progs, s, &w.st, t, 1);
	}
	/* No bpf_loop: the walk goes on in a walk_nolp program, nolp_chunk frames per run. */
	if (w.st.max_depth > nolp_chunk * PBP_NOLP_RUNS)
		w.st.max_depth = nolp_chunk * PBP_NOLP_RUNS;
	s->walk = w.st;
	bpf_tail_call(ctx, progs, 0);
	return walk_done(si, 0, 0, 0, PBP_ERR_TAIL_CALL, 0);
}

/* The on-CPU sample of the current thread: its thread state, first frame, walk, record. */
static __always_inline int walk_and_emit(void *ctx, void *progs, struct scratch *s,
					 const struct pbp_proc *proc, __u64 pid_tgid, __u64 now,
					 int use_loop)
{
	struct sample_info *si = &s->cur;
	__u32 reason = PBP_OK;
	__u64 frame = 0, interp = 0;
	int have_frame = 0;
	__u64 ts = find_tstate(proc, s, pid_tgid, now, use_loop, &reason, &frame, &have_frame, &interp);
	__u64 t = time_section(PBP_STAT_T_TSTATE, now);
	if (!ts)
		return emit(si, 0, 0, 0, reason, 0);
	si->gil = gil_state_on_cpu(proc, interp, ts);
	si->async_task = async_task_of(&proc->off, ts);

	reason = first_frame(&proc->off, s, ts, have_frame, &frame, 0, 0);
	if (reason)
		return emit(si, 0, 0, 0, reason, 0);
	t = time_section(PBP_STAT_T_FRAME0, t);
	return walk_from(ctx, progs, s, proc, pid_tgid >> 32, now, use_loop, frame, interp, t);
}

/* One chunk of the no-bpf_loop frame walk (the body of both walk_nolp programs); tail-calls
 * itself through progs until the walk ends. The tail-call limit (33 runs) is above
 * PBP_NOLP_RUNS, so a walk ends by max_depth first; running out of tail calls anyway is
 * marked as truncation. */
static __always_inline int walk_nolp_chunk(void *ctx, void *progs)
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
	/* The walk's state stays in the map between the steps, not on the stack: the verifier
	 * does not track a map value's contents, so after each step it sees the same unknown
	 * state whatever path the step took, and prunes. Copied to the stack, every path's
	 * values (depth, the frame cache's bounds) were carried into the next step: 8 steps a
	 * run took 5.10's verifier past its 1M instructions (6.18's to 993k; 101k for 4 steps);
	 * from the map, 36k on 5.10 (19k on 6.18). */
	struct walk_state *st = &s->walk;
	int done = 0;
	for (int i = 0; i < PBP_NOLP_CHUNK; i++) {
		if (i >= nolp_chunk) /* a constant at load time: the verifier drops the rest */
			break;
		if (frame_walk_step(&w, st)) {
			done = 1;
			break;
		}
	}
	if (!done) {
		bpf_tail_call(ctx, progs, 0);
		st->flags |= PBP_F_TRUNCATED; /* out of tail calls */
	}
	return finish_walk(ctx, progs, s, st, 0, 0);
}

#endif /* __PYBPFPROF_SAMPLE_BPF_H__ */
