// Per-version policy (see policy.h).
#include "cpython/policy.h"

#include <regex>

namespace pbp::cpython {

const std::vector<std::string>& runtime_symbols() {
    static const std::vector<std::string> names = {kSymRuntime, kSymVersion, kSymCodeType,
                                                   kSymTstateCurrent, kSymInterpHead};
    return names;
}

bool holds_runtime(const std::map<std::string, uint64_t>& syms, bool has_runtime_section) {
    return syms.count(kSymRuntime) || has_runtime_section ||
           (syms.count(kSymTstateCurrent) && syms.count(kSymCodeType));
}

std::optional<Version> version_from_name(const std::string& name) {
    // At most three digits of minor version: a file name is anyone's, and a longer number
    // is no CPython (nor a number stoi can hold).
    static const std::regex re(R"(python(\d)\.(\d{1,3})(?!\d))");
    std::smatch mm;
    if (std::regex_search(name, mm, re)) {
        Version v;
        v.major = static_cast<uint8_t>(std::stoi(mm[1]));
        const int minor = std::stoi(mm[2]);
        if (minor > 255) return std::nullopt;
        v.minor = static_cast<uint8_t>(minor);
        return v;
    }
    return std::nullopt;
}

Version infer_version(std::optional<uint32_t> py_version, const std::string& soname,
                      const std::string& path, const std::vector<std::string>& version_strings) {
    Version ver;
    if (py_version) ver = Version::from_hex(*py_version);
    if (!ver.known())
        if (auto v = version_from_name(soname)) ver = *v;
    if (!ver.known())
        if (auto v = version_from_name(path)) ver = *v;
    if (!ver.known() && !version_strings.empty())
        if (auto v = version_from_name("python" + version_strings.front())) ver = *v;
    return ver;
}

namespace {
// The first version that publishes _Py_DebugOffsets; the built-in tables end before it.
constexpr int kDebugOffsetsMinor = 13;
}  // namespace

LayoutChoice choose_layout(Version ver, uint64_t runtime_addr, MemoryReader& mem) {
    LayoutChoice c;
    const bool debug_offsets = !ver.known() || ver.at_least(3, kDebugOffsetsMinor);
    if (runtime_addr && debug_offsets) {
        std::vector<uint8_t> raw(kDebugOffsetsReadSize);
        if (mem.read(runtime_addr, raw.data(), raw.size()))
            c.layout = layout_from_debug_offsets(raw, c.error, c.warning);
        else
            c.error = "cannot read _PyRuntime";
    }
    if (!c.layout && !debug_offsets) c.layout = builtin_layout(ver, false);
    if (c.layout && !c.layout->version.known()) c.layout->version = ver;
    return c;
}

uint64_t interp_head_address(const Layout& layout, uint64_t runtime_addr, uint64_t interp_head_sym,
                             std::string& error) {
    error.clear();
    if (layout.runtime_interp_head) {
        if (!runtime_addr) error = "_PyRuntime not found";
        return runtime_addr ? runtime_addr + *layout.runtime_interp_head : 0;
    }
    if (!interp_head_sym) error = "the interp_head symbol is missing (stripped 3.6 build)";
    return interp_head_sym;
}

bool is_init_cleanup_shim(Version v, uint64_t qualname, uint64_t name, uint64_t filename,
                          std::string_view name_text) {
    return v.at_least(3, 13) && qualname && qualname == name && name == filename &&
           name_text == "__init__";
}

}  // namespace pbp::cpython
