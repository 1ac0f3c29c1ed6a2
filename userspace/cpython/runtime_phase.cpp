#include "cpython/runtime_phase.h"

#include "pybpfprof/abi.h"

namespace pbp::cpython {

const std::vector<std::string>& runtime_phase_symbols() {
    static const std::vector<std::string> names = {kSym36Initialized, kSym36Finalizing};
    return names;
}

RuntimePhaseAddrs runtime_phase_addrs(const Layout& layout, uint64_t runtime_addr,
                                      const std::map<std::string, uint64_t>& syms) {
    RuntimePhaseAddrs a;
    if (layout.runtime_initialized && layout.runtime_finalizing && runtime_addr) {
        a.initialized = runtime_addr + *layout.runtime_initialized;
        a.finalizing = runtime_addr + *layout.runtime_finalizing;
    } else if (layout.version.minor == 6) {
        auto i = syms.find(kSym36Initialized), f = syms.find(kSym36Finalizing);
        if (i != syms.end() && f != syms.end() && i->second && f->second) {
            a.initialized = i->second;
            a.finalizing = f->second;
        }
    }
    return a;
}

bool in_startup(uint8_t runtime) {
    return (runtime & PBP_RT_KNOWN) && !(runtime & (PBP_RT_INITIALIZED | PBP_RT_FINALIZING));
}

bool is_site_body(const std::string& name, const std::string& file) {
    if (name != "<module>") return false;
    if (file == "<frozen site>") return true;  // 3.11+ may freeze it
    static const std::string tail = "/site.py";
    return file.size() > tail.size() && file.compare(file.size() - tail.size(), tail.size(), tail) == 0;
}

const char* frameless_label(uint8_t runtime, uint16_t reason, bool started) {
    if (reason != PBP_OK && (runtime & PBP_RT_EXITING)) return kExiting;
    if (reason != PBP_ERR_NO_FRAME && reason != PBP_ERR_NO_INTERPRETER && reason != PBP_ERR_NO_TSTATE)
        return nullptr;
    if ((runtime & PBP_RT_UNREADABLE) && !started) return kStartup;
    if (!(runtime & PBP_RT_KNOWN)) return nullptr;
    // _finalizing is never cleared once set; 'initialized' is cleared by Py_FinalizeEx too.
    if (runtime & PBP_RT_FINALIZING) return "interpreter finalization";
    if (!(runtime & PBP_RT_INITIALIZED)) return kStartup;
    if (reason == PBP_ERR_NO_TSTATE) return "thread without Python frames";
    return nullptr;
}

}  // namespace pbp::cpython
