#include "ui/charts/heatmap_view.hpp"

#include <qcustomplot.h>

#include <QLabel>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "ui/charts/chart_math.hpp"
#include "ui/charts/chart_style.hpp"
#include "ui/charts/replot_queue.hpp"

namespace fp8rl::ui {
namespace {

const QColor kNonFiniteColor(255, 0, 255);
const QColor kMarkColor(230, 30, 30);

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
  QList<QCPItemRect*> marks;  // outlines of the marked cells
  HeatmapData data;
  HeatmapColumns columns;  // where data's columns are in the map

  void rebuild();
  void placeMarks(double row_height);
  QString cellText(double key, double value) const;
};

void HeatmapView::Impl::rebuild() {
  const HeatmapData& d = data;
  const size_t cols = d.steps.size();
  const int rows = d.rows;
  QCPColorMapData* md = map->data();
  QCPColorMapData* nf = nonfinite->data();
  columns = {};
  for (QCPItemRect* m : marks) plot->removeItem(m);
  marks.clear();
  plot->xAxis->setLabel(d.x_label);
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
    queueReplot(plot);
    return;
  }
  map->setVisible(true);

  // Columns: steps as x, on a grid where that stays small (see placeColumns).
  columns = placeColumns(d.steps);
  const QCPRange key_range(columns.cell_range.lo, columns.cell_range.hi);
  const double h = (d.row_hi - d.row_lo) / rows;
  const QCPRange value_range =
      rows == 1 ? QCPRange(d.row_lo, d.row_hi) : QCPRange(d.row_lo + h / 2, d.row_hi - h / 2);
  md->setSize(columns.cells, rows);
  md->setRange(key_range, value_range);
  nf->setSize(columns.cells, rows);
  nf->setRange(key_range, value_range);

  const AxisRange colours = colourRange(d.values, d.log_color);
  const double lo = colours.lo, hi = colours.hi;

  md->fill(lo);
  md->fillAlpha(0);  // grid columns without data stay transparent
  nf->fill(1);
  nf->fillAlpha(0);
  int64_t nonfinite_cells = 0, empty_cells = 0;
  for (size_t c = 0; c < cols; ++c) {
    const int k = columns.cell_of[c];
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

  // Columns: the given labels under the cells, else the steps.
  if (d.column_labels.size() == static_cast<qsizetype>(cols)) {
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (size_t c = 0; c < cols; ++c) ticker->addTick(d.steps[c], d.column_labels[c]);
    plot->xAxis->setTicker(ticker);
  } else if (!plot->xAxis->ticker().dynamicCast<QCPAxisTickerText>().isNull()) {
    plot->xAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
  }
  placeMarks(h);

  QStringList parts;
  if (d.column_labels.size() == static_cast<qsizetype>(cols))
    parts << QStringLiteral("%1 × %2 cells").arg(cols).arg(rows);
  else
    parts << QStringLiteral("%1 steps × %2 rows").arg(cols).arg(rows);
  if (empty_cells > 0) parts << QStringLiteral("%1 empty cells").arg(empty_cells);
  if (nonfinite_cells > 0)
    parts << QStringLiteral("%1 non-finite cells (magenta)").arg(nonfinite_cells);
  caption->setText(parts.join(QStringLiteral(" · ")));

  // Axes: the cells' full extent.
  plot->xAxis->setRange(columns.extent.lo, columns.extent.hi);
  plot->yAxis->setRange(d.row_lo, d.row_hi);
  queueReplot(plot);
}

void HeatmapView::Impl::placeMarks(double row_height) {
  const size_t rows = static_cast<size_t>(data.rows);
  if (data.marked.size() != data.values.size() || columns.cells == 0) return;
  const double width = (columns.extent.hi - columns.extent.lo) / columns.cells;
  QPen pen(kMarkColor, 2.5);
  pen.setJoinStyle(Qt::MiterJoin);
  const size_t cols = data.steps.size();
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      const size_t i = c * rows + r;
      if (!data.marked[i]) continue;
      // Neighbouring marked cells of one value are one thing spanning them (a whole-row
      // entry): one outline.
      size_t last = c;
      while (last + 1 < cols && data.marked[i + (last + 1 - c) * rows] &&
             columns.cell_of[last + 1] == columns.cell_of[last] + 1 &&
             data.values[(last + 1) * rows + r] == data.values[i])
        ++last;
      const double x0 = columns.extent.lo + columns.cell_of[c] * width;
      const double x1 = columns.extent.lo + (columns.cell_of[last] + 1) * width;
      const double y = data.row_lo + static_cast<double>(r) * row_height;
      // Inset a little, so neighbouring outlines stay apart.
      const double dx = width * 0.06, dy = row_height * 0.06;
      auto* m = new QCPItemRect(plot);
      m->setPen(pen);
      m->setBrush(Qt::NoBrush);
      m->topLeft->setCoords(x0 + dx, y + row_height - dy);
      m->bottomRight->setCoords(x1 - dx, y + dy);
      m->setSelectable(false);
      marks << m;
      c = last;
    }
}

QString HeatmapView::Impl::cellText(double key, double value) const {
  if (!map->visible() || columns.cells == 0) return {};
  int k = 0, r = 0;
  map->data()->coordToCell(key, value, &k, &r);
  if (k < 0 || r < 0 || k >= columns.cells || r >= data.rows) return {};
  const auto it = std::find(columns.cell_of.begin(), columns.cell_of.end(), k);
  if (it == columns.cell_of.end()) return {};
  const size_t c = static_cast<size_t>(it - columns.cell_of.begin());
  const size_t i = c * static_cast<size_t>(data.rows) + static_cast<size_t>(r);
  if (data.cell_tips.size() == static_cast<qsizetype>(data.values.size()))
    return data.cell_tips[static_cast<qsizetype>(i)];
  const double v = data.values[i];
  const QString row = data.row_labels.size() == data.rows ? data.row_labels[r] : QString::number(r);
  const QString val = std::isnan(v)   ? QStringLiteral("no data")
                      : std::isinf(v) ? (v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf"))
                                      : QString::number(v, 'g', 6);
  return QStringLiteral("step %1 · %2: %3").arg(data.steps[c], 0, 'g', 12).arg(row, val);
}

HeatmapView::HeatmapView(const QString& title, QWidget* parent)
    : PlotView(QSize(700, 350), parent), d_(new Impl) {
  setHeader(makeTitleLabel(title, this));
  QCustomPlot* plot = d_->plot = this->plot();
  plot->setMouseTracking(true);
  plot->xAxis->setLabel(QStringLiteral("Step"));
  plot->axisRect()->setupFullAxesBox(true);
  plot->xAxis->grid()->setVisible(false);
  plot->yAxis->grid()->setVisible(false);

  d_->scale = new QCPColorScale(plot);
  plot->plotLayout()->addElement(0, 1, d_->scale);
  d_->scale->setType(QCPAxis::atRight);
  d_->scale->axis()->setTickLabelFont(smallFont());
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
  d_->caption = addCaption();
  d_->rebuild();
}

HeatmapView::~HeatmapView() {
  delete d_;
}

void HeatmapView::setData(const HeatmapData& data) {
  d_->data = data;
  d_->rebuild();
}

const HeatmapData& HeatmapView::data() const {
  return d_->data;
}

}  // namespace fp8rl::ui
