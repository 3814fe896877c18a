// The runs panel: every run in the database (live and finished) as a sortable table
// (RunsTableModel) with a filter box (RunFilter's grammar: text, key=value against the run's
// configuration, numeric comparisons; a text that is no filter says why under the box) and a
// status filter; multi-select for comparison. A second tab groups the runs of sweeps
// (SweepsPanel). Tags and notes are edited in place
// (double-click) and leave as a signal; the panel itself never touches the store.
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
  // Wide enough for the id, name, status, step and (elided) precision columns.
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

 private:
  QWidget* buildFilterBar();
  void setUpView();
  void updateCount();

  RunsTableModel* model_;
  RunsFilterProxy* proxy_;
  QTableView* view_;
  QLineEdit* filter_;
  QComboBox* status_;
  QLabel* count_;
  QLabel* filter_error_;
  SweepsPanel* sweeps_;
  QTabWidget* tabs_;
  int name_width_ = 0;  // the name column's share of sizeHint()
};

}  // namespace fp8rl::ui
