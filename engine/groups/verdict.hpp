// Is group A as good as group B, and how much time does it save? For each metric — final and
// best validation accuracy, reward, time to a validation target, step time — the difference
// (accuracies, reward) or the ratio (times) of the two groups' means with a 95 % bootstrap
// percentile interval (paired by seed when both groups ran the same seeds), a t-based interval
// for comparison, the number of seeds, a finding in words, and how many seeds a difference of a
// given size would need (power). What `fp8rl compare`, `fp8rl report` and the studio's compare
// view say.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "groups/run_groups.hpp"
#include "groups/run_outcome.hpp"
#include "stats/stats.hpp"

namespace fp8rl {

struct VerdictOptions {
  double target = 0.5;             // the validation accuracy time-to-target waits for
  double detect_accuracy = 0.02;   // the difference sized for (accuracies and reward)
  double detect_relative = 0.05;   // … and for times, relative (5 %)
  double alpha = 0.05, power = 0.8;
  stats::BootstrapOptions bootstrap;  // 10,000 resamples, a fixed seed, 95 %
  bool paired = true;  // pair runs by their replicate value (seed) when both groups have them all
};

struct MetricVerdict {
  std::string key;    // final_validation, best_validation, final_reward, time_to_target, step_time
  std::string title;  // "final validation accuracy", …
  bool ratio = false;  // compared as mean(A) / mean(B) (times), else mean(A) − mean(B)
  bool lower_is_better = false;
  std::vector<double> a, b;             // the values (paired: aligned by replicate)
  std::vector<std::string> replicates;  // the pairs' replicate values (paired only)
  bool paired = false;
  int missing_a = 0, missing_b = 0;  // runs without a value (left out; e.g. target not reached)
  double mean_a = 0, mean_b = 0, sd_a = 0, sd_b = 0;
  stats::Estimate bootstrap;  // the interval the finding rests on
  stats::Estimate t_based;    // for comparison
  double sd = 0;              // of the per-seed differences (paired) or pooled; log scale for ratios
  double detect = 0;          // the difference sized for (absolute; relative for ratios)
  int64_t seeds_needed = -1;  // per group, to detect `detect` (−1: not computable)
  double detectable = 0;      // the smallest difference these seeds detect (same units)
  // "no difference detected", "A higher", "A lower", "A faster", "A slower", "too few runs".
  std::string finding;
  std::string sentence;  // the whole statement in words
};

struct Verdict {
  std::string a_label, b_label;
  int n_a = 0, n_b = 0;
  bool paired = false;
  VerdictOptions options;
  std::vector<MetricVerdict> metrics;

  // One paragraph per metric, then the method.
  std::string text() const;
  Json to_json() const;
};

// The metric keys in the order a verdict lists them, and their titles.
const std::vector<std::pair<std::string, std::string>>& verdict_metrics();

// Compares group a with group b (their runs' outcomes, in the groups' order).
Verdict compare_groups(const RunGroup& a, const std::vector<RunOutcome>& outcomes_a,
                       const RunGroup& b, const std::vector<RunOutcome>& outcomes_b,
                       const VerdictOptions& opt = {});

// Reads every run's outcome of the group from the store.
std::vector<RunOutcome> read_outcomes(RunStore& store, const RunGroup& group, double target);

// A number for text: fixed decimals, a true minus sign ("−0.004"), "+" when signed and positive.
std::string format_number(double v, int decimals, bool sign = false);

}  // namespace fp8rl
