/* SPDX-License-Identifier: GPL-2.0 */
/* --mode wall: where a tracked thread's pbp_offcpu entry lives, the open-addressed offcpu_slots
 * table. The protocol (home slot, probes, claims, spill, who frees) is described at struct
 * pbp_offcpu_slot in abi.h; userspace's half is userspace/engine/offcpu_table.cpp. Every entry
 * pointer comes from the one array map: the verifier keeps one state for it whichever slot it
 * is in (a second map for the threads whose home is taken doubled the scheduler program's
 * verification). */
#ifndef __PYBPFPROF_OFFCPU_TABLE_BPF_H__
#define __PYBPFPROF_OFFCPU_TABLE_BPF_H__

#include "maps.bpf.h"
#include "util.bpf.h"

/* Fetch-less atomic adds (BPF_XADD: every supported kernel); the result is never used, or clang
 * would emit a fetching add, which 5.10 refuses. */
#define offcpu_atomic_add(p, v) __sync_fetch_and_add((p), (v))

/* The j-th slot of tid's probe sequence (j = 0: its home). */
static __always_inline struct pbp_offcpu_slot *offcpu_probe(__u32 tid, __u32 j)
{
	__u32 k = PBP_OFFCPU_PROBE(tid, j, offcpu_slot_mask);
	return bpf_map_lookup_elem(&offcpu_slots, &k);
}

/* The entry of thread tid, or NULL when it is not tracked. A non-target costs one array lookup:
 * the other slots of its probe sequence are looked at only when an entry whose home is its home
 * went elsewhere. */
static __always_inline struct pbp_offcpu *offcpu_entry(__u32 tid)
{
	if (!tid)
		return NULL;
	struct pbp_offcpu_slot *home = offcpu_probe(tid, 0);
	if (!home)
		return NULL;
	if (home->tid == tid)
		return &home->e;
	if (!home->spill)
		return NULL;
	for (__u32 j = 1; j < PBP_OFFCPU_PROBES; j++) {
		struct pbp_offcpu_slot *sl = offcpu_probe(tid, j);
		if (sl && sl->tid == tid)
			return &sl->e;
	}
	return NULL;
}

/* A fresh entry for thread tid of tgid (the fork tracepoint's new thread). One already there (a
 * thread userspace seeded between its birth and this tracepoint) is started afresh, where it is.
 * None when the probe sequence's slots are all held (counted: PBP_STAT_OFFCPU_FULL). */
static __always_inline void offcpu_make(__u32 tid, __u32 tgid)
{
	struct pbp_offcpu *e = offcpu_entry(tid);
	if (e) {
		__builtin_memset(e, 0, sizeof(*e));
		e->tgid = tgid;
		return;
	}
	struct pbp_offcpu_slot *home = offcpu_probe(tid, 0);
	if (!home || !tid)
		return;
	for (__u32 j = 0; j < PBP_OFFCPU_PROBES; j++) {
		struct pbp_offcpu_slot *sl = offcpu_probe(tid, j);
		if (!sl || sl->tid || sl->claims)
			continue;
		if (j)
			offcpu_atomic_add(&home->spill, 1);
		offcpu_atomic_add(&sl->claims, 1);
		if (sl->claims == 1 && !sl->tid) {
			__builtin_memset(&sl->e, 0, sizeof(sl->e));
			sl->e.tgid = tgid;
			barrier();
			sl->tid = tid; /* whole before it is seen (x86: stores are not reordered) */
			if (j)
				stat_add(PBP_STAT_OFFCPU_SPILLED, 1);
			return;
		}
		offcpu_atomic_add(&sl->claims, -1);
		if (j)
			offcpu_atomic_add(&home->spill, -1);
	}
	stat_add(PBP_STAT_OFFCPU_FULL, 1);
}

/* Thread tid is no longer tracked: its entry e (offcpu_entry's) is freed. */
static __always_inline void offcpu_free(__u32 tid, struct pbp_offcpu *e)
{
	struct pbp_offcpu_slot *sl =
		(struct pbp_offcpu_slot *)((__u8 *)e - __builtin_offsetof(struct pbp_offcpu_slot, e));
	sl->tid = 0;
	barrier();
	offcpu_atomic_add(&sl->claims, -1);
	struct pbp_offcpu_slot *home = offcpu_probe(tid, 0);
	if (home && home != sl)
		offcpu_atomic_add(&home->spill, -1);
}

#endif /* __PYBPFPROF_OFFCPU_TABLE_BPF_H__ */
