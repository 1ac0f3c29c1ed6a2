// A consistent, self-contained copy of one session's profile, made while sampling goes on:
// its samples; just the stacks and frames they use, numbered anew (nothing of another
// session's processes leaks in); and the processes' metadata as the registry has it now.
// samples is taken by value: a final profile is moved in, a snapshot is copied.
#pragma once
#include "engine/process_registry.h"
#include "engine/profile.h"
#include "engine/stack_store.h"

namespace pbp {

Profile make_snapshot(Profile samples, const StackStore& store, const ProcessRegistry& registry,
                      const RunInfo& run);

}  // namespace pbp
