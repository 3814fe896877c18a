// The view of one run: tabs by concern (Overview, Throughput, Importance weights, FP8 scales,
// Precision, Samples & events, Audit) and, beside them, a badge with the latest layer audit
// (red with the number of mismatches, a quiet "audit OK" when there are none, hidden when the
// run has no audit; a click opens the Audit tab). It reads a RunData owned by the studio session
// and updates incrementally when told the run changed; it sends nothing itself: requests (a
// precision edit) leave as signals.
#pragma once

#include <QStringList>
#include <cstdint>
#include <vector>

#include "contract/live_edit.hpp"
#include "ui/run/run_tab.hpp"

class QLabel;
class QPushButton;
class QTabWidget;

namespace fp8rl::ui {

struct ChartMarker;
class ChartView;
class OverviewTab;
class ThroughputTab;
class ImportanceTab;
class ScalesTab;
class PrecisionTab;
class SamplesTab;
class AuditTab;
class ExpertsTab;

class RunView : public RunTab {
  Q_OBJECT
 public:
  explicit RunView(QWidget* parent = nullptr);

  QTabWidget* tabs() const { return tabs_; }
  OverviewTab* overview() const { return overview_; }
  ThroughputTab* throughput() const { return throughput_; }
  ImportanceTab* importance() const { return importance_; }
  ScalesTab* scales() const { return scales_; }
  PrecisionTab* precision() const { return precision_; }
  SamplesTab* samples() const { return samples_; }
  AuditTab* audit() const { return audit_; }
  ExpertsTab* experts() const { return experts_; }
  QPushButton* auditBadge() const { return badge_; }
  // Brings the tab on screen, the Precision tab (the map live edits start from) and the badge up
  // to date; the others catch up when shown. What
  // a live run's updates call: every tab at every step would cost the event loop for nothing.
  // (refresh() brings every tab up to date.)
  void refreshShown();

 signals:
  // The user applied a live edit (precision overrides and settings) to run `run`.
  void liveEditRequested(qint64 run, const LiveEdit& edit);

 private:
  void clearRun() override;
  void showNew() override;
  void poll() override;
  void updateBadge();
  void showExpertsTab();  // the Experts tab for runs with experts

  QTabWidget* tabs_;
  QPushButton* badge_;
  QLabel* empty_ = nullptr;  // shown instead of the tabs when there is no run
  int64_t badge_version_ = -1;  // the run's version the badge shows
  int badge_state_ = -1;        // the look it has: 0 all agree, 1 mismatches (-1: none yet)
  OverviewTab* overview_;
  ThroughputTab* throughput_;
  ImportanceTab* importance_;
  ScalesTab* scales_;
  PrecisionTab* precision_;
  SamplesTab* samples_;
  ExpertsTab* experts_;
  AuditTab* audit_;
  QWidget* experts_page_ = nullptr;  // the Experts tab's page (hidden for dense runs)
};

// Helpers the tabs share (defined in run_view.cpp).
// The run's precision changes (RunData::precisionChanges) as chart markers; none for nullptr.
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
