// Expert load of a mixture-of-experts run over its steps, from the expert_load/L{layer}
// histograms the run records every RL step (bin e counts the (token, choice) pairs its router
// sent to expert e in the step's training forwards; contract/metrics.hpp), and the experts that
// starve: whose share stays far under the balanced 1/E. Plain data, no Qt.
#pragma once

#include <cstdint>
#include <vector>

#include "ui/data/run_data.hpp"

namespace fp8rl::ui {

// One layer's load over the steps RunData holds: shares[s][e] is expert e's share of the
// layer's (token, choice) pairs at steps[s] (ascending); a step that routed nothing has NaN
// shares. experts: the widest histogram's count.
struct ExpertLoadSeries {
  int layer = -1;
  int experts = 0;
  std::vector<int64_t> steps;
  std::vector<std::vector<double>> shares;
};

// The layers with expert-load histograms, ascending.
std::vector<int> expertLayers(const RunData& run);
// The layer's load over steps (empty when it has none).
ExpertLoadSeries expertLoadSeries(const RunData& run, int layer);

// An expert whose share has stayed under the starving threshold at every recorded step from
// since_step to the latest (at least kStarvingSteps of them).
struct StarvingExpert {
  int layer = 0;
  int expert = 0;
  int64_t since_step = 0;  // the first step of that stretch
  int steps = 0;           // recorded steps in it
  double max_share = 0;    // the most it got in them
  double threshold = 0;    // the share it stayed under
};

// Under a quarter of the balanced share (1/E) counts as starving…
inline constexpr double kStarvingFraction = 0.25;
// …for this many recorded steps in a row, up to the latest.
inline constexpr int kStarvingSteps = 5;

// The starving experts of the series, by expert.
std::vector<StarvingExpert> starvingExperts(const ExpertLoadSeries& load);
// Every layer's, by layer then expert.
std::vector<StarvingExpert> starvingExperts(const RunData& run);

}  // namespace fp8rl::ui
