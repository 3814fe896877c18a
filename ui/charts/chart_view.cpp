#include "ui/charts/chart_view.hpp"

#include <qcustomplot.h>

#include <QElapsedTimer>
#include <QFileDialog>
#include <QLabel>
#include <QMessageBox>
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <span>

#include "ui/charts/chart_curve.hpp"
#include "ui/charts/chart_header.hpp"
#include "ui/charts/chart_math.hpp"
#include "ui/charts/chart_style.hpp"
#include "ui/charts/downsample.hpp"
#include "ui/charts/replot_queue.hpp"

namespace fp8rl::ui {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kReadoutMaxCurves = 12;

QString xAxisName(XAxisKind kind) {
  switch (kind) {
    case XAxisKind::wall:
      return QStringLiteral("Wall time (s)");
    case XAxisKind::tokens:
      return QStringLiteral("Tokens");
    case XAxisKind::step:
      break;
  }
  return QStringLiteral("Step");
}

// Values in read-outs: non-finite ones by name.
QString formatValue(double v) {
  if (std::isnan(v)) return QStringLiteral("nan");
  if (std::isinf(v)) return v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
  return QString::number(v, 'g', 6);
}

QString formatWall(double seconds) {
  if (!std::isfinite(seconds)) return formatValue(seconds);
  const double a = std::fabs(seconds);
  if (a < 120) return QString::number(seconds, 'f', 1) + QStringLiteral(" s");
  if (a < 7200) return QString::number(seconds / 60, 'f', 1) + QStringLiteral(" min");
  return QString::number(seconds / 3600, 'f', 2) + QStringLiteral(" h");
}

QString fileStem(const QString& title) {
  QString s;
  for (QChar ch : title) s += (ch.isLetterOrNumber() || ch == QLatin1Char('-')) ? ch : QChar('_');
  return s.isEmpty() ? QStringLiteral("chart") : s;
}

// Calls a function when the watched widget loses the mouse.
class LeaveFilter : public QObject {
 public:
  LeaveFilter(QObject* parent, std::function<void()> on_leave)
      : QObject(parent), on_leave_(std::move(on_leave)) {}
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (event->type() == QEvent::Leave) on_leave_();
    return QObject::eventFilter(watched, event);
  }

 private:
  std::function<void()> on_leave_;
};

}  // namespace

struct ChartView::Impl {
  ChartView* q = nullptr;
  QString title;
  QCustomPlot* plot = nullptr;
  ChartHeader* header = nullptr;
  QLabel* readout = nullptr;
  QObject* leave_filter = nullptr;
  QCPItemText* message = nullptr;  // setMessage's text, null while none

  std::vector<std::unique_ptr<ChartCurve>> curves;
  // Bands (setCurveBand): the lower and upper edge graphs, the fill on the upper one.
  struct Band {
    int curve = -1;
    QCPGraph* lo = nullptr;
    QCPGraph* hi = nullptr;
    std::vector<SeriesPoint> lo_pts, hi_pts;
  };
  std::vector<Band> bands;
  void fillBand(Band& b) const;
  XAxisKind x_kind = XAxisKind::step;
  double smoothing = 0.6;
  bool log_y = false;
  bool ignore_outliers = false;
  bool legend_shown = true;      // setLegendShown
  bool follow = true;            // autoscale until the user zooms or pans
  bool rescale_pending = false;  // data changed while following: rescale at the next replot

  std::vector<ChartMarker> markers;
  std::vector<RuleLine> marker_lines;  // one per marker

  // What the drawn lines were reduced for.
  QCPRange reduced_range;
  int reduced_columns = -1;
  bool reduced_log = false;
  double edge_top = kNaN, edge_bottom = kNaN;
  ColumnSplit split;
  std::vector<size_t> scratch;

  void buildUi();
  // Asks for a file name (default: the title, with extension) and writes it with save; a
  // failure is shown in a message box titled caption.
  void exportWithDialog(const QString& caption, const QString& extension, const QString& filter,
                        const std::function<bool(const QString&, QString*)>& save);
  void updateLegend();
  void refreshGraphs();
  void updateEdges(bool force);
  void beforeReplot();
  std::optional<AxisRange> xRange() const;
  AxisRange yRange() const;
  void doRescale();
  void updateYPrecision(const QCPRange& r);
  void optionChangedRescale();
  // Shows `on` in the header (through show) and sets option to it; false when it was already.
  bool changeOption(bool& option, bool on, void (ChartHeader::*show)(bool));
  void positionMarkers();
  bool markerX(double step, double* x) const;
  void showReadout(const QPoint& pos);
  void userOptionsChanged() { emit q->optionsChanged(); }
};

void ChartView::Impl::buildUi() {
  header = new ChartHeader(title, q);
  q->setHeader(header);

  plot->setMouseTracking(true);
  plot->setNotAntialiasedElements(QCP::aeAll);
  plot->setAntialiasedElements(QCP::aeNone);
  plot->setPlottingHints(QCP::phFastPolylines | QCP::phCacheLabels);
  plot->setNoAntialiasingOnDrag(true);
  plot->addLayer(QStringLiteral("raw"), plot->layer(QStringLiteral("main")), QCustomPlot::limBelow);
  plot->addLayer(QStringLiteral("nonfinite"), plot->layer(QStringLiteral("main")),
                 QCustomPlot::limAbove);
  plot->xAxis->setLabel(xAxisName(x_kind));
  const QFont small = q->smallFont();
  plot->xAxis->setLabelFont(small);

  readout = new QLabel(plot);
  readout->setObjectName(QStringLiteral("readout"));
  readout->setAttribute(Qt::WA_TransparentForMouseEvents);
  readout->setStyleSheet(QStringLiteral(
      "QLabel { background: rgba(255,255,255,225); border: 1px solid #999; padding: 3px; }"));
  readout->setFont(small);
  readout->hide();

  // Controls → options (the setters update the controls without emitting).
  auto by_user = [this](auto set) {
    return [this, set](auto value) {
      (q->*set)(value);
      userOptionsChanged();
    };
  };
  QObject::connect(header, &ChartHeader::xAxisChosen, q, by_user(&ChartView::setXAxis));
  QObject::connect(header, &ChartHeader::smoothingChosen, q, by_user(&ChartView::setSmoothing));
  QObject::connect(header, &ChartHeader::logYChosen, q, by_user(&ChartView::setLogY));
  QObject::connect(header, &ChartHeader::ignoreOutliersChosen, q,
                   by_user(&ChartView::setIgnoreOutliers));
  QObject::connect(header, &ChartHeader::exportPngChosen, q, [this] {
    exportWithDialog(
        QStringLiteral("Export PNG"), QStringLiteral(".png"), QStringLiteral("PNG images (*.png)"),
        [this](const QString& path, QString* error) { return q->exportPng(path, error); });
  });
  QObject::connect(header, &ChartHeader::exportCsvChosen, q, [this] {
    exportWithDialog(
        QStringLiteral("Export CSV"), QStringLiteral(".csv"), QStringLiteral("CSV files (*.csv)"),
        [this](const QString& path, QString* error) { return q->exportCsv(path, error); });
  });

  // Plot interaction: zoom/pan stop the autoscale, double-click resumes it.
  QObject::connect(plot, &QCustomPlot::beforeReplot, q, [this] { beforeReplot(); });
  QObject::connect(plot->yAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), q,
                   [this](const QCPRange& r) {
                     updateYPrecision(r);
                     updateEdges(false);
                   });
  QObject::connect(plot, &QCustomPlot::mouseWheel, q, [this](QWheelEvent*) { follow = false; });
  QObject::connect(plot, &QCustomPlot::mouseMove, q, [this](QMouseEvent* e) {
    if (e->buttons() != Qt::NoButton) {
      follow = false;
      readout->hide();
      return;
    }
    showReadout(e->position().toPoint());
  });
  QObject::connect(plot, &QCustomPlot::mouseDoubleClick, q, [this](QMouseEvent*) {
    q->rescale();
    queueReplot(plot);
  });
  leave_filter = new LeaveFilter(q, [this] { readout->hide(); });
  plot->installEventFilter(leave_filter);
}

void ChartView::Impl::exportWithDialog(const QString& caption, const QString& extension,
                                       const QString& filter,
                                       const std::function<bool(const QString&, QString*)>& save) {
  const QString path =
      QFileDialog::getSaveFileName(q, caption, fileStem(title) + extension, filter);
  QString error;
  if (!path.isEmpty() && !save(path, &error)) QMessageBox::warning(q, caption, error);
}

void ChartView::Impl::showReadout(const QPoint& pos) {
  const QString text = q->readoutAt(pos.x());
  if (text.isEmpty()) {
    readout->hide();
    return;
  }
  readout->setText(text);
  readout->adjustSize();
  int x = pos.x() + 14, y = pos.y() + 14;
  if (x + readout->width() > plot->width()) x = pos.x() - 14 - readout->width();
  if (y + readout->height() > plot->height()) y = pos.y() - 14 - readout->height();
  readout->move(std::max(0, x), std::max(0, y));
  readout->show();
  readout->raise();
}

void ChartView::Impl::updateLegend() {
  plot->legend->clearItems();
  const bool show = legend_shown && curves.size() >= 2 && curves.size() <= 12;
  showLegend(plot, show);
  if (!show) return;
  for (auto& c : curves) (smoothing > 0 ? c->smooth : c->raw)->addToLegend();
}

void ChartView::Impl::refreshGraphs() {
  const QCPRange range = plot->xAxis->range();
  const int columns = std::max(64, plot->axisRect()->width());
  const bool all = range != reduced_range || columns != reduced_columns || log_y != reduced_log;
  for (auto& c : curves)
    if (all || c->dirty)
      c->reduce(range.lower, range.upper, columns, log_y, smoothing > 0, split, scratch);
  reduced_range = range;
  reduced_columns = columns;
  reduced_log = log_y;
}

// Non-finite points sit a few pixels inside the top (+inf, NaN) or bottom (−inf) edge.
void ChartView::Impl::updateEdges(bool force) {
  const QCPRange yr = plot->yAxis->range();
  double top = yr.upper, bottom = yr.lower;
  if (plot->axisRect()->height() > 30) {
    top = plot->yAxis->pixelToCoord(plot->yAxis->coordToPixel(yr.upper) + 6);
    bottom = plot->yAxis->pixelToCoord(plot->yAxis->coordToPixel(yr.lower) - 6);
  }
  const bool moved = top != edge_top || bottom != edge_bottom;
  edge_top = top;
  edge_bottom = bottom;
  for (auto& c : curves)
    if (force || moved || c->nf_dirty) c->placeNonFinite(top, bottom);
}

void ChartView::Impl::fillBand(Band& b) const {
  const auto fill = [&](QCPGraph* g, const std::vector<SeriesPoint>& pts) {
    QVector<QCPGraphData> data;
    data.reserve(static_cast<qsizetype>(pts.size()));
    for (const SeriesPoint& p : pts) {
      const double x = xOf(p, x_kind);
      if (std::isfinite(x))
        data.append(QCPGraphData(x, std::isfinite(p.value) && (!log_y || p.value > 0) ? p.value : kNaN));
    }
    g->data()->set(data, false);
  };
  fill(b.lo, b.lo_pts);
  fill(b.hi, b.hi_pts);
}

void ChartView::Impl::beforeReplot() {
  if (rescale_pending && follow) doRescale();
  rescale_pending = false;
  refreshGraphs();
  updateEdges(false);
}

std::optional<AxisRange> ChartView::Impl::xRange() const {
  std::optional<AxisRange> r;
  for (auto& c : curves)
    if (!c->pts.empty())
      r = rangeUnion(r, AxisRange{c->xAtRank(0), c->xAtRank(c->pts.size() - 1)});
  return r;
}

AxisRange ChartView::Impl::yRange() const {
  std::optional<AxisRange> data;
  if (ignore_outliers) {
    std::vector<std::span<const double>> values;
    for (auto& c : curves) values.emplace_back(c->fy);
    data = percentileRange(values, log_y);
  } else {
    for (auto& c : curves) data = rangeUnion(data, c->valueRange(log_y));
    for (const Band& b : bands)
      for (const auto* pts : {&b.lo_pts, &b.hi_pts})
        for (const SeriesPoint& p : *pts)
          if (std::isfinite(p.value) && (!log_y || p.value > 0))
            data = rangeUnion(data, AxisRange{p.value, p.value});
  }
  return autoscaleRange(data, log_y, ignore_outliers ? 0.10 : 0.05);
}

void ChartView::Impl::updateYPrecision(const QCPRange& r) {
  if (!log_y) plot->yAxis->setNumberPrecision(tickPrecision(r.lower, r.upper));
}

void ChartView::Impl::doRescale() {
  if (const auto x = xRange()) {
    double lo = x->lo, hi = x->hi;
    if (!(hi > lo)) lo -= 1, hi += 1;
    plot->xAxis->setRange(lo, hi);
  }
  const AxisRange y = yRange();
  plot->yAxis->setRange(y.lo, y.hi);
}

void ChartView::Impl::optionChangedRescale() {
  if (follow) doRescale();
  q->requestReplot();
}

bool ChartView::Impl::changeOption(bool& option, bool on, void (ChartHeader::*show)(bool)) {
  (header->*show)(on);
  if (on == option) return false;
  option = on;
  return true;
}

bool ChartView::Impl::markerX(double step, double* x) const {
  if (x_kind == XAxisKind::step) {
    *x = step;
    return true;
  }
  if (curves.empty() || curves[0]->pts.empty()) return false;
  const auto& p = curves[0]->pts;
  auto it = std::lower_bound(p.begin(), p.end(), step,
                             [](const SeriesPoint& a, double s) { return a.step < s; });
  if (it == p.end() || (it != p.begin() && step - (it - 1)->step < it->step - step)) --it;
  *x = xOf(*it, x_kind);
  return std::isfinite(*x);
}

void ChartView::Impl::positionMarkers() {
  for (size_t i = 0; i < markers.size(); ++i) {
    double x = 0;
    const bool ok = markerX(markers[i].step, &x);
    marker_lines[i].setVisible(ok);
    if (ok) marker_lines[i].moveTo(x);
  }
}

ChartView::ChartView(const QString& title, QWidget* parent)
    : PlotView(QSize(900, 350), parent), d_(new Impl) {
  d_->q = this;
  d_->title = title;
  d_->plot = plot();
  d_->buildUi();
  setSmoothing(d_->smoothing);  // syncs the slider
}

ChartView::~ChartView() {
  // The plot (a child) outlives d_: nothing of it may call back into d_ while it goes.
  d_->plot->removeEventFilter(d_->leave_filter);
  QObject::disconnect(d_->plot, nullptr, this, nullptr);
  QObject::disconnect(d_->plot->yAxis, nullptr, this, nullptr);
  delete d_;
}

int ChartView::addCurve(const QString& label, const QColor& color) {
  auto c = std::make_unique<ChartCurve>(label, color, d_->plot);
  c->applyStyle(d_->smoothing);
  d_->curves.push_back(std::move(c));
  d_->updateLegend();
  if (d_->curves.size() == 1) d_->positionMarkers();
  requestReplot();
  return static_cast<int>(d_->curves.size()) - 1;
}

int ChartView::curveCount() const {
  return static_cast<int>(d_->curves.size());
}

void ChartView::clearCurves() {
  d_->plot->clearGraphs();
  d_->curves.clear();
  d_->bands.clear();
  d_->updateLegend();
  d_->positionMarkers();
  d_->rescale_pending = true;
  requestReplot();
}

void ChartView::setCurveData(int curve, const std::vector<SeriesPoint>& points) {
  if (curve < 0 || curve >= curveCount()) return;
  ChartCurve& c = *d_->curves[static_cast<size_t>(curve)];
  if (!c.setPoints(points, d_->x_kind, d_->smoothing)) return;
  c.applyStyle(d_->smoothing);
  if (curve == 0 && !d_->markers.empty()) d_->positionMarkers();
  d_->rescale_pending = true;
  requestReplot();
}

void ChartView::setCurveBand(int curve, const std::vector<SeriesPoint>& lo,
                             const std::vector<SeriesPoint>& hi) {
  if (curve < 0 || curve >= curveCount()) return;
  auto it = std::find_if(d_->bands.begin(), d_->bands.end(),
                         [curve](const Impl::Band& b) { return b.curve == curve; });
  if (lo.empty() || hi.empty()) {
    if (it != d_->bands.end()) {
      d_->plot->removeGraph(it->lo);
      d_->plot->removeGraph(it->hi);
      d_->bands.erase(it);
    }
    requestReplot();
    return;
  }
  if (it == d_->bands.end()) {
    Impl::Band b;
    b.curve = curve;
    const QColor color = d_->curves[static_cast<size_t>(curve)]->color;
    b.lo = d_->plot->addGraph();
    b.hi = d_->plot->addGraph();
    for (QCPGraph* g : {b.lo, b.hi}) {
      g->setLayer(QStringLiteral("raw"));
      g->setPen(Qt::NoPen);
      g->removeFromLegend();
      g->setName(d_->curves[static_cast<size_t>(curve)]->label + QStringLiteral(" (band)"));
    }
    QColor fill = color;
    fill.setAlpha(45);
    b.hi->setBrush(fill);
    b.hi->setChannelFillGraph(b.lo);
    d_->bands.push_back(b);
    it = std::prev(d_->bands.end());
  }
  it->lo_pts = lo;
  it->hi_pts = hi;
  d_->fillBand(*it);
  d_->rescale_pending = true;
  requestReplot();
}

int ChartView::bandCount() const {
  return static_cast<int>(d_->bands.size());
}

int64_t ChartView::pointCount(int curve) const {
  if (curve < 0 || curve >= curveCount()) return 0;
  return static_cast<int64_t>(d_->curves[static_cast<size_t>(curve)]->pts.size());
}

void ChartView::addThreshold(double y, const QString& label) {
  const RuleLine rule = addRuleLine(d_->plot, Qt::Horizontal, y, label, QColor(200, 80, 0));
  rule.label->setFont(d_->plot->xAxis->tickLabelFont());
  requestReplot();
}

void ChartView::setMarkers(const std::vector<ChartMarker>& markers) {
  for (const RuleLine& rule : d_->marker_lines) rule.remove();
  d_->marker_lines.clear();
  d_->markers = markers;
  for (const auto& m : markers) {
    const RuleLine rule = addRuleLine(d_->plot, Qt::Vertical, m.step, m.label, QColor(90, 90, 160));
    rule.label->setFont(d_->plot->xAxis->tickLabelFont());
    d_->marker_lines.push_back(rule);
  }
  d_->positionMarkers();
  requestReplot();
}

int ChartView::markerCount() const {
  return static_cast<int>(d_->markers.size());
}

void ChartView::setXAxis(XAxisKind kind) {
  d_->header->showXAxis(kind);
  if (kind == d_->x_kind) return;
  d_->x_kind = kind;
  d_->plot->xAxis->setLabel(xAxisName(kind));
  for (auto& c : d_->curves) {
    c->recomputeX(kind);
    c->rebuildDrawn();
  }
  for (auto& b : d_->bands) d_->fillBand(b);
  d_->positionMarkers();
  // The old x range means nothing in the new unit.
  rescale();
  requestReplot();
}

void ChartView::setXAxisChoosable(bool on) {
  d_->header->setXAxisChoosable(on);
}

void ChartView::setLegendShown(bool on) {
  d_->legend_shown = on;
  d_->updateLegend();
  requestReplot();
}

XAxisKind ChartView::xAxis() const {
  return d_->x_kind;
}

void ChartView::setSmoothing(double weight) {
  if (!(weight > 0)) weight = 0;  // also NaN
  weight = std::min(weight, 0.999);
  d_->header->showSmoothing(weight);
  if (weight == d_->smoothing) return;
  d_->smoothing = weight;
  for (auto& c : d_->curves) {
    c->recomputeEma(weight, 0);
    c->rebuildSmoothedDrawn();
    c->applyStyle(weight);
  }
  d_->updateLegend();
  requestReplot();
}

double ChartView::smoothing() const {
  return d_->smoothing;
}

void ChartView::setLogY(bool on) {
  if (!d_->changeOption(d_->log_y, on, &ChartHeader::showLogY)) return;
  QCPAxis* y = d_->plot->yAxis;
  setLogScale(y, on);
  if (on) {
    y->setNumberFormat(QStringLiteral("eb"));
    y->setNumberPrecision(0);
  } else {
    y->setNumberFormat(QStringLiteral("gb"));
    d_->updateYPrecision(y->range());
  }
  for (auto& c : d_->curves) c->dirty = true;
  for (auto& b : d_->bands) d_->fillBand(b);
  d_->optionChangedRescale();
}

bool ChartView::logY() const {
  return d_->log_y;
}

void ChartView::setIgnoreOutliers(bool on) {
  if (d_->changeOption(d_->ignore_outliers, on, &ChartHeader::showIgnoreOutliers))
    d_->optionChangedRescale();
}

bool ChartView::ignoreOutliers() const {
  return d_->ignore_outliers;
}

void ChartView::rescale() {
  d_->follow = true;
  d_->rescale_pending = false;
  d_->doRescale();
  requestReplot();
}

void ChartView::prepareExport() {
  // savePng draws without a replot (no beforeReplot): bring the drawn data up to date first.
  d_->beforeReplot();
}

bool ChartView::exportCsv(const QString& path, QString* error) {
  // One row per distinct step over all curves: step, wall, tokens (from the first curve
  // holding the step), then each curve's value (empty where it has none).
  return writeExportFile(
      path,
      [this](QIODevice& file) {
        QString header = QStringLiteral("step,wall,tokens");
        for (auto& c : d_->curves) header += QLatin1Char(',') + csvField(c->label);
        header += QLatin1Char('\n');
        file.write(header.toUtf8());
        std::vector<std::vector<double>> steps(d_->curves.size());
        for (size_t ci = 0; ci < d_->curves.size(); ++ci) {
          steps[ci].reserve(d_->curves[ci]->pts.size());
          for (const SeriesPoint& p : d_->curves[ci]->pts) steps[ci].push_back(p.step);
        }
        QString row;
        joinOnKeys(steps, [&](double, const std::vector<size_t>& at) {
          const auto held = [&](size_t ci) -> const SeriesPoint& {
            return d_->curves[ci]->pts[at[ci]];
          };
          const size_t first = static_cast<size_t>(
              std::find_if(at.begin(), at.end(), [](size_t i) { return i != kNoPoint; }) -
              at.begin());
          row = csvNumber(held(first).step) + QLatin1Char(',') + csvNumber(held(first).wall) +
                QLatin1Char(',') + csvNumber(held(first).tokens);
          for (size_t ci = 0; ci < at.size(); ++ci) {
            row += QLatin1Char(',');
            if (at[ci] != kNoPoint) row += csvNumber(held(ci).value);
          }
          row += QLatin1Char('\n');
          file.write(row.toUtf8());
        });
      },
      error);
}

QString ChartView::readoutAt(double pixel_x) const {
  const double x = d_->plot->xAxis->pixelToCoord(pixel_x);
  if (!std::isfinite(x)) return {};
  // The point nearest to x over all curves sets the header.
  const SeriesPoint* best = nullptr;
  double best_dist = 0;
  std::vector<std::pair<const ChartCurve*, size_t>> nearest;
  for (auto& c : d_->curves) {
    if (c->pts.empty()) continue;
    const size_t i = c->nearest(x);
    nearest.emplace_back(c.get(), i);
    const double dist = std::fabs(c->xs[i] - x);
    if (!best || dist < best_dist) best = &c->pts[i], best_dist = dist;
  }
  if (!best) return {};
  QString text = QStringLiteral("step %1 · wall %2 · tokens %3")
                     .arg(QString::number(best->step, 'g', 12), formatWall(best->wall),
                          QString::number(best->tokens, 'g', 12));
  int shown = 0;
  for (auto [c, i] : nearest) {
    if (shown++ == kReadoutMaxCurves) {
      text += QStringLiteral("\n… %1 more").arg(nearest.size() - kReadoutMaxCurves);
      break;
    }
    const SeriesPoint& p = c->pts[i];
    text += QLatin1Char('\n') + c->label + QStringLiteral(": ") + formatValue(p.value);
    if (std::isfinite(p.value) && !c->sm.empty())
      text += QStringLiteral(" (smoothed %1)").arg(formatValue(c->sm[i]));
    if (p.step != best->step) text += QStringLiteral(" @ step %1").arg(p.step, 0, 'g', 12);
    if (d_->log_y && std::isfinite(p.value) && p.value <= 0)
      text += QStringLiteral(" (≤ 0: not drawn on log y)");
  }
  // Markers within a few pixels.
  for (size_t m = 0; m < d_->markers.size(); ++m) {
    double mx = 0;
    if (!d_->markerX(d_->markers[m].step, &mx)) continue;
    if (std::fabs(d_->plot->xAxis->coordToPixel(mx) - pixel_x) <= 4)
      text += QStringLiteral("\n▏") + d_->markers[m].label;
  }
  return text;
}

double ChartView::replotNow() {
  QElapsedTimer timer;
  timer.start();
  d_->plot->replot(QCustomPlot::rpImmediateRefresh);
  return static_cast<double>(timer.nsecsElapsed()) * 1e-6;
}

void ChartView::requestReplot() {
  queueReplot(d_->plot);
}

QString ChartView::title() const {
  return d_->title;
}

void ChartView::setMessage(const QString& text) {
  if (text.isEmpty()) {
    if (d_->message) d_->plot->removeItem(d_->message);
    d_->message = nullptr;
  } else {
    if (!d_->message) {
      d_->message = new QCPItemText(d_->plot);
      d_->message->position->setType(QCPItemPosition::ptAxisRectRatio);
      d_->message->position->setCoords(0.5, 0.5);
      d_->message->setPositionAlignment(Qt::AlignCenter);
      d_->message->setColor(QColor(0x66, 0x66, 0x66));
      d_->message->setClipToAxisRect(false);
    }
    d_->message->setText(text);
  }
  requestReplot();
}

QString ChartView::message() const {
  return d_->message ? d_->message->text() : QString();
}

}  // namespace fp8rl::ui
