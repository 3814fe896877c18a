#include "ui/charts/chart_curve.hpp"

#include <qcustomplot.h>

#include <cmath>
#include <limits>

namespace fp8rl::ui {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Curves with more finite points than this are drawn without antialiasing.
constexpr size_t kAntialiasLimit = 20000;
constexpr int kRawAlpha = 60;

}  // namespace

double xOf(const SeriesPoint& p, XAxisKind kind) {
  switch (kind) {
    case XAxisKind::wall:
      return p.wall;
    case XAxisKind::tokens:
      return p.tokens;
    case XAxisKind::step:
      break;
  }
  return p.step;
}

ChartCurve::ChartCurve(const QString& name, const QColor& line_color, QCustomPlot* plot)
    : label(name), color(line_color) {
  raw = plot->addGraph();
  raw->setLayer(QStringLiteral("raw"));
  raw->setName(label);
  smooth = plot->addGraph();
  smooth->setName(label);
  nonfinite = plot->addGraph();
  nonfinite->setLayer(QStringLiteral("nonfinite"));
  nonfinite->setName(label + QStringLiteral(" (non-finite)"));
  nonfinite->setLineStyle(QCPGraph::lsNone);
  nonfinite->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssTriangle, QColor(220, 0, 0), QColor(220, 0, 0), 8));
  nonfinite->setPen(QPen(QColor(220, 0, 0)));
}

bool ChartCurve::setPoints(const std::vector<SeriesPoint>& points, XAxisKind kind,
                           double smoothing) {
  const size_t n = pts.size();
  const bool same_start = n > 0 && points.size() >= n && points[0].step == pts[0].step &&
                          points[n - 1].step == pts[n - 1].step;
  if (same_start && points.size() == n) {
    // Nothing new (the owner pushes the whole series on every refresh); a changed last value
    // still rebuilds.
    const double a = points[n - 1].value, b = pts[n - 1].value;
    if (a == b || (std::isnan(a) && std::isnan(b))) return false;
  }
  bool extended = false, appended = false;
  if (same_start && points.size() > n && order.empty()) {
    extended = true;
    pts.insert(pts.end(), points.begin() + static_cast<ptrdiff_t>(n), points.end());
    xs.resize(pts.size());
    bool ascending = true;
    for (size_t i = n; i < pts.size(); ++i) {
      double x = xOf(pts[i], kind);
      if (!std::isfinite(x)) x = xs[i - 1];
      xs[i] = x;
      if (x < xs[i - 1]) ascending = false;
    }
    recomputeEma(smoothing, n);
    if (ascending) {
      appendDrawn(n);
      appended = true;
    }
  }
  if (!appended) {
    if (!extended) {
      pts = points;
      recomputeEma(smoothing, 0);
    }
    recomputeX(kind);
    rebuildDrawn();
  }
  return true;
}

void ChartCurve::recomputeX(XAxisKind kind) {
  const size_t n = pts.size();
  xs.resize(n);
  for (size_t i = 0; i < n; ++i) {
    double x = xOf(pts[i], kind);
    if (!std::isfinite(x)) x = i > 0 ? xs[i - 1] : 0.0;  // keeps the sort well-defined
    xs[i] = x;
  }
  ascendingOrder(xs, order);
}

void ChartCurve::recomputeEma(double smoothing, size_t from) {
  if (smoothing <= 0) {
    sm.clear();
    ema = {};
    return;
  }
  if (from == 0) ema = DebiasedEma{smoothing};
  sm.resize(pts.size());
  DebiasedEma e = ema;  // a local: see DebiasedEma
  for (size_t i = from; i < pts.size(); ++i) sm[i] = e.next(pts[i].value);
  ema = e;
}

void ChartCurve::rebuildDrawn() {
  fx.clear();
  fy.clear();
  fs.clear();
  nf_x.clear();
  nf_v.clear();
  fx.reserve(pts.size());
  fy.reserve(pts.size());
  if (!sm.empty()) fs.reserve(pts.size());
  for (size_t r = 0; r < pts.size(); ++r) pushDrawn(ptsIndex(r));
  fy_index.rebuild(fy);
  fs_index.rebuild(fs);
  dirty = nf_dirty = true;
}

void ChartCurve::pushDrawn(size_t i) {
  const double v = pts[i].value;
  if (std::isfinite(v)) {
    fx.push_back(xs[i]);
    fy.push_back(v);
    if (!sm.empty()) fs.push_back(sm[i]);
  } else {
    nf_x.push_back(xs[i]);
    nf_v.push_back(v);
    nf_dirty = true;
  }
}

void ChartCurve::appendDrawn(size_t from) {
  for (size_t i = from; i < pts.size(); ++i) pushDrawn(i);
  fy_index.extend(fy);
  fs_index.extend(fs);
  dirty = true;
}

void ChartCurve::rebuildSmoothedDrawn() {
  fs.clear();
  if (!sm.empty()) {
    fs.reserve(fx.size());
    for (size_t r = 0; r < pts.size(); ++r) {
      const size_t i = ptsIndex(r);
      if (std::isfinite(pts[i].value)) fs.push_back(sm[i]);
    }
  }
  fs_index.rebuild(fs);
  dirty = true;
}

std::optional<AxisRange> ChartCurve::valueRange(bool positive_only) const {
  if (positive_only) return finiteRange(fy, true);
  if (fy.empty()) return std::nullopt;
  const auto [i, j] = fy_index.argminmax(fy, 0, fy.size());
  return AxisRange{fy[i], fy[j]};
}

void ChartCurve::applyStyle(double smoothing) const {
  const bool smoothed = smoothing > 0;
  QColor faint = color;
  faint.setAlpha(kRawAlpha);
  raw->setPen(QPen(smoothed ? faint : color, 1));
  smooth->setPen(QPen(color, 1));
  smooth->setVisible(smoothed);
  const bool aa = fx.size() <= kAntialiasLimit;
  raw->setAntialiased(aa);
  smooth->setAntialiased(aa);
}

void ChartCurve::reduce(double lo, double hi, int columns, bool log_y, bool smoothed,
                        ColumnSplit& split, std::vector<size_t>& scratch) {
  splitColumns(fx, lo, hi, columns, split);  // shared by both lines
  auto fill = [&](QCPGraph* g, const std::vector<double>& y, const MinMaxIndex& index) {
    reduceMinMax(y, index, split, scratch);
    QVector<QCPGraphData> data(static_cast<qsizetype>(scratch.size()));
    for (size_t k = 0; k < scratch.size(); ++k) {
      const size_t i = scratch[k];
      // Log y: values <= 0 are not drawable; NaN leaves a gap in the line.
      data[static_cast<qsizetype>(k)] = QCPGraphData(fx[i], log_y && y[i] <= 0 ? kNaN : y[i]);
    }
    g->data()->set(data, true);
  };
  fill(raw, fy, fy_index);
  if (smoothed)
    fill(smooth, fs, fs_index);
  else
    smooth->data()->clear();
  dirty = false;
}

void ChartCurve::placeNonFinite(double top, double bottom) {
  QVector<QCPGraphData> data(static_cast<qsizetype>(nf_x.size()));
  for (size_t i = 0; i < nf_x.size(); ++i)
    data[static_cast<qsizetype>(i)] = QCPGraphData(nf_x[i], nf_v[i] < 0 ? bottom : top);
  nonfinite->data()->set(data, true);
  nf_dirty = false;
}

}  // namespace fp8rl::ui
