// The arithmetic behind the chart widgets, Qt-free (std only): the debiased EMA of a line, the
// x order of a line and its point nearest to an x, autoscale ranges (full or ignoring outliers,
// linear or log), the tick precision that keeps neighbouring y ticks distinct, the rows of a
// table joining series on their steps, the geometry of histogram bars and where heatmap columns
// go. The min/max reduction of long lines for drawing is in downsample.hpp.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace fp8rl::ui {

// A closed interval [lo, hi] of axis values.
struct AxisRange {
  double lo = 0;
  double hi = 0;
  friend bool operator==(const AxisRange&, const AxisRange&) = default;
};

// ---- Lines

// TensorBoard's debiased exponential moving average: last = last · w + (1 − w) · v, shown
// divided by 1 − w^n after n finite values, so the first smoothed value is the first value.
// Non-finite values pass through unsmoothed and do not enter the average. Copy the state into
// a local for a loop: stores to an output array could alias it and force reloads every step.
struct DebiasedEma {
  double weight = 0;  // w in [0, 1)
  double last = 0;    // the undebiased average so far
  double wpow = 1;    // w^n

  // The smoothed value at v (v itself when not finite); advances the average over v.
  double next(double v) {
    if (!std::isfinite(v)) return v;
    last = last * weight + (1 - weight) * v;
    // w^n: flushed to 0 once negligible; left alone it sticks at the smallest subnormal
    // (x · w rounds back up to it) and every multiply takes the slow subnormal path.
    wpow = wpow > 1e-300 ? wpow * weight : 0.0;
    return last / (1 - wpow);
  }
};

// order := the indices of xs sorted by x, ties in index order; left empty when xs already
// ascends (the common case: a line drawn against its steps).
void ascendingOrder(const std::vector<double>& xs, std::vector<size_t>& order);

// The index into xs of the value nearest to x, where order lists xs's indices by ascending x
// (empty: xs ascends itself); between two equally near ones the lower x. xs must not be empty.
size_t nearestIndex(const std::vector<double>& xs, const std::vector<size_t>& order, double x);

// ---- Axis ranges

// The smallest and the largest value (only the positive ones when positive_only); NaN and ±inf
// are skipped. nullopt when no value qualifies.
std::optional<AxisRange> finiteRange(std::span<const double> values, bool positive_only);

// The union of two ranges, either of which may be missing.
std::optional<AxisRange> rangeUnion(const std::optional<AxisRange>& a,
                                     const std::optional<AxisRange>& b);

// Values sampled (with a stride) for percentileRange: bounds the cost of a million-point line.
inline constexpr size_t kPercentileSample = 262144;

// The 1st and 99th percentile of the values of all series together (only the positive ones
// when positive_only), taken from every stride-th value of each series, the stride chosen so
// about max_sample values are sorted. Values must be finite. nullopt when none qualifies.
std::optional<AxisRange> percentileRange(const std::vector<std::span<const double>>& series,
                                          bool positive_only,
                                          size_t max_sample = kPercentileSample);

// The y range an autoscale shows for data spanning `data`: margin × the span added on both
// sides (the span in decades on a log axis, so data must then be positive). A flat line gets
// ±10 % of its value (at least 1e-9), or ±margin decades on a log axis; no data: [0, 1], or
// [0.1, 10] on a log axis.
AxisRange autoscaleRange(const std::optional<AxisRange>& data, bool log, double margin);

// Significant digits for linear tick labels over [lo, hi] (about five ticks) so that
// neighbouring ticks read differently: a line moving by 1e-8 around 1 otherwise shows "1" on
// every tick. 6 to 15.
int tickPrecision(double lo, double hi);

// ---- Tables

// Marks a series without a point at a row's key in joinOnKeys.
inline constexpr size_t kNoPoint = SIZE_MAX;

// Joins series on their keys (the steps of a CSV export): calls row(key, at) once per distinct
// key over all series, keys ascending, where at[s] is the index of series s's first point with
// that key, or kNoPoint. keys[s] holds series s's keys, in any order; none may be NaN.
void joinOnKeys(const std::vector<std::vector<double>>& keys,
                  const std::function<void(double key, const std::vector<size_t>& at)>& row);

// ---- Histograms (edges: bins + 1; counts: bins + 2, underflow first and overflow last)

// Whether edges and counts make a drawable histogram: at least one bin, finite and strictly
// increasing edges (positive on a log axis), counts one more than edges, none negative.
bool histogramWellFormed(const std::vector<double>& edges, const std::vector<int64_t>& counts,
                           bool log_x);

// Bar heights, one per count: the counts, or when normalized their fractions of the total
// (all 0 for an empty histogram).
std::vector<double> barHeights(const std::vector<int64_t>& counts, bool normalized);

// The outer ends of the underflow and overflow bars: one bin beyond the first and the last
// edge (one bin's ratio on a log axis). edges: at least two.
double underflowEdge(const std::vector<double>& edges, bool log_x);
double overflowEdge(const std::vector<double>& edges, bool log_x);

// The middle of [a, b] as the axis shows it (geometric on a log axis).
double axisMidpoint(double a, double b, bool log_x);

// [lo, hi] widened by 2 % of the span on each side (of the ratio hi / lo on a log axis);
// [0, 1] ([0.1, 10] on a log axis) when empty (!(hi > lo)).
AxisRange paddedBinsRange(double lo, double hi, bool log_x);

// ---- Heatmaps

// At most this many grid cells when placing irregular steps on a regular grid.
inline constexpr double kMaxGridCells = 8192;

// Where the columns of a heatmap go along x.
struct HeatmapColumns {
  int cells = 0;             // cells along x
  std::vector<int> cell_of;  // data column → its cell
  // x of the first and the last cell's centre; with a single cell, that cell's two edges.
  AxisRange cell_range;
  AxisRange extent;  // x covered by the cells (the axis range that shows them all)
};

// Places columns at steps (sorted): on a regular grid of their smallest spacing when that has
// at most max(max_cells, steps.size()) cells (the grid cells between steps stay empty), else
// one cell per step, evenly over the step range. A single step (or all steps equal) gets one
// cell of width 1 around it. Empty steps: no cells.
HeatmapColumns placeColumns(const std::vector<double>& steps, double max_cells = kMaxGridCells);

// The colour range of a heatmap's values: the finite ones (the positive ones for a log scale);
// [0, 1] ([1, 10] log) when there are none; widened by ±0.5 (by a factor 2 log) when flat.
AxisRange colourRange(std::span<const double> values, bool log);

}  // namespace fp8rl::ui
