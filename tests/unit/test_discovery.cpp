// Discovery and ELF reading against real processes: every interpreter on the machine (Debian's
// static python3.11, the pyenv builds with a shared libpython, 3.14/3.15 inside the sid
// chroot, 3.9 and 3.13 inside the bullseye and trixie chroots), python started through ld.so,
// non-Python processes and dead PIDs. Ground truth comes from the interpreter itself
// (tests/tools/unit_discovery_target.py, via ctypes).
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "targets/discovery.h"
#include "sys/elf_file.h"
#include "sys/procfs.h"
#include "sys/target_memory.h"
#include "test_support.h"

namespace fs = std::filesystem;
using pbp::Discoverer;
using pbp::Discovery;
using pbp::DiscoveryResult;
using pbp::test::Interpreter;
using pbp::test::Reporter;

namespace {

const char* const kHostPython = "/usr/bin/python3.11";
const char* const kLdSo = "/lib64/ld-linux-x86-64.so.2";

const char* status_name(Discovery d) {
    switch (d) {
        case Discovery::Python: return "Python";
        case Discovery::NotPython: return "NotPython";
        case Discovery::NotYet: return "NotYet";
        case Discovery::Gone: return "Gone";
        case Discovery::Unsupported: return "Unsupported";
        case Discovery::Zombie: return "Zombie";
    }
    return "?";
}

std::string describe(const DiscoveryResult& r) {
    std::string s = std::string(status_name(r.status)) + " (" + r.reason + ")";
    if (r.target) s += " " + r.target->describe();
    return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string target_script() { return pbp::test::read_file(pbp::test::tool_path("unit_discovery_target.py")); }

// What the child reported about itself ("key value..." lines, then "ready").
struct Report {
    bool ready = false;
    std::map<std::string, std::vector<std::string>> kv;
    std::string raw;

    uint64_t num(const std::string& key, size_t i = 0) const {
        auto it = kv.find(key);
        if (it == kv.end() || it->second.size() <= i) return ~0ULL;
        return std::stoull(it->second[i]);
    }
    std::string str(const std::string& key) const {
        auto it = kv.find(key);
        if (it == kv.end()) return {};
        std::string s;
        for (auto& w : it->second) s += (s.empty() ? "" : " ") + w;
        return s;
    }
};

Report wait_report(Reporter& c, int timeout_s = 30) {
    Report r;
    r.ready = c.read_until("ready", timeout_s);
    r.raw = c.out();
    if (!r.ready) return r;
    std::istringstream is(r.raw);
    for (std::string line; std::getline(is, line);) {
        std::istringstream ls(line);
        std::string key;
        ls >> key;
        std::vector<std::string> vals;
        for (std::string w; ls >> w;) vals.push_back(w);
        r.kv[key] = vals;
    }
    // No /proc inside the target's root (bare chroot): look at its maps from here instead.
    if (r.str("libpython") == "?") {
        r.kv["libpython"] = {"-"};
        if (auto maps = pbp::procfs::read_maps(c.pid()))
            for (auto& m : *maps)
                if (m.path.find("/libpython") != std::string::npos) {
                    r.kv["libpython"] = {m.path};
                    break;
                }
    }
    if (r.str("exe") == "?") r.kv["exe"] = {pbp::procfs::exe(c.pid())};
    return r;
}

bool exists(const char* path) {
    std::error_code ec;
    return fs::exists(path, ec);
}

// The target script under the host interpreter (started through ld.so with via_loader),
// and what it reported once ready.
struct HostTarget {
    Reporter c;
    Report rep;
    explicit HostTarget(bool via_loader = false) : c(argv(via_loader)), rep(wait_report(c)) {}
    static std::vector<std::string> argv(bool via_loader) {
        std::vector<std::string> a = {kHostPython, "-c", target_script()};
        if (via_loader) a.insert(a.begin(), kLdSo);
        return a;
    }
};

uint64_t read_u64(pid_t pid, uint64_t addr, bool& ok) {
    pbp::ProcessMemory mem(pid);
    uint64_t v = 0;
    ok = mem.read(addr, &v, sizeof v);
    return v;
}

// Every fact discovery reports, against what the interpreter says about itself.
void expect_matches_report(pid_t pid, const DiscoveryResult& r, const Report& rep) {
    ASSERT_EQ(r.status, Discovery::Python) << describe(r);
    ASSERT_TRUE(r.target.has_value());
    const pbp::PythonTarget& t = *r.target;
    EXPECT_EQ(t.pid, pid);

    EXPECT_EQ(t.runtime_addr, rep.num("runtime")) << "&_PyRuntime as the process sees it";
    EXPECT_EQ(t.code_type_addr, rep.num("codetype")) << "&PyCode_Type as the process sees it";
    EXPECT_EQ(t.layout.version.major, rep.num("version", 0));
    EXPECT_EQ(t.layout.version.minor, rep.num("version", 1));
    // The version must be known exactly wherever the binary records it (Py_Version, 3.11+).
    if (rep.num("pyversion") != 0) {
        EXPECT_EQ(t.layout.version.micro, rep.num("version", 2));
        EXPECT_EQ(t.layout.version.hex(), rep.num("version", 3));
        EXPECT_EQ(t.layout.bpf.py_version_hex, rep.num("version", 3));
    }

    // The interpreter list head: a pointer in the target that points at the interpreter
    // PyInterpreterState_Head() returns.
    ASSERT_NE(t.interp_head_addr, 0u);
    bool ok = false;
    uint64_t head = read_u64(pid, t.interp_head_addr, ok);
    ASSERT_TRUE(ok) << "interp_head_addr 0x" << std::hex << t.interp_head_addr << " unreadable";
    EXPECT_EQ(head, rep.num("head")) << "*interp_head_addr is not PyInterpreterState_Head()";

    std::string libpython = rep.str("libpython");
    bool shared = libpython != "-";
    EXPECT_EQ(t.shared_lib, shared) << t.interp_path;
    if (shared) {
        std::string want = "libpython" + std::to_string(t.layout.version.major) + "." +
                           std::to_string(t.layout.version.minor);
        EXPECT_TRUE(ends_with(t.interp_path, want + ".so.1.0") || ends_with(t.interp_path, want + "m.so.1.0"))
            << t.interp_path;
        EXPECT_TRUE(ends_with(t.interp_path, libpython)) << t.interp_path << " vs " << libpython;
    } else {
        // Static: the executable itself (seen from here, a chroot's files carry its prefix).
        EXPECT_TRUE(ends_with(t.interp_path, rep.str("exe"))) << t.interp_path << " vs " << rep.str("exe");
    }

    // What BPF gets.
    pbp_proc cfg = t.bpf_config(77, 5);
    EXPECT_EQ(cfg.interp_head_addr, t.interp_head_addr);
    EXPECT_EQ(cfg.code_type_addr, t.code_type_addr);
    EXPECT_EQ(cfg.max_depth, 77u);
    EXPECT_EQ(cfg.generation, 5u);
    EXPECT_EQ(std::memcmp(&cfg.off, &t.layout.bpf, sizeof cfg.off), 0);
    EXPECT_NE(t.layout.bpf.code_read_len, 0u);
    EXPECT_NE(t.layout.bpf.frame_read_len, 0u);

    std::string d = t.describe();
    EXPECT_NE(d.find(t.layout.version.str()), std::string::npos) << d;
    EXPECT_NE(d.find(t.interp_path), std::string::npos) << d;
}

// ---- every interpreter on the machine ------------------------------------------------------

class DiscoveryLive : public testing::TestWithParam<Interpreter> {};

TEST_P(DiscoveryLive, MatchesTheInterpretersOwnView) {
    const Interpreter& in = GetParam();
    const std::vector<std::string> argv = pbp::test::with_args(in.argv, {"-c", target_script()});
    Reporter c(argv);
    Report rep = wait_report(c);
    PBP_REQUIRE(rep.ready, in.name + " did not start: " + c.err());
    SCOPED_TRACE(in.name + "\n" + rep.raw);

    Discoverer d;
    DiscoveryResult r = d.discover(c.pid());
    expect_matches_report(c.pid(), r, rep);
    if (HasFatalFailure()) return;

    // Cached ELF facts give the same answer; so does a second process of the same binary.
    DiscoveryResult again = d.discover(c.pid());
    ASSERT_EQ(again.status, Discovery::Python) << describe(again);
    EXPECT_EQ(again.target->runtime_addr, r.target->runtime_addr);
    EXPECT_EQ(again.target->interp_head_addr, r.target->interp_head_addr);
    EXPECT_EQ(again.target->interp_path, r.target->interp_path);

    Reporter c2(argv);
    Report rep2 = wait_report(c2);
    ASSERT_TRUE(rep2.ready) << c2.err();
    expect_matches_report(c2.pid(), d.discover(c2.pid()), rep2);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, DiscoveryLive, testing::ValuesIn(pbp::test::all_interpreters()),
                         pbp::test::interpreter_test_name);

TEST(DiscoveryCoverage, HostAndPyenv312And313Present) {
    PBP_REQUIRE(exists(kHostPython), std::string(kHostPython) + " missing");
    std::set<std::string> have;
    for (auto& i : pbp::test::pyenv_pythons()) have.insert(i.version);
    PBP_REQUIRE(have.count("3.12"), "no pyenv CPython 3.12");
    PBP_REQUIRE(have.count("3.13"), "no pyenv CPython 3.13");
}

// The host interpreter, spelled out: Debian's static, stripped, non-PIE python3.11.
TEST(DiscoveryHost, StaticPython311) {
    PBP_REQUIRE(exists(kHostPython), std::string(kHostPython) + " missing");
    HostTarget h;
    auto& [c, rep] = h;
    ASSERT_TRUE(rep.ready) << c.err();
    SCOPED_TRACE(rep.raw);

    Discoverer d;
    DiscoveryResult r = d.discover(c.pid());
    expect_matches_report(c.pid(), r, rep);
    if (HasFatalFailure()) return;
    const auto& t = *r.target;
    EXPECT_EQ(t.interp_path, kHostPython);
    EXPECT_FALSE(t.shared_lib);
    EXPECT_EQ(t.layout.version.major, 3);
    EXPECT_EQ(t.layout.version.minor, 11);
    EXPECT_EQ(t.layout.version.micro, rep.num("version", 2));
    EXPECT_EQ(t.layout.version.hex(), rep.num("version", 3));
    EXPECT_EQ(t.layout.bpf.frame_kind, PBP_FRAME_INTERP_CFRAME);
    EXPECT_EQ(t.layout.bpf.instr_kind, PBP_INSTR_PTR);
    EXPECT_EQ(t.describe(), t.layout.version.str() + " (static /usr/bin/python3.11)");
    EXPECT_TRUE(t.warning.empty()) << t.warning;
}

// Started through the dynamic loader: /proc/PID/exe is ld.so, the runtime is still found in
// the python3.11 mapping.
TEST(DiscoveryHost, StartedThroughTheDynamicLoader) {
    PBP_REQUIRE(exists(kHostPython) && exists(kLdSo), "python3.11 or ld.so missing");
    HostTarget h(true);
    auto& [c, rep] = h;
    ASSERT_TRUE(rep.ready) << c.err();
    SCOPED_TRACE(rep.raw);
    ASSERT_NE(pbp::procfs::exe(c.pid()), kHostPython) << "not started through ld.so";

    Discoverer d;
    DiscoveryResult r = d.discover(c.pid());
    ASSERT_EQ(r.status, Discovery::Python) << describe(r);
    const auto& t = *r.target;
    EXPECT_EQ(t.runtime_addr, rep.num("runtime"));
    EXPECT_EQ(t.code_type_addr, rep.num("codetype"));
    EXPECT_EQ(t.interp_path, kHostPython);
    EXPECT_EQ(t.layout.version.hex(), rep.num("version", 3));
    bool ok = false;
    EXPECT_EQ(read_u64(c.pid(), t.interp_head_addr, ok), rep.num("head"));
    EXPECT_TRUE(ok);
}

// shared_lib means "the runtime lives in libpython, not in the executable". Under ld.so the
// runtime is still in the (ET_EXEC) python3.11 executable, not in a shared library.
TEST(DiscoveryHost, DynamicLoaderLaunchIsNotReportedAsLibpython) {
    PBP_REQUIRE(exists(kHostPython) && exists(kLdSo), "python3.11 or ld.so missing");
    HostTarget h(true);
    auto& [c, rep] = h;
    ASSERT_TRUE(rep.ready) << c.err();
    Discoverer d;
    DiscoveryResult r = d.discover(c.pid());
    ASSERT_EQ(r.status, Discovery::Python) << describe(r);
    EXPECT_FALSE(r.target->shared_lib) << r.target->describe();
    EXPECT_EQ(r.target->describe(), r.target->layout.version.str() + " (static /usr/bin/python3.11)");
}

// ---- not Python / gone ---------------------------------------------------------------------

TEST(DiscoveryNotPython, SleepIsNotPython) {
    pbp::test::Child c({"sleep", "30"}, pbp::test::temp_dir());
    // Wait until it runs sleep (not the forked test binary, not ld.so half-way).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    DiscoveryResult r;
    Discoverer d;
    for (;;) {
        if (ends_with(pbp::procfs::exe(c.pid()), "/sleep")) {
            r = d.discover(c.pid());
            if (r.status != Discovery::NotYet) break;
        }
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "sleep never settled: " << describe(r);
        usleep(10000);
    }
    EXPECT_EQ(r.status, Discovery::NotPython) << describe(r);
    EXPECT_FALSE(r.reason.empty());
    EXPECT_FALSE(r.target.has_value());
    // Asking again (ELF facts cached now) gives the same answer.
    DiscoveryResult again = d.discover(c.pid());
    EXPECT_EQ(again.status, Discovery::NotPython) << describe(again);
}

TEST(DiscoveryNotPython, TheTestBinaryItselfIsNotPython) {
    Discoverer d;
    DiscoveryResult r = d.discover(getpid());
    EXPECT_EQ(r.status, Discovery::NotPython) << describe(r);
    EXPECT_FALSE(r.reason.empty());
    EXPECT_FALSE(r.target.has_value());
}

TEST(DiscoveryNotPython, DeadPidIsGone) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
    Discoverer d;
    DiscoveryResult r = d.discover(pid);
    EXPECT_EQ(r.status, Discovery::Gone) << describe(r);
    EXPECT_FALSE(r.reason.empty());
    EXPECT_FALSE(r.target.has_value());

    // A PID above pid_max can never exist.
    long pid_max = 0;
    std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
    ASSERT_GT(pid_max, 0);
    r = d.discover(static_cast<pid_t>(pid_max + 1));
    EXPECT_EQ(r.status, Discovery::Gone) << describe(r);
    EXPECT_FALSE(r.reason.empty());
}

// Exited but not reaped: a zombie, whose reason names the parent that has not reaped it
// (before: NotPython, so "PID N (python3) is not a CPython process we can profile: it is a
// zombie: ..."). A main thread that exited while another thread runs on shows as a zombie in
// /proc too, but its process lives on: not a zombie.
TEST(DiscoveryNotPython, ZombieIsAZombieAndAnExitedMainThreadIsNot) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    ASSERT_GT(pid, 0);
    siginfo_t si{};
    ASSERT_EQ(waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOWAIT), 0);  // exited, not reaped
    Discoverer d;
    DiscoveryResult r = d.discover(pid);
    EXPECT_EQ(r.status, Discovery::Zombie) << describe(r);
    EXPECT_EQ(r.reason, "it has exited and its parent PID " + std::to_string(getpid()) + " has not reaped it");
    ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
    EXPECT_EQ(d.discover(pid).status, Discovery::Gone);

    pid_t lead = fork();
    if (lead == 0) {
        pthread_t t;
        pthread_create(&t, nullptr, [](void*) -> void* { for (;;) pause(); }, nullptr);
        syscall(SYS_exit, 0);  // the main thread only (pthread_exit would unwind through gtest)
    }
    ASSERT_GT(lead, 0);
    std::optional<pbp::procfs::Status> st;
    for (int i = 0; i < 200; i++) {
        st = pbp::procfs::read_status(lead);
        if (st && st->state == 'Z') break;
        usleep(10000);
    }
    ASSERT_TRUE(st && st->state == 'Z');
    EXPECT_EQ(st->threads, 2);
    r = d.discover(lead);
    EXPECT_EQ(r.status, Discovery::NotPython) << describe(r);
    EXPECT_EQ(r.reason, "its main thread has exited (1 other thread runs on), and its memory maps are read through it");
    kill(lead, SIGKILL);
    ASSERT_EQ(waitpid(lead, nullptr, 0), lead);
}

// procfs::alive: a running process is; one that exited is not, reaped or not (a zombie its
// parent has yet to wait for still exists in /proc).
TEST(Procfs, AliveUntilItExitsReapedOrNot) {
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(go[1]);
        char c;
        (void)!read(go[0], &c, 1);
        _exit(0);
    }
    ASSERT_GT(pid, 0);
    close(go[0]);
    EXPECT_TRUE(pbp::procfs::alive(pid));
    close(go[1]);  // it exits now
    siginfo_t si{};
    ASSERT_EQ(waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOWAIT), 0);  // exited, not reaped
    EXPECT_TRUE(pbp::procfs::exists(pid));
    EXPECT_FALSE(pbp::procfs::alive(pid));
    ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
    EXPECT_FALSE(pbp::procfs::alive(pid));
}

TEST(DiscoveryNotPython, KilledPythonIsGone) {
    PBP_REQUIRE(exists(kHostPython), std::string(kHostPython) + " missing");
    HostTarget h;
    auto& [c, rep] = h;
    ASSERT_TRUE(rep.ready) << c.err();
    Discoverer d;
    ASSERT_EQ(d.discover(c.pid()).status, Discovery::Python);
    pid_t pid = c.pid();
    c.signal(SIGKILL);
    ASSERT_GE(c.wait(10), 0);
    DiscoveryResult r = d.discover(pid);
    EXPECT_EQ(r.status, Discovery::Gone) << describe(r);
}

// ---- ElfFile -------------------------------------------------------------------------------

uint32_t hexversion_of(const std::vector<std::string>& argv) {
    auto r = pbp::test::run(pbp::test::with_args(argv, {"-c", "import sys; print(sys.hexversion)"}), 60);
    if (r.status != 0) return 0;
    return static_cast<uint32_t>(std::stoul(r.out));
}

TEST(ElfFile, StrippedStaticPython311) {
    PBP_REQUIRE(exists(kHostPython), std::string(kHostPython) + " missing");
    std::string err;
    auto elf = pbp::ElfFile::open(kHostPython, err);
    ASSERT_TRUE(elf) << err;

    // Stripped: no .symtab; the dynamic symbols and .PyRuntime survive.
    EXPECT_FALSE(elf->section(".symtab").has_value()) << "python3.11 is expected to be stripped";
    ASSERT_TRUE(elf->section(".dynsym").has_value());
    auto pyrt = elf->section(".PyRuntime");
    ASSERT_TRUE(pyrt.has_value());
    EXPECT_GT(pyrt->size, 0u);
    EXPECT_TRUE(elf->is_exec());
    EXPECT_EQ(elf->soname(), "");
    EXPECT_FALSE(elf->loads().empty());

    auto syms = elf->find_symbols({"_PyRuntime", "Py_Version", "PyCode_Type", "_Py_tss_tstate",
                                   "no_such_symbol_anywhere", "PyInterpreterState_Head"});
    ASSERT_TRUE(syms.count("_PyRuntime"));
    ASSERT_TRUE(syms.count("Py_Version"));
    ASSERT_TRUE(syms.count("PyCode_Type"));
    EXPECT_TRUE(syms.count("PyInterpreterState_Head"));
    EXPECT_FALSE(syms.count("_Py_tss_tstate")) << "a local symbol cannot survive stripping";
    EXPECT_FALSE(syms.count("no_such_symbol_anywhere"));
    EXPECT_EQ(syms["_PyRuntime"], pyrt->addr) << "_PyRuntime is the start of .PyRuntime";

    // Non-PIE: link-time addresses are the runtime addresses the process reports.
    HostTarget h;
    auto& [c, rep] = h;
    ASSERT_TRUE(rep.ready) << c.err();
    EXPECT_EQ(syms["_PyRuntime"], rep.num("runtime"));
    EXPECT_EQ(syms["PyCode_Type"], rep.num("codetype"));
    EXPECT_EQ(syms["Py_Version"], rep.num("pyversion"));

    uint32_t pv = 0;
    ASSERT_TRUE(elf->read_vaddr(syms["Py_Version"], &pv, sizeof pv));
    EXPECT_EQ(pv, rep.num("version", 3));
    EXPECT_EQ(pv, hexversion_of({kHostPython}));

    // The exact version string is in .rodata.
    std::string want = std::to_string(rep.num("version", 0)) + "." + std::to_string(rep.num("version", 1)) + "." +
                       std::to_string(rep.num("version", 2));
    auto vs = elf->version_strings();
    EXPECT_NE(std::find(vs.begin(), vs.end(), want), vs.end()) << "no \"" << want << "\" in .rodata";

    // Reads outside every PT_LOAD file range fail instead of returning garbage.
    uint8_t b[8];
    EXPECT_FALSE(elf->read_vaddr(0, b, sizeof b));
    EXPECT_FALSE(elf->read_vaddr(~0ULL - 4, b, sizeof b));
}

TEST(ElfFile, PyenvSharedLibpython) {
    int checked = 0;
    for (auto& in : pbp::test::pyenv_pythons()) {
        if (in.version != "3.12" && in.version != "3.13") continue;
        fs::path lib = fs::path(in.argv[0]).parent_path().parent_path() / "lib" /
                       ("libpython" + in.version + ".so.1.0");
        std::error_code ec;
        if (!fs::exists(lib, ec)) continue;
        SCOPED_TRACE(lib.string());
        std::string err;
        auto elf = pbp::ElfFile::open(lib.string(), err);
        ASSERT_TRUE(elf) << err;
        EXPECT_FALSE(elf->is_exec());
        EXPECT_EQ(elf->soname(), "libpython" + in.version + ".so.1.0");
        EXPECT_TRUE(elf->section(".PyRuntime").has_value());
        auto syms = elf->find_symbols({"_PyRuntime", "Py_Version", "PyCode_Type"});
        ASSERT_EQ(syms.size(), 3u);
        uint32_t pv = 0;
        ASSERT_TRUE(elf->read_vaddr(syms["Py_Version"], &pv, sizeof pv));
        EXPECT_EQ(pv, hexversion_of(in.argv));
        checked++;
    }
    PBP_REQUIRE(checked == 2, "pyenv 3.12 and 3.13 shared libpython builds");
}

TEST(ElfFile, RejectsMissingAndNonElfFiles) {
    std::string err;
    EXPECT_FALSE(pbp::ElfFile::open("/nonexistent/definitely/not/here", err));
    EXPECT_FALSE(err.empty());
    err.clear();
    EXPECT_FALSE(pbp::ElfFile::open(pbp::test::tool_path("unit_discovery_target.py"), err));
    EXPECT_FALSE(err.empty());
}

}  // namespace
