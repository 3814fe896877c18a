// The view of one run: tabs by concern (Overview, Throughput, Importance weights, FP8 scales,
// Precision, Samples & events). It reads a RunData owned by the studio session and updates
// incrementally when told the run changed; it sends nothing itself: requests (a precision
// edit) leave as signals.
#pragma once

#include <QStringList>
#include <QWidget>
#include <cstdint>
#include <vector>

#include "ui/data/live_edit.hpp"

class QLabel;
class QTabWidget;

namespace fp8rl::ui {

struct RunData;
struct ChartMarker;
class ChartView;
class OverviewTab;
class ThroughputTab;
class ImportanceTab;
class ScalesTab;
class PrecisionTab;
class SamplesTab;

class RunView : public QWidget {
  Q_OBJECT
 public:
  explicit RunView(QWidget* parent = nullptr);

  // Shows this run (nullptr: nothing). The pointer must stay valid until the next setRun.
  void setRun(const RunData* run);
  const RunData* run() const { return run_; }
  // The run's data grew (new version): update charts and tables with what is new.
  void refresh();

  QTabWidget* tabs() const { return tabs_; }
  OverviewTab* overview() const { return overview_; }
  ThroughputTab* throughput() const { return throughput_; }
  ImportanceTab* importance() const { return importance_; }
  ScalesTab* scales() const { return scales_; }
  PrecisionTab* precision() const { return precision_; }
  SamplesTab* samples() const { return samples_; }

 signals:
  // The user applied a live edit (precision overrides and settings) to run `run`.
  void liveEditRequested(qint64 run, const LiveEdit& edit);

 private:
  const RunData* run_ = nullptr;
  QTabWidget* tabs_;
  QLabel* empty_ = nullptr;  // shown instead of the tabs when there is no run
  OverviewTab* overview_;
  ThroughputTab* throughput_;
  ImportanceTab* importance_;
  ScalesTab* scales_;
  PrecisionTab* precision_;
  SamplesTab* samples_;
};

// Helpers the tabs share (defined in run_view.cpp).
// The run's precision changes (RunData::precision_changes) as chart markers; none for nullptr.
std::vector<ChartMarker> precisionMarkers(const RunData* run);
// Puts the run's precision markers on the charts when their number differs from *shown (the
// number the charts show; SIZE_MAX forces it) and updates *shown; true when it set them.
bool syncPrecisionMarkers(const RunData* run, const std::vector<ChartView*>& charts, size_t* shown);
// Makes the x axis, smoothing, log-y and outlier settings chosen on any of the charts (their
// optionsChanged signal) apply to all of them.
void linkChartOptions(const std::vector<ChartView*>& charts);
// Empties every curve of the charts and removes their markers (before showing another run).
void clearCharts(const std::vector<ChartView*>& charts);

}  // namespace fp8rl::ui
