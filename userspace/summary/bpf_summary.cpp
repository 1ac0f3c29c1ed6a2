#include "summary/bpf_summary.h"

#include <sstream>

#include "engine/abi_names.h"
#include "pybpfprof/abi.h"

namespace pbp {

std::string bpf_cost_lines(const RunInfo& run, const std::vector<uint64_t>& st, int debug) {
    std::ostringstream out;
    if (st.size() < PBP_STAT_COUNT) return "";
    if (st[PBP_STAT_SAMPLES])
        out << "  BPF: " << st[PBP_STAT_SAMPLE_NS] / st[PBP_STAT_SAMPLES] << " ns per profiled sample ("
            << st[PBP_STAT_SAMPLES] << (st[PBP_STAT_SAMPLES] == 1 ? " sample), max depth " : " samples), max depth ") << run.max_depth
            << (run.bpf_loop ? " (bpf_loop)" : " (no bpf_loop on this kernel)") << "\n";
    if (run.bpf_run_cnt)
        out << "  bpf_stats: " << run.bpf_run_time_ns / run.bpf_run_cnt << " ns per perf event over all CPUs ("
            << run.bpf_run_cnt << " events)\n";
    if (!debug) return out.str();
    out << "  BPF stats:";
    for (uint32_t i = 0; i < PBP_STAT_COUNT; i++)
        if (st[i]) out << " " << stat_label(i) << "=" << st[i];
    out << "\n";
    if (st[PBP_STAT_T_TSTATE] && st[PBP_STAT_SAMPLES]) {  // Knobs::section_timing
        uint64_t n = st[PBP_STAT_SAMPLES];
        uint64_t parts = st[PBP_STAT_T_TSTATE] + st[PBP_STAT_T_FRAME0] + st[PBP_STAT_T_WALK] + st[PBP_STAT_T_STACKMAP];
        out << "  BPF sections, ns per sample: thread state " << st[PBP_STAT_T_TSTATE] / n << ", first frame "
            << st[PBP_STAT_T_FRAME0] / n << ", walk " << st[PBP_STAT_T_WALK] / n << ", stack map "
            << st[PBP_STAT_T_STACKMAP] / n << ", record "
            << (st[PBP_STAT_SAMPLE_NS] > parts ? (st[PBP_STAT_SAMPLE_NS] - parts) / n : 0) << "; per sample "
            << double(st[PBP_STAT_N_FRAME_READS]) / n << " frame reads, " << double(st[PBP_STAT_N_CODE_READS]) / n
            << " code reads, " << double(st[PBP_STAT_N_STR_READS]) / n << " str reads, "
            << double(st[PBP_STAT_N_CODE_CACHED]) / n << " code checksums from the cache\n";
    }
    return out.str();
}

}  // namespace pbp
