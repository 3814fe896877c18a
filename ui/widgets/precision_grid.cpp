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

QString flipped(const QString& p) {
  return p == "fp8" ? "bf16" : "fp8";
}

}  // namespace

const QStringList& PrecisionGrid::modules() {
  static const QStringList m = {"q", "k", "v", "o", "gate", "up", "down"};
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
  auto* all_fp8 = new QPushButton(tr("All FP8"), this);
  auto* all_bf16 = new QPushButton(tr("All BF16"), this);
  auto* revert_button = new QPushButton(tr("Revert"), this);
  revert_button->setToolTip(tr("Drop the edits not yet applied"));
  for (auto* b : {all_fp8, all_bf16, revert_button}) {
    b->setAutoDefault(false);
    actions->addWidget(b);
  }
  layout->addLayout(actions);
  connect(all_fp8, &QPushButton::clicked, this, [this] {
    for (int m = 0; m < modules().size(); ++m) setModule(m, "fp8");
  });
  connect(all_bf16, &QPushButton::clicked, this, [this] {
    for (int m = 0; m < modules().size(); ++m) setModule(m, "bf16");
  });
  connect(revert_button, &QPushButton::clicked, this, &PrecisionGrid::revert);

  table_->setColumnCount(static_cast<int>(modules().size()));
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

void PrecisionGrid::setMap(const Json& map) {
  std::vector<QStringList> rows;
  QString error;
  if (!map.is_array()) {
    error = tr("Precision map is %1, not a list of layers").arg(map.type_name());
  } else {
    const auto& layers = map.as_array();
    for (size_t l = 0; l < layers.size() && error.isEmpty(); ++l) {
      const Json& layer = layers[l];
      if (!layer.is_object()) {
        error = tr("Precision map: layer %1 is %2, not an object of modules")
                    .arg(l)
                    .arg(layer.type_name());
        break;
      }
      QStringList row;
      for (const QString& m : modules()) {
        const std::string key = m.toStdString();
        if (!layer.contains(key)) {
          error = tr("Precision map: layer %1 has no '%2'").arg(l).arg(m);
          break;
        }
        const Json& v = layer.at(key);
        const QString p = v.is_string() ? QString::fromStdString(v.as_string()).toLower() : "";
        if (p == "fp32") {
          error = tr("Layer %1 '%2' is fp32: an all-FP32 run has no per-layer FP8/BF16 map")
                      .arg(l)
                      .arg(m);
          break;
        }
        if (p != "fp8" && p != "bf16") {
          error = tr("Precision map: layer %1 '%2' is %3 (expected \"fp8\" or \"bf16\")")
                      .arg(l)
                      .arg(m)
                      .arg(QString::fromStdString(v.dump()));
          break;
        }
        row << p;
      }
      rows.push_back(row);
    }
  }
  if (!error.isEmpty()) rows.clear();
  applied_ = rows;
  shown_ = std::move(rows);
  showMessage(error);
  render();
}

void PrecisionGrid::setUniform(int layers, const QString& precision) {
  const QString p = precision.toLower() == "bf16" ? "bf16" : "fp8";
  applied_.assign(static_cast<size_t>(std::max(layers, 0)), QStringList());
  for (auto& row : applied_)
    for (int m = 0; m < modules().size(); ++m) row << p;
  shown_ = applied_;
  showMessage(precision.toLower() == p
                  ? QString()
                  : tr("Unknown precision '%1' (shown as fp8)").arg(precision));
  render();
}

void PrecisionGrid::setUnavailable(const QString& reason) {
  applied_.clear();
  shown_.clear();
  showMessage(reason);
  render();
}

int PrecisionGrid::layers() const {
  return static_cast<int>(shown_.size());
}

Json PrecisionGrid::map() const {
  Json::Array layers;
  for (const auto& row : shown_) {
    Json layer = Json(Json::Object{});
    for (int m = 0; m < modules().size(); ++m)
      layer[modules()[m].toStdString()] = Json(row[m].toStdString());
    layers.push_back(std::move(layer));
  }
  return Json(std::move(layers));
}

QStringList PrecisionGrid::edits() const {
  QStringList out;
  for (size_t l = 0; l < shown_.size(); ++l)
    for (int m = 0; m < modules().size(); ++m)
      if (shown_[l][m] != applied_[l][m])
        out << QString("%1.%2=%3").arg(l).arg(modules()[m], shown_[l][m]);
  return out;
}

QStringList PrecisionGrid::overridesFrom(const QString& base) const {
  const QString b = base.toLower();
  QStringList out;
  for (size_t l = 0; l < shown_.size(); ++l)
    for (int m = 0; m < modules().size(); ++m)
      if (shown_[l][m] != b) out << QString("%1.%2=%3").arg(l).arg(modules()[m], shown_[l][m]);
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

void PrecisionGrid::toggle(int layer, int module) {
  if (layer < 0 || layer >= layers() || module < 0 || module >= modules().size()) return;
  QString& p = shown_[layer][module];
  p = flipped(p);
  render();
  emit edited();
}

QString PrecisionGrid::cell(int layer, int module) const {
  if (layer < 0 || layer >= layers() || module < 0 || module >= modules().size()) return {};
  return shown_[layer][module];
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

void PrecisionGrid::setModule(int module, const QString& precision) {
  if (module < 0 || module >= modules().size()) return;
  bool changed = false;
  for (auto& row : shown_) {
    if (row[module] != precision) {
      row[module] = precision;
      changed = true;
    }
  }
  if (!changed) return;
  render();
  emit edited();
}

void PrecisionGrid::setLayer(int layer, const QString& precision) {
  if (layer < 0 || layer >= layers()) return;
  bool changed = false;
  for (QString& p : shown_[layer]) {
    if (p != precision) {
      p = precision;
      changed = true;
    }
  }
  if (!changed) return;
  render();
  emit edited();
}

void PrecisionGrid::toggleModule(int module) {
  if (module < 0 || module >= modules().size() || shown_.empty()) return;
  bool all_bf16 = true;
  for (const auto& row : shown_) all_bf16 = all_bf16 && row[module] == "bf16";
  setModule(module, all_bf16 ? "fp8" : "bf16");
}

void PrecisionGrid::toggleLayer(int layer) {
  if (layer < 0 || layer >= layers()) return;
  const bool all_bf16 = shown_[layer].count("bf16") == shown_[layer].size();
  setLayer(layer, all_bf16 ? "fp8" : "bf16");
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
    for (int m = 0; m < modules().size(); ++m) {
      auto* item = table_->item(l, m);
      if (!item) {
        item = new QTableWidgetItem;
        item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
        item->setTextAlignment(Qt::AlignCenter);
        table_->setItem(l, m, item);
      }
      const QString& p = shown_[l][m];
      const bool fp8 = p == "fp8";
      const bool is_edited = p != applied_[l][m];
      item->setText(fp8 ? "FP8" : "BF16");
      item->setBackground(fp8 ? (is_edited ? kFp8Edited : kFp8)
                              : (is_edited ? kBf16Edited : kBf16));
      item->setForeground(QColor(Qt::black));
      item->setFont(is_edited ? bold : normal);
      item->setData(kEditedRole, is_edited);
      item->setToolTip(is_edited ? tr("L%1 %2: %3 (edited, was %4)")
                                       .arg(l)
                                       .arg(modules()[m], p.toUpper(), applied_[l][m].toUpper())
                                 : tr("L%1 %2: %3").arg(l).arg(modules()[m], p.toUpper()));
    }
  }
}

}  // namespace fp8rl::ui
