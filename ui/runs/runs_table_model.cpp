#include "ui/runs/runs_table_model.hpp"

#include <QDateTime>
#include <QPainter>
#include <QPixmap>
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "contract/run_recorder.hpp"
#include "ui/runs/config_text.hpp"

namespace fp8rl::ui {
namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

// What humanAge shows, as a number: seconds, minutes, hours or days (unit·2^40 + count), so
// that a thousand rows' ages compare without formatting two strings each, every refresh.
constexpr int kAgeUnitShift = 40;
int64_t ageBucket(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  const auto in = [](int64_t unit, double count) {
    return (unit << kAgeUnitShift) + static_cast<int64_t>(std::floor(count));
  };
  if (seconds < 60) return in(0, seconds);
  if (seconds < 3600) return in(1, seconds / 60);
  if (seconds < 86400) return in(2, seconds / 3600);
  return in(3, seconds / 86400);
}

// "42 s", "3 min", "2 h", "5 d".
QString humanAge(double seconds) {
  static const char* const kUnits[] = {" s", " min", " h", " d"};
  const int64_t bucket = ageBucket(seconds);
  return QString::number(bucket & ((int64_t{1} << kAgeUnitShift) - 1)) +
         QLatin1String(kUnits[bucket >> kAgeUnitShift]);
}

QString dateText(double unix_seconds) {
  return QDateTime::fromSecsSinceEpoch(static_cast<qint64>(unix_seconds))
      .toString("yyyy-MM-dd HH:mm:ss");
}

// The model columns [first, last] whose cells differ between two rows of the same run ({-1, -1}
// when none): a live run's refresh changes its step alone, and a view repaints only the cells
// of the columns signalled (every row's every cell, 7 ms a refresh with 100 live runs).
std::pair<int, int> changedColumns(const RunStore::RunRow& a, const RunStore::RunRow& b) {
  using M = RunsTableModel;
  // The tool tip of every cell names the host, pid and end time.
  if (a.host != b.host || a.pid != b.pid || a.ended_at != b.ended_at || a.name != b.name ||
      a.status != b.status)
    return {0, M::kColumns - 1};
  int first = M::kColumns, last = -1;
  const auto mark = [&](bool differs, int column) {
    if (!differs) return;
    first = std::min(first, column);
    last = std::max(last, column);
  };
  mark(a.preset != b.preset, M::kPreset);
  mark(a.precision_summary != b.precision_summary, M::kPrecision);
  mark(a.last_step != b.last_step, M::kStep);
  mark(a.created_at != b.created_at, M::kAge);
  mark(a.tags != b.tags, M::kTags);
  mark(a.notes != b.notes, M::kNotes);
  return last < 0 ? std::pair{-1, -1} : std::pair{first, last};
}

// The stored fields no cell shows (with changedColumns' and the configuration — stored once,
// never changed — every field): a row equal in all is not copied again; with ten thousand runs,
// copying their configurations every refresh was most of the GUI thread's refresh.
bool sameUnshown(const RunStore::RunRow& a, const RunStore::RunRow& b) {
  return a.started_at == b.started_at && a.last_heartbeat == b.last_heartbeat &&
         a.control_endpoint == b.control_endpoint && a.telemetry_endpoint == b.telemetry_endpoint &&
         a.server_key == b.server_key && a.checkpoint_dir == b.checkpoint_dir &&
         a.checkpoint_step == b.checkpoint_step;
}

}  // namespace

QColor runStatusColor(const QString& status) {
  namespace s = run_status;
  if (status == s::kRunning) return QColor(0x2e, 0x7d, 0x32);   // green
  if (status == s::kPaused) return QColor(0xf9, 0xa8, 0x25);    // amber
  if (status == s::kFinished) return QColor(0x54, 0x6e, 0x7a);  // blue grey
  if (status == s::kFailed) return QColor(0xe5, 0x39, 0x35);    // red
  if (status == s::kCrashed) return QColor(0x8b, 0x00, 0x00);   // dark red
  if (status == s::kStopped) return QColor(0x9e, 0x9e, 0x9e);   // grey
  return QColor(0x75, 0x75, 0x75);
}

QIcon runStatusIcon(const QString& status) {
  static QHash<QString, QIcon> cache;
  auto it = cache.find(status);
  if (it != cache.end()) return *it;
  QPixmap pm(12, 12);
  pm.fill(Qt::transparent);
  QPainter p(&pm);
  p.setRenderHint(QPainter::Antialiasing);
  p.setPen(Qt::NoPen);
  p.setBrush(runStatusColor(status));
  p.drawEllipse(QRectF(1, 1, 10, 10));
  p.end();
  return *cache.insert(status, QIcon(pm));
}

RunsTableModel::RunsTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunsTableModel::setRuns(const std::vector<RunStore::RunRow>& rows, double now) {
  const double before = now_;
  now_ = now;

  // Expire pending tag/note edits the store has caught up with (or that are too old).
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (--it->refreshes_left <= 0)
      it = pending_.erase(it);
    else
      ++it;
  }

  QHash<int64_t, size_t> incoming;
  incoming.reserve(static_cast<qsizetype>(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) incoming.insert(rows[i].id, i);
  removeVanished(incoming);
  const std::vector<bool> is_new = updateShown(rows);
  if (now != before) signalAgeChanges(before);
  insertNew(rows, is_new);  // at the end: the view sorts
}

void RunsTableModel::removeVanished(const QHash<int64_t, size_t>& incoming) {
  // Contiguous ranges, from the end.
  int end = static_cast<int>(rows_.size());
  while (end > 0) {
    if (incoming.contains(rows_[end - 1].id)) {
      --end;
      continue;
    }
    int begin = end - 1;
    while (begin > 0 && !incoming.contains(rows_[begin - 1].id)) --begin;
    beginRemoveRows({}, begin, end - 1);
    rows_.erase(rows_.begin() + begin, rows_.begin() + end);
    configs_.erase(configs_.begin() + begin, configs_.begin() + end);
    endRemoveRows();
    end = begin;
  }
  if (static_cast<qsizetype>(rows_.size()) != index_.size()) {
    index_.clear();
    for (size_t i = 0; i < rows_.size(); ++i) index_.insert(rows_[i].id, static_cast<int>(i));
  }
}

std::vector<bool> RunsTableModel::updateShown(const std::vector<RunStore::RunRow>& rows) {
  std::vector<bool> is_new(rows.size(), true);
  std::map<std::pair<int, int>, std::vector<int>> changed;  // column span → rows
  for (size_t i = 0; i < rows.size(); ++i) {
    auto it = index_.find(rows[i].id);
    if (it == index_.end()) continue;
    is_new[i] = false;
    const RunStore::RunRow& incoming = rows[i];
    RunStore::RunRow& old = rows_[static_cast<size_t>(*it)];
    // A tag or note edit not yet in the store wins over the store's older text.
    const auto p = pending_.find(incoming.id);
    const bool caught_up =
        p != pending_.end() && incoming.tags == p->tags && incoming.notes == p->notes;
    if (caught_up) pending_.erase(p);
    const bool edited = p != pending_.end() && !caught_up;
    const auto columns = edited ? std::pair{0, kColumns - 1} : changedColumns(old, incoming);
    if (columns.first < 0 && sameUnshown(old, incoming)) continue;
    Json config = std::move(old.config);  // configurations never change once stored
    old = incoming;
    old.config = std::move(config);
    if (edited) {
      old.tags = p->tags;
      old.notes = p->notes;
    }
    if (columns.first >= 0) changed[columns].push_back(*it);
  }
  for (auto& [columns, changed_rows] : changed)
    signalRows(std::move(changed_rows), columns.first, columns.second);
  return is_new;
}

void RunsTableModel::signalAgeChanges(double before) {
  // Only rows whose shown age changed ("3 min" → "4 min"): signalling the whole column every
  // refresh would make the proxy re-filter and re-sort a thousand rows each time.
  std::vector<int> changed;
  for (size_t r = 0; r < rows_.size(); ++r)
    if (ageBucket(before - rows_[r].created_at) != ageBucket(now_ - rows_[r].created_at))
      changed.push_back(static_cast<int>(r));
  signalRows(std::move(changed), kAge, kAge);
}

void RunsTableModel::signalRows(std::vector<int> rows, int first, int last) {
  std::sort(rows.begin(), rows.end());
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    emit dataChanged(index(rows[i], first), index(rows[j - 1], last));
    i = j;
  }
}

void RunsTableModel::insertNew(const std::vector<RunStore::RunRow>& rows,
                               const std::vector<bool>& is_new) {
  const size_t count = static_cast<size_t>(std::count(is_new.begin(), is_new.end(), true));
  if (count == 0) return;
  const int first = static_cast<int>(rows_.size());
  beginInsertRows({}, first, first + static_cast<int>(count) - 1);
  rows_.reserve(rows_.size() + count);
  configs_.reserve(rows_.size() + count);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!is_new[i]) continue;
    index_.insert(rows[i].id, static_cast<int>(rows_.size()));
    configs_.push_back(flattenConfig(rows[i].config));
    rows_.push_back(rows[i]);
  }
  endInsertRows();
}

const RunStore::RunRow* RunsTableModel::runAt(int row) const {
  if (row < 0 || row >= static_cast<int>(rows_.size())) return nullptr;
  return &rows_[static_cast<size_t>(row)];
}

const std::string& RunsTableModel::configText(int row) const {
  static const std::string none;
  return runAt(row) ? configs_[static_cast<size_t>(row)] : none;
}

int RunsTableModel::rowOf(int64_t id) const {
  return index_.value(id, -1);
}

int RunsTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int RunsTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumns;
}

QVariant RunsTableModel::data(const QModelIndex& index, int role) const {
  const RunStore::RunRow* r = runAt(index.row());
  if (!r || index.column() < 0 || index.column() >= kColumns) return {};
  const int column = index.column();
  switch (role) {
    case kRunIdRole:
      return QVariant::fromValue<qint64>(r->id);
    case kConfigRole:
      return qs(configs_[static_cast<size_t>(index.row())]);
    case Qt::DisplayRole:
    case Qt::EditRole:
      return displayData(*r, column, role);
    case Qt::UserRole:  // sort value: numbers where the text would sort wrongly
      if (column == kStep) return QVariant::fromValue<qint64>(r->last_step ? *r->last_step : -1);
      if (column == kAge) return now_ - r->created_at;
      return displayData(*r, column, Qt::EditRole);
    case Qt::DecorationRole:
      if (column == kStatus) return runStatusIcon(qs(r->status));
      return {};
    case Qt::ForegroundRole:
      if (column == kStatus) return runStatusColor(qs(r->status));
      return {};
    case Qt::TextAlignmentRole:
      if (column == kId || column == kStep || column == kAge)
        return QVariant::fromValue<int>(Qt::AlignRight | Qt::AlignVCenter);
      return {};
    case Qt::ToolTipRole:
      return toolTip(*r, column);
    default:
      return {};
  }
}

QVariant RunsTableModel::displayData(const RunStore::RunRow& r, int column, int role) const {
  switch (column) {
    case kId:
      return QVariant::fromValue<qint64>(r.id);
    case kName:
      return qs(r.name);
    case kStatus:
      return qs(r.status);
    case kPreset:
      return qs(r.preset);
    case kPrecision:
      return qs(r.precision_summary);
    case kStep:
      return r.last_step ? QVariant(QString::number(*r.last_step)) : QVariant(QString());
    case kAge:
      return humanAge(now_ - r.created_at);
    case kTags:
      return qs(r.tags);
    case kNotes:
      // One line in the table; the editor gets the whole text.
      return role == Qt::EditRole ? qs(r.notes)
                                  : qs(r.notes).replace('\n', QString::fromUtf8(" ⏎ "));
  }
  return {};
}

QString RunsTableModel::toolTip(const RunStore::RunRow& r, int column) const {
  // Every column of the run in full, whichever cell: the panel elides long texts and hides
  // columns it has no room for.
  QString tip = tr("Run %1 · %2 · %3").arg(r.id).arg(qs(r.name), qs(r.status));
  tip += tr("\nPreset %1 · precision %2")
             .arg(r.preset.empty() ? tr("(none)") : qs(r.preset), qs(r.precision_summary));
  if (r.last_step) tip += tr("\nStep %1").arg(*r.last_step);
  if (!r.tags.empty()) tip += tr("\nTags: %1").arg(qs(r.tags));
  if (!r.notes.empty()) tip += tr("\nNotes: %1").arg(qs(r.notes));
  if (column == kTags) tip += tr("\nDouble-click to edit the tags");
  if (column == kNotes) tip += tr("\nDouble-click to edit the notes");
  if (!r.host.empty()) tip += tr("\nHost %1, pid %2").arg(qs(r.host)).arg(r.pid);
  tip += tr("\nCreated %1").arg(dateText(r.created_at));
  if (r.ended_at) tip += tr("\nEnded %1").arg(dateText(*r.ended_at));
  if (r.checkpoint_step) tip += tr("\nCheckpoint at step %1").arg(*r.checkpoint_step);
  return tip;
}

QVariant RunsTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || section < 0 || section >= kColumns) return {};
  static const char* const kTitles[kColumns] = {
      QT_TR_NOOP("ID"),     QT_TR_NOOP("Name"),      QT_TR_NOOP("Status"),
      QT_TR_NOOP("Preset"), QT_TR_NOOP("Precision"), QT_TR_NOOP("Step"),
      QT_TR_NOOP("Age"),    QT_TR_NOOP("Tags"),      QT_TR_NOOP("Notes")};
  if (role == Qt::DisplayRole) return tr(kTitles[section]);
  if (role == Qt::ToolTipRole) {
    if (section == kAge) return tr("Time since the run was created");
    if (section == kStep) return tr("The last step recorded");
    if (section == kTags || section == kNotes) return tr("Double-click a cell to edit");
  }
  return {};
}

Qt::ItemFlags RunsTableModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  Qt::ItemFlags f = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
  if (index.column() == kTags || index.column() == kNotes) f |= Qt::ItemIsEditable;
  return f;
}

bool RunsTableModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (role != Qt::EditRole || !index.isValid()) return false;
  if (index.column() != kTags && index.column() != kNotes) return false;
  if (index.row() < 0 || index.row() >= static_cast<int>(rows_.size())) return false;
  RunStore::RunRow& r = rows_[static_cast<size_t>(index.row())];
  std::string& slot = index.column() == kTags ? r.tags : r.notes;
  const std::string text = value.toString().toStdString();
  if (slot == text) return true;
  slot = text;
  pending_.insert(r.id, PendingEdit{r.tags, r.notes, 3});
  emit dataChanged(index, index);
  emit tagsNotesEdited(r.id, qs(r.tags), qs(r.notes));
  return true;
}

}  // namespace fp8rl::ui
