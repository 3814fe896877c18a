// The run view (its six tabs) and the compare view on RunData built by hand, and the compare
// computations (summary, config diff) on hand-computed data. No store, no worker.
#include <qcustomplot.h>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalSpy>
#include <QSlider>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <limits>

#include "contract/autopilot.hpp"
#include "contract/live_edit.hpp"
#include "contract/metrics.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/charts/heatmap_view.hpp"
#include "ui/charts/histogram_view.hpp"
#include "ui/compare/compare_view.hpp"
#include "ui/data/compare.hpp"
#include "ui/data/expert_load.hpp"
#include "ui/data/run_data.hpp"
#include "ui/data/run_text.hpp"
#include "ui/run/audit_tab.hpp"
#include "ui/run/autopilot_panel.hpp"
#include "ui/run/experts_tab.hpp"
#include "ui/run/importance_tab.hpp"
#include "ui/run/live_settings_panel.hpp"
#include "ui/run/overview_tab.hpp"
#include "ui/run/precision_tab.hpp"
#include "ui/run/run_view.hpp"
#include "ui/run/samples_tab.hpp"
#include "ui/run/scales_tab.hpp"
#include "ui/run/throughput_tab.hpp"
#include "ui/widgets/line_label.hpp"
#include "ui/widgets/precision_grid.hpp"

using namespace fp8rl;
using namespace fp8rl::ui;

namespace {

constexpr int kLayers = 2;
const double kNan = std::numeric_limits<double>::quiet_NaN();

// A precision map of kLayers layers, all FP8 but the cells named "layer.module".
Json precisionMap(const QStringList& bf16 = {}) {
  Json::Array layers;
  for (int l = 0; l < kLayers; ++l) {
    Json::Object row;
    for (const QString& m : PrecisionGrid::modules().mid(0, kDenseModules))
      row[m.toStdString()] = bf16.contains(QStringLiteral("%1.%2").arg(l).arg(m)) ? "bf16" : "fp8";
    layers.push_back(Json(row));
  }
  return Json(layers);
}

Histogram histogram(const std::vector<double>& edges, const std::vector<int64_t>& counts) {
  Histogram h;
  h.edges = edges;
  h.counts = counts;
  return h;
}

void addScalar(RunData& run, const std::string& key, int64_t step, double value) {
  run.scalars[key].push_back({static_cast<double>(step), step * 1.5, step * 100.0, value});
}

// Everything a step records, with values that depend on the step.
void addStep(RunData& run, int64_t step) {
  const double s = static_cast<double>(step);
  addScalar(run, "reward/mean", step, 0.1 * s);
  addScalar(run, "accuracy/train", step, 0.05 * s);
  if (step % 2 == 0) addScalar(run, "accuracy/validation", step, 0.04 * s);
  addScalar(run, "loss", step, 1.0 / s);
  addScalar(run, "kl_ref", step, 0.001 * s);
  addScalar(run, "token_mult_prob_error", step, 1.0 + 0.01 * s);
  addScalar(run, "gen_kl_error", step, 0.0001 * s);
  addScalar(run, "is/mean_weight", step, 1.0);
  addScalar(run, "is/out_of_bounds", step, 0.01);
  addScalar(run, "is/effective_sample_size", step, 0.9);
  addScalar(run, "time/generation", step, 1.0);
  addScalar(run, "time/logprob", step, 0.5);
  addScalar(run, "time/policy_training", step, 2.0);
  addScalar(run, "time/recalibration", step, 0.1);
  addScalar(run, "time/total_step", step, 3.6);
  addScalar(run, "throughput/rollout_tokens_per_s", step, 1000 + s);
  addScalar(run, "throughput/training_tokens_per_s", step, 2000 + s);
  for (int l = 0; l < kLayers; ++l) {
    const std::string L = "L" + std::to_string(l);
    addScalar(run, "kv_scale/" + L + "/k", step, 0.5 + l);
    addScalar(run, "kv_scale/" + L + "/v", step, 0.25 + l);
    for (const char* kind : {"weight", "activation", "gradient"}) {
      // Layer 1's gradient statistics start at step 3: fewer points tell the selection apart.
      if (l == 1 && std::string(kind) == "gradient" && step < 3) continue;
      const std::string p = "fp8/" + L + "/" + kind + "/";
      addScalar(run, p + "saturated_frac", step, 0.001 * (l + 1));
      addScalar(run, p + "flushed_frac", step, 0.002 * (l + 1));
      addScalar(run, p + "rel_error", step, 0.03 * (l + 1));
      run.histograms["fp8_scale_log2/" + L + "/" + kind][step] =
          histogram({-8, -4, 0, 4}, {0, static_cast<int64_t>(l), 5, 3, 0});
    }
  }
  run.histograms[histogram::kImportanceLogWeight][step] =
      histogram({-0.5, -0.25, 0, 0.25, 0.5}, {1, 2, step, 3, 0, 1});
  // Two samples: p − g of their tokens −0.02, 0 and +0.1, 0.
  for (int i = 0; i < 2; ++i)
    run.samples.emplace_back(
        step,
        SampleRecord{
            "p" + std::to_string(step), "r", "a", i * 1.0, {"r", "<eos>"}, {i ? 0.1 : -0.02, 0.0}});
  run.events.push_back(
      {step, s * 1.5, EventRecord{"validation", "step " + std::to_string(step), {}}});
  run.last_step = std::max(run.last_step, step);
  ++run.version;
}

// What a data-parallel step adds: the number of ranks, rank 0's collective time and each rank's
// tokens/s (rank r: rollout 100 (r + 1) + step, training 10 (r + 1) + step).
void addRankScalars(RunData& run, int64_t step, int ranks) {
  addScalar(run, metric::kRanks, step, ranks);
  addScalar(run, metric::kTimeCommunication, step, 0.25);
  for (int r = 0; r < ranks; ++r) {
    addScalar(run, metric::rank_rollout_tps(r), step, 100.0 * (r + 1) + step);
    addScalar(run, metric::rank_train_tps(r), step, 10.0 * (r + 1) + step);
  }
  ++run.version;
}

std::vector<double> graphValues(QCPGraph* g) {
  std::vector<double> v;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) v.push_back(it->value);
  return v;
}

RunData makeRun(int64_t id, int64_t steps, const std::string& status = "running") {
  RunData run;
  run.id = id;
  run.row.id = id;
  run.row.name = "run" + std::to_string(id);
  run.row.status = status;
  run.row.precision_summary = "fp8";
  run.row.config = Json::parse(R"({"grpo": {"importance": "tis", "is_min": 0.5, "is_max": 2.0},
                                   "model": {"num_hidden_layers": 2},
                                   "precision": {"default": "fp8", "overrides": []}})");
  run.precision.emplace_back(1, precisionMap());
  for (int64_t s = 1; s <= steps; ++s) addStep(run, s);
  return run;
}

}  // namespace

class TestRunViews : public QObject {
  Q_OBJECT
 private slots:
  // A mixture-of-experts run: the Experts tab appears, its heatmap holds each layer's share per
  // expert at the latest step, its charts the mismatch and entropy; a dense run hides it.
  void expertsTabShowsTheRouting() {
    RunView view;
    RunData dense = makeRun(1, 3);
    view.setRun(&dense);
    const int page = 6;
    QCOMPARE(view.tabs()->tabText(page), QString("Experts"));
    QVERIFY(!view.tabs()->isTabVisible(page));
    // A model with experts (its precision map says so, whatever its family is called) shows the
    // tab before any expert load has been recorded.
    RunData fresh = makeRun(3, 0);
    fresh.precision = {{0, PrecisionMap({0, 8}, Precision::fp8).to_json()}};
    view.setRun(&fresh);
    QVERIFY(view.tabs()->isTabVisible(page));
    view.setRun(&dense);
    QVERIFY(!view.tabs()->isTabVisible(page));

    RunData run = makeRun(2, 3);
    run.precision = {{0, PrecisionMap({4, 4}, Precision::fp8).to_json()}};  // 4 experts a layer
    run.row.config["moe"] = Json::parse(R"({"routing_replay": "rollout"})");
    for (int64_t s = 1; s <= 3; ++s)
      for (int l : {0, 1}) {
        Histogram h;
        h.edges = {0, 1, 2, 3, 4};
        h.counts = {0, 10 * s, 20, 30, 40 + l, 0};  // underflow, 4 experts, overflow
        run.histograms[histogram::expert_load(l)][s] = h;
        addScalar(run, metric::moe(l, "routing_mismatch"), s, 0.01 * s + l);
        addScalar(run, metric::moe(l, "router_entropy"), s, 1.3);
      }
    for (int64_t s = 1; s <= 3; ++s) {
      addScalar(run, metric::kMoeRoutingMismatch, s, 0.02 * s);
      addScalar(run, metric::kMoeTokensRerouted, s, 0.05 * s);
      addScalar(run, metric::kMoeRouterEntropy, s, 1.3);
    }
    view.setRun(&run);
    QVERIFY(view.tabs()->isTabVisible(page));
    ExpertsTab* t = view.experts();
    QVERIFY(t->caption()->text().contains("Routing replay on"));
    const HeatmapData& d = t->loadHeatmap()->data();
    QCOMPARE(d.rows, 2);
    QCOMPARE(d.row_labels, QStringList({"L1", "L0"}));  // bottom-up: layer 0 on top
    QCOMPARE(d.column_labels.size(), 4);
    QVERIFY(d.value_label.contains("step 3"));
    QCOMPARE(d.values[0 * 2 + 1], 30.0 / 120.0);  // expert 0 of L0 at step 3: 30 of 120
    QCOMPARE(d.values[3 * 2 + 0], 41.0 / 121.0);  // expert 3 of L1
    QVERIFY(d.cell_tips[1].contains("L0 expert 0: 25.0% of the layer's tokens"));
    QCOMPARE(t->mismatchChart()->curveCount(), 4);  // any layer, mean, L0, L1
    QCOMPARE(t->entropyChart()->curveCount(), 3);   // mean, L0, L1
    for (int c = 0; c < 4; ++c) QCOMPARE(t->mismatchChart()->pointCount(c), int64_t(3));
    for (int c = 0; c < 3; ++c) QCOMPARE(t->entropyChart()->pointCount(c), int64_t(3));
  }

  // Expert load over steps, from records written through the run store as a moe-demo run writes
  // them (an expert_load/L{l} histogram per layer every RL step) and read back as the studio
  // reads them: a layer's experts × steps map, the step slider of the layers × experts map, and
  // a starving expert named with its layer and the step since which it starves.
  void expertsLoadOverSteps() {
    QTemporaryDir dir;
    RunStore store(dir.filePath("runs.sqlite").toStdString());
    const Json config =
        Json::parse(R"({"model": {"family": "qwen3_moe"}, "moe": {"routing_replay": "rollout"}})");
    const int64_t id = store.create_run("moe", "moe-demo", config, "fp8");
    constexpr int kExperts = 8, kStarved = 5;
    for (int64_t s = 1; s <= 12; ++s) {
      StepRecord r;
      r.step = s;
      r.phase = "rl";
      r.wall_seconds = static_cast<double>(s);
      for (int l : {0, 1}) {
        Histogram h;
        for (int e = 0; e <= kExperts; ++e) h.edges.push_back(e);
        h.counts.push_back(0);
        for (int e = 0; e < kExperts; ++e)  // L1's expert 5 gets one token from step 4 on
          h.counts.push_back(l == 1 && e == kStarved && s >= 4 ? 1 : 32 + (l + e + s) % 5);
        h.counts.push_back(0);
        r.histograms.push_back({histogram::expert_load(l), h});
        r.scalars[metric::moe(l, "routing_mismatch")] = 0.01 * l;
        r.scalars[metric::moe(l, "router_entropy")] = 2.0;
      }
      store.record_step(id, r);
    }
    store.set_status(id, "finished");
    const RunData run = loadRun(store, id);

    ExpertsTab t;
    t.resize(1000, 900);
    t.setRun(&run);
    QVERIFY(t.runHasExperts());
    // The starving expert: named, with its layer and since when; its layer shown over steps.
    QCOMPARE(t.starving().size(), size_t(1));
    const StarvingExpert& starving = t.starving().front();
    QCOMPARE(starving.layer, 1);
    QCOMPARE(starving.expert, kStarved);
    QCOMPARE(starving.since_step, int64_t(4));
    QCOMPARE(starving.steps, 9);
    const QString said = t.starvingLabel()->text();
    QVERIFY2(!t.starvingLabel()->isHidden() && said.contains("L1 expert 5") &&
                 said.contains("since step 4") && said.contains("under 3.1%"),
             qPrintable(said));
    QCOMPARE(t.shownLayer(), 1);
    QCOMPARE(t.layerChoice()->currentText(), QString("L1"));
    // Experts × steps of L1: expert 0 on top, one column per recorded step.
    const HeatmapData& h = t.loadOverStepsHeatmap()->data();
    QCOMPARE(h.rows, kExperts);
    QCOMPARE(h.steps.size(), size_t(12));
    QCOMPARE(h.row_labels.front(), QString("E7"));
    QCOMPARE(h.row_labels.back(), QString("E0"));
    const int starved_row = kExperts - 1 - kStarved;
    const auto cell = [&](size_t column, int row) {
      return h.values[column * static_cast<size_t>(h.rows) + static_cast<size_t>(row)];
    };
    QVERIFY(cell(11, starved_row) < 0.01);
    QVERIFY(cell(2, starved_row) > 0.1);  // step 3: still fed
    QVERIFY(h.cell_tips[static_cast<qsizetype>(11 * kExperts + starved_row)].contains(
        "L1 expert 5 at step 12"));
    // The step slider: the latest step by default, its starving cell outlined; an earlier step
    // on request, before the starving began.
    QCOMPARE(t.stepSlider()->maximum(), 11);
    QCOMPARE(t.shownStep(), std::optional<int64_t>(12));
    const HeatmapData* load = &t.loadHeatmap()->data();
    QCOMPARE(load->rows, 2);  // L1 at the bottom (row 0), L0 on top
    QVERIFY(load->marked[static_cast<size_t>(kStarved * 2 + 0)]);
    QCOMPARE(std::count(load->marked.begin(), load->marked.end(), 1), 1);
    t.showStep(2);
    QCOMPARE(t.shownStep(), std::optional<int64_t>(2));
    QCOMPARE(t.stepLabel()->text(), QString("step 2 (2 of 12)"));
    load = &t.loadHeatmap()->data();
    QVERIFY(load->value_label.contains("step 2"));
    QCOMPARE(std::count(load->marked.begin(), load->marked.end(), 1), 0);
    // Another layer over steps, on request.
    t.showLayer(0);
    QCOMPARE(t.loadOverStepsHeatmap()->data().value_label,
             QString("L0: share of the layer's tokens"));
  }

  void tabsExist() {
    RunView view;
    QCOMPARE(view.tabs()->count(), 8);
    const QStringList names = {"Overview",   "Throughput", "Importance weights",
                               "FP8 scales", "Precision",  "Samples & events",
                               "Experts",    "Audit"};
    for (int i = 0; i < 8; ++i) QCOMPARE(view.tabs()->tabText(i).replace("&&", "&"), names[i]);
    QVERIFY(view.overview() && view.throughput() && view.importance() && view.scales() &&
            view.precision() && view.samples());
    // Each tab sits in a scroll area (the view may be narrower than two charts side by side).
    auto inner = [&](int i) {
      return qobject_cast<QScrollArea*>(view.tabs()->widget(i))->widget();
    };
    QCOMPARE(inner(0), static_cast<QWidget*>(view.overview()));
    QCOMPARE(inner(5), static_cast<QWidget*>(view.samples()));
    QVERIFY(view.minimumSizeHint().width() < 800);
    view.refresh();  // no run: nothing happens
    QCOMPARE(view.overview()->rewardChart()->pointCount(0), 0);
  }

  void overviewAppends() {
    RunData run = makeRun(7, 5);
    RunView view;
    view.setRun(&run);
    view.refresh();
    OverviewTab* o = view.overview();
    QCOMPARE(o->rewardChart()->pointCount(0), 5);
    QCOMPARE(o->accuracyChart()->curveCount(), 2);
    QCOMPARE(o->accuracyChart()->pointCount(0), 5);  // train
    QCOMPARE(o->accuracyChart()->pointCount(1), 2);  // validation at steps 2 and 4
    QCOMPARE(o->lossChart()->pointCount(0), 5);
    QCOMPARE(o->klChart()->pointCount(0), 5);
    QCOMPARE(o->multProbChart()->pointCount(0), 5);
    QCOMPARE(o->genKlChart()->pointCount(0), 5);
    QVERIFY(o->headline()->text().contains("Step <b>5</b>"));
    QVERIFY(o->headline()->text().contains("0.5"));  // reward 0.1 · 5

    for (int64_t s = 6; s <= 8; ++s) addStep(run, s);
    view.refresh();
    QCOMPARE(o->rewardChart()->pointCount(0), 8);
    QCOMPARE(o->accuracyChart()->pointCount(1), 4);
    QCOMPARE(o->multProbChart()->pointCount(0), 8);
    QVERIFY(o->headline()->text().contains("Step <b>8</b>"));

    // Data added without a version bump is not looked at (refresh is cheap when unchanged).
    addScalar(run, "reward/mean", 9, 0.9);
    view.refresh();
    QCOMPARE(o->rewardChart()->pointCount(0), 8);
    ++run.version;
    view.refresh();
    QCOMPARE(o->rewardChart()->pointCount(0), 9);

    // Another run replaces everything; none empties the charts.
    RunData other = makeRun(8, 3);
    view.setRun(&other);
    QCOMPARE(o->rewardChart()->pointCount(0), 3);
    QCOMPARE(view.throughput()->tokensChart()->pointCount(0), 3);
    view.setRun(nullptr);
    QCOMPARE(o->rewardChart()->pointCount(0), 0);
    QCOMPARE(view.samples()->sampleTable()->rowCount(), 0);
  }

  void chartOptionsApplyToTheTab() {
    RunData run = makeRun(1, 3);
    RunView view;
    view.setRun(&run);
    OverviewTab* o = view.overview();
    o->lossChart()->setLogY(true);
    o->lossChart()->setXAxis(XAxisKind::wall);
    emit o->lossChart()->optionsChanged();  // what the chart's own controls emit
    for (ChartView* c : o->charts()) {
      QVERIFY(c->logY());
      QCOMPARE(c->xAxis(), XAxisKind::wall);
    }
    // Other tabs keep their own settings.
    QVERIFY(!view.throughput()->tokensChart()->logY());
  }

  void precisionChangeMarkers() {
    RunData run = makeRun(1, 5);
    RunView view;
    view.setRun(&run);
    QCOMPARE(view.overview()->rewardChart()->markerCount(), 0);
    run.precision.emplace_back(6, precisionMap({"0.gate"}));
    addStep(run, 6);
    view.refresh();
    for (ChartView* c : view.overview()->charts()) QCOMPARE(c->markerCount(), 1);
    for (ChartView* c : view.throughput()->charts()) QCOMPARE(c->markerCount(), 1);
    for (ChartView* c : view.importance()->charts()) QCOMPARE(c->markerCount(), 1);
    for (ChartView* c : view.scales()->charts()) QCOMPARE(c->markerCount(), 1);
    // The stacked phase plot gets a line and its label.
    QCOMPARE(view.throughput()->phasePlot()->itemCount(), 2);
  }

  void throughputBars() {
    RunData run = makeRun(1, 4);
    RunView view;
    view.setRun(&run);
    ThroughputTab* t = view.throughput();
    QCOMPARE(t->tokensChart()->pointCount(0), 4);
    QCOMPARE(t->tokensChart()->pointCount(1), 4);
    QCOMPARE(t->stepTimeChart()->pointCount(0), 4);
    for (int k = 0; k < ThroughputTab::kPhases; ++k) QCOMPARE(t->phaseBars(k)->data()->size(), 4);
    QCOMPARE(t->phaseBars(1)->barBelow(), t->phaseBars(0));  // stacked
    addStep(run, 5);
    view.refresh();
    QCOMPARE(t->phaseBars(3)->data()->size(), 5);
    QCOMPARE((t->phaseBars(2)->data()->constEnd() - 1)->key, 5.0);
    QCOMPARE((t->phaseBars(2)->data()->constEnd() - 1)->value, 2.0);
  }

  void throughputPerRank() {
    RunData run = makeRun(1, 3);
    for (int64_t s = 1; s <= 3; ++s) addRankScalars(run, s, 2);
    RunView view;
    view.resize(1100, 900);
    view.setRun(&run);
    ThroughputTab* t = view.throughput();
    QVERIFY(!t->perRankRow()->isHidden());
    QCOMPARE(t->ranksShown(), 2);
    for (ChartView* c : {t->rankRolloutChart(), t->rankTrainingChart()}) {
      QCOMPARE(c->curveCount(), 2);
      c->replotNow();  // graph(3 r): rank r's raw points
    }
    QCOMPARE(t->rankRolloutChart()->plot()->graph(0)->name(), QString("rank 0"));
    QCOMPARE(t->rankRolloutChart()->plot()->graph(3)->name(), QString("rank 1"));
    QVERIFY(t->rankRolloutChart()->plot()->legend->visible());
    QCOMPARE(graphValues(t->rankRolloutChart()->plot()->graph(0)),
             (std::vector<double>{101, 102, 103}));
    QCOMPARE(graphValues(t->rankRolloutChart()->plot()->graph(3)),
             (std::vector<double>{201, 202, 203}));
    QCOMPARE(graphValues(t->rankTrainingChart()->plot()->graph(0)),
             (std::vector<double>{11, 12, 13}));
    QCOMPARE(graphValues(t->rankTrainingChart()->plot()->graph(3)),
             (std::vector<double>{21, 22, 23}));
    // Collective time over the phase bars, in their legend.
    QCOMPARE(graphValues(t->communicationGraph()), (std::vector<double>{0.25, 0.25, 0.25}));
    QVERIFY(t->phasePlot()->legend->hasItemWithPlottable(t->communicationGraph()));
    QVERIFY(view.overview()->headline()->text().contains("2 ranks"));

    // New steps append.
    addStep(run, 4);
    addRankScalars(run, 4, 2);
    view.refresh();
    QCOMPARE(t->rankRolloutChart()->pointCount(1), 4);
    QCOMPARE(t->rankTrainingChart()->pointCount(0), 4);
    QCOMPARE(t->communicationGraph()->dataCount(), 4);

    // The studio's screenshot of the tab, when asked for.
    if (const QString dir = qEnvironmentVariable("FP8RL_SCREENSHOTS"); !dir.isEmpty()) {
      view.tabs()->setCurrentIndex(1);
      view.show();
      QVERIFY(QTest::qWaitForWindowExposed(&view));
      QTest::qWait(200);  // queued replots
      QVERIFY(view.grab().save(QDir(dir).filePath("studio-run-throughput-ranks.png")));
    }

    // A run of one rank: no per-rank charts, no collective time.
    RunData single = makeRun(2, 3);
    view.setRun(&single);
    QVERIFY(t->perRankRow()->isHidden());
    QCOMPARE(t->ranksShown(), 0);
    QCOMPARE(t->rankRolloutChart()->curveCount(), 0);
    QCOMPARE(t->communicationGraph()->dataCount(), 0);
    QVERIFY(!t->phasePlot()->legend->hasItemWithPlottable(t->communicationGraph()));
    QVERIFY(!view.overview()->headline()->text().contains("ranks"));
  }

  void importanceFollowsLatest() {
    RunData run = makeRun(1, 4);
    RunView view;
    view.setRun(&run);
    ImportanceTab* imp = view.importance();
    QCOMPARE(imp->shownStep(), std::optional<int64_t>(4));
    QCOMPARE(imp->histogram()->histogramCount(), 1);
    for (ChartView* c : imp->charts()) QCOMPARE(c->pointCount(0), 4);
    // The heatmap: one column per step, one row per bin, fractions of the step's tokens.
    const HeatmapData& d = imp->heatmap()->data();
    QCOMPARE(d.steps.size(), size_t{4});
    QCOMPARE(d.rows, 4);
    QCOMPARE(d.row_lo, -0.5);
    QCOMPARE(d.row_hi, 0.5);
    QVERIFY(d.log_color);
    // Step 4: counts {1, 2, 4, 3, 0, 1} of 11 → bins 2/11, 4/11, 3/11, empty.
    QCOMPARE(d.values[3 * 4 + 0], 2.0 / 11);
    QCOMPARE(d.values[3 * 4 + 1], 4.0 / 11);
    QVERIFY(std::isnan(d.values[3 * 4 + 3]));
    // Step 4's tokens beyond the range: 1 below, 1 above.
    QCOMPARE(imp->rangeCounts()->text(), QString("11 tokens · below -0.5: 1 · above 0.5: 1"));

    addStep(run, 5);
    view.refresh();
    QCOMPARE(imp->shownStep(), std::optional<int64_t>(5));
    QCOMPARE(imp->heatmap()->data().steps.size(), size_t{5});

    imp->showStep(2);
    QCOMPARE(imp->shownStep(), std::optional<int64_t>(2));
    QVERIFY(!imp->followLatest());
    addStep(run, 6);
    view.refresh();
    QCOMPARE(imp->shownStep(), std::optional<int64_t>(2));  // stays where the user put it
    imp->stepSlider()->setValue(imp->stepSlider()->maximum());
    QVERIFY(imp->followLatest());
    QCOMPARE(imp->shownStep(), std::optional<int64_t>(6));
    imp->showStep(100);  // nearest recorded
    QCOMPARE(imp->shownStep(), std::optional<int64_t>(6));
  }

  // A spread of log-weights fills many of the 80 fine bins around 0 (the old log bins put a
  // healthy run's weights in one or two).
  void importanceSpreadsOverBins() {
    RunData run = makeRun(1, 1);
    std::vector<double> log_w;
    for (int i = 0; i <= 200; ++i) log_w.push_back(-0.3 + 0.003 * i);
    const double r = histogram::kImportanceLogWeightRange;
    run.histograms[histogram::kImportanceLogWeight][1] =
        linear_histogram(log_w, -r, r, histogram::kImportanceLogWeightBins);
    ImportanceTab tab;
    tab.setRun(&run);
    QCOMPARE(tab.histogram()->histogramCount(), 1);
    // The outline visits each bin's two corners at its height.
    const auto outline = tab.histogram()->plot()->graph(0)->data();
    int filled = 0;
    for (auto it = outline->constBegin(); it != outline->constEnd(); ++it) filled += it->value > 0;
    QVERIFY2(filled / 2 > 10, qPrintable(QString::number(filled / 2)));
  }

  void scalesSelection() {
    RunData run = makeRun(1, 5);
    RunView view;
    view.setRun(&run);
    ScalesTab* sc = view.scales();
    QCOMPARE(sc->layerBox()->count(), kLayers);
    QCOMPARE(sc->layer(), 0);
    QCOMPARE(sc->kind(), QString("weight"));
    QCOMPARE(sc->shownHistogram(), QString("fp8_scale_log2/L0/weight"));
    QCOMPARE(sc->shownStep(), std::optional<int64_t>(5));
    QCOMPARE(sc->histogram()->histogramCount(), 1);
    QCOMPARE(sc->saturatedChart()->pointCount(0), 5);
    QCOMPARE(sc->flushedChart()->pointCount(0), 5);
    QCOMPARE(sc->relErrorChart()->pointCount(0), 5);
    QCOMPARE(sc->heatmap()->data().rows, kLayers);
    QCOMPARE(sc->heatmap()->data().row_labels, QStringList({"L0", "L1"}));
    QCOMPARE(sc->heatmap()->data().steps.size(), size_t{5});
    QCOMPARE(sc->heatmap()->data().values[0 * 2 + 1], 0.06);  // rel_error of L1 at step 1

    sc->setSelection(1, "gradient");
    QCOMPARE(sc->shownHistogram(), QString("fp8_scale_log2/L1/gradient"));
    QCOMPARE(sc->saturatedChart()->pointCount(0), 3);  // L1 gradient starts at step 3
    QCOMPARE(sc->relErrorChart()->pointCount(0), 3);
    QCOMPARE(sc->heatmap()->data().steps.size(), size_t{5});
    QVERIFY(std::isnan(sc->heatmap()->data().values[0 * 2 + 1]));  // L1 has no step 1

    sc->statBox()->setCurrentText("saturated_frac");
    QCOMPARE(sc->heatmap()->data().values[4 * 2 + 1], 0.002);

    // A chosen step instead of the latest (nearest recorded).
    sc->setHistogramStep(4);
    QCOMPARE(sc->shownStep(), std::optional<int64_t>(4));
    sc->setHistogramStep(std::nullopt);
    QCOMPARE(sc->shownStep(), std::optional<int64_t>(5));

    // The combo boxes drive the same selection.
    sc->kindBox()->setCurrentIndex(sc->kindBox()->findData("activation"));
    QCOMPARE(sc->shownHistogram(), QString("fp8_scale_log2/L1/activation"));
    QCOMPARE(sc->saturatedChart()->pointCount(0), 5);

    sc->setSelection(0, "kv");
    QVERIFY(sc->shownHistogram().isEmpty());
    QCOMPARE(sc->kvChart()->pointCount(0), 5);
    QCOMPARE(sc->kvChart()->pointCount(1), 5);
    QCOMPARE(sc->heatmap()->data().rows, 2 * kLayers);
    QCOMPARE(sc->heatmap()->data().row_labels[3], QString("L1 v"));
    QVERIFY(!sc->statBox()->isEnabled());
    QCOMPARE(sc->kvTable()->rowCount(), kLayers);
    QCOMPARE(sc->kvTable()->item(1, 0)->text(), QString("1.5"));
    QCOMPARE(sc->kvTable()->item(1, 1)->text(), QString("1.25"));

    addStep(run, 6);
    view.refresh();
    QCOMPARE(sc->kvChart()->pointCount(0), 6);
  }

  void precisionApply() {
    RunData run = makeRun(42, 3);
    RunView view;
    view.setRun(&run);
    PrecisionTab* p = view.precision();
    QCOMPARE(p->grid()->layers(), kLayers);
    QVERIFY(p->grid()->edits().isEmpty());
    QVERIFY(!p->applyButton()->isEnabled());
    QCOMPARE(p->history()->rowCount(), 1);  // the initial map
    // Row headers carry the weight error (L1: 0.06 → 6%).
    QVERIFY(p->grid()->layerLabel(1).contains("6"));

    QSignalSpy spy(&view, &RunView::liveEditRequested);
    p->grid()->toggle(0, static_cast<int>(PrecisionGrid::modules().indexOf("gate")));
    QCOMPARE(p->grid()->edits(), QStringList({"0.gate=bf16"}));
    QVERIFY(p->applyButton()->isEnabled());
    QVERIFY(p->revertButton()->isEnabled());
    p->applyButton()->click();
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).value<qint64>(), qint64{42});
    const auto sent = spy.at(0).at(1).value<LiveEdit>();
    QCOMPARE(QString::fromStdString(sent.describe()), QString("0.gate=bf16"));
    QVERIFY(sent.settings.empty());

    // The worker applied it: the new map arrives and the grid shows it, edits cleared.
    run.precision.emplace_back(4, precisionMap({"0.gate"}));
    addStep(run, 4);
    view.refresh();
    QVERIFY(p->grid()->edits().isEmpty());
    QCOMPARE(p->grid()->cell(0, static_cast<int>(PrecisionGrid::modules().indexOf("gate"))),
             QString("bf16"));
    QVERIFY(!p->applyButton()->isEnabled());
    QCOMPARE(p->history()->rowCount(), 2);
    QCOMPARE(p->history()->item(1, 0)->data(Qt::DisplayRole).toLongLong(), 4);
    QVERIFY(p->history()->item(1, 1)->text().contains("L0.gate bf16"));

    // Revert drops edits.
    p->grid()->toggle(1, 0);
    QVERIFY(p->applyButton()->isEnabled());
    p->revertButton()->click();
    QVERIFY(p->grid()->edits().isEmpty());
    QVERIFY(!p->applyButton()->isEnabled());

    // The run finishes (a status change need not bump the version): Apply goes off.
    p->grid()->toggle(1, 0);
    QVERIFY(p->applyButton()->isEnabled());
    run.row.status = "finished";
    view.refresh();
    QVERIFY(!p->applyButton()->isEnabled());
    p->applyButton()->click();
    QCOMPARE(spy.count(), 1);
  }

  void precisionFinishedRun() {
    RunData run = makeRun(3, 2, "finished");
    RunView view;
    view.setRun(&run);
    PrecisionTab* p = view.precision();
    QSignalSpy spy(&view, &RunView::liveEditRequested);
    p->grid()->toggle(0, static_cast<int>(PrecisionGrid::modules().indexOf("gate")));
    QCOMPARE(p->grid()->edits(), QStringList({"0.gate=bf16"}));
    QVERIFY(!p->applyButton()->isEnabled());
    QVERIFY(!p->runIsLive());
    p->applyButton()->click();
    QCOMPARE(spy.count(), 0);
    run.row.status = "paused";  // a paused run takes edits
    view.refresh();
    QVERIFY(p->applyButton()->isEnabled());
  }

  // Live settings: values in force from the config, then from `set` events; typed values are
  // checked by the contract's rules; Apply sends them with the precision edits as one live
  // edit; the importance tab's truncation lines follow is_min / is_max as they change.
  void liveSettingsEditAndFollow() {
    RunData run = makeRun(7, 3);
    RunView view;
    view.setRun(&run);
    PrecisionTab* p = view.precision();
    LiveSettingsPanel* s = p->settings();
    QCOMPARE(s->current("is_max")->text(), QString("2"));
    QCOMPARE(s->current("lr")->text(), QString("–"));  // not in this config
    QCOMPARE(view.importance()->histogram()->verticalLines(),
             std::vector<double>({std::log(0.5), std::log(2.0)}));

    s->field("lr")->setText("-1");
    QVERIFY(s->hasErrors());
    QVERIFY(!p->applyButton()->isEnabled());
    s->field("lr")->setText("abc");
    QVERIFY(s->hasErrors());
    s->field("lr")->setText("0.0002");
    s->field("validation_every")->setText("2.5");
    QVERIFY(s->hasErrors());
    QVERIFY(!p->applyButton()->isEnabled());
    s->field("validation_every")->setText("5");
    QVERIFY(!s->hasErrors());
    QVERIFY(p->applyButton()->isEnabled());

    QSignalSpy spy(&view, &RunView::liveEditRequested);
    p->grid()->toggle(1, static_cast<int>(PrecisionGrid::modules().indexOf("down")));
    p->applyButton()->click();
    QCOMPARE(spy.count(), 1);
    const auto sent = spy.at(0).at(1).value<LiveEdit>();
    // One edit: the grid's cell and both settings, typed.
    QCOMPARE(QString::fromStdString(sent.describe()),
             QString("1.down=bf16, lr = 0.0002, validation_every = 5"));
    QCOMPARE(sent.value("lr"), std::optional<double>(0.0002));
    QVERIFY(s->field("lr")->text().isEmpty());  // sent: the fields empty

    // The worker applied is_max = 3 (a set event): the value in force and the line move, also
    // without a new histogram.
    run.events.push_back({3, 9.0,
                          EventRecord{"set", "is_max = 3",
                                      Json::parse(
                                          R"({"key": "is_max",
                                                                            "value": 3})")}});
    ++run.version;
    view.refresh();
    QCOMPARE(s->current("is_max")->text(), QString("3"));
    QCOMPARE(view.importance()->histogram()->verticalLines(),
             std::vector<double>({std::log(0.5), std::log(3.0)}));
    QCOMPARE(run.liveSetting("is_max"), std::optional<double>(3.0));
    QCOMPARE(run.liveSetting("is_min"), std::optional<double>(0.5));
  }

  // The precision autopilot in the Precision tab: its state follows the run (off, watching,
  // acting, cooling down), the grid's heat column shows the per-linear FP8 error signal and
  // its cells what it holds and what a person pinned; a person's edit takes a held linear
  // back; its settings go out with Apply; the events pane shows a decision's evidence.
  void autopilotPanel() {
    RunData run = makeRun(9, 3);
    run.row.config.as_object()["autopilot"] = Json::parse(R"({"threshold": 1.02, "patience": 2})");
    run.row.config.as_object()["precision"].as_object()["autopilot"] = Json(false);
    RunView view;
    view.setRun(&run);
    PrecisionTab* p = view.precision();
    AutopilotPanel* a = p->autopilot();
    const int down = static_cast<int>(PrecisionGrid::modules().indexOf("down"));
    // Its settings are in its panel, not in the tab's list.
    QVERIFY(a->settings()->choiceField(autopilot::kLive));
    QVERIFY(a->settings()->field(autopilot::kLiveThreshold));
    QVERIFY(!p->settings()->choiceField(autopilot::kLive));
    QVERIFY(p->settings()->field("lr"));
    QVERIFY(a->state()->text().contains("OFF"));
    QCOMPARE(a->settings()->current(autopilot::kLiveThreshold)->text(), QString("1.02"));
    QCOMPARE(a->settings()->current(autopilot::kLive)->text(), QString("off"));
    QVERIFY(p->grid()->heatText(1).isEmpty());  // no error signal yet: the column is hidden

    // Switched on from the studio: the edit goes out with Apply.
    QSignalSpy spy(&view, &RunView::liveEditRequested);
    a->settings()->choiceField(autopilot::kLive)->setCurrentIndex(1);  // on
    a->settings()->field(autopilot::kLivePatience)->setText("0");      // below its range
    QVERIFY(a->settings()->hasErrors());
    QVERIFY(!p->applyButton()->isEnabled());
    a->settings()->field(autopilot::kLivePatience)->setText("2");
    QVERIFY(p->applyButton()->isEnabled());
    p->applyButton()->click();
    QCOMPARE(spy.count(), 1);
    const auto sent = spy.at(0).at(1).value<LiveEdit>();
    QVERIFY(std::holds_alternative<bool>(*sent.get(autopilot::kLive)));
    QVERIFY(std::get<bool>(*sent.get(autopilot::kLive)));
    QCOMPARE(sent.value(autopilot::kLivePatience), std::optional<double>(2.0));
    QVERIFY(sent.precision.empty());
    QCOMPARE(a->settings()->choiceField(autopilot::kLive)->currentIndex(), 0);  // sent: cleared

    // The worker applied it; the metric is above the threshold for one step of two; the signal
    // says L1.down loses the most.
    run.events.push_back({3, 4.5,
                          EventRecord{event::kSet, "autopilot = on",
                                      Json::parse(R"({"key": "autopilot", "value": true})")}});
    addStep(run, 4);
    addScalar(run, autopilot::kScalarValue, 4, 1.04);
    addScalar(run, autopilot::kScalarStreak, 4, 1);
    addScalar(run, autopilot::kScalarCooldown, 4, 0);
    addScalar(run, autopilot::kScalarBudgetUsed, 4, 0);
    for (int l = 0; l < kLayers; ++l)
      for (const QString& m : PrecisionGrid::modules())
        addScalar(run, metric::fp8_error(l, m.toStdString()), 4,
                  l == 1 && m == "down" ? 0.5 : 0.02);
    view.refresh();
    QCOMPARE(a->settings()->current(autopilot::kLive)->text(), QString("on"));
    QVERIFY(a->state()->text().contains("WATCHING"));
    QVERIFY(a->state()->text().contains("token_mult_prob_error: 1.04 at step 4"));
    QVERIFY(a->state()->text().contains("above it 1 of 2"));
    QCOMPARE(p->grid()->heatText(1), QString("50.0%"));
    QCOMPARE(p->grid()->heatText(0), QString("2.0%"));
    QVERIFY(p->grid()
                ->table()
                ->item(1, PrecisionGrid::kHeatColumn)
                ->toolTip()
                .contains("down  50.00%"));
    QVERIFY(p->grid()->legend()->isHidden());  // nothing held or pinned yet
    QVERIFY(a->budget()->text().contains("Holds nothing in BF16"));

    // It acts after step 5: L1.down to BF16, with its evidence.
    addStep(run, 5);
    addScalar(run, autopilot::kScalarValue, 5, 1.05);
    addScalar(run, autopilot::kScalarStreak, 5, 2);
    addScalar(run, autopilot::kScalarCooldown, 5, 5);
    addScalar(run, autopilot::kScalarBudgetUsed, 5, 0.1);
    const Json decision = Json::parse(R"({
        "action": "move", "step": 5, "metric": "token_mult_prob_error", "value": 1.05,
        "threshold": 1.02, "patience": 2, "streak": 2, "confirmed": false,
        "ranking": [{"linear": "L1.down", "error": 0.5, "weight": 0.01, "activation": 0.5,
                     "gradient": 0.02, "budget_share": 0.1}],
        "budget": {"unit": "flops", "cap": 0.25, "used": 0, "after": 0.1},
        "overrides": ["1.down=bf16"], "linears": ["L1.down"],
        "units": [{"layer": 1, "module": "down"}],
        "message": "L1.down to BF16: token_mult_prob_error 1.05 above 1.02 for 2 steps"})");
    run.events.push_back(
        {5, 7.5, EventRecord{event::kAutopilot, decision.at("message").as_string(), decision}});
    run.precision.emplace_back(5, precisionMap({"1.down"}));
    view.refresh();
    QVERIFY(a->state()->text().contains("ACTING"));
    QVERIFY(a->state()->text().contains("L1.down to BF16"));
    QVERIFY(a->budget()->text().contains("Holds in BF16: L1.down"));
    QVERIFY(a->budget()->text().contains("10% of its budget of 25% GEMM FLOPs"));
    QCOMPARE(p->grid()->cell(1, down), QString("bf16"));
    QTableWidgetItem* cell = p->grid()->table()->item(1, down);
    QCOMPARE(cell->text(), QString("BF16"));
    QVERIFY(cell->background().color() != p->grid()->table()->item(0, down)->background().color());
    QVERIFY(cell->toolTip().contains("Moved to BF16 by the precision autopilot"));
    QVERIFY(!p->grid()->legend()->isHidden());
    const int last = p->history()->rowCount() - 1;
    QVERIFY(p->history()->item(last, 1)->text().startsWith("autopilot: L1.down to BF16"));
    // The events pane: the decision, its evidence on hover.
    QTableWidget* events = view.samples()->eventTable();
    QCOMPARE(events->item(0, 2)->text(), QString("autopilot"));
    QVERIFY(events->item(0, 3)->toolTip().contains("candidates by their FP8 error:"));
    QVERIFY(events->item(0, 3)->toolTip().contains("budget: 0% → 10% of 25% GEMM FLOPs"));

    // The next step it cools down.
    addStep(run, 6);
    addScalar(run, autopilot::kScalarValue, 6, 1.01);
    addScalar(run, autopilot::kScalarCooldown, 6, 4);
    // L1.down, in BF16 now, is no longer measured: its old error leaves the heat column.
    for (int l = 0; l < kLayers; ++l)
      for (const QString& m : PrecisionGrid::modules())
        if (l != 1 || m != "down") addScalar(run, metric::fp8_error(l, m.toStdString()), 6, 0.03);
    view.refresh();
    QCOMPARE(p->grid()->heatText(1), QString("3.0%"));
    QVERIFY(a->state()->text().contains("COOLING DOWN"));
    QVERIFY(a->state()->text().contains("4 more steps"));

    // A person sets L1.down back to FP8: it is theirs now (pinned), no longer the autopilot's.
    run.events.push_back({6, 9.0, EventRecord{event::kPrecision, "1.down=fp8", precisionMap()}});
    run.precision.emplace_back(6, precisionMap());
    ++run.version;
    view.refresh();
    QCOMPARE(cell->text(), QString("FP8"));
    QVERIFY(cell->font().underline());
    QVERIFY(cell->toolTip().contains("Pinned: set by a person"));
    QVERIFY(!cell->toolTip().contains("Moved to BF16"));
    QCOMPARE(cell->background().color(), p->grid()->table()->item(0, down)->background().color());
    QVERIFY(a->budget()->text().contains("Holds nothing in BF16"));
    QVERIFY(a->budget()->text().contains("pinned by a person: 1 linear"));
    // A whole layer pinned ("0.*"): its seven linears, not the latent attention's modules a
    // dense layer does not have.
    run.events.push_back({6, 9.5, EventRecord{event::kPrecision, "0.*=fp8", precisionMap()}});
    ++run.version;
    view.refresh();
    QVERIFY2(a->budget()->text().contains("pinned by a person: 8 linears"),
             qPrintable(a->budget()->text()));
  }

  void samplesAndEvents() {
    RunData run = makeRun(1, 3);
    run.events.push_back({3, 70.0, EventRecord{"error", "boom", {}}});
    RunView view;
    view.setRun(&run);
    SamplesTab* st = view.samples();
    QTableWidget* s = st->sampleTable();
    QTableWidget* e = view.samples()->eventTable();
    // The latest step's two samples; the slider spans the three steps.
    QCOMPARE(s->columnCount(), 4);
    QCOMPARE(st->stepSlider()->maximum(), 2);
    QCOMPARE(st->shownStep(), std::optional<int64_t>(3));
    QCOMPARE(st->stepLabel()->text(), QString("step 3 (3 of 3)"));
    QCOMPARE(s->rowCount(), 2);
    QCOMPARE(s->item(0, 0)->text(), QString("p3"));
    QCOMPARE(s->item(0, 1)->text(), QString("r"));
    // Rewards 0 and 1 are coloured differently.
    QCOMPARE(s->item(1, 3)->data(Qt::DisplayRole).toDouble(), 1.0);
    QVERIFY(s->item(0, 3)->background().color() != s->item(1, 3)->background().color());
    // Tokens: p − g −0.02 (blue), 0 (white); +0.1 saturates at the red end.
    const QList<QColor> c0 = st->tokenColors(0);
    QCOMPARE(c0.size(), 2);
    QVERIFY(c0[0].blue() > c0[0].red());
    QCOMPARE(c0[1], QColor(Qt::white));
    const QList<QColor> c1 = st->tokenColors(1);
    QVERIFY(c1[0].red() > c1[0].blue());
    QCOMPARE(c1[0], SamplesTab::tokenColor(kLogprobDiffScale));
    QCOMPARE(e->columnCount(), 4);
    QCOMPARE(e->rowCount(), 4);
    QCOMPARE(e->item(0, 2)->text(), QString("error"));
    QCOMPARE(e->item(0, 1)->text(), QString("0:01:10"));
    QCOMPARE(e->item(1, 1)->text(), QString("4.5 s"));

    // Another step stays put while new steps arrive; back at the latest it follows again.
    st->showStep(2);
    QCOMPARE(st->shownStep(), std::optional<int64_t>(2));
    QCOMPARE(s->item(0, 0)->text(), QString("p2"));
    QVERIFY(!st->followLatest());
    addStep(run, 4);
    addStep(run, 5);
    view.refresh();
    QCOMPARE(st->stepSlider()->maximum(), 4);
    QCOMPARE(st->shownStep(), std::optional<int64_t>(2));
    QCOMPARE(e->rowCount(), 6);
    QCOMPARE(e->item(0, 3)->text(), QString("step 5"));
    st->stepSlider()->setValue(st->stepSlider()->maximum());
    QVERIFY(st->followLatest());
    QCOMPARE(s->item(0, 0)->text(), QString("p5"));
    addStep(run, 6);
    view.refresh();
    QCOMPARE(st->shownStep(), std::optional<int64_t>(6));

    // The run keeps at most kMaxSamples (two a step): the slider's range follows.
    for (int64_t step = 7; step <= 220; ++step) addStep(run, step);
    while (run.samples.size() > RunData::kMaxSamples) run.samples.erase(run.samples.begin());
    view.refresh();
    QCOMPARE(st->stepSlider()->maximum(), static_cast<int>(RunData::kMaxSamples / 2) - 1);
    QCOMPARE(st->shownStep(), std::optional<int64_t>(220));

    // A validation sample has no tokens: plain text.
    run.samples.emplace_back(221, SampleRecord{"v", "plain", "plain", 1.0, {}, {}});
    ++run.version;
    view.refresh();
    QCOMPARE(st->shownStep(), std::optional<int64_t>(221));
    QCOMPARE(s->item(0, 1)->text(), QString("plain"));
    QVERIFY(st->tokenColors(0).isEmpty());
  }

  // The badge beside the tabs: red with the number of mismatches, quiet when all rows are ok,
  // hidden without an audit; a click opens the Audit tab.
  void auditBadge() {
    RunData run = makeRun(1, 3);
    RunView view;
    view.setRun(&run);
    QPushButton* badge = view.auditBadge();
    QVERIFY(badge->isHidden());

    run.audit_step = 3;
    run.audit = {AuditRow{0, "q", "fp8", "fp8", 0.0, true},
                 AuditRow{1, "down", "fp8", "bf16", 0.125, false},
                 AuditRow{1, "up", "fp8", "fp8", 0.5, false}};
    ++run.version;
    view.refresh();
    QVERIFY(!badge->isHidden());
    QCOMPARE(badge->text(), QString("audit: 2 mismatches (step 3)"));
    QVERIFY(badge->styleSheet().contains("#d62728"));
    QVERIFY(badge->toolTip().contains("L1.down gen fp8 / trainer bf16, max |Δ| 0.125"));
    badge->click();
    QCOMPARE(view.tabs()->currentIndex(), view.tabs()->count() - 1);
    QTableWidget* t = view.audit()->table();
    QCOMPARE(t->rowCount(), 3);
    QCOMPARE(t->item(0, 1)->text(), QString("down"));  // mismatches first
    QCOMPARE(t->item(2, 5)->text(), QString("ok"));

    for (AuditRow& a : run.audit) a.ok = true;
    run.audit_step = 5;
    ++run.version;
    view.refresh();
    QCOMPARE(badge->text(), QString("audit OK · step 5"));
    QVERIFY(!badge->styleSheet().contains("#d62728"));

    RunData none = makeRun(2, 1);
    view.setRun(&none);
    QVERIFY(badge->isHidden());
  }

  // A live run's step on screen repaints what changed and re-lays out nothing: the headline and
  // the badge change text at a fixed size (a relayout repainted the whole window, ~9 ms, on
  // every step).
  void liveStepRelaysOutNothing() {
    RunData run = makeRun(1, 10);
    run.audit_step = 10;
    run.audit = {AuditRow{0, "q", "fp8", "fp8", 0.0, true}};
    RunView view;
    view.resize(1200, 800);
    view.show();
    view.setRun(&run);
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTest::qWait(50);
    struct Count : QObject {
      int layouts = 0;
      bool eventFilter(QObject* o, QEvent* e) override {
        // (The headline's holder hears of its label's new text: it has no layout to run.)
        if (e->type() == QEvent::LayoutRequest && !qobject_cast<LineLabel*>(o)) ++layouts;
        return false;
      }
    } count;
    qApp->installEventFilter(&count);
    for (int64_t s = 11; s <= 19; ++s) {
      addStep(run, s);
      run.audit_step = s;
      ++run.version;
      view.refresh();
      QTest::qWait(5);
    }
    qApp->removeEventFilter(&count);
    QVERIFY(view.overview()->headline()->text().contains("Step <b>19</b>"));
    QCOMPARE(view.auditBadge()->text(), QString("audit OK · step 19"));
    QCOMPARE(count.layouts, 0);
    // A step with one more digit: the badge grows to its text (once).
    addStep(run, 100);
    run.audit_step = 100;
    ++run.version;
    view.refresh();
    QCOMPARE(view.auditBadge()->size(), view.auditBadge()->sizeHint());
  }

  void auditAndTokenText() {
    RunData run;
    QCOMPARE(auditBadgeText(run), std::string());
    run.audit_step = 7;
    for (int l = 0; l < 12; ++l)
      run.audit.push_back(AuditRow{l, "gate", "fp8", "bf16", 0.25, false});
    QCOMPARE(auditBadgeText(run), std::string("audit: 12 mismatches (step 7)"));
    const std::string list = auditMismatchList(run);
    QCOMPARE(std::count(list.begin(), list.end(), '\n'), 10);
    QVERIFY(list.find("… and 2 more") != std::string::npos);
    QCOMPARE(auditRowText(run.audit[3]),
             std::string("L3.gate gen fp8 / trainer bf16, max |Δ| 0.25"));
    QCOMPARE(logprobDiffColor(0.0), (Rgb{255, 255, 255}));
    QCOMPARE(logprobDiffColor(1.0), logprobDiffColor(kLogprobDiffScale));  // saturates
    QCOMPARE(logprobDiffColor(-1.0), logprobDiffColor(-kLogprobDiffScale));
    QCOMPARE(tokenText("c", 0.0123), std::string("'c' +0.0123"));
    QVERIFY(klToReferenceOff(Json::parse(R"({"grpo": {"kl_beta": 0}})")));
    QVERIFY(klToReferenceOff(Json::parse(R"({"grpo": {}})")));
    QVERIFY(!klToReferenceOff(Json::parse(R"({"grpo": {"kl_beta": 0.01}})")));
    QVERIFY(!klToReferenceOff(Json()));
  }

  // With no KL penalty the KL chart says why it stays empty.
  void klNotComputedMessage() {
    RunData run = makeRun(1, 2);
    run.scalars.erase("kl_ref");
    run.row.config = Json::parse(R"({"grpo": {"kl_beta": 0}})");
    RunView view;
    view.setRun(&run);
    QCOMPARE(view.overview()->klChart()->message(),
             QString("not computed: grpo.kl_beta is 0 — no reference policy"));
    RunData penalized = makeRun(2, 2);
    penalized.row.config = Json::parse(R"({"grpo": {"kl_beta": 0.05}})");
    view.setRun(&penalized);
    QVERIFY(view.overview()->klChart()->message().isEmpty());
  }

  void summarizeNumbers() {
    RunData a, b, c;
    a.id = 1;
    a.row.name = "a";
    a.row.precision_summary = "fp8";
    a.last_step = 20;
    addScalar(a, "accuracy/validation", 0, 0.2);
    addScalar(a, "accuracy/validation", 10, 0.5);
    addScalar(a, "accuracy/validation", 15, kNan);
    addScalar(a, "accuracy/validation", 20, 0.4);
    addScalar(a, "throughput/rollout_tokens_per_s", -1, 999);  // warm-up: not counted
    addScalar(a, "throughput/rollout_tokens_per_s", 1, 100);
    addScalar(a, "throughput/rollout_tokens_per_s", 2, 200);
    addScalar(a, "throughput/training_tokens_per_s", 1, 50);
    addScalar(a, "throughput/training_tokens_per_s", 2, kNan);
    addScalar(a, "time/total_step", 1, 2.0);
    addScalar(a, "time/total_step", 2, 4.0);
    int64_t st = 0;
    for (double v : {1.0, 1.2, kNan, 1.1}) addScalar(a, "token_mult_prob_error", ++st, v);
    b.id = 2;
    b.last_step = 2;
    addScalar(b, "time/total_step", 1, 1.0);
    addScalar(b, "time/total_step", 2, 2.0);
    st = 0;
    for (double v : {1.0, 1.3, 1.1, 1.2}) addScalar(b, "token_mult_prob_error", ++st, v);
    c.id = 3;
    c.last_step = -4;  // warm-up only

    auto s = summarize({&a, &b, &c}, 0);
    QCOMPARE(s.size(), size_t{3});
    QCOMPARE(s[0].id, int64_t{1});
    QCOMPARE(s[0].name, std::string("a"));
    QCOMPARE(s[0].precision, std::string("fp8"));
    QCOMPARE(s[0].steps, int64_t{20});
    QCOMPARE(*s[0].final_validation, 0.4);
    QCOMPARE(*s[0].best_validation, 0.5);
    QCOMPARE(*s[0].rollout_tps, 150.0);
    QCOMPARE(*s[0].training_tps, 50.0);
    QCOMPARE(*s[0].step_time, 3.0);
    QCOMPARE(*s[0].speedup, 1.0);
    QCOMPARE(*s[0].median_mult_prob_error, 1.1);
    QVERIFY(!s[1].final_validation && !s[1].best_validation && !s[1].rollout_tps);
    QCOMPARE(*s[1].step_time, 1.5);
    QCOMPARE(*s[1].speedup, 2.0);
    QCOMPARE(*s[1].median_mult_prob_error, 1.15);
    QCOMPARE(s[2].steps, int64_t{0});
    QVERIFY(!s[2].step_time && !s[2].speedup && !s[2].median_mult_prob_error);

    s = summarize({&a, &b, &c}, 1);
    QCOMPARE(*s[0].speedup, 0.5);
    QCOMPARE(*s[1].speedup, 1.0);
    s = summarize({&c, &a}, 0);  // the base has no step time: no speedups
    QVERIFY(!s[0].speedup && !s[1].speedup);
  }

  void configDiffRows() {
    const Json a = Json::parse(R"({"grpo": {"is_max": 2.0, "lr": 0.001, "clip": 0.2},
        "precision": {"default": "fp8", "overrides": ["0.gate=bf16"]}, "name": "x",
        "seed": 3})");
    const Json b = Json::parse(R"({"grpo": {"is_max": 2, "lr": 0.0020, "clip": 0.2},
        "precision": {"default": "bf16", "overrides": []}, "extra": true, "seed": 3})");
    const auto rows = configDiff({&a, &b});
    QStringList keys;
    for (const auto& r : rows) keys << QString::fromStdString(r.key);
    QCOMPARE(keys,
             QStringList({"extra", "grpo.lr", "name", "precision.default", "precision.overrides"}));
    QCOMPARE(rows[0].values, std::vector<std::string>({"—", "true"}));
    QCOMPARE(rows[1].values, std::vector<std::string>({"0.001", "0.002"}));
    QCOMPARE(rows[2].values, std::vector<std::string>({"x", "—"}));
    QCOMPARE(rows[3].values, std::vector<std::string>({"fp8", "bf16"}));
    QCOMPARE(rows[4].values, std::vector<std::string>({"[\"0.gate=bf16\"]", "[]"}));
    QVERIFY(configDiff({&a, &a}).empty());
    QVERIFY(configDiff({&a}).empty());
    // Three runs: a key differing in one of them is listed with every value.
    const Json c = Json::parse(R"({"grpo": {"is_max": 2.5, "lr": 0.001, "clip": 0.2},
        "precision": {"default": "fp8", "overrides": ["0.gate=bf16"]}, "name": "x", "seed": 3})");
    const auto three = configDiff({&a, &a, &c});
    QCOMPARE(three.size(), size_t{1});
    QCOMPARE(three[0].key, std::string("grpo.is_max"));
    QCOMPARE(three[0].values, std::vector<std::string>({"2", "2", "2.5"}));
  }

  void compareView() {
    RunData a = makeRun(3, 4);
    RunData b = makeRun(4, 6);
    b.row.precision_summary = "bf16";
    b.row.config = Json::parse(R"({"grpo": {"importance": "tis", "is_min": 0.5, "is_max": 5.0},
                                   "model": {"num_hidden_layers": 2},
                                   "precision": {"default": "bf16", "overrides": []}})");
    for (auto& p : b.scalars["time/total_step"]) p.value = 1.8;
    CompareView view;
    view.setRuns({&a, &b});
    QCOMPARE(view.metricBox()->currentText(), QString("accuracy/validation"));
    QCOMPARE(view.chart()->curveCount(), 2);
    QCOMPARE(view.chart()->pointCount(0), 2);  // a: validation at steps 2, 4
    QCOMPARE(view.chart()->pointCount(1), 3);
    QVERIFY(view.metricBox()->findText("kv_scale/L1/v") >= 0);

    QTableWidget* sum = view.summaryTable();
    QCOMPARE(sum->rowCount(), 2);
    QCOMPARE(sum->columnCount(), 10);
    QCOMPARE(sum->item(0, 0)->text(), QString("run 3 (run3)"));
    QCOMPARE(sum->item(0, 3)->text(), QString("0.160"));  // 0.04 · 4
    QCOMPARE(sum->item(1, 3)->text(), QString("0.240"));
    QCOMPARE(sum->item(1, 1)->text(), QString("bf16"));
    QCOMPARE(sum->item(1, 2)->text(), QString("6"));
    QCOMPARE(sum->item(1, 8)->text(), QString("2.00×"));
    view.setBaseRun(1);
    QCOMPARE(sum->item(0, 8)->text(), QString("0.50×"));

    QTableWidget* diff = view.diffTable();
    QCOMPARE(diff->columnCount(), 2);
    QCOMPARE(diff->rowCount(), 2);  // grpo.is_max, precision.default
    QCOMPARE(diff->verticalHeaderItem(0)->text(), QString("grpo.is_max"));
    QCOMPARE(diff->item(0, 1)->text(), QString("5"));

    QCOMPARE(view.histogramBox()->currentText(), QString("importance_log_weight"));
    QCOMPARE(view.histogram()->histogramCount(), 2);
    view.setHistogram("fp8_scale_log2/L0/weight", 5);
    QCOMPARE(view.histogramStep()->value(), 5);
    QCOMPARE(view.histogram()->histogramCount(), 2);

    view.setMetric("reward/mean");
    QCOMPARE(view.chart()->curveCount(), 2);
    QCOMPARE(view.chart()->pointCount(1), 6);
    addStep(b, 7);
    view.refresh();
    QCOMPARE(view.chart()->pointCount(1), 7);
    QCOMPARE(sum->item(1, 2)->text(), QString("7"));
  }
};

QTEST_MAIN(TestRunViews)
#include "test_run_views.moc"
