// The chart widgets offscreen: ChartView (tail append, non-finite markers, EMA, x kinds, log-y,
// outlier-ignoring autoscale, markers, read-out, export, spikes in 1M points, replot time),
// HistogramView and HeatmapView, and where every chart's legend goes (under the axis rect, over
// no data); their arithmetic alone is in test_chart_math. Graph layout of
// ChartView: curve i owns plot()->graph(3i) (raw), graph(3i + 1) (smoothed) and graph(3i + 2)
// (non-finite markers); graph data is refreshed at the next replot.
#include <qcustomplot.h>

#include <QCheckBox>
#include <QComboBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QSlider>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <limits>
#include <memory>
#include <random>

#include "ui/charts/chart_header.hpp"
#include "ui/charts/chart_style.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/charts/heatmap_view.hpp"
#include "ui/charts/histogram_view.hpp"
#include "ui/charts/replot_queue.hpp"

using namespace fp8rl;
using namespace fp8rl::ui;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<SeriesPoint> series(int n, double (*f)(int), int first_step = 0) {
  std::vector<SeriesPoint> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int s = first_step + i;
    p[static_cast<size_t>(i)] = {double(s), 0.5 * s + 10, 100.0 * s, f(s)};
  }
  return p;
}

std::vector<double> keys(const QCPGraph* g) {
  std::vector<double> k;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) k.push_back(it->key);
  return k;
}

std::vector<double> values(const QCPGraph* g) {
  std::vector<double> v;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) v.push_back(it->value);
  return v;
}

// A shown chart of the benchmark's size.
std::unique_ptr<ChartView> make_chart(const QString& title = QStringLiteral("loss")) {
  auto chart = std::make_unique<ChartView>(title);
  chart->resize(900, 350);
  chart->show();
  QCoreApplication::processEvents();
  return chart;
}

std::vector<SeriesPoint> big_series(size_t n, size_t spike_at, double spike) {
  std::vector<SeriesPoint> p(n);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 0.05);
  for (size_t i = 0; i < n; ++i) {
    const double s = double(i);
    p[i] = {s, 0.01 * s, 512.0 * s, 1.0 / (1.0 + 1e-5 * s) + noise(rng)};
  }
  p[spike_at].value = spike;
  return p;
}

// With FP8RL_CHART_SNAPSHOTS=<dir>, the views are also saved there as PNG (to look at).
template <class View>
void snapshot(View* view, const char* name) {
  const QString dir = qEnvironmentVariable("FP8RL_CHART_SNAPSHOTS");
  if (!dir.isEmpty()) view->exportPng(dir + QStringLiteral("/%1.png").arg(name));
}

}  // namespace

class TestCharts : public QObject {
  Q_OBJECT

 private slots:
  void tailAppendAndRebuild();
  void nonFiniteOnEdges();
  void emaDebiased();
  void xAxisKinds();
  void logY();
  void tinyRangeTicksReadDifferently();
  void ignoreOutliers();
  void followStopsOnZoom();
  void markersAndThresholds();
  void readout();
  void exports();
  void optionsSignal();
  void headerWrapsInsteadOfCuttingTheTitle();
  void bigCurves();
  void histogram();
  void histogramOverlayAndLog();
  void heatmap();
  void legendsHideNoData();
  void replotsOnePerPass();
};

void TestCharts::tailAppendAndRebuild() {
  auto chart = make_chart();
  chart->setSmoothing(0);
  const int c = chart->addCurve(QStringLiteral("run 1"), Qt::blue);
  QCOMPARE(c, 0);
  QCOMPARE(chart->curveCount(), 1);
  auto f = [](int s) { return std::sin(0.1 * s); };
  auto pts = series(100, f);
  chart->setCurveData(c, pts);
  chart->replotNow();
  QCOMPARE(chart->pointCount(c), int64_t{100});
  QCOMPARE(chart->plot()->graph(0)->dataCount(), 100);

  auto longer = series(130, f);
  chart->setCurveData(c, longer);
  chart->replotNow();
  QCOMPARE(chart->pointCount(c), int64_t{130});
  QCOMPARE(chart->plot()->graph(0)->dataCount(), 130);
  QCOMPARE(keys(chart->plot()->graph(0)).back(), 129.0);
  // Followed: x fits the new data.
  QCOMPARE(chart->plot()->xAxis->range().upper, 129.0);

  // Same data again: nothing changes.
  chart->setCurveData(c, longer);
  QCOMPARE(chart->pointCount(c), int64_t{130});

  // Not a prefix (starts elsewhere): rebuilt from scratch.
  auto other = series(50, f, 1000);
  chart->setCurveData(c, other);
  chart->replotNow();
  QCOMPARE(chart->pointCount(c), int64_t{50});
  QCOMPARE(chart->plot()->graph(0)->dataCount(), 50);
  QCOMPARE(keys(chart->plot()->graph(0)).front(), 1000.0);

  // Shorter: rebuilt.
  chart->setCurveData(c, series(10, f, 1000));
  QCOMPARE(chart->pointCount(c), int64_t{10});

  // Out-of-range curve indices are ignored.
  chart->setCurveData(5, other);
  QCOMPARE(chart->pointCount(5), int64_t{0});

  chart->clearCurves();
  QCOMPARE(chart->curveCount(), 0);
  QCOMPARE(chart->plot()->graphCount(), 0);
}

void TestCharts::nonFiniteOnEdges() {
  auto chart = make_chart();
  chart->setSmoothing(0);
  chart->addCurve(QStringLiteral("grad_norm"), Qt::darkGreen);
  auto pts = series(20, [](int s) { return double(s); });
  pts[5].value = kNaN;
  pts[10].value = kInf;
  pts[15].value = -kInf;
  chart->setCurveData(0, pts);
  chart->replotNow();
  QCPGraph* line = chart->plot()->graph(0);
  QCPGraph* marks = chart->plot()->graph(2);
  QCOMPARE(line->dataCount(), 17);
  for (double k : keys(line)) QVERIFY(k != 5 && k != 10 && k != 15);
  for (double v : values(line)) QVERIFY(std::isfinite(v));
  QCOMPARE(marks->dataCount(), 3);
  QCOMPARE(marks->lineStyle(), QCPGraph::lsNone);
  QCOMPARE(marks->scatterStyle().shape(), QCPScatterStyle::ssTriangle);
  const auto mk = keys(marks);
  const auto mv = values(marks);
  QCOMPARE(mk, (std::vector<double>{5, 10, 15}));
  QCPRange yr = chart->plot()->yAxis->range();
  // nan and +inf near the top edge, -inf near the bottom, all inside the visible range.
  auto near_top = [&](double v) { return v <= yr.upper && v > yr.upper - 0.1 * yr.size(); };
  auto near_bottom = [&](double v) { return v >= yr.lower && v < yr.lower + 0.1 * yr.size(); };
  QVERIFY(near_top(mv[0]));
  QVERIFY(near_top(mv[1]));
  QVERIFY(near_bottom(mv[2]));
  snapshot(chart.get(), "nonfinite");

  // They follow the y range.
  chart->plot()->yAxis->setRange(-100, 500);
  yr = chart->plot()->yAxis->range();
  const auto mv2 = values(marks);
  QVERIFY(near_top(mv2[0]));
  QVERIFY(near_bottom(mv2[2]));

  // The read-out names them.
  const QString at_nan = chart->readoutAt(chart->plot()->xAxis->coordToPixel(5));
  QVERIFY2(at_nan.contains(QStringLiteral("grad_norm: nan")), qPrintable(at_nan));
  const QString at_inf = chart->readoutAt(chart->plot()->xAxis->coordToPixel(15));
  QVERIFY2(at_inf.contains(QStringLiteral("grad_norm: -inf")), qPrintable(at_inf));
}

void TestCharts::emaDebiased() {
  auto chart = make_chart();
  chart->setSmoothing(0.9);
  QCOMPARE(chart->smoothing(), 0.9);
  chart->addCurve(QStringLiteral("a"), Qt::red);
  chart->addCurve(QStringLiteral("const"), Qt::blue);
  std::vector<SeriesPoint> a = {{0, 0, 0, 3.0}, {1, 1, 1, 5.0}, {2, 2, 2, kNaN}, {3, 3, 3, 1.0}};
  chart->setCurveData(0, a);
  chart->setCurveData(1, series(50, [](int) { return 2.5; }));
  chart->replotNow();
  QVERIFY(chart->plot()->graph(1)->visible());
  const auto sm = values(chart->plot()->graph(1));
  QCOMPARE(sm.size(), size_t{3});  // the NaN does not enter
  QCOMPARE(sm[0], 3.0);            // debiased: the first smoothed value is the first value
  // TensorBoard: last = last·w + (1−w)·v, divided by 1 − w^n.
  double last = 0;
  std::vector<double> want;
  int n = 0;
  for (double v : {3.0, 5.0, 1.0}) {
    last = last * 0.9 + 0.1 * v;
    ++n;
    want.push_back(last / (1 - std::pow(0.9, n)));
  }
  for (size_t i = 0; i < 3; ++i) QVERIFY(std::fabs(sm[i] - want[i]) < 1e-12);
  for (double v : values(chart->plot()->graph(4))) QVERIFY(std::fabs(v - 2.5) < 1e-12);
  // The raw line is faint behind.
  QVERIFY(chart->plot()->graph(0)->pen().color().alpha() < 100);
  QCOMPARE(chart->plot()->graph(1)->pen().color().alpha(), 255);
  snapshot(chart.get(), "ema");

  // A tail continues the EMA exactly as a rebuild would.
  auto b = a;
  b.push_back({4, 4, 4, 7.0});
  chart->setCurveData(0, b);
  chart->replotNow();
  last = last * 0.9 + 0.1 * 7.0;
  ++n;
  QVERIFY(std::fabs(values(chart->plot()->graph(1)).back() - last / (1 - std::pow(0.9, n))) <
          1e-12);

  // Smoothing 0: the raw line only, full colour.
  chart->setSmoothing(0);
  chart->replotNow();
  QVERIFY(!chart->plot()->graph(1)->visible());
  QCOMPARE(chart->plot()->graph(0)->pen().color().alpha(), 255);
  chart->setSmoothing(5);  // clamped
  QCOMPARE(chart->smoothing(), 0.999);
}

void TestCharts::xAxisKinds() {
  auto chart = make_chart();
  chart->addCurve(QStringLiteral("reward"), Qt::blue);
  chart->setCurveData(0, series(10, [](int s) { return double(s * s); }));
  chart->replotNow();
  QCOMPARE(keys(chart->plot()->graph(0)).back(), 9.0);
  chart->setXAxis(XAxisKind::wall);
  QCOMPARE(chart->xAxis(), XAxisKind::wall);
  chart->replotNow();
  const auto k = keys(chart->plot()->graph(0));
  QCOMPARE(k.front(), 10.0);  // wall = 0.5·step + 10
  QCOMPARE(k.back(), 14.5);
  QCOMPARE(chart->plot()->xAxis->range().lower, 10.0);
  chart->setXAxis(XAxisKind::tokens);
  chart->replotNow();
  QCOMPARE(keys(chart->plot()->graph(0)).back(), 900.0);
  QCOMPARE(keys(chart->plot()->graph(1)).back(), 900.0);  // smoothed too
  QVERIFY(chart->plot()->xAxis->label().contains(QStringLiteral("Tokens")));

  // Non-monotonic x (a restarted wall clock): still drawn sorted, read-out still works.
  auto pts = series(10, [](int s) { return double(s); });
  pts[7].wall = 1.0;
  chart->setXAxis(XAxisKind::wall);
  chart->setCurveData(0, pts);
  chart->replotNow();
  const auto kw = keys(chart->plot()->graph(0));
  QVERIFY(std::is_sorted(kw.begin(), kw.end()));
  QCOMPARE(kw.front(), 1.0);
  const QString r = chart->readoutAt(chart->plot()->xAxis->coordToPixel(1.0));
  QVERIFY2(r.startsWith(QStringLiteral("step 7 ")), qPrintable(r));
}

void TestCharts::logY() {
  auto chart = make_chart();
  chart->setSmoothing(0);
  chart->addCurve(QStringLiteral("kl"), Qt::blue);
  auto pts = series(10, [](int s) { return std::pow(10.0, s - 3); });
  pts[0].value = -1;
  chart->setCurveData(0, pts);
  chart->setLogY(true);
  QVERIFY(chart->logY());
  QCOMPARE(chart->plot()->yAxis->scaleType(), QCPAxis::stLogarithmic);
  QVERIFY(!chart->plot()->yAxis->ticker().dynamicCast<QCPAxisTickerLog>().isNull());
  chart->replotNow();
  const QCPRange yr = chart->plot()->yAxis->range();
  QVERIFY(yr.lower > 0 && yr.lower < 1e-2 && yr.upper > 1e6);
  // The negative value is not drawn (a gap) and the read-out says so.
  QVERIFY(std::isnan(values(chart->plot()->graph(0)).front()));
  const QString r = chart->readoutAt(chart->plot()->xAxis->coordToPixel(0));
  QVERIFY2(r.contains(QStringLiteral("not drawn on log y")), qPrintable(r));
  chart->setLogY(false);
  QCOMPARE(chart->plot()->yAxis->scaleType(), QCPAxis::stLinear);
  QVERIFY(chart->plot()->yAxis->ticker().dynamicCast<QCPAxisTickerLog>().isNull());
}

// A curve that moves by 1e-8 around 1 gets tick labels that differ from each other.
void TestCharts::tinyRangeTicksReadDifferently() {
  auto chart = make_chart();
  chart->setSmoothing(0);
  chart->addCurve(QStringLiteral("mult err"), Qt::red);
  chart->setCurveData(0, series(50, [](int s) { return 1.0 + 1e-8 * (s % 7); }));
  chart->replotNow();
  const QVector<QString> labels = chart->plot()->yAxis->tickVectorLabels();
  QVERIFY(labels.size() >= 3);
  QCOMPARE(QSet<QString>(labels.begin(), labels.end()).size(), labels.size());
}

void TestCharts::ignoreOutliers() {
  auto chart = make_chart();
  chart->addCurve(QStringLiteral("loss"), Qt::blue);
  auto pts = series(1000, [](int s) { return 1.0 + 0.001 * s; });
  pts[500].value = 1e6;
  chart->setCurveData(0, pts);
  chart->replotNow();
  QVERIFY(chart->plot()->yAxis->range().upper > 1e6);  // full range includes the outlier
  chart->setIgnoreOutliers(true);
  QVERIFY(chart->ignoreOutliers());
  QCPRange yr = chart->plot()->yAxis->range();
  QVERIFY2(yr.upper < 3 && yr.lower > 0.5,
           qPrintable(QString("%1 %2").arg(yr.lower).arg(yr.upper)));
  QVERIFY(yr.lower < 1.02 && yr.upper > 1.98);  // the 1st–99th percentile plus a margin
  snapshot(chart.get(), "outliers_ignored");
  chart->setIgnoreOutliers(false);
  QVERIFY(chart->plot()->yAxis->range().upper > 1e6);
  // Live data keeps the rule while following.
  chart->setIgnoreOutliers(true);
  pts.push_back({1000, 0, 0, 2.0});
  chart->setCurveData(0, pts);
  chart->replotNow();
  QVERIFY(chart->plot()->yAxis->range().upper < 3);
  QCOMPARE(chart->plot()->xAxis->range().upper, 1000.0);
}

void TestCharts::followStopsOnZoom() {
  auto chart = make_chart();
  chart->addCurve(QStringLiteral("loss"), Qt::blue);
  chart->setCurveData(0, series(100, [](int s) { return double(s); }));
  chart->replotNow();
  QCOMPARE(chart->plot()->xAxis->range().upper, 99.0);
  // A wheel zoom over the plot: the chart stops following.
  QPoint centre = chart->plot()->axisRect()->rect().center();
  QWheelEvent wheel(centre, chart->plot()->mapToGlobal(centre), QPoint(), QPoint(0, 120),
                    Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
  QCoreApplication::sendEvent(chart->plot(), &wheel);
  const QCPRange zoomed = chart->plot()->xAxis->range();
  QVERIFY(zoomed.size() < 99);
  chart->setCurveData(0, series(200, [](int s) { return double(s); }));
  chart->replotNow();
  QCOMPARE(chart->plot()->xAxis->range(), zoomed);
  // Double-click resumes and fits.
  QTest::mouseDClick(chart->plot(), Qt::LeftButton, Qt::NoModifier, centre);
  QCOMPARE(chart->plot()->xAxis->range().upper, 199.0);
  chart->setCurveData(0, series(300, [](int s) { return double(s); }));
  chart->replotNow();
  QCOMPARE(chart->plot()->xAxis->range().upper, 299.0);
}

void TestCharts::markersAndThresholds() {
  auto chart = make_chart();
  chart->addCurve(QStringLiteral("loss"), Qt::blue);
  chart->setCurveData(0, series(100, [](int s) { return double(s); }));
  const int items_before = chart->plot()->itemCount();
  chart->addThreshold(1.05, QStringLiteral("token_mult_prob_error 1.05"));
  QCOMPARE(chart->plot()->itemCount(), items_before + 2);
  chart->setMarkers({{10, QStringLiteral("L3 → bf16")}, {40, QStringLiteral("L7 → fp8")}});
  QCOMPARE(chart->markerCount(), 2);
  QCOMPARE(chart->plot()->itemCount(), items_before + 2 + 4);
  auto vertical_lines = [&] {
    std::vector<double> xs;
    for (int i = 0; i < chart->plot()->itemCount(); ++i) {
      auto* line = qobject_cast<QCPItemStraightLine*>(chart->plot()->item(i));
      if (line && line->point1->coords().x() == line->point2->coords().x() &&
          line->point1->typeX() == QCPItemPosition::ptPlotCoords && line->visible())
        xs.push_back(line->point1->coords().x());
    }
    return xs;
  };
  QCOMPARE(vertical_lines(), (std::vector<double>{10, 40}));
  snapshot(chart.get(), "markers");
  // Replaced on each call.
  chart->setMarkers({{20, QStringLiteral("L1 → fp8")}});
  QCOMPARE(chart->markerCount(), 1);
  QCOMPARE(chart->plot()->itemCount(), items_before + 2 + 2);
  QCOMPARE(vertical_lines(), (std::vector<double>{20}));
  // On the wall axis: converted through the first curve (wall = 0.5·step + 10).
  chart->setXAxis(XAxisKind::wall);
  QCOMPARE(vertical_lines(), (std::vector<double>{20}));
  chart->setXAxis(XAxisKind::tokens);
  QCOMPARE(vertical_lines(), (std::vector<double>{2000}));
  chart->setXAxis(XAxisKind::step);
  // The read-out names a marker under the mouse.
  chart->replotNow();
  const QString r = chart->readoutAt(chart->plot()->xAxis->coordToPixel(20));
  QVERIFY2(r.contains(QStringLiteral("L1 → fp8")), qPrintable(r));
  // A label that fits neither side of its line is elided to the wider, never cut by the edge
  // (the read-out has it whole).
  const QString text = QStringLiteral("L0.down bf16, L0.gate bf16, L0.up bf16, L1.q bf16");
  chart->setMarkers({{45, text}});
  chart->resize(320, 300);
  QCoreApplication::processEvents();
  chart->replotNow();
  QCPItemText* label = nullptr;
  for (int i = 0; i < chart->plot()->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(chart->plot()->item(i)); t && t->visible())
      if (t->text().startsWith(QStringLiteral("L0.down"))) label = t;
  QVERIFY(label);
  QVERIFY2(label->text() != text && label->text().endsWith(QChar(0x2026)),
           qPrintable(label->text()));
  const QRect rect = chart->plot()->axisRect()->rect();
  const double x = label->position->pixelPosition().x();
  const int width = QFontMetrics(label->font()).horizontalAdvance(label->text());
  if (label->positionAlignment() & Qt::AlignLeft)
    QVERIFY(x + width <= rect.right());
  else
    QVERIFY(x - width >= rect.left());
  QVERIFY(chart->readoutAt(x).contains(text));
  chart->setMarkers({});
  QCOMPARE(chart->markerCount(), 0);
  QCOMPARE(chart->plot()->itemCount(), items_before + 2);
}

void TestCharts::readout() {
  auto chart = make_chart();
  chart->setSmoothing(0.5);
  chart->addCurve(QStringLiteral("reward"), Qt::blue);
  chart->addCurve(QStringLiteral("baseline"), Qt::red);
  chart->setCurveData(0, series(30, [](int s) { return 0.25 * s; }));
  chart->setCurveData(1, series(30, [](int s) { return -1.0 * s; }));
  chart->replotNow();
  QCOMPARE(chart->readoutAt(0.0).isEmpty(), false);
  const QString r = chart->readoutAt(chart->plot()->xAxis->coordToPixel(12.2));
  QVERIFY2(r.startsWith(QStringLiteral("step 12 · wall 16.0 s · tokens 1200")), qPrintable(r));
  QVERIFY2(r.contains(QStringLiteral("reward: 3 (smoothed ")), qPrintable(r));
  QVERIFY2(r.contains(QStringLiteral("baseline: -12")), qPrintable(r));
  // Hovering shows it in the overlay label.
  auto* label = chart->findChild<QLabel*>(QStringLiteral("readout"));
  QVERIFY(label);
  const QPoint at(int(chart->plot()->xAxis->coordToPixel(12)),
                  chart->plot()->axisRect()->rect().center().y());
  QTest::mouseMove(chart->plot(), at);
  QMouseEvent move(QEvent::MouseMove, at, chart->plot()->mapToGlobal(at), Qt::NoButton,
                   Qt::NoButton, Qt::NoModifier);
  QCoreApplication::sendEvent(chart->plot(), &move);
  QVERIFY(label->isVisible());
  QVERIFY(label->text().contains(QStringLiteral("step 12")));
  ChartView empty(QStringLiteral("empty"));
  QVERIFY(empty.readoutAt(10).isEmpty());
}

void TestCharts::exports() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  auto chart = make_chart(QStringLiteral("loss/policy"));
  chart->addCurve(QStringLiteral("run 1"), Qt::blue);
  chart->addCurve(QStringLiteral("run, 2"), Qt::red);
  std::vector<SeriesPoint> a = {{0, 0, 0, 1.5}, {1, 2, 10, kNaN}, {2, 4, 20, kInf}};
  std::vector<SeriesPoint> b = {{1, 2.5, 11, 0.1}, {3, 6, 30, -kInf}};
  chart->setCurveData(0, a);
  chart->setCurveData(1, b);
  QString error;
  const QString csv = dir.filePath(QStringLiteral("chart.csv"));
  QVERIFY2(chart->exportCsv(csv, &error), qPrintable(error));
  QFile f(csv);
  QVERIFY(f.open(QIODevice::ReadOnly));
  const QString text = QString::fromUtf8(f.readAll());
  QCOMPARE(text, QStringLiteral("step,wall,tokens,run 1,\"run, 2\"\n"
                                "0,0,0,1.5,\n"
                                "1,2,10,nan,0.1\n"
                                "2,4,20,inf,\n"
                                "3,6,30,,-inf\n"));
  const QString png = dir.filePath(QStringLiteral("chart.png"));
  QVERIFY2(chart->exportPng(png, &error), qPrintable(error));
  QVERIFY(QFileInfo(png).size() > 1000);
  QImage image(png);
  QVERIFY(!image.isNull());
  QVERIFY(image.width() >= 100);

  error.clear();
  QVERIFY(!chart->exportCsv(QStringLiteral("/nonexistent-dir/x/chart.csv"), &error));
  QVERIFY(!error.isEmpty());
  error.clear();
  QVERIFY(!chart->exportPng(QStringLiteral("/nonexistent-dir/x/chart.png"), &error));
  QVERIFY(!error.isEmpty());
  QVERIFY(!chart->exportCsv(QStringLiteral("/nonexistent-dir/chart.csv")));  // no message: fine
}

// A chart too narrow for its title beside the controls puts the title on a row of its own (the
// whole title visible), and goes back to one row when widened.
void TestCharts::headerWrapsInsteadOfCuttingTheTitle() {
  auto chart = make_chart(QStringLiteral("token_mult_prob_error of the generator and trainer"));
  auto* header = chart->findChild<ChartHeader*>();
  auto* title = chart->findChild<QLabel*>(QStringLiteral("title"));
  QVERIFY(header && title);
  const int one_row = title->sizeHint().width() + header->minimumSizeHint().width() + 40;
  chart->resize(one_row, 300);
  QCoreApplication::processEvents();
  QVERIFY(header->oneRow());
  const int tall = header->height();
  chart->resize(header->minimumSizeHint().width() + 20, 300);
  QCoreApplication::processEvents();
  QVERIFY(!header->oneRow());
  QVERIFY2(
      title->width() >= title->sizeHint().width(),
      qPrintable(
          QStringLiteral("title %1 px of %2").arg(title->width()).arg(title->sizeHint().width())));
  QVERIFY(header->height() > tall);  // two rows
  chart->resize(one_row, 300);
  QCoreApplication::processEvents();
  QVERIFY(header->oneRow());
}

void TestCharts::optionsSignal() {
  auto chart = make_chart();
  QSignalSpy spy(chart.get(), &ChartView::optionsChanged);
  chart->setXAxis(XAxisKind::wall);
  chart->setSmoothing(0.3);
  chart->setLogY(true);
  chart->setIgnoreOutliers(true);
  QCOMPARE(spy.count(), 0);  // setters do not emit
  auto* combo = chart->findChild<QComboBox*>(QStringLiteral("xAxisCombo"));
  auto* slider = chart->findChild<QSlider*>(QStringLiteral("smoothingSlider"));
  auto* log = chart->findChild<QCheckBox*>(QStringLiteral("logYCheck"));
  auto* outliers = chart->findChild<QCheckBox*>(QStringLiteral("ignoreOutliersCheck"));
  QVERIFY(combo && slider && log && outliers);
  QCOMPARE(combo->currentIndex(), 1);
  QCOMPARE(slider->value(), 300);
  QVERIFY(log->isChecked() && outliers->isChecked());
  combo->setCurrentIndex(2);
  QCOMPARE(chart->xAxis(), XAxisKind::tokens);
  slider->setValue(800);
  QCOMPARE(chart->smoothing(), 0.8);
  log->setChecked(false);
  QVERIFY(!chart->logY());
  outliers->setChecked(false);
  QVERIFY(!chart->ignoreOutliers());
  QCOMPARE(spy.count(), 4);
  QCOMPARE(chart->title(), QStringLiteral("loss"));
}

void TestCharts::bigCurves() {
  const size_t n = 1'000'000;
  const size_t spike_at = 777'777;
  auto chart = make_chart();
  QCOMPARE(chart->plot()->width() > 700, true);
  std::vector<std::vector<SeriesPoint>> data;
  for (int c = 0; c < 3; ++c) data.push_back(big_series(n, spike_at + size_t(c), 40.0 + c));
  chart->addCurve(QStringLiteral("run 0"), QColor(31, 119, 180));
  QElapsedTimer timer;
  timer.start();
  chart->setCurveData(0, data[0]);
  qInfo("setCurveData of 1M points: %.1f ms", double(timer.nsecsElapsed()) * 1e-6);
  chart->replotNow();  // first replot: layout, reduction
  double best = 1e9, sum = 0;
  for (int i = 0; i < 5; ++i) {
    const double ms = chart->replotNow();
    best = std::min(best, ms);
    sum += ms;
  }
  qInfo("replotNow, 1 curve of 1M points: best %.2f ms, mean %.2f ms", best, sum / 5);
  // The spike survives in what is drawn (raw and smoothed lines both reduced).
  QCPGraph* raw = chart->plot()->graph(0);
  QVERIFY(raw->dataCount() < 5000);
  bool found = false;
  QCOMPARE(raw->getValueRange(found).upper, 40.0);
  QVERIFY(found);
  QVERIFY(chart->plot()->yAxis->range().upper >= 40.0);
  // Zoomed away from the spike, then back: still there.
  chart->plot()->xAxis->setRange(0, 1000);
  chart->replotNow();
  QVERIFY(raw->getValueRange(found).upper < 40.0);
  chart->plot()->xAxis->setRange(700'000, 800'000);
  chart->replotNow();
  QCOMPARE(raw->getValueRange(found).upper, 40.0);
  // Moving while zoomed (a pan): each replot reduces the visible range again.
  timer.restart();
  for (int i = 0; i < 5; ++i) {
    chart->plot()->xAxis->moveRange(1000);
    chart->replotNow();
  }
  qInfo("replotNow while panning, 1 curve of 1M points: mean %.2f ms",
        double(timer.nsecsElapsed()) * 1e-6 / 5);
  chart->rescale();

  for (int c = 1; c < 3; ++c) {
    chart->addCurve(QStringLiteral("run %1").arg(c), c == 1 ? Qt::darkRed : Qt::darkGreen);
    chart->setCurveData(c, data[size_t(c)]);
  }
  chart->replotNow();
  best = 1e9;
  sum = 0;
  for (int i = 0; i < 5; ++i) {
    const double ms = chart->replotNow();
    best = std::min(best, ms);
    sum += ms;
  }
  qInfo("replotNow, 3 curves of 1M points: best %.2f ms, mean %.2f ms", best, sum / 5);
  timer.restart();
  for (int i = 0; i < 5; ++i) {
    chart->plot()->xAxis->moveRange(1000);
    chart->replotNow();
  }
  qInfo("replotNow while panning, 3 curves of 1M points: mean %.2f ms",
        double(timer.nsecsElapsed()) * 1e-6 / 5);
  chart->rescale();
  chart->replotNow();
  QCOMPARE(chart->plot()->graph(6)->getValueRange(found).upper, 42.0);

  // Live growth: a tail of 1000 points on 1M is cheap.
  auto grown = data[0];
  for (size_t i = 0; i < 1000; ++i) grown.push_back({double(n + i), 0.0, 0.0, 0.5});
  timer.restart();
  chart->setCurveData(0, grown);
  const double append_ms = double(timer.nsecsElapsed()) * 1e-6;
  const double replot_ms = chart->replotNow();
  qInfo("setCurveData appending 1000 points to 1M: %.2f ms (replot after: %.2f ms)", append_ms,
        replot_ms);
  QCOMPARE(chart->pointCount(0), int64_t(n + 1000));
  for (size_t i = 0; i < 1000; ++i) grown.push_back({double(n + 1000 + i), 0.0, 0.0, 0.5});
  timer.restart();
  chart->setCurveData(0, grown);
  const double more_ms = double(timer.nsecsElapsed()) * 1e-6;
  qInfo("setCurveData appending 1000 more: %.3f ms (replot after: %.2f ms)", more_ms,
        chart->replotNow());
  snapshot(chart.get(), "big");
}

void TestCharts::histogram() {
  HistogramView view(QStringLiteral("importance weights"));
  view.resize(600, 300);
  view.show();
  HistogramCurve h{QStringLiteral("step 10"), Qt::blue, linear_histogram({}, 0, 4, 4)};
  h.hist.edges = {0, 1, 2, 3, 4};
  h.hist.counts = {2, 5, 7, 3, 1, 4};  // under, 4 bins, over
  view.setHistograms({h});
  QCOMPARE(view.histogramCount(), 1);
  QCustomPlot* plot = view.plot();
  QCOMPARE(plot->graphCount(), 3);  // bars, underflow, overflow
  // The bar outline holds each bin's count over its edges.
  const auto k = keys(plot->graph(0));
  const auto v = values(plot->graph(0));
  QCOMPARE(v.size(), size_t{10});
  for (size_t b = 0; b < 4; ++b) {
    QCOMPARE(k[1 + 2 * b], double(b));
    QCOMPARE(k[2 + 2 * b], double(b + 1));
    QCOMPARE(v[1 + 2 * b], double(h.hist.counts[b + 1]));
    QCOMPARE(v[2 + 2 * b], double(h.hist.counts[b + 1]));
  }
  bool found = false;
  QCOMPARE(plot->graph(1)->getValueRange(found).upper, 2.0);
  QVERIFY(plot->graph(1)->getKeyRange(found).upper <= 0.0);  // below the first edge
  QCOMPARE(plot->graph(2)->getValueRange(found).upper, 4.0);
  QVERIFY(plot->graph(2)->getKeyRange(found).lower >= 4.0);
  auto* caption = view.findChild<QLabel*>(QStringLiteral("caption"));
  QVERIFY(caption);
  QVERIFY2(caption->text().contains(QStringLiteral("under: 2 · over: 4")),
           qPrintable(caption->text()));
  QStringList texts;
  for (int i = 0; i < plot->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(plot->item(i))) texts << t->text();
  QVERIFY(texts.contains(QStringLiteral("<")) && texts.contains(QStringLiteral(">")));
  QVERIFY(plot->yAxis->range().upper >= 7);
  snapshot(&view, "histogram");

  // Normalized: fractions of all 22 samples.
  view.setNormalized(true);
  QVERIFY(std::fabs(values(plot->graph(0))[3] - 7.0 / 22) < 1e-12);
  view.setNormalized(false);

  // Malformed ones are skipped and reported.
  HistogramCurve bad{QStringLiteral("bad"), Qt::red, {}};
  bad.hist.edges = {0, 1, 2};
  bad.hist.counts = {1, 2};
  HistogramCurve empty{QStringLiteral("empty"), Qt::red, {}};
  view.setHistograms({h, bad, empty});
  QCOMPARE(view.histogramCount(), 1);
  QVERIFY2(caption->text().contains(QStringLiteral("skipped 2 malformed histogram(s)")),
           qPrintable(caption->text()));

  view.addVerticalLine(0.5, QStringLiteral("TIS low"));
  view.addVerticalLine(2.0, QStringLiteral("TIS high"));
  int lines = 0;
  for (int i = 0; i < plot->itemCount(); ++i)
    lines += qobject_cast<QCPItemStraightLine*>(plot->item(i)) != nullptr;
  QCOMPARE(lines, 2);
  view.clearVerticalLines();
  lines = 0;
  for (int i = 0; i < plot->itemCount(); ++i)
    lines += qobject_cast<QCPItemStraightLine*>(plot->item(i)) != nullptr;
  QCOMPARE(lines, 0);

  QTemporaryDir dir;
  QString error;
  const QString csv = dir.filePath(QStringLiteral("h.csv"));
  QVERIFY2(view.exportCsv(csv, &error), qPrintable(error));
  QFile f(csv);
  QVERIFY(f.open(QIODevice::ReadOnly));
  QCOMPARE(
      QString::fromUtf8(f.readAll()),
      QStringLiteral("bin_lo,bin_hi,step 10\n-inf,0,2\n0,1,5\n1,2,7\n2,3,3\n3,4,1\n4,inf,4\n"));
  const QString png = dir.filePath(QStringLiteral("h.png"));
  QVERIFY2(view.exportPng(png, &error), qPrintable(error));
  QVERIFY(QFileInfo(png).size() > 500);
  QVERIFY(!view.exportCsv(QStringLiteral("/nonexistent-dir/h.csv"), &error));

  view.setHistograms({});
  QCOMPARE(view.histogramCount(), 0);
  QCOMPARE(plot->graphCount(), 0);
}

void TestCharts::histogramOverlayAndLog() {
  HistogramView view(QStringLiteral("importance weights"));
  view.resize(600, 300);
  view.show();
  const std::vector<double> w1 = {0.5, 0.9, 1.0, 1.1, 1.2, 3.0, 0.001, 50};
  const std::vector<double> w2 = {0.8, 1.0, 1.0, 1.05};
  HistogramCurve a{QStringLiteral("run A"), QColor(31, 119, 180), log_histogram(w1, -1, 1, 8)};
  HistogramCurve b{QStringLiteral("run B"), QColor(255, 127, 14), log_histogram(w2, -1, 1, 8)};
  view.setLogX(true);
  view.setHistograms({a, b});
  QCOMPARE(view.histogramCount(), 2);
  QCustomPlot* plot = view.plot();
  QCOMPARE(plot->graphCount(), 6);
  QCOMPARE(plot->xAxis->scaleType(), QCPAxis::stLogarithmic);
  QVERIFY(!plot->xAxis->ticker().dynamicCast<QCPAxisTickerLog>().isNull());
  QVERIFY(plot->legend->visible());
  QCOMPARE(plot->legend->itemCount(), 2);
  snapshot(&view, "histogram_overlay_log");
  QVERIFY(plot->graph(0)->pen().color() != plot->graph(3)->pen().color());
  // Log x: the underflow bar is one (geometric) bin below the first edge, positive.
  bool found = false;
  const QCPRange under = plot->graph(1)->getKeyRange(found);
  QVERIFY(under.lower > 0 && std::fabs(under.lower - 0.1 / std::pow(10.0, 0.25)) < 1e-9);
  QVERIFY(plot->xAxis->range().lower > 0);
  auto* caption = view.findChild<QLabel*>(QStringLiteral("caption"));
  QVERIFY2(caption->text().contains(QStringLiteral("run A under: 1 · over: 1")),
           qPrintable(caption->text()));
  // A histogram with non-positive edges cannot go on a log axis.
  HistogramCurve lin{QStringLiteral("lin"), Qt::black, linear_histogram({-1, 0, 1}, -2, 2, 4)};
  view.setHistograms({a, lin});
  QCOMPARE(view.histogramCount(), 1);
  QVERIFY(caption->text().contains(QStringLiteral("skipped 1 malformed")));
  view.setLogX(false);
  QCOMPARE(view.histogramCount(), 2);
  QCOMPARE(plot->xAxis->scaleType(), QCPAxis::stLinear);
}

void TestCharts::heatmap() {
  HeatmapView view(QStringLiteral("fp8 amax per layer"));
  view.resize(700, 350);
  view.show();
  HeatmapData d;
  d.steps = {0, 10, 20, 40};  // irregular: a regular grid with an empty column at 30
  d.rows = 3;
  d.row_lo = 0;
  d.row_hi = 3;
  d.row_labels = {QStringLiteral("L0"), QStringLiteral("L1"), QStringLiteral("L2")};
  d.value_label = QStringLiteral("amax");
  d.values = {1,  2,    3,     //
              4,  kNaN, 6,     //
              7,  8,    kInf,  //
              10, 11,   12};
  view.setData(d);
  QCOMPARE(view.data().values.size(), size_t{12});
  QCustomPlot* plot = view.plot();
  QCPColorMap* map = nullptr;
  QCPColorMap* nonfinite = nullptr;
  for (int i = 0; i < plot->plottableCount(); ++i) {
    auto* m = qobject_cast<QCPColorMap*>(plot->plottable(i));
    if (m && m->name() == QStringLiteral("heatmap")) map = m;
    if (m && m->name() == QStringLiteral("non-finite")) nonfinite = m;
  }
  QVERIFY(map && nonfinite);
  QCPColorMapData* md = map->data();
  QCOMPARE(md->keySize(), 5);
  QCOMPARE(md->valueSize(), 3);
  QCOMPARE(md->cell(0, 0), 1.0);
  QCOMPARE(md->cell(1, 2), 6.0);
  QCOMPARE(md->cell(4, 1), 11.0);
  QCOMPARE(md->data(40, 2.5), 12.0);
  QCOMPARE(int(md->alpha(0, 0)), 255);
  QCOMPARE(int(md->alpha(1, 1)), 0);  // NaN: transparent
  QCOMPARE(int(md->alpha(3, 0)), 0);  // no column at step 30
  QCOMPARE(int(md->alpha(2, 2)), 0);  // inf: drawn by the non-finite layer instead
  QVERIFY(nonfinite->visible());
  QCOMPARE(int(nonfinite->data()->alpha(2, 2)), 255);
  QCOMPARE(int(nonfinite->data()->alpha(0, 0)), 0);
  QCOMPARE(map->dataRange().lower, 1.0);
  QCOMPARE(map->dataRange().upper, 12.0);
  QVERIFY(map->colorScale());
  QCOMPARE(map->colorScale()->axis()->label(), QStringLiteral("amax"));
  auto ticker = plot->yAxis->ticker().dynamicCast<QCPAxisTickerText>();
  QVERIFY(!ticker.isNull());
  QCOMPARE(ticker->ticks().value(0.5), QStringLiteral("L0"));
  QCOMPARE(ticker->ticks().value(2.5), QStringLiteral("L2"));
  auto* caption = view.findChild<QLabel*>(QStringLiteral("caption"));
  QVERIFY2(caption->text().contains(QStringLiteral("1 non-finite cells")),
           qPrintable(caption->text()));
  QCOMPARE(plot->xAxis->range().lower, -5.0);
  QCOMPARE(plot->xAxis->range().upper, 45.0);
  snapshot(&view, "heatmap");

  d.log_color = true;
  d.row_labels.clear();
  d.values[0] = -1;
  d.values[8] = 3;
  view.setData(d);
  QCOMPARE(map->dataScaleType(), QCPAxis::stLogarithmic);
  QCOMPARE(map->dataRange().lower, 2.0);
  QVERIFY(plot->yAxis->ticker().dynamicCast<QCPAxisTickerText>().isNull());
  QVERIFY(!nonfinite->visible());

  QTemporaryDir dir;
  QString error;
  const QString png = dir.filePath(QStringLiteral("hm.png"));
  QVERIFY2(view.exportPng(png, &error), qPrintable(error));
  QVERIFY(QFileInfo(png).size() > 500);
  QVERIFY(!view.exportPng(QStringLiteral("/nonexistent-dir/hm.png"), &error));

  // One column, one row; malformed; empty.
  HeatmapData one;
  one.steps = {5};
  one.rows = 1;
  one.values = {2.0};
  view.setData(one);
  QCOMPARE(map->data()->keySize(), 1);
  QCOMPARE(map->data()->cell(0, 0), 2.0);
  HeatmapData bad = one;
  bad.values = {1, 2};
  view.setData(bad);
  QVERIFY(!map->visible());
  QVERIFY(caption->text().contains(QStringLiteral("malformed")));
  view.setData(HeatmapData{});
  QCOMPARE(caption->text(), QStringLiteral("no data"));
}

// Replots asked of many plots run one per event-loop pass (timers and input between them), each
// plot once however often it was asked; a plot deleted while it waits is skipped.
namespace {

// "" when no point a graph of plot draws lies in the legend's rect, else the first that does.
QString pointUnderLegend(QCustomPlot* plot) {
  const QRect legend = plot->legend->outerRect();
  for (int g = 0; g < plot->graphCount(); ++g) {
    const QCPGraph* graph = plot->graph(g);
    if (!graph->visible()) continue;
    for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it) {
      const QPointF at(graph->keyAxis()->coordToPixel(it->key),
                       graph->valueAxis()->coordToPixel(it->value));
      if (std::isfinite(at.x()) && std::isfinite(at.y()) && legend.contains(at.toPoint()))
        return QStringLiteral("graph %1's point (%2, %3) at pixel (%4, %5) is under the legend")
            .arg(g)
            .arg(it->key)
            .arg(it->value)
            .arg(at.x())
            .arg(at.y());
    }
  }
  return {};
}

}  // namespace

// Every chart's legend sits in a row under the axis rect: it covers no plotted point whatever
// the data (curves crowding the top-left corner, where an inset legend sat) and the width (a
// narrow chart wraps it to more rows), and takes no height while hidden.
void TestCharts::legendsHideNoData() {
  auto chart = make_chart(QStringLiteral("accuracy"));
  chart->setSmoothing(0);
  // Five entries: a wrapped legend's last row has empty cells.
  for (int k = 0; k < 5; ++k) {
    chart->addCurve(QStringLiteral("run %1 with a longer name").arg(k), seriesColor(k));
    std::vector<SeriesPoint> p;
    for (int s = 0; s <= 200; ++s)
      p.push_back({double(s), double(s), 0.0, 1.0 - std::exp(-s / (2.0 + k))});
    chart->setCurveData(k, p);
  }
  chart->replotNow();
  chart->replotNow();  // the legend wrapped at the first
  QCustomPlot* plot = chart->plot();
  QCPLegend* legend = plot->legend;
  QVERIFY(legend->visible());
  int entries = 0;
  for (int i = 0; i < legend->itemCount(); ++i) entries += legend->item(i) != nullptr;
  QCOMPARE(entries, 5);
  QVERIFY(legend->outerRect().height() > 0);
  QVERIFY(!legend->outerRect().intersects(plot->axisRect()->rect()));
  QVERIFY(legend->outerRect().top() >= plot->axisRect()->outerRect().bottom());
  QString under = pointUnderLegend(plot);
  QVERIFY2(under.isEmpty(), qPrintable(under));
  const int rows_wide = legend->rowCount();
  snapshot(chart.get(), "legend_wide");

  chart->resize(320, 350);
  QCoreApplication::processEvents();
  chart->replotNow();
  QVERIFY2(legend->rowCount() > rows_wide, qPrintable(QString::number(legend->rowCount())));
  QVERIFY(!legend->outerRect().intersects(plot->axisRect()->rect()));
  QVERIFY(legend->outerRect().right() <= plot->width());
  under = pointUnderLegend(plot);
  QVERIFY2(under.isEmpty(), qPrintable(under));
  snapshot(chart.get(), "legend_narrow");

  // One curve: no legend, and no row kept for it.
  chart->clearCurves();
  chart->addCurve(QStringLiteral("alone"), seriesColor(0));
  chart->setCurveData(0, series(50, [](int s) { return 0.01 * s; }));
  chart->replotNow();
  QVERIFY(!legend->visible());
  QVERIFY(legend->outerRect().height() <= 1);
  // …nor a column: the axis rect keeps the plot's width (all but the tick labels').
  QVERIFY2(plot->axisRect()->width() > plot->width() - 100,
           qPrintable(QStringLiteral("axis rect %1 px of %2")
                          .arg(plot->axisRect()->width())
                          .arg(plot->width())));

  // Histograms overlaid (FP8 scales of two steps): the same row.
  HistogramView h(QStringLiteral("FP8 scales"));
  h.resize(600, 300);
  h.show();
  std::vector<double> a(400), b(400);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = -8 + 0.01 * double(i);
    b[i] = -6 + 0.005 * double(i);
  }
  h.setHistograms({{QStringLiteral("step 10"), seriesColor(0), linear_histogram(a, -10, 0, 20)},
                   {QStringLiteral("step 20"), seriesColor(1), linear_histogram(b, -10, 0, 20)}});
  h.plot()->replot();
  QVERIFY(h.plot()->legend->visible());
  QCOMPARE(h.plot()->legend->itemCount(), 2);
  QVERIFY(!h.plot()->legend->outerRect().intersects(h.plot()->axisRect()->rect()));
  under = pointUnderLegend(h.plot());
  QVERIFY2(under.isEmpty(), qPrintable(under));

  // A heatmap (no legend, a colour scale beside): the map keeps its width.
  HeatmapView map(QStringLiteral("layers × steps"));
  map.resize(450, 300);
  map.show();
  HeatmapData d;
  d.steps = {1, 2, 3};
  d.rows = 2;
  d.values = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  map.setData(d);
  map.plot()->replot();
  QVERIFY2(map.plot()->axisRect()->width() > 250,
           qPrintable(QString::number(map.plot()->axisRect()->width())));
}

void TestCharts::replotsOnePerPass() {
  std::vector<std::unique_ptr<QCustomPlot>> plots;
  std::vector<int> replots(4, 0);
  for (int i = 0; i < 4; ++i) {
    plots.push_back(std::make_unique<QCustomPlot>());
    connect(plots[i].get(), &QCustomPlot::afterReplot, this, [&replots, i] { ++replots[i]; });
  }
  QTest::qWait(20);  // a QCustomPlot draws itself when made, then once more (its own queue)
  std::fill(replots.begin(), replots.end(), 0);
  for (auto& p : plots) ui::queueReplot(p.get());
  ui::queueReplot(plots[0].get());  // asked again before its turn
  plots[2].reset();                 // gone before its turn
  QCoreApplication::processEvents();
  QCOMPARE(replots[0] + replots[1] + replots[3], 1);
  QTRY_COMPARE(replots[3], 1);
  QCOMPARE(replots[0], 1);
  QCOMPARE(replots[1], 1);
  QCOMPARE(replots[2], 0);
  // flushReplots draws what waits, now.
  ui::queueReplot(plots[1].get());
  ui::flushReplots();
  QCOMPARE(replots[1], 2);
}

QTEST_MAIN(TestCharts)
#include "test_charts.moc"
