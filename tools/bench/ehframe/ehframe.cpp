// Bench-only prototype (not product code; issue 17's measurement): native unwinding in BPF
// with .eh_frame turned into compact tables, as the OpenTelemetry eBPF profiler does, against
// pybpfprof --native's 16 KiB stack copy unwound by libdwfl in userspace.
//
//   ehframe --pid PID [--mode walk|copy|none] [--index] [--buf BYTES] [--verify] [-r HZ] [-d SECONDS]
//           [--frames N]
// --index: search the rows of the pc's 512-byte page only; --buf: read the frames from one copy
// of the stack's first BYTES (4096) taken first, not one bpf_probe_read_user each.
//   ehframe --tables-only --pid PID      (build the tables, print their statistics, exit)
//
// walk: the tables of every executable mapping of PID are built with libdw (dwarf_getcfi_elf,
// dwarf_cfi_addrframe row by row over each FDE's range), loaded into BPF maps, and a cpu-clock
// perf_event program on every CPU unwinds each sample of PID in BPF and sends the pcs.
// --verify: the same program also sends pybpfprof's stack copy of the same sample, which is
// unwound here by pybpfprof's own unwinder (userspace/native/unwinder.cpp, libdwfl) and compared
// frame by frame. copy: pybpfprof's capture alone (bpf/native.bpf.h's copy), in the same shell.
// none: the shell alone (filter, registers, a header record). Prints key=value lines.
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/perf_event.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "native/cold_part.h"
#include "native/file_symbols.h"
#include "native/process_modules.h"
#include "native/unwinder.h"
#include "pybpfprof/abi.h"

extern "C" {
#include "ehframe.h"
}
#include "ehframe.skel.h"

namespace {

double cpu_now() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
double wall_now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct TableStats {
    size_t fdes = 0, raw_rows = 0, rows = 0, gaps = 0;
    size_t unsupported = 0, cfa_expr = 0, cfa_other_reg = 0, ra_other = 0, rbp_other = 0, off_overflow = 0,
           end_rows = 0, signal = 0, rbp_cfa = 0, addrframe_fail = 0;
    double cpu_s = 0, wall_s = 0;
};

struct Table {
    std::string path;
    std::vector<ehf_row> rows;
    TableStats st;
    std::vector<GElf_Phdr> loads;
};

// The register rule "saved at CFA + off" as libdw gives it: [DW_OP_call_frame_cfa] or
// [DW_OP_call_frame_cfa, DW_OP_plus_uconst off] or [cfa, DW_OP_consts off, DW_OP_plus].
bool at_cfa(const Dwarf_Op* ops, size_t n, int64_t& off) {
    if (n < 1 || ops[0].atom != DW_OP_call_frame_cfa) return false;
    if (n == 1) {
        off = 0;
        return true;
    }
    if (n == 2 && ops[1].atom == DW_OP_plus_uconst) {
        off = static_cast<int64_t>(ops[1].number);
        return true;
    }
    if (n == 3 && (ops[1].atom == DW_OP_consts || ops[1].atom == DW_OP_constu) && ops[2].atom == DW_OP_plus) {
        off = static_cast<int64_t>(ops[1].number);
        return true;
    }
    return false;
}

ehf_row classify(Dwarf_Frame* f, uint64_t pc, TableStats& st, bool signal) {
    ehf_row r{};
    r.pc = static_cast<uint32_t>(pc);
    if (signal) st.signal++;
    Dwarf_Op mem[3];
    Dwarf_Op* ops = nullptr;
    size_t n = 0;
    // return address (x86_64 DWARF register 16)
    if (dwarf_frame_register(f, 16, mem, &ops, &n) == 0 && n == 0 && ops == mem) {
        r.kind_rbp = EHF_ROW_END;
        st.end_rows++;
        return r;
    }
    int64_t ra_off = 0;
    bool ra_ok = dwarf_frame_register(f, 16, mem, &ops, &n) == 0 && at_cfa(ops, n, ra_off) && ra_off == -8;
    // CFA
    Dwarf_Op* cops = nullptr;
    size_t cn = 0;
    int64_t cfa_off = 0;
    int reg = -1;
    if (dwarf_frame_cfa(f, &cops, &cn) == 0 && cn == 1) {
        if (cops[0].atom == DW_OP_bregx) {
            reg = static_cast<int>(cops[0].number);
            cfa_off = static_cast<int64_t>(cops[0].number2);
        } else if (cops[0].atom >= DW_OP_breg0 && cops[0].atom <= DW_OP_breg31) {
            reg = cops[0].atom - DW_OP_breg0;
            cfa_off = static_cast<int64_t>(cops[0].number);
        }
    }
    auto unsupported = [&](size_t& why) {
        st.unsupported++;
        why++;
        r.kind_rbp = EHF_ROW_UNSUPPORTED;
        return r;
    };
    if (reg < 0) return unsupported(st.cfa_expr);
    if (reg != 7 && reg != 6) return unsupported(st.cfa_other_reg);
    if (!ra_ok) return unsupported(st.ra_other);
    if (cfa_off < INT16_MIN || cfa_off > INT16_MAX) return unsupported(st.off_overflow);
    const uint8_t kind = reg == 7 ? EHF_ROW_CFA_RSP : EHF_ROW_CFA_RBP;
    uint8_t rule = EHF_RBP_SAME;
    r.cfa_off = static_cast<int16_t>(cfa_off);
    // rbp (6)
    if (dwarf_frame_register(f, 6, mem, &ops, &n) != 0) {
        rule = EHF_RBP_UNDEFINED;
    } else if (n == 0 && ops == nullptr) {
        rule = EHF_RBP_SAME;
    } else {
        int64_t off = 0;
        if (at_cfa(ops, n, off) && off % 8 == 0 && off / 8 >= INT8_MIN && off / 8 <= INT8_MAX) {
            rule = EHF_RBP_AT_CFA;
            r.rbp_off8 = static_cast<int8_t>(off / 8);
            st.rbp_cfa++;
        } else {
            rule = EHF_RBP_UNDEFINED;
            if (n) st.rbp_other++;
        }
    }
    r.kind_rbp = kind | rule << 4;
    return r;
}

bool same_rule(const ehf_row& a, const ehf_row& b) {
    return a.kind_rbp == b.kind_rbp && a.cfa_off == b.cfa_off && a.rbp_off8 == b.rbp_off8;
}

// The table of one ELF file (from its .eh_frame), as the OTel profiler's: sorted rows, a
// NO_CFI row where one FDE ends before the next begins; identical neighbours merged.
void build_table(Elf* elf, Table& t) {
    const double c0 = cpu_now(), w0 = wall_now();
    size_t nph = 0;
    elf_getphdrnum(elf, &nph);
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, i, &ph) && ph.p_type == PT_LOAD) t.loads.push_back(ph);
    }
    std::vector<pbp::native::CodeRange> fdes = pbp::native::eh_frame_ranges(elf);
    Dwarf_CFI* cfi = dwarf_getcfi_elf(elf);
    t.st.fdes = fdes.size();
    std::vector<ehf_row> raw;
    for (size_t i = 0; cfi && i < fdes.size(); i++) {
        uint64_t pc = fdes[i].start;
        while (pc < fdes[i].end) {
            Dwarf_Frame* f = nullptr;
            if (dwarf_cfi_addrframe(cfi, pc, &f) != 0) {
                t.st.addrframe_fail++;
                break;
            }
            Dwarf_Addr s = 0, e = 0;
            bool sig = false;
            dwarf_frame_info(f, &s, &e, &sig);
            raw.push_back(classify(f, pc, t.st, sig));
            free(f);
            if (e <= pc) break;
            pc = std::min<uint64_t>(e, fdes[i].end);
        }
        const bool gap = i + 1 == fdes.size() || fdes[i + 1].start > fdes[i].end;
        if (gap) {
            ehf_row g{};
            g.pc = static_cast<uint32_t>(fdes[i].end);
            g.kind_rbp = EHF_ROW_NO_CFI;
            raw.push_back(g);
            t.st.gaps++;
        }
    }
    if (cfi) dwarf_cfi_end(cfi);
    std::stable_sort(raw.begin(), raw.end(), [](const ehf_row& a, const ehf_row& b) { return a.pc < b.pc; });
    t.st.raw_rows = raw.size();
    for (const ehf_row& r : raw) {
        if (!t.rows.empty() && t.rows.back().pc == r.pc) {
            t.rows.back() = r;
            continue;
        }
        if (!t.rows.empty() && same_rule(t.rows.back(), r)) continue;
        t.rows.push_back(r);
    }
    t.st.rows = t.rows.size();
    t.st.cpu_s = cpu_now() - c0;
    t.st.wall_s = wall_now() - w0;
}

struct MapLine {
    uint64_t start, end, off;
    std::string perms, path;
};

std::vector<MapLine> read_maps(pid_t pid) {
    std::vector<MapLine> out;
    std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
    std::string line;
    while (std::getline(in, line)) {
        MapLine m;
        char perms[8] = {};
        unsigned long long s, e, off, ino;
        char dev[16];
        int n = 0;
        if (sscanf(line.c_str(), "%llx-%llx %7s %llx %15s %llu %n", &s, &e, perms, &off, dev, &ino, &n) < 6) continue;
        m.start = s;
        m.end = e;
        m.off = off;
        m.perms = perms;
        m.path = n > 0 && static_cast<size_t>(n) <= line.size() ? line.substr(n) : "";
        if (m.perms.find('x') == std::string::npos || m.path.empty()) continue;
        if (m.path[0] != '/' && m.path != "[vdso]") continue;
        out.push_back(m);
    }
    return out;
}

volatile sig_atomic_t g_stop = 0;

struct Args {
    pid_t pid = 0;
    int mode = EHF_MODE_WALK;
    bool verify = false, tables_only = false, show = false, index = false;
    int rate = 999;
    double duration = 10;
    int frames = EHF_MAX_FRAMES;
    int buf = 0;
};

struct Compare {
    size_t pairs = 0, equal = 0, table_prefix = 0, libdw_prefix = 0, differ = 0, libdw_complete = 0;
    std::string first_diff;
};

struct State {
    Args a;
    pbp::native::FileCache files;
    std::unique_ptr<pbp::native::ProcessModules> pm;
    std::unique_ptr<pbp::native::Unwinder> uw;
    size_t walks = 0, copies = 0, bytes = 0, frames = 0, kernel = 0;
    size_t ends[EHF_END_COUNT] = {};
    size_t with_eval = 0, with_main = 0, with_b = 0, full = 0;
    std::map<int, size_t> depth_hist;
    std::unordered_map<uint64_t, std::string> names;
    std::map<std::pair<uint32_t, uint64_t>, std::vector<uint64_t>> pending;  // (tid, ts) -> table pcs
    Compare cmp;
    std::vector<uint64_t> walk_ns;
    std::string example, unsupported_at;
};

const std::string& name_of(State& s, uint64_t pc) {
    auto it = s.names.find(pc);
    if (it != s.names.end()) return it->second;
    std::string n;
    Dwfl_Module* m = s.pm->module_at(pc);
    if (m) {
        const char* sym = dwfl_module_addrname(m, pc);
        if (sym) n = sym;
        else n = "[" + pbp::native::ProcessModules::path_of(m) + "]";
    } else {
        n = "?";
    }
    return s.names.emplace(pc, n).first->second;
}

void compare(State& s, const std::vector<uint64_t>& table, const pbp_native_event& nev, size_t size) {
    pbp::native::UnwoundStack u = s.uw->unwind(nev, size);
    s.cmp.pairs++;
    s.cmp.libdw_complete += u.complete;
    size_t common = 0;
    while (common < table.size() && common < u.pcs.size() && table[common] == u.pcs[common]) common++;
    if (common == table.size() && common == u.pcs.size()) s.cmp.equal++;
    else if (common == table.size()) s.cmp.table_prefix++;
    else if (common == u.pcs.size()) s.cmp.libdw_prefix++;
    else s.cmp.differ++;
    if (common != table.size() || common != u.pcs.size()) {
        if (s.cmp.first_diff.empty()) {
            std::ostringstream os;
            os << "table " << table.size() << " frames, libdwfl " << u.pcs.size() << ", first " << common
               << " equal; at " << common << ": table "
               << (common < table.size() ? name_of(s, table[common]) : "-") << ", libdwfl "
               << (common < u.pcs.size() ? name_of(s, u.pcs[common]) : "-");
            s.cmp.first_diff = os.str();
        }
    }
}

int on_event(void* ctx, void* data, size_t size) {
    State& s = *static_cast<State*>(ctx);
    s.bytes += size;
    const uint32_t type = static_cast<const uint32_t*>(data)[2];
    if (type == EHF_EV_WALK) {
        ehf_event ev{};
        std::memcpy(&ev, data, std::min(size, sizeof(ev)));
        s.walks++;
        if (ev.flags & PBP_NATIVE_F_KERNEL) s.kernel++;
        const int n = std::min<int>(ev.n, EHF_MAX_FRAMES);
        s.frames += n;
        s.depth_hist[n]++;
        s.ends[ev.end < EHF_END_COUNT ? ev.end : 0]++;
        s.walk_ns.push_back(ev.walk_ns);
        // leaf first, return addresses minus one (inside the call), as libdwfl gives them
        std::vector<uint64_t> pcs;
        for (int i = 0; i < n; i++) pcs.push_back(i ? ev.pcs[i] - 1 : ev.pcs[i]);
        bool eval = false, main = false, b = false;
        for (uint64_t pc : pcs) {
            const std::string& nm = name_of(s, pc);
            eval |= nm.rfind("_PyEval_EvalFrameDefault", 0) == 0;
            main |= nm == "main" || nm == "Py_BytesMain" || nm == "_start";
            b |= nm == "b";
        }
        s.with_eval += eval;
        s.with_main += main;
        s.with_b += b;
        s.full += ev.end == EHF_END_OUTERMOST && main;
        if (s.example.empty() && b && n >= 20) {
            std::ostringstream os;
            for (uint64_t pc : pcs) os << name_of(s, pc) << ";";
            s.example = os.str();
        }
        if (ev.end == EHF_END_UNSUPPORTED && n && s.unsupported_at.size() < 300)
            s.unsupported_at += name_of(s, pcs[n - 1]) + ";";
        if (s.a.verify) s.pending[{ev.tid, ev.ts_ns}] = std::move(pcs);
    } else if (type == EHF_EV_COPY) {
        s.copies++;
        if (s.a.verify) {
            auto* nev = static_cast<const pbp_native_event*>(data);
            auto it = s.pending.find({nev->tid, nev->ts_ns});
            if (it != s.pending.end()) {
                compare(s, it->second, *nev, size);
                s.pending.erase(it);
            }
        }
    }
    return 0;
}

uint64_t load_bias(const Table& t, const MapLine& m) {
    for (const GElf_Phdr& ph : t.loads)
        if (m.off >= ph.p_offset && m.off < ph.p_offset + std::max<uint64_t>(ph.p_filesz, 1))
            return m.start - (ph.p_vaddr + (m.off - ph.p_offset));
    return m.start - m.off;
}

}  // namespace

int main(int argc, char** argv) {
    State s;
    Args& a = s.a;
    for (int i = 1; i < argc; i++) {
        std::string k = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (k == "--pid" || k == "-p") a.pid = std::atoi(next().c_str());
        else if (k == "--mode") {
            std::string m = next();
            a.mode = m == "walk" ? EHF_MODE_WALK : m == "copy" ? EHF_MODE_COPY : EHF_MODE_NONE;
        } else if (k == "--verify") a.verify = true;
        else if (k == "--index") a.index = true;
        else if (k == "--buf") a.buf = std::atoi(next().c_str());
        else if (k == "--tables-only") a.tables_only = true;
        else if (k == "--show") a.show = true;
        else if (k == "-r") a.rate = std::atoi(next().c_str());
        else if (k == "-d") a.duration = std::atof(next().c_str());
        else if (k == "--frames") a.frames = std::atoi(next().c_str());
        else {
            fprintf(stderr, "unknown argument %s\n", k.c_str());
            return 2;
        }
    }
    if (!a.pid) {
        fprintf(stderr, "--pid PID needed\n");
        return 2;
    }
    elf_version(EV_CURRENT);

    // ---- tables --------------------------------------------------------------------------
    const double tc0 = cpu_now(), tw0 = wall_now();
    std::vector<MapLine> maps = read_maps(a.pid);
    std::map<std::string, std::unique_ptr<Table>> tables;
    std::vector<std::vector<char>> images;
    for (const MapLine& m : maps) {
        if (tables.count(m.path)) continue;
        auto t = std::make_unique<Table>();
        t->path = m.path;
        Elf* elf = nullptr;
        int fd = -1;
        if (m.path == "[vdso]") {
            std::vector<char> img(m.end - m.start);
            int mfd = open(("/proc/" + std::to_string(a.pid) + "/mem").c_str(), O_RDONLY);
            if (mfd < 0 || pread(mfd, img.data(), img.size(), m.start) != static_cast<ssize_t>(img.size())) {
                if (mfd >= 0) close(mfd);
                continue;
            }
            close(mfd);
            images.push_back(std::move(img));
            elf = elf_memory(images.back().data(), images.back().size());
        } else {
            fd = open(("/proc/" + std::to_string(a.pid) + "/root" + m.path).c_str(), O_RDONLY);
            if (fd < 0) continue;
            elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
        }
        if (elf) {
            build_table(elf, *t);
            elf_end(elf);
        }
        if (fd >= 0) close(fd);
        tables[m.path] = std::move(t);
    }
    const double table_cpu = cpu_now() - tc0, table_wall = wall_now() - tw0;
    TableStats tot;
    size_t total_rows = 0;
    for (auto& [p, t] : tables) {
        const TableStats& st = t->st;
        printf("file=%s fdes=%zu raw_rows=%zu rows=%zu bytes=%zu unsupported=%zu (cfa_expr=%zu cfa_reg=%zu ra=%zu "
               "off=%zu) rbp_other=%zu end=%zu signal=%zu gaps=%zu addrframe_fail=%zu build_cpu_ms=%.1f\n",
               p.c_str(), st.fdes, st.raw_rows, st.rows, st.rows * sizeof(ehf_row), st.unsupported, st.cfa_expr,
               st.cfa_other_reg, st.ra_other, st.off_overflow, st.rbp_other, st.end_rows, st.signal, st.gaps,
               st.addrframe_fail, st.cpu_s * 1e3);
        tot.fdes += st.fdes;
        tot.raw_rows += st.raw_rows;
        tot.unsupported += st.unsupported;
        tot.cfa_expr += st.cfa_expr;
        total_rows += st.rows;
    }
    printf("tables_files=%zu tables_fdes=%zu tables_raw_rows=%zu tables_rows=%zu tables_bytes=%zu "
           "tables_unsupported_raw=%zu tables_unsupported_share=%.4f%% tables_cfa_expr=%zu tables_build_cpu_ms=%.1f "
           "tables_build_wall_ms=%.1f\n",
           tables.size(), tot.fdes, tot.raw_rows, total_rows, total_rows * sizeof(ehf_row), tot.unsupported,
           tot.raw_rows ? 100.0 * tot.unsupported / tot.raw_rows : 0.0, tot.cfa_expr, table_cpu * 1e3,
           table_wall * 1e3);
    if (a.tables_only) return 0;

    // ---- BPF -------------------------------------------------------------------------------
    libbpf_set_print([](enum libbpf_print_level l, const char* f, va_list ap) {
        return l == LIBBPF_WARN ? vfprintf(stderr, f, ap) : 0;
    });
    const double lc0 = cpu_now(), lw0 = wall_now();
    ehframe_bpf* skel = ehframe_bpf__open();
    if (!skel) return 1;
    skel->rodata->target_tgid = a.pid;
    skel->rodata->mode = a.mode;
    skel->rodata->verify = a.verify;
    skel->rodata->use_index = a.index;
    skel->rodata->buf_bytes = a.buf;
    skel->rodata->max_frames = std::min(a.frames, EHF_MAX_FRAMES);
    bpf_map__set_max_entries(skel->maps.rows, std::max<size_t>(total_rows, 1));
    // the page indexes of every file (built here; their memory and time reported)
    const double ic0 = cpu_now();
    std::map<std::string, std::pair<uint64_t, uint32_t>> page_of;  // path -> (page_lo, first page)
    std::vector<ehf_page> all_pages;
    {
        uint32_t base = 0;
        for (auto& [p, t] : tables) {
            const auto& R = t->rows;
            if (R.empty()) {
                page_of[p] = {0, static_cast<uint32_t>(all_pages.size())};
                continue;
            }
            const uint64_t lo = R.front().pc & ~((1ull << EHF_PAGE_SHIFT) - 1);
            const uint64_t n = ((R.back().pc - lo) >> EHF_PAGE_SHIFT) + 1;
            page_of[p] = {lo, static_cast<uint32_t>(all_pages.size())};
            for (uint64_t k = 0; k < n; k++) {
                const uint64_t ps = lo + (k << EHF_PAGE_SHIFT), pe = ps + (1ull << EHF_PAGE_SHIFT);
                auto ub = std::upper_bound(R.begin(), R.end(), ps, [](uint64_t v, const ehf_row& r) { return v < r.pc; });
                size_t first = ub == R.begin() ? 0 : (ub - R.begin()) - 1;
                auto le = std::lower_bound(R.begin(), R.end(), pe, [](const ehf_row& r, uint64_t v) { return r.pc < v; });
                size_t end = le - R.begin();
                all_pages.push_back({static_cast<uint32_t>(base + first), static_cast<uint32_t>(end - first)});
            }
            base += R.size();
        }
    }
    uint32_t max_count = 0;
    for (auto& pg : all_pages) max_count = std::max(max_count, pg.count);
    printf("index_pages=%zu index_bytes=%zu index_max_rows_per_page=%u index_build_cpu_ms=%.1f\n", all_pages.size(),
           all_pages.size() * sizeof(ehf_page), max_count, (cpu_now() - ic0) * 1e3);
    bpf_map__set_max_entries(skel->maps.pages, std::max<size_t>(all_pages.size(), 1));
    if (ehframe_bpf__load(skel)) {
        fprintf(stderr, "load failed\n");
        return 1;
    }
    const double fc0 = cpu_now(), fw0 = wall_now();
    (void)lw0;
    // rows: every file's, one after another; mappings sorted by address
    std::vector<ehf_mapping> mv;
    std::map<std::string, uint32_t> first_row;
    std::vector<ehf_row> all;
    for (auto& [p, t] : tables) {
        first_row[p] = all.size();
        all.insert(all.end(), t->rows.begin(), t->rows.end());
    }
    for (const MapLine& m : maps) {
        auto it = tables.find(m.path);
        if (it == tables.end()) continue;
        ehf_mapping e{};
        e.start = m.start;
        e.end = m.end;
        e.bias = load_bias(*it->second, m);
        e.row_start = first_row[m.path];
        e.row_count = it->second->rows.size();
        e.page_lo = page_of[m.path].first;
        e.page_start = page_of[m.path].second;
        e.npages = it->second->rows.empty() ? 0
                 : ((it->second->rows.back().pc - e.page_lo) >> EHF_PAGE_SHIFT) + 1;
        mv.push_back(e);
    }
    std::sort(mv.begin(), mv.end(), [](auto& x, auto& y) { return x.start < y.start; });
    if (mv.size() > EHF_MAX_MAPPINGS) mv.resize(EHF_MAX_MAPPINGS);
    for (uint32_t i = 0; i < mv.size(); i++) bpf_map_update_elem(bpf_map__fd(skel->maps.mappings), &i, &mv[i], 0);
    {
        std::vector<uint32_t> keys(all.size());
        for (uint32_t i = 0; i < keys.size(); i++) keys[i] = i;
        uint32_t cnt = all.size();
        LIBBPF_OPTS(bpf_map_batch_opts, bo);
        if (cnt && bpf_map_update_batch(bpf_map__fd(skel->maps.rows), keys.data(), all.data(), &cnt, &bo)) {
            for (uint32_t i = 0; i < all.size(); i++)
                bpf_map_update_elem(bpf_map__fd(skel->maps.rows), &i, &all[i], 0);
        }
    }
    for (uint32_t i = 0; i < all_pages.size(); i++)
        bpf_map_update_elem(bpf_map__fd(skel->maps.pages), &i, &all_pages[i], 0);
    skel->bss->nmappings = mv.size();
    printf("mappings=%zu load_and_verify_cpu_ms=%.1f fill_rows_cpu_ms=%.1f fill_rows_wall_ms=%.1f\n", mv.size(),
           (fc0 - lc0) * 1e3, (cpu_now() - fc0) * 1e3, (wall_now() - fw0) * 1e3);

    s.pm = std::make_unique<pbp::native::ProcessModules>(a.pid, s.files);
    s.pm->refresh();
    s.uw = std::make_unique<pbp::native::Unwinder>(*s.pm);

    int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
    const int ncpu = libbpf_num_possible_cpus();
    std::vector<bpf_link*> links;
    for (int c = 0; c < ncpu; c++) {
        perf_event_attr pa{};
        pa.size = sizeof(pa);
        pa.type = PERF_TYPE_SOFTWARE;
        pa.config = PERF_COUNT_SW_CPU_CLOCK;
        pa.freq = 1;
        pa.sample_freq = a.rate;
        int pfd = syscall(SYS_perf_event_open, &pa, -1, c, -1, PERF_FLAG_FD_CLOEXEC);
        if (pfd < 0) continue;
        bpf_link* l = bpf_program__attach_perf_event(skel->progs.ehf_sample, pfd);
        if (l) links.push_back(l);
    }
    ring_buffer* rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_event, &s, nullptr);
    signal(SIGINT, [](int) { g_stop = 1; });
    signal(SIGTERM, [](int) { g_stop = 1; });
    const double c0 = cpu_now(), w0 = wall_now();
    // the records are sent without a wakeup (BPF_RB_NO_WAKEUP, as pybpfprof's): read every 10 ms
    while (!g_stop && wall_now() - w0 < a.duration) {
        ring_buffer__consume(rb);
        usleep(10000);
        if (kill(a.pid, 0) != 0) break;
    }
    for (bpf_link* l : links) bpf_link__destroy(l);
    ring_buffer__consume(rb);
    const double run_cpu = cpu_now() - c0;

    bpf_prog_info info{};
    uint32_t il = sizeof(info);
    bpf_obj_get_info_by_fd(bpf_program__fd(skel->progs.ehf_sample), &info, &il);
    auto sum = [&](uint32_t k) {
        std::vector<uint64_t> v(ncpu);
        bpf_map_lookup_elem(bpf_map__fd(skel->maps.counters), &k, v.data());
        uint64_t t = 0;
        for (uint64_t x : v) t += x;
        return t;
    };
    const uint64_t samples = sum(2);
    std::vector<uint64_t> ws = s.walk_ns;
    std::sort(ws.begin(), ws.end());
    auto pct = [&](double p) { return ws.empty() ? 0 : ws[std::min(ws.size() - 1, size_t(p * ws.size()))]; };
    printf("mode=%s verify=%d index=%d buf=%d rate=%d duration_s=%.2f\n", a.mode == EHF_MODE_WALK ? "walk" : a.mode == EHF_MODE_COPY ? "copy" : "none",
           a.verify, a.index, a.buf, a.rate, wall_now() - w0);
    printf("run_cnt=%llu run_time_ns=%llu ns_per_run=%.0f samples=%llu ns_per_sample=%.0f in_prog_ns_per_sample=%.0f "
           "walk_ns_p50=%llu walk_ns_p90=%llu\n",
           (unsigned long long)info.run_cnt, (unsigned long long)info.run_time_ns,
           info.run_cnt ? double(info.run_time_ns) / info.run_cnt : 0.0, (unsigned long long)samples,
           samples ? double(info.run_time_ns) / samples : 0.0, samples ? double(sum(0)) / samples : 0.0,
           (unsigned long long)pct(0.5), (unsigned long long)pct(0.9));
    printf("bytes_sent=%llu bytes_per_sample=%.0f drops=%llu userspace_cpu_s=%.3f userspace_cpu_us_per_sample=%.1f\n",
           (unsigned long long)sum(3), samples > sum(4) ? double(sum(3)) / (samples - sum(4)) : 0.0,
           (unsigned long long)sum(4), run_cpu,
           samples ? run_cpu * 1e6 / samples : 0.0);
    if (a.mode == EHF_MODE_WALK) {
        printf("walks=%zu kernel=%zu frames_per_sample=%.1f with_b=%zu with_eval=%zu with_main=%zu full_to_start=%zu\n",
               s.walks, s.kernel, s.walks ? double(s.frames) / s.walks : 0.0, s.with_b, s.with_eval, s.with_main, s.full);
        static const char* en[] = {"max_frames", "outermost", "no_mapping", "unsupported", "no_cfi", "read", "register"};
        printf("ends:");
        for (int i = 0; i < EHF_END_COUNT; i++) printf(" %s=%zu", en[i], s.ends[i]);
        printf("\n");
        printf("depths:");
        for (auto& [d, c] : s.depth_hist) printf(" %d:%zu", d, c);
        printf("\n");
        if (!s.example.empty()) printf("example=%s\n", s.example.c_str());
        if (!s.unsupported_at.empty()) printf("unsupported_at=%s\n", s.unsupported_at.c_str());
    }
    if (a.verify)
        printf("verify_pairs=%zu equal=%zu table_shorter=%zu libdw_shorter=%zu differ=%zu libdw_complete=%zu first_diff=%s\n",
               s.cmp.pairs, s.cmp.equal, s.cmp.table_prefix, s.cmp.libdw_prefix, s.cmp.differ, s.cmp.libdw_complete,
               s.cmp.first_diff.c_str());
    ring_buffer__free(rb);
    ehframe_bpf__destroy(skel);
    if (stats_fd >= 0) close(stats_fd);
    return 0;
}
