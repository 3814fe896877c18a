#include "ui/run/throughput_tab.hpp"

#include <qcustomplot.h>

#include <QGridLayout>
#include <cmath>

#include "contract/metrics.hpp"
#include "contract/step_record.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/data/run_data.hpp"
#include "ui/run/run_view.hpp"

namespace fp8rl::ui {

namespace {

struct Phase {
  const char* key;
  const char* label;
  QColor color;
};

const std::array<Phase, ThroughputTab::kPhases>& phases() {
  static const std::array<Phase, ThroughputTab::kPhases> p = {{
      {metric::kTimeGeneration, "generation", QColor(0x1f, 0x77, 0xb4)},
      {metric::kTimeLogprob, "logprob", QColor(0xff, 0x7f, 0x0e)},
      {metric::kTimeTraining, "training", QColor(0x2c, 0xa0, 0x2c)},
      {metric::kTimeRecalibration, "recalibration", QColor(0x94, 0x67, 0xbd)},
  }};
  return p;
}

}  // namespace

ThroughputTab::ThroughputTab(QWidget* parent)
    : RunTab(parent),
      tokens_(new ChartView(tr("Throughput (tokens/s)"))),
      step_time_(new ChartView(tr("Step time (s)"))),
      phases_(new QCustomPlot) {
  tokens_->addCurve(tr("rollout tokens/s"), QColor(0x1f, 0x77, 0xb4));
  tokens_->addCurve(tr("training tokens/s"), QColor(0x2c, 0xa0, 0x2c));
  step_time_->addCurve(QStringLiteral("time/total_step"), QColor(0x33, 0x33, 0x33));

  phases_->plotLayout()->insertRow(0);
  phases_->plotLayout()->addElement(
      0, 0, new QCPTextElement(phases_, tr("Step time by phase (s, per step)"), QFont()));
  phases_->xAxis->setLabel(tr("step"));
  phases_->yAxis->setLabel(tr("seconds"));
  phases_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  phases_->axisRect()->setRangeZoom(Qt::Horizontal);
  phases_->axisRect()->setRangeDrag(Qt::Horizontal);
  // The legend in a row of its own under the plot, so that it hides no bar.
  phases_->legend->setVisible(true);
  phases_->axisRect()->insetLayout()->take(phases_->legend);
  phases_->plotLayout()->addElement(2, 0, phases_->legend);
  phases_->plotLayout()->setRowStretchFactor(2, 0.001);
  phases_->legend->setFillOrder(QCPLegend::foColumnsFirst);
  phases_->legend->setBorderPen(Qt::NoPen);
  phases_->legend->setMargins(QMargins(4, 0, 4, 0));
  phases_->setMinimumHeight(200);
  for (int k = 0; k < kPhases; ++k) {
    const Phase& p = phases()[static_cast<size_t>(k)];
    auto* bars = new QCPBars(phases_->xAxis, phases_->yAxis);
    bars->setName(QString::fromLatin1(p.label));
    bars->setWidth(0.8);
    bars->setPen(Qt::NoPen);
    bars->setBrush(p.color);
    bars->setStackingGap(0);
    if (k > 0) bars->moveAbove(bars_[static_cast<size_t>(k - 1)]);
    bars_[static_cast<size_t>(k)] = bars;
  }

  auto* layout = new QGridLayout(this);
  layout->addWidget(tokens_, 0, 0);
  layout->addWidget(step_time_, 0, 1);
  layout->addWidget(phases_, 1, 0, 1, 2);
  layout->setRowStretch(0, 1);
  layout->setRowStretch(1, 1);
  linkChartOptions(charts());
  setRun(nullptr);
}

void ThroughputTab::clearRun() {
  clearCharts(charts());
  for (QCPBars* bars : bars_) bars->data()->clear();
  added_.fill(0);
  for (QCPAbstractItem* item : marker_items_) phases_->removeItem(item);
  marker_items_.clear();
  phases_->xAxis->setRange(0, 1);
  phases_->yAxis->setRange(0, 1);
  phases_->replot(QCustomPlot::rpQueuedReplot);
}

void ThroughputTab::showNew() {
  tokens_->setCurveData(0, run_->series(metric::kRolloutTps));
  tokens_->setCurveData(1, run_->series(metric::kTrainTps));
  step_time_->setCurveData(0, run_->series(metric::kTimeTotal));
  if (syncPrecisionMarkers(run_, charts(), &markers_)) updatePhaseMarkers();
  updateBars();
}

void ThroughputTab::updateBars() {
  bool grew = false;
  for (size_t k = 0; k < bars_.size(); ++k) {
    QCPBars* bars = bars_[k];
    const auto& s = run_->series(phases()[k].key);
    size_t& added = added_[k];
    // The bars hold a prefix of the series unless the run's data was rebuilt (resumed run).
    if (added > s.size() ||
        (added > 0 &&
         (bars->data()->isEmpty() || (bars->data()->constEnd() - 1)->key != s[added - 1].step))) {
      bars->data()->clear();
      added = 0;
    }
    for (; added < s.size(); ++added) {
      const double v = s[added].value;
      // A non-finite phase time would break the stack above it: drawn as 0 (the Overview and
      // the total step time chart show non-finite values as such).
      bars->addData(s[added].step, std::isfinite(v) ? v : 0.0);
      grew = true;
    }
  }
  if (!grew) return;
  phases_->rescaleAxes();
  const QCPRange x = phases_->xAxis->range();
  phases_->xAxis->setRange(x.lower - 1, x.upper + 1);
  phases_->yAxis->setRange(0, std::max(phases_->yAxis->range().upper * 1.05, 1e-3));
  phases_->replot(QCustomPlot::rpQueuedReplot);
}

void ThroughputTab::updatePhaseMarkers() {
  for (QCPAbstractItem* item : marker_items_) phases_->removeItem(item);
  marker_items_.clear();
  QPen pen(QColor(0x7f, 0x7f, 0x7f));
  pen.setStyle(Qt::DashLine);
  for (const ChartMarker& m : precisionMarkers(run_)) {
    auto* line = new QCPItemStraightLine(phases_);
    line->point1->setCoords(m.step, 0);
    line->point2->setCoords(m.step, 1);
    line->setPen(pen);
    auto* text = new QCPItemText(phases_);
    text->position->setTypeX(QCPItemPosition::ptPlotCoords);
    text->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    text->position->setCoords(m.step, 0);
    text->setPositionAlignment(Qt::AlignTop | Qt::AlignLeft);
    text->setText(m.label);
    text->setColor(QColor(0x55, 0x55, 0x55));
    text->setClipToAxisRect(true);
    marker_items_.push_back(line);
    marker_items_.push_back(text);
  }
  phases_->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace fp8rl::ui
