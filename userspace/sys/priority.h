// The calling thread's scheduling priority raised for a short burst of work whose wait is
// someone's (BPF verification at start-up: ~1.2 s of CPU that, on a machine busy with 20
// nice-0 processes, got 1/11 of a CPU and took 16 s). The work is the same; it is done
// sooner. Only from the default nice 0 (a user who ran pybpfprof under `nice` keeps it), and
// only where allowed (CAP_SYS_NICE): otherwise nothing changes. Restored when it goes.
#pragma once

namespace pbp::sys {

class PriorityBoost {
public:
    explicit PriorityBoost(int nice_value);
    ~PriorityBoost();
    PriorityBoost(const PriorityBoost&) = delete;
    PriorityBoost& operator=(const PriorityBoost&) = delete;
    bool raised() const { return raised_; }

private:
    bool raised_ = false;
};

}  // namespace pbp::sys
