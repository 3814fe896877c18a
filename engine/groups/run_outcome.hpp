// What a finished (or running) run achieved and what it cost, read from the run store: the
// per-run numbers that groups of runs are compared on (groups/verdict.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/json.hpp"
#include "store/run_store.hpp"

namespace fp8rl {

// How many of the last RL steps `final_reward` averages.
inline constexpr int64_t kFinalRewardSteps = 20;

struct RunOutcome {
  int64_t run_id = -1;
  std::string name, status;
  std::string replicate;  // the run's value of its sweep's replicate axis ("" when none)
  int64_t rl_steps = 0;   // RL steps recorded
  double wall_seconds = 0;  // the last step's wall time (seconds since the run started)
  std::optional<double> final_validation;  // accuracy/validation at its last record
  std::optional<double> best_validation;   // its largest finite value
  std::optional<double> final_reward;      // mean reward/mean over the last 20 RL steps
  std::optional<double> time_to_target;    // wall seconds to the first validation ≥ target
  std::optional<double> step_time;         // mean time/total_step over RL steps, seconds
  std::optional<double> rollout_tps, training_tps;  // means over RL steps
  std::optional<double> mult_prob_error;   // median token_mult_prob_error over RL steps
};

// Reads the outcome of the run from the store. target: the validation accuracy that
// time_to_target waits for.
RunOutcome read_outcome(RunStore& store, const RunStore::RunRow& run, double target);

}  // namespace fp8rl
