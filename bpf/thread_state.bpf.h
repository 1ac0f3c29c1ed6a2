/* SPDX-License-Identifier: GPL-2.0 */
/* The search for the sampled thread's PyThreadState, and its cache. */
#ifndef __PYBPFPROF_THREAD_STATE_BPF_H__
#define __PYBPFPROF_THREAD_STATE_BPF_H__

#include <bpf/bpf_core_read.h>

#include "util.bpf.h"

/* A negative thread-state entry ("this thread has no PyThreadState") is trusted this
 * long before the list is walked again. Short, because a new Python thread's state is
 * created by its parent and only bound to it (thread_id) once the thread runs: until then
 * the thread looks native. 25 ms bounds both the misattribution at thread start and the
 * re-walk cost for truly native threads. */
#define NEG_TTL_NS 25000000ULL

/* ...except when it was made within NEG_YOUNG_NS of the thread's start or of its process's
 * registration (pbp_proc.since_ns): then it is not trusted at all, and every sample looks
 * again. A process registered at its exec is walked while its interpreter is being made, in
 * the moment between the interpreter and the main thread's state; a new thread is sampled
 * before it binds its state. Trusted, that entry named a main thread "native" for the rest of
 * start-up: up to 25 ms, and a thread that then blocked (a server's first accept) kept that
 * stack for the whole of its block, seconds. The cost: a native thread walks the list at each
 * of its samples and switch-outs during its first NEG_YOUNG_NS. */
#define NEG_YOUNG_NS 250000000ULL

/* A thread has one PyThreadState per interpreter it entered (sub-interpreters, 3.12+); the
 * one in use is marked active. True when that is unknown (before 3.12). */
static __always_inline int tstate_active(const struct pbp_py_offsets *off, __u64 ts)
{
	return !off->tstate_active_mask || (rd_u32(ts + off->tstate_status) & off->tstate_active_mask);
}

/* A search of the interpreters' thread-state lists for the sampled thread's (its thread_id is
 * the thread's fsbase). A filling search (walk_ns set) goes on to the lists' end and leaves a
 * hint for every thread state it passes. */
struct tstate_search {
	const struct pbp_py_offsets *off;
	__u64 interp;
	__u64 ts;
	__u64 fsbase;
	__u64 found;
	__u64 first;    /* first state with the thread's id, active or not */
	__u64 found_interp, first_interp;
	__u64 walk_ns;  /* a filling search: its hints' walk_ns; 0 = no hints */
	__u32 tgid;
	__u32 generation;
	__u32 ninterp;
	__u32 reason;
	__u32 hinted;   /* hints were left */
};

/* A filling search leaves hints only past this many thread states, and only when the thread it
 * looks for is not among them: a thread near the head of the list (the newest) is found by a
 * walk as cheaply as through a hint, so a pool starting its threads costs no fills. */
#define HINT_AFTER 32
#define FILL_GAP_NS 10000000ULL

/* A hint for thread state w->ts, whose thread_id is thread_id. Two states with one thread_id in
 * one walk (a thread in several interpreters; before 3.12, a new thread's state before its
 * thread binds it holds its parent's thread_id) make the hint void: which one is whose is for
 * the walk to say, with its active check and its order. An existing hint is rewritten in place,
 * so its void_ns (on_fork's) is never lost. */
static __always_inline void tstate_hint_put(struct tstate_search *w, __u64 thread_id)
{
	struct tstate_hint_key k = {};
	k.thread_id = thread_id;
	k.tgid = w->tgid;
	struct tstate_hint *h = bpf_map_lookup_elem(&tstate_hints, &k);
	if (!h) {
		struct tstate_hint nh = {};
		nh.tstate = w->ts;
		nh.interp = w->interp;
		nh.walk_ns = w->walk_ns;
		nh.generation = w->generation;
		if (!bpf_map_update_elem(&tstate_hints, &k, &nh, BPF_NOEXIST))
			return;
		h = bpf_map_lookup_elem(&tstate_hints, &k); /* on_fork made it meanwhile */
		if (!h)
			return;
	}
	if (READ_ONCE(h->walk_ns) == w->walk_ns) {
		WRITE_ONCE(h->tstate, 0);
		return;
	}
	WRITE_ONCE(h->walk_ns, w->walk_ns);
	WRITE_ONCE(h->generation, w->generation);
	WRITE_ONCE(h->interp, w->interp);
	barrier();
	WRITE_ONCE(h->tstate, w->ts);
}

/* Step i of the walk over interpreters x threads. Returns 1 to stop. */
static __always_inline int tstate_search_step(struct tstate_search *w, __u32 i)
{
	const struct pbp_py_offsets *off = w->off;

	if (!w->ts) {
		w->interp = rd_u64(w->interp + off->interp_next);
		if (!w->interp) {
			w->reason = PBP_ERR_NO_TSTATE;
			return 1;
		}
		if (++w->ninterp >= PBP_MAX_INTERPRETERS) {
			w->reason = PBP_ERR_THREAD_WALK_LIMIT;
			return 1;
		}
		w->ts = rd_u64(w->interp + off->interp_threads_head);
		return 0;
	}
	__u64 thread_id = rd_u64(w->ts + off->tstate_thread_id);
	/* i, not a count kept in w: the verifier knows nothing of i in bpf_loop's callback, so the
	 * callback's states converge (a counter in w would be a new state at every step) */
	int hinting = w->walk_ns && i > HINT_AFTER;
	if (hinting && thread_id) { /* 0: a state not bound to its thread yet (3.12+) */
		tstate_hint_put(w, thread_id);
		w->hinted = 1;
	}
	if (thread_id == w->fsbase && !w->found) {
		if (!w->first) {
			w->first = w->ts;
			w->first_interp = w->interp;
		}
		if (tstate_active(off, w->ts)) {
			w->found = w->ts;
			w->found_interp = w->interp;
			w->reason = PBP_OK;
			if (!hinting)
				return 1;
		}
	}
	w->ts = rd_u64(w->ts + off->tstate_next);
	return 0;
}

/* A thread state's thread_id and its frame field (frame, cframe or current_frame), in one
 * probe read when both fit in one window (every supported version), else in two.
 * Returns the thread_id, 0 if unreadable; *frame gets the frame field. */
static __always_inline __u64 rd_tstate(const struct pbp_py_offsets *off, struct scratch *s, __u64 ts,
				       __u64 *frame)
{
	__u32 a = off->tstate_thread_id, b = off->tstate_frame;
	__u32 lo = a < b ? a : b;
	__u32 n = (a < b ? b : a) + 8 - lo;
	if (n > PBP_WINDOW || ((a | b) & 7)) {
		*frame = rd_u64(ts + b);
		return rd_u64(ts + a);
	}
	n = ((n - 1) & (PBP_WINDOW - 1)) + 1; /* 1 .. PBP_WINDOW, for the verifier */
	if (bpf_probe_read_user(s->code_window, n, (const void *)(ts + lo))) {
		*frame = 0;
		return 0;
	}
	*frame = win_u64(s->code_window, b - lo);
	return win_u64(s->code_window, a - lo);
}

/* A new thread of process tgid, with this fsbase: a hint for its fsbase from a walk begun
 * before now is another thread's. */
static __always_inline void tstate_new_thread(__u32 tgid, __u64 fsbase)
{
	if (!bpf_map_lookup_elem(&tstate_fills, &tgid))
		return;
	struct tstate_hint_key k = {};
	k.thread_id = fsbase;
	k.tgid = tgid;
	__u64 now = bpf_ktime_get_ns();
	struct tstate_hint *h = bpf_map_lookup_elem(&tstate_hints, &k);
	if (h) {
		WRITE_ONCE(h->void_ns, now);
		return;
	}
	struct tstate_hint nh = {};
	nh.void_ns = now;
	if (bpf_map_update_elem(&tstate_hints, &k, &nh, BPF_NOEXIST)) {
		h = bpf_map_lookup_elem(&tstate_hints, &k); /* a walk made it meanwhile */
		if (h)
			WRITE_ONCE(h->void_ns, now);
	}
}

/* The last filling walk's hint for thread fsbase of process tgid, or 0: the hint must come from
 * the last walk that left hints in this process and entry generation, begun after the last
 * thread with this fsbase was created, and must name one state (two with one thread_id in that
 * walk leave none). *walk_ns gets when that walk began, *head the list head it began at. */
static __always_inline __u64 tstate_hint_get(const struct pbp_proc *proc, __u32 tgid, __u64 fsbase,
					     __u64 *interp, __u64 *walk_ns, __u64 *head)
{
	struct tstate_fill *done = bpf_map_lookup_elem(&tstate_fills, &tgid);
	if (!done)
		return 0;
	__u64 done_ns = READ_ONCE(done->walk_ns), done_head = READ_ONCE(done->head);
	struct tstate_hint_key k = {};
	k.thread_id = fsbase;
	k.tgid = tgid;
	struct tstate_hint *h = bpf_map_lookup_elem(&tstate_hints, &k);
	if (!h)
		return 0;
	__u64 ts = READ_ONCE(h->tstate);
	barrier();
	__u64 hwalk_ns = READ_ONCE(h->walk_ns), void_ns = READ_ONCE(h->void_ns);
	__u32 generation = READ_ONCE(h->generation);
	__u64 hinterp = READ_ONCE(h->interp);
	if (!ts || generation != proc->generation || hwalk_ns != done_ns || void_ns >= hwalk_ns)
		return 0;
	*interp = hinterp;
	*walk_ns = hwalk_ns;
	*head = done_head;
	return ts;
}

/* The sampled thread's state from a hint, or 0: the hint (tstate_hint_get) must still hold the
 * thread's fsbase. It need not be active (3.12+): the hint was the one state with this
 * thread_id, which a walk would take too when none is active (a thread sampled while it waits
 * for the GIL, or runs without it). */
static __always_inline __u64 tstate_from_hint(const struct pbp_proc *proc, struct scratch *s, __u32 tgid,
					      __u64 fsbase, __u64 *frame0, __u64 *interp)
{
	__u64 hinterp = 0, walk_ns = 0, head = 0;
	__u64 ts = tstate_hint_get(proc, tgid, fsbase, &hinterp, &walk_ns, &head);
	if (!ts || rd_tstate(&proc->off, s, ts, frame0) != fsbase)
		return 0;
	*interp = hinterp;
	return ts;
}

/* A known thread state that is its thread's but not active (3.12+: the thread waits for the GIL,
 * or runs without it) needs no walk when a walk would find no other state of its thread to
 * take: the process has one interpreter, the last filling walk found this state to be the
 * thread's only one, and no state was made since (a new one is pushed at the head of its
 * interpreter's list, which is still the one that walk began at). Without it, a pool of 1000
 * threads taking turns at the GIL walked all 1000 states about once a burst (3.12: twice the
 * 10-thread run's cost per sample, BENCHMARKS.md). A head freed and a new state made at its
 * address would read as no change: HINT_TRUST_NS bounds how long that could go unseen; a
 * process starting or entering a sub-interpreter has two, and is walked as before. */
#define HINT_TRUST_NS 10000000000ULL

static __always_inline int tstate_only_one(const struct pbp_proc *proc, __u32 tgid, __u64 fsbase, __u64 ts,
					   __u64 now)
{
	__u64 hinterp = 0, walk_ns = 0, head = 0;
	if (tstate_hint_get(proc, tgid, fsbase, &hinterp, &walk_ns, &head) != ts || now - walk_ns >= HINT_TRUST_NS)
		return 0;
	__u64 interp = rd_u64(proc->interp_head_addr);
	return interp && head && !rd_u64(interp + proc->off.interp_next) &&
	       rd_u64(interp + proc->off.interp_threads_head) == head;
}

static long tstate_search_cb(__u32 i, void *ctx)
{
	return tstate_search_step((struct tstate_search *)ctx, i);
}

/* Find the PyThreadState of the current task. Returns 0 and sets *reason on failure. On a
 * cache hit *frame0 gets the thread state's frame field and *have_frame0 is set. */
static __always_inline __u64 find_tstate(const struct pbp_proc *proc, struct scratch *s, __u64 pid_tgid,
					 __u64 now, int use_loop, __u32 *reason, __u64 *frame0,
					 int *have_frame0, __u64 *interp)
{
	__u64 fsbase, start;
	if (use_loop) {
		/* 5.17+ (bpf_loop), so 5.11+: a plain load from the BTF task, no probe read */
		struct task_struct *task = bpf_get_current_task_btf();
		fsbase = task->thread.fsbase;
		start = task->start_time;
	} else {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();
		fsbase = BPF_CORE_READ(task, thread.fsbase);
		start = BPF_CORE_READ(task, start_time);
	}
	const struct pbp_py_offsets *off = &proc->off;
	__u32 tgid = pid_tgid >> 32;

	__u64 fallback = 0, fallback_interp = 0;
	struct tstate_cache_entry *tc = &s->tstate_cache[(__u32)pid_tgid & (TSTATE_CACHE - 1)];
	struct tstate_entry *ce;
	if (tc->pid_tgid == pid_tgid) {
		ce = &tc->e;
	} else {
		ce = bpf_map_lookup_elem(&tstates, &pid_tgid);
		if (ce) {
			tc->pid_tgid = pid_tgid;
			tc->e = *ce;
			ce = &tc->e;
		}
	}
	/* An entry of an earlier thread with this tid (start) is none of this one's. */
	if (ce && (ce->generation != proc->generation || ce->start != start))
		ce = 0;
	if (ce) {
		if (ce->tstate) {
			if (rd_tstate(off, s, ce->tstate, frame0) == fsbase) {
				*have_frame0 = 1;
				/* Whether it is still the active state is checked once per
				 * NEG_TTL_NS, not per sample. Not active: the thread entered another
				 * interpreter, or it runs without the GIL (then no state is active):
				 * look again, and keep this one if none is active. */
				*interp = ce->interp;
				if (now - ce->ts_ns < NEG_TTL_NS) {
					stat_add(PBP_STAT_TSTATE_CACHE_HIT, 1);
					return ce->tstate;
				}
				if (tstate_active(off, ce->tstate) ||
				    (use_loop && tstate_only_one(proc, tgid, fsbase, ce->tstate, now))) {
					ce->ts_ns = now; /* checked: trust it another NEG_TTL_NS */
					stat_add(PBP_STAT_TSTATE_CACHE_HIT, 1);
					return ce->tstate;
				}
				fallback = ce->tstate;
				fallback_interp = ce->interp;
				*have_frame0 = 0;
			}
		} else if (now - ce->ts_ns < NEG_TTL_NS &&
			   ce->ts_ns >= (start > proc->since_ns ? start : proc->since_ns) + NEG_YOUNG_NS) {
			*reason = PBP_ERR_NO_TSTATE;
			return 0;
		}
	}

	struct tstate_entry ne = {};
	ne.ts_ns = now;
	ne.start = start;
	ne.generation = proc->generation;

	/* A thread not known here yet: an earlier walk may have passed its state. Only with
	 * bpf_loop: the bounded walk without it passes too few threads for hints to pay. */
	int fill = 0;
	struct tstate_fill *done = 0;
	if (use_loop && (!ce || ce->tstate)) {
		ne.tstate = fallback ? 0 : tstate_from_hint(proc, s, tgid, fsbase, frame0, &ne.interp);
		if (ne.tstate) {
			*have_frame0 = 1;
			*interp = ne.interp;
			bpf_map_update_elem(&tstates, &pid_tgid, &ne, BPF_ANY);
			tc->pid_tgid = pid_tgid;
			tc->e = ne;
			stat_add(PBP_STAT_TSTATE_HINT, 1);
			return ne.tstate;
		}
		/* No hint: a thread newer than the last filling walk, or none valid any more. If
		 * it is not among the first HINT_AFTER states, this walk goes on to the end and
		 * leaves hints for every state past them (a pool's threads are sampled for the
		 * first time one after the other). A native thread's repeated walks (negative
		 * entries expire) do not fill: they would find nothing new. Nor does a walk within
		 * FILL_GAP_NS of the last filling one: a process starting threads by the hundred
		 * (each new one seen before the next fill) costs plain walks, at most one fill per
		 * gap. A known state found not active (fallback) fills too: its walk goes to the
		 * end anyway, finding no active state, and its hints let tstate_only_one spare the
		 * next threads theirs. */
		done = bpf_map_lookup_elem(&tstate_fills, &tgid);
		fill = !done || now - READ_ONCE(done->walk_ns) > FILL_GAP_NS;
	}

	struct tstate_search w = {};
	w.off = off;
	w.fsbase = fsbase;
	w.tgid = tgid;
	w.generation = proc->generation;
	if (fill) {
		struct tstate_fill none = {};
		/* made before the list is read, so that on_fork voids hints from now on */
		bpf_map_update_elem(&tstate_fills, &tgid, &none, BPF_NOEXIST);
		w.walk_ns = now;
	}
	w.interp = rd_u64(proc->interp_head_addr);
	if (!w.interp) {
		*reason = PBP_ERR_NO_INTERPRETER;
		return 0;
	}
	w.ts = rd_u64(w.interp + off->interp_threads_head);
	const __u64 head = w.ts;
	w.reason = PBP_ERR_THREAD_WALK_LIMIT;
	stat_add(PBP_STAT_TSTATE_WALK, 1);
	if (use_loop) {
		bpf_loop(PBP_MAX_THREAD_WALK, tstate_search_cb, &w, 0);
		if (w.hinted) {
			/* the newest walk's hints win: a walk that began earlier and ends later
			 * has had its hints overwritten by the newer one */
			done = bpf_map_lookup_elem(&tstate_fills, &tgid);
			if (done && READ_ONCE(done->walk_ns) < now) {
				WRITE_ONCE(done->head, head);
				barrier();
				WRITE_ONCE(done->walk_ns, now);
			}
		}
	} else {
		for (int i = 0; i < PBP_MAX_THREAD_WALK_NO_LOOP; i++)
			if (tstate_search_step(&w, i))
				break;
	}

	if (!w.found && (fallback || w.first)) {
		w.found = fallback ? fallback : w.first;
		w.found_interp = fallback ? fallback_interp : w.first_interp;
		w.reason = PBP_OK;
	}

	ne.tstate = w.found;
	ne.interp = w.found_interp;
	*interp = w.found_interp;
	if (w.found || w.reason == PBP_ERR_NO_TSTATE) {
		bpf_map_update_elem(&tstates, &pid_tgid, &ne, BPF_ANY);
		tc->pid_tgid = pid_tgid;
		tc->e = ne;
	}
	if (!w.found)
		*reason = w.reason;
	return w.found;
}

#endif /* __PYBPFPROF_THREAD_STATE_BPF_H__ */
