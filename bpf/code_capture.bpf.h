/* SPDX-License-Identifier: GPL-2.0 */
/* Code object identities: a copy of each code object a new stack holds, taken the first time it
 * is met (per process and registration generation), with its name, qualified name, file and line
 * table. Userspace names frames from it when the code object is gone before it reads it (module
 * bodies run once and are freed within ms of an import; exec'd code). See pbp_code_event. */
#ifndef __PYBPFPROF_CODE_CAPTURE_BPF_H__
#define __PYBPFPROF_CODE_CAPTURE_BPF_H__

#include "util.bpf.h"

/* Copy region i (a str, or for the line table a bytes object) at addr into e: as much of its
 * capacity as is readable, the rest of the page at least (the object may end near a mapping's
 * end: a read past it fails whole). */
static __always_inline void code_capture_region(struct pbp_code_event *e, int i, __u64 addr)
{
	const __u32 cap = PBP_CODE_DATA_CAP(i);
	__u8 *dst = e->data + PBP_CODE_DATA_OFF(i);
	if (!addr)
		return;
	if (!bpf_probe_read_user(dst, cap, (const void *)addr)) {
		e->addr[i] = addr;
		e->len[i] = cap;
		return;
	}
	__u32 n = 4096 - (__u32)(addr & 4095);
	if (n > cap)
		n = cap;
	if (n == 0 || bpf_probe_read_user(dst, n, (const void *)addr))
		return;
	e->addr[i] = addr;
	e->len[i] = n;
}

/* The identity of frame f's code object (process tgid, thread tid), unless captured before. On
 * the thread that runs it (the sample's or the switch-out's), so its memory is readable. */
static __always_inline void code_capture(const struct pbp_proc *proc, __u32 tgid, __u32 tid,
					 const struct pbp_frame *f, __u64 now)
{
	const struct pbp_py_offsets *off = &proc->off;
	__u32 len = off->code_ident_len;
	if (!len || len > PBP_WINDOW || !f->code)
		return;
	struct code_known_key k = {};
	k.tgid = tgid;
	k.generation = proc->generation;
	k.code = f->code;
	k.csum = f->csum;
	if (bpf_map_lookup_elem(&code_known, &k))
		return;
	/* Samples first: a copy is ~5.5 KiB, and a storm of new processes (each with its start-up's
	 * ~150 code objects) would fill the ring buffer and lose samples. Past half full, the code
	 * object is read live instead (it was not marked captured: a later new stack may). The half
	 * left holds 14,000 samples of 72 bytes per MiB: seconds of every CPU at 999 Hz. */
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 2) {
		stat_add(PBP_STAT_CODE_DROP, 1);
		return;
	}
	struct pbp_code_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		stat_add(PBP_STAT_CODE_DROP, 1);
		return;
	}
	e->ts_ns = now;
	e->type = PBP_EV_CODE;
	e->pid = tgid;
	e->tid = tid;
	e->cpu = bpf_get_smp_processor_id();
	e->code = f->code;
	e->csum = f->csum;
	e->generation = proc->generation;
#pragma unroll
	for (int i = 0; i < PBP_CODE_REGIONS; i++) {
		e->addr[i] = 0;
		e->len[i] = 0;
	}
	e->_pad[0] = e->_pad[1] = e->_pad[2] = 0;
	if (bpf_probe_read_user(e->data, len, (const void *)f->code)) {
		bpf_ringbuf_discard(e, 0);
		return;
	}
	e->addr[0] = f->code;
	e->len[0] = len;
#pragma unroll
	for (int i = 0; i < PBP_CODE_IDENT_PTRS; i++) {
		__u16 o = off->code_ident[i];
		if (o && o != PBP_OFF_NONE)
			code_capture_region(e, 1 + i, win_u64(e->data, o));
	}
	/* Queued before the sample's record: the consumer reads them in this order. */
	bpf_ringbuf_submit(e, 0);
	__u8 one = 1;
	bpf_map_update_elem(&code_known, &k, &one, BPF_ANY);
	stat_add(PBP_STAT_CODE_SENT, 1);
}

#endif /* __PYBPFPROF_CODE_CAPTURE_BPF_H__ */
