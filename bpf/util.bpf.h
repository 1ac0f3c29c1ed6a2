/* SPDX-License-Identifier: GPL-2.0 */
/* Statistics, section timing, user memory reads and loads from read windows. */
#ifndef __PYBPFPROF_UTIL_BPF_H__
#define __PYBPFPROF_UTIL_BPF_H__

#include "maps.bpf.h"

/* One load or store of a map value field that another CPU may write or read meanwhile. */
#ifndef READ_ONCE
#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))
#endif

static __always_inline void stat_add(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);
	if (v)
		*v += n;
}

/* Section timing: add the time since prev to stat idx and return now (0 when off). */
static __always_inline __u64 time_section(__u32 idx, __u64 prev)
{
	if (!section_timing)
		return 0;
	__u64 t = bpf_ktime_get_ns();
	stat_add(idx, t - prev);
	return t;
}

/* Section timing: count one event (a probe read, a cache hit) into stat idx. */
static __always_inline void timing_count(__u32 idx)
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

#endif /* __PYBPFPROF_UTIL_BPF_H__ */
