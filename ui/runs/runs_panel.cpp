#include "ui/runs/runs_panel.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QScrollBar>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <utility>

#include "contract/precision.hpp"
#include "contract/run_recorder.hpp"
#include "ui/runs/run_filter.hpp"
#include "ui/runs/runs_filter_proxy.hpp"
#include "ui/runs/sweeps_panel.hpp"

namespace fp8rl::ui {
namespace {

// What a mixed map of a mid-sized model reads as in the precision column (the contract's
// summary), for the column's width.
QString mixedPrecisionSample() {
  PrecisionMap map(28, Precision::fp8);
  for (int64_t l = 0; l < 12; ++l) map.set(l, Module::down, Precision::bf16);
  return QString::fromStdString(map.summary());
}

}  // namespace

RunsPanel::RunsPanel(QWidget* parent)
    : QWidget(parent),
      model_(new RunsTableModel(this)),
      proxy_(new RunsFilterProxy(this)),
      view_(new QTableView(this)),
      filter_(new QLineEdit(this)),
      status_(new QComboBox(this)),
      count_(new QLabel(this)),
      filter_error_(new QLabel(this)),
      sweeps_(new SweepsPanel(this)),
      tabs_(new QTabWidget(this)) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* runs = new QWidget(this);
  auto* layout = new QVBoxLayout(runs);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(buildFilterBar());
  layout->addWidget(filter_error_);
  proxy_->setSourceModel(model_);
  setUpView();
  layout->addWidget(view_, 1);
  tabs_->setDocumentMode(true);
  tabs_->addTab(runs, tr("Runs"));
  tabs_->addTab(sweeps_, tr("Sweeps"));
  outer->addWidget(tabs_);

  connect(filter_, &QLineEdit::textChanged, this, [this](const QString& text) {
    const QString error = proxy_->setFilterText(text);
    filter_error_->setText(error.isEmpty() ? QString() : tr("Not filtering: %1").arg(error));
    filter_error_->setVisible(!error.isEmpty());
  });
  connect(status_, &QComboBox::currentIndexChanged, this,
          [this](int i) { proxy_->setStatus(status_->itemData(i).toString()); });

  for (QAbstractItemModel* m :
       {static_cast<QAbstractItemModel*>(proxy_), static_cast<QAbstractItemModel*>(model_)}) {
    connect(m, &QAbstractItemModel::rowsInserted, this, &RunsPanel::updateCount);
    connect(m, &QAbstractItemModel::rowsRemoved, this, &RunsPanel::updateCount);
  }
  connect(proxy_, &QAbstractItemModel::modelReset, this, &RunsPanel::updateCount);
  connect(proxy_, &QAbstractItemModel::layoutChanged, this, &RunsPanel::updateCount);
  updateCount();

  connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            emit currentRunChanged(
                current.isValid() ? current.data(RunsTableModel::kRunIdRole).toLongLong() : -1);
          });
  connect(view_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          [this] { emit selectionChanged(); });
  connect(model_, &RunsTableModel::tagsNotesEdited, this, &RunsPanel::tagsNotesEdited);
}

QWidget* RunsPanel::buildFilterBar() {
  auto* bar = new QWidget(this);
  auto* row = new QHBoxLayout(bar);
  row->setContentsMargins(0, 0, 0, 0);
  filter_->setPlaceholderText(tr("Filter: text, key=value, lr<0.001 …"));
  filter_->setClearButtonEnabled(true);
  QStringList run_keys;
  for (const std::string& k : RunFilter::runKeys()) run_keys << QString::fromStdString(k) + "=";
  filter_->setToolTip(
      tr("Space-separated terms, all must match; double quotes group words.\n"
         "text: found in name, preset, precision, tags, notes or status (any case)\n"
         "key=value or key:value: the run's configuration, e.g. precision.default=bf16, "
         "task.name=reverse, lr=0.001 (a key may omit its section)\n"
         "key<value, key<=value, key>value, key>=value: numeric comparisons, e.g. "
         "grpo.steps>100\n"
         "Also: %1")
          .arg(run_keys.join(", ")));
  row->addWidget(filter_, 1);

  status_->addItem(tr("All"), QString());
  namespace s = run_status;
  for (const char* status :
       {s::kRunning, s::kPaused, s::kFinished, s::kFailed, s::kCrashed, s::kStopped})
    status_->addItem(runStatusIcon(status), status, QString(status));
  status_->setToolTip(tr("Show runs with this status only"));
  row->addWidget(status_);

  count_->setMinimumWidth(count_->fontMetrics().horizontalAdvance("00000 of 00000 runs"));
  count_->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
  row->addWidget(count_);

  filter_error_->setWordWrap(true);
  filter_error_->setStyleSheet("color: #c62828;");
  filter_error_->hide();
  return bar;
}

void RunsPanel::setUpView() {
  view_->setModel(proxy_);
  view_->setSortingEnabled(true);
  view_->sortByColumn(RunsTableModel::kId, Qt::DescendingOrder);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  view_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
  view_->setAlternatingRowColors(true);
  view_->setWordWrap(false);
  view_->setTextElideMode(Qt::ElideRight);
  view_->verticalHeader()->hide();
  view_->verticalHeader()->setDefaultSectionSize(view_->fontMetrics().height() + 8);
  auto* header = view_->horizontalHeader();
  header->setHighlightSections(false);
  header->setStretchLastSection(false);
  // Fixed widths from the font, not ResizeToContents: that mode measures hundreds of rows on
  // every refresh (tens of milliseconds with 1,000 runs), which the event loop cannot afford.
  const QFontMetrics fm = view_->fontMetrics();
  const std::pair<int, QString> widths[] = {
      {RunsTableModel::kId, "00000"},          {RunsTableModel::kStatus, "● finished  "},
      {RunsTableModel::kPreset, "preset  "},   {RunsTableModel::kPrecision, mixedPrecisionSample()},
      {RunsTableModel::kStep, "000000"},       {RunsTableModel::kAge, "59 min "},
      {RunsTableModel::kTags, "baseline, fp8"}};
  for (const auto& [c, sample] : widths) {
    header->setSectionResizeMode(c, QHeaderView::Interactive);
    header->resizeSection(c, fm.horizontalAdvance(sample) + 16);
  }
  // The precision summary of a mixed map is long: its column starts narrower (elided, the
  // tooltip has it whole) so that the panel shows the step without taking a third of the window.
  header->resizeSection(RunsTableModel::kPrecision,
                        fm.horizontalAdvance(QStringLiteral("fp8 (3 of 14 lin")) + 16);
  header->setSectionResizeMode(RunsTableModel::kName, QHeaderView::Stretch);
  header->setSectionResizeMode(RunsTableModel::kNotes, QHeaderView::Interactive);
  header->resizeSection(RunsTableModel::kNotes, 180);
  // Shown as ID, Name, Status, Step, Precision, Preset, Age, …: what a glance needs first.
  header->moveSection(header->visualIndex(RunsTableModel::kStep),
                      header->visualIndex(RunsTableModel::kStatus) + 1);
  header->moveSection(header->visualIndex(RunsTableModel::kPrecision),
                      header->visualIndex(RunsTableModel::kStep) + 1);
  name_width_ = fm.horizontalAdvance("demo-bf16-seed-2") + 16;
}

QSize RunsPanel::sizeHint() const {
  // Wide enough for the id, name, status, step and (elided) precision columns.
  int width = 2 * view_->frameWidth() + view_->verticalScrollBar()->sizeHint().width();
  for (int c : {RunsTableModel::kId, RunsTableModel::kName, RunsTableModel::kStatus,
                RunsTableModel::kStep, RunsTableModel::kPrecision})
    width += c == RunsTableModel::kName ? name_width_ : view_->horizontalHeader()->sectionSize(c);
  return {std::max(width, QWidget::sizeHint().width()), QWidget::sizeHint().height()};
}

void RunsPanel::updateCount() {
  count_->setText(tr("%1 of %2 runs").arg(proxy_->rowCount()).arg(model_->rowCount()));
}

void RunsPanel::setRuns(const std::vector<RunStore::RunRow>& rows, double now) {
  const bool was_empty = model_->rowCount() == 0;
  model_->setRuns(rows, now);
  if (was_empty && model_->rowCount() > 0) {
    // Interactive columns get a first width from their contents.
    view_->resizeColumnToContents(RunsTableModel::kTags);
    auto* header = view_->horizontalHeader();
    header->resizeSection(RunsTableModel::kTags,
                          std::clamp(header->sectionSize(RunsTableModel::kTags), 80, 240));
  }
}

std::vector<int64_t> RunsPanel::selectedRuns() const {
  QModelIndexList rows = view_->selectionModel()->selectedRows();
  std::sort(rows.begin(), rows.end(),
            [](const QModelIndex& a, const QModelIndex& b) { return a.row() < b.row(); });
  std::vector<int64_t> ids;
  ids.reserve(static_cast<size_t>(rows.size()));
  for (const QModelIndex& i : rows) ids.push_back(i.data(RunsTableModel::kRunIdRole).toLongLong());
  return ids;
}

int64_t RunsPanel::currentRun() const {
  const QModelIndex current = view_->selectionModel()->currentIndex();
  return current.isValid() ? current.data(RunsTableModel::kRunIdRole).toLongLong() : -1;
}

void RunsPanel::selectRun(int64_t id) {
  selectRuns({id});
}

void RunsPanel::selectRuns(const std::vector<int64_t>& ids) {
  QItemSelection selection;
  QModelIndex first;
  for (int64_t id : ids) {
    const int row = model_->rowOf(id);
    if (row < 0) continue;
    const QModelIndex i = proxy_->mapFromSource(model_->index(row, 0));
    if (!i.isValid()) continue;  // filtered out
    if (!first.isValid()) first = i;
    selection.select(i, i);
  }
  auto* sm = view_->selectionModel();
  if (!first.isValid()) {
    sm->clearSelection();
    return;
  }
  sm->setCurrentIndex(first, QItemSelectionModel::NoUpdate);
  sm->select(selection, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  view_->scrollTo(first);
}

int RunsPanel::visibleCount() const {
  return proxy_->rowCount();
}

QString RunsPanel::filterError() const {
  return filter_error_->text();
}

}  // namespace fp8rl::ui
