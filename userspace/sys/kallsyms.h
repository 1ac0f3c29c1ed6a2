// The kernel's symbols, from /proc/kallsyms: kernel addresses (a sample's kernel stack) to
// "[k] name", the way the outputs show kernel frames (docs/native-frames.md).
//
// The file lists every symbol with its address; only code (types t, T, w, W) is kept, sorted
// by address, and a symbol covers the addresses from its own up to the next symbol's. An
// address before the first symbol, at or after `_etext` (the end of the kernel's own text)
// and before the next module symbol, or more than kMaxLastSymbolBytes past the last symbol
// is unknown. When the kernel hides the addresses (kernel.kptr_restrict, or a reader without
// CAP_SYSLOG) every address reads as 0: the table is then empty and why() says so.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pbp {

class KernelSymbols {
public:
    static constexpr uint64_t kMaxLastSymbolBytes = 1 << 20;

    // Reads and parses path (/proc/kallsyms unless told). Never throws; check ok().
    static KernelSymbols load(const std::string& path = "/proc/kallsyms");
    // Parses the text of a kallsyms file; source names it in why().
    static KernelSymbols parse(std::string_view text, const std::string& source = "/proc/kallsyms");

    // True when the table holds symbols with real addresses.
    bool ok() const { return !addr_.empty(); }
    // Why ok() is false, in one line naming the cause and the fix; "" when ok.
    const std::string& why() const { return why_; }
    size_t size() const { return addr_.size(); }

    // "[k] name" of the symbol containing addr; "" when unknown (see above).
    std::string name_for(uint64_t addr) const;
    // The symbol containing addr: its index (for name(), module(), address()), or -1.
    long find(uint64_t addr) const;
    std::string_view name(size_t i) const { return std::string_view(names_).substr(name_off_[i], name_len_[i]); }
    // The module a symbol is in ("nf_tables"), "" for the kernel itself.
    const std::string& module(size_t i) const { return modules_[module_[i]]; }
    uint64_t address(size_t i) const { return addr_[i]; }

private:
    std::vector<uint64_t> addr_;       // sorted
    std::vector<uint64_t> end_;        // each symbol's end (exclusive)
    std::vector<uint32_t> name_off_;   // into names_
    std::vector<uint32_t> name_len_;
    std::vector<uint16_t> module_;     // into modules_ (0: the kernel)
    std::string names_;
    std::vector<std::string> modules_;
    std::string why_;
};

}  // namespace pbp
