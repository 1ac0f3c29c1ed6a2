// Stacks read from userspace (cpython/thread_stacks.h) of real processes on every interpreter:
// threads blocked in known functions, named by their host tid, symbolized through the
// StackStore and Symbolizer as BPF's stacks are; and the same frames as a BPF sample's.
#include <unistd.h>

#include <chrono>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpython/thread_stacks.h"
#include "engine/engine.h"
#include "engine/stack_store.h"
#include "engine/symbolizer.h"
#include "targets/discovery.h"
#include "test_support.h"

namespace pbp::test {
namespace {

// The line (1-based) of script holding marker.
int line_of(const std::string& script, const std::string& marker) {
    std::istringstream in(script);
    std::string l;
    for (int n = 1; std::getline(in, l); n++)
        if (l.find(marker) != std::string::npos) return n;
    return -1;
}

// Prints the calling thread's host tid (no native_id before 3.8: the gettid syscall).
const char* kTid = "import threading, time, select, os, sys\n"
                   "def tid():\n"
                   "    try:\n"
                   "        return threading.get_native_id()\n"
                   "    except AttributeError:\n"
                   "        try:\n"
                   "            import ctypes\n"
                   "            return ctypes.CDLL(None).syscall(186)\n"
                   "        except Exception:\n"
                   "            return 0\n";

// Two threads blocked in sleeper() (time.sleep) and selector() (select.select), the main thread
// in main_blocked() (time.sleep).
const std::string kBlocked = std::string(kTid) +
    "def sleeper(ev, out):\n"
    "    out['sleeper'] = tid()\n"
    "    ev.set()\n"
    "    time.sleep(1000)  # SLEEP_HERE\n"
    "def selector(ev, out):\n"
    "    out['selector'] = tid()\n"
    "    r, w = os.pipe()\n"
    "    ev.set()\n"
    "    select.select([r], [], [], 1000)  # SELECT_HERE\n"
    "def main_blocked():\n"
    "    out = {}\n"
    "    evs = [threading.Event(), threading.Event()]\n"
    "    threading.Thread(target=sleeper, args=(evs[0], out), daemon=True).start()\n"
    "    threading.Thread(target=selector, args=(evs[1], out), daemon=True).start()\n"
    "    for e in evs:\n"
    "        e.wait()\n"
    "    time.sleep(0.3)\n"
    "    print('ready', out['sleeper'], out['selector'], tid(), flush=True)\n"
    "    time.sleep(1000)  # MAIN_HERE\n"
    "main_blocked()  # CALL_HERE\n";

struct Ready {
    std::vector<uint32_t> tids;  // as printed
};
Ready wait_ready(Reporter& py) {
    Ready r;
    auto lines = py.read_lines(1, 60);
    if (lines.empty()) return r;
    // 'ready' is printed just before the printing thread blocks: give it time to get there.
    usleep(300000);
    std::istringstream in(lines[0]);
    std::string word;
    in >> word;
    if (word != "ready") return r;
    uint32_t t;
    while (in >> t) r.tids.push_back(t);
    return r;
}

// A live target, discovered as the engine does, with no BPF.
struct Target {
    PythonTarget t;
    pbp_proc proc{};
};
bool discover(pid_t pid, Target& out, std::string& why) {
    Discoverer d;
    auto r = d.discover(pid);
    if (r.status != Discovery::Python || !r.target) {
        why = r.reason;
        return false;
    }
    out.t = *r.target;
    out.proc = out.t.bpf_config(PBP_MAX_DEPTH, 1);
    return true;
}

std::vector<Frame> frames_of(const StackStore& store, uint32_t stack) {
    std::vector<Frame> v;
    for (uint32_t f : store.stacks().at(stack)) v.push_back(store.frames().at(f));
    return v;
}

std::string show(const std::vector<Frame>& fs) {
    std::string s;
    for (auto& f : fs) s += (s.empty() ? "" : ";") + f.name + ":" + std::to_string(f.line);
    return s;
}

class ThreadStacks : public ::testing::TestWithParam<Interpreter> {
protected:
    void SetUp() override { PBP_REQUIRE(geteuid() == 0, "reading another process's memory needs root"); }
};

TEST_P(ThreadStacks, BlockedThreadsShowTheirFunctionsLinesAndTids) {
    const Interpreter& in = GetParam();
    Reporter py(with_args(in.argv, {"-c", kBlocked}));
    Ready ready = wait_ready(py);
    ASSERT_EQ(ready.tids.size(), 3u) << py.out() << py.err();
    Target tg;
    std::string why;
    ASSERT_TRUE(discover(py.pid(), tg, why)) << why;

    std::vector<cpython::ThreadStack> ts;
    std::string err;
    ASSERT_TRUE(cpython::read_thread_stacks(py.pid(), tg.proc, ts, err)) << err;

    Symbolizer sym;
    sym.add_process(py.pid(), tg.t.layout, tg.t.code_type_addr);
    StackStore store(sym, [](uint64_t, pbp_stack&) { return false; });

    struct Want {
        const char* leaf;
        int line;
        uint32_t tid;
    };
    const Want want[] = {
        {"sleeper", line_of(kBlocked, "SLEEP_HERE"), ready.tids[0]},
        {"selector", line_of(kBlocked, "SELECT_HERE"), ready.tids[1]},
        {"main_blocked", line_of(kBlocked, "MAIN_HERE"), ready.tids[2]},
    };
    std::map<std::string, int> found;
    std::string all;
    for (auto& t : ts) {
        uint32_t idx = store.stack_for_frames(py.pid(), t.frames, t.flags, t.reason);
        auto fs = frames_of(store, idx);
        all += "tid " + std::to_string(t.tid) + " reason " + std::to_string(t.reason) + ": " + show(fs) + "\n";
        if (fs.empty()) continue;
        for (auto& w : want) {
            if (fs.back().name != w.leaf) continue;
            found[w.leaf]++;
            EXPECT_EQ(fs.back().line, w.line) << w.leaf;
            EXPECT_EQ(t.flags, 0) << w.leaf;
            EXPECT_EQ(store.problem(idx), "") << w.leaf;  // every checksum matched the code object
            for (auto& f : fs) EXPECT_FALSE(f.synthetic) << show(fs);
            if (w.tid) {  // 0: the workload could not tell
                EXPECT_EQ(t.tid, w.tid) << w.leaf;
            }
            if (std::string(w.leaf) == "main_blocked") {  // outermost last: <module> is the root
                ASSERT_EQ(fs.size(), 2u) << show(fs);
                EXPECT_EQ(fs[0].name, "<module>");
                EXPECT_EQ(fs[0].line, line_of(kBlocked, "CALL_HERE"));
            } else {  // threading's bootstrap, run(), then the target
                EXPECT_GE(fs.size(), 3u) << show(fs);
                EXPECT_NE(fs[fs.size() - 2].name.find("run"), std::string::npos) << show(fs);
            }
        }
    }
    for (auto& w : want) EXPECT_EQ(found[w.leaf], 1) << w.leaf << " in\n" << all;

    // The checksum is checked: a frame whose checksum is not its code object's is not resolved.
    for (auto& t : ts) {
        if (t.frames.empty()) continue;
        auto bad = t.frames;
        bad[0].csum ^= 1;
        uint32_t idx = store.stack_for_frames(py.pid(), bad, 0, 0);
        EXPECT_EQ(store.problem(idx), Symbolizer::kFreed) << show(frames_of(store, idx));
        break;
    }
}

// A thread spinning in shared() is sampled by BPF (the engine); its blocked sibling, in the
// same shared() called from the same line of runner(), is read from userspace. The frames the
// two share (root .. runner) are the same, and so is the leaf function.
const std::string kSiblings = std::string(kTid) +
    "def shared(block, out, key):\n"
    "    out[key] = tid()\n"
    "    if block:\n"
    "        time.sleep(1000)\n"
    "    x = 0\n"
    "    while True:\n"
    "        x += 1  # SPIN_HERE\n"
    "def runner(block, out, key):\n"
    "    shared(block, out, key)  # RUNNER_CALL\n"
    "out = {}\n"
    "for k, b in (('blocked', True), ('spinner', False)):\n"
    "    threading.Thread(target=runner, args=(b, out, k), daemon=True).start()\n"
    "while len(out) < 2:\n"
    "    time.sleep(0.01)\n"
    "print('ready', out['blocked'], out['spinner'], flush=True)\n"
    "time.sleep(1000)\n";

TEST_P(ThreadStacks, BlockedSiblingMatchesBpfSampleOfSpinner) {
    PBP_REQUIRE(geteuid() == 0, "BPF needs root");
    const Interpreter& in = GetParam();
    Reporter py(with_args(in.argv, {"-c", kSiblings}));
    Ready ready = wait_ready(py);
    ASSERT_EQ(ready.tids.size(), 2u) << py.out() << py.err();
    const uint32_t spinner = ready.tids[1];

    EngineConfig ec;
    ec.rate_hz = 97;
    Status st;
    auto engine = Engine::start(ec, st);
    ASSERT_TRUE(engine) << st.message;
    SessionConfig sc;
    sc.targets.pids = {py.pid()};
    Session* s = engine->subscribe(sc, [](const EngineEvent&) {}, st);
    ASSERT_TRUE(s) << st.message;

    // The userspace read, while BPF samples the spinner.
    Target tg;
    std::string why, err;
    ASSERT_TRUE(discover(py.pid(), tg, why)) << why;
    std::vector<cpython::ThreadStack> ts;
    ASSERT_TRUE(cpython::read_thread_stacks(py.pid(), tg.proc, ts, err)) << err;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    while (std::chrono::steady_clock::now() < end) ASSERT_GE(engine->poll(50), -EINTR);
    Profile p = engine->stop(s);

    Symbolizer sym;
    sym.add_process(py.pid(), tg.t.layout, tg.t.code_type_addr);
    StackStore store(sym, [](uint64_t, pbp_stack&) { return false; });
    std::vector<Frame> mine;
    for (auto& t : ts) {
        auto fs = frames_of(store, store.stack_for_frames(py.pid(), t.frames, t.flags, t.reason));
        if (!fs.empty() && fs.back().name == "shared" && fs.back().line != line_of(kSiblings, "SPIN_HERE")) mine = fs;
    }
    ASSERT_GE(mine.size(), 3u) << "no blocked thread in shared()";

    // The spinner's most frequent BPF stack.
    auto pit = p.processes.find(py.pid());
    ASSERT_NE(pit, p.processes.end());
    auto tit = pit->second.threads.find(spinner);
    ASSERT_NE(tit, pit->second.threads.end()) << "no BPF sample of the spinner";
    std::map<uint32_t, int> n;
    for (auto& smp : tit->second.samples) n[smp.stack]++;
    uint32_t best = 0;
    int most = 0;
    for (auto& [k, c] : n)
        if (c > most) best = k, most = c;
    std::vector<Frame> bpf;
    for (uint32_t f : p.stacks.at(best)) bpf.push_back(p.frames.at(f));
    ASSERT_EQ(bpf.size(), mine.size()) << "BPF " << show(bpf) << "\nmine " << show(mine);
    EXPECT_EQ(bpf.back().name, "shared");
    EXPECT_EQ(bpf.back().line, line_of(kSiblings, "SPIN_HERE"));
    for (size_t i = 0; i + 1 < mine.size(); i++) EXPECT_EQ(bpf[i], mine[i]) << i << "\nBPF " << show(bpf) << "\nmine " << show(mine);
    EXPECT_EQ(mine[mine.size() - 2].name, "runner");
    EXPECT_EQ(mine[mine.size() - 2].line, line_of(kSiblings, "RUNNER_CALL"));
}

INSTANTIATE_TEST_SUITE_P(Interpreters, ThreadStacks, ::testing::ValuesIn(all_interpreters()), interpreter_test_name);

}  // namespace
}  // namespace pbp::test
