#include "cli/pyspy_dump.h"

#include <iostream>
#include <string>
#include <vector>

#include "cli/dump_command.h"
#include "cli/options.h"
#include "cli/pyspy_options.h"
#include "cli/record.h"

namespace pbp {

namespace {

constexpr const char* kDumpHelp =
    "pybpfprof-py-spy dump: print the current Python stack of every thread of a process, as py-spy dump does.\n"
    "\n"
    "Usage: pybpfprof-py-spy dump -p PID [OPTIONS]\n"
    "\n"
    "The stacks are read by pybpfprof (docs/dump.md) without stopping or signalling the process: as root\n"
    "directly, otherwise through the pybpfprof agent, for your own processes.\n"
    "\n"
    "Options:\n"
    "  -p, --pid PID          The process to dump (one)\n"
    "  -n, --native           Accepted, with a note on stderr: native (C/C++) frames are not supported yet,\n"
    "                         so the Python frames are dumped alone\n"
    "      --nonblocking      Accepted: pybpfprof never stops or pauses the process\n"
    "      --full-filenames   Accepted: file names are always shown in full\n"
    "  -h, --help             This help\n"
    "\n"
    "Not supported yet (each is a one-line error and exit 2):\n"
    "  -l, --locals           local variables\n"
    "  -j, --json             py-spy's JSON (pybpfprof dump --pid PID --json gives pybpfprof's)\n"
    "  -s, --subprocesses     the process's children\n"
    "\n"
    "Exit codes: 0 ok; 1 cannot read the process (not root and no agent, or not yours); 2 bad input (an\n"
    "option, a PID that does not exist or is not CPython).\n";

int bad(const std::string& msg) {
    std::cerr << kPyspyProgram << ": " << msg << "\n";
    return kExitBadInput;
}

// py-spy's thread status: idle unless the thread is on a CPU (/proc state R), +gil when it
// holds the GIL.
const char* status_of(const DumpThread& t) {
    if (t.state != 'R') return "idle";
    return t.gil == DumpGil::Held ? "active+gil" : "active";
}

}  // namespace

void write_pyspy_dump(const DumpResult& dump, std::ostream& out) {
    bool first = true;
    for (const DumpProcess& p : dump.processes) {
        if (!first) out << "\n";
        first = false;
        out << "Process " << p.pid << ": " << p.command << "\n";
        out << "Python v" << p.version << " (" << (p.exe.empty() ? std::string("?") : p.exe) << ")\n\n";
        for (const DumpThread& t : p.threads) {
            if (!t.python) continue;
            out << "Thread " << (t.tid ? std::to_string(t.tid) : std::string("0x0")) << " (" << status_of(t) << "): \""
                << t.name << "\"\n";
            for (const Frame& f : t.frames) {
                if (f.synthetic || f.file.empty()) out << "    " << f.name << "\n";
                else if (f.line > 0) out << "    " << f.name << " (" << f.file << ":" << f.line << ")\n";
                else out << "    " << f.name << " (" << f.file << ")\n";
            }
        }
    }
}

int pyspy_dump(int argc, char** argv) {
    std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
    DumpRequest req;
    bool native = false;
    for (size_t i = 0; i < args.size(); i++) {
        std::string a = args[i];
        std::string value;
        bool has_value = false;
        if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
            value = a.substr(a.find('=') + 1);
            a = a.substr(0, a.find('='));
            has_value = true;
        } else if (a.size() > 2 && a[0] == '-' && a[1] == 'p') {  // -p1234, -p=1234
            value = a.substr(a[2] == '=' ? 3 : 2);
            a = "-p";
            has_value = true;
        }
        if (a == "-h" || a == "--help") {
            std::cout << kDumpHelp;
            return kExitOk;
        }
        if (a == "-p" || a == "--pid") {
            if (!has_value) {
                if (i + 1 >= args.size()) return bad("-p/--pid needs a value; see " + std::string(kPyspyProgram) + " dump --help");
                value = args[++i];
            }
            pid_t pid = 0;
            if (!req.pids.empty()) return bad("-p/--pid takes one process ID (py-spy dumps one process)");
            if (std::string error; !parse_pid("-p/--pid", value, pid, error)) return bad(error);
            req.pids.push_back(pid);
            continue;
        }
        if (has_value) return bad(a + " takes no value (got '" + value + "')");
        if (a == "-n" || a == "--native") native = true;
        else if (a == "--nonblocking" || a == "--full-filenames") continue;
        else if (a == "-l" || a == "--locals")
            return bad("-l/--locals: local variables are not supported yet; run without --locals");
        else if (a == "-j" || a == "--json")
            return bad("-j/--json: py-spy's JSON is not supported yet; pybpfprof dump --pid PID --json prints "
                       "pybpfprof's (docs/dump.md)");
        else if (a == "-s" || a == "--subprocesses")
            return bad("-s/--subprocesses: dumping the process's children is not supported yet; dump each with -p");
        else return bad("dump has no option " + a + "; see " + std::string(kPyspyProgram) + " dump --help");
    }
    if (req.pids.empty()) return bad("dump needs -p PID: " + std::string(kPyspyProgram) + " dump -p PID");
    // Said, and the dump still made: a caller that asked for native frames gets the Python ones.
    if (native)
        std::cerr << kPyspyProgram << ": --native: native (C/C++) frames are not supported yet; the Python frames "
                                      "are dumped alone\n";
    DumpResult dump;
    Status st = obtain_dump(req, dump);
    if (!st.ok()) {
        std::cerr << kPyspyProgram << ": " << st.message << "\n";
        return st.failure == Failure::BadInput ? kExitBadInput : kExitError;
    }
    for (const auto& w : dump.warnings) std::cerr << kPyspyProgram << ": warning: " << w << "\n";
    write_pyspy_dump(dump, std::cout);
    std::cout.flush();
    return std::cout ? kExitOk : kExitError;
}

}  // namespace pbp
