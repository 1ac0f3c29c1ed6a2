// The GIL on every sample (issue 15), with real BPF and real interpreters, in cpu mode:
// a pure-Python busy thread holds the GIL on nearly all of its samples, a thread hashing
// large buffers (hashlib releases the GIL) on few, and a free-threaded build says n/a.
// And the layout outside BPF: a live process's GIL read with process_vm_readv.
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "cpython/gil.h"
#include "engine/engine.h"
#include "sys/target_memory.h"
#include "targets/discovery.h"
#include "test_support.h"

namespace pbp::test {
namespace {

bool free_threaded(const Interpreter& in) { return in.name.rfind("sid-ft-", 0) == 0; }
// Every interpreter of the matrix with a GIL: 3.6 keeps it in static variables, found by
// their symbols (the matrix's 3.6 is unstripped).
bool gil_known(const Interpreter& in) { return !free_threaded(in); }

// A process whose main thread spins in pure Python. It first runs a thread, which ends at
// once: 3.6 creates its GIL when the first thread starts (PyEval_InitThreads), and without
// one there is no GIL to hold (its samples are n/a).
Reporter spin_process(const Interpreter& in) {
    return Reporter(with_args(in.argv, {"-c", "import threading\n"
                                              "t = threading.Thread(target=int)\n"
                                              "t.start()\n"
                                              "t.join()\n"
                                              "def gil_spin():\n"
                                              "    while True: pass\n"
                                              "print('ready', flush=True)\n"
                                              "gil_spin()\n"}));
}

// A process whose second thread hashes 8 MiB buffers (OpenSSL's sha256 drops the GIL for
// data over 2 KiB) while the main thread waits in join(). Without OpenSSL's _hashlib (the
// matrix's 3.6, built before OpenSSL 3 was supported) hashlib's own sha256 keeps the GIL,
// so the thread compresses with zlib instead, which drops it around deflate().
Reporter hash_process(const Interpreter& in) {
    return Reporter(with_args(in.argv, {"-c", "import hashlib, threading, zlib\n"
                                              "buf = bytes(range(256)) * (32 << 10)\n"
                                              "try:\n"
                                              "    import _hashlib\n"
                                              "    work = lambda: hashlib.sha256(buf).digest()\n"
                                              "except ImportError:\n"
                                              "    work = lambda: zlib.compress(buf, 1)\n"
                                              "def gil_hash():\n"
                                              "    while True: work()\n"
                                              "t = threading.Thread(target=gil_hash)\n"
                                              "t.start()\n"
                                              "print('ready', flush=True)\n"
                                              "t.join()\n"}));
}

struct GilCounts {
    std::map<GilState, uint64_t> n;
    uint64_t total = 0;
    double share(GilState g) const {
        auto it = n.find(g);
        return total ? double(it == n.end() ? 0 : it->second) / double(total) : 0;
    }
};

// The GIL states of a process's samples whose stack has a frame named fn.
GilCounts gil_counts(const Profile& p, pid_t pid, const std::string& fn) {
    GilCounts c;
    auto pi = p.processes.find(pid);
    if (pi == p.processes.end()) return c;
    for (auto& [tid, t] : pi->second.threads)
        for (auto& s : t.samples) {
            if (s.stack >= p.stacks.size()) continue;
            bool has = false;
            for (uint32_t f : p.stacks.at(s.stack)) has |= f < p.frames.size() && p.frames.at(f).name == fn;
            if (!has) continue;
            c.n[s.gil]++;
            c.total++;
        }
    return c;
}

std::string describe(const GilCounts& c) {
    std::string s;
    for (auto& [g, k] : c.n) s += std::string(gil_name(g)) + "=" + std::to_string(k) + " ";
    return s + "of " + std::to_string(c.total);
}

class Gil : public ::testing::TestWithParam<Interpreter> {};

TEST_P(Gil, HeldWhileSpinningNotWhileHashing) {
    PBP_REQUIRE(geteuid() == 0, "BPF integration tests need root");
    const Interpreter& in = GetParam();
    auto spin = spin_process(in);
    auto hash = hash_process(in);
    ASSERT_EQ(spin.read_lines(1, 60), std::vector<std::string>{"ready"}) << spin.err();
    ASSERT_EQ(hash.read_lines(1, 60), std::vector<std::string>{"ready"}) << hash.err();

    EngineConfig ec;
    ec.rate_hz = 499;
    Status st;
    auto engine = Engine::start(ec, st);
    ASSERT_TRUE(engine) << st.message;
    SessionConfig sc;
    sc.targets.pids = {spin.pid(), hash.pid()};
    sc.mode = ProfileMode::Cpu;
    Session* s = engine->subscribe(sc, [](const EngineEvent&) {}, st);
    ASSERT_TRUE(s) << st.message;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < end) ASSERT_GE(engine->poll(50), -EINTR);
    Profile p = engine->stop(s);

    GilCounts cs = gil_counts(p, spin.pid(), "gil_spin");
    GilCounts ch = gil_counts(p, hash.pid(), "gil_hash");
    std::cout << "  " << in.name << ": spin " << describe(cs) << "; hash " << describe(ch) << "\n";
    ASSERT_GE(cs.total, 100u) << "too few samples of the spinning thread";
    ASSERT_GE(ch.total, 100u) << "too few samples of the hashing thread";
    if (!gil_known(in)) {
        EXPECT_EQ(cs.share(GilState::NA), 1.0) << describe(cs);
        EXPECT_EQ(ch.share(GilState::NA), 1.0) << describe(ch);
        return;
    }
    EXPECT_GE(cs.share(GilState::Held), 0.90) << describe(cs);
    EXPECT_LE(ch.share(GilState::Held), 0.25) << describe(ch);
    // On CPU a thread holds the GIL or not: never n/a, never waiting (that is off CPU).
    EXPECT_EQ(cs.share(GilState::Held) + cs.share(GilState::Neither), 1.0) << describe(cs);
    EXPECT_EQ(ch.share(GilState::Held) + ch.share(GilState::Neither), 1.0) << describe(ch);
}

// The layout outside BPF: while the only thread spins, the GIL is locked and its last holder
// is that thread's state, on the interpreter's thread list.
TEST_P(Gil, LiveProcessGilReadFromUserspace) {
    const Interpreter& in = GetParam();
    auto spin = spin_process(in);
    ASSERT_EQ(spin.read_lines(1, 60), std::vector<std::string>{"ready"}) << spin.err();
    Discoverer d;
    auto r = d.discover(spin.pid());
    ASSERT_EQ(r.status, Discovery::Python) << r.reason;
    const PythonTarget& t = *r.target;
    ProcessMemory mem(spin.pid());
    auto range = cpython::gil_range(t.layout, t.runtime_addr, t.interp_head_addr,
                                    t.gil_statics ? &*t.gil_statics : nullptr, mem);
    if (!gil_known(in)) {
        EXPECT_FALSE(range) << "no GIL location expected for " << in.name;
        EXPECT_EQ(t.bpf_config(64, 1).off.gil_where, PBP_GIL_WHERE_NONE);
        EXPECT_FALSE(t.gil_unknown.empty());
        return;
    }
    ASSERT_TRUE(range) << in.name << ": " << t.gil_unknown;
    EXPECT_TRUE(t.gil_unknown.empty()) << t.gil_unknown;
    const pbp_proc cfg = t.bpf_config(64, 1);
    if (in.version == "3.6") {
        // Its static variables: the four futexes (48 + 40 + 48 + 40 bytes) in one range.
        ASSERT_TRUE(t.gil_statics);
        EXPECT_EQ(cfg.off.gil_where, PBP_GIL_WHERE_STATICS);
        EXPECT_GE(range->size, 176u);
        EXPECT_LE(range->size, 176u + 4 * 32);
        EXPECT_EQ(cfg.gil_addr, range->addr);
        EXPECT_EQ(cfg.gil_wait_size, range->size);
        EXPECT_EQ(cfg.gil_locked_addr, range->locked_at);
        EXPECT_EQ(cfg.gil_holder_addr, range->holder_at);
    } else {
        EXPECT_EQ(range->size, 208u);
        EXPECT_EQ(cfg.gil_addr, t.layout.bpf.gil_where == PBP_GIL_WHERE_ADDR ? range->addr : 0u);
    }

    // The thread states of the first interpreter.
    const pbp_py_offsets& o = t.layout.bpf;
    uint64_t interp = 0;
    ASSERT_TRUE(mem.read_value(t.interp_head_addr, interp) && interp);
    std::set<uint64_t> tstates;
    uint64_t ts = 0;
    ASSERT_TRUE(mem.read_value(interp + o.interp_threads_head, ts));
    for (int i = 0; ts && i < 64; i++) {
        tstates.insert(ts);
        ASSERT_TRUE(mem.read_value(ts + o.tstate_next, ts));
    }
    ASSERT_FALSE(tstates.empty());
    // Writing "ready" released the GIL (the write is a blocking call): on a loaded machine
    // the spinner may not have run since. Once it has taken the GIL back it keeps it.
    for (int i = 0; i < 200; i++) {
        auto g = cpython::read_gil(*range, mem);
        if (g && g->locked == 1) break;
        usleep(10000);
    }
    for (int i = 0; i < 5; i++) {
        auto g = cpython::read_gil(*range, mem);
        ASSERT_TRUE(g);
        EXPECT_EQ(g->locked, 1) << "read " << i;
        EXPECT_TRUE(tstates.count(g->last_holder)) << std::hex << g->last_holder << " is no thread state";
        usleep(20000);
    }
}

INSTANTIATE_TEST_SUITE_P(Interpreters, Gil, ::testing::ValuesIn(all_interpreters()), interpreter_test_name);

}  // namespace
}  // namespace pbp::test
