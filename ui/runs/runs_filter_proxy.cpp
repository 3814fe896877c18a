#include "ui/runs/runs_filter_proxy.hpp"

#include "ui/runs/runs_table_model.hpp"

namespace fp8rl::ui {

RunsFilterProxy::RunsFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(Qt::UserRole);
  setSortCaseSensitivity(Qt::CaseInsensitive);
  setDynamicSortFilter(true);
}

QString RunsFilterProxy::setFilterText(const QString& text) {
  QString error;
  RunFilter next;
  try {
    next = RunFilter::parse(text.toStdString());
  } catch (const RunFilterError& e) {
    error = QString::fromStdString(e.what());
  }
  next.setStatus(filter_.status());
  filter_ = std::move(next);
  invalidateFilter();
  return error;
}

void RunsFilterProxy::setStatus(const QString& status) {
  filter_.setStatus(status.toStdString());
  invalidateFilter();
}

bool RunsFilterProxy::filterAcceptsRow(int source_row, const QModelIndex&) const {
  const auto* model = static_cast<const RunsTableModel*>(sourceModel());
  const RunStore::RunRow* run = model->runAt(source_row);
  if (!run) return false;
  return filter_.matches({.id = run->id,
                          .name = run->name,
                          .status = run->status,
                          .preset = run->preset,
                          .precision = run->precision_summary,
                          .tags = run->tags,
                          .notes = run->notes,
                          .step = run->last_step,
                          .config = model->configText(source_row)});
}

}  // namespace fp8rl::ui
