// The compare view: two or more runs side by side — overlaid curves of a chosen metric
// (one colour per run), the summary table (final/best validation accuracy, rollout and
// training tokens/s, step time, speedup vs a chosen base run, median token_mult_prob_error),
// the config diff (only differences) and one histogram overlaid across the runs at a chosen
// step.
#pragma once

#include <QWidget>
#include <vector>

class QComboBox;
class QTableWidget;
class QSpinBox;

namespace fp8rl::ui {

struct RunData;
class ChartView;
class HistogramView;

class CompareView : public QWidget {
  Q_OBJECT
 public:
  explicit CompareView(QWidget* parent = nullptr);

  // The runs to compare (pointers stay valid until the next setRuns); the first is the base.
  void setRuns(const std::vector<const RunData*>& runs);
  // Their data changed: update curves and tables.
  void refresh();
  void setBaseRun(int index);
  // The metric overlaid (a scalar name such as "accuracy/validation").
  void setMetric(const QString& key);
  // The histogram overlaid and its step (the nearest recorded step of each run is used).
  void setHistogram(const QString& name, int step);

  QTableWidget* summaryTable() const { return summary_; }
  QTableWidget* diffTable() const { return diff_; }
  ChartView* chart() const { return chart_; }
  HistogramView* histogram() const { return histogram_; }
  QComboBox* metricBox() const { return metric_; }
  QComboBox* baseBox() const { return base_box_; }
  QComboBox* histogramBox() const { return hist_name_; }
  QSpinBox* histogramStep() const { return hist_step_; }

 private:
  void updateChoices();  // metric and histogram combos: the union over the runs
  void rebuildCurves();  // one curve per run for the metric
  void updateCurves();   // appends what the runs recorded since
  void updateSummary();
  void updateDiff();
  void updateHistogram();

  std::vector<const RunData*> runs_;
  int base_ = 0;
  QComboBox* metric_;
  QComboBox* base_box_;
  QComboBox* hist_name_;
  QSpinBox* hist_step_;
  ChartView* chart_;
  HistogramView* histogram_;
  QTableWidget* summary_;
  QTableWidget* diff_;
  QString metric_key_;          // the metric the curves show
  bool hist_at_latest_ = true;  // the step spin follows the latest step
};

}  // namespace fp8rl::ui
