/* SPDX-License-Identifier: GPL-2.0 */
/* Bench-only prototype (not product code): native unwinding of one process in BPF with
 * .eh_frame turned into compact tables (the OpenTelemetry eBPF profiler's way), against the
 * user-stack copy that pybpfprof --native sends to userspace (bpf/native.bpf.h), in the same
 * program shell so that their costs compare directly. See tools/bench/ehframe/README.md. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "pybpfprof/abi.h"
#include "ehframe.h"
/* pybpfprof's own capture, for the copy mode and --verify */
#include "native_stack.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 target_tgid = 0;
const volatile __u32 mode = EHF_MODE_WALK;
const volatile __u32 max_frames = EHF_MAX_FRAMES;
const volatile __u32 verify = 0; /* walk mode: also send the stack copy, for libdwfl to unwind */
const volatile __u32 use_index = 0; /* walk mode: search the rows of the pc's page only */
/* walk mode: first copy this much of the stack from sp (one read; to the page's end when that
 * fails) into the scratch, and read the frames inside it from there (a power of two, <= 16 KiB) */
const volatile __u32 buf_bytes = 0;
__u32 nmappings = 0;             /* set by userspace before attaching */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EHF_MAX_MAPPINGS);
	__type(key, __u32);
	__type(value, struct ehf_mapping);
} mappings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* sized by userspace */
	__type(key, __u32);
	__type(value, struct ehf_row);
} rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* sized by userspace */
	__type(key, __u32);
	__type(value, struct ehf_page);
} pages SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20);
} events SEC(".maps");

struct scratch {
	struct ehf_event ev;
	struct pbp_native_event nev;
	__u8 slack[PBP_NATIVE_PAGE]; /* as bpf/maps.bpf.h native_scratch: a page read at any masked offset stays in */
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

/* counters: [0] walk ns summed, [1] walked frames, [2] samples, [3] bytes sent, [4] drops */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 k, __u64 v)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &k);
	if (c)
		*c += v;
}

struct walk {
	struct ehf_event *ev;
	__u64 pc, sp, bp;
	__u32 bp_valid;
	__u64 buf_lo, buf_len; /* buf_bytes: the stack copied at [buf_lo, buf_lo + buf_len) */
};

/* size bytes (8 or 16) of user memory at addr: from the copy when it holds them, else read */
static __always_inline long read_user(struct walk *w, void *dst, __u32 size, __u64 addr)
{
	if (buf_bytes && addr >= w->buf_lo && addr + size <= w->buf_lo + w->buf_len) {
		__u32 zero = 0;
		struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
		__u64 off = addr - w->buf_lo;
		if (s && off <= PBP_NATIVE_USTACK - 16) {
			if (size == 16)
				__builtin_memcpy(dst, s->nev.ustack + off, 16);
			else
				__builtin_memcpy(dst, s->nev.ustack + off, 8);
			return 0;
		}
	}
	return bpf_probe_read_user(dst, size, (const void *)addr);
}

/* The mapping holding pc: binary search over the sorted array. */
static __always_inline struct ehf_mapping *find_mapping(__u64 pc)
{
	__u32 lo = 0, hi = nmappings;
	if (hi > EHF_MAX_MAPPINGS)
		hi = EHF_MAX_MAPPINGS;
	for (int i = 0; i < 8 && lo < hi; i++) {
		__u32 mid = (lo + hi) / 2;
		struct ehf_mapping *m = bpf_map_lookup_elem(&mappings, &mid);
		if (!m)
			return 0;
		if (pc < m->start)
			hi = mid;
		else if (pc >= m->end)
			lo = mid + 1;
		else
			return m;
	}
	return 0;
}

/* The last row of [first, first + n) whose pc <= off. */
static __always_inline struct ehf_row *find_row(__u32 first, __u32 n, __u32 off)
{
	__u32 lo = first, hi = first + n;
	for (int i = 0; i < 24 && lo < hi; i++) {
		__u32 mid = lo + (hi - lo) / 2;
		struct ehf_row *r = bpf_map_lookup_elem(&rows, &mid);
		if (!r)
			return 0;
		if (r->pc <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == first)
		return 0;
	__u32 idx = lo - 1;
	return bpf_map_lookup_elem(&rows, &idx);
}

static long step(__u32 i, void *arg)
{
	struct walk *w = arg;
	struct ehf_event *ev = w->ev;
	ev->pcs[i & (EHF_MAX_FRAMES - 1)] = w->pc;
	ev->n = i + 1;
	/* a return address points after the call: look its caller's row up at the call */
	__u64 look = i ? w->pc - 1 : w->pc;
	struct ehf_mapping *m = find_mapping(look);
	if (!m) {
		ev->end = EHF_END_NO_MAPPING;
		return 1;
	}
	__u64 off = look - m->bias;
	struct ehf_row *r = 0;
	if (use_index) {
		if (off >= m->page_lo && ((off - m->page_lo) >> EHF_PAGE_SHIFT) < m->npages) {
			__u32 pi = m->page_start + (__u32)((off - m->page_lo) >> EHF_PAGE_SHIFT);
			struct ehf_page *p = bpf_map_lookup_elem(&pages, &pi);
			if (p)
				r = find_row(p->first, p->count, (__u32)off);
		}
	} else {
		r = find_row(m->row_start, m->row_count, (__u32)off);
	}
	__u64 cfa, ra = 0, nbp = w->bp;
	__u64 pair[2];
	if (!r)
		goto no_cfi;
	switch (EHF_KIND(r)) {
	case EHF_ROW_CFA_RSP:
		cfa = w->sp + r->cfa_off;
		break;
	case EHF_ROW_CFA_RBP:
		if (!w->bp_valid) {
			ev->end = EHF_END_REGISTER;
			return 1;
		}
		cfa = w->bp + r->cfa_off;
		break;
	case EHF_ROW_END:
		ev->end = EHF_END_OUTERMOST;
		return 1;
	case EHF_ROW_NO_CFI:
	no_cfi:
		/* as libdwfl's x86_64 backend: frame pointers where there is no CFI */
		if (!w->bp_valid || !w->bp) {
			ev->end = EHF_END_NO_CFI;
			return 1;
		}
		if (read_user(w, pair, sizeof(pair), w->bp)) {
			ev->end = EHF_END_READ;
			return 1;
		}
		ev->fp_frames++;
		w->sp = w->bp + 16;
		w->bp = pair[0];
		w->pc = pair[1];
		if (!w->pc) {
			ev->end = EHF_END_OUTERMOST;
			return 1;
		}
		return 0;
	default:
		ev->end = EHF_END_UNSUPPORTED;
		return 1;
	}
	if (EHF_RBP_RULE(r) == EHF_RBP_AT_CFA && r->rbp_off8 == -2) {
		/* the common case: saved rbp and the return address side by side, one read */
		if (read_user(w, pair, sizeof(pair), cfa - 16)) {
			ev->end = EHF_END_READ;
			return 1;
		}
		nbp = pair[0];
		ra = pair[1];
		w->bp_valid = 1;
	} else {
		if (read_user(w, &ra, sizeof(ra), cfa - 8)) {
			ev->end = EHF_END_READ;
			return 1;
		}
		if (EHF_RBP_RULE(r) == EHF_RBP_AT_CFA) {
			if (read_user(w, &nbp, sizeof(nbp), cfa + 8 * (__s64)r->rbp_off8)) {
				ev->end = EHF_END_READ;
				return 1;
			}
			w->bp_valid = 1;
		} else if (EHF_RBP_RULE(r) == EHF_RBP_UNDEFINED) {
			w->bp_valid = 0;
		}
	}
	if (!ra) {
		ev->end = EHF_END_OUTERMOST;
		return 1;
	}
	w->sp = cfa;
	w->bp = nbp;
	w->pc = ra;
	return 0;
}

static __always_inline void send_copy(struct bpf_perf_event_data *ctx, struct pbp_native_event *n,
				      struct ehf_event *ev, __u32 kernel)
{
	n->ts_ns = ev->ts_ns;
	n->type = EHF_EV_COPY;
	n->pid = ev->pid;
	n->tid = ev->tid;
	n->cpu = ev->cpu;
	n->ip = ev->ip;
	n->sp = ev->sp;
	n->bp = ev->bp;
	n->flags = kernel ? PBP_NATIVE_F_KERNEL : 0;
	n->kdepth = 0;
	if (kernel) {
		long kb = bpf_get_stack(ctx, n->kstack, sizeof(n->kstack), 0);
		if (kb > 0)
			n->kdepth = (__u16)(kb / 8);
	}
	n->ustack_len = ev->sp ? native_copy_stack(n, ev->sp) : 0;
	if (n->ustack_len < PBP_NATIVE_USTACK)
		n->flags |= PBP_NATIVE_F_SHORT;
	__u32 len = PBP_NATIVE_HEADER_BYTES + (n->ustack_len & (PBP_NATIVE_USTACK * 2 - 1));
	if (len > sizeof(*n))
		len = sizeof(*n);
	if (len < PBP_NATIVE_HEADER_BYTES)
		len = PBP_NATIVE_HEADER_BYTES;
	if (bpf_ringbuf_output(&events, n, len, BPF_RB_NO_WAKEUP))
		count(4, 1);
	else
		count(3, len);
}

SEC("perf_event")
int ehf_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	if ((__u32)(id >> 32) != target_tgid)
		return 0;
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	__u64 t0 = bpf_ktime_get_ns();
	struct ehf_event *ev = &s->ev;
	ev->ts_ns = t0;
	ev->type = EHF_EV_WALK;
	ev->pid = id >> 32;
	ev->tid = (__u32)id;
	ev->cpu = bpf_get_smp_processor_id();
	ev->n = 0;
	ev->end = EHF_END_MAX_FRAMES;
	ev->fp_frames = 0;
	ev->flags = 0;

	__u64 cs = *(__u64 *)((char *)&ctx->regs + __builtin_offsetof(struct pt_regs, cs));
	__u32 kernel = !(cs & 3);
	if (!kernel) {
		ev->ip = ctx->regs.ip;
		ev->sp = ctx->regs.sp;
		ev->bp = ctx->regs.bp;
	} else {
		ev->flags |= PBP_NATIVE_F_KERNEL;
		struct pt_regs *ur = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		ev->ip = ur ? BPF_CORE_READ(ur, ip) : 0;
		ev->sp = ur ? BPF_CORE_READ(ur, sp) : 0;
		ev->bp = ur ? BPF_CORE_READ(ur, bp) : 0;
	}

	if (mode == EHF_MODE_COPY) {
		send_copy(ctx, &s->nev, ev, kernel);
		count(0, bpf_ktime_get_ns() - t0);
		count(2, 1);
		return 0;
	}
	if (mode == EHF_MODE_WALK && ev->ip && ev->sp) {
		if (kernel) {
			/* the kernel frames, as pybpfprof takes them (both approaches need them) */
			long kb = bpf_get_stack(ctx, s->nev.kstack, sizeof(s->nev.kstack), 0);
			ev->kdepth = kb > 0 ? (__u32)kb / 8 : 0;
		}
		struct walk w = {.ev = ev, .pc = ev->ip, .sp = ev->sp, .bp = ev->bp, .bp_valid = 1};
		if (buf_bytes) {
			__u32 want = buf_bytes & (PBP_NATIVE_USTACK * 2 - 1);
			if (want > PBP_NATIVE_USTACK)
				want = PBP_NATIVE_USTACK;
			if (want && !bpf_probe_read_user(s->nev.ustack, want, (const void *)ev->sp)) {
				w.buf_len = want;
			} else {
				__u32 first = PBP_NATIVE_PAGE - (__u32)(ev->sp & (PBP_NATIVE_PAGE - 1));
				if (!bpf_probe_read_user(s->nev.ustack, first, (const void *)ev->sp))
					w.buf_len = first;
			}
			w.buf_lo = ev->sp;
		}
		bpf_loop(max_frames, step, &w, 0);
	}
	ev->walk_ns = bpf_ktime_get_ns() - t0;
	count(1, ev->n);
	count(2, 1);
	__u32 len = offsetof(struct ehf_event, pcs) + 8 * (ev->n & (EHF_MAX_FRAMES - 1));
	if (ev->n >= EHF_MAX_FRAMES)
		len = sizeof(*ev);
	if (len > sizeof(*ev))
		len = sizeof(*ev);
	if (bpf_ringbuf_output(&events, ev, len, BPF_RB_NO_WAKEUP))
		count(4, 1);
	else
		count(3, len);
	/* in-program time, the record included (as the copy mode's) */
	count(0, bpf_ktime_get_ns() - t0);
	if (verify)
		send_copy(ctx, &s->nev, ev, 0);
	return 0;
}
