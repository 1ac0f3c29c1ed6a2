#include "cli/dump_output.h"

#include "cli/dump_asyncio_output.h"

namespace pbp {

namespace {

std::string frame_text(const Frame& f) {
    if (f.synthetic || f.file.empty()) return f.name;
    return f.name + " (" + f.file + ":" + (f.line > 0 ? std::to_string(f.line) : std::string("?")) + ")";
}

}  // namespace

void write_dump_text(const DumpResult& dump, std::ostream& out) {
    bool first = true;
    for (const DumpProcess& p : dump.processes) {
        if (!first) out << "\n";
        first = false;
        out << "Process " << p.pid;
        if (p.ns_pid) out << " (PID " << p.ns_pid << " in its namespace)";
        out << ": " << p.command << "\n";
        out << "Python " << p.python << "\n";
        if (!p.gil_note.empty()) out << "GIL: not known (" << p.gil_note << ")\n";
        for (const DumpThread& t : p.threads) {
            out << "\nThread " << (t.tid ? std::to_string(t.tid) : std::string("?"));
            if (t.ns_tid) out << " (" << t.ns_tid << " in its namespace)";
            out << " \"" << t.name << "\"";
            if (t.tid) out << " " << dump_state_name(t.state);
            if (!t.python) {
                out << ", native (no Python thread state)\n";
                continue;
            }
            if (t.gil == DumpGil::Held) out << ", holds the GIL";
            if (t.gil == DumpGil::Waiting) out << ", waiting for the GIL";
            if (t.changed) out << ", stack changed while read";
            out << "\n";
            if (t.frames.empty()) out << "    (" << (t.problem.empty() ? "no Python frame" : t.problem) << ")\n";
            for (const Frame& f : t.frames) out << "    " << frame_text(f) << "\n";
        }
        if (p.asyncio) write_asyncio_text(*p.asyncio, out);
    }
}

}  // namespace pbp
