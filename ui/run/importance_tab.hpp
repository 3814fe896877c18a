// The Importance weights tab of a run: the importance_log_weight histogram of one step (log w =
// p − g on a linear x axis, the truncation bounds log(is_min) and log(is_max) in force as
// vertical lines, the tokens beyond the histogram's range counted below it; a slider picks the
// step, by default the latest), the distribution over steps as a heatmap (columns steps, rows
// the histogram's bins, colour the fraction of tokens, log scale), and charts of the fraction
// outside the bounds, the effective sample size and the mean weight.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ui/run/run_tab.hpp"

class QCheckBox;
class QLabel;
class QSlider;

namespace fp8rl::ui {

class ChartView;
class HeatmapView;
class HistogramView;

class ImportanceTab : public RunTab {
  Q_OBJECT
 public:
  explicit ImportanceTab(QWidget* parent = nullptr);

  // Shows the recorded histogram nearest to step and stops following the latest.
  void showStep(int64_t step);
  // Follow the latest step as new histograms arrive (the default).
  void setFollowLatest(bool on);
  bool followLatest() const { return follow_; }
  // The step of the histogram shown (nullopt: none).
  std::optional<int64_t> shownStep() const { return shown_; }

  QSlider* stepSlider() const { return slider_; }
  HistogramView* histogram() const { return hist_; }
  // The shown step's token count and its tokens below and above the histogram's range.
  QLabel* rangeCounts() const { return range_counts_; }
  HeatmapView* heatmap() const { return heatmap_; }
  // Out-of-bounds fraction, effective sample size, mean weight: one curve each.
  std::vector<ChartView*> charts() const { return {oob_, ess_, mean_w_}; }

 private:
  void clearRun() override;
  void showNew() override;
  void updateSteps();
  void showIndex(int index);
  void updateHeatmap();
  void setBounds();

  bool follow_ = true;
  std::optional<int64_t> shown_;
  std::vector<int64_t> steps_;                // steps with a histogram, ascending
  std::pair<double, double> bounds_{-1, -1};  // is_min, is_max drawn (0: none)
  size_t heat_columns_ = 0;  // histograms in the heatmap (rebuilt when that changes)
  int64_t heat_last_ = 0;
  HistogramView* hist_;
  HeatmapView* heatmap_;
  QSlider* slider_;
  QCheckBox* follow_box_;
  QLabel* step_label_;
  QLabel* range_counts_;
  ChartView *oob_, *ess_, *mean_w_;
};

}  // namespace fp8rl::ui
