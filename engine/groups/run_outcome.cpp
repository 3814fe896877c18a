#include "groups/run_outcome.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "contract/metrics.hpp"

namespace fp8rl {
namespace {

std::optional<double> rl_mean(const std::vector<RunStore::ScalarPoint>& points) {
  double sum = 0;
  int64_t n = 0;
  for (const auto& p : points)
    if (p.step > 0 && std::isfinite(p.value)) sum += p.value, ++n;
  if (n == 0) return std::nullopt;
  return sum / static_cast<double>(n);
}

}  // namespace

RunOutcome read_outcome(RunStore& store, const RunStore::RunRow& run, double target) {
  RunOutcome o;
  o.run_id = run.id;
  o.name = run.name;
  o.status = run.status;
  const auto val = store.scalar_series(run.id, metric::kValAccuracy);
  if (!val.empty()) o.final_validation = val.back().value;
  for (const auto& p : val) {
    if (std::isfinite(p.value) && (!o.best_validation || p.value > *o.best_validation))
      o.best_validation = p.value;
    if (!o.time_to_target && std::isfinite(p.value) && p.value >= target) o.time_to_target = p.wall;
  }
  const auto reward = store.scalar_series(run.id, metric::kReward);
  std::vector<double> last;
  for (auto it = reward.rbegin(); it != reward.rend() && it->step > 0; ++it)
    if (std::isfinite(it->value) && static_cast<int64_t>(last.size()) < kFinalRewardSteps)
      last.push_back(it->value);
  if (!last.empty()) {
    double sum = 0;
    for (double v : last) sum += v;
    o.final_reward = sum / static_cast<double>(last.size());
  }
  const auto step_time = store.scalar_series(run.id, metric::kTimeTotal);
  o.step_time = rl_mean(step_time);
  for (const auto& p : step_time)
    if (p.step > 0) ++o.rl_steps;
  o.rollout_tps = rl_mean(store.scalar_series(run.id, metric::kRolloutTps));
  o.training_tps = rl_mean(store.scalar_series(run.id, metric::kTrainTps));
  std::vector<double> errors;
  for (const auto& p : store.scalar_series(run.id, metric::kTokenMultProbError))
    if (p.step > 0 && std::isfinite(p.value)) errors.push_back(p.value);
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    const size_t m = errors.size() / 2;
    o.mult_prob_error = errors.size() % 2 ? errors[m] : (errors[m - 1] + errors[m]) / 2;
  }
  for (const auto* s : {&val, &reward, &step_time})
    if (!s->empty()) o.wall_seconds = std::max(o.wall_seconds, s->back().wall);
  return o;
}

}  // namespace fp8rl
