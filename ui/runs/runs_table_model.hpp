// The runs table: one row per run of the database — id, name, status, preset, precision
// summary, step, age, tags, notes — updated in place on each refresh so that the selection
// stays. Tags and notes are editable; an edit leaves as a signal (the model never touches the
// store) and is shown until the store's rows have it.
#pragma once

#include <QAbstractTableModel>
#include <QColor>
#include <QHash>
#include <QIcon>
#include <string>
#include <vector>

#include "store/run_store.hpp"

namespace fp8rl::ui {

// The colour and the dot icon of a run status ("running", "failed", …).
QColor runStatusColor(const QString& status);
QIcon runStatusIcon(const QString& status);

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
  void setRuns(const std::vector<RunStore::RunRow>& rows, double now);
  const RunStore::RunRow* runAt(int row) const;
  // The run's configuration as flattenConfig() writes it ("" for no such row).
  const std::string& configText(int row) const;
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
  // Steps of setRuns.
  void removeVanished(const QHash<int64_t, size_t>& incoming);
  std::vector<bool> updateShown(const std::vector<RunStore::RunRow>& rows);
  void signalAgeChanges(double before);
  void insertNew(const std::vector<RunStore::RunRow>& rows, const std::vector<bool>& is_new);
  // One dataChanged per contiguous range of rows, over columns first…last.
  void signalRows(std::vector<int> rows, int first, int last);
  QVariant displayData(const RunStore::RunRow& r, int column, int role) const;
  QString toolTip(const RunStore::RunRow& r, int column) const;

  std::vector<RunStore::RunRow> rows_;
  std::vector<std::string> configs_;  // flattened config per row
  double now_ = 0;
  QHash<int64_t, int> index_;  // run id → row
  // Tags and notes edited here, shown until the store's rows have them (or a few refreshes).
  struct PendingEdit {
    std::string tags, notes;
    int refreshes_left = 0;
  };
  QHash<int64_t, PendingEdit> pending_;
};

}  // namespace fp8rl::ui
