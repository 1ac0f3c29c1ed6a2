// The code-object checksum BPF computes (bpf/frame_walk.bpf.h code_csum), computed in
// userspace: by the Symbolizer, to check a cached code object is still the one BPF saw, and by
// the userspace stack reader (thread_stacks.h), whose frames must carry BPF's checksum.
#pragma once
#include <cstddef>
#include <cstdint>

#include "pybpfprof/abi.h"
#include "sys/target_memory.h"

namespace pbp::cpython {

// From a window of len bytes read at the code object's address; the str hashes of the
// csum_str_mask slots are read through mem (0 when unreadable or mem is null, as BPF's rd_u64).
uint32_t code_checksum(const pbp_py_offsets& off, const uint8_t* window, size_t len, MemoryReader* mem);

}  // namespace pbp::cpython
