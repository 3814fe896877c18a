// The Experts tab of a mixture-of-experts run (Qwen3-MoE): how its routers route, live.
//  - Expert load at a step: a layers × experts heatmap of the share of each layer's (token,
//    choice) pairs that went to each expert in that step's training forwards (expert_load/L{l}),
//    a balanced layer being 1/E everywhere. A slider picks the step (as the Samples tab's does:
//    the latest by default, following new steps unless moved off the latest);
//  - expert load over steps: one layer's experts × steps heatmap (the layer chosen beside the
//    slider), the step shown on the left marked; what people watch in MoE RL: an expert
//    starving, a router collapsing;
//  - starving experts: an expert whose share stayed under a quarter of 1/E for the last
//    kStarvingSteps recorded steps or more is named above the maps (its layer, since which
//    step) and outlined in the layers × experts map;
//  - routing mismatch over steps: the share of tokens whose experts differ between the
//    generator and the trainer's routers, per layer and in at least one layer (with routing
//    replay the trainer still routes by the generator's choices; this says how often its own
//    routers would have chosen otherwise);
//  - router entropy over steps (nats; log E is uniform).
// A dense run shows a line saying it has no experts.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ui/charts/chart_style.hpp"
#include "ui/data/expert_load.hpp"
#include "ui/run/run_tab.hpp"

class QComboBox;
class QLabel;
class QSlider;

namespace fp8rl::ui {

class ChartView;
class HeatmapView;

class ExpertsTab : public RunTab {
  Q_OBJECT
 public:
  explicit ExpertsTab(QWidget* parent = nullptr);

  // Whether the run shown has layers with experts (its expert-load histograms or its
  // configuration say so).
  bool runHasExperts() const;

  // Shows the load of the recorded step nearest to step; follows new steps again only when
  // that is the latest.
  void showStep(int64_t step);
  std::optional<int64_t> shownStep() const { return shown_; }
  // Shows this layer's load over steps (a layer with experts).
  void showLayer(int layer);
  int shownLayer() const { return layer_; }

  QLabel* caption() const { return caption_; }
  // The starving experts, in words ("" and hidden when none).
  QLabel* starvingLabel() const { return starving_label_; }
  const std::vector<StarvingExpert>& starving() const { return starving_; }
  QSlider* stepSlider() const { return slider_; }  // index into the steps with expert load
  QLabel* stepLabel() const { return step_label_; }
  QComboBox* layerChoice() const { return layer_choice_; }
  HeatmapView* loadHeatmap() const { return load_; }              // layers × experts, a step
  HeatmapView* loadOverStepsHeatmap() const { return history_; }  // experts × steps, a layer
  ChartView* mismatchChart() const { return mismatch_; }
  ChartView* entropyChart() const { return entropy_; }
  std::vector<ChartView*> charts() const { return {mismatch_, entropy_}; }

 private:
  void clearRun() override;
  void showNew() override;
  void rebuildCurves();
  void updateSteps();
  void showIndex(int index);
  void updateLoad();
  void updateHistory();
  void updateStarving();

  std::vector<int> layers_;     // the layers with experts, as the curves show them
  std::vector<int64_t> steps_;  // steps with expert load (any layer), ascending
  bool follow_ = true;
  std::optional<int64_t> shown_;  // the step the layers × experts map shows
  int layer_ = -1;                // the layer the map over steps shows
  bool layer_chosen_ = false;     // by the user: a starving layer no longer takes over
  std::vector<StarvingExpert> starving_;
  QLabel* caption_;
  QLabel* starving_label_;
  QSlider* slider_;
  QLabel* step_label_;
  QComboBox* layer_choice_;
  HeatmapView* load_;
  HeatmapView* history_;
  RuleLine shown_line_;  // on the map over steps: the step the other map shows
  ChartView *mismatch_, *entropy_;
};

}  // namespace fp8rl::ui
