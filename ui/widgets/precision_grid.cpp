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
#include <cmath>

#include "core/error.hpp"

namespace fp8rl::ui {
namespace {

constexpr int kEditedRole = Qt::UserRole + 1;

const QColor kFp8(0xc6, 0xdb, 0xf7);         // light blue
const QColor kBf16(0xf8, 0xdc, 0xb4);        // light orange
const QColor kFp8Edited(0x7e, 0xae, 0xf2);   // stronger blue
const QColor kBf16Edited(0xf2, 0xaa, 0x52);  // stronger orange
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
    : QWidget(parent), table_(new QTableWidget(this)), message_(new QLabel(this)) {
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

  table_->setColumnCount(kModules);
  table_->setHorizontalHeaderLabels(modules());
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

  connect(table_, &QTableWidget::cellClicked, this,
          [this](int row, int column) { toggle(row, column); });
  connect(table_->horizontalHeader(), &QHeaderView::sectionClicked, this,
          [this](int column) { toggleModule(column); });
  connect(table_->verticalHeader(), &QHeaderView::sectionClicked, this,
          [this](int row) { toggleLayer(row); });
}

bool PrecisionGrid::eventFilter(QObject* watched, QEvent* event) {
  if (watched == table_ && event->type() == QEvent::KeyPress) {
    const int key = static_cast<QKeyEvent*>(event)->key();
    if (key == Qt::Key_Space || key == Qt::Key_Return || key == Qt::Key_Enter) {
      const QModelIndex current = table_->currentIndex();
      if (current.isValid()) {
        toggle(current.row(), current.column());
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
  for (int64_t l = 0; l < shown_.layers(); ++l)
    for (int m = 0; m < kModules; ++m)
      if (shown_.at(l, Module(m)) != applied_.at(l, Module(m)))
        out.push_back({l, Module(m), shown_.at(l, Module(m))});
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
  for (int l = 0; l < layers(); ++l) {
    if (auto* h = table_->verticalHeaderItem(l)) h->setText(layerLabel(l));
  }
  table_->verticalHeader()->resizeSections(QHeaderView::ResizeToContents);
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
  return layer >= 0 && layer < layers() && module >= 0 && module < kModules;
}

void PrecisionGrid::toggle(int layer, int module) {
  if (!inGrid(layer, module)) return;
  edit({layer, Module(module), flipped(shown_.at(layer, Module(module)))});
}

QString PrecisionGrid::cell(int layer, int module) const {
  if (!inGrid(layer, module)) return {};
  return QString::fromLatin1(precision_name(shown_.at(layer, Module(module))));
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
  if (!inGrid(0, module)) return;
  bool all_bf16 = true;
  for (int64_t l = 0; l < shown_.layers(); ++l)
    all_bf16 = all_bf16 && shown_.at(l, Module(module)) == Precision::bf16;
  setModule(module, all_bf16 ? Precision::fp8 : Precision::bf16);
}

void PrecisionGrid::toggleLayer(int layer) {
  if (!inGrid(layer, 0)) return;
  bool all_bf16 = true;
  for (int m = 0; m < kModules; ++m)
    all_bf16 = all_bf16 && shown_.at(layer, Module(m)) == Precision::bf16;
  setLayer(layer, all_bf16 ? Precision::fp8 : Precision::bf16);
}

void PrecisionGrid::render() {
  const int n = layers();
  if (table_->rowCount() != n) table_->setRowCount(n);
  QFont normal = table_->font(), bold = normal;
  bold.setBold(true);
  for (int l = 0; l < n; ++l) {
    auto* header = table_->verticalHeaderItem(l);
    if (!header) {
      header = new QTableWidgetItem;
      table_->setVerticalHeaderItem(l, header);
    }
    const QString label = layerLabel(l);
    if (header->text() != label) header->setText(label);
    for (int m = 0; m < kModules; ++m) {
      auto* item = table_->item(l, m);
      if (!item) {
        item = new QTableWidgetItem;
        item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
        item->setTextAlignment(Qt::AlignCenter);
        table_->setItem(l, m, item);
      }
      const Precision p = shown_.at(l, Module(m));
      const bool fp8 = p == Precision::fp8;
      const bool is_edited = p != applied_.at(l, Module(m));
      item->setText(upper(p));
      item->setBackground(fp8 ? (is_edited ? kFp8Edited : kFp8)
                              : (is_edited ? kBf16Edited : kBf16));
      item->setForeground(QColor(Qt::black));
      item->setFont(is_edited ? bold : normal);
      item->setData(kEditedRole, is_edited);
      item->setToolTip(is_edited
                           ? tr("L%1 %2: %3 (edited, was %4)")
                                 .arg(l)
                                 .arg(modules()[m], upper(p), upper(applied_.at(l, Module(m))))
                           : tr("L%1 %2: %3").arg(l).arg(modules()[m], upper(p)));
    }
  }
}

}  // namespace fp8rl::ui
