#include "ui/run/experts_tab.hpp"

#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSlider>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "contract/metrics.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/charts/heatmap_view.hpp"
#include "ui/charts/replot_queue.hpp"
#include "ui/data/run_data.hpp"
#include "ui/run/run_view.hpp"

namespace fp8rl::ui {

namespace {

// The run's model has experts in some layer (its precision map says so).
bool modelHasExperts(const RunData& run) {
  const std::vector<int64_t> experts = run.expertsPerLayer();
  return std::any_of(experts.begin(), experts.end(), [](int64_t e) { return e > 0; });
}

QString percent(double share) {
  return std::isnan(share) ? QStringLiteral("no tokens")
                           : QStringLiteral("%1%").arg(100.0 * share, 0, 'f', 1);
}

const QColor kShownStepColor(200, 80, 0);

}  // namespace

ExpertsTab::ExpertsTab(QWidget* parent)
    : RunTab(parent),
      caption_(new QLabel),
      starving_label_(new QLabel),
      slider_(new QSlider(Qt::Horizontal)),
      step_label_(new QLabel),
      layer_choice_(new QComboBox),
      load_(new HeatmapView(tr("Expert load at a step"))),
      history_(new HeatmapView(tr("Expert load over steps"))),
      mismatch_(new ChartView(tr("Routing mismatch: generator vs trainer"))),
      entropy_(new ChartView(tr("Router entropy (nats)"))) {
  auto* layout = new QVBoxLayout(this);
  caption_->setWordWrap(true);
  layout->addWidget(caption_);
  starving_label_->setObjectName(QStringLiteral("starving"));
  starving_label_->setWordWrap(true);
  starving_label_->setStyleSheet(QStringLiteral("color: #b71c1c;"));
  starving_label_->hide();
  layout->addWidget(starving_label_);

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Load of step:")));
  slider_->setToolTip(tr("The step whose expert load the left map shows"));
  slider_->setPageStep(10);
  controls->addWidget(slider_, 1);
  step_label_->setMinimumWidth(
      step_label_->fontMetrics().horizontalAdvance(QStringLiteral("step 000000 (0000 of 0000)")));
  controls->addWidget(step_label_);
  controls->addSpacing(16);
  controls->addWidget(new QLabel(tr("Over steps, layer:")));
  layer_choice_->setToolTip(tr("The layer whose experts' load over steps the right map shows"));
  controls->addWidget(layer_choice_);
  layout->addLayout(controls);

  auto* grid = new QGridLayout;
  grid->addWidget(load_, 0, 0);
  grid->addWidget(history_, 0, 1);
  grid->addWidget(mismatch_, 1, 0);
  grid->addWidget(entropy_, 1, 1);
  grid->setRowStretch(0, 3);
  grid->setRowStretch(1, 2);
  layout->addLayout(grid, 1);
  load_->setMinimumHeight(260);
  history_->setMinimumHeight(260);
  for (ChartView* c : charts()) c->setMinimumHeight(220);
  shown_line_ = addRuleLine(history_->plot(), Qt::Vertical, 0, QString(), kShownStepColor);
  shown_line_.setVisible(false);

  connect(slider_, &QSlider::valueChanged, this, [this](int index) {
    follow_ = index == slider_->maximum();
    showIndex(index);
  });
  connect(layer_choice_, &QComboBox::activated, this, [this](int index) {
    layer_chosen_ = true;
    showLayer(layer_choice_->itemData(index).toInt());
  });
  setRun(nullptr);
}

bool ExpertsTab::runHasExperts() const {
  return run_ && (!expertLayers(*run_).empty() || modelHasExperts(*run_));
}

void ExpertsTab::clearRun() {
  layers_.clear();
  steps_.clear();
  starving_.clear();
  follow_ = true;
  shown_.reset();
  layer_ = -1;
  layer_chosen_ = false;
  rebuildCurves();
  load_->setData(HeatmapData{});
  history_->setData(HeatmapData{});
  shown_line_.setVisible(false);
  starving_label_->hide();
  {
    const QSignalBlocker block(slider_);
    slider_->setRange(0, 0);
    slider_->setEnabled(false);
  }
  step_label_->setText(tr("no routing yet"));
  layer_choice_->clear();
  if (!run_) {
    caption_->setText(tr("No run selected."));
    return;
  }
  showNew();
}

void ExpertsTab::rebuildCurves() {
  mismatch_->clearCurves();
  entropy_->clearCurves();
  mismatch_->addCurve(tr("tokens rerouted in any layer"), seriesColor(0));
  mismatch_->addCurve(tr("mean over layers"), seriesColor(1));
  entropy_->addCurve(tr("mean over layers"), seriesColor(1));
  for (size_t i = 0; i < layers_.size(); ++i) {
    const QString name = QStringLiteral("L%1").arg(layers_[i]);
    mismatch_->addCurve(name, seriesColor(static_cast<int>(i) + 2));
    entropy_->addCurve(name, seriesColor(static_cast<int>(i) + 2));
  }
  markers_ = SIZE_MAX;
}

void ExpertsTab::showNew() {
  if (!run_) return;
  const std::vector<int> layers = expertLayers(*run_);
  if (layers != layers_) {
    layers_ = layers;
    rebuildCurves();
    const QSignalBlocker block(layer_choice_);
    layer_choice_->clear();
    for (int l : layers_) layer_choice_->addItem(QStringLiteral("L%1").arg(l), l);
    if (std::find(layers_.begin(), layers_.end(), layer_) == layers_.end())
      layer_ = layers_.empty() ? -1 : layers_.front();
  }
  if (!runHasExperts()) {
    caption_->setText(tr("This run's model has no experts (a dense MLP in every layer)."));
    return;
  }
  const Json& c = run_->row.config;
  const bool replay = c.is_object() && c.contains("moe") &&
                      c.at("moe").contains("routing_replay") &&
                      c.at("moe").at("routing_replay").as_string() == "rollout";
  caption_->setText(
      layers_.empty()
          ? tr("No routing recorded yet (it comes with the first GRPO step).")
          : (layers_.size() == 1
                 ? tr("1 layer with experts. Routing replay %1: %2")
                 : tr("%1 layers with experts. Routing replay %2: %3").arg(layers_.size()))
                .arg(replay ? tr("on") : tr("off"))
                .arg(replay ? tr("the trainer routes each token as the generator did; the "
                                 "mismatch says how often its own routers would not have.")
                            : tr("the trainer routes with its own routers; where they choose "
                                 "other experts than the generator, its log-probs come from "
                                 "another network.")));
  mismatch_->setCurveData(0, run_->series(metric::kMoeTokensRerouted));
  mismatch_->setCurveData(1, run_->series(metric::kMoeRoutingMismatch));
  entropy_->setCurveData(0, run_->series(metric::kMoeRouterEntropy));
  for (size_t i = 0; i < layers_.size(); ++i) {
    mismatch_->setCurveData(static_cast<int>(i) + 2,
                            run_->series(metric::moe(layers_[i], "routing_mismatch")));
    entropy_->setCurveData(static_cast<int>(i) + 1,
                           run_->series(metric::moe(layers_[i], "router_entropy")));
  }
  syncPrecisionMarkers(run_, charts(), &markers_);
  updateStarving();
  updateSteps();
  updateHistory();
}

void ExpertsTab::updateStarving() {
  starving_ = starvingExperts(*run_);
  // A layer with a starving expert is the one to watch, until the user picks one.
  if (!starving_.empty() && !layer_chosen_) layer_ = starving_.front().layer;
  const int at =
      static_cast<int>(std::find(layers_.begin(), layers_.end(), layer_) - layers_.begin());
  if (at < layer_choice_->count()) {
    const QSignalBlocker block(layer_choice_);
    layer_choice_->setCurrentIndex(at);
  }
  if (starving_.empty()) {
    starving_label_->clear();
    starving_label_->hide();
    return;
  }
  QStringList named;
  for (const StarvingExpert& s : starving_)
    named << tr("L%1 expert %2 since step %3 (at most %4)")
                 .arg(s.layer)
                 .arg(s.expert)
                 .arg(static_cast<qint64>(s.since_step))
                 .arg(percent(s.max_share));
  const StarvingExpert& first = starving_.front();
  starving_label_->setText(tr("Starving, under %1 of the layer's tokens at every recorded step "
                              "(%2 is balanced): %3.")
                               .arg(percent(first.threshold))
                               .arg(percent(first.threshold / kStarvingFraction))
                               .arg(named.join(QStringLiteral(", "))));
  starving_label_->setToolTip(
      tr("An expert starves when its share of its layer's (token, choice) pairs stays under a "
         "quarter of the balanced share for %1 recorded steps or more, up to the latest: its "
         "router has stopped sending it tokens, so it stops learning.")
          .arg(kStarvingSteps));
  starving_label_->show();
}

void ExpertsTab::updateSteps() {
  std::set<int64_t> all;
  for (int l : layers_)
    for (const auto& [step, h] : run_->histograms.at(histogram::expert_load(l))) all.insert(step);
  steps_.assign(all.begin(), all.end());
  const int n = static_cast<int>(steps_.size());
  {
    const QSignalBlocker block(slider_);
    slider_->setEnabled(n > 0);
    slider_->setRange(0, std::max(0, n - 1));
    if (n > 0 && (follow_ || !shown_))
      slider_->setValue(n - 1);
    else if (n > 0)
      slider_->setValue(nearestStepIndex(steps_, *shown_));  // old steps may have been thinned
  }
  if (n == 0) {
    shown_.reset();
    step_label_->setText(tr("no routing yet"));
    load_->setData(HeatmapData{});
    shown_line_.setVisible(false);
    return;
  }
  shown_.reset();  // redraw: the step's data may have come since
  showIndex(slider_->value());
}

void ExpertsTab::showStep(int64_t step) {
  if (steps_.empty()) return;
  slider_->setValue(nearestStepIndex(steps_, step));  // sets follow_ and shows it
  showIndex(slider_->value());
}

void ExpertsTab::showIndex(int index) {
  if (!run_ || index < 0 || static_cast<size_t>(index) >= steps_.size()) return;
  const int64_t step = steps_[static_cast<size_t>(index)];
  step_label_->setText(stepPosition(steps_, index));
  if (shown_ == step) return;
  shown_ = step;
  updateLoad();
  shown_line_.moveTo(static_cast<double>(step));
  shown_line_.setVisible(layer_ >= 0);
  queueReplot(history_->plot());
}

void ExpertsTab::showLayer(int layer) {
  if (std::find(layers_.begin(), layers_.end(), layer) == layers_.end()) return;
  layer_ = layer;
  const int at =
      static_cast<int>(std::find(layers_.begin(), layers_.end(), layer_) - layers_.begin());
  const QSignalBlocker block(layer_choice_);
  layer_choice_->setCurrentIndex(at);
  updateHistory();
}

void ExpertsTab::updateLoad() {
  HeatmapData d;
  d.x_label = tr("Expert");
  d.value_label = tr("share of the layer's tokens");
  if (!shown_) {
    load_->setData(d);
    return;
  }
  const int64_t step = *shown_;
  int experts = 0;
  std::vector<ExpertLoadSeries> series;
  for (int l : layers_) {
    series.push_back(expertLoadSeries(*run_, l));
    experts = std::max(experts, series.back().experts);
  }
  if (experts <= 0) {
    load_->setData(d);
    return;
  }
  // Rows count from the bottom: the last layer first, so layer 0 is on top (as in the precision
  // grid).
  d.rows = static_cast<int>(layers_.size());
  d.row_lo = 0;
  d.row_hi = d.rows;
  const auto index_at = [&](int r) { return static_cast<size_t>(d.rows - 1 - r); };
  for (int r = 0; r < d.rows; ++r) d.row_labels << QStringLiteral("L%1").arg(layers_[index_at(r)]);
  for (int e = 0; e < experts; ++e) {
    d.steps.push_back(e);
    d.column_labels << QString::number(e);
  }
  const size_t cells = static_cast<size_t>(experts * d.rows);
  d.values.assign(cells, NAN);
  d.marked.assign(cells, 0);
  for (int r = 0; r < d.rows; ++r) {
    const ExpertLoadSeries& s = series[index_at(r)];
    const auto it = std::lower_bound(s.steps.begin(), s.steps.end(), step);
    if (it == s.steps.end() || *it != step) continue;
    const auto& shares = s.shares[static_cast<size_t>(it - s.steps.begin())];
    for (int e = 0; e < experts && e < static_cast<int>(shares.size()); ++e)
      d.values[static_cast<size_t>(e * d.rows + r)] = shares[static_cast<size_t>(e)];
  }
  for (const StarvingExpert& s : starving_) {
    const auto layer_at = std::find(layers_.begin(), layers_.end(), s.layer);
    if (layer_at == layers_.end() || step < s.since_step || s.expert >= experts) continue;
    const int r = d.rows - 1 - static_cast<int>(layer_at - layers_.begin());
    d.marked[static_cast<size_t>(s.expert * d.rows + r)] = 1;
  }
  for (size_t i = 0; i < d.values.size(); ++i) {
    const int e = static_cast<int>(i) / d.rows, r = static_cast<int>(i) % d.rows;
    d.cell_tips << tr("L%1 expert %2: %3 of the layer's tokens (1/%4 = %5 is balanced)%6")
                       .arg(layers_[index_at(r)])
                       .arg(e)
                       .arg(percent(d.values[i]))
                       .arg(experts)
                       .arg(percent(1.0 / experts))
                       .arg(d.marked[i] ? tr("; starving") : QString());
  }
  d.value_label = tr("share of the layer's tokens, step %1").arg(static_cast<qint64>(step));
  load_->setData(d);
}

void ExpertsTab::updateHistory() {
  HeatmapData d;
  d.value_label = tr("share of the layer's tokens");
  const ExpertLoadSeries s = layer_ >= 0 ? expertLoadSeries(*run_, layer_) : ExpertLoadSeries{};
  if (s.experts <= 0 || s.steps.empty()) {
    history_->setData(d);
    shown_line_.setVisible(false);
    return;
  }
  // Expert 0 on top, as layer 0 is in the map at a step; the dashed line is the step that map
  // shows.
  d.rows = s.experts;
  d.row_lo = 0;
  d.row_hi = d.rows;
  const auto expert_at = [&](int r) { return d.rows - 1 - r; };
  for (int r = 0; r < d.rows; ++r) d.row_labels << QStringLiteral("E%1").arg(expert_at(r));
  for (int64_t step : s.steps) d.steps.push_back(static_cast<double>(step));
  d.values.reserve(s.steps.size() * static_cast<size_t>(d.rows));
  for (size_t c = 0; c < s.steps.size(); ++c)
    for (int r = 0; r < d.rows; ++r) {
      const double share = s.shares[c][static_cast<size_t>(expert_at(r))];
      d.values.push_back(share);
      d.cell_tips << tr("L%1 expert %2 at step %3: %4 of the layer's tokens (%5 is balanced)")
                         .arg(s.layer)
                         .arg(expert_at(r))
                         .arg(static_cast<qint64>(s.steps[c]))
                         .arg(percent(share))
                         .arg(percent(1.0 / s.experts));
    }
  d.value_label = tr("L%1: share of the layer's tokens").arg(s.layer);
  history_->setData(d);
  shown_line_.setVisible(shown_.has_value());
}

}  // namespace fp8rl::ui
