#include "engine/profile.h"

#include <algorithm>
#include <functional>
#include <iterator>

namespace pbp {

namespace {
inline size_t hash_combine(size_t h, size_t v) {
    return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}
}  // namespace

size_t FrameHash::operator()(const Frame& f) const {
    size_t h = std::hash<std::string>{}(f.name);
    h = hash_combine(h, std::hash<std::string>{}(f.file));
    h = hash_combine(h, static_cast<size_t>(f.line));
    h = hash_combine(h, static_cast<size_t>(f.kind));
    h = hash_combine(h, std::hash<std::string>{}(f.library));
    return hash_combine(h, f.synthetic);
}

uint32_t FrameTable::intern(const Frame& f) {
    auto it = index_.find(f);
    if (it != index_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(frames_.size());
    frames_.push_back(f);
    index_.emplace(f, id);
    return id;
}

size_t StackTable::VecHash::operator()(const std::vector<uint32_t>& v) const {
    size_t h = v.size();
    for (uint32_t x : v) h = hash_combine(h, x);
    return h;
}

uint32_t StackTable::intern(const std::vector<uint32_t>& root_first) {
    auto it = index_.find(root_first);
    if (it != index_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(stacks_.size());
    stacks_.push_back(root_first);
    index_.emplace(root_first, id);
    return id;
}

std::string ProcessProfile::display_name() const {
    std::string base = cmdline.empty() ? comm : cmdline;
    if (base.size() > 120) base = base.substr(0, 117) + "...";
    std::string s = base + " (pid " + std::to_string(pid);
    if (ns_pid && ns_pid != pid) s += ", ns pid " + std::to_string(ns_pid);
    return s + ")";
}

std::string ProcessProfile::pod_name() const {
    auto get = [&](const char* k) {
        auto it = labels.find(k);
        return it == labels.end() ? std::string() : it->second;
    };
    if (!get("pod").empty()) return get("namespace") + "/" + get("pod");
    return get("pod_uid");
}

std::string ProcessProfile::where() const {
    std::string s;
    auto add = [&s](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
    if (std::string pod = pod_name(); !pod.empty()) add("pod " + pod);
    auto c = labels.find("container");
    auto id = labels.find("container_id");
    if (c != labels.end() || id != labels.end())
        add("container " + (c != labels.end() ? c->second : id->second.substr(0, 12)));
    // The labels a merge gave (role=scheduler, worker=tcp://...), then the machine.
    static const char* const kShownAbove[] = {"cgroup", "container_id", "container", "pod_uid", "pod", "namespace",
                                              "host"};
    for (const auto& [k, v] : labels)
        if (std::find(std::begin(kShownAbove), std::end(kShownAbove), k) == std::end(kShownAbove)) add(k + "=" + v);
    if (auto h = labels.find("host"); h != labels.end()) add("host " + h->second);
    return s;
}

uint64_t ThreadProfile::sample_count() const {
    uint64_t n = 0;
    for (const Sample& s : samples) n += s.count;
    return n;
}

uint64_t Profile::total_samples() const {
    uint64_t n = 0;
    for (auto& [_, p] : processes)
        for (auto& [__, t] : p.threads) n += t.sample_count();
    return n;
}

uint64_t Profile::total_weight_ns(SampleKind k) const {
    uint64_t n = 0;
    for (auto& [_, p] : processes)
        for (auto& [__, t] : p.threads)
            for (auto& s : t.samples)
                if (s.kind == k) n += s.weight_ns;
    return n;
}

const char* kind_name(SampleKind k) {
    switch (k) {
        case SampleKind::Cpu: return "cpu";
        case SampleKind::OffCpu: return "off-cpu";
    }
    return "unknown";
}

const char* mode_name(ProfileMode m) {
    switch (m) {
        case ProfileMode::Cpu: return "cpu";
        case ProfileMode::Wall: return "wall";
        case ProfileMode::Gil: return "gil";
    }
    return "cpu";
}

bool parse_mode(const std::string& s, ProfileMode& m) {
    if (s == "cpu") m = ProfileMode::Cpu;
    else if (s == "wall") m = ProfileMode::Wall;
    else if (s == "gil") m = ProfileMode::Gil;
    else return false;
    return true;
}

const char* gil_name(GilState g) {
    switch (g) {
        case GilState::NA: return "n/a";
        case GilState::Held: return "held";
        case GilState::Waiting: return "waiting";
        case GilState::Neither: return "neither";
    }
    return "n/a";
}

const char* wait_leaf(WaitReason w) {
    switch (w) {
        case WaitReason::None: return "";
        case WaitReason::Sleep: return "[sleeping]";
        case WaitReason::Io: return "[waiting for I/O]";
        case WaitReason::Gil: return "[waiting for the GIL]";
        case WaitReason::Runnable: return "[runnable, waiting for a CPU]";
    }
    return "";
}

size_t Profile::total_threads() const {
    size_t n = 0;
    for (auto& [_, p] : processes) n += p.threads.size();
    return n;
}

uint64_t Profile::unresolved_total() const {
    uint64_t n = 0;
    for (auto& [_, c] : run.unresolved) n += c;
    return n;
}

}  // namespace pbp
