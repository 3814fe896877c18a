#include "contract/rank_launch.hpp"

#include <unistd.h>

#include <cstdlib>

#include "core/error.hpp"

namespace fp8rl {

std::string mpirun_program() {
  const char* env = std::getenv("FP8RL_MPIRUN");
  return env && *env ? env : "mpirun";
}

std::optional<std::string> data_parallel_error(int64_t ranks, int64_t prompts_per_step,
                                               int64_t mini_batches, int64_t sft_steps,
                                               int64_t sft_batch_size) {
  if (ranks <= 1) return std::nullopt;
  const std::string R = std::to_string(ranks), M = std::to_string(mini_batches),
                    P = std::to_string(prompts_per_step);
  if (mini_batches < 1 || prompts_per_step % mini_batches != 0)
    return "grpo.mini_batches (" + M + ") must divide grpo.prompts_per_step (" + P +
           ") in a run over several ranks: a mini-batch may not split a group";
  if (prompts_per_step / mini_batches < ranks)
    return "grpo.prompts_per_step (" + P + ") must be at least ranks × mini_batches (" + R + " × " +
           M + "): every rank needs a prompt of each mini-batch";
  if (sft_steps > 0 && sft_batch_size < ranks)
    return "sft.batch_size (" + std::to_string(sft_batch_size) +
           ") must be at least the number of ranks (" + R + ")";
  return std::nullopt;
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
