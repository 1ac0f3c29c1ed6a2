#include "targets/discovery.h"

#include <dirent.h>
#include <cerrno>
#include <cstring>

#include <algorithm>
#include <set>
#include <vector>

#include "cpython/gil.h"
#include "cpython/policy.h"
#include "sys/clock.h"
#include "sys/elf_file.h"
#include "sys/procfs.h"
#include "sys/ptrace_access.h"
#include "sys/target_memory.h"

namespace pbp {

struct Discoverer::ElfFacts {
    bool ok = false;
    std::string error;
    bool is_exec = false;
    std::vector<ElfSegment> loads;
    std::map<std::string, uint64_t> syms;
    std::map<std::string, ElfFile::Symbol> gil_syms;  // cpython::gil_static_symbols(), with sizes
    std::optional<ElfSection> pyruntime_section;
    std::optional<uint32_t> py_version;  // Py_Version contents (3.11+)
    std::string soname;
    std::vector<std::string> version_strings;

    bool is_python() const { return cpython::holds_runtime(syms, pyruntime_section.has_value()); }
};

namespace {

bool basename_mentions_python(const std::string& path) {
    auto slash = path.rfind('/');
    std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    return base.find("python") != std::string::npos;
}

// Load bias of an ELF from the lowest-offset mapping of it.
std::optional<uint64_t> load_bias(const std::vector<ElfSegment>& loads, const procfs::Mapping& m) {
    for (auto& s : loads) {
        if (m.offset >= (s.offset & ~0xfffULL) && m.offset < s.offset + s.filesz) {
            // address of file offset X in this segment = bias + vaddr + (X - offset)
            return m.start - (s.vaddr + (m.offset - s.offset));
        }
    }
    return std::nullopt;
}

}  // namespace

std::string PythonTarget::describe() const {
    std::string s = layout.version.str();
    if (layout.free_threaded) s += "t";
    s += shared_lib ? " (libpython " : " (static ";
    s += interp_path + ")";
    return s;
}

pbp_proc PythonTarget::bpf_config(uint32_t max_depth, uint32_t generation) const {
    pbp_proc p{};
    p.off = layout.bpf;
    p.interp_head_addr = interp_head_addr;
    p.code_type_addr = code_type_addr;
    p.gil_addr = cpython::gil_fixed_address(layout, runtime_addr);
    if (layout.bpf.gil_where == PBP_GIL_WHERE_STATICS) {
        if (gil_statics) {
            p.gil_addr = gil_statics->wait_addr;
            p.gil_wait_size = static_cast<uint32_t>(gil_statics->wait_size);
            p.gil_locked_addr = gil_statics->locked;
            p.gil_holder_addr = gil_statics->last_holder;
        } else {
            p.off.gil_where = PBP_GIL_WHERE_NONE;
        }
    }
    p.runtime_initialized_addr = runtime_phase.initialized;
    p.runtime_finalizing_addr = runtime_phase.finalizing;
    p.generation = generation;
    p.max_depth = max_depth;
    return p;
}

std::shared_ptr<const Discoverer::ElfFacts> Discoverer::facts_for(pid_t, const std::string& open_path,
                                                                 const std::string& key) {
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    auto f = std::make_shared<ElfFacts>();
    std::string err;
    auto elf = ElfFile::open(open_path, err);
    if (!elf) {
        f->error = err;
    } else {
        f->ok = true;
        f->is_exec = elf->is_exec();
        f->loads = elf->loads();
        // One pass over the symbol tables for both lists.
        std::vector<std::string> names = cpython::runtime_symbols();
        const auto& phase_names = cpython::runtime_phase_symbols();
        names.insert(names.end(), phase_names.begin(), phase_names.end());
        const auto& gil_names = cpython::gil_static_symbols();
        names.insert(names.end(), gil_names.begin(), gil_names.end());
        for (auto& [name, sym] : elf->find_sized_symbols(names)) {
            if (std::find(gil_names.begin(), gil_names.end(), name) != gil_names.end())
                f->gil_syms[name] = sym;
            else
                f->syms[name] = sym.value;
        }
        f->pyruntime_section = elf->section(cpython::kRuntimeSection);
        f->soname = elf->soname();
        if (auto pv = f->syms.find(cpython::kSymVersion); pv != f->syms.end()) {
            uint32_t v = 0;
            if (elf->read_vaddr(pv->second, &v, sizeof v)) f->py_version = v;
        }
        if (f->is_python() && !f->py_version) f->version_strings = elf->version_strings();
    }
    // Only cache successful parses: a failed open may succeed later (file still mapping).
    if (f->ok) cache_[key] = f;
    return f;
}


DiscoveryResult Discoverer::discover(pid_t pid) {
    DiscoveryResult r;
    // The executable before the maps: a process that execs meanwhile then shows a new one
    // afterwards (PythonTarget::exe), where read after the maps the new name could come with
    // the old program's maps.
    const uint64_t found_ns = mono_ns();
    std::string exe = procfs::exe(pid);
    errno = 0;
    auto maps = procfs::read_maps(pid);
    if (!maps && (errno == EACCES || errno == EPERM)) {  // older kernels check ptrace access at open
        r.status = Discovery::Unsupported;
        const std::string why = std::string("cannot read its memory maps (") + strerror(errno) + "); ";
        r.reason = why + ptrace_refusal_reason(ptrace_refusal_facts(pid));
        return r;
    }
    if (!maps) {
        r.status = procfs::exists(pid) ? Discovery::NotPython : Discovery::Gone;
        r.reason = r.status == Discovery::Gone ? "no such process" : "kernel thread or no memory maps";
        // A main thread that exited shows as a zombie too, but while other threads run the
        // process lives on (Threads counts them, and the main thread until it is reaped).
        if (auto st = procfs::read_status(pid); st && st->state == 'Z') {
            if (st->threads <= 1) {
                r.status = Discovery::Zombie;
                r.reason = "it has exited and its parent PID " + std::to_string(st->ppid) + " has not reaped it";
            } else {
                const int others = st->threads - 1;
                r.reason = "its main thread has exited (" + std::to_string(others) +
                           (others == 1 ? " other thread runs on" : " other threads run on") +
                           "), and its memory maps are read through it";
            }
        }
        return r;
    }

    // Candidate files: the executable and libpython-like files first, then every other
    // executable file mapping (interpreters started through ld.so, renamed binaries).
    std::vector<const procfs::Mapping*> first, rest;
    std::set<std::string> seen;
    bool has_loader = false, has_glibc = false;
    for (auto& m : *maps) {
        if (m.inode == 0 || m.path.empty() || m.path[0] != '/') continue;
        if (m.path.find("/ld-linux") != std::string::npos || m.path.find("/ld-musl") != std::string::npos)
            has_loader = true;
        if (m.path.find("/libc.so") != std::string::npos || m.path.find("/libc-") != std::string::npos)
            has_glibc = true;
        std::string key = m.dev + ":" + std::to_string(m.inode);
        if (!seen.insert(key).second) continue;
        bool prefer = m.path == exe || basename_mentions_python(m.path);
        (prefer ? first : rest).push_back(&m);
    }
    std::vector<const procfs::Mapping*> cands = first;
    cands.insert(cands.end(), rest.begin(), rest.end());

    for (const procfs::Mapping* m : cands) {
        // Lowest-offset mapping of this file gives the load bias.
        const procfs::Mapping* low = m;
        for (auto& o : *maps)
            if (o.inode == m->inode && o.dev == m->dev && o.offset < low->offset) low = &o;
        std::string key = m->dev + ":" + std::to_string(m->inode);
        auto facts = facts_for(pid, procfs::openable_path(pid, *low), key);
        if (!facts->ok || !facts->is_python()) continue;

        auto bias = load_bias(facts->loads, *low);
        if (!bias) {
            r.status = Discovery::NotYet;
            r.reason = m->path + " is only partly mapped";
            return r;
        }
        PythonTarget t;
        t.found_ns = found_ns;
        t.exe = exe;
        t.pid = pid;
        t.interp_path = m->path;
        // A shared library has a soname (libpython always does); an executable, PIE or
        // not, has none. The exe path is no guide: ld.so may be /proc/PID/exe.
        t.shared_lib = !facts->soname.empty();
        auto sym = [&](const char* n) -> uint64_t {
            auto it = facts->syms.find(n);
            return it == facts->syms.end() ? 0 : *bias + it->second;
        };
        if (auto s = facts->syms.find(cpython::kSymRuntime); s != facts->syms.end())
            t.runtime_addr = *bias + s->second;
        else if (facts->pyruntime_section)
            t.runtime_addr = *bias + facts->pyruntime_section->addr;
        t.code_type_addr = sym(cpython::kSymCodeType);

        cpython::Version ver =
            cpython::infer_version(facts->py_version, facts->soname, m->path, facts->version_strings);
        ProcessMemory mem(pid);
        cpython::LayoutChoice lay = cpython::choose_layout(ver, t.runtime_addr, mem);
        if (!lay.layout) {
            r.status = Discovery::Unsupported;
            r.python_refused = true;
            if (!ver.known())
                r.reason = "CPython in " + m->path + " but its version is unknown (" +
                           (lay.error.empty() ? "no Py_Version or version string" : lay.error) + ")";
            else if (ver.major < 3)
                r.reason = "Python " + std::to_string(ver.major) + " is not supported (" + m->path +
                           "); pybpfprof profiles CPython 3.6 and newer";
            else
                r.reason = "CPython " + ver.str() + " in " + m->path + " is not supported" +
                           (lay.error.empty() ? "" : ": " + lay.error);
            return r;
        }
        t.layout = *lay.layout;
        t.warning = lay.warning;
        std::map<std::string, uint64_t> phase_syms;
        for (const std::string& n : cpython::runtime_phase_symbols())
            if (uint64_t a = sym(n.c_str())) phase_syms[n] = a;
        t.runtime_phase = cpython::runtime_phase_addrs(t.layout, t.runtime_addr, phase_syms);
        std::string gil_why;
        t.gil_statics = cpython::locate_gil_statics(t.layout, facts->gil_syms, *bias, gil_why);
        t.gil_unknown = cpython::gil_unknown_reason(t.layout, gil_why);
        std::string err;
        t.interp_head_addr =
            cpython::interp_head_address(t.layout, t.runtime_addr, sym(cpython::kSymInterpHead), err);
        if (!err.empty()) {
            r.status = Discovery::Unsupported;
            r.reason = "CPython " + ver.str() + " in " + m->path + ": " + err;
            return r;
        }
        r.status = Discovery::Python;
        r.target = std::move(t);
        return r;
    }

    // Nothing found. A dynamic loader mapped but glibc not yet means ld.so is still
    // mapping libraries (libpython may come next): maybe later. musl's loader is its libc,
    // so there we cannot tell and the caller's bounded retries decide. Static binaries
    // have no loader: the answer is final.
    bool musl = false;
    for (auto& m : *maps) musl |= m.path.find("/ld-musl") != std::string::npos;
    if (has_loader && (!has_glibc || musl)) {
        r.status = Discovery::NotYet;
        r.reason = "still starting (dynamic loader)";
        return r;
    }
    r.status = Discovery::NotPython;
    r.reason = "no CPython runtime (_PyRuntime, .PyRuntime or libpython) in its memory maps";
    // Its files could not be opened at all: another user's process without CAP_SYS_PTRACE.
    std::string root = "/proc/" + std::to_string(pid) + "/root/";
    if (DIR* d = opendir(root.c_str())) {
        closedir(d);
    } else if (errno == EACCES || errno == EPERM) {
        r.status = Discovery::Unsupported;
        const std::string why = "cannot read its files (" + root + ": " + strerror(errno) + "); ";
        r.reason = why + ptrace_refusal_reason(ptrace_refusal_facts(pid));
    }
    return r;
}

}  // namespace pbp
