// The Importance weights tab of a run: the importance_weight histogram of one step (log-x, the
// truncation bounds grpo.is_min/is_max as vertical lines; a slider picks the step, by default
// the latest), the distribution over steps as a heatmap (columns steps, rows the histogram's
// bins, colour the fraction of tokens, log scale), and charts of the fraction outside the
// bounds, the effective sample size and the mean weight.
#pragma once

#include <QWidget>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

class QCheckBox;
class QLabel;
class QSlider;

namespace fp8rl::ui {

struct RunData;
class ChartView;
class HeatmapView;
class HistogramView;

class ImportanceTab : public QWidget {
  Q_OBJECT
 public:
  static constexpr const char* kHistogram = "importance_weight";

  explicit ImportanceTab(QWidget* parent = nullptr);

  void setRun(const RunData* run);
  void refresh();

  // Shows the recorded histogram nearest to step and stops following the latest.
  void showStep(int64_t step);
  // Follow the latest step as new histograms arrive (the default).
  void setFollowLatest(bool on);
  bool followLatest() const { return follow_; }
  // The step of the histogram shown (nullopt: none).
  std::optional<int64_t> shownStep() const { return shown_; }

  HistogramView* histogram() const { return hist_; }
  HeatmapView* heatmap() const { return heatmap_; }
  QSlider* stepSlider() const { return slider_; }
  ChartView* outOfBoundsChart() const { return oob_; }
  ChartView* essChart() const { return ess_; }
  ChartView* meanWeightChart() const { return mean_w_; }
  std::vector<ChartView*> charts() const { return {oob_, ess_, mean_w_}; }

 private:
  void updateSteps();
  void showIndex(int index);
  void updateHeatmap();
  void setBounds();

  const RunData* run_ = nullptr;
  int64_t version_ = -1;
  size_t markers_ = 0;
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
  ChartView *oob_, *ess_, *mean_w_;
};

}  // namespace fp8rl::ui
