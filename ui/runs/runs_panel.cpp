#include "ui/runs/runs_panel.hpp"

#include <QComboBox>
#include <QDateTime>
#include <QFontMetrics>
#include <QHBoxLayout>
#include <QHash>
#include <QHeaderView>
#include <QIcon>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPainter>
#include <QPixmap>
#include <QProcess>
#include <QRegularExpression>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <utility>

namespace fp8rl::ui {
namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

QColor statusColor(const QString& status) {
  if (status == "running") return QColor(0x2e, 0x7d, 0x32);   // green
  if (status == "paused") return QColor(0xf9, 0xa8, 0x25);    // amber
  if (status == "finished") return QColor(0x54, 0x6e, 0x7a);  // blue grey
  if (status == "failed") return QColor(0xe5, 0x39, 0x35);    // red
  if (status == "crashed") return QColor(0x8b, 0x00, 0x00);   // dark red
  if (status == "stopped") return QColor(0x9e, 0x9e, 0x9e);   // grey
  return QColor(0x75, 0x75, 0x75);
}

QIcon statusIcon(const QString& status) {
  static QHash<QString, QIcon> cache;
  auto it = cache.find(status);
  if (it != cache.end()) return *it;
  QPixmap pm(12, 12);
  pm.fill(Qt::transparent);
  QPainter p(&pm);
  p.setRenderHint(QPainter::Antialiasing);
  p.setPen(Qt::NoPen);
  p.setBrush(statusColor(status));
  p.drawEllipse(QRectF(1, 1, 10, 10));
  p.end();
  return *cache.insert(status, QIcon(pm));
}

// "42 s", "3 min", "2 h", "5 d".
QString humanAge(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  const auto n = [](double v) { return QString::number(static_cast<qint64>(std::floor(v))); };
  if (seconds < 60) return n(seconds) + " s";
  if (seconds < 3600) return n(seconds / 60) + " min";
  if (seconds < 86400) return n(seconds / 3600) + " h";
  return n(seconds / 86400) + " d";
}

QString scalarText(const Json& v) {
  if (v.is_string()) return qs(v.as_string());
  if (v.is_number()) {
    const double d = v.as_number();
    if (std::floor(d) == d && std::abs(d) < 9007199254740992.0)
      return QString::number(static_cast<qint64>(d));
    // Plain decimals where they read well (0.0005, not 5e-04).
    const double a = std::abs(d);
    return QString::number(d, a >= 1e-5 && a < 1e15 ? 'f' : 'g', QLocale::FloatingPointShortest);
  }
  if (v.is_bool()) return v.as_bool() ? "true" : "false";
  if (v.is_null()) return "null";
  return qs(v.dump());
}

// Dotted "key=value" lines (arrays as comma-separated values).
void flatten(const Json& v, const QString& prefix, QString& out) {
  if (v.is_object()) {
    for (const auto& [k, x] : v.as_object())
      flatten(x, prefix.isEmpty() ? qs(k) : prefix + "." + qs(k), out);
    return;
  }
  if (prefix.isEmpty()) return;
  out += prefix;
  out += '=';
  if (v.is_array()) {
    bool first = true;
    for (const Json& x : v.as_array()) {
      if (!first) out += ',';
      first = false;
      out += scalarText(x);
    }
  } else {
    out += scalarText(v);
  }
  out += '\n';
}

QString flattenConfig(const Json& config) {
  QString out;
  flatten(config, QString(), out);
  return out;
}

// The filter: whitespace-separated terms (quotes group words), all of which must match. A term
// is text (matched case-insensitively in name, preset, precision, tags, notes and status) or
// key=value / key:value (matched against the flattened configuration; a key matches a dotted
// key equal to it or ending in ".key"; values compare case-insensitively, or numerically when
// both are numbers; key>value and key<value compare numbers).
class RunsFilterProxy : public QSortFilterProxyModel {
 public:
  using QSortFilterProxyModel::QSortFilterProxyModel;

  void setText(const QString& text) {
    terms_.clear();
    for (const QString& t : QProcess::splitCommand(text.trimmed())) {
      if (t.isEmpty()) continue;
      Term term;
      static const QRegularExpression kOperator("[=:<>]");
      const qsizetype op = t.indexOf(kOperator);
      if (op > 0 && op + 1 <= t.size()) {
        term.key = t.left(op).toLower();
        term.op = t[op];
        term.value = t.mid(op + 1);
        bool ok = false;
        term.number = QLocale::c().toDouble(term.value, &ok);
        term.numeric = ok;
      } else {
        term.value = t;
      }
      terms_.push_back(std::move(term));
    }
    invalidateFilter();
  }

  void setStatus(const QString& status) {
    status_ = status;
    invalidateFilter();
  }

 protected:
  bool filterAcceptsRow(int source_row, const QModelIndex&) const override {
    const auto* model = static_cast<const RunsTableModel*>(sourceModel());
    const RunStore::RunRow* run = model->runAt(source_row);
    if (!run) return false;
    if (!status_.isEmpty() && qs(run->status) != status_) return false;
    if (terms_.empty()) return true;
    QString config;
    bool have_config = false;
    for (const Term& t : terms_) {
      if (t.key.isEmpty()) {
        if (!textMatches(*run, t.value)) return false;
        continue;
      }
      if (!have_config) {
        config = model->index(source_row, 0).data(RunsTableModel::kConfigRole).toString();
        have_config = true;
      }
      if (!configMatches(*run, config, t)) return false;
    }
    return true;
  }

 private:
  struct Term {
    QString key;  // empty: a text term
    QChar op;
    QString value;
    bool numeric = false;
    double number = 0;
  };

  static bool textMatches(const RunStore::RunRow& r, const QString& text) {
    for (const std::string* s :
         {&r.name, &r.preset, &r.precision_summary, &r.tags, &r.notes, &r.status})
      if (qs(*s).contains(text, Qt::CaseInsensitive)) return true;
    return false;
  }

  static bool valueMatches(const Term& t, QStringView value) {
    bool ok = false;
    const double v = QLocale::c().toDouble(value, &ok);
    if (t.op == u'<') return ok && t.numeric && v < t.number;
    if (t.op == u'>') return ok && t.numeric && v > t.number;
    if (ok && t.numeric) return v == t.number;
    return value.compare(t.value, Qt::CaseInsensitive) == 0;
  }

  static bool keyMatches(QStringView key, const QString& want) {
    if (key.compare(want, Qt::CaseInsensitive) == 0) return true;
    return key.size() > want.size() && key.endsWith(want, Qt::CaseInsensitive) &&
           key[key.size() - want.size() - 1] == u'.';
  }

  static bool configMatches(const RunStore::RunRow& r, const QString& config, const Term& t) {
    // A few of the run's own columns are keys too (when the config has no such key).
    bool config_has_key = false;
    for (QStringView line : QStringView(config).split('\n', Qt::SkipEmptyParts)) {
      const qsizetype eq = line.indexOf('=');
      if (eq <= 0 || !keyMatches(line.left(eq), t.key)) continue;
      config_has_key = true;
      if (valueMatches(t, line.mid(eq + 1))) return true;
      // A list matches when one of its items does.
      const QStringView list = line.mid(eq + 1);
      if (list.contains(',')) {
        for (QStringView item : list.split(','))
          if (valueMatches(t, item)) return true;
      }
    }
    if (config_has_key) return false;
    if (t.key == "status") return valueMatches(t, qs(r.status));
    if (t.key == "preset") return valueMatches(t, qs(r.preset));
    if (t.key == "id") return valueMatches(t, QString::number(r.id));
    if (t.key == "step") return r.last_step && valueMatches(t, QString::number(*r.last_step));
    if (t.key == "tags" || t.key == "tag") return qs(r.tags).contains(t.value, Qt::CaseInsensitive);
    if (t.key == "notes") return qs(r.notes).contains(t.value, Qt::CaseInsensitive);
    return false;
  }

  std::vector<Term> terms_;
  QString status_;
};

}  // namespace

// --- RunsTableModel

RunsTableModel::RunsTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunsTableModel::setRuns(std::vector<RunStore::RunRow> rows, double now) {
  const bool now_changed = now != now_;
  const double now_before = now_;
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

  // 1. Remove vanished runs (contiguous ranges, from the end).
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

  // 2. Update the runs already shown, in place.
  std::vector<bool> is_new(rows.size(), true);
  int changed_begin = -1, changed_end = -1;  // a contiguous range of changed rows
  auto flush = [&] {
    if (changed_begin < 0) return;
    emit dataChanged(index(changed_begin, 0), index(changed_end, kColumns - 1));
    changed_begin = changed_end = -1;
  };
  std::vector<int> changed_rows;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto it = index_.find(rows[i].id);
    if (it == index_.end()) continue;
    is_new[i] = false;
    RunStore::RunRow& incoming_row = rows[i];
    if (auto p = pending_.find(incoming_row.id); p != pending_.end()) {
      if (incoming_row.tags == p->tags && incoming_row.notes == p->notes) {
        pending_.erase(p);
      } else {
        incoming_row.tags = p->tags;
        incoming_row.notes = p->notes;
      }
    }
    RunStore::RunRow& old = rows_[static_cast<size_t>(*it)];
    const bool changed = old.name != incoming_row.name || old.status != incoming_row.status ||
                         old.preset != incoming_row.preset ||
                         old.precision_summary != incoming_row.precision_summary ||
                         old.last_step != incoming_row.last_step ||
                         old.created_at != incoming_row.created_at ||
                         old.tags != incoming_row.tags || old.notes != incoming_row.notes ||
                         old.host != incoming_row.host || old.pid != incoming_row.pid ||
                         old.ended_at != incoming_row.ended_at;
    Json config = std::move(old.config);  // configurations never change once stored
    old = std::move(incoming_row);
    old.config = std::move(config);
    if (changed) changed_rows.push_back(*it);
  }
  std::sort(changed_rows.begin(), changed_rows.end());
  for (int r : changed_rows) {
    if (changed_begin >= 0 && r == changed_end + 1) {
      changed_end = r;
      continue;
    }
    flush();
    changed_begin = changed_end = r;
  }
  flush();
  if (now_changed) {
    // Only rows whose shown age changed ("3 min" → "4 min"): signalling the whole column
    // every refresh would make the proxy re-filter and re-sort a thousand rows each time.
    const double previous = now_before;
    int begin = -1;
    for (int r = 0; r <= static_cast<int>(rows_.size()); ++r) {
      const bool differs = r < static_cast<int>(rows_.size()) &&
                           humanAge(previous - rows_[static_cast<size_t>(r)].created_at) !=
                               humanAge(now_ - rows_[static_cast<size_t>(r)].created_at);
      if (differs && begin < 0) begin = r;
      if (!differs && begin >= 0) {
        emit dataChanged(index(begin, kAge), index(r - 1, kAge));
        begin = -1;
      }
    }
  }

  // 3. Insert the new runs at the end (the view sorts).
  const size_t count = static_cast<size_t>(std::count(is_new.begin(), is_new.end(), true));
  if (count > 0) {
    const int first = static_cast<int>(rows_.size());
    beginInsertRows({}, first, first + static_cast<int>(count) - 1);
    rows_.reserve(rows_.size() + count);
    configs_.reserve(rows_.size() + count);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!is_new[i]) continue;
      index_.insert(rows[i].id, static_cast<int>(rows_.size()));
      configs_.push_back(flattenConfig(rows[i].config));
      rows_.push_back(std::move(rows[i]));
    }
    endInsertRows();
  }
}

const RunStore::RunRow* RunsTableModel::runAt(int row) const {
  if (row < 0 || row >= static_cast<int>(rows_.size())) return nullptr;
  return &rows_[static_cast<size_t>(row)];
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
      return configs_[static_cast<size_t>(index.row())];
    case Qt::DisplayRole:
    case Qt::EditRole:
      switch (column) {
        case kId:
          return QVariant::fromValue<qint64>(r->id);
        case kName:
          return qs(r->name);
        case kStatus:
          return qs(r->status);
        case kPreset:
          return qs(r->preset);
        case kPrecision:
          return qs(r->precision_summary);
        case kStep:
          return r->last_step ? QVariant(QString::number(*r->last_step)) : QVariant(QString());
        case kAge:
          return humanAge(now_ - r->created_at);
        case kTags:
          return qs(r->tags);
        case kNotes:
          // One line in the table; the editor gets the whole text.
          return role == Qt::EditRole ? qs(r->notes)
                                      : qs(r->notes).replace('\n', QString::fromUtf8(" ⏎ "));
      }
      return {};
    case Qt::UserRole:  // sort value: numbers where the text would sort wrongly
      if (column == kStep) return QVariant::fromValue<qint64>(r->last_step ? *r->last_step : -1);
      if (column == kAge) return now_ - r->created_at;
      return data(index, Qt::EditRole);
    case Qt::DecorationRole:
      if (column == kStatus) return statusIcon(qs(r->status));
      return {};
    case Qt::ForegroundRole:
      if (column == kStatus) return statusColor(qs(r->status));
      return {};
    case Qt::TextAlignmentRole:
      if (column == kId || column == kStep || column == kAge)
        return QVariant::fromValue<int>(Qt::AlignRight | Qt::AlignVCenter);
      return {};
    case Qt::ToolTipRole: {
      if (column == kNotes && !r->notes.empty()) return qs(r->notes);
      if (column == kTags) return tr("Double-click to edit the tags");
      QString tip = tr("Run %1 · %2 · %3").arg(r->id).arg(qs(r->name), qs(r->status));
      if (!r->host.empty()) tip += tr("\nHost %1, pid %2").arg(qs(r->host)).arg(r->pid);
      tip += tr("\nCreated %1")
                 .arg(QDateTime::fromSecsSinceEpoch(static_cast<qint64>(r->created_at))
                          .toString("yyyy-MM-dd HH:mm:ss"));
      if (r->ended_at)
        tip += tr("\nEnded %1")
                   .arg(QDateTime::fromSecsSinceEpoch(static_cast<qint64>(*r->ended_at))
                            .toString("yyyy-MM-dd HH:mm:ss"));
      if (r->checkpoint_step) tip += tr("\nCheckpoint at step %1").arg(*r->checkpoint_step);
      return tip;
    }
    default:
      return {};
  }
}

QVariant RunsTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal) return {};
  if (role == Qt::DisplayRole) {
    switch (section) {
      case kId:
        return tr("ID");
      case kName:
        return tr("Name");
      case kStatus:
        return tr("Status");
      case kPreset:
        return tr("Preset");
      case kPrecision:
        return tr("Precision");
      case kStep:
        return tr("Step");
      case kAge:
        return tr("Age");
      case kTags:
        return tr("Tags");
      case kNotes:
        return tr("Notes");
    }
  }
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

// --- RunsPanel

RunsPanel::RunsPanel(QWidget* parent)
    : QWidget(parent),
      model_(new RunsTableModel(this)),
      proxy_(new RunsFilterProxy(this)),
      view_(new QTableView(this)),
      filter_(new QLineEdit(this)),
      status_(new QComboBox(this)),
      count_(new QLabel(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* bar = new QHBoxLayout;
  filter_->setPlaceholderText(
      tr("Filter: text, or key=value (precision.default=bf16 "
         "task.name=reverse lr<0.001)"));
  filter_->setClearButtonEnabled(true);
  filter_->setToolTip(
      tr("Space-separated terms, all must match.\n"
         "text: found in name, preset, precision, tags, notes or status (any case)\n"
         "key=value or key:value: the run's configuration, e.g. precision.default=bf16, "
         "task.name=reverse, lr=0.001 (a key may omit its section)\n"
         "key<value, key>value: numeric comparisons, e.g. grpo.steps>100\n"
         "Also: status=, preset=, id=, step=, tags=, notes="));
  bar->addWidget(filter_, 1);
  status_->addItem(tr("All"), QString());
  for (const char* s : {"running", "paused", "finished", "failed", "crashed", "stopped"})
    status_->addItem(statusIcon(s), s, QString(s));
  status_->setToolTip(tr("Show runs with this status only"));
  bar->addWidget(status_);
  count_->setMinimumWidth(count_->fontMetrics().horizontalAdvance("00000 of 00000 runs"));
  count_->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
  bar->addWidget(count_);
  layout->addLayout(bar);

  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole);
  proxy_->setSortCaseSensitivity(Qt::CaseInsensitive);
  proxy_->setDynamicSortFilter(true);
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
  view_->horizontalHeader()->setHighlightSections(false);
  auto* header = view_->horizontalHeader();
  header->setStretchLastSection(false);
  // Fixed widths from the font, not ResizeToContents: that mode measures hundreds of rows on
  // every refresh (tens of milliseconds with 1,000 runs), which the event loop cannot afford.
  const QFontMetrics fm = view_->fontMetrics();
  const std::pair<int, const char*> widths[] = {
      {RunsTableModel::kId, "00000"},        {RunsTableModel::kStatus, "● finished  "},
      {RunsTableModel::kPreset, "preset  "}, {RunsTableModel::kPrecision, "fp8 (+3 bf16)"},
      {RunsTableModel::kStep, "000000"},     {RunsTableModel::kAge, "59 min "}};
  for (const auto& [c, sample] : widths) {
    header->setSectionResizeMode(c, QHeaderView::Interactive);
    header->resizeSection(c, fm.horizontalAdvance(QString::fromUtf8(sample)) + 16);
  }
  header->setSectionResizeMode(RunsTableModel::kName, QHeaderView::Stretch);
  header->setSectionResizeMode(RunsTableModel::kTags, QHeaderView::Interactive);
  header->setSectionResizeMode(RunsTableModel::kNotes, QHeaderView::Interactive);
  header->resizeSection(RunsTableModel::kTags, 120);
  header->resizeSection(RunsTableModel::kNotes, 180);
  layout->addWidget(view_, 1);

  auto* filter_proxy = static_cast<RunsFilterProxy*>(proxy_);
  connect(filter_, &QLineEdit::textChanged, this,
          [filter_proxy](const QString& text) { filter_proxy->setText(text); });
  connect(status_, &QComboBox::currentIndexChanged, this, [this, filter_proxy](int i) {
    filter_proxy->setStatus(status_->itemData(i).toString());
  });

  auto update_count = [this] {
    count_->setText(tr("%1 of %2 runs").arg(proxy_->rowCount()).arg(model_->rowCount()));
  };
  connect(proxy_, &QAbstractItemModel::rowsInserted, this, update_count);
  connect(proxy_, &QAbstractItemModel::rowsRemoved, this, update_count);
  connect(proxy_, &QAbstractItemModel::modelReset, this, update_count);
  connect(proxy_, &QAbstractItemModel::layoutChanged, this, update_count);
  connect(model_, &QAbstractItemModel::rowsInserted, this, update_count);
  connect(model_, &QAbstractItemModel::rowsRemoved, this, update_count);
  update_count();

  connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            emit currentRunChanged(
                current.isValid() ? current.data(RunsTableModel::kRunIdRole).toLongLong() : -1);
          });
  connect(view_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          [this] { emit selectionChanged(); });
  connect(model_, &RunsTableModel::tagsNotesEdited, this, &RunsPanel::tagsNotesEdited);
}

void RunsPanel::setRuns(std::vector<RunStore::RunRow> rows, double now) {
  const bool was_empty = model_->rowCount() == 0;
  model_->setRuns(std::move(rows), now);
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

}  // namespace fp8rl::ui
