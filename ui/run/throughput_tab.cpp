#include "ui/run/throughput_tab.hpp"

#include <qcustomplot.h>

#include <QHBoxLayout>
#include <QVBoxLayout>
#include <cmath>
#include <string>

#include "contract/metrics.hpp"
#include "contract/step_record.hpp"
#include "ui/charts/chart_style.hpp"
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

// More would be malformed telemetry, not a run (the launch form offers kMaxLaunchRanks).
constexpr double kMaxRanksShown = 4096;

// The number of ranks of the run (its latest dist/ranks), 0 for a run of one rank.
int runRanks(const RunData& run) {
  const auto& s = run.series(metric::kRanks);
  if (s.empty()) return 0;
  const double n = s.back().value;
  if (!std::isfinite(n) || n < 2 || n > kMaxRanksShown) return 0;
  return static_cast<int>(n);
}

}  // namespace

ThroughputTab::ThroughputTab(QWidget* parent)
    : RunTab(parent),
      tokens_(new ChartView(tr("Throughput (tokens/s)"))),
      step_time_(new ChartView(tr("Step time (s)"))),
      per_rank_(new QWidget),
      rank_rollout_(new ChartView(tr("Rollout throughput per rank (tokens/s)"))),
      rank_training_(new ChartView(tr("Training throughput per rank (tokens/s)"))),
      phases_(new QCustomPlot) {
  tokens_->addCurve(tr("rollout tokens/s"), QColor(0x1f, 0x77, 0xb4));
  tokens_->addCurve(tr("training tokens/s"), QColor(0x2c, 0xa0, 0x2c));
  step_time_->addCurve(QStringLiteral("time/total_step"), QColor(0x33, 0x33, 0x33));
  const QString rank_tip =
      tr("Each rank's own tokens/s in a data-parallel run (the Throughput "
         "chart above shows their sum): a slow rank holds every step up.");
  rank_rollout_->setToolTip(rank_tip);
  rank_training_->setToolTip(rank_tip);

  phases_->plotLayout()->insertRow(0);
  phases_->plotLayout()->addElement(
      0, 0, new QCPTextElement(phases_, tr("Step time by phase (s, per step)"), QFont()));
  phases_->xAxis->setLabel(tr("step"));
  phases_->yAxis->setLabel(tr("seconds"));
  phases_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  phases_->axisRect()->setRangeZoom(Qt::Horizontal);
  phases_->axisRect()->setRangeDrag(Qt::Horizontal);
  // The legend under the plot, as every chart's (it hides no bar).
  placeLegendBelow(phases_);
  showLegend(phases_, true);
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
    bars->addToLegend();
    bars_[static_cast<size_t>(k)] = bars;
  }
  // Collective time is spent inside the phases (the gradient sum in training, gathers in
  // generation): drawn over the bars rather than stacked on them, so nothing counts twice.
  communication_ = phases_->addGraph();
  communication_->setName(tr("communication (rank 0, within the phases)"));
  communication_->setPen(QPen(QColor(0x21, 0x21, 0x21), 1.5));
  communication_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));

  // Rows: total throughput and step time; per rank (data-parallel runs only); phases. Hidden
  // rows take no room.
  auto* top = new QHBoxLayout;
  top->setContentsMargins(0, 0, 0, 0);
  top->addWidget(tokens_);
  top->addWidget(step_time_);
  auto* ranks_row = new QHBoxLayout(per_rank_);
  ranks_row->setContentsMargins(0, 0, 0, 0);
  ranks_row->addWidget(rank_rollout_);
  ranks_row->addWidget(rank_training_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top, 1);
  layout->addWidget(per_rank_, 1);
  layout->addWidget(phases_, 1);
  per_rank_->hide();
  linkChartOptions(charts());
  setRun(nullptr);
}

void ThroughputTab::clearRun() {
  clearCharts(charts());
  for (QCPBars* bars : bars_) bars->data()->clear();
  added_.fill(0);
  communication_->data()->clear();
  communication_->removeFromLegend();
  communication_added_ = 0;
  rank_rollout_->clearCurves();
  rank_training_->clearCurves();
  ranks_shown_ = 0;
  per_rank_->hide();
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
  const int ranks_before = ranks_shown_;
  updateRanks();
  // New per-rank charts need the markers the other charts already have.
  if (ranks_shown_ != ranks_before) markers_ = SIZE_MAX;
  if (syncPrecisionMarkers(run_, charts(), &markers_)) updatePhaseMarkers();
  updateBars();
}

void ThroughputTab::updateRanks() {
  const int ranks = runRanks(*run_);
  if (ranks != ranks_shown_) {
    rank_rollout_->clearCurves();
    rank_training_->clearCurves();
    for (int r = 0; r < ranks; ++r) {
      const QString label = tr("rank %1").arg(r);
      rank_rollout_->addCurve(label, seriesColor(static_cast<size_t>(r)));
      rank_training_->addCurve(label, seriesColor(static_cast<size_t>(r)));
    }
    ranks_shown_ = ranks;
    per_rank_->setVisible(ranks > 0);
  }
  for (int r = 0; r < ranks_shown_; ++r) {
    rank_rollout_->setCurveData(r, run_->series(metric::rank_rollout_tps(r)));
    rank_training_->setCurveData(r, run_->series(metric::rank_train_tps(r)));
  }
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
  const auto& comm = run_->series(metric::kTimeCommunication);
  if (communication_added_ > comm.size() ||
      (communication_added_ > 0 &&
       (communication_->data()->isEmpty() ||
        (communication_->data()->constEnd() - 1)->key != comm[communication_added_ - 1].step))) {
    communication_->data()->clear();
    communication_added_ = 0;
  }
  for (; communication_added_ < comm.size(); ++communication_added_) {
    const SeriesPoint& p = comm[communication_added_];
    // A non-finite time is a gap in the line.
    communication_->addData(p.step, std::isfinite(p.value) ? p.value : qQNaN());
    grew = true;
  }
  if (!comm.empty() && !phases_->legend->hasItemWithPlottable(communication_))
    communication_->addToLegend();
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
