#include "native/task_regs.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "pybpfprof/abi.h"
#include "task_regs.skel.h"

namespace pbp::native {

namespace {

std::mutex regs_mu;
task_regs_bpf* regs_skel = nullptr;
bool regs_tried = false;

}  // namespace

std::optional<TaskRegs> read_task_regs(pid_t pid, pid_t tid, bool every_task) {
    std::lock_guard<std::mutex> lock(regs_mu);
    if (!regs_tried) {
        regs_tried = true;
        regs_skel = task_regs_bpf__open_and_load();  // (null: the /proc read stays as it is)
    }
    if (!regs_skel || pid <= 0 || tid <= 0) return std::nullopt;
    union bpf_iter_link_info info {};
    info.task.tid = static_cast<__u32>(tid);
    LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = every_task ? nullptr : &info,
                .link_info_len = every_task ? 0u : static_cast<uint32_t>(sizeof(info)));
    bpf_link* link = bpf_program__attach_iter(regs_skel->progs.task_regs, &opts);
    if (!link) return std::nullopt;
    std::optional<TaskRegs> out;
    const int fd = bpf_iter_create(bpf_link__fd(link));
    if (fd >= 0) {
        // One record per task iterated: the one thread, where the kernel honours task.tid (an
        // older one iterates every task: their records are read through, many per read(), and
        // the thread's kept; a read may end inside a record, whose rest the next one brings).
        std::vector<uint8_t> buf;
        uint8_t chunk[1000];  // (31.25 records: the carry is in use from the 32nd task on)
        for (ssize_t n; !out && (n = ::read(fd, chunk, sizeof(chunk))) > 0;) {
            buf.insert(buf.end(), chunk, chunk + n);
            size_t at = 0;
            for (; at + sizeof(pbp_task_regs) <= buf.size(); at += sizeof(pbp_task_regs)) {
                pbp_task_regs r;
                std::memcpy(&r, buf.data() + at, sizeof(r));
                if (r.tid == static_cast<uint32_t>(tid) && r.tgid == static_cast<uint32_t>(pid)) {
                    out = TaskRegs{r.ip, r.sp, r.bp};
                    break;
                }
            }
            buf.erase(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(at));
        }
        ::close(fd);
    }
    bpf_link__destroy(link);
    return out;
}

}  // namespace pbp::native
