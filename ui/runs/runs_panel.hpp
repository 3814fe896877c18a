// The runs panel: every run in the database (live and finished) as a sortable table
// (RunsTableModel) with a filter box (RunFilter's grammar: text, key=value against the run's
// configuration, numeric comparisons; a text that is no filter says why under the box) and a
// status filter; multi-select for comparison. A second tab groups the runs of sweeps
// (SweepsPanel). Tags and notes are edited in place
// (double-click) and leave as a signal; the panel itself never touches the store.
// The columns fit the panel's width, never behind a horizontal scrollbar: each as wide as its
// longest text where there is room (names elided in the middle, where there is not), the least
// important hidden while the panel is too narrow for them (notes, tags, age, preset, id, in that
// order); a cell's tooltip has its run's every column in full.
#pragma once

#include <QWidget>
#include <vector>

#include "ui/runs/runs_table_model.hpp"

class QComboBox;
class QLabel;
class QLineEdit;
class QTabWidget;
class QTableView;

namespace fp8rl::ui {

class RunsFilterProxy;
class SweepsPanel;

class RunsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit RunsPanel(QWidget* parent = nullptr);

  void setRuns(const std::vector<RunStore::RunRow>& rows, double now);
  // Selected run ids, in table order.
  std::vector<int64_t> selectedRuns() const;
  // The current run (the one a run view shows), -1 when none.
  int64_t currentRun() const;
  void selectRun(int64_t id);
  void selectRuns(const std::vector<int64_t>& ids);
  // How many runs pass the filters.
  int visibleCount() const;
  // The message shown when the filter text is not a filter ("" when it is one).
  QString filterError() const;
  // Wide enough for the id, name, status, step, precision and preset columns.
  QSize sizeHint() const override;

  QLineEdit* filterEdit() const { return filter_; }
  QComboBox* statusFilter() const { return status_; }
  QTableView* view() const { return view_; }
  RunsTableModel* model() const { return model_; }
  // The Sweeps tab (runs grouped by sweep and axis value) and the tabs holding it.
  SweepsPanel* sweeps() const { return sweeps_; }
  QTabWidget* tabs() const { return tabs_; }

 signals:
  void currentRunChanged(qint64 run);
  void selectionChanged();
  void tagsNotesEdited(qint64 run, const QString& tags, const QString& notes);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  QWidget* buildFilterBar();
  void setUpView();
  void updateCount();
  // The width of a column's title, with padding.
  int titleWidth(int column) const;
  // Widens the columns' wants (longest texts) to the model rows first…last.
  void measureRows(int first, int last);
  // Measures every row again (after rows went away) and fits.
  void remeasure();
  // Sets the column widths (and hides what does not fit) for the viewport's width now.
  void fitColumnsToWidth();
  // Fits at the next turn of the event loop (coalescing a burst of changes).
  void scheduleFit();

  RunsTableModel* model_;
  RunsFilterProxy* proxy_;
  QTableView* view_;
  QLineEdit* filter_;
  QComboBox* status_;
  QLabel* count_;
  QLabel* filter_error_;
  SweepsPanel* sweeps_;
  QTabWidget* tabs_;
  std::vector<int> want_;  // per model column: the width of its longest text (with padding)
  bool fit_pending_ = false;
};

}  // namespace fp8rl::ui
