#include "sys/priority.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>

namespace pbp::sys {

// PRIO_PROCESS with a thread id sets that thread's nice value only (Linux).
PriorityBoost::PriorityBoost(int nice_value) {
    const id_t tid = static_cast<id_t>(gettid());
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);
    if (errno != 0 || now != 0 || nice_value >= 0) return;
    raised_ = setpriority(PRIO_PROCESS, tid, nice_value) == 0;
}

PriorityBoost::~PriorityBoost() {
    if (raised_) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 0);
}

}  // namespace pbp::sys
