#include "engine/snapshot.h"

#include <unordered_map>

namespace pbp {

Profile make_snapshot(Profile samples, const StackStore& store, const ProcessRegistry& registry,
                      const RunInfo& run) {
    Profile out;
    out.run = run;
    out.run.unresolved = samples.run.unresolved;
    out.run.truncated = samples.run.truncated;
    out.processes = std::move(samples.processes);

    std::unordered_map<uint32_t, uint32_t> stack_map, frame_map;
    auto frame_index = [&](uint32_t f) {
        auto [it, fresh] = frame_map.try_emplace(f, 0);
        if (fresh) it->second = out.frames.intern(store.frames().at(f));
        return it->second;
    };
    std::vector<uint32_t> frames;
    for (auto& [pid, p] : out.processes) {
        registry.fill(pid, p);
        for (auto& [tid, t] : p.threads)
            for (Sample& s : t.samples) {
                auto [it, fresh] = stack_map.try_emplace(s.stack, 0);
                if (fresh) {
                    frames.clear();
                    for (uint32_t f : store.stacks().at(s.stack)) frames.push_back(frame_index(f));
                    it->second = out.stacks.intern(frames);
                }
                s.stack = it->second;
            }
    }
    return out;
}

}  // namespace pbp
