#include "ui/charts/chart_view.hpp"

#include <qcustomplot.h>
#include "ui/charts/chart_style.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QMessageBox>
#include <QSaveFile>
#include <QSignalBlocker>
#include <QSlider>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <tuple>

#include "ui/charts/downsample.hpp"

namespace fp8rl::ui {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Curves with more finite points than this are drawn without antialiasing.
constexpr size_t kAntialiasLimit = 20000;
// Values sampled (with a stride) for the outlier-ignoring percentiles.
constexpr size_t kPercentileSample = 262144;
constexpr int kRawAlpha = 60;
constexpr int kReadoutMaxCurves = 12;

double x_of(const SeriesPoint& p, XAxisKind kind) {
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

QString x_axis_name(XAxisKind kind) {
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
QString format_value(double v) {
  if (std::isnan(v)) return QStringLiteral("nan");
  if (std::isinf(v)) return v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
  return QString::number(v, 'g', 6);
}

QString format_wall(double seconds) {
  if (!std::isfinite(seconds)) return format_value(seconds);
  const double a = std::fabs(seconds);
  if (a < 120) return QString::number(seconds, 'f', 1) + QStringLiteral(" s");
  if (a < 7200) return QString::number(seconds / 60, 'f', 1) + QStringLiteral(" min");
  return QString::number(seconds / 3600, 'f', 2) + QStringLiteral(" h");
}

QString file_stem(const QString& title) {
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

struct Curve {
  QString label;
  QColor color;
  std::vector<SeriesPoint> pts;  // as given, by step
  std::vector<double> xs;        // x of pts[i] for the current x kind
  std::vector<size_t> order;     // empty when xs is ascending; else pts indices sorted by x
  // EMA (pts order): sm[i] is the debiased smoothed value at pts[i] (the raw value where that
  // is not finite); empty when smoothing is 0. State kept so a tail continues it.
  std::vector<double> sm;
  double ema_last = 0, ema_wpow = 1;
  // The drawable (finite) points in x order: x, raw value, smoothed value.
  std::vector<double> fx, fy, fs;
  MinMaxIndex fy_index, fs_index;
  // Non-finite points in x order: x and the value (nan, inf or -inf).
  std::vector<double> nf_x, nf_v;
  QCPGraph* raw = nullptr;
  QCPGraph* smooth = nullptr;
  QCPGraph* nonfinite = nullptr;
  bool dirty = true;     // the drawn line must be recomputed
  bool nf_dirty = true;  // the non-finite markers must be recomputed

  size_t pts_index(size_t rank) const { return order.empty() ? rank : order[rank]; }
  double x_at_rank(size_t rank) const { return xs[pts_index(rank)]; }
  // pts index of the point nearest to x (pts must not be empty).
  size_t nearest(double x) const {
    size_t lo = 0, hi = pts.size();
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (x_at_rank(mid) < x)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == pts.size()) return pts_index(lo - 1);
    if (lo > 0 && x - x_at_rank(lo - 1) <= x_at_rank(lo) - x) return pts_index(lo - 1);
    return pts_index(lo);
  }
};

}  // namespace

struct ChartView::Impl {
  ChartView* q = nullptr;
  QString title;
  QCustomPlot* plot = nullptr;
  QLabel* title_label = nullptr;
  QComboBox* x_combo = nullptr;
  QSlider* smooth_slider = nullptr;
  QLabel* smooth_value = nullptr;
  QCheckBox* log_check = nullptr;
  QCheckBox* outlier_check = nullptr;
  QToolButton* export_button = nullptr;
  QLabel* readout = nullptr;
  QObject* leave_filter = nullptr;

  std::vector<std::unique_ptr<Curve>> curves;
  XAxisKind x_kind = XAxisKind::step;
  double smoothing = 0.6;
  bool log_y = false;
  bool ignore_outliers = false;
  bool follow = true;            // autoscale until the user zooms or pans
  bool rescale_pending = false;  // data changed while following: rescale at the next replot

  std::vector<ChartMarker> markers;
  std::vector<std::pair<QCPItemStraightLine*, QCPItemText*>> marker_items;

  // What the drawn lines were reduced for.
  QCPRange reduced_range;
  int reduced_columns = -1;
  bool reduced_log = false;
  double edge_top = kNaN, edge_bottom = kNaN;
  ColumnSplit split;
  std::vector<size_t> scratch;

  void buildUi();
  void applyStyle(Curve& c) const;
  void updateLegend();
  void recomputeX(Curve& c) const;
  void recomputeEma(Curve& c, size_t from) const;
  void rebuildDrawn(Curve& c) const;
  void appendDrawn(Curve& c, size_t from) const;
  void rebuildSmoothedDrawn(Curve& c) const;
  void reduceCurve(Curve& c, const QCPRange& range, int columns);
  void refreshGraphs();
  void updateEdges(bool force);
  void beforeReplot();
  bool xRange(double* lo, double* hi) const;
  void yRange(double* lo, double* hi) const;
  void doRescale();
  void updateYPrecision(const QCPRange& r);
  void optionChangedRescale();
  void positionMarkers();
  bool markerX(double step, double* x) const;
  void showReadout(const QPoint& pos);
  void userOptionsChanged() { emit q->optionsChanged(); }
};

void ChartView::Impl::buildUi() {
  auto* layout = new QVBoxLayout(q);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->setSpacing(2);
  auto* header = new QHBoxLayout;
  header->setSpacing(6);
  title_label = makeTitleLabel(title, q);
  title_label->setToolTip(title);
  // The title yields its width first, so two charts fit side by side on a laptop screen.
  title_label->setMinimumWidth(60);
  title_label->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  header->addWidget(title_label, 1);

  x_combo = new QComboBox(q);
  x_combo->setObjectName(QStringLiteral("xAxisCombo"));
  x_combo->addItem(QStringLiteral("Step"));
  x_combo->addItem(QStringLiteral("Wall time"));
  x_combo->addItem(QStringLiteral("Tokens"));
  x_combo->setToolTip(QStringLiteral("x axis"));
  header->addWidget(x_combo);

  auto* ema = new QLabel(QStringLiteral("EMA"), q);
  ema->setToolTip(QStringLiteral("Smoothing: exponential moving average weight"));
  header->addWidget(ema);
  smooth_slider = new QSlider(Qt::Horizontal, q);
  smooth_slider->setObjectName(QStringLiteral("smoothingSlider"));
  smooth_slider->setRange(0, 999);
  smooth_slider->setFixedWidth(64);
  smooth_slider->setToolTip(QStringLiteral("EMA weight (debiased); 0: raw only"));
  header->addWidget(smooth_slider);
  smooth_value = new QLabel(q);
  smooth_value->setMinimumWidth(QFontMetrics(smooth_value->font()).horizontalAdvance("0.000"));
  header->addWidget(smooth_value);

  log_check = new QCheckBox(QStringLiteral("Log y"), q);
  log_check->setObjectName(QStringLiteral("logYCheck"));
  header->addWidget(log_check);
  outlier_check = new QCheckBox(QStringLiteral("Robust y"), q);
  outlier_check->setObjectName(QStringLiteral("ignoreOutliersCheck"));
  outlier_check->setToolTip(
      QStringLiteral("Ignore outliers: autoscale y to the 1st–99th percentile"));
  header->addWidget(outlier_check);

  export_button = new QToolButton(q);
  export_button->setObjectName(QStringLiteral("exportButton"));
  export_button->setText(QStringLiteral("Export"));
  export_button->setPopupMode(QToolButton::InstantPopup);
  auto* menu = new QMenu(export_button);
  QAction* png = menu->addAction(QStringLiteral("PNG…"));
  QAction* csv = menu->addAction(QStringLiteral("CSV…"));
  export_button->setMenu(menu);
  header->addWidget(export_button);
  layout->addLayout(header);

  plot = new QCustomPlot(q);
  plot->setObjectName(QStringLiteral("plot"));
  plot->setMinimumHeight(120);
  plot->setMouseTracking(true);
  plot->setNotAntialiasedElements(QCP::aeAll);
  plot->setAntialiasedElements(QCP::aeNone);
  plot->setPlottingHints(QCP::phFastPolylines | QCP::phCacheLabels);
  plot->setNoAntialiasingOnDrag(true);
  plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot->addLayer(QStringLiteral("raw"), plot->layer(QStringLiteral("main")), QCustomPlot::limBelow);
  plot->addLayer(QStringLiteral("nonfinite"), plot->layer(QStringLiteral("main")),
                 QCustomPlot::limAbove);
  plot->xAxis->setLabel(x_axis_name(x_kind));
  QFont small = plot->font();
  small.setPointSizeF(std::max(6.0, small.pointSizeF() - 1));
  plot->xAxis->setTickLabelFont(small);
  plot->yAxis->setTickLabelFont(small);
  plot->xAxis->setLabelFont(small);
  plot->legend->setFont(small);
  plot->legend->setBrush(QColor(255, 255, 255, 200));
  plot->legend->setVisible(false);
  plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  layout->addWidget(plot, 1);

  readout = new QLabel(plot);
  readout->setObjectName(QStringLiteral("readout"));
  readout->setAttribute(Qt::WA_TransparentForMouseEvents);
  readout->setStyleSheet(QStringLiteral(
      "QLabel { background: rgba(255,255,255,225); border: 1px solid #999; padding: 3px; }"));
  readout->setFont(small);
  readout->hide();

  // Controls → options (the setters update the controls without emitting).
  QObject::connect(x_combo, qOverload<int>(&QComboBox::currentIndexChanged), q, [this](int i) {
    q->setXAxis(static_cast<XAxisKind>(std::clamp(i, 0, 2)));
    userOptionsChanged();
  });
  QObject::connect(smooth_slider, &QSlider::valueChanged, q, [this](int v) {
    q->setSmoothing(v / 1000.0);
    userOptionsChanged();
  });
  QObject::connect(log_check, &QCheckBox::toggled, q, [this](bool on) {
    q->setLogY(on);
    userOptionsChanged();
  });
  QObject::connect(outlier_check, &QCheckBox::toggled, q, [this](bool on) {
    q->setIgnoreOutliers(on);
    userOptionsChanged();
  });
  QObject::connect(png, &QAction::triggered, q, [this] {
    const QString path =
        QFileDialog::getSaveFileName(q, QStringLiteral("Export PNG"), file_stem(title) + ".png",
                                     QStringLiteral("PNG images (*.png)"));
    QString error;
    if (!path.isEmpty() && !q->exportPng(path, &error))
      QMessageBox::warning(q, QStringLiteral("Export PNG"), error);
  });
  QObject::connect(csv, &QAction::triggered, q, [this] {
    const QString path =
        QFileDialog::getSaveFileName(q, QStringLiteral("Export CSV"), file_stem(title) + ".csv",
                                     QStringLiteral("CSV files (*.csv)"));
    QString error;
    if (!path.isEmpty() && !q->exportCsv(path, &error))
      QMessageBox::warning(q, QStringLiteral("Export CSV"), error);
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
    plot->replot(QCustomPlot::rpQueuedReplot);
  });
  leave_filter = new LeaveFilter(q, [this] { readout->hide(); });
  plot->installEventFilter(leave_filter);
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

void ChartView::Impl::applyStyle(Curve& c) const {
  const bool smoothed = smoothing > 0;
  QColor faint = c.color;
  faint.setAlpha(kRawAlpha);
  c.raw->setPen(QPen(smoothed ? faint : c.color, 1));
  c.smooth->setPen(QPen(c.color, 1));
  c.smooth->setVisible(smoothed);
  const bool aa = c.fx.size() <= kAntialiasLimit;
  c.raw->setAntialiased(aa);
  c.smooth->setAntialiased(aa);
}

void ChartView::Impl::updateLegend() {
  plot->legend->clearItems();
  const bool show = curves.size() >= 2 && curves.size() <= 12;
  plot->legend->setVisible(show);
  if (!show) return;
  for (auto& c : curves) (smoothing > 0 ? c->smooth : c->raw)->addToLegend();
}

void ChartView::Impl::recomputeX(Curve& c) const {
  const size_t n = c.pts.size();
  c.xs.resize(n);
  bool ascending = true;
  for (size_t i = 0; i < n; ++i) {
    double x = x_of(c.pts[i], x_kind);
    if (!std::isfinite(x)) x = i > 0 ? c.xs[i - 1] : 0.0;  // keeps the sort well-defined
    c.xs[i] = x;
    if (i > 0 && x < c.xs[i - 1]) ascending = false;
  }
  c.order.clear();
  if (!ascending) {
    c.order.resize(n);
    for (size_t i = 0; i < n; ++i) c.order[i] = i;
    std::stable_sort(c.order.begin(), c.order.end(),
                     [&](size_t a, size_t b) { return c.xs[a] < c.xs[b]; });
  }
}

// TensorBoard's debiased EMA over the finite values, in step order.
void ChartView::Impl::recomputeEma(Curve& c, size_t from) const {
  if (smoothing <= 0) {
    c.sm.clear();
    c.ema_last = 0;
    c.ema_wpow = 1;
    return;
  }
  if (from == 0) {
    c.ema_last = 0;
    c.ema_wpow = 1;
  }
  const double w = smoothing;
  c.sm.resize(c.pts.size());
  // Locals: the stores to sm could alias the members and force a reload every step.
  double last = c.ema_last, wpow = c.ema_wpow;
  for (size_t i = from; i < c.pts.size(); ++i) {
    const double v = c.pts[i].value;
    if (!std::isfinite(v)) {
      c.sm[i] = v;
      continue;
    }
    last = last * w + (1 - w) * v;
    // w^n: flushed to 0 once negligible; left alone it sticks at the smallest subnormal
    // (x · w rounds back up to it) and every multiply takes the slow subnormal path.
    wpow = wpow > 1e-300 ? wpow * w : 0.0;
    c.sm[i] = last / (1 - wpow);
  }
  c.ema_last = last;
  c.ema_wpow = wpow;
}

void ChartView::Impl::rebuildDrawn(Curve& c) const {
  c.fx.clear();
  c.fy.clear();
  c.fs.clear();
  c.nf_x.clear();
  c.nf_v.clear();
  c.fx.reserve(c.pts.size());
  c.fy.reserve(c.pts.size());
  if (!c.sm.empty()) c.fs.reserve(c.pts.size());
  for (size_t r = 0; r < c.pts.size(); ++r) {
    const size_t i = c.pts_index(r);
    const double v = c.pts[i].value;
    if (std::isfinite(v)) {
      c.fx.push_back(c.xs[i]);
      c.fy.push_back(v);
      if (!c.sm.empty()) c.fs.push_back(c.sm[i]);
    } else {
      c.nf_x.push_back(c.xs[i]);
      c.nf_v.push_back(v);
    }
  }
  c.fy_index.rebuild(c.fy);
  c.fs_index.rebuild(c.fs);
  c.dirty = c.nf_dirty = true;
}

// The points from `from` on were appended and xs is still ascending.
void ChartView::Impl::appendDrawn(Curve& c, size_t from) const {
  for (size_t i = from; i < c.pts.size(); ++i) {
    const double v = c.pts[i].value;
    if (std::isfinite(v)) {
      c.fx.push_back(c.xs[i]);
      c.fy.push_back(v);
      if (!c.sm.empty()) c.fs.push_back(c.sm[i]);
    } else {
      c.nf_x.push_back(c.xs[i]);
      c.nf_v.push_back(v);
      c.nf_dirty = true;
    }
  }
  c.fy_index.extend(c.fy);
  c.fs_index.extend(c.fs);
  c.dirty = true;
}

void ChartView::Impl::rebuildSmoothedDrawn(Curve& c) const {
  c.fs.clear();
  if (!c.sm.empty()) {
    c.fs.reserve(c.fx.size());
    for (size_t r = 0; r < c.pts.size(); ++r) {
      const size_t i = c.pts_index(r);
      if (std::isfinite(c.pts[i].value)) c.fs.push_back(c.sm[i]);
    }
  }
  c.fs_index.rebuild(c.fs);
  c.dirty = true;
}

void ChartView::Impl::reduceCurve(Curve& c, const QCPRange& range, int columns) {
  split_columns(c.fx, range.lower, range.upper, columns, split);  // shared by both lines
  auto fill = [&](QCPGraph* g, const std::vector<double>& y, const MinMaxIndex& index) {
    reduce_min_max(y, index, split, scratch);
    QVector<QCPGraphData> data(static_cast<qsizetype>(scratch.size()));
    for (size_t k = 0; k < scratch.size(); ++k) {
      const size_t i = scratch[k];
      // Log y: values <= 0 are not drawable; NaN leaves a gap in the line.
      data[static_cast<qsizetype>(k)] = QCPGraphData(c.fx[i], log_y && y[i] <= 0 ? kNaN : y[i]);
    }
    g->data()->set(data, true);
  };
  fill(c.raw, c.fy, c.fy_index);
  if (smoothing > 0)
    fill(c.smooth, c.fs, c.fs_index);
  else
    c.smooth->data()->clear();
  c.dirty = false;
}

void ChartView::Impl::refreshGraphs() {
  const QCPRange range = plot->xAxis->range();
  const int columns = std::max(64, plot->axisRect()->width());
  const bool all = range != reduced_range || columns != reduced_columns || log_y != reduced_log;
  for (auto& c : curves)
    if (all || c->dirty) reduceCurve(*c, range, columns);
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
  for (auto& c : curves) {
    if (!(force || moved || c->nf_dirty)) continue;
    QVector<QCPGraphData> data(static_cast<qsizetype>(c->nf_x.size()));
    for (size_t i = 0; i < c->nf_x.size(); ++i)
      data[static_cast<qsizetype>(i)] = QCPGraphData(c->nf_x[i], c->nf_v[i] < 0 ? bottom : top);
    c->nonfinite->data()->set(data, true);
    c->nf_dirty = false;
  }
}

void ChartView::Impl::beforeReplot() {
  if (rescale_pending && follow) doRescale();
  rescale_pending = false;
  refreshGraphs();
  updateEdges(false);
}

bool ChartView::Impl::xRange(double* lo, double* hi) const {
  bool found = false;
  for (auto& c : curves) {
    if (c->pts.empty()) continue;
    const double a = c->x_at_rank(0), b = c->x_at_rank(c->pts.size() - 1);
    *lo = found ? std::min(*lo, a) : a;
    *hi = found ? std::max(*hi, b) : b;
    found = true;
  }
  return found;
}

void ChartView::Impl::yRange(double* lo, double* hi) const {
  bool found = false;
  double mn = 0, mx = 0;
  size_t total = 0;
  for (auto& c : curves) total += c->fy.size();
  if (ignore_outliers && total > 0) {
    // 1st–99th percentile of the finite (log: positive) values, sampled with a stride.
    const size_t stride = std::max<size_t>(1, total / kPercentileSample);
    std::vector<double> v;
    v.reserve(std::min(total, kPercentileSample + curves.size()));
    for (auto& c : curves)
      for (size_t i = 0; i < c->fy.size(); i += stride)
        if (!log_y || c->fy[i] > 0) v.push_back(c->fy[i]);
    if (!v.empty()) {
      const auto lo_at = v.begin() + static_cast<ptrdiff_t>(0.01 * (v.size() - 1));
      const auto hi_at = v.begin() + static_cast<ptrdiff_t>(std::ceil(0.99 * (v.size() - 1)));
      std::nth_element(v.begin(), lo_at, v.end());
      mn = *lo_at;
      std::nth_element(v.begin(), hi_at, v.end());
      mx = *hi_at;
      found = true;
    }
  } else {
    for (auto& c : curves) {
      if (c->fy.empty()) continue;
      double a, b;
      if (log_y) {
        a = std::numeric_limits<double>::infinity();
        b = -a;
        for (double y : c->fy)
          if (y > 0) a = std::min(a, y), b = std::max(b, y);
        if (!(a <= b)) continue;
      } else {
        const auto [i, j] = c->fy_index.argminmax(c->fy, 0, c->fy.size());
        a = c->fy[i];
        b = c->fy[j];
      }
      mn = found ? std::min(mn, a) : a;
      mx = found ? std::max(mx, b) : b;
      found = true;
    }
  }
  const double margin = ignore_outliers ? 0.10 : 0.05;
  if (log_y) {
    if (!found) {
      *lo = 0.1, *hi = 10;
      return;
    }
    double a = std::log10(mn), b = std::log10(mx);
    const double span = b > a ? b - a : 1.0;
    *lo = std::pow(10.0, a - margin * span);
    *hi = std::pow(10.0, b + margin * span);
    return;
  }
  if (!found) {
    *lo = 0, *hi = 1;
    return;
  }
  if (mx > mn) {
    const double span = mx - mn;
    *lo = mn - margin * span;
    *hi = mx + margin * span;
  } else {
    const double pad = std::max(std::fabs(mn) * 0.1, 1e-9);
    *lo = mn - pad;
    *hi = mx + pad;
  }
}

void ChartView::Impl::updateYPrecision(const QCPRange& r) {
  if (log_y) return;
  // Enough significant digits that neighbouring ticks read differently: a curve that moves by
  // 1e-8 around 1 (token_mult_prob_error) otherwise shows "1" on every tick.
  const double magnitude = std::max(std::fabs(r.lower), std::fabs(r.upper));
  const double step = r.size() / 5.0;  // about the ticker's spacing
  int digits = 6;
  if (magnitude > 0 && step > 0 && std::isfinite(magnitude / step))
    digits = std::clamp(static_cast<int>(std::ceil(std::log10(magnitude / step))) + 1, 6, 15);
  plot->yAxis->setNumberPrecision(digits);
}

void ChartView::Impl::doRescale() {
  double lo, hi;
  if (xRange(&lo, &hi)) {
    if (!(hi > lo)) lo -= 1, hi += 1;
    plot->xAxis->setRange(lo, hi);
  }
  yRange(&lo, &hi);
  plot->yAxis->setRange(lo, hi);
}

void ChartView::Impl::optionChangedRescale() {
  if (follow) doRescale();
  q->requestReplot();
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
  *x = x_of(*it, x_kind);
  return std::isfinite(*x);
}

void ChartView::Impl::positionMarkers() {
  for (size_t i = 0; i < markers.size(); ++i) {
    auto [line, text] = marker_items[i];
    double x = 0;
    const bool ok = markerX(markers[i].step, &x);
    line->setVisible(ok);
    text->setVisible(ok);
    if (!ok) continue;
    line->point1->setCoords(x, 0);
    line->point2->setCoords(x, 1);
    text->position->setCoords(x, 0);
  }
}

ChartView::ChartView(const QString& title, QWidget* parent) : QWidget(parent), d_(new Impl) {
  d_->q = this;
  d_->title = title;
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
  auto c = std::make_unique<Curve>();
  c->label = label;
  c->color = color;
  c->raw = d_->plot->addGraph();
  c->raw->setLayer(QStringLiteral("raw"));
  c->raw->setName(label);
  c->smooth = d_->plot->addGraph();
  c->smooth->setName(label);
  c->nonfinite = d_->plot->addGraph();
  c->nonfinite->setLayer(QStringLiteral("nonfinite"));
  c->nonfinite->setName(label + QStringLiteral(" (non-finite)"));
  c->nonfinite->setLineStyle(QCPGraph::lsNone);
  c->nonfinite->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssTriangle, QColor(220, 0, 0), QColor(220, 0, 0), 8));
  c->nonfinite->setPen(QPen(QColor(220, 0, 0)));
  d_->applyStyle(*c);
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
  d_->updateLegend();
  d_->positionMarkers();
  d_->rescale_pending = true;
  requestReplot();
}

void ChartView::setCurveData(int curve, const std::vector<SeriesPoint>& points) {
  if (curve < 0 || curve >= curveCount()) return;
  Curve& c = *d_->curves[static_cast<size_t>(curve)];
  const size_t n = c.pts.size();
  const bool same_start = n > 0 && points.size() >= n && points[0].step == c.pts[0].step &&
                          points[n - 1].step == c.pts[n - 1].step;
  if (same_start && points.size() == n) {
    // Nothing new (the owner pushes the whole series on every refresh); a changed last value
    // still rebuilds.
    const double a = points[n - 1].value, b = c.pts[n - 1].value;
    if (a == b || (std::isnan(a) && std::isnan(b))) return;
  }
  bool extended = false, appended = false;
  if (same_start && points.size() > n && c.order.empty()) {
    extended = true;
    c.pts.insert(c.pts.end(), points.begin() + static_cast<ptrdiff_t>(n), points.end());
    c.xs.resize(c.pts.size());
    bool ascending = true;
    for (size_t i = n; i < c.pts.size(); ++i) {
      double x = x_of(c.pts[i], d_->x_kind);
      if (!std::isfinite(x)) x = c.xs[i - 1];
      c.xs[i] = x;
      if (x < c.xs[i - 1]) ascending = false;
    }
    d_->recomputeEma(c, n);
    if (ascending) {
      d_->appendDrawn(c, n);
      appended = true;
    }
  }
  if (!appended) {
    if (!extended) {
      c.pts = points;
      d_->recomputeEma(c, 0);
    }
    d_->recomputeX(c);
    d_->rebuildDrawn(c);
  }
  d_->applyStyle(c);
  if (curve == 0 && !d_->markers.empty()) d_->positionMarkers();
  d_->rescale_pending = true;
  requestReplot();
}

int64_t ChartView::pointCount(int curve) const {
  if (curve < 0 || curve >= curveCount()) return 0;
  return static_cast<int64_t>(d_->curves[static_cast<size_t>(curve)]->pts.size());
}

void ChartView::addThreshold(double y, const QString& label) {
  const QColor color(200, 80, 0);
  auto* line = new QCPItemStraightLine(d_->plot);
  line->setPen(QPen(color, 1, Qt::DashLine));
  line->point1->setTypeX(QCPItemPosition::ptAxisRectRatio);
  line->point2->setTypeX(QCPItemPosition::ptAxisRectRatio);
  line->point1->setCoords(0, y);
  line->point2->setCoords(1, y);
  auto* text = new QCPItemText(d_->plot);
  text->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
  text->position->setCoords(1, y);
  text->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
  text->setText(label);
  text->setColor(color);
  text->setPadding(QMargins(2, 0, 4, 1));
  text->setFont(d_->plot->xAxis->tickLabelFont());
  requestReplot();
}

void ChartView::setMarkers(const std::vector<ChartMarker>& markers) {
  for (auto [line, text] : d_->marker_items) {
    d_->plot->removeItem(line);
    d_->plot->removeItem(text);
  }
  d_->marker_items.clear();
  d_->markers = markers;
  const QColor color(90, 90, 160);
  for (const auto& m : markers) {
    auto* line = new QCPItemStraightLine(d_->plot);
    line->setPen(QPen(color, 1, Qt::DashLine));
    line->point1->setTypeY(QCPItemPosition::ptAxisRectRatio);
    line->point2->setTypeY(QCPItemPosition::ptAxisRectRatio);
    auto* text = new QCPItemText(d_->plot);
    text->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    text->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    text->setText(m.label);
    text->setColor(color);
    text->setPadding(QMargins(3, 1, 2, 1));
    text->setFont(d_->plot->xAxis->tickLabelFont());
    d_->marker_items.emplace_back(line, text);
  }
  d_->positionMarkers();
  requestReplot();
}

int ChartView::markerCount() const {
  return static_cast<int>(d_->markers.size());
}

void ChartView::setXAxis(XAxisKind kind) {
  {
    const QSignalBlocker block(d_->x_combo);
    d_->x_combo->setCurrentIndex(static_cast<int>(kind));
  }
  if (kind == d_->x_kind) return;
  d_->x_kind = kind;
  d_->plot->xAxis->setLabel(x_axis_name(kind));
  for (auto& c : d_->curves) {
    d_->recomputeX(*c);
    d_->rebuildDrawn(*c);
  }
  d_->positionMarkers();
  // The old x range means nothing in the new unit.
  rescale();
  requestReplot();
}

XAxisKind ChartView::xAxis() const {
  return d_->x_kind;
}

void ChartView::setSmoothing(double weight) {
  if (!(weight > 0)) weight = 0;  // also NaN
  weight = std::min(weight, 0.999);
  const long permille = std::lround(weight * 1000);
  {
    const QSignalBlocker block(d_->smooth_slider);
    d_->smooth_slider->setValue(static_cast<int>(permille));
  }
  d_->smooth_value->setText(QString::number(weight, 'f', permille % 10 == 0 ? 2 : 3));
  if (weight == d_->smoothing) return;
  d_->smoothing = weight;
  for (auto& c : d_->curves) {
    d_->recomputeEma(*c, 0);
    d_->rebuildSmoothedDrawn(*c);
    d_->applyStyle(*c);
  }
  d_->updateLegend();
  requestReplot();
}

double ChartView::smoothing() const {
  return d_->smoothing;
}

void ChartView::setLogY(bool on) {
  {
    const QSignalBlocker block(d_->log_check);
    d_->log_check->setChecked(on);
  }
  if (on == d_->log_y) return;
  d_->log_y = on;
  QCPAxis* y = d_->plot->yAxis;
  if (on) {
    y->setScaleType(QCPAxis::stLogarithmic);
    y->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    y->setNumberFormat(QStringLiteral("eb"));
    y->setNumberPrecision(0);
  } else {
    y->setScaleType(QCPAxis::stLinear);
    y->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    y->setNumberFormat(QStringLiteral("gb"));
    d_->updateYPrecision(y->range());
  }
  for (auto& c : d_->curves) c->dirty = true;
  d_->optionChangedRescale();
}

bool ChartView::logY() const {
  return d_->log_y;
}

void ChartView::setIgnoreOutliers(bool on) {
  {
    const QSignalBlocker block(d_->outlier_check);
    d_->outlier_check->setChecked(on);
  }
  if (on == d_->ignore_outliers) return;
  d_->ignore_outliers = on;
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

bool ChartView::exportPng(const QString& path, QString* error) {
  const int w = d_->plot->width() >= 100 ? d_->plot->width() : 900;
  const int h = d_->plot->height() >= 80 ? d_->plot->height() : 350;
  // savePng draws without a replot (no beforeReplot): bring the drawn data up to date first.
  d_->beforeReplot();
  if (d_->plot->savePng(path, w, h)) return true;
  if (error) *error = QStringLiteral("cannot write the PNG file %1").arg(path);
  return false;
}

bool ChartView::exportCsv(const QString& path, QString* error) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) {
    if (error) *error = QStringLiteral("cannot write %1: %2").arg(path, file.errorString());
    return false;
  }
  // One row per distinct step over all curves: step, wall, tokens (from the first curve
  // holding the step), then each curve's value (empty where it has none).
  QString header = QStringLiteral("step,wall,tokens");
  for (auto& c : d_->curves) header += QLatin1Char(',') + csvField(c->label);
  header += QLatin1Char('\n');
  file.write(header.toUtf8());
  std::vector<std::tuple<double, size_t, size_t>> all;  // step, curve, point
  size_t total = 0;
  for (auto& c : d_->curves) total += c->pts.size();
  all.reserve(total);
  for (size_t ci = 0; ci < d_->curves.size(); ++ci)
    for (size_t i = 0; i < d_->curves[ci]->pts.size(); ++i)
      all.emplace_back(d_->curves[ci]->pts[i].step, ci, i);
  std::sort(all.begin(), all.end());
  QString row;
  std::vector<const SeriesPoint*> cells(d_->curves.size());
  for (size_t a = 0; a < all.size();) {
    size_t b = a;
    std::fill(cells.begin(), cells.end(), nullptr);
    while (b < all.size() && std::get<0>(all[b]) == std::get<0>(all[a])) {
      const auto& [s, ci, i] = all[b];
      if (!cells[ci]) cells[ci] = &d_->curves[ci]->pts[i];
      ++b;
    }
    const SeriesPoint& first = d_->curves[std::get<1>(all[a])]->pts[std::get<2>(all[a])];
    row = csvNumber(first.step) + QLatin1Char(',') + csvNumber(first.wall) + QLatin1Char(',') +
          csvNumber(first.tokens);
    for (const SeriesPoint* p : cells) {
      row += QLatin1Char(',');
      if (p) row += csvNumber(p->value);
    }
    row += QLatin1Char('\n');
    file.write(row.toUtf8());
    a = b;
  }
  if (!file.commit()) {
    if (error) *error = QStringLiteral("cannot write %1: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

QString ChartView::readoutAt(double pixel_x) const {
  const double x = d_->plot->xAxis->pixelToCoord(pixel_x);
  if (!std::isfinite(x)) return {};
  // The point nearest to x over all curves sets the header.
  const SeriesPoint* best = nullptr;
  double best_dist = 0;
  std::vector<std::pair<const Curve*, size_t>> nearest;
  for (auto& c : d_->curves) {
    if (c->pts.empty()) continue;
    const size_t i = c->nearest(x);
    nearest.emplace_back(c.get(), i);
    const double dist = std::fabs(c->xs[i] - x);
    if (!best || dist < best_dist) best = &c->pts[i], best_dist = dist;
  }
  if (!best) return {};
  QString text = QStringLiteral("step %1 · wall %2 · tokens %3")
                     .arg(QString::number(best->step, 'g', 12), format_wall(best->wall),
                          QString::number(best->tokens, 'g', 12));
  int shown = 0;
  for (auto [c, i] : nearest) {
    if (shown++ == kReadoutMaxCurves) {
      text += QStringLiteral("\n… %1 more").arg(nearest.size() - kReadoutMaxCurves);
      break;
    }
    const SeriesPoint& p = c->pts[i];
    text += QLatin1Char('\n') + c->label + QStringLiteral(": ") + format_value(p.value);
    if (std::isfinite(p.value) && !c->sm.empty())
      text += QStringLiteral(" (smoothed %1)").arg(format_value(c->sm[i]));
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
  d_->plot->replot(QCustomPlot::rpQueuedReplot);
}

QCustomPlot* ChartView::plot() const {
  return d_->plot;
}

QString ChartView::title() const {
  return d_->title;
}

}  // namespace fp8rl::ui
