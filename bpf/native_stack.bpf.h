/* SPDX-License-Identifier: GPL-2.0 */
/* --native's copy of the user stack, on its own: it needs only the ABI and the probe-read helper,
 * so tools/bench/ehframe/ (the stack copy measured against .eh_frame tables walked in BPF) uses
 * these very functions, not a copy of them. (The product's capture, native.bpf.h, makes its whole
 * read straight into the ring-buffer record, bounds a main thread's copy by its initial sp, and
 * uses native_copy_stack_pages for a stack whose mapping ends within PBP_NATIVE_USTACK.) */
#ifndef __PYBPFPROF_NATIVE_STACK_BPF_H__
#define __PYBPFPROF_NATIVE_STACK_BPF_H__

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "pybpfprof/abi.h"

/* The user stack from sp page by page, until a page fails (the top of a thread's stack, with a
 * guard page or nothing above) or PBP_NATIVE_USTACK bytes are copied. Returns the bytes copied. */
static __always_inline __u32 native_copy_stack_pages(struct pbp_native_event *n, __u64 sp)
{
	__u32 got = 0;
	__u32 first = PBP_NATIVE_PAGE - (__u32)(sp & (PBP_NATIVE_PAGE - 1));
	if (bpf_probe_read_user(n->ustack, first, (const void *)sp))
		return 0;
	got = first;
#pragma unroll
	for (int i = 0; i < PBP_NATIVE_USTACK / PBP_NATIVE_PAGE - 1; i++) {
		if (got > PBP_NATIVE_USTACK - PBP_NATIVE_PAGE)
			break;
		if (bpf_probe_read_user(n->ustack + (got & (PBP_NATIVE_USTACK - 1)),
					PBP_NATIVE_PAGE, (const void *)(sp + got)))
			break;
		got += PBP_NATIVE_PAGE;
	}
	return got;
}

/* The user stack from sp, as much of PBP_NATIVE_USTACK as is mapped: one read when all of it
 * is (the common case), else page by page. Returns the bytes copied. */
static __always_inline __u32 native_copy_stack(struct pbp_native_event *n, __u64 sp)
{
	if (!bpf_probe_read_user(n->ustack, PBP_NATIVE_USTACK, (const void *)sp))
		return PBP_NATIVE_USTACK;
	return native_copy_stack_pages(n, sp);
}

#endif /* __PYBPFPROF_NATIVE_STACK_BPF_H__ */
