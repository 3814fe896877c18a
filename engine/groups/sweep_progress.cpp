#include "groups/sweep_progress.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <queue>

#include "contract/metrics.hpp"

namespace fp8rl {
namespace {

int64_t config_int(const Json& config, const char* section, const char* key) {
  if (!config.is_object() || !config.contains(section)) return 0;
  const Json& s = config.at(section);
  if (!s.is_object() || !s.contains(key) || !s.at(key).is_number()) return 0;
  return static_cast<int64_t>(s.at(key).as_number());
}

}  // namespace

const char* point_state_name(PointState s) {
  switch (s) {
    case PointState::queued:
      return "queued";
    case PointState::running:
      return "running";
    case PointState::done:
      return "done";
    case PointState::failed:
      return "failed";
    case PointState::interrupted:
      return "interrupted";
  }
  return "queued";
}

int64_t run_total_steps(const Json& config) {
  return std::max<int64_t>(0, config_int(config, "sft", "steps")) +
         std::max<int64_t>(0, config_int(config, "grpo", "steps"));
}

int64_t run_steps_done(const Json& config, std::optional<int64_t> last_step) {
  if (!last_step) return 0;
  const int64_t sft = std::max<int64_t>(0, config_int(config, "sft", "steps"));
  // Warm-up steps are −N … −1, RL steps 1 … steps.
  const int64_t done = *last_step < 0 ? sft + *last_step + 1 : sft + *last_step;
  return std::clamp<int64_t>(done, 0, run_total_steps(config));
}

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return std::to_string(s) + " s";
  if (s < 3600) return std::to_string((s + 30) / 60) + " min";
  const int64_t m = (s + 30) / 60;
  return std::to_string(m / 60) + " h " + std::to_string(m % 60) + " min";
}

std::string SweepProgress::summary() const {
  std::string s = std::to_string(done) + "/" + std::to_string(total) + " done";
  if (running) s += " · " + std::to_string(running) + " running";
  if (queued) s += " · " + std::to_string(queued) + " queued";
  if (interrupted) s += " · " + std::to_string(interrupted) + " interrupted";
  if (failed) s += " · " + std::to_string(failed) + " failed";
  if (complete())
    s += " · took " + duration_text(elapsed);
  else if (eta_seconds)
    s += " · ETA " + duration_text(*eta_seconds);
  return s;
}

SweepProgress sweep_progress(const RunStore::SweepRow& sweep,
                             const std::vector<RunStore::SweepPoint>& points,
                             const std::vector<RunStore::RunRow>& runs, double now,
                             int64_t concurrency) {
  SweepProgress p;
  p.total = static_cast<int64_t>(points.size());
  p.elapsed = std::max(0.0, (sweep.ended_at ? *sweep.ended_at : now) - sweep.created_at);
  std::map<int64_t, const RunStore::RunRow*> by_id;
  for (const auto& r : runs) by_id[r.id] = &r;
  std::vector<double> durations;      // finished runs, seconds
  std::vector<double> running_left;   // per running run: seconds left (NaN: unknown yet)
  std::vector<double> running_spent;  // … and seconds spent
  std::vector<double> estimated;      // whole-run durations extrapolated from progress
  for (const auto& pt : points) {
    const auto it = pt.run_id ? by_id.find(*pt.run_id) : by_id.end();
    PointState state = PointState::queued;
    double fraction = 0;
    if (it != by_id.end()) {
      const RunStore::RunRow& r = *it->second;
      const int64_t total = run_total_steps(r.config.is_null() ? pt.config : r.config);
      const int64_t done = run_steps_done(r.config.is_null() ? pt.config : r.config, r.last_step);
      fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0;
      const double started = r.started_at.value_or(r.created_at);
      if (r.status == run_status::kFinished) {
        state = PointState::done;
        fraction = 1;
        if (r.ended_at) durations.push_back(std::max(0.0, *r.ended_at - started));
      } else if (r.status == run_status::kFailed) {
        state = PointState::failed;
      } else if (run_status::is_live(r.status)) {
        state = PointState::running;
        const double spent = std::max(0.0, now - started);
        running_spent.push_back(spent);
        if (done > 0 && total > 0) {
          const double whole = spent * static_cast<double>(total) / static_cast<double>(done);
          estimated.push_back(whole);
          running_left.push_back(std::max(0.0, whole - spent));
        } else {
          running_left.push_back(NAN);
        }
      } else {
        state = PointState::interrupted;
      }
    }
    p.states.push_back(state);
    p.fraction.push_back(fraction);
    switch (state) {
      case PointState::queued: ++p.queued; break;
      case PointState::running: ++p.running; break;
      case PointState::done: ++p.done; break;
      case PointState::failed: ++p.failed; break;
      case PointState::interrupted: ++p.interrupted; break;
    }
  }
  // A run's duration: the mean of the finished ones, else extrapolated from running ones.
  const std::vector<double>& basis = durations.empty() ? estimated : durations;
  if (basis.empty() || p.complete()) return p;
  double duration = 0;
  for (double d : basis) duration += d;
  duration /= static_cast<double>(basis.size());
  // Simulate the queue: each slot frees when its run ends; waiting points take the earliest.
  const int64_t slots = std::max<int64_t>(1, concurrency > 0 ? concurrency : sweep.concurrency);
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  double last = 0;
  for (size_t i = 0; i < running_left.size(); ++i) {
    const double left = std::isnan(running_left[i]) ? std::max(0.0, duration - running_spent[i])
                                                    : running_left[i];
    free_at.push(left);
    last = std::max(last, left);
  }
  while (static_cast<int64_t>(free_at.size()) < slots) free_at.push(0);
  for (int64_t i = 0; i < p.queued + p.interrupted; ++i) {
    const double start = free_at.top();
    free_at.pop();
    free_at.push(start + duration);
    last = std::max(last, start + duration);
  }
  p.eta_seconds = last;
  return p;
}

}  // namespace fp8rl
