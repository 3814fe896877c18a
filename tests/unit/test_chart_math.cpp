// The charts' arithmetic without Qt widgets: the debiased EMA, x order and nearest point,
// autoscale ranges (full, 1st–99th percentile, log), tick precision, joining series on steps,
// histogram bar geometry, heatmap column placement and colour range, and the min/max reduction
// of long lines (a spike among a million points survives).
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "ui/charts/chart_math.hpp"
#include "ui/charts/downsample.hpp"

namespace fp8rl::ui {

// Read by QCOMPARE when two ranges differ.
char* toString(const AxisRange& r) {
  return QTest::toString(QStringLiteral("[%1, %2]").arg(r.lo, 0, 'g', 17).arg(r.hi, 0, 'g', 17));
}

}  // namespace fp8rl::ui

using namespace fp8rl::ui;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The range, or [nan, nan] (which compares unequal to any) when there is none.
AxisRange got(const std::optional<AxisRange>& r) {
  return r.value_or(AxisRange{kNaN, kNaN});
}

}  // namespace

class TestChartMath : public QObject {
  Q_OBJECT

 private slots:
  void emaDebiased();
  void orderAndNearest();
  void valueRanges();
  void percentileRangeCases();
  void autoscaleRangeCases();
  void tickPrecisionCases();
  void joinOnKeysCases();
  void histogramGeometry();
  void heatmapColumns();
  void colourRangeCases();
  void reductionKeepsSpike();
  void reductionSmall();
};

void TestChartMath::emaDebiased() {
  DebiasedEma ema{0.9};
  QCOMPARE(ema.next(3.0), 3.0);  // debiased: the first smoothed value is the first value
  const double second = ema.next(5.0);
  QVERIFY(std::isnan(ema.next(kNaN)));  // passes through, does not enter
  QCOMPARE(ema.next(kInf), kInf);
  const double third = ema.next(1.0);
  // TensorBoard: last = last·w + (1−w)·v, divided by 1 − w^n.
  double last = 0, want[3];
  int n = 0;
  for (double v : {3.0, 5.0, 1.0}) {
    last = last * 0.9 + 0.1 * v;
    ++n;
    want[n - 1] = last / (1 - std::pow(0.9, n));
  }
  QVERIFY(std::fabs(second - want[1]) < 1e-12);
  QVERIFY(std::fabs(third - want[2]) < 1e-12);
  // w^n is flushed to 0 once negligible instead of sticking at a subnormal.
  DebiasedEma flat{0.5};
  for (int i = 0; i < 1100; ++i) flat.next(2.0);
  QCOMPARE(flat.wpow, 0.0);
  QCOMPARE(flat.next(2.0), 2.0);
}

void TestChartMath::orderAndNearest() {
  std::vector<size_t> order = {7};
  ascendingOrder({1, 2, 2, 3}, order);
  QVERIFY(order.empty());  // already ascending: no permutation
  const std::vector<double> xs = {3, 1, 2, 1};
  ascendingOrder(xs, order);
  QCOMPARE(order, (std::vector<size_t>{1, 3, 2, 0}));  // ties keep their order

  const std::vector<double> line = {0, 10, 20};
  QCOMPARE(nearestIndex(line, {}, 4), size_t{0});
  QCOMPARE(nearestIndex(line, {}, 5), size_t{0});  // a tie goes to the lower x
  QCOMPARE(nearestIndex(line, {}, 6), size_t{1});
  QCOMPARE(nearestIndex(line, {}, -5), size_t{0});
  QCOMPARE(nearestIndex(line, {}, 100), size_t{2});
  const std::vector<double> shuffled = {20, 0, 10};
  QCOMPARE(nearestIndex(shuffled, {1, 2, 0}, 19), size_t{0});
  QCOMPARE(nearestIndex(shuffled, {1, 2, 0}, 4), size_t{1});
}

void TestChartMath::valueRanges() {
  const std::vector<double> v = {3, -1, kNaN, kInf, 2};
  QCOMPARE(got(finiteRange(v, false)), (AxisRange{-1, 3}));
  QCOMPARE(got(finiteRange(v, true)), (AxisRange{2, 3}));
  QVERIFY(!finiteRange(std::vector<double>{-1, 0}, true));
  QVERIFY(!finiteRange({}, false));
  QCOMPARE(got(rangeUnion(std::nullopt, AxisRange{1, 2})), (AxisRange{1, 2}));
  QCOMPARE(got(rangeUnion(AxisRange{1, 2}, std::nullopt)), (AxisRange{1, 2}));
  QCOMPARE(got(rangeUnion(AxisRange{1, 2}, AxisRange{0, 1.5})), (AxisRange{0, 2}));
  QVERIFY(!rangeUnion(std::nullopt, std::nullopt));
}

void TestChartMath::percentileRangeCases() {
  std::vector<double> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i);
  std::shuffle(v.begin(), v.end(), std::mt19937(5));
  // Sorted index floor(0.01 · 999) = 9 and ceil(0.99 · 999) = 990.
  QCOMPARE(got(percentileRange({v}, false)), (AxisRange{9, 990}));
  const std::span<const double> all(v);
  QCOMPARE(got(percentileRange({all.first(400), all.subspan(400)}, false)), (AxisRange{9, 990}));
  // An outlier moves the top by one rank, not to itself.
  std::vector<double> spiked(1000);
  for (size_t i = 0; i < spiked.size(); ++i) spiked[i] = double(i);
  spiked[500] = 1e9;
  QCOMPARE(got(percentileRange({spiked}, false)), (AxisRange{9, 991}));
  // Positive only: 1…499 (floor(0.01 · 498) = 4, ceil(0.99 · 498) = 494).
  std::vector<double> signed_values(1000);
  for (size_t i = 0; i < signed_values.size(); ++i) signed_values[i] = double(i) - 500;
  QCOMPARE(got(percentileRange({signed_values}, true)), (AxisRange{5, 495}));
  // Sampled with a stride: every 10th of 0…999 when 100 are wanted.
  std::vector<double> sorted(1000);
  for (size_t i = 0; i < sorted.size(); ++i) sorted[i] = double(i);
  QCOMPARE(got(percentileRange({sorted}, false, 100)), (AxisRange{0, 990}));
  QVERIFY(!percentileRange({}, false));
  QVERIFY(!percentileRange({std::vector<double>{-1, -2}}, true));
}

void TestChartMath::autoscaleRangeCases() {
  QCOMPARE(autoscaleRange(AxisRange{0, 10}, false, 0.05), (AxisRange{-0.5, 10.5}));
  const AxisRange flat = autoscaleRange(AxisRange{2, 2}, false, 0.05);  // ±10 %
  QCOMPARE(flat.lo, 1.8);
  QCOMPARE(flat.hi, 2.2);
  QCOMPARE(autoscaleRange(AxisRange{0, 0}, false, 0.05), (AxisRange{-1e-9, 1e-9}));
  QCOMPARE(autoscaleRange(std::nullopt, false, 0.05), (AxisRange{0, 1}));
  QCOMPARE(autoscaleRange(std::nullopt, true, 0.05), (AxisRange{0.1, 10}));
  const AxisRange log = autoscaleRange(AxisRange{1, 100}, true, 0.05);  // 0.05 · 2 decades
  QCOMPARE(log.lo, std::pow(10.0, -0.1));
  QCOMPARE(log.hi, std::pow(10.0, 2.1));
  const AxisRange log_flat = autoscaleRange(AxisRange{10, 10}, true, 0.1);  // ±0.1 decade
  QCOMPARE(log_flat.lo, std::pow(10.0, 0.9));
  QCOMPARE(log_flat.hi, std::pow(10.0, 1.1));
}

void TestChartMath::tickPrecisionCases() {
  QCOMPARE(tickPrecision(0, 1), 6);
  QCOMPARE(tickPrecision(1 - 1e-8, 1 + 1e-8), 10);  // ticks 4e-9 apart around 1
  QCOMPARE(tickPrecision(1 - 1e-15, 1 + 1e-15), 15);
  QCOMPARE(tickPrecision(1, 1), 6);
  QCOMPARE(tickPrecision(0, 0), 6);
  QCOMPARE(tickPrecision(kNaN, 1), 6);
}

void TestChartMath::joinOnKeysCases() {
  std::vector<std::pair<double, std::vector<size_t>>> rows;
  auto collect = [&](double key, const std::vector<size_t>& at) { rows.emplace_back(key, at); };
  joinOnKeys({{1, 2, 2, 3}, {3, 0, 2}}, collect);
  const decltype(rows) want = {{0, {kNoPoint, 1}}, {1, {0, kNoPoint}}, {2, {1, 2}}, {3, {3, 0}}};
  QCOMPARE(rows, want);  // key 2 of series 0: its first point
  rows.clear();
  joinOnKeys({}, collect);
  joinOnKeys({{}, {}}, collect);
  QVERIFY(rows.empty());
}

void TestChartMath::histogramGeometry() {
  QVERIFY(histogramWellFormed({0, 1, 2}, {1, 2, 3, 4}, false));
  QVERIFY(!histogramWellFormed({0, 1, 2}, {1, 2, 3}, false));     // counts: bins + 2
  QVERIFY(!histogramWellFormed({0, 0, 1}, {1, 2, 3, 4}, false));  // not increasing
  QVERIFY(!histogramWellFormed({0, 1, kInf}, {1, 2, 3, 4}, false));
  QVERIFY(!histogramWellFormed({0, 1, 2}, {1, -2, 3, 4}, false));
  QVERIFY(!histogramWellFormed({0}, {1, 2}, false));
  QVERIFY(!histogramWellFormed({0, 1, 2}, {1, 2, 3, 4}, true));  // log: positive edges
  QVERIFY(histogramWellFormed({0.1, 1, 10}, {1, 2, 3, 4}, true));

  QCOMPARE(barHeights({1, 2, 3, 4}, false), (std::vector<double>{1, 2, 3, 4}));
  QCOMPARE(barHeights({1, 2, 3, 4}, true), (std::vector<double>{0.1, 0.2, 0.3, 0.4}));
  QCOMPARE(barHeights({0, 0, 0}, true), (std::vector<double>{0, 0, 0}));

  QCOMPARE(underflowEdge({0, 1, 2}, false), -1.0);
  QCOMPARE(overflowEdge({0, 1, 2}, false), 3.0);
  QCOMPARE(underflowEdge({0.1, 1, 10}, true), 0.01);
  QCOMPARE(overflowEdge({0.1, 1, 10}, true), 100.0);
  QCOMPARE(axisMidpoint(1, 3, false), 2.0);
  QCOMPARE(axisMidpoint(1, 100, true), 10.0);

  QCOMPARE(paddedBinsRange(0, 10, false), (AxisRange{-0.2, 10.2}));
  const AxisRange log = paddedBinsRange(1, 100, true);  // 2 % of the ratio 100
  QCOMPARE(log.lo, 1 / std::pow(100.0, 0.02));
  QCOMPARE(log.hi, 100 * std::pow(100.0, 0.02));
  QCOMPARE(paddedBinsRange(kInf, -kInf, false), (AxisRange{0, 1}));
  QCOMPARE(paddedBinsRange(kInf, -kInf, true), (AxisRange{0.1, 10}));
}

void TestChartMath::heatmapColumns() {
  // Smallest spacing 1: a grid of 11 cells, steps 1, 3, 6, 7, 8 empty.
  HeatmapColumns grid = placeColumns({0, 2, 4, 5, 9, 10});
  QCOMPARE(grid.cells, 11);
  QCOMPARE(grid.cell_of, (std::vector<int>{0, 2, 4, 5, 9, 10}));
  QCOMPARE(grid.cell_range, (AxisRange{0, 10}));
  QCOMPARE(grid.extent, (AxisRange{-0.5, 10.5}));
  // A grid of 100001 cells is too many: one cell per step, evenly.
  HeatmapColumns even = placeColumns({0, 1, 3, 50000, 100000});
  QCOMPARE(even.cells, 5);
  QCOMPARE(even.cell_of, (std::vector<int>{0, 1, 2, 3, 4}));
  QCOMPARE(even.cell_range, (AxisRange{0, 100000}));
  QCOMPARE(even.extent, (AxisRange{-12500, 112500}));
  QCOMPARE(placeColumns({0, 1, 2}, 2).cells, 3);  // as many cells as steps always fit
  QCOMPARE(placeColumns({0, 1, 3}, 2).cell_of, (std::vector<int>{0, 1, 2}));
  // One step, or all equal: one cell of width 1.
  HeatmapColumns one = placeColumns({7});
  QCOMPARE(one.cells, 1);
  QCOMPARE(one.cell_range, (AxisRange{6.5, 7.5}));
  QCOMPARE(one.extent, (AxisRange{6.5, 7.5}));
  HeatmapColumns same = placeColumns({5, 5});
  QCOMPARE(same.cells, 1);
  QCOMPARE(same.cell_of, (std::vector<int>{0, 0}));
  QCOMPARE(placeColumns({}).cells, 0);
}

void TestChartMath::colourRangeCases() {
  QCOMPARE(colourRange(std::vector<double>{1, kNaN, 3, kInf}, false), (AxisRange{1, 3}));
  QCOMPARE(colourRange(std::vector<double>{2, 2}, false), (AxisRange{1.5, 2.5}));
  QCOMPARE(colourRange({}, false), (AxisRange{0, 1}));
  QCOMPARE(colourRange(std::vector<double>{-1, 0, 4}, true), (AxisRange{2, 8}));
  QCOMPARE(colourRange(std::vector<double>{-1}, true), (AxisRange{1, 10}));
}

void TestChartMath::reductionKeepsSpike() {
  const size_t n = 1'000'000;
  std::vector<double> x(n), y(n);
  for (size_t i = 0; i < n; ++i) x[i] = double(i), y[i] = std::sin(1e-4 * double(i));
  const size_t up = 654'321, down = 123'457;
  y[up] = 50;
  y[down] = -50;
  MinMaxIndex index;
  index.rebuild(y);
  std::vector<size_t> out;
  reduceMinMax(x, y, index, 0, double(n - 1), 800, out);
  QVERIFY(out.size() <= 4 * 800 + 2);
  QVERIFY(std::is_sorted(out.begin(), out.end()));
  QVERIFY(std::adjacent_find(out.begin(), out.end()) == out.end());
  QVERIFY(std::find(out.begin(), out.end(), up) != out.end());
  QVERIFY(std::find(out.begin(), out.end(), down) != out.end());
  QCOMPARE(out.front(), size_t{0});
  QCOMPARE(out.back(), n - 1);
  // Zoomed in: the neighbours outside the range are kept, the spike still there.
  reduceMinMax(x, y, index, 600'000.5, 700'000, 500, out);
  QCOMPARE(out.front(), size_t{600'000});
  QCOMPARE(out.back(), size_t{700'001});
  QVERIFY(std::find(out.begin(), out.end(), up) != out.end());
  // Against a brute force: every column's min and max are in the output.
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> xs(20000), ys(20000);
  double acc = 0;
  for (size_t i = 0; i < xs.size(); ++i) acc += 0.5 + u(rng) * 0.5, xs[i] = acc, ys[i] = u(rng);
  MinMaxIndex ix;
  ix.rebuild(ys);
  // Indexed incrementally gives the same answers.
  MinMaxIndex grown;
  std::vector<double> part;
  for (size_t i = 0; i < ys.size(); i += 777) {
    part.insert(part.end(), ys.begin() + long(i), ys.begin() + long(std::min(ys.size(), i + 777)));
    grown.extend(part);
  }
  const double lo = 1000, hi = 9000;
  const int cols = 300;
  reduceMinMax(xs, ys, ix, lo, hi, cols, out);
  std::vector<size_t> out2;
  reduceMinMax(xs, part, grown, lo, hi, cols, out2);
  QCOMPARE(out2, out);
  for (int c = 0; c < cols; ++c) {
    const double a = lo + (hi - lo) / cols * c, b = lo + (hi - lo) / cols * (c + 1);
    size_t mn = SIZE_MAX, mx = SIZE_MAX;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (xs[i] < a || (c + 1 < cols ? xs[i] >= b : xs[i] > hi)) continue;
      if (mn == SIZE_MAX || ys[i] < ys[mn]) mn = i;
      if (mx == SIZE_MAX || ys[i] > ys[mx]) mx = i;
    }
    if (mn == SIZE_MAX) continue;
    QVERIFY(std::find(out.begin(), out.end(), mn) != out.end());
    QVERIFY(std::find(out.begin(), out.end(), mx) != out.end());
  }
}

void TestChartMath::reductionSmall() {
  std::vector<double> x = {0, 1, 2, 3, 4}, y = {5, 4, 3, 2, 1};
  MinMaxIndex index;
  index.rebuild(y);
  std::vector<size_t> out;
  reduceMinMax(x, y, index, 0, 4, 100, out);
  QCOMPARE(out, (std::vector<size_t>{0, 1, 2, 3, 4}));
  reduceMinMax(x, y, index, 1.5, 2.5, 100, out);
  QCOMPARE(out, (std::vector<size_t>{1, 2, 3}));
  reduceMinMax(x, y, index, 10, 20, 100, out);
  QCOMPARE(out, (std::vector<size_t>{4}));
  reduceMinMax({}, {}, index, 0, 1, 10, out);
  QVERIFY(out.empty());
}

QTEST_APPLESS_MAIN(TestChartMath)
#include "test_chart_math.moc"
