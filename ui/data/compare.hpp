// What the compare view shows, computed from runs' data (no Qt): the summary table and the
// configuration diff.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ui/data/run_data.hpp"

namespace fp8rl::ui {

struct RunSummary {
  int64_t id = -1;
  std::string name;
  std::string precision;  // precision summary
  int64_t steps = 0;      // RL steps recorded
  std::optional<double> final_validation, best_validation;
  std::optional<double> rollout_tps, training_tps;  // means over RL steps
  std::optional<double> step_time;                  // mean time/total_step, seconds
  std::optional<double> speedup;                    // base step_time / this step_time
  std::optional<double> median_mult_prob_error;     // median token_mult_prob_error
};

// One summary per run; speedup relative to runs[base] (nullopt where a step time is missing).
std::vector<RunSummary> summarize(const std::vector<const RunData*>& runs, size_t base);

struct ConfigDiffRow {
  std::string key;                  // dotted path, e.g. "precision.default"
  std::vector<std::string> values;  // one per run ("—" where a run lacks the key)
};

// The settings whose values differ between the configs (flattened to dotted keys, lists
// compared whole), sorted by key. Empty when all agree.
std::vector<ConfigDiffRow> configDiff(const std::vector<const Json*>& configs);

// The settings that differ between groups of runs while every run of a group has the same value
// (so the seed and the run name, which differ inside a group, are left out): one value per
// group, sorted by key.
std::vector<ConfigDiffRow> groupConfigDiff(const std::vector<std::vector<const Json*>>& groups);

}  // namespace fp8rl::ui
