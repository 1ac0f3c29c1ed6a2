// SPDX-License-Identifier: GPL-2.0
/* --mode wall --native, a thread asleep since before its session began: its user registers as
 * it entered the kernel. /proc/PID/task/TID/syscall gives its sp and pc, not its rbp, without
 * which frame-pointer code (a CFA rule on rbp) ends the unwind. An iter/task program apart from
 * the sampler's object (userspace/native/task_regs.cpp): run by userspace for one thread at a
 * time (its link's task.tid, 6.1+), never on a sample's path; a kernel that cannot load or run
 * it leaves the /proc read as it was. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "pybpfprof/abi.h"

char LICENSE[] SEC("license") = "GPL";

SEC("iter/task")
int task_regs(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!task)
		return 0;
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!r)
		return 0;
	struct pbp_task_regs out = {};
	out.tgid = BPF_CORE_READ(task, tgid);
	out.tid = BPF_CORE_READ(task, pid);
	out.ip = BPF_CORE_READ(r, ip);
	out.sp = BPF_CORE_READ(r, sp);
	out.bp = BPF_CORE_READ(r, bp);
	bpf_seq_write(ctx->meta->seq, &out, sizeof(out));
	return 0;
}
