// What the studio knows about one run: its catalog row and everything it recorded, filled from
// the run store (history) and from the worker's telemetry (live). Plain data, no Qt: the
// receive threads build RunData deltas, the GUI thread merges them, the views read them.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "contract/live_settings.hpp"
#include "contract/run_recorder.hpp"
#include "core/json.hpp"
#include "store/run_store.hpp"

namespace fp8rl::ui {

// One value of a scalar at a step, with the three x coordinates a chart can plot against.
struct SeriesPoint {
  double step = 0;    // RL step (warm-up steps are negative)
  double wall = 0;    // seconds since the run started
  double tokens = 0;  // response tokens generated so far (scalar tokens/total; 0 before RL)
  double value = 0;   // NaN and ±inf kept as recorded
};

// Exact running sums of a scalar, kept as its points arrive (before any reduction).
struct SeriesStats {
  int64_t rl_count = 0;  // finite values at RL steps (step > 0)
  double rl_sum = 0;
};

// The memory of a run's data is bounded, however long the run: a scalar keeps at most
// kMaxSeriesPoints points — beyond that its older points are reduced to the smallest and the
// largest value (and the first non-finite one) per bucket of steps, so a spike survives, while
// the newest points stay whole — and a histogram at most kMaxHistogramSteps steps (older steps
// thinned). The run store keeps everything; means over RL steps stay exact (SeriesStats).
struct RunData {
  static constexpr size_t kMaxSeriesPoints = 2048;
  static constexpr size_t kMaxHistogramSteps = 128;

  int64_t id = -1;
  RunStore::RunRow row;  // status, config, endpoints, … as last read from the store
  // Scalar name → points sorted by step (at most one point per step; see kMaxSeriesPoints).
  std::map<std::string, std::vector<SeriesPoint>> scalars;
  std::map<std::string, SeriesStats> stats;  // per scalar, exact
  int64_t reduced_points = 0;                // scalar points dropped by the reduction
  // Histogram name → step → histogram (see kMaxHistogramSteps).
  std::map<std::string, std::map<int64_t, Histogram>> histograms;
  std::vector<RunStore::EventRow> events;                 // in recorded order
  std::vector<std::pair<int64_t, SampleRecord>> samples;  // oldest first, at most kMaxSamples
  std::vector<std::pair<int64_t, Json>> precision;        // step → per-layer map, by step
  // The latest layer audit (contract/step_record.hpp): its rows, layer by layer, and the step
  // it was taken at; no rows when the run has not been audited.
  std::vector<AuditRow> audit;
  int64_t audit_step = 0;
  int64_t last_step = 0;  // highest step seen (0: none)
  int64_t version = 0;    // bumped by every merge that adds data

  static constexpr size_t kMaxSamples = 400;

  // The series of key, or an empty vector.
  const std::vector<SeriesPoint>& series(const std::string& key) const;
  // The exact mean of key's finite values at RL steps (step > 0), or nullopt.
  std::optional<double> rlMean(const std::string& key) const;
  // Histogram names with a given prefix (e.g. "fp8_scale_log2/"), sorted.
  std::vector<std::string> histogramNames(const std::string& prefix = "") const;
  // What the data holds in memory, approximately (bytes): the bound of a live run.
  size_t approxBytes() const;
  // The latest precision map (array of layers, each {"q": "fp8", …}), or null.
  Json currentPrecision() const;
  // Experts of each layer (0: a dense MLP), from the latest precision map; empty when there is
  // none. What the views ask instead of the model family's name.
  std::vector<int64_t> expertsPerLayer() const;
  // Steps at which the precision changed after the first map (markers on every chart).
  std::vector<std::pair<int64_t, std::string>> precisionChanges() const;
  // Number of layers (from the precision map or the config), 0 when unknown.
  int64_t layers() const;
  // The value in force of a live setting (contract/live_settings.hpp): the latest "set" event's,
  // else the configuration's; nullopt when neither has it. liveSetting: a number setting's.
  std::optional<LiveValue> liveValue(const std::string& key) const;
  std::optional<double> liveSetting(const std::string& key) const;
};

// Appends everything in delta to dst (points with a step dst already has replace nothing:
// they are skipped, so telemetry and store polling may overlap); a later audit replaces dst's;
// bumps dst.version when anything was added. Keeps dst within its bounds (RunData).
void mergeInto(RunData& dst, RunData&& delta);

// Reduces points (sorted by step) to at most max_points / 2 when it holds more than max_points:
// the newest max_points / 4 stay whole; the older ones keep, per bucket of steps (a power of
// two wide, as narrow as fits), their smallest and largest finite value and their first
// non-finite one, in step order. Returns how many points were dropped.
size_t reduceSeries(std::vector<SeriesPoint>& points, size_t max_points);

// Telemetry payloads (docs/protocol.md) → additions to a delta. Malformed payloads throw
// fp8rl::Error naming what is wrong (the caller counts and drops them).
void addStepPayload(RunData& delta, const Json& payload);
void addHistogramPayload(RunData& delta, const Json& payload);
// Event times arrive as unix seconds; run_started_at (unix seconds, 0 when unknown) turns them
// into seconds since the run started.
void addEventPayload(RunData& delta, const Json& payload, double run_started_at);

// The recorded history of a run from the store: everything (after_step =
// std::numeric_limits<int64_t>::min()) or what was recorded for steps after after_step (scalars,
// histograms, samples, the latest audit among them; events and precision maps are always read
// whole: mergeInto keeps only the new ones). Throws fp8rl::Error when the store cannot be read.
RunData loadRun(RunStore& store, int64_t run,
                int64_t after_step = std::numeric_limits<int64_t>::min());

}  // namespace fp8rl::ui
