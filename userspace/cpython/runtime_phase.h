// The interpreter's phase (start-up, running, finalization), for samples without Python frames:
// where BPF reads it (pbp_proc.runtime_*_addr) and what such a sample is called.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cpython/layout.h"

namespace pbp::cpython {

// 3.6 has no _PyRuntime: Py_Initialize's flag is pylifecycle.c's static 'initialized' (other
// files have statics of that name), Py_FinalizeEx's is the global _Py_Finalizing.
constexpr const char* kSym36Initialized = "pylifecycle.c:initialized";
constexpr const char* kSym36Finalizing = "_Py_Finalizing";
const std::vector<std::string>& runtime_phase_symbols();

struct RuntimePhaseAddrs {
    uint64_t initialized = 0, finalizing = 0;  // 0: not known (both or neither)
};
// From _PyRuntime (3.7+: runtime_addr and the layout's offsets), or from the 3.6 symbols found
// (syms: their addresses in the target, load bias applied).
RuntimePhaseAddrs runtime_phase_addrs(const Layout& layout, uint64_t runtime_addr,
                                      const std::map<std::string, uint64_t>& syms);

// What a sample without Python frames is (runtime: pbp_event.runtime, reason: its enum pbp_reason):
// "interpreter start-up" (Py_Initialize not completed; or the runtime unreadable, as its pages
// are before the process first touches them, in a process that has not 'started': shown a
// Python stack or a readable runtime yet), "interpreter finalization" (Py_FinalizeEx began),
// "thread without Python frames" (a running interpreter's thread with no thread state: a thread a
// C library made), "thread exiting" (any reason: the thread is in the kernel's exit path,
// PBP_RT_EXITING); nullptr: its reason says it.
const char* frameless_label(uint8_t runtime, uint16_t reason, bool started);
// A sample (with Python frames) taken before Py_Initialize completed (the importlib, encodings
// and io set-up). Its stack goes under a root frame named kStartup.
bool in_startup(uint8_t runtime);
// The body of the site module: it runs once, at start-up (from 3.7 after 'initialized' is set;
// 3.6 sets it first), and runs .pth files, sitecustomize and usercustomize. A stack that holds it
// goes under kStartup too.
bool is_site_body(const std::string& name, const std::string& file);
constexpr const char* kStartup = "interpreter start-up";
constexpr const char* kExiting = "thread exiting";

}  // namespace pbp::cpython
