// What every libFuzzer target of tests/fuzz shares: a broken promise aborts with a line
// that names it (libFuzzer then keeps the input as a crash).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace pbp::fuzz {

[[noreturn]] inline void broken(const char* target, const char* what, const std::string& detail) {
    fprintf(stderr, "%s: invariant broken: %s: %.500s\n", target, what, detail.c_str());
    abort();
}

// An error meant for a user: one line, not empty.
inline bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

// Well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
inline bool valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = s[i];
        size_t n = 0;
        uint32_t cp = 0, min = 0;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xE0) == 0xC0) n = 1, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) n = 2, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) n = 3, cp = c & 0x07, min = 0x10000;
        else return false;
        for (size_t k = 1; k <= n; k++) {
            if (i + k >= s.size()) return false;
            const unsigned char d = s[i + k];
            if ((d & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (d & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += n + 1;
    }
    return true;
}

}  // namespace pbp::fuzz
