// A profile with Python, native and kernel frames mixed the way `--native` gives them
// (issue 17), for the exporters' and the report's tests: one process, two threads.
//
// MainThread, 100 samples, each one period (99 Hz):
//   60  <module> -> outer -> ext.a [_ext.so] -> b [_ext.so]                 (native leaf)
//   25  <module> -> outer -> read_loop -> _Py_read [libpython] -> read [libc]
//                     -> [k] ksys_read -> [k] vfs_read                     (kernel leaf)
//   15  <module> -> outer                                                   (Python leaf)
// Worker, 40 samples:
//   40  worker -> dgemm_kernel [libopenblas.so.0] -> [k] asm_exc_page_fault
// So native frames hold 60 + 25 + 40 samples at or under them, kernel frames 25 + 40.
#pragma once
#include <cstdint>
#include <string>

#include "engine/profile.h"

namespace pbp::test {

struct MixedProfile {
    static constexpr const char* kExtLib = "/opt/app/lib/_ext.cpython-311-x86_64-linux-gnu.so";
    static constexpr const char* kLibc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
    static constexpr const char* kLibpython = "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0";
    static constexpr const char* kBlas = "/usr/lib/x86_64-linux-gnu/libopenblas.so.0";
    static constexpr uint64_t kPeriod = 10'101'010;  // 99 Hz
    Profile profile;
    uint32_t module, outer, read_loop, worker;               // Python
    uint32_t ext_a, ext_b, py_read, libc_read, dgemm;        // native
    uint32_t k_ksys_read, k_vfs_read, k_page_fault;          // kernel

    MixedProfile() {
        Profile& p = profile;
        p.run.target = "pid 4242";
        p.run.start_mono_ns = 5'000'000'000ULL;
        p.run.end_mono_ns = p.run.start_mono_ns + 2'000'000'000ULL;
        p.run.start_unix_ns = 1'795'000'000'000'000'000LL;
        p.run.rate_hz = 99;
        p.run.period_ns = kPeriod;
        p.run.kernel = "6.18.0";
        p.run.host = "node-a";
        p.run.version = "test";
        p.run.max_depth = 1024;
        auto py = [&](const char* n, const char* f, int line) { return p.frames.intern(Frame{n, f, line, false}); };
        auto native = [&](const char* n, const char* file, int line, const char* lib) {
            Frame f{n, file, line, false};
            f.kind = FrameKind::Native;
            f.library = lib;
            return p.frames.intern(f);
        };
        auto kernel = [&](const char* n) {
            Frame f{n, "", 0, false};
            f.kind = FrameKind::Kernel;
            f.library = "[kernel]";
            return p.frames.intern(f);
        };
        module = py("<module>", "/opt/app/main.py", 30);
        outer = py("outer", "/opt/app/main.py", 12);
        read_loop = py("read_loop", "/opt/app/main.py", 20);
        worker = py("worker", "/opt/app/work.py", 5);
        ext_a = native("a", "/src/ext/ext.c", 14, kExtLib);  // debug information gave file:line
        ext_b = native("b", "/src/ext/ext.c", 7, kExtLib);
        py_read = native("_Py_read", "", 0, kLibpython);
        libc_read = native("read", "", 0, kLibc);
        dgemm = native("dgemm_kernel_HASWELL", "", 0, kBlas);
        k_ksys_read = kernel("ksys_read");
        k_vfs_read = kernel("vfs_read");
        k_page_fault = kernel("asm_exc_page_fault");
        const uint32_t s_native = p.stacks.intern({module, outer, ext_a, ext_b});
        const uint32_t s_kernel = p.stacks.intern({module, outer, read_loop, py_read, libc_read, k_ksys_read, k_vfs_read});
        const uint32_t s_python = p.stacks.intern({module, outer});
        const uint32_t s_worker = p.stacks.intern({worker, dgemm, k_page_fault});

        ProcessProfile& pr = p.processes[4242];
        pr.pid = pr.ns_pid = 4242;
        pr.comm = "python3";
        pr.cmdline = "python3 main.py";
        pr.exe = "/usr/bin/python3.11";
        pr.python = "3.11.2 (shared /usr/bin/python3.11)";
        pr.first_sample_ns = p.run.start_mono_ns + kPeriod;
        ThreadProfile& main = pr.threads[4242];
        main.tid = main.ns_tid = 4242;
        main.name = "MainThread";
        ThreadProfile& w = pr.threads[4243];
        w.tid = w.ns_tid = 4243;
        w.name = "Worker";
        uint64_t ts = p.run.start_mono_ns;
        for (int i = 0; i < 100; i++) {
            ts += kPeriod;
            const uint32_t s = i < 60 ? s_native : i < 85 ? s_kernel : s_python;
            main.samples.push_back(Sample{ts, s, 0, SampleKind::Cpu, kPeriod});
            if (i < 40) w.samples.push_back(Sample{ts, s_worker, 1, SampleKind::Cpu, kPeriod});
        }
        pr.last_sample_ns = ts;
    }
};

}  // namespace pbp::test
