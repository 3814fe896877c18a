// Where a sweep stands: how many of its points are done, running, queued, interrupted or
// failed, and an estimate of the time left — the same numbers in `fp8rl sweep`'s progress bar
// and in the studio's sweeps panel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/run_store.hpp"

namespace fp8rl {

enum class PointState {
  queued,       // no run yet
  running,      // its run is running or paused
  done,         // its run finished
  failed,       // its run failed (a configuration or numerical error: not retried)
  interrupted,  // its run crashed or was stopped: the next `fp8rl sweep` continues it
};

const char* point_state_name(PointState s);

struct SweepProgress {
  int64_t total = 0, done = 0, running = 0, queued = 0, failed = 0, interrupted = 0;
  std::vector<PointState> states;  // per point
  std::vector<double> fraction;    // per point: its run's share of its steps done (0 … 1)
  double elapsed = 0;              // seconds since the sweep was created
  // Seconds until the last point is done at the sweep's concurrency; nullopt until a run has
  // progress to estimate from (or when nothing is left to run).
  std::optional<double> eta_seconds;
  bool complete() const { return done + failed == total; }
  // "5/15 done · 1 running · 9 queued · ETA 23 min"
  std::string summary() const;
};

// The progress of sweep `sweep` with these points, given the store's runs (any order; other
// runs are ignored) at unix time now. concurrency ≤ 0: the sweep's own.
SweepProgress sweep_progress(const RunStore::SweepRow& sweep,
                             const std::vector<RunStore::SweepPoint>& points,
                             const std::vector<RunStore::RunRow>& runs, double now,
                             int64_t concurrency = 0);

// The steps a run of this configuration makes (sft.steps + grpo.steps), and how many of them
// a run that recorded last_step has done.
int64_t run_total_steps(const Json& config);
int64_t run_steps_done(const Json& config, std::optional<int64_t> last_step);

// "42 s", "3 min", "1 h 12 min".
std::string duration_text(double seconds);

}  // namespace fp8rl
