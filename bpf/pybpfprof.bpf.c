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
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "pybpfprof/abi.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by userspace before load. */
const volatile __u32 watch_flags = 0;
/* Samples do not wake the consumer (it drains on a timer) until this much is queued. */
const volatile __u64 wakeup_bytes = 1 << 18;
/* Frames per run of walk_nolp (no-bpf_loop kernels), <= PBP_NOLP_CHUNK. */
const volatile __u32 nolp_chunk = PBP_NOLP_CHUNK;
/* Time the sampler's sections into PBP_STAT_T_* (PYBPFPROF_TIMING); off, the verifier
 * removes every timing instruction. */
const volatile __u32 section_timing = 0;
/* The weight of an on-CPU sample: the perf event's period, in ns. */
const volatile __u64 sample_period_ns = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22); /* resized by userspace */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct pbp_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 2048); /* resized by userspace */
	__type(key, __u64);
	__type(value, struct pbp_stack);
} stacks SEC(".maps");

struct tstate_entry {
	__u64 tstate;   /* 0 = known to have none (negative entry) */
	__u64 ts_ns;    /* when made (negative entry) or last checked active (positive) */
	__u64 interp;   /* the PyInterpreterState the thread state is in */
	__u32 generation;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct tstate_entry);
} tstates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PBP_STAT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* Frame cache: on 3.11+ the interpreter frames of a thread are contiguous in its data
 * stack (callers below callees), so one read of the page below a frame covers many
 * callers. A view into it may extend PBP_WINDOW past the cached bytes (never read). */
#define FCACHE 4096

/* Hot parts first: a shallow walk then touches two pages of this per-CPU value. */
/* The frame walk's state between tail calls (no-bpf_loop kernels). Pointers cannot be
 * kept in a map, so the process is looked up again by tgid. */
struct nolp_state {
	__u64 frame, hash, fc_base, last_code, now;
	__u32 fc_len, last_csum, depth, max_depth, flags, reason, tgid, tid;
};

/* Per-CPU caches in front of two maps, so a sample of a thread that keeps running on this
 * CPU touches neither map's memory (each map access is a likely TLB miss: the maps are
 * vmalloc'ed in 4 KiB pages, and a miss costs a two-level page walk in a VM):
 * - the thread-state entries of the last threads sampled here (a copy of the tstates
 *   entry, validated exactly as the entry itself is);
 * - the stack ids stored lately from this CPU: such a stack is in the stacks map, or was
 *   read by userspace when it was stored (a new stack wakes the consumer at once). */
#define TCACHE 8
#define SEEN 256
struct tcache_entry {
	__u64 pid_tgid;
	struct tstate_entry e;
};

/* 3.11/3.12: the check of tstate->cframe against its previous cframe (see abi.h). Kept in the
 * map value, not in struct fwalk on the stack: the verifier does not track map memory, so the
 * frame walk's states still converge. */
struct cframe_check {
	__u64 expect;   /* tstate->cframe->previous->current_frame */
	__u32 pending;  /* the first entry frame (or the chain's end) is still to be checked */
	__u32 stale;    /* the check failed: no stack, PBP_ERR_CFRAME_STALE */
};

/* 3.14+: PyInterpreterState._code_object_generation counts the code objects freed (code_dealloc
 * bumps it first thing). While it stands still, a code object seen at an address is still the one
 * there, so its checksum comes from this cache instead of a probe read (~250 ns each, most
 * of a deep walk's cost). Per CPU; keyed by the code object's address, valid for the same
 * process (and entry generation), interpreter and code generation, and at most CC_TTL_NS
 * (bounds what a read racing a code object's construction could leave). */
#define CCACHE 256
#define CC_TTL_NS 250000000ULL
struct ccache_entry {
	__u64 code, interp, gen, ts;
	__u32 tgid, pgen, csum, _pad;
};
struct ccache {
	struct ccache_entry e[CCACHE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ccache);
} ccache_map SEC(".maps");

/* This sample's code generation (in the map value: it lives across the no-bpf_loop tail calls). */
struct cc_sample {
	__u64 interp, gen, now;
	__u32 on, tgid;  /* on: the generation was read, the cache may be used */
};

static __always_inline __u32 cc_slot(__u64 code)
{
	return (__u32)((code * 0x9E3779B97F4A7C15ULL) >> 56) & (CCACHE - 1);
}

struct scratch {
	struct tcache_entry tcache[TCACHE];
	__u64 seen[SEEN];
	__u8 cwin[PBP_WINDOW];
	__u8 fcache[FCACHE + PBP_WINDOW];
	struct pbp_stack stack;
	struct nolp_state nolp;
	struct cframe_check chk;
	struct cc_sample cc;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch_map SEC(".maps");

/* walk_nolp, for the tail calls of the no-bpf_loop walk (filled in by userspace). */
/* --cgroup: a process is reported at exec only if it is under one of these cgroups
 * (bpf_current_task_under_cgroup tests ancestry, so a pod's containers that start later
 * are caught too). Processes elsewhere cost one array scan per exec, nothing per sample. */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, PBP_MAX_CGROUPS);
	__type(key, __u32);
	__type(value, __u32);
} cgroup_filter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} nolp_progs SEC(".maps");

/* A negative thread-state entry ("this thread has no PyThreadState") is trusted this
 * long before the list is walked again. Short, because a new Python thread's state is
 * created by its parent and only bound to it (thread_id) once the thread runs: until then
 * the thread looks native. 25 ms bounds both the misattribution at thread start and the
 * re-walk cost for truly native threads. */
#define NEG_TTL_NS 25000000ULL

static __always_inline void stat_add(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);
	if (v)
		*v += n;
}

/* Section timing: add the time since prev to stat idx and return now (0 when off). */
static __always_inline __u64 tmark(__u32 idx, __u64 prev)
{
	if (!section_timing)
		return 0;
	__u64 t = bpf_ktime_get_ns();
	stat_add(idx, t - prev);
	return t;
}

static __always_inline void tcount(__u32 idx)
{
	if (section_timing)
		stat_add(idx, 1);
}

static __always_inline __u64 rd_u64(__u64 addr)
{
	__u64 v = 0;
	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

static __always_inline __u32 rd_u32(__u64 addr)
{
	__u32 v = 0;
	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/* A thread has one PyThreadState per interpreter it entered (sub-interpreters, 3.12+); the
 * one in use is marked active. True when that is unknown (before 3.12). */
static __always_inline int tstate_active(const struct pbp_py_offsets *off, __u64 ts)
{
	return !off->tstate_active_mask || (rd_u32(ts + off->tstate_status) & off->tstate_active_mask);
}

/* Fields sit at their natural alignment inside the 8-aligned windows; masking both
 * bounds the offset for the verifier and lets clang emit one aligned load. Userspace
 * validates every offset against PBP_WINDOW. */
static __always_inline __u64 win_u64(const __u8 *w, __u32 off)
{
	return *(const __u64 *)(w + (off & (PBP_WINDOW - 8)));
}

static __always_inline __u32 win_u32(const __u8 *w, __u32 off)
{
	return *(const __u32 *)(w + (off & (PBP_WINDOW - 4)));
}

static __always_inline __u8 win_u8(const __u8 *w, __u32 off)
{
	return w[off & (PBP_WINDOW - 1)];
}

/* ---- thread-state search -------------------------------------------------- */

struct tswalk {
	const struct pbp_py_offsets *off;
	__u64 interp;
	__u64 ts;
	__u64 fsbase;
	__u64 found;
	__u64 first;    /* first state with the thread's id, active or not */
	__u64 found_interp, first_interp;
	__u32 ninterp;
	__u32 reason;
};

/* One step of the walk over interpreters x threads. Returns 1 to stop. */
static __always_inline int tswalk_step(struct tswalk *w)
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
	if (rd_u64(w->ts + off->tstate_thread_id) == w->fsbase) {
		if (!w->first) {
			w->first = w->ts;
			w->first_interp = w->interp;
		}
		if (tstate_active(off, w->ts)) {
			w->found = w->ts;
			w->found_interp = w->interp;
			w->reason = PBP_OK;
			return 1;
		}
	}
	w->ts = rd_u64(w->ts + off->tstate_next);
	return 0;
}

static long tswalk_cb(__u32 i, void *ctx)
{
	return tswalk_step((struct tswalk *)ctx);
}

/* ---- frame walk ------------------------------------------------------------ */

struct fwalk {
	const struct pbp_proc *proc;
	struct scratch *s;
	__u64 frame;
	__u64 hash;
	__u64 fc_base;     /* user address of fcache[0] */
	__u32 fc_len;      /* bytes valid in fcache */
	__u32 _pad;
	__u64 last_code;   /* csum cache: recursion repeats the same code object */
	struct ccache *cc; /* the code generation cache (3.14+), if s->cc.on */
	__u32 last_csum;
	__u32 depth;
	__u32 max_depth;
	__u32 flags;
	__u32 reason;
};

static __always_inline __u32 code_csum(const struct pbp_py_offsets *off, const __u8 *cwin)
{
	__u32 acc = 0;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		__u8 sz = off->csum_size[i];
		if (sz == 8) {
			__u64 v = win_u64(cwin, off->csum_off[i]);
			if (off->csum_str_mask & (1u << i)) {
				v = rd_u64(v + PBP_STR_HASH_OFF);
				tcount(PBP_STAT_N_STR_READS);
			}
			acc = pbp_csum_step(acc, v);
		} else if (sz == 4)
			acc = pbp_csum_step(acc, win_u32(cwin, off->csum_off[i]));
	}
	return acc;
}

/* Resolve the bytecode base the instruction pointer points into. */
static __always_inline __u64 bytecode_base(const struct pbp_py_offsets *off, __u64 code,
					   const __u8 *fwin, const __u8 *cwin)
{
	__u64 base = code + off->code_adaptive;
	if (off->frame_tlbc_index != PBP_OFF_NONE && off->code_tlbc != PBP_OFF_NONE) {
		__s32 idx = (__s32)win_u32(fwin, off->frame_tlbc_index);
		__u64 arr = win_u64(cwin, off->code_tlbc);
		/* _PyCodeArray { Py_ssize_t size; char *entries[]; } */
		if (idx > 0 && arr) {
			__u64 e = rd_u64(arr + 8 + 8 * (__u64)(idx & 0xffff));
			if (e)
				base = e;
		}
	}
	return base;
}

/* Before its first entry frame, the walk met what a settled tstate->cframe never shows: the
 * sample was taken while the eval loop was being entered (see abi.h). What was walked is
 * stale: drop it, and mark the sample. */
static __always_inline void fwalk_stale(struct scratch *s)
{
	s->chk.stale |= s->chk.pending;
}

/* One frame. Returns 1 to stop. */
static __always_inline int fwalk_step(struct fwalk *w)
{
	const struct pbp_py_offsets *off = &w->proc->off;
	struct scratch *s = w->s;
	__u32 len;

	if (!w->frame) { /* the chain's end: before its first entry frame, a stale cframe */
		fwalk_stale(s);
		return 1;
	}
	if (w->depth >= w->max_depth) {
		w->flags |= PBP_F_TRUNCATED;
		return 1;
	}
	len = off->frame_read_len;
	if (len > PBP_WINDOW)
		len = PBP_WINDOW;
	__u64 cur = w->frame;
	if (!(cur >= w->fc_base && cur + len <= w->fc_base + w->fc_len)) {
		/* Miss: read from the frame's page floor (mapped, since the frame is) up to the
		 * frame's end; frame objects (<= 3.10) are scattered, so just the frame. */
		__u64 end = cur + len;
		__u64 start = off->frame_kind == PBP_FRAME_OBJECT ? cur : cur & ~4095ULL;
		if (end - start > FCACHE)
			start = end - FCACHE;
		/* 1 .. FCACHE, in a form the verifier can bound whatever clang does */
		__u32 n = (((__u32)(end - start) - 1) & (FCACHE - 1)) + 1;
		if (len == 0 || bpf_probe_read_user(s->fcache, n, (const void *)start)) {
			fwalk_stale(s);
			w->flags |= PBP_F_PARTIAL;
			w->reason = PBP_ERR_READ_FRAME;
			return 1;
		}
		w->fc_base = start;
		w->fc_len = n;
		tcount(PBP_STAT_N_FRAME_READS);
	}
	const __u8 *fwin = s->fcache + ((cur - w->fc_base) & (FCACHE - 1));
	w->frame = win_u64(fwin, off->frame_previous);
	if (w->frame == cur) /* self-loop in freed memory */
		w->frame = 0;
	/* The first entry frame must link to the previous cframe's current frame. */
	if (win_u8(fwin, off->frame_entry_off) == off->frame_entry_val) {
		s->chk.stale |= s->chk.pending & (w->frame != s->chk.expect);
		s->chk.pending = 0;
	}

	if (off->frame_owner != PBP_OFF_NONE) {
		__u8 owner = win_u8(fwin, off->frame_owner);
		if (owner < 32 && (off->skip_owner_mask & (1u << owner)))
			return 0; /* C-stack / shim frame: not Python */
	}
	__u64 code = win_u64(fwin, off->frame_code) & ~(__u64)off->executable_tag_mask;
	if (!code)
		return 0;

	__u32 csum;
	struct ccache_entry *ce = 0;
	int cached = 0;
	if (code == w->last_code) {
		csum = w->last_csum;
		cached = 1;
	} else if (s->cc.on && w->cc) {
		ce = &w->cc->e[cc_slot(code)];
		if (ce->code == code && ce->gen == s->cc.gen && ce->interp == s->cc.interp &&
		    ce->tgid == s->cc.tgid && ce->pgen == w->proc->generation &&
		    s->cc.now - ce->ts < CC_TTL_NS) {
			csum = ce->csum;
			w->last_code = code;
			w->last_csum = csum;
			cached = 1;
			tcount(PBP_STAT_N_CODE_CACHED);
		}
	}
	if (!cached) {
		len = off->code_read_len;
		if (len > PBP_WINDOW)
			len = PBP_WINDOW;
		if (len == 0 || bpf_probe_read_user(s->cwin, len, (const void *)code)) {
			fwalk_stale(s);
			w->flags |= PBP_F_PARTIAL;
			w->reason = PBP_ERR_READ_CODE;
			return 1;
		}
		tcount(PBP_STAT_N_CODE_READS);
		if (w->proc->code_type_addr &&
		    win_u64(s->cwin, off->code_ob_type) != w->proc->code_type_addr) {
			fwalk_stale(s); /* 3.11/3.12 frames always hold a code object */
			stat_add(PBP_STAT_REASON_BASE + PBP_ERR_NOT_CODE, 1);
			return 0; /* 3.13+: f_executable may be None or another object */
		}
		csum = code_csum(off, s->cwin);
		w->last_code = code;
		w->last_csum = csum;
		if (ce) {
			ce->code = code;
			ce->interp = s->cc.interp;
			ce->gen = s->cc.gen;
			ce->ts = s->cc.now;
			ce->tgid = s->cc.tgid;
			ce->pgen = w->proc->generation;
			ce->csum = csum;
		}
	}

	__u32 instr = PBP_INSTR_UNKNOWN;
	if (off->instr_kind == PBP_INSTR_PTR) {
		__u64 ip = win_u64(fwin, off->frame_instr);
		__u64 base = bytecode_base(off, code, fwin, s->cwin);
		if (ip >= base && ip - base < 0x1ffffffffULL)
			instr = (__u32)((ip - base) >> 1);
		else if (ip && ip < base)
			instr = 0; /* 3.11/3.12: prev_instr is one before the first unit */
	} else {
		__s32 lasti = (__s32)win_u32(fwin, off->frame_instr);
		instr = lasti < 0 ? 0 : (__u32)lasti;
	}

	__u32 d = w->depth;
	if (d >= PBP_MAX_DEPTH)
		return 1;
	struct pbp_frame *f = &s->stack.frames[d & (PBP_MAX_DEPTH - 1)];
	f->code = code;
	f->instr = instr;
	f->csum = csum;
	w->hash = pbp_stack_hash_step(w->hash, f);
	w->depth = d + 1;
	return 0;
}

/* One frame per callback: unrolling 4 steps into it saved ~10% per frame but made the
 * verifier take 0.7 s longer at every start. */
static long fwalk_cb(__u32 i, void *ctx)
{
	return fwalk_step((struct fwalk *)ctx);
}

/* ---- the sampler ----------------------------------------------------------- */

/* wake: the consumer must see this record now (a new stack: its code objects may be
 * short-lived, e.g. module bodies, so symbolize before they are freed). Other samples
 * are batched until wakeup_bytes are queued; the consumer also drains on a timer. */
static __always_inline int emit(__u64 ts, __u32 tgid, __u32 tid, __u64 stack_id, __u32 depth,
				__u32 flags, __u32 reason, int wake)
{
	struct pbp_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		stat_add(PBP_STAT_RINGBUF_DROP, 1);
		return 0;
	}
	e->ts_ns = ts;
	e->type = PBP_EV_SAMPLE;
	e->pid = tgid;
	e->tid = tid;
	e->cpu = bpf_get_smp_processor_id();
	e->stack_id = stack_id;
	e->flags = flags;
	e->reason = reason;
	e->depth = depth;
	e->kind = PBP_KIND_CPU;
	e->ppid = 0;
	e->_pad2 = 0;
	e->weight_ns = sample_period_ns;
	if (!wake)
		wake = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > wakeup_bytes;
	bpf_ringbuf_submit(e, wake ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	stat_add(PBP_STAT_EMITTED, 1);
	if (reason)
		stat_add(PBP_STAT_REASON_BASE + reason, 1);
	stat_add(PBP_STAT_SAMPLE_NS, bpf_ktime_get_ns() - ts);
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
	if (bpf_probe_read_user(s->cwin, n, (const void *)(ts + lo))) {
		*frame = 0;
		return 0;
	}
	*frame = win_u64(s->cwin, b - lo);
	return win_u64(s->cwin, a - lo);
}

/* Find the PyThreadState of the current task. Returns 0 and sets *reason on failure. On a
 * cache hit *frame0 gets the thread state's frame field and *have_frame0 is set. */
static __always_inline __u64 find_tstate(const struct pbp_proc *proc, struct scratch *s, __u64 pid_tgid,
					 __u64 now, int use_loop, __u32 *reason, __u64 *frame0,
					 int *have_frame0, __u64 *interp)
{
	__u64 fsbase;
	if (use_loop) {
		/* 5.17+ (bpf_loop), so 5.11+: a plain load from the BTF task, no probe read */
		fsbase = bpf_get_current_task_btf()->thread.fsbase;
	} else {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();
		fsbase = BPF_CORE_READ(task, thread.fsbase);
	}
	const struct pbp_py_offsets *off = &proc->off;

	__u64 fallback = 0, fallback_interp = 0;
	struct tcache_entry *tc = &s->tcache[(__u32)pid_tgid & (TCACHE - 1)];
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
	if (ce && ce->generation == proc->generation) {
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
				if (tstate_active(off, ce->tstate)) {
					ce->ts_ns = now; /* checked: trust it another NEG_TTL_NS */
					stat_add(PBP_STAT_TSTATE_CACHE_HIT, 1);
					return ce->tstate;
				}
				fallback = ce->tstate;
				fallback_interp = ce->interp;
				*have_frame0 = 0;
			}
		} else if (now - ce->ts_ns < NEG_TTL_NS) {
			*reason = PBP_ERR_NO_TSTATE;
			return 0;
		}
	}

	struct tswalk w = {};
	w.off = off;
	w.fsbase = fsbase;
	w.interp = rd_u64(proc->interp_head_addr);
	if (!w.interp) {
		*reason = PBP_ERR_NO_INTERPRETER;
		return 0;
	}
	w.ts = rd_u64(w.interp + off->interp_threads_head);
	w.reason = PBP_ERR_THREAD_WALK_LIMIT;
	stat_add(PBP_STAT_TSTATE_WALK, 1);
	if (use_loop) {
		bpf_loop(PBP_MAX_THREAD_WALK, tswalk_cb, &w, 0);
	} else {
		for (int i = 0; i < PBP_MAX_THREAD_WALK_NO_LOOP; i++)
			if (tswalk_step(&w))
				break;
	}

	if (!w.found && (fallback || w.first)) {
		w.found = fallback ? fallback : w.first;
		w.found_interp = fallback ? fallback_interp : w.first_interp;
		w.reason = PBP_OK;
	}

	struct tstate_entry ne = {};
	ne.tstate = w.found;
	ne.interp = w.found_interp;
	*interp = w.found_interp;
	ne.ts_ns = now;
	ne.generation = proc->generation;
	if (w.found || w.reason == PBP_ERR_NO_TSTATE) {
		bpf_map_update_elem(&tstates, &pid_tgid, &ne, BPF_ANY);
		tc->pid_tgid = pid_tgid;
		tc->e = ne;
	}
	if (!w.found)
		*reason = w.reason;
	return w.found;
}

/* A new stack wakes the consumer at once only if it holds a code object the consumer has not
 * been shown yet (it may be short-lived: a module body, exec'd code), or if this CPU has
 * stored FRESH_UNWOKEN new stacks since it last woke it (it reads each from the LRU stacks
 * map, which must not evict one first). A new stack of known code objects waits for the next
 * batch: its names are known, and its lines come from line tables read before. "Shown" is a
 * per-CPU set of (process, code object, checksum) from the new stacks stored here. */
#define TOLD 2048 /* 2-way: slots 2n and 2n+1; 16 KiB (a per-CPU value is at most 32 KiB) */
#define FRESH_UNWOKEN 8
struct told {
	__u64 key[TOLD];
	__u32 unwoken;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct told);
} told_map SEC(".maps");

struct told_walk {
	struct told *t;
	struct scratch *s;
	__u32 depth, tgid, news;
};

static long told_cb(__u32 i, void *ctx)
{
	struct told_walk *tw = ctx;
	if (i >= tw->depth)
		return 1;
	const struct pbp_frame *f = &tw->s->stack.frames[i & (PBP_MAX_DEPTH - 1)];
	__u64 key = (f->code ^ ((__u64)f->csum << 20) ^ ((__u64)tw->tgid << 44)) | 1;
	__u32 set = (__u32)((key * 0x9E3779B97F4A7C15ULL) >> 40) & (TOLD - 2);
	__u64 *a = &tw->t->key[set], *b = &tw->t->key[set + 1];
	if (*a == key || *b == key)
		return 0;
	*b = *a; /* the older one goes */
	*a = key;
	tw->news = 1;
	return 0;
}

/* Store the walked stack (unless known) and emit the sample. use_loop: bpf_loop is there
 * (without it every new stack wakes the consumer). */
static __always_inline int finish_walk(struct fwalk *w, __u64 now, __u32 tgid, __u32 tid, __u64 t,
				       int use_loop)
{
	struct scratch *s = w->s;
	if (s->chk.stale) /* what was walked is stale: no stack */
		return emit(now, tgid, tid, 0, 0, 0, PBP_ERR_CFRAME_STALE, 0);
	if (w->flags & PBP_F_TRUNCATED)
		stat_add(PBP_STAT_TRUNCATED, 1);
	if (!w->depth)
		return emit(now, tgid, tid, 0, 0, w->flags, w->reason ? w->reason : PBP_ERR_NO_FRAME, 0);

	__u64 id = w->hash ? w->hash : 1;
	int fresh = 0;
	__u64 *seen = &s->seen[id & (SEEN - 1)];
	if (*seen != id && !bpf_map_lookup_elem(&stacks, &id)) {
		s->stack.depth = w->depth;
		s->stack.pid = tgid;
		if (bpf_map_update_elem(&stacks, &id, &s->stack, BPF_NOEXIST) == 0) {
			stat_add(PBP_STAT_STACK_NEW, 1);
			fresh = 1;
		} else if (!bpf_map_lookup_elem(&stacks, &id)) {
			return emit(now, tgid, tid, 0, w->depth, w->flags, PBP_ERR_STACK_MAP, 0);
		}
	}
	*seen = id;
	int wake = fresh;
	if (fresh && use_loop) {
		__u32 zero = 0;
		struct told_walk tw = {};
		tw.t = bpf_map_lookup_elem(&told_map, &zero);
		tw.s = s;
		tw.depth = w->depth;
		tw.tgid = tgid;
		if (tw.t) {
			bpf_loop(PBP_MAX_DEPTH, told_cb, &tw, 0);
			wake = tw.news || ++tw.t->unwoken >= FRESH_UNWOKEN;
			if (wake)
				tw.t->unwoken = 0;
			else
				stat_add(PBP_STAT_FRESH_UNWOKEN, 1);
		}
	}
	if (t)
		tmark(PBP_STAT_T_STACKMAP, t);
	return emit(now, tgid, tid, id, w->depth, w->flags, w->reason, wake);
}

static __always_inline void nolp_save(struct scratch *s, const struct fwalk *w)
{
	struct nolp_state *n = &s->nolp;
	n->frame = w->frame;
	n->hash = w->hash;
	n->fc_base = w->fc_base;
	n->fc_len = w->fc_len;
	n->last_code = w->last_code;
	n->last_csum = w->last_csum;
	n->depth = w->depth;
	n->max_depth = w->max_depth;
	n->flags = w->flags;
	n->reason = w->reason;
}

static __always_inline void nolp_load(const struct scratch *s, struct fwalk *w)
{
	const struct nolp_state *n = &s->nolp;
	w->frame = n->frame;
	w->hash = n->hash;
	w->fc_base = n->fc_base;
	w->fc_len = n->fc_len;
	w->last_code = n->last_code;
	w->last_csum = n->last_csum;
	w->depth = n->depth;
	w->max_depth = n->max_depth;
	w->flags = n->flags;
	w->reason = n->reason;
}

static __always_inline int sample(void *ctx, int use_loop)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	if (!tgid)
		return 0;
	const struct pbp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
	if (!proc)
		return 0;

	__u64 now = bpf_ktime_get_ns();
	stat_add(PBP_STAT_SAMPLES, 1);

	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return 0;

	__u32 reason = PBP_OK;
	__u64 frame = 0, interp = 0;
	int have_frame = 0;
	__u64 ts = find_tstate(proc, s, pid_tgid, now, use_loop, &reason, &frame, &have_frame, &interp);
	__u64 t = tmark(PBP_STAT_T_TSTATE, now);
	if (!ts)
		return emit(now, tgid, tid, 0, 0, 0, reason, 0);

	const struct pbp_py_offsets *off = &proc->off;
	if (!have_frame)
		frame = rd_u64(ts + off->tstate_frame);
	__u64 expect = 0;
	s->chk.pending = 0;
	s->chk.stale = 0;
	if (frame && off->frame_kind == PBP_FRAME_INTERP_CFRAME) {
		/* tstate->cframe: current_frame and previous in one read */
		__u64 cf = frame;
		if (bpf_probe_read_user(s->cwin, PBP_CFRAME_WINDOW, (const void *)cf))
			return emit(now, tgid, tid, 0, 0, 0, PBP_ERR_READ_FRAME, 0);
		frame = win_u64(s->cwin, off->cframe_current_frame);
		if (off->frame_entry_off != PBP_OFF_NONE) {
			__u64 pcf = win_u64(s->cwin, off->cframe_previous);
			int root = cf == ts + off->tstate_root_cframe;
			/* Settled, the thread's root cframe has neither a frame nor a previous
			 * cframe, any other has both, and its previous one is readable. (Unsettled,
			 * both may read NULL: not a thread without Python frames.) */
			if ((!frame) != root || (!pcf) != root ||
			    (pcf && bpf_probe_read_user(&expect, sizeof(expect),
							(const void *)(pcf + off->cframe_current_frame))))
				return emit(now, tgid, tid, 0, 0, 0, PBP_ERR_CFRAME_STALE, 0);
			s->chk.expect = expect;
			s->chk.pending = 1;
		}
	}
	t = tmark(PBP_STAT_T_FRAME0, t);
	if (!frame)
		return emit(now, tgid, tid, 0, 0, 0, PBP_ERR_NO_FRAME, 0);

	/* 3.14+: the code generation, for the checksum cache (not with per-thread bytecode:
	 * its base is read from the code object) */
	s->cc.on = 0;
	if (off->interp_code_gen != PBP_OFF_NONE && off->code_tlbc == PBP_OFF_NONE && interp &&
	    !bpf_probe_read_user(&s->cc.gen, sizeof(s->cc.gen), (const void *)(interp + off->interp_code_gen))) {
		s->cc.on = 1;
		s->cc.interp = interp;
		s->cc.now = now;
		s->cc.tgid = tgid;
	}

	struct fwalk w = {};
	w.proc = proc;
	w.s = s;
	w.cc = bpf_map_lookup_elem(&ccache_map, &zero);
	w.frame = frame;
	w.hash = pbp_stack_hash_init(tgid, proc->generation);
	w.max_depth = proc->max_depth;
	if (use_loop) {
		if (w.max_depth > PBP_MAX_DEPTH)
			w.max_depth = PBP_MAX_DEPTH;
		bpf_loop(PBP_MAX_DEPTH + 1, fwalk_cb, &w, 0);
		t = tmark(PBP_STAT_T_WALK, t);
		return finish_walk(&w, now, tgid, tid, t, 1);
	}
	/* No bpf_loop: the walk goes on in walk_nolp, nolp_chunk frames per run. */
	if (w.max_depth > nolp_chunk * PBP_NOLP_RUNS)
		w.max_depth = nolp_chunk * PBP_NOLP_RUNS;
	nolp_save(s, &w);
	s->nolp.now = now;
	s->nolp.tgid = tgid;
	s->nolp.tid = tid;
	bpf_tail_call(ctx, &nolp_progs, 0);
	return emit(now, tgid, tid, 0, 0, 0, PBP_ERR_TAIL_CALL, 0);
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, 1);
}

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
	__u32 tgid = s->nolp.tgid, tid = s->nolp.tid;
	__u64 now = s->nolp.now;
	const struct pbp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
	if (!proc)
		return 0;
	struct fwalk w = {};
	w.proc = proc;
	w.s = s;
	w.cc = bpf_map_lookup_elem(&ccache_map, &zero);
	nolp_load(s, &w);
	int done = 0;
	for (int i = 0; i < PBP_NOLP_CHUNK; i++) {
		if (i >= nolp_chunk) /* a constant at load time: the verifier drops the rest */
			break;
		if (fwalk_step(&w)) {
			done = 1;
			break;
		}
	}
	if (!done) {
		nolp_save(s, &w);
		bpf_tail_call(ctx, &nolp_progs, 0);
		w.flags |= PBP_F_TRUNCATED; /* out of tail calls */
	}
	return finish_walk(&w, now, tgid, tid, 0, 0);
}

/* ---- process lifecycle ----------------------------------------------------- */

static __always_inline void emit_proc_event(__u32 type, __u32 tgid, __u32 ppid)
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
	e->cpu = bpf_get_smp_processor_id();
	/* wake the consumer at once: discovery latency matters more than batching */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

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
