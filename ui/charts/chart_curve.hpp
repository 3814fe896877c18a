// One curve of a ChartView: the points as given and what is derived from them for drawing —
// x for the chosen axis and the x order, the debiased EMA, the finite points in x order
// (indexed for the min/max reduction) and the non-finite ones — and the three graphs that draw
// it: the raw line, the smoothed line and the non-finite markers.
#pragma once

#include <QColor>
#include <QString>
#include <vector>

#include "ui/charts/chart_math.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/charts/downsample.hpp"
#include "ui/data/run_data.hpp"

class QCPGraph;
class QCustomPlot;

namespace fp8rl::ui {

// The x of p on an x axis of that kind.
double xOf(const SeriesPoint& p, XAxisKind kind);

struct ChartCurve {
  // Adds the curve's three graphs to plot (raw on layer "raw", markers on layer "nonfinite").
  ChartCurve(const QString& label, const QColor& color, QCustomPlot* plot);

  QString label;
  QColor color;
  std::vector<SeriesPoint> pts;  // as given, by step
  std::vector<double> xs;        // x of pts[i] for the current x kind
  std::vector<size_t> order;     // empty when xs is ascending; else pts indices sorted by x
  // EMA (pts order): sm[i] is the debiased smoothed value at pts[i] (the raw value where that
  // is not finite); empty when smoothing is 0. The state is kept so a tail continues it.
  std::vector<double> sm;
  DebiasedEma ema;
  // The drawable (finite) points in x order: x, raw value, smoothed value.
  std::vector<double> fx, fy, fs;
  MinMaxIndex fy_index, fs_index;
  // Non-finite points in x order: x and the value (nan, inf or -inf).
  std::vector<double> nf_x, nf_v;
  QCPGraph* raw = nullptr;
  QCPGraph* smooth = nullptr;
  QCPGraph* nonfinite = nullptr;
  bool dirty = true;     // the drawn lines must be recomputed
  bool nf_dirty = true;  // the non-finite markers must be recomputed

  // Takes points (sorted by step) for x axis kind and EMA weight smoothing. When they extend
  // what the curve holds (same first and last step of the held part) only the tail is
  // processed. False when nothing changed (same size, same last value).
  bool setPoints(const std::vector<SeriesPoint>& points, XAxisKind kind, double smoothing);
  // Recomputes x for another axis kind (then rebuildDrawn()).
  void recomputeX(XAxisKind kind);
  // Recomputes the EMA at weight smoothing (0: none) from pts[from] on.
  void recomputeEma(double smoothing, size_t from);
  // Recomputes the finite / non-finite split from pts, xs and sm.
  void rebuildDrawn();
  // Recomputes the smoothed values of the finite points only (after an EMA weight change).
  void rebuildSmoothedDrawn();

  size_t ptsIndex(size_t rank) const { return order.empty() ? rank : order[rank]; }
  double xAtRank(size_t rank) const { return xs[ptsIndex(rank)]; }
  // pts index of the point nearest to x (pts must not be empty).
  size_t nearest(double x) const { return nearestIndex(xs, order, x); }
  // Smallest and largest finite value (only the positive ones when positive_only).
  std::optional<AxisRange> valueRange(bool positive_only) const;

  // Pens and visibility: a raw line faint behind the smoothed one when smoothing > 0; no
  // antialiasing for long curves.
  void applyStyle(double smoothing) const;
  // Fills the raw and smoothed graphs with the reduction of the points in x range [lo, hi]
  // over `columns` pixel columns. On log y, values <= 0 become gaps. split and scratch are
  // reused buffers.
  void reduce(double lo, double hi, int columns, bool log_y, bool smoothed, ColumnSplit& split,
              std::vector<size_t>& scratch);
  // Puts the non-finite markers at y = top (+inf, NaN) or bottom (−inf).
  void placeNonFinite(double top, double bottom);

 private:
  // Adds pts[i] to the drawn points when finite, else to the non-finite markers.
  void pushDrawn(size_t i);
  // The points from `from` on were appended and xs is still ascending.
  void appendDrawn(size_t from);
};

}  // namespace fp8rl::ui
