// `pybpfprof agent [OPTIONS]` runs the agent (root); `pybpfprof agent status` lists the
// sessions the caller may see. argv starts at "agent".
#pragma once

namespace pbp {

int agent_command(int argc, char** argv);

}  // namespace pbp
