#include "ui/run/importance_tab.hpp"

#include <qcustomplot.h>

#include <QCheckBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSlider>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>

#include "contract/metrics.hpp"
#include "contract/step_record.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/charts/heatmap_view.hpp"
#include "ui/charts/histogram_view.hpp"
#include "ui/data/run_data.hpp"
#include "ui/run/run_view.hpp"

namespace fp8rl::ui {

namespace {

const std::map<int64_t, Histogram>* importanceHistograms(const RunData* run) {
  if (!run) return nullptr;
  auto it = run->histograms.find(histogram::kImportanceLogWeight);
  return it == run->histograms.end() || it->second.empty() ? nullptr : &it->second;
}

// "0.5 (log −0.693)": a bound and where its line stands on the log-weight axis.
QString boundText(const char* name, double bound) {
  return QStringLiteral("%1 %2 (log %3)")
      .arg(QLatin1String(name))
      .arg(bound)
      .arg(std::log(bound), 0, 'g', 3);
}

}  // namespace

ImportanceTab::ImportanceTab(QWidget* parent)
    : RunTab(parent),
      hist_(new HistogramView(tr("Importance log-weights log w = p − g per token"))),
      heatmap_(new HeatmapView(tr("Distribution over steps (y: log w)"))),
      slider_(new QSlider(Qt::Horizontal)),
      follow_box_(new QCheckBox(tr("Follow latest"))),
      step_label_(new QLabel),
      range_counts_(new QLabel),
      oob_(new ChartView(tr("Fraction outside the bounds"))),
      ess_(new ChartView(tr("Effective sample size"))),
      mean_w_(new ChartView(tr("Mean weight"))) {
  hist_->setNormalized(true);
  hist_->plot()->xAxis->setLabel(tr("log w = log π_train − log π_gen"));
  range_counts_->setToolTip(
      tr("Tokens whose log-weight falls outside the histogram's range (the bars beyond its "
         "ends): far from the bounds, where truncation bites hardest"));
  oob_->addCurve(QStringLiteral("is/out_of_bounds"), QColor(0xd6, 0x27, 0x28));
  ess_->addCurve(QStringLiteral("is/effective_sample_size"), QColor(0x1f, 0x77, 0xb4));
  mean_w_->addCurve(QStringLiteral("is/mean_weight"), QColor(0x2c, 0xa0, 0x2c));
  slider_->setToolTip(tr("The step whose histogram is shown"));
  slider_->setPageStep(10);
  follow_box_->setChecked(true);
  step_label_->setMinimumWidth(
      step_label_->fontMetrics().horizontalAdvance(QStringLiteral("step 000000 (0000 of 0000)")));

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Step:")));
  controls->addWidget(slider_, 1);
  controls->addWidget(step_label_);
  controls->addWidget(follow_box_);
  // Two columns (a chart's header needs ~600 px): the distributions, then the three charts.
  auto* layout = new QGridLayout(this);
  layout->addLayout(controls, 0, 0, 1, 2);
  auto* hist_box = new QVBoxLayout;
  hist_box->addWidget(hist_, 1);
  hist_box->addWidget(range_counts_);
  layout->addLayout(hist_box, 1, 0, 3, 1);
  layout->addWidget(heatmap_, 4, 0, 3, 1);
  layout->addWidget(oob_, 1, 1, 2, 1);
  layout->addWidget(ess_, 3, 1, 2, 1);
  layout->addWidget(mean_w_, 5, 1, 2, 1);
  for (int r = 1; r <= 6; ++r) layout->setRowStretch(r, 1);
  layout->setColumnStretch(0, 1);
  layout->setColumnStretch(1, 1);

  connect(slider_, &QSlider::valueChanged, this, [this](int index) {
    follow_ = index == slider_->maximum();
    const QSignalBlocker block(follow_box_);
    follow_box_->setChecked(follow_);
    showIndex(index);
  });
  connect(follow_box_, &QCheckBox::toggled, this, &ImportanceTab::setFollowLatest);
  linkChartOptions(charts());
  setRun(nullptr);
}

void ImportanceTab::clearRun() {
  shown_.reset();
  steps_.clear();
  heat_columns_ = 0;
  heat_last_ = 0;
  clearCharts(charts());
  hist_->setHistograms({});
  heatmap_->setData(HeatmapData{});
  {
    const QSignalBlocker block(slider_);
    slider_->setRange(0, 0);
    slider_->setEnabled(false);
  }
  step_label_->setText(tr("no histogram yet"));
  range_counts_->clear();
  bounds_ = {-1, -1};  // draw the new run's lines
  setBounds();
}

void ImportanceTab::showNew() {
  setBounds();  // a live edit of is_min / is_max moves the lines
  oob_->setCurveData(0, run_->series(metric::kOutOfBounds));
  ess_->setCurveData(0, run_->series(metric::kEss));
  mean_w_->setCurveData(0, run_->series(metric::kMeanWeight));
  syncPrecisionMarkers(run_, charts(), &markers_);
  updateSteps();
  updateHeatmap();
}

void ImportanceTab::setFollowLatest(bool on) {
  follow_ = on;
  {
    const QSignalBlocker block(follow_box_);
    follow_box_->setChecked(on);
  }
  if (on && !steps_.empty()) {
    const QSignalBlocker block(slider_);
    slider_->setValue(static_cast<int>(steps_.size()) - 1);
    showIndex(slider_->value());
  }
}

void ImportanceTab::showStep(int64_t step) {
  if (steps_.empty()) return;
  const int index = nearestStepIndex(steps_, step);
  follow_ = false;
  {
    const QSignalBlocker block(follow_box_);
    follow_box_->setChecked(false);
  }
  const QSignalBlocker block(slider_);
  slider_->setValue(index);
  showIndex(index);
}

void ImportanceTab::updateSteps() {
  const auto* hists = importanceHistograms(run_);
  const size_t n = hists ? hists->size() : 0;
  if (n == steps_.size() && (n == 0 || steps_.back() == hists->rbegin()->first)) return;
  steps_.clear();
  if (hists)
    for (const auto& [step, h] : *hists) steps_.push_back(step);
  const QSignalBlocker block(slider_);
  slider_->setEnabled(n > 0);
  slider_->setRange(0, std::max(0, static_cast<int>(n) - 1));
  if (n == 0) {
    step_label_->setText(tr("no histogram yet"));
    return;
  }
  if (follow_ || !shown_) {
    slider_->setValue(static_cast<int>(n) - 1);
  } else {
    // Keep the step shown where it is (its index may have moved if the history was rebuilt).
    slider_->setValue(nearestStepIndex(steps_, *shown_));
  }
  showIndex(slider_->value());
}

void ImportanceTab::showIndex(int index) {
  const auto* hists = importanceHistograms(run_);
  if (!hists || index < 0 || static_cast<size_t>(index) >= steps_.size()) return;
  const int64_t step = steps_[static_cast<size_t>(index)];
  step_label_->setText(stepPosition(steps_, index));
  if (shown_ == step) return;
  shown_ = step;
  const Histogram& h = hists->at(step);
  hist_->setHistograms(
      {HistogramCurve{tr("step %1").arg(static_cast<qint64>(step)), QColor(0x1f, 0x77, 0xb4), h}});
  int64_t total = 0;
  for (int64_t c : h.counts) total += c;
  if (h.counts.size() >= 2 && h.edges.size() >= 2)
    range_counts_->setText(tr("%1 tokens · below %2: %3 · above %4: %5")
                               .arg(static_cast<qint64>(total))
                               .arg(h.edges.front())
                               .arg(static_cast<qint64>(h.counts.front()))
                               .arg(h.edges.back())
                               .arg(static_cast<qint64>(h.counts.back())));
  else
    range_counts_->clear();
}

void ImportanceTab::setBounds() {
  std::pair<double, double> bounds{0, 0};  // 0: no line
  if (run_) {
    const Json& c = run_->row.config;
    const bool off = c.is_object() && c.contains("grpo") && c.at("grpo").is_object() &&
                     c.at("grpo").contains("importance") &&
                     c.at("grpo").at("importance").is_string() &&
                     c.at("grpo").at("importance").as_string() == "off";
    if (!off) {  // with importance "off" the bounds mean nothing
      bounds.first = run_->liveSetting("is_min").value_or(0);
      bounds.second = run_->liveSetting("is_max").value_or(0);
    }
  }
  if (bounds == bounds_) return;
  bounds_ = bounds;
  hist_->clearVerticalLines();
  // The x axis is log w: a bound of 0 (the default is_min) lies at −∞, no line.
  if (bounds.first > 0)
    hist_->addVerticalLine(std::log(bounds.first), boundText("is_min", bounds.first));
  if (bounds.second > 0)
    hist_->addVerticalLine(std::log(bounds.second), boundText("is_max", bounds.second));
}

void ImportanceTab::updateHeatmap() {
  const auto* hists = importanceHistograms(run_);
  const size_t n = hists ? hists->size() : 0;
  const int64_t last = n ? hists->rbegin()->first : 0;
  if (n == heat_columns_ && last == heat_last_) return;
  heat_columns_ = n;
  heat_last_ = last;
  HeatmapData d;
  d.value_label = tr("fraction of tokens");
  d.log_color = true;
  if (n == 0) {
    heatmap_->setData(d);
    return;
  }
  // Rows: the bins of the latest histogram (under- and overflow are in the histogram view).
  const std::vector<double>& edges = hists->rbegin()->second.edges;
  if (edges.size() < 2) {
    heatmap_->setData(d);
    return;
  }
  const size_t bins = edges.size() - 1;
  d.rows = static_cast<int>(bins);
  const bool log_rows = edges.front() > 0;
  d.row_lo = log_rows ? std::log10(edges.front()) : edges.front();
  d.row_hi = log_rows ? std::log10(edges.back()) : edges.back();
  d.steps.reserve(n);
  d.values.reserve(n * bins);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto& [step, h] : *hists) {
    d.steps.push_back(static_cast<double>(step));
    int64_t total = 0;
    for (int64_t c : h.counts) total += c;
    const bool ok = h.counts.size() == bins + 2 && total > 0;
    for (size_t r = 0; r < bins; ++r) {
      // Empty bins stay transparent (no colour on a log scale for 0).
      const int64_t c = ok ? h.counts[r + 1] : 0;
      d.values.push_back(c > 0 ? static_cast<double>(c) / static_cast<double>(total) : nan);
    }
  }
  heatmap_->setData(d);
}

}  // namespace fp8rl::ui
