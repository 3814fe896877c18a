// The Throughput tab of a run: rollout and training tokens/s, the step time stacked by phase
// (generation, logprob, policy training, recalibration; one stacked bar per step, x = step)
// and the total step time. A data-parallel run (scalar dist/ranks) also gets each rank's rollout
// and training tokens/s (one curve per rank, "rank 0", "rank 1", …) and, on the phase plot, the
// seconds rank 0 spent in collectives (a line over the bars: that time lies within the phases).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ui/run/run_tab.hpp"

class QCustomPlot;
class QCPBars;
class QCPGraph;
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
  // Each rank's tokens/s (curve r: rank r), shown only for a run of several ranks.
  ChartView* rankRolloutChart() const { return rank_rollout_; }
  ChartView* rankTrainingChart() const { return rank_training_; }
  // The row holding the two per-rank charts (hidden for a one-rank run).
  QWidget* perRankRow() const { return per_rank_; }
  // The number of ranks the per-rank charts show (0: hidden).
  int ranksShown() const { return ranks_shown_; }
  // The stacked phase times (plotted against the step whatever the charts' x axis).
  QCustomPlot* phasePlot() const { return phases_; }
  QCPBars* phaseBars(int phase) const { return bars_.at(static_cast<size_t>(phase)); }
  // time/communication over the bars (not stacked); empty and out of the legend without it.
  QCPGraph* communicationGraph() const { return communication_; }
  std::vector<ChartView*> charts() const {
    return {tokens_, step_time_, rank_rollout_, rank_training_};
  }

 private:
  void clearRun() override;
  void showNew() override;
  void updateRanks();
  void updateBars();
  void updatePhaseMarkers();

  ChartView* tokens_;
  ChartView* step_time_;
  QWidget* per_rank_;
  ChartView* rank_rollout_;
  ChartView* rank_training_;
  int ranks_shown_ = 0;
  QCustomPlot* phases_;
  std::array<QCPBars*, kPhases> bars_{};
  std::array<size_t, kPhases> added_{};  // points of each phase series already in the bars
  QCPGraph* communication_ = nullptr;
  size_t communication_added_ = 0;
  std::vector<QCPAbstractItem*> marker_items_;
};

}  // namespace fp8rl::ui
