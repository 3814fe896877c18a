#include "contract/rank_launch.hpp"

#include <unistd.h>

#include <cstdlib>

#include "core/error.hpp"

namespace fp8rl {

std::string mpirun_program() {
  const char* env = std::getenv("FP8RL_MPIRUN");
  return env && *env ? env : "mpirun";
}

std::vector<std::string> ranks_command(int ranks, const std::string& hostfile,
                                       const std::string& program,
                                       const std::vector<std::string>& args) {
  check(ranks >= 1, "ranks must be at least 1 (got " + std::to_string(ranks) + ")");
  std::vector<std::string> cmd;
  if (ranks > 1 || !hostfile.empty()) {
    cmd = {mpirun_program(), "-np", std::to_string(ranks)};
    if (hostfile.empty())
      cmd.push_back("--oversubscribe");
    else
      cmd.insert(cmd.end(), {"--hostfile", hostfile});
    cmd.insert(cmd.end(), {"--bind-to", "none"});
    if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  }
  cmd.push_back(program);
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

}  // namespace fp8rl
