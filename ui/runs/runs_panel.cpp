#include "ui/runs/runs_panel.hpp"

#include <QApplication>
#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QScrollBar>
#include <QStyledItemDelegate>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <utility>

#include "contract/precision.hpp"
#include "contract/run_recorder.hpp"
#include "ui/runs/column_fit.hpp"
#include "ui/runs/run_filter.hpp"
#include "ui/runs/runs_filter_proxy.hpp"
#include "ui/runs/sweeps_panel.hpp"

namespace fp8rl::ui {
namespace {

using M = RunsTableModel;

// Padding of a cell's text (the style's margins on both sides, and a little air), and the room
// a column's title wants for the sort arrow.
constexpr int kPad = 12;
constexpr int kSortArrow = 12;
// No column wants more than this (a long name or note is elided, whole in the tooltip).
constexpr int kMaxWant[M::kColumns] = {0, 260, 0, 140, 400, 0, 0, 200, 240};
// Which columns stay while the panel narrows (higher: kept longer), and when a column whose
// text may be cut (name, status, tags, notes) grows to its whole text: the status's word comes
// before the age column, the whole name after it.
constexpr int kPriority[M::kColumns] = {80, 100, 95, 70, 85, 90, 60, 50, 40};
constexpr int kGrowPriority[M::kColumns] = {-1, 55, 65, -1, -1, -1, -1, 45, 35};

// What a mixed map of a mid-sized model reads as in the precision column (the contract's
// summary), for the panel's width before any run is shown.
QString mixedPrecisionSample() {
  PrecisionMap map(28, Precision::fp8);
  for (int64_t l = 0; l < 12; ++l) map.set(l, Module::down, Precision::bf16);
  return QString::fromStdString(map.summary());
}

// Draws a status cell as its dot alone where the column is too narrow for the word too (the
// tooltip and the colour say it).
class StatusDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;

 protected:
  void initStyleOption(QStyleOptionViewItem* option, const QModelIndex& index) const override {
    QStyledItemDelegate::initStyleOption(option, index);
    const QWidget* view = option->widget;
    const QStyle* style = view ? view->style() : QApplication::style();
    const QRect room = style->subElementRect(QStyle::SE_ItemViewItemText, option, view);
    // The style draws the text inside a margin on each side (QCommonStyle: the focus frame's
    // margin + 1) and elides it to that: a word only just wider than the room came out "fi…ed".
    const int margin = style->pixelMetric(QStyle::PM_FocusFrameHMargin, nullptr, view) + 1;
    if (option->fontMetrics.horizontalAdvance(option->text) > room.width() - 2 * margin)
      option->text.clear();
  }
};

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
  view_->sortByColumn(M::kId, Qt::DescendingOrder);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  view_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
  view_->setAlternatingRowColors(true);
  view_->setWordWrap(false);
  // A long name keeps its end (the seed, the variant) as well as its start.
  view_->setTextElideMode(Qt::ElideMiddle);
  view_->setItemDelegateForColumn(M::kStatus, new StatusDelegate(view_));
  view_->verticalHeader()->hide();
  view_->verticalHeader()->setDefaultSectionSize(view_->fontMetrics().height() + 8);
  auto* header = view_->horizontalHeader();
  header->setHighlightSections(false);
  header->setStretchLastSection(false);
  header->setMinimumSectionSize(24);
  header->setSectionResizeMode(QHeaderView::Interactive);
  // Shown as ID, Name, Status, Step, Precision, Preset, Age, …: what a glance needs first.
  header->moveSection(header->visualIndex(M::kStep), header->visualIndex(M::kStatus) + 1);
  header->moveSection(header->visualIndex(M::kPrecision), header->visualIndex(M::kStep) + 1);
  // Widths from the texts, measured as rows come and change (not ResizeToContents: that mode
  // measures every row on every refresh, tens of milliseconds with 1,000 runs), and fitted to
  // the viewport whenever it or a want changes.
  const QFontMetrics fm = view_->fontMetrics();
  want_.assign(M::kColumns, 0);
  for (int c = 0; c < M::kColumns; ++c) want_[static_cast<size_t>(c)] = titleWidth(c) + kSortArrow;
  const auto at_least = [&](int c, const QString& sample, int extra = 0) {
    int& w = want_[static_cast<size_t>(c)];
    w = std::max(w, fm.horizontalAdvance(sample) + kPad + extra);
  };
  at_least(M::kId, QStringLiteral("00000"));
  at_least(M::kStep, QStringLiteral("000000"));
  at_least(M::kAge, QStringLiteral("59 min"));
  const int icon = view_->iconSize().isValid() ? view_->iconSize().width() : 16;
  namespace s = run_status;
  for (const char* status :
       {s::kRunning, s::kPaused, s::kFinished, s::kFailed, s::kCrashed, s::kStopped})
    at_least(M::kStatus, QString::fromLatin1(status), icon + 6);
  view_->viewport()->installEventFilter(this);
  connect(model_, &QAbstractItemModel::rowsInserted, this,
          [this](const QModelIndex&, int first, int last) { measureRows(first, last); });
  connect(model_, &QAbstractItemModel::rowsRemoved, this, &RunsPanel::remeasure);
  connect(model_, &QAbstractItemModel::modelReset, this, &RunsPanel::remeasure);
  connect(model_, &QAbstractItemModel::dataChanged, this,
          [this](const QModelIndex& from, const QModelIndex& to) {
            // A live run's step alone changes every refresh: nothing to measure then.
            if (from.column() == M::kStep && to.column() == M::kStep) return;
            measureRows(from.row(), to.row());
          });
}

void RunsPanel::measureRows(int first, int last) {
  const QFontMetrics fm = view_->fontMetrics();
  bool grew = false;
  for (int c : {M::kName, M::kPreset, M::kPrecision, M::kTags, M::kNotes}) {
    int& want = want_[static_cast<size_t>(c)];
    const int cap = kMaxWant[c];
    for (int r = first; r <= last && want < cap; ++r) {
      const int w = fm.horizontalAdvance(model_->index(r, c).data().toString()) + kPad;
      if (w > want) {
        want = std::min(w, cap);
        grew = true;
      }
    }
  }
  if (grew) scheduleFit();
}

int RunsPanel::titleWidth(int column) const {
  const QString title = model_->headerData(column, Qt::Horizontal, Qt::DisplayRole).toString();
  return view_->horizontalHeader()->fontMetrics().horizontalAdvance(title) + kPad;
}

void RunsPanel::remeasure() {
  for (int c : {M::kName, M::kPreset, M::kPrecision, M::kTags, M::kNotes})
    want_[static_cast<size_t>(c)] = titleWidth(c) + kSortArrow;
  if (model_->rowCount() > 0) measureRows(0, model_->rowCount() - 1);
  scheduleFit();
}

void RunsPanel::scheduleFit() {
  if (fit_pending_) return;
  fit_pending_ = true;
  QTimer::singleShot(0, this, [this] {
    fit_pending_ = false;
    fitColumnsToWidth();
  });
}

void RunsPanel::fitColumnsToWidth() {
  const QFontMetrics fm = view_->fontMetrics();
  std::vector<ColumnNeed> needs(M::kColumns);
  for (int c = 0; c < M::kColumns; ++c) {
    ColumnNeed& n = needs[static_cast<size_t>(c)];
    n.want = want_[static_cast<size_t>(c)];
    n.min = n.want;  // ids, steps, ages, precisions and presets read wrong cut
    n.priority = kPriority[c];
    n.grow_priority = kGrowPriority[c];
  }
  auto& name = needs[M::kName];
  name.stretch = true;
  name.min = std::min(name.want, fm.horizontalAdvance(QStringLiteral("demo-bf16-s…")) + kPad);
  needs[M::kStatus].min = titleWidth(M::kStatus);  // the dot alone, under its title
  for (int c : {M::kTags, M::kNotes}) {
    ColumnNeed& n = needs[static_cast<size_t>(c)];
    n.min = std::min(n.want, fm.horizontalAdvance(QStringLiteral("baseline, f…")) + kPad);
  }
  const std::vector<int> widths = fitColumns(needs, view_->viewport()->width());
  auto* header = view_->horizontalHeader();
  for (int c = 0; c < M::kColumns; ++c) {
    const int w = widths[static_cast<size_t>(c)];
    view_->setColumnHidden(c, w == 0);
    if (w > 0 && header->sectionSize(c) != w) header->resizeSection(c, w);
  }
}

bool RunsPanel::eventFilter(QObject* watched, QEvent* event) {
  if (watched == view_->viewport() && event->type() == QEvent::Resize) scheduleFit();
  return QWidget::eventFilter(watched, event);
}

QSize RunsPanel::sizeHint() const {
  // Room for the id, name, status, step, precision and preset columns of typical runs, whether
  // or not they are in the table yet (the dock takes its width once, when the window opens,
  // often before the first run).
  const QFontMetrics fm = view_->fontMetrics();
  const auto at_least = [&](int column, const QString& sample) {
    return std::max(want_[static_cast<size_t>(column)], fm.horizontalAdvance(sample) + kPad);
  };
  int width = 2 * view_->frameWidth() + view_->verticalScrollBar()->sizeHint().width();
  for (int c : {M::kId, M::kStatus, M::kStep}) width += want_[static_cast<size_t>(c)];
  width += at_least(M::kPrecision, mixedPrecisionSample());
  width += at_least(M::kPreset, QStringLiteral("moe-demo"));
  width += fm.horizontalAdvance(QStringLiteral("demo-bf16-seed-2")) + kPad;
  return {std::max(width, QWidget::sizeHint().width()), QWidget::sizeHint().height()};
}

void RunsPanel::updateCount() {
  count_->setText(tr("%1 of %2 runs").arg(proxy_->rowCount()).arg(model_->rowCount()));
}

void RunsPanel::setRuns(const std::vector<RunStore::RunRow>& rows, double now) {
  model_->setRuns(rows, now);
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
