// --native (issue 17), with real BPF and real processes: a C extension built here without frame
// pointers shows its frames under the Python frame that called it, in order and once each; a
// loop of reads shows kernel frames under the Python line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"

using namespace pbp::test;

namespace {

int minor_of(const Interpreter& in) { return std::stoi(in.version.substr(2)); }

// One line of collapsed output: its frames (process and thread first) and its count.
struct Folded {
    std::vector<std::string> frames;
    size_t count = 0;
};

std::vector<Folded> read_folded(const std::string& text) {
    std::vector<Folded> out;
    std::istringstream is(text);
    std::string line;
    while (std::getline(is, line)) {
        const auto sp = line.rfind(' ');
        if (sp == std::string::npos) continue;
        Folded f;
        f.count = std::stoul(line.substr(sp + 1));
        std::istringstream fs(line.substr(0, sp));
        std::string fr;
        while (std::getline(fs, fr, ';')) f.frames.push_back(fr);
        out.push_back(std::move(f));
    }
    return out;
}

// The folded output's frames as the tests compare them (export/common.cpp frame_label): a
// kernel frame "vfs_read_[k]" as "[k] vfs_read", a native one "b [ext.so]" without its library.
std::vector<Folded> read_plain(const std::string& path) {
    std::vector<Folded> v = read_folded(read_file(path));
    for (Folded& f : v)
        for (std::string& fr : f.frames) {
            const std::string k = "_[k]";
            if (fr.size() > k.size() && fr.compare(fr.size() - k.size(), k.size(), k) == 0) {
                fr = "[k] " + fr.substr(0, fr.size() - k.size());
            } else if (!fr.empty() && fr.back() == ']') {
                const size_t lib = fr.rfind(" [");
                if (lib != std::string::npos && lib > 0) fr.resize(lib);
            }
        }
    return v;
}

// A frame named name: "b", or "b (file:line)" with debug information.
bool named(const std::string& frame, const std::string& name) {
    return frame == name || frame.rfind(name + " (", 0) == 0;
}

size_t count_named(const std::vector<std::string>& frames, const std::string& name) {
    size_t n = 0;
    for (auto& f : frames) n += named(f, name);
    return n;
}

std::string sysconfig(const Interpreter& in, const std::string& expr) {
    auto r = run(with_args(in.argv, {"-c", "import sysconfig; print(" + expr + ")"}));
    if (r.status != 0) return "";
    std::string s = r.out;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
}

// Interpreters whose eval-loop frames cannot be named (see ExtensionChainUnderItsPythonCaller).
bool fallback_only(const Interpreter& in) { return in.name == "sid-3.14" || in.name == "sid-3.15"; }

class Native : public ::testing::TestWithParam<Interpreter> {
protected:
    void SetUp() override {
        PBP_REQUIRE(kernel_has_bpf_loop(), "--native needs bpf_loop (5.17+)");
        dir = temp_dir();
    }
    std::string dir;
};

// Python outer() -> ext.a() -> b(), which spins: >= 95% of the samples of the chain show exactly
// outer, a, b at the leaf, in that order, each once.
TEST_P(Native, ExtensionChainUnderItsPythonCaller) {
    const Interpreter& in = GetParam();
    const std::string include = sysconfig(in, "sysconfig.get_paths()['include']");
    const std::string suffix = sysconfig(in, "sysconfig.get_config_var('EXT_SUFFIX')");
    PBP_REQUIRE(!include.empty() && std::filesystem::exists(in.root + include + "/Python.h"),
                in.name + ": no Python.h (its -dev package) to build the test extension with");
    // Built on the host against the interpreter's headers, into a directory it sees.
    const std::string ext_dir = in.root.empty() ? dir : "/tmp/pbp-native-ext";
    std::filesystem::create_directories(in.root + ext_dir);
    std::vector<std::string> cc_argv{"cc", "-O2", "-fomit-frame-pointer", "-shared", "-fPIC", "-I" + in.root + include};
    // Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>: the chroot's, after the host's own headers.
    if (!in.root.empty()) cc_argv.push_back("-idirafter" + in.root + "/usr/include");
    for (std::string a : {std::string("-o"), in.root + ext_dir + "/native_chain_ext" + suffix, workload("native_chain_ext.c")})
        cc_argv.push_back(a);
    auto cc = run(cc_argv);
    ASSERT_EQ(cc.status, 0) << cc.err;

    const std::string out = dir + "/out.folded";
    auto cmd = std::vector<std::string>{pybpfprof_bin(), "-q", "--native", "-f", "collapsed", "-r", "199", "-o", out,
                                        "--"};
    auto py = python_running(in, "native_chain.py", {ext_dir, "4"});
    cmd.insert(cmd.end(), py.begin(), py.end());
    auto r = run(cmd, 180);
    ASSERT_EQ(r.status, 0) << r.err;

    size_t chain = 0, exact = 0;
    std::string bad;
    for (const Folded& f : read_plain(out)) {
        const bool in_chain = count_named(f.frames, "outer") || count_named(f.frames, "b");
        if (!in_chain) continue;
        chain += f.count;
        // A sample taken in the kernel (a timer interrupt in b) has kernel frames above b.
        size_t n = f.frames.size();
        while (n && f.frames[n - 1].rfind("[k] ", 0) == 0) n--;
        if (n >= 3 && named(f.frames[n - 3], "outer") && f.frames[n - 2] == "a" && f.frames[n - 1] == "b" &&
            count_named(f.frames, "outer") == 1 && count_named(f.frames, "a") == 1 && count_named(f.frames, "b") == 1)
            exact += f.count;
        else if (bad.size() < 4000) {
            for (auto& fr : f.frames) bad += fr + ";";
            bad += " " + std::to_string(f.count) + "\n";
        }
    }
    ASSERT_GT(chain, 50u) << r.err;
    if (!fallback_only(in)) {
        EXPECT_GE(exact * 100, chain * 95) << exact << " of " << chain << " samples exact; others:\n" << bad;
        return;
    }
    // Debian sid's 3.14 and 3.15: the eval loop's frame is in its .cold part, which has no symbol
    // in the stripped executable, so no eval-loop frame is found and the merge cannot be exact. The
    // fallback still holds: outer once, the marker, and the extension's frames at the leaf.
    size_t kept = 0;
    for (const Folded& f : read_plain(out)) {
        size_t n = f.frames.size();
        while (n && f.frames[n - 1].rfind("[k] ", 0) == 0) n--;
        if (count_named(f.frames, "outer") == 1 && count_named(f.frames, "[native stack incomplete]") == 1 &&
            n >= 2 && f.frames[n - 2] == "a" && f.frames[n - 1] == "b")
            kept += f.count;
    }
    EXPECT_GE(kept * 100, chain * 95) << kept << " of " << chain;
}

// A loop of os.read on /dev/zero: kernel frames ("[k] ...") at the leaf end, under the Python
// line that reads, never above a Python or native frame.
TEST_P(Native, KernelFramesUnderThePythonLine) {
    const Interpreter& in = GetParam();
    const std::string out = dir + "/out.folded";
    auto cmd = std::vector<std::string>{pybpfprof_bin(), "-q", "--native", "-f", "collapsed", "-r", "199", "-o", out,
                                        "--"};
    auto py = with_args(in.argv, {"-c",
                                  "import os, time\n"
                                  "fd = os.open('/dev/zero', os.O_RDONLY)\n"
                                  "def reader():\n"
                                  "    os.read(fd, 1 << 20)\n"
                                  "end = time.monotonic() + 3\n"
                                  "while time.monotonic() < end:\n"
                                  "    reader()\n"});
    cmd.insert(cmd.end(), py.begin(), py.end());
    auto r = run(cmd, 180);
    ASSERT_EQ(r.status, 0) << r.err;
    size_t reader = 0, kernel = 0, read_path = 0;
    std::string text = read_file(out);
    for (const Folded& f : read_plain(out)) {
        size_t first_k = f.frames.size(), last_user = 0;
        for (size_t i = 0; i < f.frames.size(); i++) {
            if (f.frames[i].rfind("[k] ", 0) == 0) first_k = std::min(first_k, i);
            else last_user = i;
        }
        if (!count_named(f.frames, "reader")) continue;
        reader += f.count;
        if (first_k == f.frames.size()) continue;
        EXPECT_LT(last_user, first_k) << "a kernel frame above a user one: " << text.substr(0, 3000);
        kernel += f.count;
        for (auto& fr : f.frames)
            if (fr == "[k] ksys_read" || fr == "[k] vfs_read" || fr == "[k] read_zero") {
                read_path += f.count;
                break;
            }
    }
    ASSERT_GT(reader, 50u) << r.err;
    // Most of the time goes to the kernel copying zeros.
    EXPECT_GE(kernel * 2, reader) << kernel << " of " << reader << "\n" << text.substr(0, 3000);
    EXPECT_GE(read_path * 10, kernel * 9) << read_path << " of " << kernel << "\n" << text.substr(0, 3000);
}

std::vector<Interpreter> native_interpreters() {
    std::vector<Interpreter> v;
    for (auto& i : all_interpreters())
        if (minor_of(i) >= 6) v.push_back(i);
    return v;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(, Native, ::testing::ValuesIn(native_interpreters()), interpreter_test_name);
