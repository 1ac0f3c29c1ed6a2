/* SPDX-License-Identifier: GPL-2.0 */
/* The walk over a thread's CPython frames: where it starts, and one step per frame. */
#ifndef __PYBPFPROF_FRAME_WALK_BPF_H__
#define __PYBPFPROF_FRAME_WALK_BPF_H__

#include "util.bpf.h"

/* The code cache slot of a code object's address. */
static __always_inline __u32 code_cache_slot(__u64 code)
{
	return (__u32)((code * 0x9E3779B97F4A7C15ULL) >> 56) & (CODE_CACHE_SLOTS - 1);
}

/* A walk in progress: the pointers it works with (on the stack only) and its state (the
 * walk with bpf_loop keeps it here; the one without keeps it in the scratch map). */
struct frame_walk {
	const struct pbp_proc *proc;
	struct scratch *s;
	struct code_cache *code_cache; /* the code generation cache (3.14+), if s->code_gen.on */
	struct walk_state st;
};

static __always_inline __u32 code_csum(const struct pbp_py_offsets *off, const __u8 *code_win)
{
	__u32 acc = 0;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		__u8 sz = off->csum_size[i];
		if (sz == 8) {
			__u64 v = win_u64(code_win, off->csum_off[i]);
			if (off->csum_str_mask & (1u << i)) {
				v = rd_u64(v + PBP_STR_HASH_OFF);
				timing_count(PBP_STAT_N_STR_READS);
			}
			acc = pbp_csum_step(acc, v);
		} else if (sz == 4)
			acc = pbp_csum_step(acc, win_u32(code_win, off->csum_off[i]));
	}
	return acc;
}

/* Resolve the bytecode base the instruction pointer points into. */
static __always_inline __u64 bytecode_base(const struct pbp_py_offsets *off, __u64 code,
					   const __u8 *frame_win, const __u8 *code_win)
{
	__u64 base = code + off->code_adaptive;
	if (off->frame_tlbc_index != PBP_OFF_NONE && off->code_tlbc != PBP_OFF_NONE) {
		__s32 idx = (__s32)win_u32(frame_win, off->frame_tlbc_index);
		__u64 arr = win_u64(code_win, off->code_tlbc);
		/* _PyCodeArray { Py_ssize_t size; char *entries[]; } */
		if (idx > 0 && arr) {
			__u64 e = rd_u64(arr + 8 + 8 * (__u64)(idx & 0xffff));
			if (e)
				base = e;
		}
	}
	return base;
}

/* 3.11/3.12: arms the cframe check of the walk to come from tstate ts's cframe cf (current frame
 * *frame, previous cframe pcf): settled, the thread's root cframe has neither a frame nor a
 * previous cframe, any other has both, and its previous one is readable. (Unsettled, both may
 * read NULL: not a thread without Python frames.) */
static __always_inline __u32 cframe_check_arm(const struct pbp_py_offsets *off, struct scratch *s,
					      __u64 ts, __u64 cf, __u64 frame, __u64 pcf)
{
	__u64 expect = 0;
	int root = cf == ts + off->tstate_root_cframe;
	if ((!frame) != root || (!pcf) != root ||
	    (pcf && bpf_probe_read_user(&expect, sizeof(expect), (const void *)(pcf + off->cframe_current_frame))))
		return PBP_ERR_CFRAME_STALE;
	s->cframe_check.expect = expect;
	s->cframe_check.pending = 1;
	return PBP_OK;
}

/* The thread's first frame, from its thread state's frame field (read here unless have_frame:
 * *frame holds it); on 3.11/3.12 through tstate->cframe, arming the cframe check unless
 * *cframe is given: then *cframe and *pcf get what cframe_check_arm needs, for the caller to arm
 * it later, only if it walks (the switch-out of wall mode, which mostly does not). Returns
 * PBP_OK (*frame 0: no Python frame) or why the sample has no stack. */
static __always_inline __u32 first_frame(const struct pbp_py_offsets *off, struct scratch *s,
					 __u64 ts, int have_frame, __u64 *frame, __u64 *cframe, __u64 *pcf_out)
{
	if (!have_frame)
		*frame = rd_u64(ts + off->tstate_frame);
	s->cframe_check.pending = 0;
	s->cframe_check.stale = 0;
	if (*frame && off->frame_kind == PBP_FRAME_INTERP_CFRAME) {
		/* tstate->cframe: current_frame and previous in one read */
		__u64 cf = *frame;
		if (bpf_probe_read_user(s->code_window, PBP_CFRAME_WINDOW, (const void *)cf))
			return PBP_ERR_READ_FRAME;
		*frame = win_u64(s->code_window, off->cframe_current_frame);
		if (off->frame_entry_off != PBP_OFF_NONE) {
			__u64 pcf = win_u64(s->code_window, off->cframe_previous);
			if (cframe) {
				*cframe = cf;
				*pcf_out = pcf;
				return PBP_OK;
			}
			return cframe_check_arm(off, s, ts, cf, *frame, pcf);
		}
	}
	return PBP_OK;
}

/* 3.14+: this sample's code generation, for the checksum cache (not with per-thread bytecode:
 * its base is read from the code object). */
static __always_inline void code_gen_read(const struct pbp_py_offsets *off, struct scratch *s,
					  __u64 interp, __u64 now, __u32 tgid)
{
	s->code_gen.on = 0;
	if (off->interp_code_gen != PBP_OFF_NONE && off->code_tlbc == PBP_OFF_NONE && interp &&
	    !bpf_probe_read_user(&s->code_gen.gen, sizeof(s->code_gen.gen),
				 (const void *)(interp + off->interp_code_gen))) {
		s->code_gen.on = 1;
		s->code_gen.interp = interp;
		s->code_gen.now = now;
		s->code_gen.tgid = tgid;
	}
}

/* Before its first entry frame, the walk met what a settled tstate->cframe never shows: the
 * sample was taken while the eval loop was being entered (see abi.h). What was walked is
 * stale: drop it, and mark the sample. */
static __always_inline void frame_walk_stale(struct scratch *s)
{
	s->cframe_check.stale |= s->cframe_check.pending;
}

/* --native, 3.12+: a shim frame follows the entry frame of its eval-loop call, the last one
 * stored: mark it, and fold the mark into the stack id (the frame was hashed before it was known
 * to be an entry frame; the same frames entered differently are different stacks). */
static __always_inline void native_mark_entry(struct scratch *s, struct walk_state *st)
{
	__u32 d = st->depth;
	if (!d || d > PBP_MAX_DEPTH)
		return;
	struct pbp_frame *f = &s->stack.frames[(d - 1) & (PBP_MAX_DEPTH - 1)];
	if (f->instr == PBP_INSTR_UNKNOWN || (f->instr & PBP_INSTR_ENTRY))
		return;
	f->instr |= PBP_INSTR_ENTRY;
	st->hash = pbp_mix64(st->hash ^ 0x454e545259ULL ^ d);
}

/* One frame of walk w, whose state is st. Returns 1 to stop. */
static __always_inline int frame_walk_step(struct frame_walk *w, struct walk_state *st)
{
	const struct pbp_py_offsets *off = &w->proc->off;
	struct scratch *s = w->s;
	__u32 len;

	if (!st->frame) { /* the chain's end: before its first entry frame, a stale cframe */
		frame_walk_stale(s);
		return 1;
	}
	if (st->depth >= st->max_depth) {
		st->flags |= PBP_F_TRUNCATED;
		return 1;
	}
	len = off->frame_read_len;
	if (len > PBP_WINDOW)
		len = PBP_WINDOW;
	__u64 cur = st->frame;
	if (!(cur >= st->fc_base && cur + len <= st->fc_base + st->fc_len)) {
		/* Miss: read from the frame's page floor (mapped, since the frame is) up to the
		 * frame's end; frame objects (<= 3.10) are scattered, so just the frame. */
		__u64 end = cur + len;
		__u64 start = off->frame_kind == PBP_FRAME_OBJECT ? cur : cur & ~4095ULL;
		if (end - start > FRAME_CACHE)
			start = end - FRAME_CACHE;
		/* 1 .. FRAME_CACHE, in a form the verifier can bound whatever clang does */
		__u32 n = (((__u32)(end - start) - 1) & (FRAME_CACHE - 1)) + 1;
		if (len == 0 || bpf_probe_read_user(s->frame_cache, n, (const void *)start)) {
			frame_walk_stale(s);
			st->flags |= PBP_F_PARTIAL;
			st->reason = PBP_ERR_READ_FRAME;
			return 1;
		}
		st->fc_base = start;
		st->fc_len = n;
		timing_count(PBP_STAT_N_FRAME_READS);
	}
	const __u8 *frame_win = s->frame_cache + ((cur - st->fc_base) & (FRAME_CACHE - 1));
	st->frame = win_u64(frame_win, off->frame_previous);
	if (st->frame == cur) /* self-loop in freed memory */
		st->frame = 0;
	/* The first entry frame must link to the previous cframe's current frame. */
	if (win_u8(frame_win, off->frame_entry_off) == off->frame_entry_val) {
		s->cframe_check.stale |=
			s->cframe_check.pending & (st->frame != s->cframe_check.expect);
		s->cframe_check.pending = 0;
	}

	if (off->frame_owner != PBP_OFF_NONE) {
		__u8 owner = win_u8(frame_win, off->frame_owner);
		if (native_capture && (w->proc->flags & PBP_PROC_NATIVE) &&
		    off->native_entry == PBP_NATIVE_ENTRY_SHIM && owner == off->native_shim_owner)
			native_mark_entry(s, st);
		if (owner < 32 && (off->skip_owner_mask & (1u << owner)))
			return 0; /* C-stack / shim frame: not Python */
	}
	__u64 code = win_u64(frame_win, off->frame_code) & ~(__u64)off->executable_tag_mask;
	if (!code)
		return 0;

	__u32 csum;
	struct code_cache_entry *ce = 0;
	int cached = 0;
	if (code == st->last_code) {
		csum = st->last_csum;
		cached = 1;
	} else if (s->code_gen.on && w->code_cache) {
		ce = &w->code_cache->e[code_cache_slot(code)];
		if (ce->code == code && ce->gen == s->code_gen.gen &&
		    ce->interp == s->code_gen.interp && ce->tgid == s->code_gen.tgid &&
		    ce->pgen == w->proc->generation &&
		    s->code_gen.now - ce->ts < CODE_CACHE_TTL_NS) {
			csum = ce->csum;
			st->last_code = code;
			st->last_csum = csum;
			cached = 1;
			timing_count(PBP_STAT_N_CODE_CACHED);
		}
	}
	if (!cached) {
		len = off->code_read_len;
		if (len > PBP_WINDOW)
			len = PBP_WINDOW;
		if (len == 0 || bpf_probe_read_user(s->code_window, len, (const void *)code)) {
			frame_walk_stale(s);
			st->flags |= PBP_F_PARTIAL;
			st->reason = PBP_ERR_READ_CODE;
			return 1;
		}
		timing_count(PBP_STAT_N_CODE_READS);
		if (w->proc->code_type_addr &&
		    win_u64(s->code_window, off->code_ob_type) != w->proc->code_type_addr) {
			frame_walk_stale(s); /* 3.11/3.12 frames always hold a code object */
			stat_add(PBP_STAT_REASON_BASE + PBP_ERR_NOT_CODE, 1);
			return 0; /* 3.13+: f_executable may be None or another object */
		}
		csum = code_csum(off, s->code_window);
		st->last_code = code;
		st->last_csum = csum;
		if (ce) {
			ce->code = code;
			ce->interp = s->code_gen.interp;
			ce->gen = s->code_gen.gen;
			ce->ts = s->code_gen.now;
			ce->tgid = s->code_gen.tgid;
			ce->pgen = w->proc->generation;
			ce->csum = csum;
		}
	}

	__u32 instr = PBP_INSTR_UNKNOWN;
	if (off->instr_kind == PBP_INSTR_PTR) {
		__u64 ip = win_u64(frame_win, off->frame_instr);
		__u64 base = bytecode_base(off, code, frame_win, s->code_window);
		if (ip >= base && ip - base < 0x1ffffffffULL)
			instr = (__u32)((ip - base) >> 1);
		else if (ip && ip < base)
			instr = 0; /* 3.11/3.12: prev_instr is one before the first unit */
	} else {
		__s32 lasti = (__s32)win_u32(frame_win, off->frame_instr);
		instr = lasti < 0 ? 0 : (__u32)lasti;
	}

	__u32 d = st->depth;
	if (d >= PBP_MAX_DEPTH)
		return 1;
	struct pbp_frame *f = &s->stack.frames[d & (PBP_MAX_DEPTH - 1)];
	f->code = code;
	/* --native: this frame is an eval-loop call's first (3.11+'s flag). Tested here, where it is
	 * stored, not kept in a variable from above: a value the verifier knows, live across the
	 * code object's reads, had it explore them twice (the sampler with --native: 504k
	 * instructions on 6.18, 386k with this; 6.12's verifier 698k). */
	if (native_capture && (w->proc->flags & PBP_PROC_NATIVE) && off->native_entry == PBP_NATIVE_ENTRY_FLAG &&
	    instr != PBP_INSTR_UNKNOWN && win_u8(frame_win, off->frame_entry_off) == off->frame_entry_val)
		instr |= PBP_INSTR_ENTRY;
	f->instr = instr;
	f->csum = csum;
	st->hash = pbp_stack_hash_step(st->hash, f);
	st->depth = d + 1;
	return 0;
}

/* One frame per callback: unrolling 4 steps into it saved ~10% per frame but made the
 * verifier take 0.7 s longer at every start. */
static long frame_walk_cb(__u32 i, void *ctx)
{
	struct frame_walk *w = ctx;
	return frame_walk_step(w, &w->st);
}

#endif /* __PYBPFPROF_FRAME_WALK_BPF_H__ */
