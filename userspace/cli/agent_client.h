// The CLI as a client of the agent: a user who cannot load BPF runs pybpfprof with the same
// options, and the run goes through the agent's socket. A launched command is forked here,
// as the user, and held before exec until the agent follows it. The profile comes back over
// the socket and is written here, with the user's own permissions; what is printed is what a
// root run prints.
#pragma once
#include <string>

#include "cli/options.h"
#include "engine/dump.h"

namespace pbp {

// The agent's socket: $PYBPFPROF_AGENT_SOCKET, else the default path.
std::string agent_socket_path();
// Something accepts connections at path.
bool agent_reachable(const std::string& path);

// Runs the options' profile through the agent at path. Returns the exit code.
int run_via_agent(const Options& o, const std::string& path);

// `pybpfprof dump` through the agent at path: the agent reads the stacks of the caller's own
// processes and sends the dump back (docs/dump.md's JSON document), read into out. The
// agent's refusals keep their kind (bad input, forbidden, cannot profile).
Status dump_via_agent(const DumpRequest& req, const std::string& path, DumpResult& out);

// `pybpfprof agent status`: the sessions the caller may see (all of them for root).
int agent_status(const std::string& path);

}  // namespace pbp
