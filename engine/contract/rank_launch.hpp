// How a run is started as several data-parallel ranks (docs/distributed.md): the one place
// that spells the launcher's command line, for the studio's launch form, `fp8rl bench ranks`
// and the tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fp8rl {

// The most ranks a launch form offers (more are possible from the command line).
inline constexpr int kMaxLaunchRanks = 64;

// The command that starts `program args…` as `ranks` MPI ranks:
//   mpirun -np RANKS [--hostfile FILE | --oversubscribe] --bind-to none
//          [--allow-run-as-root] PROGRAM ARGS…
// Without a hostfile the ranks share this machine (--oversubscribe: more ranks than cores is
// allowed); --bind-to none lets each rank's threads use any core; --allow-run-as-root only when
// this process runs as root (Open MPI refuses otherwise). One rank without a hostfile: the
// program itself, no launcher. ranks < 1 throws fp8rl::Error.
std::vector<std::string> ranks_command(int ranks, const std::string& hostfile,
                                       const std::string& program,
                                       const std::vector<std::string>& args);

// Why a run with these batch settings cannot be shared by `ranks` data-parallel ranks, or
// nullopt (always for one rank). The rule of docs/distributed.md: a mini-batch never splits a
// group (mini_batches divides prompts_per_step), every rank gets a share of every mini-batch
// (prompts_per_step ≥ ranks × mini_batches) and of the supervised warm-up's batch.
std::optional<std::string> data_parallel_error(int64_t ranks, int64_t prompts_per_step,
                                               int64_t mini_batches, int64_t sft_steps,
                                               int64_t sft_batch_size);

// The launcher ranks_command uses ("mpirun"; $FP8RL_MPIRUN overrides it).
std::string mpirun_program();

}  // namespace fp8rl
