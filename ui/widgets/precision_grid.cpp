#include "ui/widgets/precision_grid.hpp"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QStyledItemDelegate>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace fp8rl::ui {
namespace {

constexpr int kEditedRole = Qt::UserRole + 1;

const QColor kFp8(0xc6, 0xdb, 0xf7);         // light blue
const QColor kBf16(0xf8, 0xdc, 0xb4);        // light orange
const QColor kFp8Edited(0x7e, 0xae, 0xf2);   // stronger blue
const QColor kBf16Edited(0xf2, 0xaa, 0x52);  // stronger orange
const QColor kAutopilot(0xd9, 0xc2, 0xec);   // light violet: held in BF16 by the autopilot
const QColor kEditedBorder(0xc2, 0x18, 0x5b);

// Draws a border around edited (unapplied) cells on top of the usual painting.
class EditedCellDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;
  void paint(QPainter* painter, const QStyleOptionViewItem& option,
             const QModelIndex& index) const override {
    QStyledItemDelegate::paint(painter, option, index);
    if (!index.data(kEditedRole).toBool()) return;
    painter->save();
    painter->setPen(QPen(kEditedBorder, 2));
    painter->setBrush(Qt::NoBrush);
    painter->drawRect(option.rect.adjusted(1, 1, -1, -1));
    painter->restore();
  }
};

Precision flipped(Precision p) {
  return p == Precision::fp8 ? Precision::bf16 : Precision::fp8;
}

QString upper(Precision p) {
  return QString::fromLatin1(precision_name(p)).toUpper();
}

}  // namespace

const QStringList& PrecisionGrid::modules() {
  static const QStringList m = [] {
    QStringList names;
    for (const std::string& n : module_short_names()) names << QString::fromStdString(n);
    return names;
  }();
  return m;
}

PrecisionGrid::PrecisionGrid(QWidget* parent)
    : QWidget(parent),
      table_(new QTableWidget(this)),
      message_(new QLabel(this)),
      legend_(new QLabel(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);

  message_->setWordWrap(true);
  message_->setStyleSheet("color: #b71c1c;");
  message_->hide();
  layout->addWidget(message_);

  auto* actions = new QHBoxLayout;
  auto* hint = new QLabel(tr("Click a cell (or Space) to flip it; click a header for a whole "
                             "layer or module."),
                          this);
  hint->setWordWrap(true);
  hint->setStyleSheet("color: palette(mid);");
  actions->addWidget(hint, 1);
  auto* all_fp8 = new QPushButton(tr("All %1").arg(upper(Precision::fp8)), this);
  auto* all_bf16 = new QPushButton(tr("All %1").arg(upper(Precision::bf16)), this);
  auto* revert_button = new QPushButton(tr("Revert"), this);
  revert_button->setToolTip(tr("Drop the edits not yet applied"));
  for (auto* b : {all_fp8, all_bf16, revert_button}) {
    b->setAutoDefault(false);
    actions->addWidget(b);
  }
  layout->addLayout(actions);
  connect(all_fp8, &QPushButton::clicked, this, [this] {
    edit({std::nullopt, std::nullopt, Precision::fp8});
  });
  connect(all_bf16, &QPushButton::clicked, this, [this] {
    edit({std::nullopt, std::nullopt, Precision::bf16});
  });
  connect(revert_button, &QPushButton::clicked, this, &PrecisionGrid::revert);

  table_->setColumnCount(kHeatColumn + 1);
  table_->setHorizontalHeaderLabels(modules() +
                                    QStringList{QStringLiteral("router"), tr("FP8 err")});
  table_->horizontalHeaderItem(kHeatColumn)
      ->setToolTip(tr("Each layer's worst linear by the per-linear FP8 error signal"));
  table_->setColumnHidden(kModules, true);
  // Shown in the order of a layer's computation: attention (standard or latent), then the MLP
  // and the router (columns keep Module's order; only where they are drawn moves).
  {
    const Module order[] = {Module::q,    Module::k,    Module::v,    Module::q_a,
                            Module::q_b,  Module::kv_a, Module::kv_b, Module::o,
                            Module::gate, Module::up,   Module::down};
    QHeaderView* header = table_->horizontalHeader();
    for (int visual = 0; visual < kModules; ++visual)
      header->moveSection(header->visualIndex(static_cast<int>(order[visual])), visual);
  }
  table_->setColumnHidden(kHeatColumn, true);
  table_->setItemDelegate(new EditedCellDelegate(table_));
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setSelectionBehavior(QAbstractItemView::SelectItems);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->horizontalHeader()->setSectionsClickable(true);
  table_->verticalHeader()->setSectionsClickable(true);
  table_->horizontalHeader()->setToolTip(tr("Click to flip the whole module column"));
  table_->verticalHeader()->setToolTip(tr("Click to flip the whole layer"));
  table_->installEventFilter(this);
  layout->addWidget(table_, 1);
  legend_->setWordWrap(true);
  legend_->setText(
      tr("<span style=\"background:%1\">&nbsp;violet&nbsp;</span>: held in BF16 by the "
         "precision autopilot · <u>underlined</u>: set by a person (pinned: the "
         "autopilot never moves it)")
          .arg(kAutopilot.name()));
  legend_->hide();
  layout->addWidget(legend_);

  connect(table_, &QTableWidget::cellClicked, this,
          [this](int row, int column) { clicked(row, column); });
  connect(table_->horizontalHeader(), &QHeaderView::sectionClicked, this,
          [this](int column) { toggleModule(column); });
  connect(table_->verticalHeader(), &QHeaderView::sectionClicked, this,
          [this](int row) { headerClicked(row); });
}

bool PrecisionGrid::eventFilter(QObject* watched, QEvent* event) {
  if (watched == table_ && event->type() == QEvent::KeyPress) {
    const int key = static_cast<QKeyEvent*>(event)->key();
    if (key == Qt::Key_Space || key == Qt::Key_Return || key == Qt::Key_Enter) {
      const QModelIndex current = table_->currentIndex();
      if (current.isValid()) {
        clicked(current.row(), current.column());
        return true;
      }
    }
  }
  return QWidget::eventFilter(watched, event);
}

void PrecisionGrid::showMessage(const QString& text) {
  message_->setText(text);
  message_->setVisible(!text.isEmpty());
}

QString PrecisionGrid::message() const {
  return message_->text();
}

void PrecisionGrid::setMap(const PrecisionMap& map) {
  if (map.layers() > 0 && map.all_fp32()) {
    setUnavailable(tr("The map is all %1 (the CPU reference): there is no per-layer %2/%3 choice.")
                       .arg(upper(Precision::fp32), upper(Precision::fp8), upper(Precision::bf16)));
    return;
  }
  try {
    map.validate();
  } catch (const Error& e) {
    setUnavailable(QString::fromStdString(e.message()));
    return;
  }
  if (expanded_.size() != static_cast<size_t>(map.layers()) || applied_.linears() != map.linears())
    expanded_.assign(static_cast<size_t>(map.layers()), 0);
  applied_ = map;
  shown_ = map;
  showMessage(QString());
  render();
}

void PrecisionGrid::setMap(const Json& map) {
  try {
    setMap(PrecisionMap::from_json(map));
  } catch (const Error& e) {
    setUnavailable(QString::fromStdString(e.message()));
  }
}

void PrecisionGrid::setUniform(int layers, Precision precision) {
  setMap(PrecisionMap(std::max(layers, 0), precision));
}

void PrecisionGrid::setUnavailable(const QString& reason) {
  applied_ = shown_ = PrecisionMap();
  showMessage(reason);
  render();
}

int PrecisionGrid::layers() const {
  return static_cast<int>(shown_.layers());
}

Json PrecisionGrid::map() const {
  return shown_.to_json();
}

std::vector<PrecisionOverride> PrecisionGrid::changes() const {
  std::vector<PrecisionOverride> out;
  if (!(applied_.linears() == shown_.linears())) return out;
  // A module changed in every expert of a layer to one precision: one override for them all.
  auto all_experts = [&](const LinearSlot& s) {
    if (s.expert < 0 || !shown_.experts_uniform(s.layer, s.module)) return false;
    for (int64_t e = 0; e < shown_.experts(s.layer); ++e)
      if (applied_.expert(s.layer, e, s.module) == shown_.get(s)) return false;
    return true;
  };
  for (const LinearSlot& s : shown_.linears()) {
    const Precision p = shown_.get(s);
    if (p == applied_.get(s)) continue;
    if (all_experts(s)) {
      if (s.expert == 0) out.push_back({s.layer, s.module, p});
      continue;
    }
    if (s.router)
      out.push_back({s.layer, std::nullopt, p, PrecisionOverride::Target::router});
    else if (s.shared)
      out.push_back({s.layer, s.module, p, PrecisionOverride::Target::shared});
    else if (s.expert >= 0)
      out.push_back({s.layer, s.module, p, PrecisionOverride::Target::experts, s.expert});
    else
      out.push_back({s.layer, s.module, p});
  }
  return out;
}

QStringList PrecisionGrid::edits() const {
  QStringList out;
  for (const auto& o : changes()) out << QString::fromStdString(o.to_string());
  return out;
}

QStringList PrecisionGrid::overridesFrom(Precision base) const {
  QStringList out;
  for (const std::string& o : shown_.overrides_from(base)) out << QString::fromStdString(o);
  return out;
}

void PrecisionGrid::setLayerErrors(const std::vector<double>& rel_error) {
  errors_ = rel_error;
  render();  // the row headers (with the expander of layers with experts)
  table_->verticalHeader()->resizeSections(QHeaderView::ResizeToContents);
}

void PrecisionGrid::setLinearErrors(const std::vector<double>& errors) {
  linear_errors_ = errors;
  render();
}

void PrecisionGrid::setMarks(const std::vector<std::pair<int64_t, Module>>& autopilot,
                             const std::vector<std::pair<int64_t, Module>>& pinned) {
  if (autopilot == auto_marks_ && pinned == pin_marks_) return;
  auto_marks_ = autopilot;
  pin_marks_ = pinned;
  legend_->setVisible(!auto_marks_.empty() || !pin_marks_.empty());
  render();
}

double PrecisionGrid::linearError(int layer, int module) const {
  const size_t i = static_cast<size_t>(layer) * kModules + static_cast<size_t>(module);
  if (layer < 0 || module < 0 || module >= kModules || i >= linear_errors_.size()) return NAN;
  return linear_errors_[i];
}

QString PrecisionGrid::heatText(int layer) const {
  if (table_->isColumnHidden(kHeatColumn)) return {};
  int worst = -1;
  for (int m = 0; m < kModules; ++m) {
    const double e = linearError(layer, m);
    if (std::isfinite(e) && (worst < 0 || e > linearError(layer, worst))) worst = m;
  }
  if (worst < 0) return QStringLiteral("–");
  return QStringLiteral("%1%").arg(100.0 * linearError(layer, worst), 0, 'f', 1);
}

QString PrecisionGrid::layerLabel(int layer) const {
  QString label = QString("L%1").arg(layer);
  if (layer >= 0 && static_cast<size_t>(layer) < errors_.size() && std::isfinite(errors_[layer])) {
    const double pct = errors_[layer] * 100.0;
    const QString num = std::abs(pct) >= 10    ? QString::number(pct, 'f', 0)
                        : std::abs(pct) >= 0.1 ? QString::number(pct, 'f', 1)
                                               : QString::number(pct, 'g', 2);
    label += QString::fromUtf8(" · err ") + num + "%";
  }
  return label;
}

bool PrecisionGrid::inGrid(int layer, int module) const {
  return layer >= 0 && layer < layers() && module >= 0 &&
         ((module < kModules && shown_.has(layer, Module(module))) ||
          (module == kModules && shown_.experts(layer) > 0));
}

std::optional<Precision> PrecisionGrid::layerCell(const PrecisionMap& pm, int layer,
                                                  int column) const {
  if (column == kModules)
    return pm.experts(layer) > 0 ? std::optional(pm.router(layer)) : std::nullopt;
  const Module m = Module(column);
  if (pm.experts(layer) > 0 && column >= static_cast<int>(Module::gate) &&
      column <= static_cast<int>(Module::down) && !pm.experts_uniform(layer, m))
    return std::nullopt;
  return pm.at(layer, m);
}

void PrecisionGrid::toggle(int layer, int module) {
  if (!inGrid(layer, module)) return;
  if (module == kModules) {
    edit({layer, std::nullopt, flipped(shown_.router(layer)), PrecisionOverride::Target::router});
    return;
  }
  // Mixed experts: all to BF16 first (a second click makes them FP8).
  const auto p = layerCell(shown_, layer, module);
  edit({layer, Module(module), p ? flipped(*p) : Precision::bf16});
}

QString PrecisionGrid::cell(int layer, int module) const {
  if (!inGrid(layer, module)) return {};
  const auto p = layerCell(shown_, layer, module);
  return p ? QString::fromLatin1(precision_name(*p)) : QStringLiteral("mixed");
}

void PrecisionGrid::setExpanded(int layer, bool on) {
  if (layer < 0 || layer >= layers() || shown_.experts(layer) == 0) return;
  if (static_cast<bool>(expanded_[static_cast<size_t>(layer)]) == on) return;
  expanded_[static_cast<size_t>(layer)] = on;
  render();
}

bool PrecisionGrid::expanded(int layer) const {
  return layer >= 0 && static_cast<size_t>(layer) < expanded_.size() &&
         expanded_[static_cast<size_t>(layer)];
}

void PrecisionGrid::toggleExpert(int layer, int expert, Module m) {
  if (layer < 0 || layer >= layers() || expert < 0 || expert >= shown_.experts(layer)) return;
  edit({layer, m, flipped(shown_.expert(layer, expert, m)), PrecisionOverride::Target::experts,
        expert});
}

int PrecisionGrid::rowOf(int layer, int expert) const {
  for (size_t r = 0; r < rows_.size(); ++r)
    if (rows_[r].layer == layer && rows_[r].expert == expert) return static_cast<int>(r);
  return -1;
}

void PrecisionGrid::clicked(int row, int column) {
  if (row < 0 || static_cast<size_t>(row) >= rows_.size()) return;
  const Row& r = rows_[static_cast<size_t>(row)];
  if (r.expert == kSharedRow) {
    if (column >= static_cast<int>(Module::gate) && column <= static_cast<int>(Module::down))
      edit({r.layer, Module(column), flipped(shown_.shared(r.layer, Module(column))),
            PrecisionOverride::Target::shared});
    return;
  }
  if (r.expert < 0) {
    toggle(r.layer, column);
    return;
  }
  if (column >= static_cast<int>(Module::gate) && column <= static_cast<int>(Module::down))
    toggleExpert(r.layer, r.expert, Module(column));
}

void PrecisionGrid::headerClicked(int row) {
  if (row < 0 || static_cast<size_t>(row) >= rows_.size()) return;
  const Row& r = rows_[static_cast<size_t>(row)];
  if (shown_.experts(r.layer) > 0)
    setExpanded(r.layer, !expanded(r.layer));  // a layer with experts opens and closes
  else
    toggleLayer(r.layer);
}

void PrecisionGrid::markApplied() {
  applied_ = shown_;
  render();
}

void PrecisionGrid::revert() {
  if (shown_ == applied_) return;
  shown_ = applied_;
  render();
  emit edited();
}

void PrecisionGrid::edit(const PrecisionOverride& o) {
  const PrecisionMap before = shown_;
  o.apply(shown_);
  if (shown_ == before) return;
  render();
  emit edited();
}

void PrecisionGrid::setModule(int module, Precision precision) {
  if (inGrid(0, module)) edit({std::nullopt, Module(module), precision});
}

void PrecisionGrid::setLayer(int layer, Precision precision) {
  if (inGrid(layer, 0)) edit({layer, std::nullopt, precision});
}

void PrecisionGrid::toggleModule(int module) {
  if (module == kModules) {  // every router
    bool all_bf16 = true;
    for (int l = 0; l < layers(); ++l)
      if (shown_.experts(l) > 0) all_bf16 = all_bf16 && shown_.router(l) == Precision::bf16;
    edit({std::nullopt, std::nullopt, all_bf16 ? Precision::fp8 : Precision::bf16,
          PrecisionOverride::Target::router});
    return;
  }
  if (!inGrid(0, module)) return;
  bool all_bf16 = true;
  for (int l = 0; l < layers(); ++l)
    if (inGrid(l, module)) all_bf16 = all_bf16 && layerCell(shown_, l, module) == Precision::bf16;
  setModule(module, all_bf16 ? Precision::fp8 : Precision::bf16);
}

void PrecisionGrid::toggleLayer(int layer) {
  if (!inGrid(layer, 0)) return;
  bool all_bf16 = true;
  for (int m = 0; m < kModules; ++m)
    if (inGrid(layer, m)) all_bf16 = all_bf16 && layerCell(shown_, layer, m) == Precision::bf16;
  setLayer(layer, all_bf16 ? Precision::fp8 : Precision::bf16);
}

void PrecisionGrid::render() {
  rows_.clear();
  bool experts = false;
  for (int l = 0; l < layers(); ++l) {
    rows_.push_back({l, -1});
    experts = experts || shown_.experts(l) > 0;
    if (expanded(l)) {
      for (int e = 0; e < shown_.experts(l); ++e) rows_.push_back({l, e});
      if (shown_.shape(l).shared_experts) rows_.push_back({l, kSharedRow});
    }
  }
  table_->setColumnHidden(kModules, !experts);
  // Only the modules the model has (standard or latent attention).
  for (int m = 0; m < kModules; ++m) {
    bool any = false;
    for (int l = 0; l < layers() && !any; ++l) any = shown_.has(l, Module(m));
    table_->setColumnHidden(m, layers() > 0 && !any);
  }
  bool known = false;
  for (double e : linear_errors_) known = known || std::isfinite(e);
  table_->setColumnHidden(kHeatColumn, !known);
  auto marked = [](const std::vector<std::pair<int64_t, Module>>& v, int l, int m) {
    return m < kModules &&
           std::find(v.begin(), v.end(), std::pair<int64_t, Module>{l, Module(m)}) != v.end();
  };
  const int n = static_cast<int>(rows_.size());
  if (table_->rowCount() != n) table_->setRowCount(n);
  QFont normal = table_->font(), bold = normal;
  bold.setBold(true);
  for (int row = 0; row < n; ++row) {
    const Row r = rows_[static_cast<size_t>(row)];
    const int l = r.layer, E = static_cast<int>(shown_.experts(l));
    auto* header = table_->verticalHeaderItem(row);
    if (!header) {
      header = new QTableWidgetItem;
      table_->setVerticalHeaderItem(row, header);
    }
    const bool shared_row = r.expert == kSharedRow;
    QString label = r.expert >= 0 ? QStringLiteral("   e%1").arg(r.expert)
                    : shared_row  ? tr("   shared")
                                  : layerLabel(l);
    if (r.expert == -1 && E > 0)
      label = QString::fromUtf8(expanded(l) ? "▾ " : "▸ ") + label + tr(" (%n experts)", "", E);
    if (header->text() != label) header->setText(label);
    header->setToolTip(r.expert >= 0 ? tr("Expert %1 of layer %2").arg(r.expert).arg(l)
                       : shared_row  ? tr("The shared expert of layer %1").arg(l)
                       : E > 0       ? tr("Click to show or hide layer %1's experts").arg(l)
                                     : tr("Click to flip the whole layer"));
    {
      // The heat column: the layer's worst linear by the per-linear FP8 error signal.
      auto* heat = table_->item(row, kHeatColumn);
      if (!heat) {
        heat = new QTableWidgetItem;
        heat->setTextAlignment(Qt::AlignCenter);
        heat->setFlags(Qt::ItemIsEnabled);
        table_->setItem(row, kHeatColumn, heat);
      }
      double worst = NAN;
      for (int m = 0; m < kModules; ++m)
        if (std::isfinite(linearError(l, m)) && !(linearError(l, m) <= worst))
          worst = linearError(l, m);
      heat->setText(r.expert >= 0 ? QString() : heatText(l));
      // White at 1 % and below, red at 100 %, on a log scale.
      const double t = std::isfinite(worst)
                           ? std::clamp((std::log10(std::max(worst, 1e-6)) + 2.0) / 2.0, 0.0, 1.0)
                           : 0.0;
      heat->setBackground(r.expert >= 0 || !std::isfinite(worst)
                              ? QColor(Qt::transparent)
                              : QColor(255 - static_cast<int>(41 * t),
                                       255 - static_cast<int>(216 * t),
                                       255 - static_cast<int>(215 * t)));
      heat->setForeground(QColor(t > 0.6 ? Qt::white : Qt::black));
      QString tip = tr("Per-linear FP8 error of L%1 (relative error + flushed share + saturated "
                       "share of its worst operand, latest step):")
                        .arg(l);
      for (int m = 0; m < kModules; ++m)
        if (std::isfinite(linearError(l, m)))
          tip += QStringLiteral("\n  %1  %2%")
                     .arg(modules()[m])
                     .arg(100.0 * linearError(l, m), 0, 'f', 2);
      heat->setToolTip(r.expert >= 0 ? QString() : tip);
    }
    for (int m = 0; m <= kModules; ++m) {
      auto* item = table_->item(row, m);
      if (!item) {
        item = new QTableWidgetItem;
        item->setTextAlignment(Qt::AlignCenter);
        table_->setItem(row, m, item);
      }
      // What the cell shows: an expert's module, or the layer's (its experts' shared one, its
      // router); nothing where the row has no such linear.
      std::optional<Precision> p, was;
      bool present = true;
      if (r.expert >= 0 || shared_row) {
        present = m >= static_cast<int>(Module::gate) && m <= static_cast<int>(Module::down);
        if (present && shared_row) {
          p = shown_.shared(l, Module(m));
          was = applied_.shared(l, Module(m));
        } else if (present) {
          p = shown_.expert(l, r.expert, Module(m));
          was = applied_.expert(l, r.expert, Module(m));
        }
      } else {
        present = m < kModules ? shown_.has(l, Module(m)) : E > 0;
        if (present) {
          p = layerCell(shown_, l, m);
          was = layerCell(applied_, l, m);
        }
      }
      item->setFlags(present ? Qt::ItemIsEnabled | Qt::ItemIsSelectable : Qt::NoItemFlags);
      const QString where = r.expert >= 0 ? QStringLiteral("L%1 e%2 %3").arg(l).arg(r.expert)
                            : shared_row  ? QStringLiteral("L%1 shared %2").arg(l)
                                          : QStringLiteral("L%1 %2").arg(l);
      const QString name = m == kModules ? QStringLiteral("router") : modules()[m];
      if (!present) {
        item->setText(QString());
        item->setBackground(QColor(Qt::transparent));
        item->setToolTip(QString());
        item->setData(kEditedRole, false);
        continue;
      }
      const bool is_edited = p != was;
      if (!p) {
        item->setText(tr("MIXED"));
        item->setBackground(QColor(0xe0, 0xe0, 0xe0));
        item->setToolTip(
            tr("%1: the experts differ (open the layer to see each)").arg(where.arg(name)));
      } else {
        const bool fp8 = *p == Precision::fp8;
        const bool by_autopilot = r.expert < 0 && !is_edited && marked(auto_marks_, l, m);
        const bool pinned = r.expert < 0 && marked(pin_marks_, l, m);
        item->setText(upper(*p));
        item->setBackground(by_autopilot ? kAutopilot
                            : fp8        ? (is_edited ? kFp8Edited : kFp8)
                                         : (is_edited ? kBf16Edited : kBf16));
        QString tip = is_edited
                          ? tr("%1: %2 (edited, was %3)")
                                .arg(where.arg(name), upper(*p), was ? upper(*was) : tr("mixed"))
                          : tr("%1: %2").arg(where.arg(name), upper(*p));
        if (r.expert < 0 && std::isfinite(linearError(l, m)))
          tip += tr("\nFP8 error signal %1%").arg(100.0 * linearError(l, m), 0, 'f', 2);
        if (by_autopilot) tip += tr("\nMoved to BF16 by the precision autopilot");
        if (pinned) tip += tr("\nPinned: set by a person, the autopilot never moves it");
        item->setToolTip(tip);
      }
      item->setForeground(QColor(Qt::black));
      QFont font = is_edited ? bold : normal;
      font.setUnderline(r.expert < 0 && m < kModules && marked(pin_marks_, l, m));
      item->setFont(font);
      item->setData(kEditedRole, is_edited);
    }
  }
}

}  // namespace fp8rl::ui
