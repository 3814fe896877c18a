// The runs table as the panel shows it: filtered by a RunFilter (run_filter.hpp: the grammar)
// and sorted by Qt::UserRole. The source model must be a RunsTableModel.
#pragma once

#include <QSortFilterProxyModel>

#include "ui/runs/run_filter.hpp"

namespace fp8rl::ui {

class RunsFilterProxy : public QSortFilterProxyModel {
  Q_OBJECT
 public:
  explicit RunsFilterProxy(QObject* parent = nullptr);

  // Filters by text (RunFilter's grammar). Returns "" when the text is a filter, else why not;
  // a text that is none filters nothing until it is corrected.
  QString setFilterText(const QString& text);
  // Only runs with this status ("" for all).
  void setStatus(const QString& status);

 protected:
  bool filterAcceptsRow(int source_row, const QModelIndex& source_parent) const override;

 private:
  RunFilter filter_;
};

}  // namespace fp8rl::ui
