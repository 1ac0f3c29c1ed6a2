#include "cli/dump_asyncio_output.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace pbp {

namespace {

// pstree's frame label: "function file:line".
std::string frame_label(const Frame& f) {
    if (f.synthetic || f.file.empty()) return f.name;
    return f.name + " " + f.file + ":" + (f.line > 0 ? std::to_string(f.line) : std::string("?"));
}

struct Tree {
    const DumpAsyncio& a;
    std::map<uint64_t, size_t> index;               // id -> tasks[i]
    std::map<uint64_t, std::vector<size_t>> kids;   // awaiter id -> the tasks it awaits
    std::set<size_t> shown;
    std::ostream& out;

    void line(const std::string& prefix, bool last, const std::string& text) {
        out << prefix << (last ? "└── " : "├── ") << text << "\n";
    }
    // A task, then its coroutine stack outermost first, one frame under the other, and the tasks
    // it awaits under its innermost frame (pstree's shape). path: the tasks above (cycles).
    void task(size_t i, const std::string& prefix, bool last, std::set<size_t>& path) {
        const DumpTask& t = a.tasks[i];
        std::string text = "(T) " + t.name;
        if (t.state != "pending") text += " [" + t.state + "]";
        if (path.count(i)) {
            line(prefix, last, text + " (await cycle)");
            return;
        }
        line(prefix, last, text);
        shown.insert(i);
        path.insert(i);
        std::string pre = prefix + (last ? "    " : "│   ");
        const auto& k = kids[t.id];
        for (size_t f = t.coroutine_stack.size(); f-- > 0;) {  // each frame the only child of the one above
            line(pre, true, " " + frame_label(t.coroutine_stack[f]));  // pstree: "(T) task", " frame"
            pre += "    ";
        }
        for (size_t c = 0; c < k.size(); c++) task(k[c], pre, c + 1 == k.size(), path);
        path.erase(i);
    }
};

}  // namespace

void write_asyncio_text(const DumpAsyncio& a, std::ostream& out) {
    out << "\nasyncio tasks";
    if (!a.note.empty()) {
        out << ": not read (" << a.note << ")\n";
        return;
    }
    out << " (" << a.tasks.size() << "), who awaits whom:\n";
    Tree tr{a, {}, {}, {}, out};
    for (size_t i = 0; i < a.tasks.size(); i++) tr.index[a.tasks[i].id] = i;
    for (size_t i = 0; i < a.tasks.size(); i++)
        for (uint64_t by : a.tasks[i].awaited_by) tr.kids[by].push_back(i);
    std::vector<size_t> roots;
    for (size_t i = 0; i < a.tasks.size(); i++)
        if (a.tasks[i].awaited_by.empty()) roots.push_back(i);
    std::set<size_t> path;
    for (size_t r = 0; r < roots.size(); r++) tr.task(roots[r], "", true, path);
    // Tasks only in await cycles have no root: each shown from itself.
    for (size_t i = 0; i < a.tasks.size(); i++)
        if (!tr.shown.count(i)) tr.task(i, "", true, path);
}

}  // namespace pbp
