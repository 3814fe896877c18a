// The runs panel: every run in the database (live and finished) as a sortable table — name,
// status, preset, precision summary, step, age, tags, notes — with a filter box (text, or
// `key=value` matched against the run's configuration, e.g. precision.default=bf16) and a
// status filter; multi-select for comparison. Tags and notes are edited in place (double-click)
// and leave as a signal; the panel itself never touches the store.
#pragma once

#include <QAbstractTableModel>
#include <QHash>
#include <QWidget>
#include <vector>

#include "store/run_store.hpp"

class QComboBox;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;
class QLabel;

namespace fp8rl::ui {

class RunsTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kId, kName, kStatus, kPreset, kPrecision, kStep, kAge, kTags, kNotes, kColumns };
  // Role giving the run's flattened configuration ("key=value" lines) for filtering.
  static constexpr int kConfigRole = Qt::UserRole + 1;
  static constexpr int kRunIdRole = Qt::UserRole + 2;

  explicit RunsTableModel(QObject* parent = nullptr);
  // Replaces the rows; rows of runs already shown are updated in place (selection kept),
  // new runs are inserted, vanished ones removed. now: unix seconds, for the age column.
  void setRuns(std::vector<RunStore::RunRow> rows, double now);
  const RunStore::RunRow* runAt(int row) const;
  int rowOf(int64_t id) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role) override;

 signals:
  void tagsNotesEdited(qint64 run, const QString& tags, const QString& notes);

 private:
  std::vector<RunStore::RunRow> rows_;
  std::vector<QString> configs_;  // flattened config per row
  double now_ = 0;
  QHash<int64_t, int> index_;  // run id → row
  // Tags and notes edited here, shown until the store's rows have them (or a few refreshes).
  struct PendingEdit {
    std::string tags, notes;
    int refreshes_left = 0;
  };
  QHash<int64_t, PendingEdit> pending_;
};

class RunsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit RunsPanel(QWidget* parent = nullptr);

  void setRuns(std::vector<RunStore::RunRow> rows, double now);
  // Selected run ids, in table order.
  std::vector<int64_t> selectedRuns() const;
  // The current run (the one a run view shows), -1 when none.
  int64_t currentRun() const;
  void selectRun(int64_t id);
  void selectRuns(const std::vector<int64_t>& ids);
  // How many runs pass the filters.
  int visibleCount() const;

  QLineEdit* filterEdit() const { return filter_; }
  QComboBox* statusFilter() const { return status_; }
  QTableView* view() const { return view_; }
  RunsTableModel* model() const { return model_; }

 signals:
  void currentRunChanged(qint64 run);
  void selectionChanged();
  void tagsNotesEdited(qint64 run, const QString& tags, const QString& notes);

 private:
  RunsTableModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* view_;
  QLineEdit* filter_;
  QComboBox* status_;
  QLabel* count_;
};

}  // namespace fp8rl::ui
