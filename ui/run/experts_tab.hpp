// The Experts tab of a mixture-of-experts run (Qwen3-MoE): how its routers route, live.
//  - Expert load: a layers × experts heatmap of the share of each layer's (token, choice) pairs
//    that went to each expert in the latest step's training forwards (expert_load/L{l}), a
//    balanced layer being 1/E everywhere;
//  - routing mismatch over steps: the share of tokens whose experts differ between the
//    generator and the trainer's routers, per layer and in at least one layer (with routing
//    replay the trainer still routes by the generator's choices; this says how often its own
//    routers would have chosen otherwise);
//  - router entropy over steps (nats; log E is uniform).
// A dense run shows a line saying it has no experts.
#pragma once

#include <vector>

#include "ui/run/run_tab.hpp"

class QLabel;

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

  QLabel* caption() const { return caption_; }
  HeatmapView* loadHeatmap() const { return load_; }
  ChartView* mismatchChart() const { return mismatch_; }
  ChartView* entropyChart() const { return entropy_; }
  std::vector<ChartView*> charts() const { return {mismatch_, entropy_}; }

 private:
  void clearRun() override;
  void showNew() override;
  void rebuildCurves();
  void updateLoad();

  std::vector<int> layers_;  // the layers with experts, as the curves show them
  QLabel* caption_;
  HeatmapView* load_;
  ChartView *mismatch_, *entropy_;
};

}  // namespace fp8rl::ui
