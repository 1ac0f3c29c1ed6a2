#include "export/dump_document.h"

#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

namespace pbp {

namespace {

nlohmann::json frames_json(const std::vector<Frame>& frames) {
    nlohmann::json out = nlohmann::json::array();
    for (const Frame& f : frames) {
        nlohmann::json jf = {{"function", f.name}};
        if (f.synthetic) {
            jf["synthetic"] = true;
        } else {
            jf["file"] = f.file;
            jf["line"] = f.line;
        }
        // A native or kernel frame (--native) says so, with its library; a Python frame as
        // before, so older readers read the document as they did.
        if (f.kind != FrameKind::Python) {
            jf["kind"] = f.kind == FrameKind::Native ? "native" : "kernel";
            jf["library"] = f.library;
        }
        out.push_back(std::move(jf));
    }
    return out;
}

}  // namespace

std::string task_id_text(uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return b;
}

nlohmann::json dump_json(const DumpResult& dump) {
    nlohmann::json procs = nlohmann::json::array();
    for (const DumpProcess& p : dump.processes) {
        nlohmann::json threads = nlohmann::json::array();
        for (const DumpThread& t : p.threads) {
            nlohmann::json jt = {
                {"tid", t.tid},
                {"ns_tid", t.ns_tid ? nlohmann::json(t.ns_tid) : nlohmann::json(nullptr)},
                {"name", t.name},
                {"os_name", t.os_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.os_name)},
                {"state", t.tid ? nlohmann::json(dump_state_name(t.state)) : nlohmann::json(nullptr)},
                {"python", t.python},
                {"gil", t.python && t.gil != DumpGil::Unknown ? nlohmann::json(t.gil == DumpGil::Held)
                                                              : nlohmann::json(nullptr)},
                {"waiting_for_gil", t.python && t.gil != DumpGil::Unknown ? nlohmann::json(t.gil == DumpGil::Waiting)
                                                                          : nlohmann::json(nullptr)},
                {"stack_changed_while_read", t.changed},
                {"problem", t.problem.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.problem)},
                {"frames", frames_json(t.frames)},
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

nlohmann::json asyncio_json(const DumpAsyncio& a) {
    nlohmann::json tasks = nlohmann::json::array();
    for (const DumpTask& t : a.tasks) {
        nlohmann::json by = nlohmann::json::array();
        for (uint64_t b : t.awaited_by) by.push_back(task_id_text(b));
        tasks.push_back({
            {"id", task_id_text(t.id)},
            {"name", t.name},
            {"state", t.state},
            {"thread", t.thread ? nlohmann::json(t.thread) : nlohmann::json(nullptr)},
            {"awaited_by", std::move(by)},
            {"coroutine_stack", frames_json(t.coroutine_stack)},
        });
    }
    return {{"note", a.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.note)}, {"tasks", std::move(tasks)}};
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
    // A task id: the "0x..." hex string of frames_json's documents.
    uint64_t id(const nlohmann::json& v, const std::string& where) {
        if (!ok()) return 0;
        const std::string s = v.is_string() ? v.get<std::string>() : std::string();
        uint64_t x = 0;
        bool good = s.size() > 2 && s.size() <= 18 && s.compare(0, 2, "0x") == 0;
        for (size_t i = 2; good && i < s.size(); i++) {
            const char c = s[i];
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            good = d >= 0;
            x = x << 4 | uint64_t(d < 0 ? 0 : d);
        }
        if (!good) error = where + " is not a task id (0x and up to 16 hex digits)";
        return x;
    }
    std::vector<Frame> frames(const nlohmann::json& obj, const char* name, const std::string& where) {
        std::vector<Frame> out;
        const nlohmann::json* frames = array(obj, name, where);
        for (size_t f = 0; ok() && f < frames->size(); f++) {
            const nlohmann::json& jf = (*frames)[f];
            const std::string fw = where + "." + name + "[" + std::to_string(f) + "]";
            Frame fr;
            fr.name = str(jf, "function", fw);
            fr.synthetic = jf.is_object() && jf.value("synthetic", false);
            if (!fr.synthetic) {
                fr.file = str(jf, "file", fw);
                fr.line = static_cast<int>(num(jf, "line", fw, INT32_MAX));
            }
            if (ok() && jf.is_object() && jf.contains("kind")) {
                const std::string kind = str(jf, "kind", fw);
                if (kind == "native") fr.kind = FrameKind::Native;
                else if (kind == "kernel") fr.kind = FrameKind::Kernel;
                else if (ok()) error = fw + ".kind is not \"native\" or \"kernel\"";
                if (ok()) fr.library = str(jf, "library", fw);
            }
            out.push_back(std::move(fr));
        }
        return out;
    }
    DumpAsyncio asyncio(const nlohmann::json& ja, const std::string& where) {
        DumpAsyncio a;
        a.note = str(ja, "note", where, true);
        const nlohmann::json* tasks = array(ja, "tasks", where);
        for (size_t i = 0; ok() && i < tasks->size(); i++) {
            const nlohmann::json& jt = (*tasks)[i];
            const std::string tw = where + ".tasks[" + std::to_string(i) + "]";
            DumpTask t;
            if (const nlohmann::json* v = field(jt, "id", tw)) t.id = id(*v, tw + ".id");
            t.name = str(jt, "name", tw);
            t.state = str(jt, "state", tw);
            t.thread = static_cast<uint32_t>(num(jt, "thread", tw, UINT32_MAX, true));
            if (const nlohmann::json* by = array(jt, "awaited_by", tw))
                for (size_t k = 0; ok() && k < by->size(); k++) t.awaited_by.push_back(id((*by)[k], tw + ".awaited_by"));
            t.coroutine_stack = frames(jt, "coroutine_stack", tw);
            a.tasks.push_back(std::move(t));
        }
        return a;
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
            if (r.ok() && jt.contains("os_name")) t.os_name = r.str(jt, "os_name", tw, true);  // (not from older agents)
            const std::string state = r.str(jt, "state", tw, true);
            t.state = state.empty() ? '?' : state_letter(state);
            t.python = r.boolean(jt, "python", tw);
            if (const nlohmann::json* g = r.field(jt, "gil", tw)) {
                if (g->is_boolean()) t.gil = g->get<bool>() ? DumpGil::Held : DumpGil::NotHeld;
                else if (!g->is_null()) r.error = tw + ".gil is not true, false or null";
            }
            // (An older agent's document has no waiting_for_gil: "not held" then.)
            if (t.gil == DumpGil::NotHeld && jt.contains("waiting_for_gil") && jt["waiting_for_gil"].is_boolean() &&
                jt["waiting_for_gil"].get<bool>())
                t.gil = DumpGil::Waiting;
            t.changed = r.boolean(jt, "stack_changed_while_read", tw);
            t.problem = r.str(jt, "problem", tw, true);
            t.frames = r.frames(jt, "frames", tw);
            p.threads.push_back(std::move(t));
        }
        if (r.ok() && jp.is_object() && jp.contains("asyncio")) p.asyncio = r.asyncio(jp["asyncio"], where + ".asyncio");
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
