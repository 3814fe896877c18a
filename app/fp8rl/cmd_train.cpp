#include <cstdio>

#include "args.hpp"
#include "commands.hpp"

namespace fp8rl::cli {

int cmd_train(const std::vector<std::string>& args) {
  const Args a(args, {"preset", "config", "set", "db", "name", "backend"}, {"json", "help"});
  std::fputs(
      "fp8rl train: the GRPO run loop is not part of this build yet, so nothing was trained.\n"
      "What this build can do: `fp8rl doctor` (machine and CUDA report), `fp8rl bench gemm` and\n"
      "`fp8rl bench quant` (BF16 vs block-scaled FP8 on each backend). See README.md.\n",
      stderr);
  return 3;
}

}  // namespace fp8rl::cli
