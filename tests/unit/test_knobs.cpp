// The hidden knobs read from the environment (engine/knobs.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "engine/knobs.h"

namespace {

// Sets the variables for one test and puts back what was there before.
class Env {
public:
    void set(const char* name, const char* value) {
        const char* old = getenv(name);
        saved_.push_back({name, old ? std::string(old) : std::string(), old != nullptr});
        if (value)
            setenv(name, value, 1);
        else
            unsetenv(name);
    }
    ~Env() {
        for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
            if (it->had)
                setenv(it->name, it->value.c_str(), 1);
            else
                unsetenv(it->name);
        }
    }

private:
    struct Saved {
        const char* name;
        std::string value;
        bool had;
    };
    std::vector<Saved> saved_;
};

TEST(Knobs, BpfStatsStayOffUnlessAsked) {
    // Machine-wide (every BPF program's runs gain two clock reads): off by default.
    Env env;
    env.set("PYBPFPROF_BPF_STATS", nullptr);
    env.set("PYBPFPROF_DEBUG", nullptr);
    EXPECT_FALSE(pbp::Knobs::from_environment().bpf_stats);
    env.set("PYBPFPROF_BPF_STATS", "1");
    EXPECT_TRUE(pbp::Knobs::from_environment().bpf_stats);
}

TEST(Knobs, DebugTurnsBpfStatsOn) {
    // PYBPFPROF_DEBUG's lines include the scheduler program's cost per run, from bpf_stats.
    Env env;
    env.set("PYBPFPROF_BPF_STATS", nullptr);
    env.set("PYBPFPROF_DEBUG", "1");
    pbp::Knobs k = pbp::Knobs::from_environment();
    EXPECT_EQ(k.debug, 1);
    EXPECT_TRUE(k.bpf_stats);
}

TEST(Knobs, OffcpuSlotsTakesPowersOfTwoOnly) {
    Env env;
    env.set("PYBPFPROF_OFFCPU_SLOTS", nullptr);
    EXPECT_EQ(pbp::Knobs::from_environment().offcpu_slots, uint32_t(PBP_OFFCPU_SLOTS));
    env.set("PYBPFPROF_OFFCPU_SLOTS", "16");
    EXPECT_EQ(pbp::Knobs::from_environment().offcpu_slots, 16u);
    for (const char* bad : {"12", "0", "x", "16x", "2097152"}) {
        env.set("PYBPFPROF_OFFCPU_SLOTS", bad);
        EXPECT_EQ(pbp::Knobs::from_environment().offcpu_slots, uint32_t(PBP_OFFCPU_SLOTS)) << bad;
    }
}

}  // namespace
