// The Throughput tab of a run: rollout and training tokens/s, the step time stacked by phase
// (generation, logprob, policy training, recalibration; one stacked bar per step, x = step)
// and the total step time.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ui/run/run_tab.hpp"

class QCustomPlot;
class QCPBars;
class QCPAbstractItem;

namespace fp8rl::ui {

class ChartView;

class ThroughputTab : public RunTab {
  Q_OBJECT
 public:
  static constexpr int kPhases = 4;  // generation, logprob, training, recalibration

  explicit ThroughputTab(QWidget* parent = nullptr);

  ChartView* tokensChart() const { return tokens_; }  // curves: 0 rollout, 1 training
  ChartView* stepTimeChart() const { return step_time_; }
  // The stacked phase times (plotted against the step whatever the charts' x axis).
  QCustomPlot* phasePlot() const { return phases_; }
  QCPBars* phaseBars(int phase) const { return bars_.at(static_cast<size_t>(phase)); }
  std::vector<ChartView*> charts() const { return {tokens_, step_time_}; }

 private:
  void clearRun() override;
  void showNew() override;
  void updateBars();
  void updatePhaseMarkers();

  ChartView* tokens_;
  ChartView* step_time_;
  QCustomPlot* phases_;
  std::array<QCPBars*, kPhases> bars_{};
  std::array<size_t, kPhases> added_{};  // points of each phase series already in the bars
  std::vector<QCPAbstractItem*> marker_items_;
};

}  // namespace fp8rl::ui
