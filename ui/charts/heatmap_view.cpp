#include "ui/charts/heatmap_view.hpp"

#include "ui/charts/chart_style.hpp"
#include <qcustomplot.h>

#include <QLabel>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>

namespace fp8rl::ui {
namespace {

// At most this many grid columns when placing irregular steps on a regular grid.
constexpr double kMaxGridColumns = 8192;
const QColor kNonFiniteColor(255, 0, 255);

// Viridis, sampled.
QCPColorGradient viridis() {
  QCPColorGradient g;
  g.setColorStops({{0.00, QColor(68, 1, 84)},
                   {0.25, QColor(59, 82, 139)},
                   {0.50, QColor(33, 145, 140)},
                   {0.75, QColor(94, 201, 98)},
                   {1.00, QColor(253, 231, 37)}});
  g.setNanHandling(QCPColorGradient::nhTransparent);
  return g;
}

}  // namespace

struct HeatmapView::Impl {
  QCustomPlot* plot = nullptr;
  QCPColorMap* map = nullptr;
  QCPColorMap* nonfinite = nullptr;  // ±inf cells, one colour, over the map
  QCPColorScale* scale = nullptr;
  QLabel* caption = nullptr;
  HeatmapData data;
  std::vector<int> column_cell;  // data column → key index in the map
  int key_size = 0;

  void rebuild();
  QString cellText(double key, double value) const;
};

void HeatmapView::Impl::rebuild() {
  const HeatmapData& d = data;
  const size_t cols = d.steps.size();
  const int rows = d.rows;
  QCPColorMapData* md = map->data();
  QCPColorMapData* nf = nonfinite->data();
  column_cell.clear();
  key_size = 0;
  if (cols == 0 || rows <= 0 || d.values.size() != cols * static_cast<size_t>(rows) ||
      !(d.row_hi > d.row_lo)) {
    md->clear();
    nf->clear();
    map->setVisible(false);
    nonfinite->setVisible(false);
    caption->setText(cols == 0 || rows <= 0
                         ? QStringLiteral("no data")
                         : QStringLiteral("malformed heatmap: %1 values for %2 × %3 cells")
                               .arg(d.values.size())
                               .arg(cols)
                               .arg(rows));
    plot->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  map->setVisible(true);

  // Columns: steps as x. Irregular steps go on a regular grid of the smallest spacing (empty
  // grid columns transparent) when that stays small, else evenly over the step range.
  const double first = d.steps.front(), last = d.steps.back();
  double spacing = std::numeric_limits<double>::infinity();
  for (size_t c = 1; c < cols; ++c) {
    const double diff = d.steps[c] - d.steps[c - 1];
    if (diff > 0) spacing = std::min(spacing, diff);
  }
  QCPRange key_range(first - 0.5, first + 0.5);  // one column: the cell spans the range
  key_size = 1;
  column_cell.assign(cols, 0);
  if (cols > 1 && last > first && std::isfinite(spacing)) {
    const double grid = std::round((last - first) / spacing) + 1;
    if (grid <= std::max(kMaxGridColumns, static_cast<double>(cols))) {
      key_size = static_cast<int>(grid);
      for (size_t c = 0; c < cols; ++c)
        column_cell[c] = std::clamp(static_cast<int>(std::lround((d.steps[c] - first) / spacing)),
                                    0, key_size - 1);
    } else {
      key_size = static_cast<int>(cols);
      for (size_t c = 0; c < cols; ++c) column_cell[c] = static_cast<int>(c);
    }
    key_range = QCPRange(first, last);  // centres of the first and last cells
  }
  const double h = (d.row_hi - d.row_lo) / rows;
  const QCPRange value_range =
      rows == 1 ? QCPRange(d.row_lo, d.row_hi) : QCPRange(d.row_lo + h / 2, d.row_hi - h / 2);
  md->setSize(key_size, rows);
  md->setRange(key_range, value_range);
  nf->setSize(key_size, rows);
  nf->setRange(key_range, value_range);

  // Colour range over the finite (log: positive) values.
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : d.values)
    if (std::isfinite(v) && (!d.log_color || v > 0)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!(lo <= hi)) lo = d.log_color ? 1 : 0, hi = d.log_color ? 10 : 1;
  if (!(hi > lo)) {
    if (d.log_color)
      lo /= 2, hi *= 2;
    else
      lo -= 0.5, hi += 0.5;
  }

  md->fill(lo);
  md->fillAlpha(0);  // grid columns without data stay transparent
  nf->fill(1);
  nf->fillAlpha(0);
  int64_t nonfinite_cells = 0, empty_cells = 0;
  for (size_t c = 0; c < cols; ++c) {
    const int k = column_cell[c];
    for (int r = 0; r < rows; ++r) {
      const double v = d.values[c * static_cast<size_t>(rows) + static_cast<size_t>(r)];
      if (std::isnan(v)) {
        ++empty_cells;
        md->setCell(k, r, lo);
        md->setAlpha(k, r, 0);
      } else if (std::isinf(v)) {
        ++nonfinite_cells;
        md->setAlpha(k, r, 0);
        nf->setAlpha(k, r, 255);
      } else {
        // Log colour: values <= 0 get the lowest colour.
        md->setCell(k, r, d.log_color && v <= 0 ? lo : v);
        md->setAlpha(k, r, 255);
      }
    }
  }
  map->setDataScaleType(d.log_color ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  map->setDataRange(QCPRange(lo, hi));
  nonfinite->setVisible(nonfinite_cells > 0);
  scale->axis()->setLabel(d.value_label);

  // Rows: the given labels at the row centres (thinned when crowded), else numbers.
  if (d.row_labels.size() == rows) {
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    const int every = std::max(1, rows / 32);
    for (int r = 0; r < rows; r += every)
      ticker->addTick(d.row_lo + (r + 0.5) * h, d.row_labels[r]);
    plot->yAxis->setTicker(ticker);
  } else if (!plot->yAxis->ticker().dynamicCast<QCPAxisTickerText>().isNull()) {
    plot->yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
  }

  QStringList parts;
  parts << QStringLiteral("%1 steps × %2 rows").arg(cols).arg(rows);
  if (empty_cells > 0) parts << QStringLiteral("%1 empty cells").arg(empty_cells);
  if (nonfinite_cells > 0)
    parts << QStringLiteral("%1 non-finite cells (magenta)").arg(nonfinite_cells);
  caption->setText(parts.join(QStringLiteral(" · ")));

  // Axes: the cells' full extent.
  const double half_key = key_size > 1 ? (last - first) / (key_size - 1) / 2 : 0.5;
  plot->xAxis->setRange(key_range.lower - (key_size > 1 ? half_key : 0),
                        key_range.upper + (key_size > 1 ? half_key : 0));
  plot->yAxis->setRange(d.row_lo, d.row_hi);
  plot->replot(QCustomPlot::rpQueuedReplot);
}

QString HeatmapView::Impl::cellText(double key, double value) const {
  if (!map->visible() || key_size == 0) return {};
  int k = 0, r = 0;
  map->data()->coordToCell(key, value, &k, &r);
  if (k < 0 || r < 0 || k >= key_size || r >= data.rows) return {};
  const auto it = std::find(column_cell.begin(), column_cell.end(), k);
  if (it == column_cell.end()) return {};
  const size_t c = static_cast<size_t>(it - column_cell.begin());
  const double v = data.values[c * static_cast<size_t>(data.rows) + static_cast<size_t>(r)];
  const QString row = data.row_labels.size() == data.rows ? data.row_labels[r] : QString::number(r);
  const QString val = std::isnan(v)   ? QStringLiteral("no data")
                      : std::isinf(v) ? (v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf"))
                                      : QString::number(v, 'g', 6);
  return QStringLiteral("step %1 · %2: %3").arg(data.steps[c], 0, 'g', 12).arg(row, val);
}

HeatmapView::HeatmapView(const QString& title, QWidget* parent) : QWidget(parent), d_(new Impl) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->setSpacing(2);
  layout->addWidget(makeTitleLabel(title, this));

  QCustomPlot* plot = d_->plot = new QCustomPlot(this);
  plot->setObjectName(QStringLiteral("plot"));
  plot->setMinimumHeight(120);
  plot->setMouseTracking(true);
  plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  QFont small = plot->font();
  small.setPointSizeF(std::max(6.0, small.pointSizeF() - 1));
  plot->xAxis->setTickLabelFont(small);
  plot->yAxis->setTickLabelFont(small);
  plot->xAxis->setLabel(QStringLiteral("Step"));
  plot->axisRect()->setupFullAxesBox(true);
  plot->xAxis->grid()->setVisible(false);
  plot->yAxis->grid()->setVisible(false);

  d_->scale = new QCPColorScale(plot);
  plot->plotLayout()->addElement(0, 1, d_->scale);
  d_->scale->setType(QCPAxis::atRight);
  d_->scale->axis()->setTickLabelFont(small);
  d_->scale->setBarWidth(12);
  auto* margins = new QCPMarginGroup(plot);
  plot->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  d_->scale->setMarginGroup(QCP::msBottom | QCP::msTop, margins);

  d_->map = new QCPColorMap(plot->xAxis, plot->yAxis);
  d_->map->setName(QStringLiteral("heatmap"));
  d_->map->setInterpolate(false);
  d_->map->setTightBoundary(false);
  d_->map->setColorScale(d_->scale);  // first: it takes over the scale's gradient
  d_->map->setGradient(viridis());
  d_->nonfinite = new QCPColorMap(plot->xAxis, plot->yAxis);
  d_->nonfinite->setName(QStringLiteral("non-finite"));
  d_->nonfinite->setInterpolate(false);
  QCPColorGradient flat;
  flat.setColorStops({{0.0, kNonFiniteColor}, {1.0, kNonFiniteColor}});
  d_->nonfinite->setGradient(flat);
  d_->nonfinite->setDataRange(QCPRange(0, 2));
  d_->nonfinite->setVisible(false);
  plot->legend->setVisible(false);

  connect(plot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
    if (e->buttons() != Qt::NoButton) return;
    const QString text = d_->cellText(d_->plot->xAxis->pixelToCoord(e->position().x()),
                                      d_->plot->yAxis->pixelToCoord(e->position().y()));
    if (text.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(e->globalPosition().toPoint(), text, d_->plot);
  });
  connect(plot, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent*) { d_->rebuild(); });
  layout->addWidget(plot, 1);

  d_->caption = new QLabel(this);
  d_->caption->setObjectName(QStringLiteral("caption"));
  d_->caption->setFont(small);
  layout->addWidget(d_->caption);
  d_->rebuild();
}

HeatmapView::~HeatmapView() {
  disconnect(d_->plot, nullptr, this, nullptr);  // the plot (a child) outlives d_
  delete d_;
}

void HeatmapView::setData(const HeatmapData& data) {
  d_->data = data;
  d_->rebuild();
}

const HeatmapData& HeatmapView::data() const {
  return d_->data;
}

bool HeatmapView::exportPng(const QString& path, QString* error) {
  const int w = d_->plot->width() >= 100 ? d_->plot->width() : 700;
  const int h = d_->plot->height() >= 80 ? d_->plot->height() : 350;
  if (d_->plot->savePng(path, w, h)) return true;
  if (error) *error = QStringLiteral("cannot write the PNG file %1").arg(path);
  return false;
}

QCustomPlot* HeatmapView::plot() const {
  return d_->plot;
}

}  // namespace fp8rl::ui
