// engine/decimate.h: which of the engine's on-CPU samples a session at a lower rate keeps.
// Simulated CPUs: a stream of perf events of known periods (rate changes included), each
// advancing the CPU's sampled clock as BPF does, and the samples a session keeps checked
// against a timer firing every interval of that clock.
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/decimate.h"

namespace {

using pbp::keeps_sample;
using pbp::kept_weight;
using pbp::period_of_rate;

// One CPU's perf events: their periods, and the clock after each (what BPF writes).
struct Cpu {
    uint64_t clock;
    std::vector<uint64_t> period, end;
    explicit Cpu(uint64_t start = 0) : clock(start) {}
    void run(double hz, size_t events) {
        const uint64_t p = period_of_rate(hz);
        for (size_t i = 0; i < events; i++) {
            clock += p;
            period.push_back(p);
            end.push_back(clock);
        }
    }
};

TEST(Decimate, PeriodOfRateIsWhatThePerfEventsAreOpenedWith) {
    EXPECT_EQ(period_of_rate(99), 10'101'010u);
    EXPECT_EQ(period_of_rate(199), 5'025'126u);
    EXPECT_EQ(period_of_rate(49), 20'408'163u);
    EXPECT_EQ(period_of_rate(1000), 1'000'000u);
}

// The fastest session (interval == the records' period) and one faster than records queued
// before a rate change (interval < period) keep every sample with the record's weight: the
// CLI's single session is unchanged by decimation.
TEST(Decimate, AtOrAboveTheRecordsRateEverySampleIsKeptWithItsWeight) {
    Cpu c(12345);
    c.run(199, 1000);
    const uint64_t p = period_of_rate(199);
    for (size_t i = 0; i < c.end.size(); i++) {
        EXPECT_TRUE(keeps_sample(c.end[i], c.period[i], p));
        EXPECT_TRUE(keeps_sample(c.end[i], c.period[i], p / 3));
    }
    EXPECT_EQ(kept_weight(p, p), p);
    EXPECT_EQ(kept_weight(p, p / 3), p);
    EXPECT_EQ(kept_weight(p, 4 * p + 1), 4 * p + 1);
}

// The kept samples are exactly those a timer firing at every multiple of the interval on the
// CPU's clock lands in: the k-th kept sample is the first whose span (end - period, end]
// reaches the k-th multiple. Checked across rate changes (the engine's rate raised and
// lowered: 199, 999, 99, 49, 199, 1000 Hz), with the session at 49 Hz, 40 Hz (an interval
// that divides no period), 99 Hz (slower than some records, faster than others) and 250 Hz
// (4 periods at 1000 Hz: spans end exactly on multiples).
TEST(Decimate, KeepsWhatATimerAtItsRateTakesAcrossRateChanges) {
    for (uint64_t start : {uint64_t{0}, uint64_t{7'777'777}, uint64_t{1} << 62}) {
        Cpu c(start);
        c.run(199, 2000);
        c.run(999, 5000);
        c.run(99, 700);
        c.run(49, 300);
        c.run(199, 2000);
        c.run(1000, 4000);
        for (double r : {49.0, 40.0, 99.0, 250.0}) {
            const uint64_t I = period_of_rate(r);
            bool longer = false;  // some records' period is longer than the interval
            for (uint64_t p : c.period) longer |= p > I;
            uint64_t k = start / I + 1;  // the first multiple after the stream's start
            uint64_t kept = 0, multiples = 0, weight = 0;
            for (size_t i = 0; i < c.end.size(); i++) {
                const bool keep = keeps_sample(c.end[i], c.period[i], I);
                // Multiples of I in this span; more than one only when the period exceeds I.
                uint64_t in_span = 0;
                while (k * I <= c.end[i]) {
                    ASSERT_GT(k * I, c.end[i] - c.period[i]) << "a multiple skipped at sample " << i;
                    k++;
                    in_span++;
                }
                ASSERT_EQ(keep, in_span > 0) << "r " << r << " sample " << i << " clock " << c.end[i];
                multiples += in_span;
                if (keep) {
                    kept++;
                    weight += kept_weight(c.period[i], I);
                }
            }
            const uint64_t span = c.clock - start;
            EXPECT_EQ(multiples, c.clock / I - start / I) << r << " Hz";
            // One sample per multiple, but where the records' period is longer than the
            // interval (the 49 Hz stretch for the 99 Hz session) one per record.
            if (!longer) EXPECT_EQ(kept, multiples) << r << " Hz";
            else EXPECT_LT(kept, multiples) << r << " Hz";
            // The kept weights add up to the CPU time sampled: within one interval per stretch
            // of periods shorter than the interval (where samples weigh the interval); exact
            // where they are not (every sample kept, weighing its period). At most 2 stretches.
            EXPECT_NEAR(double(weight), double(span), 2.0 * double(I)) << r << " Hz";
        }
    }
}

// A CPU shared by processes in bursts of random length: each process's kept count is its
// share of the CPU clock times the session's rate, within the statistics of a timer (a
// process's count is off by at most one per burst; over many bursts far less on average).
// Counting each process's own samples instead (keep every n-th) would be exact here too, so
// the check that matters is the one above; this one guards the weights' sum per process.
TEST(Decimate, ProcessesSharingACpuInBurstsEachGetTheirRate) {
    std::mt19937_64 rng(20261123);
    std::uniform_int_distribution<int> burst(1, 9), who(0, 2);
    const double R = 999, r = 49;
    const uint64_t P = period_of_rate(R), I = period_of_rate(r);
    uint64_t clock = 0, kept[3] = {}, weight[3] = {}, time[3] = {};
    for (int b = 0; b < 200000; b++) {
        int p = who(rng);
        for (int n = burst(rng); n > 0; n--) {
            clock += P;
            time[p] += P;
            if (keeps_sample(clock, P, I)) {
                kept[p]++;
                weight[p] += kept_weight(P, I);
            }
        }
    }
    for (int p = 0; p < 3; p++) {
        const double expected = double(time[p]) / 1e9 * r;
        EXPECT_NEAR(double(kept[p]), expected, expected * 0.02) << "process " << p;
        EXPECT_NEAR(double(weight[p]), double(time[p]), double(time[p]) * 0.02) << "process " << p;
    }
}

// A record without a clock (0: not an on-CPU sample of this BPF program) is kept: its span
// (-period, 0] holds 0.
TEST(Decimate, ClockBelowThePeriodIsKept) {
    EXPECT_TRUE(keeps_sample(0, 5'000'000, 20'000'000));
    EXPECT_TRUE(keeps_sample(4'999'999, 5'000'000, 20'000'000));
    EXPECT_FALSE(keeps_sample(5'000'001, 5'000'000, 20'000'000));
    EXPECT_TRUE(keeps_sample(20'000'000, 5'000'000, 20'000'000));
    EXPECT_FALSE(keeps_sample(25'000'000, 5'000'000, 20'000'000));
    EXPECT_TRUE(keeps_sample(UINT64_MAX, 5'000'000, 20'000'000) ==
                (UINT64_MAX / 20'000'000 != (UINT64_MAX - 5'000'000) / 20'000'000));
}

}  // namespace
