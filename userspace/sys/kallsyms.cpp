#include "sys/kallsyms.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>
#include <unordered_map>

#include "sys/procfs.h"

namespace pbp {

namespace {

struct Entry {
    uint64_t addr;
    bool global;      // T or W: preferred over a local alias at the same address
    bool end_marker;  // _etext: the end of the kernel's own text
    uint32_t name_off, name_len;
    uint16_t module;
};

bool parse_hex(std::string_view s, uint64_t& v) {
    if (s.empty() || s.size() > 16) return false;
    v = 0;
    for (char c : s) {
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return false;
        v = (v << 4) | static_cast<uint64_t>(d);
    }
    return true;
}

}  // namespace

KernelSymbols KernelSymbols::load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        KernelSymbols k;
        k.why_ = "cannot read " + path + ": kernel frames cannot be named (is /proc mounted?)";
        return k;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    return parse(ss.str(), path);
}

KernelSymbols KernelSymbols::parse(std::string_view text, const std::string& source) {
    KernelSymbols k;
    k.modules_.emplace_back();
    std::unordered_map<std::string, uint16_t> module_index;
    std::vector<Entry> entries;
    size_t lines = 0, zero = 0;
    while (!text.empty()) {
        size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
        if (line.empty()) continue;
        // "ffffffff81000000 T _stext" or "ffffffffc0a01000 t nft_do_chain\t[nf_tables]"
        size_t sp1 = line.find(' ');
        if (sp1 == std::string_view::npos || sp1 + 3 > line.size() || line[sp1 + 2] != ' ') continue;
        uint64_t addr = 0;
        if (!parse_hex(line.substr(0, sp1), addr)) continue;
        lines++;
        if (addr == 0) {
            zero++;
            continue;
        }
        const char type = line[sp1 + 1];
        if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue;
        std::string_view rest = line.substr(sp1 + 3);
        std::string_view name = rest.substr(0, rest.find('\t'));
        uint16_t module = 0;
        if (size_t tab = rest.find('\t'); tab != std::string_view::npos) {
            std::string_view m = rest.substr(tab + 1);
            if (m.size() >= 2 && m.front() == '[' && m.back() == ']') m = m.substr(1, m.size() - 2);
            auto it = module_index.find(std::string(m));
            if (it == module_index.end()) {
                if (k.modules_.size() == 0xffff) continue;  // more modules than anyone loads
                it = module_index.emplace(std::string(m), static_cast<uint16_t>(k.modules_.size())).first;
                k.modules_.emplace_back(m);
            }
            module = it->second;
        }
        if (name.empty()) continue;
        entries.push_back(Entry{addr, type == 'T' || type == 'W', module == 0 && name == "_etext",
                                static_cast<uint32_t>(k.names_.size()), static_cast<uint32_t>(name.size()), module});
        k.names_.append(name);
    }
    if (lines == 0) {
        k.why_ = source + " lists no symbols: kernel frames cannot be named";
        return k;
    }
    if (entries.empty() && zero > 0) {
        const std::string restrict = procfs::read_text("/proc/sys/kernel/kptr_restrict");
        k.why_ = source + " shows every kernel address as 0 (kernel.kptr_restrict=" +
                 (restrict.empty() ? std::string("?") : restrict.substr(0, restrict.find('\n'))) +
                 ", or no CAP_SYSLOG): kernel frames cannot be named; run as root with kernel.kptr_restrict "
                 "at 0 or 1 (sysctl kernel.kptr_restrict=1)";
        return k;
    }
    if (entries.empty()) {
        k.why_ = source + " lists no kernel code symbols: kernel frames cannot be named";
        return k;
    }
    // By address; at one address the global name first (an alias's local name is the same code).
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        return a.addr != b.addr ? a.addr < b.addr : a.global > b.global;
    });
    for (size_t i = 0; i < entries.size(); i++) {
        const Entry& e = entries[i];
        if (i && entries[i - 1].addr == e.addr) continue;  // the same code, already named
        if (e.end_marker) continue;                        // ends the symbol before it
        uint64_t end = e.addr + kMaxLastSymbolBytes;
        for (size_t j = i + 1; j < entries.size(); j++)
            if (entries[j].addr != e.addr) {
                end = entries[j].addr;
                break;
            }
        k.addr_.push_back(e.addr);
        k.end_.push_back(end);
        k.name_off_.push_back(e.name_off);
        k.name_len_.push_back(e.name_len);
        k.module_.push_back(e.module);
    }
    return k;
}

long KernelSymbols::find(uint64_t addr) const {
    auto it = std::upper_bound(addr_.begin(), addr_.end(), addr);
    if (it == addr_.begin()) return -1;
    const size_t i = static_cast<size_t>(it - addr_.begin()) - 1;
    return addr < end_[i] ? static_cast<long>(i) : -1;
}

std::string KernelSymbols::name_for(uint64_t addr) const {
    const long i = find(addr);
    if (i < 0) return {};
    return "[k] " + std::string(name(static_cast<size_t>(i)));
}

}  // namespace pbp
