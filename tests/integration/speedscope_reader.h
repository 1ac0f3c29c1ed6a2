// Reads a pybpfprof speedscope file back into per-thread stacks for assertions.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace pbp::test {

struct RFrame {
    std::string name, file;
    int line = 0;
};

struct RThread {
    std::string profile_name;
    std::vector<std::vector<RFrame>> samples;  // root-first stacks
};

struct RProfile {
    nlohmann::json raw;
    std::vector<RThread> threads;
    size_t total() const {
        size_t n = 0;
        for (auto& t : threads) n += t.samples.size();
        return n;
    }
    // Samples (over all threads) whose stack satisfies pred.
    template <typename P> size_t count(P pred) const {
        size_t n = 0;
        for (auto& t : threads)
            for (auto& s : t.samples)
                if (pred(s)) n++;
        return n;
    }
};

inline bool has_frame(const std::vector<RFrame>& s, const std::string& name) {
    for (auto& f : s)
        if (f.name == name) return true;
    return false;
}

inline RProfile read_speedscope(const std::string& path) {
    RProfile p;
    p.raw = nlohmann::json::parse(read_file(path));
    std::vector<RFrame> frames;
    for (auto& f : p.raw["shared"]["frames"]) {
        RFrame r;
        r.name = f.value("name", "");
        r.file = f.value("file", "");
        r.line = f.value("line", 0);
        frames.push_back(r);
    }
    for (auto& prof : p.raw["profiles"]) {
        RThread t;
        t.profile_name = prof.value("name", "");
        for (auto& s : prof["samples"]) {
            std::vector<RFrame> st;
            for (auto& i : s) st.push_back(frames.at(i.get<size_t>()));
            t.samples.push_back(std::move(st));
        }
        p.threads.push_back(std::move(t));
    }
    return p;
}

}  // namespace pbp::test
