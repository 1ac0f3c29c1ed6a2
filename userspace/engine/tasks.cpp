#include "engine/tasks.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

namespace pbp {

namespace {

using nlohmann::json;

bool text_field(const json& o, const char* name, bool required, size_t max, std::string& out, std::string& error,
                const std::string& where) {
    auto it = o.find(name);
    if (it == o.end() || it->is_null()) {
        if (required) error = where + " has no \"" + name + "\"";
        return !required;
    }
    if (!it->is_string()) {
        error = where + ": \"" + name + "\" must be a string";
        return false;
    }
    out = it->get<std::string>();
    if (out.size() > max) {
        error = where + ": \"" + name + "\" is longer than " + std::to_string(max) + " bytes";
        return false;
    }
    return true;
}

bool id_field(const json& o, const char* name, int64_t& out, std::string& error, const std::string& where) {
    auto it = o.find(name);
    if (it == o.end() || it->is_null()) return true;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > UINT32_MAX) {
        error = where + ": \"" + name + "\" must be a process or thread id";
        return false;
    }
    out = it->get<int64_t>();
    return true;
}

// Wall-clock seconds -> the profile's clock.
bool to_mono(const RunInfo& run, double unix_s, uint64_t& out) {
    if (!std::isfinite(unix_s) || unix_s < 0 || unix_s > 1e11) return false;
    const long double ns = static_cast<long double>(unix_s) * 1e9L - static_cast<long double>(run.start_unix_ns) +
                           static_cast<long double>(run.start_mono_ns);
    out = ns <= 0 ? 0 : static_cast<uint64_t>(std::llround(static_cast<double>(ns)));
    return true;
}

}  // namespace

void sort_tasks(Profile& profile) {
    std::stable_sort(profile.tasks.begin(), profile.tasks.end(), [](const TaskSpan& a, const TaskSpan& b) {
        return std::tie(a.process, a.tid, a.start_ns, a.stop_ns) < std::tie(b.process, b.tid, b.start_ns, b.stop_ns);
    });
}

bool attach_tasks(Profile& profile, std::string_view text, AttachedTasks& result, std::string& error,
                  const TaskLimits& limits) {
    result = AttachedTasks{};
    error.clear();
    if (text.size() > limits.max_bytes) {
        error = "the task file is larger than " + std::to_string(limits.max_bytes >> 20) + " MiB";
        return false;
    }
    json doc;
    try {
        doc = json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {
        error = std::string("the task file is not JSON (") + e.what() + ")";
        return false;
    }
    if (!doc.is_object() || doc.value("format", json()) != "pybpfprof-tasks") {
        error = "not a task file (it needs \"format\": \"pybpfprof-tasks\"; pybpfprof.dask writes one)";
        return false;
    }
    if (!doc.contains("version") || !doc["version"].is_number_integer() || doc["version"].get<int64_t>() != 1) {
        error = "task file version " + (doc.contains("version") ? doc["version"].dump() : std::string("(none)")) +
                " is not supported (this pybpfprof reads version 1)";
        return false;
    }
    auto tasks_it = doc.find("tasks");
    if (tasks_it == doc.end() || !tasks_it->is_array()) {
        error = "the task file has no \"tasks\" list";
        return false;
    }
    if (profile.run.start_unix_ns == 0) {
        error = "the profile has no wall-clock start time (run.start_unix_ns): its tasks cannot be placed";
        return false;
    }

    // Processes by their worker label, by pid and by pid in their namespace.
    std::map<std::string, std::vector<uint32_t>> by_worker;
    std::map<int64_t, std::vector<uint32_t>> by_pid;
    for (const auto& [key, pr] : profile.processes) {
        auto w = pr.labels.find("worker");
        if (w != pr.labels.end()) by_worker[w->second].push_back(key);
        by_pid[pr.pid].push_back(key);
        if (pr.ns_pid && pr.ns_pid != pr.pid) by_pid[pr.ns_pid].push_back(key);
    }

    std::vector<TaskSpan> spans;
    std::map<std::string, size_t> unmatched_by_worker;
    const auto& tasks = *tasks_it;
    for (size_t i = 0; i < tasks.size(); i++) {
        const json& t = tasks[i];
        const std::string where = "task " + std::to_string(i + 1);
        if (!t.is_object()) {
            error = where + " is not an object";
            return false;
        }
        std::string key, prefix, worker, host;
        int64_t pid = -1, tid = -1;
        if (!text_field(t, "key", true, limits.max_text, key, error, where) ||
            !text_field(t, "prefix", false, limits.max_text, prefix, error, where) ||
            !text_field(t, "worker", false, limits.max_text, worker, error, where) ||
            !text_field(t, "host", false, limits.max_text, host, error, where) ||
            !id_field(t, "pid", pid, error, where) || !id_field(t, "tid", tid, error, where))
            return false;
        if (prefix.empty()) prefix = key;
        auto ss = t.find("startstops");
        if (ss == t.end() || !ss->is_array()) {
            error = where + " (" + key + ") has no \"startstops\" list";
            return false;
        }
        result.tasks++;
        // Its process.
        std::vector<uint32_t> cands;
        if (!worker.empty() && by_worker.count(worker)) {
            cands = by_worker[worker];
        } else if (pid >= 0 && by_pid.count(pid)) {
            for (uint32_t k : by_pid[pid]) {
                const auto& labels = profile.processes.at(k).labels;
                auto h = labels.find("host");
                if (!host.empty() && h != labels.end() && h->second != host) continue;
                // A process labelled as another worker is not this one.
                auto w = labels.find("worker");
                if (!worker.empty() && w != labels.end() && w->second != worker) continue;
                cands.push_back(k);
            }
        }
        std::sort(cands.begin(), cands.end());
        cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
        const bool matched = cands.size() == 1;
        uint32_t proc = matched ? cands[0] : 0, thread = 0;
        if (matched && tid >= 0) {
            thread = static_cast<uint32_t>(tid);
            for (const auto& [host_tid, th] : profile.processes.at(proc).threads)
                if (th.ns_tid == tid || (th.ns_tid == 0 && host_tid == tid)) {
                    thread = host_tid;
                    break;
                }
        }
        for (size_t j = 0; j < ss->size(); j++) {
            const json& s = (*ss)[j];
            const std::string sw = where + " (" + key + ") startstop " + std::to_string(j + 1);
            if (!s.is_object()) {
                error = sw + " is not an object";
                return false;
            }
            std::string action;
            if (!text_field(s, "action", true, limits.max_text, action, error, sw)) return false;
            auto a = s.find("start"), b = s.find("stop");
            if (a == s.end() || b == s.end() || !a->is_number() || !b->is_number()) {
                error = sw + " needs numbers \"start\" and \"stop\" (wall-clock seconds)";
                return false;
            }
            TaskSpan span;
            if (!to_mono(profile.run, a->get<double>(), span.start_ns) ||
                !to_mono(profile.run, b->get<double>(), span.stop_ns)) {
                error = sw + ": \"start\"/\"stop\" are not wall-clock seconds";
                return false;
            }
            if (span.stop_ns < span.start_ns) {
                error = sw + " stops before it starts";
                return false;
            }
            result.spans++;
            if (result.spans > limits.max_spans) {
                error = "the task file has more than " + std::to_string(limits.max_spans) + " spans";
                return false;
            }
            if (!matched) {
                unmatched_by_worker[worker.empty() ? "pid " + std::to_string(pid) : worker]++;
                result.unmatched++;
                continue;
            }
            span.process = proc;
            span.tid = thread;
            span.key = key;
            span.prefix = prefix;
            span.action = std::move(action);
            spans.push_back(std::move(span));
        }
    }
    for (const auto& [w, n] : unmatched_by_worker)
        result.warnings.push_back(std::to_string(n) + " task spans of " + w +
                                  " are left out: no profiled process is that worker");
    result.attached = spans.size();
    profile.tasks.insert(profile.tasks.end(), std::make_move_iterator(spans.begin()),
                         std::make_move_iterator(spans.end()));
    sort_tasks(profile);
    return true;
}

}  // namespace pbp
