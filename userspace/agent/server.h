// `pybpfprof agent`: one privileged process per machine that lets every user profile the
// processes they own. It listens on a Unix socket anyone may connect to; each connection is
// one session of the one engine (one BPF program for all). The caller's kernel credentials
// (SO_PEERCRED, SO_PEERGROUPS) decide what it may profile (agent/access.h), every request is
// validated (agent/protocol.h), and profiles go back over the socket: the agent never writes
// a file for a caller. Limits bound what one user can hold.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "engine/knobs.h"

namespace pbp::agent {

struct AgentConfig {
    std::string socket_path;           // default kDefaultSocket
    std::string admin_group;           // members may profile anything; "" = root only
    size_t max_sessions_per_user = 4;  // sessions at once per uid (admins too)
    double max_duration_s = 3600;      // longest session of a non-admin; 0 = no limit
    size_t max_session_bytes = 256u << 20;  // samples one session may hold
    size_t max_connections = 4096;     // all connections at once
    size_t max_connections_per_user = 64;
    double idle_timeout_s = 30;        // a connection with no session and no request is closed
    double rate_hz = 99;               // the default rate of a session that names none
    std::string btf_path;
    std::string node_root = "/";
    bool native = true;                // serve --native sessions (off: --no-native)
    Knobs knobs;
};

class Server;

// Runs the agent until 'stop' becomes non-zero. Returns 0, or 1 after a one-line error
// (written to 'error') when it cannot start: no privileges, BPF, the socket in use.
int run_agent(const AgentConfig& cfg, const std::atomic<int>& stop, std::string& error);

}  // namespace pbp::agent
