#include "ui/run/experts_tab.hpp"

#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <string>

#include "contract/metrics.hpp"
#include "ui/charts/chart_style.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/charts/heatmap_view.hpp"
#include "ui/data/run_data.hpp"
#include "ui/run/run_view.hpp"

namespace fp8rl::ui {

namespace {

// The layers with expert-load histograms, ascending.
std::vector<int> expertLayers(const RunData& run) {
  std::vector<int> out;
  const std::string prefix = histogram::kExpertLoadPrefix;
  for (auto it = run.histograms.lower_bound(prefix);
       it != run.histograms.end() && it->first.starts_with(prefix); ++it)
    out.push_back(std::stoi(it->first.substr(prefix.size())));
  std::sort(out.begin(), out.end());
  return out;
}

// The run's model has experts in some layer (its precision map says so).
bool modelHasExperts(const RunData& run) {
  const std::vector<int64_t> experts = run.expertsPerLayer();
  return std::any_of(experts.begin(), experts.end(), [](int64_t e) { return e > 0; });
}

}  // namespace

ExpertsTab::ExpertsTab(QWidget* parent)
    : RunTab(parent),
      caption_(new QLabel),
      load_(new HeatmapView(tr("Expert load (latest step)"))),
      mismatch_(new ChartView(tr("Routing mismatch: generator vs trainer"))),
      entropy_(new ChartView(tr("Router entropy (nats)"))) {
  auto* layout = new QVBoxLayout(this);
  caption_->setWordWrap(true);
  layout->addWidget(caption_);
  load_->setMinimumHeight(260);
  layout->addWidget(load_, 2);
  layout->addWidget(mismatch_, 1);
  layout->addWidget(entropy_, 1);
  for (ChartView* c : charts()) c->setMinimumHeight(220);
}

bool ExpertsTab::runHasExperts() const {
  return run_ && (!expertLayers(*run_).empty() || modelHasExperts(*run_));
}

void ExpertsTab::clearRun() {
  layers_.clear();
  rebuildCurves();
  load_->setData(HeatmapData{});
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
          : tr("%1 layers with experts. Routing replay %2: %3")
                .arg(layers_.size())
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
  updateLoad();
  version_ = run_->version;
}

void ExpertsTab::updateLoad() {
  HeatmapData d;
  d.x_label = tr("Expert");
  d.value_label = tr("share of the layer's tokens");
  int64_t step = -1;
  int experts = 0;
  for (int l : layers_) {
    const auto& by_step = run_->histograms.at(histogram::expert_load(l));
    if (by_step.empty()) continue;
    step = std::max<int64_t>(step, by_step.rbegin()->first);
    experts = std::max(experts, static_cast<int>(by_step.rbegin()->second.edges.size()) - 1);
  }
  if (step < 0 || experts <= 0) {
    load_->setData(d);
    return;
  }
  // Rows count from the bottom: the last layer first, so layer 0 is on top (as in the precision
  // grid).
  d.rows = static_cast<int>(layers_.size());
  d.row_lo = 0;
  d.row_hi = d.rows;
  const auto layer_at = [&](int r) { return layers_[static_cast<size_t>(d.rows - 1 - r)]; };
  for (int r = 0; r < d.rows; ++r) d.row_labels << QStringLiteral("L%1").arg(layer_at(r));
  for (int e = 0; e < experts; ++e) {
    d.steps.push_back(e);
    d.column_labels << QString::number(e);
  }
  d.values.assign(static_cast<size_t>(experts * d.rows), NAN);
  for (int r = 0; r < d.rows; ++r) {
    const auto& by_step = run_->histograms.at(histogram::expert_load(layer_at(r)));
    const auto it = by_step.find(step);
    if (it == by_step.end()) continue;
    const auto& counts = it->second.counts;  // underflow, experts…, overflow
    double total = 0;
    for (int e = 0; e < experts && e + 1 < static_cast<int>(counts.size()); ++e)
      total += static_cast<double>(counts[static_cast<size_t>(e + 1)]);
    for (int e = 0; e < experts && e + 1 < static_cast<int>(counts.size()); ++e)
      d.values[static_cast<size_t>(e * d.rows + r)] =
          total > 0 ? static_cast<double>(counts[static_cast<size_t>(e + 1)]) / total : NAN;
  }
  for (size_t i = 0; i < d.values.size(); ++i) {
    const int e = static_cast<int>(i) / d.rows, r = static_cast<int>(i) % d.rows;
    d.cell_tips << tr("L%1 expert %2: %3% of the layer's tokens (1/%4 = %5% is balanced)")
                       .arg(layer_at(r))
                       .arg(e)
                       .arg(100.0 * d.values[i], 0, 'f', 1)
                       .arg(experts)
                       .arg(100.0 / experts, 0, 'f', 1);
  }
  d.value_label = tr("share of the layer's tokens, step %1").arg(static_cast<qint64>(step));
  load_->setData(d);
}

}  // namespace fp8rl::ui
