#include "engine/asleep_snapshot.h"

#include "sys/clock.h"
#include "sys/procfs.h"

namespace pbp {

size_t AsleepSnapshot::take(const std::vector<pid_t>& pids) {
    size_t threads = 0;
    for (pid_t pid : pids)
        for (pid_t tid : procfs::tids(pid)) {
            threads++;
            if (auto st = procfs::read_task_status(pid, tid); st && (st->state == 'S' || st->state == 'D'))
                add(pid, static_cast<uint32_t>(tid), st->state, st->switches);
        }
    stamp(pbp::mono_ns(), boot_clock_ticks());
    return threads;
}

void AsleepSnapshot::add(pid_t pid, uint32_t tid, char state, uint64_t switches) {
    threads_[tid] = {pid, state, switches};
}

void AsleepSnapshot::stamp(uint64_t mono_ns, uint64_t boot_ticks) {
    mono_ns_ = mono_ns;
    boot_ticks_ = boot_ticks;
}

std::optional<uint64_t> AsleepSnapshot::asleep_since(pid_t pid, uint32_t tid, char state, uint64_t switches,
                                                     const std::function<uint64_t()>& process_start_ticks) const {
    auto it = threads_.find(tid);
    if (it == threads_.end() || it->second.pid != pid || it->second.state != state || it->second.switches != switches)
        return std::nullopt;
    if (process_start_ticks() > boot_ticks_) return std::nullopt;
    return mono_ns_;
}

void AsleepSnapshot::forget(pid_t pid) {
    for (auto it = threads_.begin(); it != threads_.end();) it = it->second.pid == pid ? threads_.erase(it) : std::next(it);
}

}  // namespace pbp
