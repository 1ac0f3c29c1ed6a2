#include "engine/symbolizer.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpython/code_checksum.h"
#include "cpython/linetable.h"
#include "cpython/objects.h"
#include "cpython/policy.h"
#include "engine/code_capture.h"

namespace pbp {

void Symbolizer::add_process(pid_t pid, const cpython::Layout& layout, uint64_t code_type_addr) {
    add_process(pid, layout, code_type_addr, std::make_unique<ProcessMemory>(pid));
}

void Symbolizer::add_process(pid_t pid, const cpython::Layout& layout, uint64_t code_type_addr,
                             std::unique_ptr<MemoryReader> mem) {
    Proc p;
    p.layout = layout;
    p.code_type_addr = code_type_addr;
    p.mem = std::move(mem);
    procs_[pid] = std::move(p);
}

void Symbolizer::remove_process(pid_t pid) { procs_.erase(pid); }

size_t Symbolizer::cached_code_objects() const {
    size_t n = 0;
    for (auto& [_, p] : procs_) n += p.code.size();
    return n;
}

uint32_t Symbolizer::code_checksum(const pbp_py_offsets& off, const uint8_t* w, size_t len, MemoryReader* mem) {
    return cpython::code_checksum(off, w, len, mem);
}

bool Symbolizer::looks_alive(const cpython::Layout& layout, uint64_t code_type_addr, uint64_t addr,
                             const uint8_t* w, size_t len) {
    const uint16_t to = layout.bpf.code_ob_type;
    if (code_type_addr && to != PBP_OFF_NONE && to + 8u <= len) {
        uint64_t type = 0;  // glibc's free writes its list links over ob_refcnt and ob_type
        memcpy(&type, w + to, sizeof type);
        if (type != code_type_addr) return false;
    }
    if (!layout.free_threaded && len >= 8) {  // ob_refcnt (free-threaded: ob_tid there)
        int64_t rc = 0;
        memcpy(&rc, w, sizeof rc);
        // pymalloc's free puts the next free block of the same pool there (or NULL); no
        // count, immortal or not, lies within a few MiB of the object's own address.
        const int64_t near = int64_t{4} << 20;
        if (rc <= 0 || (rc > static_cast<int64_t>(addr) - near && rc < static_cast<int64_t>(addr) + near))
            return false;
    }
    return true;
}

std::optional<Symbolizer::CodeInfo> Symbolizer::read_code(const Proc& p, MemoryReader& mem, uint64_t addr,
                                                          uint32_t csum, std::string& problem) const {
    const auto& off = p.layout.bpf;
    const auto& obj = p.layout.obj;
    uint8_t win[PBP_WINDOW];
    size_t len = off.code_read_len;
    if (len == 0 || len > sizeof win || !mem.read(addr, win, len)) {
        problem = "code object unreadable (process exited before symbolization)";
        return std::nullopt;
    }
    if (code_checksum(off, win, len, &mem) != csum || !looks_alive(p.layout, p.code_type_addr, addr, win, len)) {
        problem = kFreed;
        return std::nullopt;
    }
    auto ptr = [&](uint16_t o) -> uint64_t {
        uint64_t v = 0;
        if (o != PBP_OFF_NONE) mem.read(addr + o, &v, sizeof v);
        return v;
    };
    CodeInfo ci;
    ci.csum = csum;
    uint64_t qn = ptr(obj.co_qualname);
    uint64_t nm = ptr(obj.co_name);
    std::optional<std::string> name;
    if (qn) name = cpython::read_unicode(mem, obj, qn);
    if (!name && nm) name = cpython::read_unicode(mem, obj, nm);
    if (!name) {
        if (debug_log_) {
            char buf[128];
            snprintf(buf, sizeof buf, "code %#lx: qualname %#lx name %#lx unreadable", (unsigned long)addr,
                     (unsigned long)qn, (unsigned long)nm);
            debug_log_(buf);
        }
        problem = kNameUnreadable;
        return std::nullopt;
    }
    ci.name = *name;
    uint64_t fn = ptr(obj.co_filename);
    ci.file = cpython::read_unicode(mem, obj, fn).value_or("<unknown>");
    ci.shim = cpython::is_init_cleanup_shim(p.layout.version, qn, nm, fn, ci.name);
    int32_t fl = 0;
    if (obj.co_firstlineno != PBP_OFF_NONE) mem.read(addr + obj.co_firstlineno, &fl, sizeof fl);
    ci.firstlineno = fl;
    ci.linetable = cpython::read_bytes(mem, obj, ptr(obj.co_linetable)).value_or("");
    // Freed while its fields were being read (an import's module body lives ~0.1 ms): they
    // may be half gone (no file, no line table). Still the same live object after the reads
    // (its checksum holds a per-creation field), they were read from it.
    if (!mem.read(addr, win, len) || code_checksum(off, win, len, &mem) != csum ||
        !looks_alive(p.layout, p.code_type_addr, addr, win, len)) {
        problem = kFreed;
        return std::nullopt;
    }
    return ci;
}

Symbolizer::CodeInfo* Symbolizer::code_info(Proc& p, uint64_t addr, uint32_t csum, std::string& problem) {
    auto it = p.code.find(addr);
    if (it != p.code.end() && it->second.csum == csum) return &it->second;
    auto ci = read_code(p, *p.mem, addr, csum, problem);
    if (!ci) return nullptr;
    auto [ins, _] = p.code.insert_or_assign(addr, std::move(*ci));
    return &ins->second;
}

bool Symbolizer::add_captured(pid_t pid, const pbp_code_event& e) {
    auto pit = procs_.find(pid);
    if (pit == procs_.end()) return false;
    Proc& p = pit->second;
    if (auto it = p.code.find(e.code); it != p.code.end() && it->second.csum == e.csum) return true;
    CapturedCode copy(e, p.layout.obj);
    std::string problem;
    std::optional<CodeInfo> ci;
    if (copy.valid()) ci = read_code(p, copy, e.code, e.csum, problem);
    if (!ci || copy.linetable_cut()) {
        // A line table longer than the copy, or a str longer than it (a long path): from the
        // process, while the code object lives (a new stack's code object mostly still does).
        std::string live_problem;
        if (auto live = read_code(p, *p.mem, e.code, e.csum, live_problem)) ci = std::move(live);
    }
    if (!ci) {
        if (debug_log_)
            debug_log_("code " + std::to_string(e.code) + " of PID " + std::to_string(pid) +
                       ": its captured identity is unreadable (" + problem + ")");
        return false;
    }
    p.code.insert_or_assign(e.code, std::move(*ci));
    return true;
}

std::optional<Frame> Symbolizer::frame(Proc* p, const pbp_frame& f, std::map<std::string, uint64_t>& problems,
                                       CodeInfo*& ci) {
    Frame fr;
    std::string problem;
    ci = p ? code_info(*p, f.code, f.csum, problem) : nullptr;
    if (!p) problem = "process no longer tracked";
    if (ci && ci->shim) return std::nullopt;
    if (!ci) {
        fr.name = "[unknown: " + problem + "]";
        fr.synthetic = true;
        problems[problem]++;
        return fr;
    }
    fr.name = ci->name;
    fr.file = ci->file;
    auto& cache = ci->lines;
    auto li = cache.find(f.instr);
    if (li == cache.end())
        li = cache.emplace(f.instr, cpython::line_for_instr(p->layout.line_format, ci->linetable, ci->firstlineno,
                                                            f.instr))
                 .first;
    fr.line = li->second;
    return fr;
}

template <typename Out, typename Fn>
std::vector<Out> Symbolizer::root_first(pid_t pid, const pbp_stack& st, Fn each) {
    std::vector<Out> out;
    auto pit = procs_.find(pid);
    Proc* p = pit == procs_.end() ? nullptr : &pit->second;
    uint32_t depth = std::min<uint32_t>(st.depth, PBP_MAX_DEPTH);
    out.reserve(depth);
    for (uint32_t i = depth; i-- > 0;) each(p, st.frames[i], out);
    return out;
}

std::vector<Frame> Symbolizer::symbolize(pid_t pid, const pbp_stack& st, std::map<std::string, uint64_t>& problems) {
    return root_first<Frame>(pid, st, [&](Proc* p, const pbp_frame& f, std::vector<Frame>& out) {
        CodeInfo* ci = nullptr;
        if (auto fr = frame(p, f, problems, ci)) out.push_back(std::move(*fr));
    });
}

std::vector<uint32_t> Symbolizer::symbolize_into(pid_t pid, const pbp_stack& st, FrameTable& table,
                                                 std::map<std::string, uint64_t>& problems) {
    if (ids_table_ != &table) {  // another table: indices into the old one mean nothing
        for (auto& [_, p] : procs_)
            for (auto& [_, ci] : p.code) ci.frame_ids.clear();
        ids_table_ = &table;
    }
    return root_first<uint32_t>(pid, st, [&](Proc* p, const pbp_frame& f, std::vector<uint32_t>& out) {
        if (p) {  // a known (code object, checksum, instruction): its frame index
            auto it = p->code.find(f.code);
            if (it != p->code.end() && it->second.csum == f.csum) {
                if (it->second.shim) return;
                auto fi = it->second.frame_ids.find(f.instr);
                if (fi != it->second.frame_ids.end()) {
                    out.push_back(fi->second);
                    return;
                }
            }
        }
        CodeInfo* ci = nullptr;
        auto fr = frame(p, f, problems, ci);
        if (!fr) return;
        uint32_t idx = table.intern(*fr);
        if (ci) ci->frame_ids.emplace(f.instr, idx);
        out.push_back(idx);
    });
}

}  // namespace pbp
