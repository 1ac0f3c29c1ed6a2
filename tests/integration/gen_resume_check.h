// The oracle of tests/workloads/lang_gen_resume.py: while resume_all runs (between the first
// and the last sample with it), every sample is <module> <- main <- resume_all [<- gen], or
// a lone "[eval loop being entered: ...]" frame: a 3.11/3.12 sample taken while
// tstate->cframe was not settled. Anything else is a wrong stack.
#pragma once
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "speedscope_reader.h"

namespace pbp::test {

struct GenResumeCheck {
    size_t total = 0, gens = 0, marked = 0, wrong = 0;
    std::map<std::string, size_t> bad;  // wrong stack ("leaf:line <- ... <- root") -> samples
    std::string bad_stacks() const {
        std::string e;
        for (auto& [k, n] : bad) e += "\n  " + std::to_string(n) + "x " + k;
        return e;
    }
};

// At most this many of a run's samples in the loop may be marked: 4%. The window is a few
// instructions of each eval-loop entry; how much of the run it is varies with the machine.
// Measured on pyenv 3.12 (2 CPUs, 4999 Hz, no bpf_loop): 0.3-0.7% quiet (12 runs), 0.5-0.95%
// beside a busy loop or a second test (14 runs); one CI run (-j2) had 2.1% (214 of 10030),
// over the 2% bound this replaces. (Wrong stacks must be none: the bound only keeps marking
// from becoming a catch-all.)
inline size_t max_marked(size_t total) { return total / 25; }

// file: the workload's path as the interpreter sees it; gen_lines: the lines gen() may be at.
inline GenResumeCheck check_gen_resume(const RProfile& p, const std::string& file, const std::set<int>& gen_lines) {
    GenResumeCheck r;
    auto in_loop = [](const std::vector<RFrame>& s) { return has_frame(s, "resume_all"); };
    for (auto& t : p.threads) {
        const auto& ss = t.samples;
        auto first = std::find_if(ss.begin(), ss.end(), in_loop);
        if (first == ss.end()) continue;
        auto last = std::find_if(ss.rbegin(), ss.rend(), in_loop).base();
        for (auto it = first; it != last; ++it) {
            const auto& s = *it;
            r.total++;
            if (s.size() == 1 && s[0].name.rfind("[eval loop being entered", 0) == 0) {
                r.marked++;
                continue;
            }
            bool ok = (s.size() == 3 || s.size() == 4) && s[0].name == "<module>" && s[1].name == "main" &&
                      s[2].name == "resume_all" && s[2].file == file;
            if (ok && s.size() == 4) {
                r.gens++;
                ok = s[3].name == "gen" && s[3].file == file && gen_lines.count(s[3].line);
            }
            if (!ok) {
                r.wrong++;
                std::string k;
                for (size_t i = s.size(); i-- > 0;) k += s[i].name + ":" + std::to_string(s[i].line) + (i ? " <- " : "");
                r.bad[k]++;
            }
        }
    }
    return r;
}

}  // namespace pbp::test
