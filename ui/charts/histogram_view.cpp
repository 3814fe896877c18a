#include "ui/charts/histogram_view.hpp"

#include <qcustomplot.h>
#include "ui/charts/chart_style.hpp"

#include <QLabel>
#include <QSaveFile>
#include <QVBoxLayout>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>

namespace fp8rl::ui {
namespace {

// Edges (bins + 1, finite, strictly increasing; positive on a log axis) and counts (bins + 2).
bool well_formed(const Histogram& h, bool log_x) {
  if (h.edges.size() < 2 || h.counts.size() != h.edges.size() + 1) return false;
  for (size_t i = 0; i < h.edges.size(); ++i) {
    if (!std::isfinite(h.edges[i])) return false;
    if (i > 0 && !(h.edges[i] > h.edges[i - 1])) return false;
  }
  if (log_x && !(h.edges.front() > 0)) return false;
  for (int64_t c : h.counts)
    if (c < 0) return false;
  return true;
}

}  // namespace

struct HistogramView::Impl {
  HistogramView* q = nullptr;
  QCustomPlot* plot = nullptr;
  QLabel* caption = nullptr;
  std::vector<HistogramCurve> given;
  std::vector<HistogramCurve> shown;  // the well-formed ones
  int skipped = 0;
  bool log_x = false;
  bool normalized = false;
  std::vector<QCPAbstractItem*> end_labels;  // "<" and ">"
  std::vector<std::pair<double, QString>> lines;
  std::vector<QCPAbstractItem*> line_items;

  double value(const HistogramCurve& h, size_t count_index) const;
  void rebuild();
  void fitAxes();
  // The width of the under/overflow bars: one bin (a ratio on a log axis).
  double outerLeft(const Histogram& h) const {
    const double e0 = h.edges[0], e1 = h.edges[1];
    return log_x ? e0 * (e0 / e1) : e0 - (e1 - e0);
  }
  double outerRight(const Histogram& h) const {
    const size_t n = h.edges.size();
    const double a = h.edges[n - 2], b = h.edges[n - 1];
    return log_x ? b * (b / a) : b + (b - a);
  }
};

double HistogramView::Impl::value(const HistogramCurve& h, size_t count_index) const {
  const double c = static_cast<double>(h.hist.counts[count_index]);
  if (!normalized) return c;
  double total = 0;
  for (int64_t k : h.hist.counts) total += static_cast<double>(k);
  return total > 0 ? c / total : 0.0;
}

void HistogramView::Impl::rebuild() {
  plot->clearPlottables();
  for (auto* item : end_labels) plot->removeItem(item);
  end_labels.clear();
  shown.clear();
  skipped = 0;
  for (const auto& h : given) {
    if (well_formed(h.hist, log_x))
      shown.push_back(h);
    else
      ++skipped;
  }
  const bool overlay = shown.size() > 1;
  QStringList under_over;
  double under_top = 0, over_top = 0;
  for (size_t k = 0; k < shown.size(); ++k) {
    HistogramCurve& h = shown[k];
    if (!h.color.isValid()) h.color = seriesColor(k);
    const auto& e = h.hist.edges;
    const size_t bins = e.size() - 1;
    // The outline of the bars: (e0, 0), (e0, v0), (e1, v0), (e1, v1), …, (eB, vB-1), (eB, 0).
    QVector<QCPGraphData> outline;
    outline.reserve(static_cast<qsizetype>(2 * bins + 2));
    outline.append(QCPGraphData(e[0], 0));
    for (size_t b = 0; b < bins; ++b) {
      const double v = value(h, b + 1);
      outline.append(QCPGraphData(e[b], v));
      outline.append(QCPGraphData(e[b + 1], v));
    }
    outline.append(QCPGraphData(e[bins], 0));
    QCPGraph* g = plot->addGraph();
    g->setName(h.label);
    g->setLineStyle(QCPGraph::lsLine);
    g->setPen(QPen(h.color, overlay ? 1.5 : 1));
    QColor fill = h.color;
    fill.setAlpha(overlay ? 30 : 110);
    g->setBrush(fill);
    g->data()->set(outline, true);

    // Underflow and overflow: hatched bars one bin wide beyond the ends.
    auto outer = [&](double a, double b, double v, const QString& name) {
      QCPGraph* o = plot->addGraph();
      o->setName(name);
      o->setLineStyle(QCPGraph::lsLine);
      o->setPen(QPen(h.color, 1));
      o->setBrush(QBrush(h.color, Qt::BDiagPattern));
      QVector<QCPGraphData> d{QCPGraphData(a, 0), QCPGraphData(a, v), QCPGraphData(b, v),
                              QCPGraphData(b, 0)};
      o->data()->set(d, true);
      o->removeFromLegend();
    };
    const double under = value(h, 0), over = value(h, h.hist.counts.size() - 1);
    outer(outerLeft(h.hist), e[0], under, h.label + QStringLiteral(" (underflow)"));
    outer(e[bins], outerRight(h.hist), over, h.label + QStringLiteral(" (overflow)"));
    under_top = std::max(under_top, under);
    over_top = std::max(over_top, over);
    const QString nums =
        normalized ? QStringLiteral("under: %1 · over: %2")
                         .arg(QString::number(under, 'g', 3), QString::number(over, 'g', 3))
                   : QStringLiteral("under: %1 · over: %2")
                         .arg(h.hist.counts.front())
                         .arg(h.hist.counts.back());
    under_over << (overlay ? h.label + QStringLiteral(" ") + nums : nums);
  }
  plot->legend->clearItems();
  plot->legend->setVisible(overlay);
  for (int i = 0; i < plot->graphCount(); i += 3) plot->graph(i)->addToLegend();

  if (!shown.empty()) {
    // "<" and ">" over the outer bars (of the first histogram's ends).
    const Histogram& h0 = shown[0].hist;
    const double left = log_x ? std::sqrt(outerLeft(h0) * h0.edges.front())
                              : (outerLeft(h0) + h0.edges.front()) / 2;
    const double right = log_x ? std::sqrt(outerRight(h0) * h0.edges.back())
                               : (outerRight(h0) + h0.edges.back()) / 2;
    for (auto [x, y, text] : {std::tuple{left, under_top, QStringLiteral("<")},
                              std::tuple{right, over_top, QStringLiteral(">")}}) {
      auto* label = new QCPItemText(plot);
      label->position->setCoords(x, y);
      label->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
      label->setText(text);
      QFont f = label->font();
      f.setBold(true);
      label->setFont(f);
      label->setClipToAxisRect(false);
      end_labels.push_back(label);
    }
  }

  QStringList parts;
  if (given.empty()) parts << QStringLiteral("no histogram");
  if (!under_over.isEmpty()) parts << under_over.join(QStringLiteral("  |  "));
  if (skipped > 0)
    parts << QStringLiteral("skipped %1 malformed histogram(s)%2")
                 .arg(skipped)
                 .arg(log_x ? QStringLiteral(" (log x needs positive edges)") : QString());
  caption->setText(parts.join(QStringLiteral(" · ")));
  fitAxes();
  plot->replot(QCustomPlot::rpQueuedReplot);
}

void HistogramView::Impl::fitAxes() {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, top = 0;
  for (const auto& h : shown) {
    lo = std::min(lo, outerLeft(h.hist));
    hi = std::max(hi, outerRight(h.hist));
    for (size_t i = 0; i < h.hist.counts.size(); ++i) top = std::max(top, value(h, i));
  }
  for (const auto& [x, label] : lines) {
    if (log_x && !(x > 0)) continue;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  if (!(hi > lo)) {
    lo = log_x ? 0.1 : 0;
    hi = log_x ? 10 : 1;
  } else if (log_x) {
    const double pad = std::pow(hi / lo, 0.02);
    lo /= pad;
    hi *= pad;
  } else {
    const double pad = (hi - lo) * 0.02;
    lo -= pad;
    hi += pad;
  }
  plot->xAxis->setRange(lo, hi);
  plot->yAxis->setRange(0, top > 0 ? top * 1.12 : 1);
}

HistogramView::HistogramView(const QString& title, QWidget* parent)
    : QWidget(parent), d_(new Impl) {
  d_->q = this;
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->setSpacing(2);
  layout->addWidget(makeTitleLabel(title, this));
  d_->plot = new QCustomPlot(this);
  d_->plot->setObjectName(QStringLiteral("plot"));
  d_->plot->setMinimumHeight(120);
  d_->plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  d_->plot->axisRect()->setRangeDrag(Qt::Horizontal);
  d_->plot->axisRect()->setRangeZoom(Qt::Horizontal);
  QFont small = d_->plot->font();
  small.setPointSizeF(std::max(6.0, small.pointSizeF() - 1));
  d_->plot->xAxis->setTickLabelFont(small);
  d_->plot->yAxis->setTickLabelFont(small);
  d_->plot->legend->setFont(small);
  d_->plot->legend->setBrush(QColor(255, 255, 255, 200));
  d_->plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  d_->plot->yAxis->setLabel(QStringLiteral("count"));
  connect(d_->plot, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent*) {
    d_->fitAxes();
    d_->plot->replot(QCustomPlot::rpQueuedReplot);
  });
  layout->addWidget(d_->plot, 1);
  d_->caption = new QLabel(this);
  d_->caption->setObjectName(QStringLiteral("caption"));
  d_->caption->setFont(small);
  d_->caption->setWordWrap(true);
  layout->addWidget(d_->caption);
  d_->rebuild();
}

HistogramView::~HistogramView() {
  disconnect(d_->plot, nullptr, this, nullptr);  // the plot (a child) outlives d_
  delete d_;
}

void HistogramView::setHistograms(const std::vector<HistogramCurve>& curves) {
  d_->given = curves;
  d_->rebuild();
}

int HistogramView::histogramCount() const {
  return static_cast<int>(d_->shown.size());
}

void HistogramView::setLogX(bool on) {
  if (on == d_->log_x) return;
  d_->log_x = on;
  QCPAxis* x = d_->plot->xAxis;
  if (on) {
    x->setScaleType(QCPAxis::stLogarithmic);
    x->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  } else {
    x->setScaleType(QCPAxis::stLinear);
    x->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
  }
  d_->rebuild();
}

void HistogramView::setNormalized(bool on) {
  if (on == d_->normalized) return;
  d_->normalized = on;
  d_->plot->yAxis->setLabel(on ? QStringLiteral("fraction") : QStringLiteral("count"));
  d_->rebuild();
}

void HistogramView::addVerticalLine(double x, const QString& label) {
  const QColor color(200, 80, 0);
  auto* line = new QCPItemStraightLine(d_->plot);
  line->setPen(QPen(color, 1, Qt::DashLine));
  line->point1->setTypeY(QCPItemPosition::ptAxisRectRatio);
  line->point2->setTypeY(QCPItemPosition::ptAxisRectRatio);
  line->point1->setCoords(x, 0);
  line->point2->setCoords(x, 1);
  auto* text = new QCPItemText(d_->plot);
  text->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
  text->position->setCoords(x, 0);
  text->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
  text->setPadding(QMargins(3, 1, 2, 1));
  text->setText(label);
  text->setColor(color);
  d_->lines.emplace_back(x, label);
  d_->line_items.push_back(line);
  d_->line_items.push_back(text);
  d_->fitAxes();
  d_->plot->replot(QCustomPlot::rpQueuedReplot);
}

std::vector<double> HistogramView::verticalLines() const {
  std::vector<double> xs;
  for (const auto& line : d_->lines) xs.push_back(line.first);
  return xs;
}

void HistogramView::clearVerticalLines() {
  for (auto* item : d_->line_items) d_->plot->removeItem(item);
  d_->line_items.clear();
  d_->lines.clear();
  d_->fitAxes();
  d_->plot->replot(QCustomPlot::rpQueuedReplot);
}

bool HistogramView::exportPng(const QString& path, QString* error) {
  const int w = d_->plot->width() >= 100 ? d_->plot->width() : 600;
  const int h = d_->plot->height() >= 80 ? d_->plot->height() : 300;
  if (d_->plot->savePng(path, w, h)) return true;
  if (error) *error = QStringLiteral("cannot write the PNG file %1").arg(path);
  return false;
}

// bin_lo,bin_hi, then one column per histogram (counts, or fractions when normalized); the
// underflow row is (-inf, first edge), the overflow row (last edge, inf).
bool HistogramView::exportCsv(const QString& path, QString* error) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) {
    if (error) *error = QStringLiteral("cannot write %1: %2").arg(path, file.errorString());
    return false;
  }
  const double inf = std::numeric_limits<double>::infinity();
  std::map<std::pair<double, double>, std::vector<QString>> rows;
  const size_t n = d_->shown.size();
  for (size_t k = 0; k < n; ++k) {
    const auto& h = d_->shown[k];
    const auto& e = h.hist.edges;
    auto put = [&](double lo, double hi, size_t count_index) {
      auto& row = rows[{lo, hi}];
      row.resize(n);
      row[k] = d_->normalized ? csvNumber(d_->value(h, count_index))
                              : QString::number(h.hist.counts[count_index]);
    };
    put(-inf, e.front(), 0);
    for (size_t b = 0; b + 1 < e.size(); ++b) put(e[b], e[b + 1], b + 1);
    put(e.back(), inf, h.hist.counts.size() - 1);
  }
  QString text = QStringLiteral("bin_lo,bin_hi");
  for (const auto& h : d_->shown) text += QLatin1Char(',') + csvField(h.label);
  text += QLatin1Char('\n');
  for (const auto& [bin, values] : rows) {
    text += csvNumber(bin.first) + QLatin1Char(',') + csvNumber(bin.second);
    for (const auto& v : values) text += QLatin1Char(',') + v;
    text += QLatin1Char('\n');
  }
  file.write(text.toUtf8());
  if (!file.commit()) {
    if (error) *error = QStringLiteral("cannot write %1: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

QCustomPlot* HistogramView::plot() const {
  return d_->plot;
}

}  // namespace fp8rl::ui
