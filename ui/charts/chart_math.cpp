#include "ui/charts/chart_math.hpp"

#include <algorithm>
#include <limits>
#include <tuple>

namespace fp8rl::ui {

void ascendingOrder(const std::vector<double>& xs, std::vector<size_t>& order) {
  order.clear();
  if (std::is_sorted(xs.begin(), xs.end())) return;
  order.resize(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return xs[a] < xs[b]; });
}

size_t nearestIndex(const std::vector<double>& xs, const std::vector<size_t>& order, double x) {
  auto index = [&](size_t rank) { return order.empty() ? rank : order[rank]; };
  auto x_at = [&](size_t rank) { return xs[index(rank)]; };
  size_t lo = 0, hi = xs.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (x_at(mid) < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == xs.size()) return index(lo - 1);
  if (lo > 0 && x - x_at(lo - 1) <= x_at(lo) - x) return index(lo - 1);
  return index(lo);
}

std::optional<AxisRange> finiteRange(std::span<const double> values, bool positive_only) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values)
    if (std::isfinite(v) && (!positive_only || v > 0)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!(lo <= hi)) return std::nullopt;
  return AxisRange{lo, hi};
}

std::optional<AxisRange> rangeUnion(const std::optional<AxisRange>& a,
                                     const std::optional<AxisRange>& b) {
  if (!a) return b;
  if (!b) return a;
  return AxisRange{std::min(a->lo, b->lo), std::max(a->hi, b->hi)};
}

std::optional<AxisRange> percentileRange(const std::vector<std::span<const double>>& series,
                                          bool positive_only, size_t max_sample) {
  size_t total = 0;
  for (const auto& s : series) total += s.size();
  if (total == 0) return std::nullopt;
  const size_t stride = std::max<size_t>(1, total / max_sample);
  std::vector<double> v;
  v.reserve(std::min(total, max_sample + series.size()));
  for (const auto& s : series)
    for (size_t i = 0; i < s.size(); i += stride)
      if (!positive_only || s[i] > 0) v.push_back(s[i]);
  if (v.empty()) return std::nullopt;
  const auto lo_at = v.begin() + static_cast<ptrdiff_t>(0.01 * static_cast<double>(v.size() - 1));
  const auto hi_at =
      v.begin() + static_cast<ptrdiff_t>(std::ceil(0.99 * static_cast<double>(v.size() - 1)));
  std::nth_element(v.begin(), lo_at, v.end());
  const double lo = *lo_at;
  std::nth_element(v.begin(), hi_at, v.end());
  return AxisRange{lo, *hi_at};
}

AxisRange autoscaleRange(const std::optional<AxisRange>& data, bool log, double margin) {
  if (log) {
    if (!data) return {0.1, 10};
    const double a = std::log10(data->lo), b = std::log10(data->hi);
    const double span = b > a ? b - a : 1.0;
    return {std::pow(10.0, a - margin * span), std::pow(10.0, b + margin * span)};
  }
  if (!data) return {0, 1};
  const double mn = data->lo, mx = data->hi;
  if (mx > mn) {
    const double span = mx - mn;
    return {mn - margin * span, mx + margin * span};
  }
  const double pad = std::max(std::fabs(mn) * 0.1, 1e-9);
  return {mn - pad, mx + pad};
}

int tickPrecision(double lo, double hi) {
  const double magnitude = std::max(std::fabs(lo), std::fabs(hi));
  const double step = (hi - lo) / 5.0;  // about the ticker's spacing
  if (magnitude > 0 && step > 0 && std::isfinite(magnitude / step))
    return std::clamp(static_cast<int>(std::ceil(std::log10(magnitude / step))) + 1, 6, 15);
  return 6;
}

void joinOnKeys(const std::vector<std::vector<double>>& keys,
                  const std::function<void(double key, const std::vector<size_t>& at)>& row) {
  std::vector<std::tuple<double, size_t, size_t>> all;  // key, series, point
  size_t total = 0;
  for (const auto& k : keys) total += k.size();
  all.reserve(total);
  for (size_t s = 0; s < keys.size(); ++s)
    for (size_t i = 0; i < keys[s].size(); ++i) all.emplace_back(keys[s][i], s, i);
  std::sort(all.begin(), all.end());
  std::vector<size_t> at(keys.size());
  for (size_t a = 0; a < all.size();) {
    const double key = std::get<0>(all[a]);
    std::fill(at.begin(), at.end(), kNoPoint);
    size_t b = a;
    for (; b < all.size() && std::get<0>(all[b]) == key; ++b) {
      const auto& [k, s, i] = all[b];
      if (at[s] == kNoPoint) at[s] = i;
    }
    row(key, at);
    a = b;
  }
}

bool histogramWellFormed(const std::vector<double>& edges, const std::vector<int64_t>& counts,
                           bool log_x) {
  if (edges.size() < 2 || counts.size() != edges.size() + 1) return false;
  for (size_t i = 0; i < edges.size(); ++i) {
    if (!std::isfinite(edges[i])) return false;
    if (i > 0 && !(edges[i] > edges[i - 1])) return false;
  }
  if (log_x && !(edges.front() > 0)) return false;
  return std::none_of(counts.begin(), counts.end(), [](int64_t c) { return c < 0; });
}

std::vector<double> barHeights(const std::vector<int64_t>& counts, bool normalized) {
  std::vector<double> h(counts.size());
  double total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    h[i] = static_cast<double>(counts[i]);
    total += h[i];
  }
  if (normalized)
    for (double& v : h) v = total > 0 ? v / total : 0.0;
  return h;
}

double underflowEdge(const std::vector<double>& edges, bool log_x) {
  const double e0 = edges[0], e1 = edges[1];
  return log_x ? e0 * (e0 / e1) : e0 - (e1 - e0);
}

double overflowEdge(const std::vector<double>& edges, bool log_x) {
  const size_t n = edges.size();
  const double a = edges[n - 2], b = edges[n - 1];
  return log_x ? b * (b / a) : b + (b - a);
}

double axisMidpoint(double a, double b, bool log_x) {
  return log_x ? std::sqrt(a * b) : (a + b) / 2;
}

AxisRange paddedBinsRange(double lo, double hi, bool log_x) {
  if (!(hi > lo)) return log_x ? AxisRange{0.1, 10} : AxisRange{0, 1};
  if (log_x) {
    const double pad = std::pow(hi / lo, 0.02);
    return {lo / pad, hi * pad};
  }
  const double pad = (hi - lo) * 0.02;
  return {lo - pad, hi + pad};
}

HeatmapColumns placeColumns(const std::vector<double>& steps, double max_cells) {
  HeatmapColumns p;
  const size_t cols = steps.size();
  if (cols == 0) return p;
  const double first = steps.front(), last = steps.back();
  double spacing = std::numeric_limits<double>::infinity();
  for (size_t c = 1; c < cols; ++c) {
    const double diff = steps[c] - steps[c - 1];
    if (diff > 0) spacing = std::min(spacing, diff);
  }
  p.cells = 1;
  p.cell_of.assign(cols, 0);
  p.cell_range = p.extent = {first - 0.5, first + 0.5};
  if (!(cols > 1 && last > first && std::isfinite(spacing))) return p;
  const double grid = std::round((last - first) / spacing) + 1;
  if (grid <= std::max(max_cells, static_cast<double>(cols))) {
    p.cells = static_cast<int>(grid);
    for (size_t c = 0; c < cols; ++c)
      p.cell_of[c] =
          std::clamp(static_cast<int>(std::lround((steps[c] - first) / spacing)), 0, p.cells - 1);
  } else {
    p.cells = static_cast<int>(cols);
    for (size_t c = 0; c < cols; ++c) p.cell_of[c] = static_cast<int>(c);
  }
  p.cell_range = {first, last};
  const double half_cell = (last - first) / (p.cells - 1) / 2;
  p.extent = {first - half_cell, last + half_cell};
  return p;
}

AxisRange colourRange(std::span<const double> values, bool log) {
  AxisRange r = finiteRange(values, log).value_or(log ? AxisRange{1, 10} : AxisRange{0, 1});
  if (!(r.hi > r.lo)) {
    if (log)
      r.lo /= 2, r.hi *= 2;
    else
      r.lo -= 0.5, r.hi += 0.5;
  }
  return r;
}

}  // namespace fp8rl::ui
