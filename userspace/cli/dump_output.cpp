#include "cli/dump_output.h"

#include <cstdint>
#include <exception>
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
            if (t.changed) out << ", stack changed while read";
            out << "\n";
            if (t.frames.empty()) out << "    (" << (t.problem.empty() ? "no Python frame" : t.problem) << ")\n";
            for (const Frame& f : t.frames) out << "    " << frame_text(f) << "\n";
        }
        if (p.asyncio) write_asyncio_text(*p.asyncio, out);
    }
}

nlohmann::json dump_json(const DumpResult& dump) {
    nlohmann::json procs = nlohmann::json::array();
    for (const DumpProcess& p : dump.processes) {
        nlohmann::json threads = nlohmann::json::array();
        for (const DumpThread& t : p.threads) {
            nlohmann::json frames = nlohmann::json::array();
            for (const Frame& f : t.frames) {
                nlohmann::json jf = {{"function", f.name}};
                if (f.synthetic) {
                    jf["synthetic"] = true;
                } else {
                    jf["file"] = f.file;
                    jf["line"] = f.line;
                }
                frames.push_back(std::move(jf));
            }
            nlohmann::json jt = {
                {"tid", t.tid},
                {"ns_tid", t.ns_tid ? nlohmann::json(t.ns_tid) : nlohmann::json(nullptr)},
                {"name", t.name},
                {"os_name", t.os_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.os_name)},
                {"state", t.tid ? nlohmann::json(dump_state_name(t.state)) : nlohmann::json(nullptr)},
                {"python", t.python},
                {"gil", t.python && t.gil != DumpGil::Unknown ? nlohmann::json(t.gil == DumpGil::Held)
                                                              : nlohmann::json(nullptr)},
                {"stack_changed_while_read", t.changed},
                {"problem", t.problem.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.problem)},
                {"frames", std::move(frames)},
            };
            threads.push_back(std::move(jt));
        }
        nlohmann::json jp = {
            {"pid", p.pid},
            {"ns_pid", p.ns_pid ? nlohmann::json(p.ns_pid) : nlohmann::json(nullptr)},
            {"command", p.command},
            {"exe", p.exe},
            {"python_version", p.version},
            {"python", p.python},
            {"gil_unknown", p.gil_note.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.gil_note)},
            {"threads", std::move(threads)},
        };
        if (p.asyncio) jp["asyncio"] = asyncio_json(*p.asyncio);  // --async only
        procs.push_back(std::move(jp));
    }
    return {{"processes", std::move(procs)}, {"warnings", dump.warnings}};
}

namespace {

// Typed reads of the document's fields: a field of the wrong type is an error that names it.
struct Reader {
    std::string error;
    bool ok() const { return error.empty(); }
    const nlohmann::json* field(const nlohmann::json& obj, const char* name, const std::string& where) {
        if (!ok()) return nullptr;
        if (!obj.is_object()) {
            error = where + " is not an object";
            return nullptr;
        }
        auto it = obj.find(name);
        if (it == obj.end()) {
            error = where + " has no field '" + name + "'";
            return nullptr;
        }
        return &*it;
    }
    std::string str(const nlohmann::json& obj, const char* name, const std::string& where, bool nullable = false) {
        const nlohmann::json* v = field(obj, name, where);
        if (!v) return {};
        if (nullable && v->is_null()) return {};
        if (!v->is_string()) error = where + "." + name + " is not a string";
        return ok() ? v->get<std::string>() : std::string();
    }
    uint64_t num(const nlohmann::json& obj, const char* name, const std::string& where, uint64_t max,
                 bool nullable = false) {
        const nlohmann::json* v = field(obj, name, where);
        if (!v) return 0;
        if (nullable && v->is_null()) return 0;
        // Parsed text gives unsigned numbers; a document built here, signed ones.
        const bool whole = v->is_number_unsigned() || (v->is_number_integer() && v->get<int64_t>() >= 0);
        if (!whole || v->get<uint64_t>() > max) {
            error = where + "." + name + " is not a whole number up to " + std::to_string(max);
            return 0;
        }
        return v->get<uint64_t>();
    }
    bool boolean(const nlohmann::json& obj, const char* name, const std::string& where) {
        const nlohmann::json* v = field(obj, name, where);
        if (!v) return false;
        if (!v->is_boolean()) error = where + "." + name + " is not true or false";
        return ok() && v->get<bool>();
    }
    const nlohmann::json* array(const nlohmann::json& obj, const char* name, const std::string& where) {
        const nlohmann::json* v = field(obj, name, where);
        if (v && !v->is_array()) {
            error = where + "." + name + " is not an array";
            return nullptr;
        }
        return v;
    }
};

// The /proc state letter of a state's name (dump_state_name's inverse).
char state_letter(const std::string& name) {
    for (char c : std::string("RSDTtZXI"))
        if (dump_state_name(c) == name) return c;
    return name.rfind("state ", 0) == 0 && name.size() == 7 ? name[6] : '?';
}

bool read_dump(const nlohmann::json& doc, DumpResult& out, std::string& error) {
    out = {};
    Reader r;
    const nlohmann::json* procs = r.array(doc, "processes", "the dump");
    const nlohmann::json* warnings = r.array(doc, "warnings", "the dump");
    if (!r.ok()) return error = r.error, false;
    for (const auto& w : *warnings) {
        if (!w.is_string()) return error = "the dump's warnings are not strings", false;
        out.warnings.push_back(w.get<std::string>());
    }
    for (size_t i = 0; i < procs->size() && r.ok(); i++) {
        const nlohmann::json& jp = (*procs)[i];
        const std::string where = "processes[" + std::to_string(i) + "]";
        DumpProcess p;
        p.pid = static_cast<pid_t>(r.num(jp, "pid", where, INT32_MAX));
        p.ns_pid = static_cast<pid_t>(r.num(jp, "ns_pid", where, INT32_MAX, true));
        p.command = r.str(jp, "command", where);
        if (r.ok() && jp.contains("exe")) p.exe = r.str(jp, "exe", where);
        p.version = r.str(jp, "python_version", where);
        p.python = r.str(jp, "python", where);
        p.gil_note = r.str(jp, "gil_unknown", where, true);
        const nlohmann::json* threads = r.array(jp, "threads", where);
        for (size_t k = 0; r.ok() && k < threads->size(); k++) {
            const nlohmann::json& jt = (*threads)[k];
            const std::string tw = where + ".threads[" + std::to_string(k) + "]";
            DumpThread t;
            t.tid = static_cast<uint32_t>(r.num(jt, "tid", tw, UINT32_MAX));
            t.ns_tid = static_cast<uint32_t>(r.num(jt, "ns_tid", tw, UINT32_MAX, true));
            t.name = r.str(jt, "name", tw);
            const std::string state = r.str(jt, "state", tw, true);
            t.state = state.empty() ? '?' : state_letter(state);
            t.python = r.boolean(jt, "python", tw);
            if (const nlohmann::json* g = r.field(jt, "gil", tw)) {
                if (g->is_boolean()) t.gil = g->get<bool>() ? DumpGil::Held : DumpGil::NotHeld;
                else if (!g->is_null()) r.error = tw + ".gil is not true, false or null";
            }
            t.changed = r.boolean(jt, "stack_changed_while_read", tw);
            t.problem = r.str(jt, "problem", tw, true);
            const nlohmann::json* frames = r.array(jt, "frames", tw);
            for (size_t f = 0; r.ok() && f < frames->size(); f++) {
                const nlohmann::json& jf = (*frames)[f];
                const std::string fw = tw + ".frames[" + std::to_string(f) + "]";
                Frame fr;
                fr.name = r.str(jf, "function", fw);
                fr.synthetic = jf.is_object() && jf.value("synthetic", false);
                if (!fr.synthetic) {
                    fr.file = r.str(jf, "file", fw);
                    fr.line = static_cast<int>(r.num(jf, "line", fw, INT32_MAX));
                }
                t.frames.push_back(std::move(fr));
            }
            p.threads.push_back(std::move(t));
        }
        out.processes.push_back(std::move(p));
    }
    if (!r.ok()) return error = r.error, false;
    return true;
}

}  // namespace

bool dump_from_json(const nlohmann::json& doc, DumpResult& out, std::string& error) {
    try {
        return read_dump(doc, out, error);
    } catch (const std::exception& e) {  // a type nlohmann refuses, or out of memory
        out = {};
        error = std::string("the dump cannot be read: ") + e.what();
        return false;
    }
}

}  // namespace pbp
