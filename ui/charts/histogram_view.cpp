#include "ui/charts/histogram_view.hpp"

#include <qcustomplot.h>
#include "ui/charts/chart_style.hpp"
#include "ui/charts/replot_queue.hpp"

#include <QLabel>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "ui/charts/chart_math.hpp"
#include "ui/charts/chart_style.hpp"

namespace fp8rl::ui {

struct HistogramView::Impl {
  QCustomPlot* plot = nullptr;
  QLabel* caption = nullptr;
  std::vector<HistogramCurve> given;
  std::vector<HistogramCurve> shown;         // the well-formed ones
  std::vector<std::vector<double>> heights;  // shown[k]'s bar heights (counts or fractions)
  int skipped = 0;
  bool log_x = false;
  bool normalized = false;
  std::vector<QCPAbstractItem*> end_labels;  // "<" and ">"
  std::vector<std::pair<double, QString>> lines;
  std::vector<RuleLine> rule_lines;

  void rebuild();
  void fitAxes();
};

void HistogramView::Impl::rebuild() {
  plot->clearPlottables();
  for (auto* item : end_labels) plot->removeItem(item);
  end_labels.clear();
  shown.clear();
  heights.clear();
  skipped = 0;
  for (const auto& h : given) {
    if (histogramWellFormed(h.hist.edges, h.hist.counts, log_x)) {
      shown.push_back(h);
      heights.push_back(barHeights(h.hist.counts, normalized));
    } else {
      ++skipped;
    }
  }
  const bool overlay = shown.size() > 1;
  QStringList under_over;
  double under_top = 0, over_top = 0;
  for (size_t k = 0; k < shown.size(); ++k) {
    HistogramCurve& h = shown[k];
    if (!h.color.isValid()) h.color = seriesColor(k);
    const auto& e = h.hist.edges;
    const auto& height = heights[k];
    const size_t bins = e.size() - 1;
    // The outline of the bars: (e0, 0), (e0, v0), (e1, v0), (e1, v1), …, (eB, vB-1), (eB, 0).
    QVector<QCPGraphData> outline;
    outline.reserve(static_cast<qsizetype>(2 * bins + 2));
    outline.append(QCPGraphData(e[0], 0));
    for (size_t b = 0; b < bins; ++b) {
      outline.append(QCPGraphData(e[b], height[b + 1]));
      outline.append(QCPGraphData(e[b + 1], height[b + 1]));
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
    const double under = height.front(), over = height.back();
    outer(underflowEdge(e, log_x), e[0], under, h.label + QStringLiteral(" (underflow)"));
    outer(e[bins], overflowEdge(e, log_x), over, h.label + QStringLiteral(" (overflow)"));
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
  showLegend(plot, overlay);
  if (overlay)
    for (int i = 0; i < plot->graphCount(); i += 3) plot->graph(i)->addToLegend();

  if (!shown.empty()) {
    // "<" and ">" over the outer bars (of the first histogram's ends).
    const auto& e0 = shown[0].hist.edges;
    const double left = axisMidpoint(underflowEdge(e0, log_x), e0.front(), log_x);
    const double right = axisMidpoint(overflowEdge(e0, log_x), e0.back(), log_x);
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
  queueReplot(plot);
}

void HistogramView::Impl::fitAxes() {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, top = 0;
  for (size_t k = 0; k < shown.size(); ++k) {
    lo = std::min(lo, underflowEdge(shown[k].hist.edges, log_x));
    hi = std::max(hi, overflowEdge(shown[k].hist.edges, log_x));
    for (double v : heights[k]) top = std::max(top, v);
  }
  for (const auto& [x, label] : lines) {
    if (log_x && !(x > 0)) continue;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  const AxisRange range = paddedBinsRange(lo, hi, log_x);
  plot->xAxis->setRange(range.lo, range.hi);
  plot->yAxis->setRange(0, top > 0 ? top * 1.12 : 1);
}

HistogramView::HistogramView(const QString& title, QWidget* parent)
    : PlotView(QSize(600, 300), parent), d_(new Impl) {
  d_->plot = plot();
  setHeader(makeTitleLabel(title, this));
  d_->plot->axisRect()->setRangeDrag(Qt::Horizontal);
  d_->plot->axisRect()->setRangeZoom(Qt::Horizontal);
  d_->plot->yAxis->setLabel(QStringLiteral("count"));
  connect(d_->plot, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent*) {
    d_->fitAxes();
    queueReplot(d_->plot);
  });
  d_->caption = addCaption();
  d_->caption->setWordWrap(true);
  d_->rebuild();
}

HistogramView::~HistogramView() {
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
  setLogScale(d_->plot->xAxis, on);
  d_->rebuild();
}

void HistogramView::setNormalized(bool on) {
  if (on == d_->normalized) return;
  d_->normalized = on;
  d_->plot->yAxis->setLabel(on ? QStringLiteral("fraction") : QStringLiteral("count"));
  d_->rebuild();
}

void HistogramView::addVerticalLine(double x, const QString& label) {
  d_->rule_lines.push_back(addRuleLine(d_->plot, Qt::Vertical, x, label, QColor(200, 80, 0)));
  d_->lines.emplace_back(x, label);
  d_->fitAxes();
  queueReplot(d_->plot);
}

std::vector<double> HistogramView::verticalLines() const {
  std::vector<double> xs;
  for (const auto& line : d_->lines) xs.push_back(line.first);
  return xs;
}

void HistogramView::clearVerticalLines() {
  for (const RuleLine& rule : d_->rule_lines) rule.remove();
  d_->rule_lines.clear();
  d_->lines.clear();
  d_->fitAxes();
  queueReplot(d_->plot);
}

bool HistogramView::exportCsv(const QString& path, QString* error) {
  const double inf = std::numeric_limits<double>::infinity();
  std::map<std::pair<double, double>, std::vector<QString>> rows;
  const size_t n = d_->shown.size();
  for (size_t k = 0; k < n; ++k) {
    const auto& h = d_->shown[k];
    const auto& e = h.hist.edges;
    auto put = [&](double lo, double hi, size_t count_index) {
      auto& row = rows[{lo, hi}];
      row.resize(n);
      row[k] = d_->normalized ? csvNumber(d_->heights[k][count_index])
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
  return writeExportFile(
      path, [&](QIODevice& file) { file.write(text.toUtf8()); }, error);
}

}  // namespace fp8rl::ui
