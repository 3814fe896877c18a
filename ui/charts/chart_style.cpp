#include "ui/charts/chart_style.hpp"

#include <qcustomplot.h>

#include <QFontMetrics>
#include <QLabel>
#include <QSaveFile>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>

namespace fp8rl::ui {

QColor seriesColor(size_t i) {
  static const QColor kPalette[] = {QColor(0x1f, 0x77, 0xb4), QColor(0xff, 0x7f, 0x0e),
                                    QColor(0x2c, 0xa0, 0x2c), QColor(0xd6, 0x27, 0x28),
                                    QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b),
                                    QColor(0xe3, 0x77, 0xc2), QColor(0x7f, 0x7f, 0x7f),
                                    QColor(0xbc, 0xbd, 0x22), QColor(0x17, 0xbe, 0xcf)};
  return kPalette[i % std::size(kPalette)];
}

QLabel* makeTitleLabel(const QString& title, QWidget* parent) {
  auto* label = new QLabel(title, parent);
  label->setObjectName(QStringLiteral("title"));
  QFont bold = label->font();
  bold.setBold(true);
  label->setFont(bold);
  return label;
}

namespace {

constexpr QMargins kLegendMargins(6, 2, 6, 0);
// A rule line label's whole text (its shown text may be elided).
constexpr const char* kFullText = "fp8rl_full_text";

// The legend's columns: as many of the widest entry as the plot's width holds.
void wrapLegend(QCustomPlot* plot) {
  QCPLegend* legend = plot->legend;
  if (!legend->visible()) return;
  // Cells of the legend's grid may be empty (the last row of a wrapped legend): no item there.
  int n = 0, widest = 1;
  for (int i = 0; i < legend->itemCount(); ++i)
    if (const QCPAbstractLegendItem* item = legend->item(i)) {
      ++n;
      widest = std::max(widest, item->minimumOuterSizeHint().width());
    }
  if (n == 0) return;
  const QMargins m = legend->margins();
  const int room = plot->viewport().width() - m.left() - m.right() + legend->columnSpacing();
  const int columns = std::clamp(room / (widest + legend->columnSpacing()), 1, n);
  if (columns == legend->wrap() && legend->columnCount() == columns) return;
  legend->setWrap(columns);
  legend->setFillOrder(QCPLegend::foColumnsFirst, /*rearrange=*/true);
}

}  // namespace

void placeLegendBelow(QCustomPlot* plot) {
  QCPLegend* legend = plot->legend;
  QCPLayoutGrid* grid = plot->plotLayout();
  if (legend->layout() == grid) return;  // placed already
  plot->axisRect()->insetLayout()->take(legend);
  // The row under the axis rect, spanning it; no stretch: it is as high as its entries.
  int row = 0;
  for (int r = 0; r < grid->rowCount(); ++r)
    for (int c = 0; c < grid->columnCount(); ++c)
      if (grid->element(r, c) == plot->axisRect()) row = r;
  grid->insertRow(row + 1);
  grid->addElement(row + 1, 0, legend);
  grid->setRowStretchFactor(row + 1, 0.001);
  grid->setRowSpacing(0);  // the legend's top margin keeps it off the axis labels
  legend->setBorderPen(Qt::NoPen);
  legend->setBrush(Qt::NoBrush);
  legend->setMargins(kLegendMargins);
  legend->setRowSpacing(0);
  legend->setColumnSpacing(14);
  legend->setFillOrder(QCPLegend::foColumnsFirst, false);
  // A layout column is no wider than its narrowest maximum, and an empty legend's is 0: an
  // explicit maximum below QWIDGETSIZE_MAX counts instead, so the axis rect above keeps the
  // plot's width whether the legend is shown or not.
  legend->setMaximumSize(QWIDGETSIZE_MAX - 1, QWIDGETSIZE_MAX);
  plot->setAutoAddPlottableToLegend(false);  // entries are added where the legend is shown
  QObject::connect(plot, &QCustomPlot::beforeReplot, legend, [plot] { wrapLegend(plot); });
  showLegend(plot, false);
}

void showLegend(QCustomPlot* plot, bool on) {
  QCPLegend* legend = plot->legend;
  legend->setVisible(on);
  legend->setMargins(on ? kLegendMargins : QMargins());
  if (!on) legend->clearItems();
}

void setLogScale(QCPAxis* axis, bool log) {
  if (log) {
    axis->setScaleType(QCPAxis::stLogarithmic);
    axis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  } else {
    axis->setScaleType(QCPAxis::stLinear);
    axis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
  }
}

RuleLine addRuleLine(QCustomPlot* plot, Qt::Orientation orientation, double at, const QString& text,
                     const QColor& color) {
  RuleLine r;
  r.orientation = orientation;
  r.line = new QCPItemStraightLine(plot);
  r.line->setPen(QPen(color, 1, Qt::DashLine));
  r.label = new QCPItemText(plot);
  r.label->setText(text);
  r.label->setProperty(kFullText, text);
  r.label->setColor(color);
  // Along the line, positions are fractions of the axis rect: it spans the rect at any zoom.
  QCPItemPosition* positions[] = {r.line->point1, r.line->point2, r.label->position};
  for (QCPItemPosition* p : positions) {
    if (orientation == Qt::Vertical)
      p->setTypeY(QCPItemPosition::ptAxisRectRatio);
    else
      p->setTypeX(QCPItemPosition::ptAxisRectRatio);
  }
  if (orientation == Qt::Vertical) {
    r.label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    r.label->setPadding(QMargins(3, 1, 2, 1));
    // The label reads to the right of its line, or to the left where it would run past the
    // plot's right edge (a bound near the end of the range); where it fits neither side, it is
    // elided to the wider one (never cut by the plot's edge).
    QCPItemText* label = r.label;
    QObject::connect(plot, &QCustomPlot::beforeReplot, label, [label] {
      const QRect rect = label->clipAxisRect()->rect();
      const double x = label->position->pixelPosition().x();
      const QString full = label->property(kFullText).toString();
      const QFontMetrics fm(label->font());
      const int padding = 6;
      const int right = static_cast<int>(rect.right() - x), left = static_cast<int>(x - rect.left());
      const bool on_right = fm.horizontalAdvance(full) + padding <= right || right >= left;
      label->setPositionAlignment((on_right ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignTop);
      label->setText(
          fm.elidedText(full, Qt::ElideRight, std::max(0, (on_right ? right : left) - padding)));
    });
  } else {
    r.label->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
    r.label->setPadding(QMargins(2, 0, 4, 1));
  }
  r.moveTo(at);
  return r;
}

void RuleLine::moveTo(double at) const {
  if (orientation == Qt::Vertical) {
    line->point1->setCoords(at, 0);
    line->point2->setCoords(at, 1);
    label->position->setCoords(at, 0);
  } else {
    line->point1->setCoords(0, at);
    line->point2->setCoords(1, at);
    label->position->setCoords(1, at);
  }
}

void RuleLine::setVisible(bool on) const {
  line->setVisible(on);
  label->setVisible(on);
}

void RuleLine::remove() const {
  line->parentPlot()->removeItem(line);
  label->parentPlot()->removeItem(label);
}

QString csvNumber(double v) {
  if (std::isnan(v)) return QStringLiteral("nan");
  if (std::isinf(v)) return v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return QString::fromLatin1(buf, static_cast<int>(res.ptr - buf));
}

QString csvField(const QString& s) {
  if (!s.contains(QLatin1Char(',')) && !s.contains(QLatin1Char('"')) &&
      !s.contains(QLatin1Char('\n')))
    return s;
  QString q = s;
  q.replace(QStringLiteral("\""), QStringLiteral("\"\""));
  return QLatin1Char('"') + q + QLatin1Char('"');
}

bool writeExportFile(const QString& path, const std::function<void(QIODevice&)>& write,
                     QString* error) {
  QSaveFile file(path);
  auto fail = [&] {
    if (error) *error = QStringLiteral("cannot write %1: %2").arg(path, file.errorString());
    return false;
  };
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) return fail();
  write(file);
  return file.commit() || fail();
}

}  // namespace fp8rl::ui
