// The runs panel, the launch dialog and the precision grid, offscreen.
#include <QCheckBox>
#include <QComboBox>
#include <QElapsedTimer>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QtTest>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "rl/run_config.hpp"
#include "ui/runs/launch_dialog.hpp"
#include "ui/runs/runs_panel.hpp"
#include "ui/widgets/precision_grid.hpp"

using fp8rl::Json;
using fp8rl::Precision;
using fp8rl::RunStore;
using fp8rl::ui::LaunchDialog;
using fp8rl::ui::PrecisionGrid;
using fp8rl::ui::RunsPanel;
using fp8rl::ui::RunsTableModel;

namespace {

// A smaller version of `fp8rl train --preset demo --print-config`.
const char* kDemoConfig = R"({
  "backend": "auto",
  "checkpoint": {"dir": "", "every": 0},
  "grpo": {"advantage": "mean_std", "clip_low": 0.20000000000000001, "group_size": 8,
           "importance": "tis", "steps": 400, "temperature": 1},
  "model": {"hidden_size": 128, "init_std": 0.050000000000000003, "num_hidden_layers": 2,
            "rope_theta": 10000},
  "name": "demo",
  "optimizer": {"lr": 0.00050000000000000001, "schedule": "constant", "betas": [0.9, 0.999]},
  "precision": {"default": "fp8", "kv_cache": "bf16", "overrides": [], "scale_format": "fp32"},
  "samples": {"per_step": 4, "enabled": true},
  "seed": 1,
  "task": {"name": "reverse", "path": "", "reward": "exact"}
})";

Json demoConfig() {
  return Json::parse(kDemoConfig);
}

// Mimics the engine's validation messages (and their source locations).
QString fakeValidate(const Json& c) {
  const Json& lr = c.at("optimizer").at("lr");
  if (!lr.is_number())
    return QString("setting 'optimizer.lr' must be a number, got %1 (run_config.cpp:135)")
        .arg(QString::fromStdString(lr.dump()));
  if (lr.as_number() <= 0) return "optimizer.lr must be positive (optimizer.cpp:11)";
  const Json& layers = c.at("model").at("num_hidden_layers");
  if (!layers.is_number())
    return "setting 'model.num_hidden_layers' must be a number (run_config.cpp:135)";
  const QStringList advantages = {"mean_std", "leave_one_out"};
  const QString advantage = QString::fromStdString(c.at("grpo").at("advantage").as_string());
  if (!advantages.contains(advantage))
    return QString("setting 'grpo.advantage' is '%1' (allowed: mean_std, leave_one_out)")
        .arg(advantage);
  if (c.at("grpo").at("steps").as_number() < 0) return "setting 'grpo.steps' must be ≥ 0";
  for (const Json& o : c.at("precision").at("overrides").as_array()) {
    const QString text = QString::fromStdString(o.as_string());
    const int layer = text.section('.', 0, 0).toInt();
    if (layer >= layers.as_number())
      return QString("precision override: layer '%1' is not * or 0…%2")
          .arg(layer)
          .arg(layers.as_number() - 1);
  }
  return {};
}

RunStore::RunRow makeRun(int64_t id, const std::string& name, const std::string& status,
                         const std::string& preset, const std::string& precision_default,
                         const std::string& task, std::optional<int64_t> step, double created) {
  RunStore::RunRow r;
  r.id = id;
  r.name = name;
  r.status = status;
  r.preset = preset;
  r.config = demoConfig();
  r.config["name"] = Json(name);
  r.config["precision"]["default"] = Json(precision_default);
  r.config["task"]["name"] = Json(task);
  r.precision_summary = precision_default;
  r.created_at = created;
  r.last_step = step;
  return r;
}

constexpr double kNow = 1'700'000'000;

std::vector<RunStore::RunRow> threeRuns() {
  return {makeRun(1, "alpha", "finished", "demo", "fp8", "reverse", 400, kNow - 5 * 86400),
          makeRun(2, "beta-bf16", "running", "demo", "bf16", "addition", 10, kNow - 2 * 3600),
          makeRun(3, "gamma", "failed", "tiny", "fp8", "sort", std::nullopt, kNow - 180)};
}

QString cellText(const RunsPanel& panel, int64_t id, int column) {
  const int row = panel.model()->rowOf(id);
  return panel.model()->index(row, column).data().toString();
}

// Ids in the order the view shows them.
std::vector<int64_t> shownIds(const RunsPanel& panel) {
  std::vector<int64_t> ids;
  auto* m = panel.view()->model();
  for (int r = 0; r < m->rowCount(); ++r)
    ids.push_back(m->index(r, 0).data(RunsTableModel::kRunIdRole).toLongLong());
  return ids;
}

}  // namespace

class TestRunsViews : public QObject {
  Q_OBJECT
 private slots:
  // --- PrecisionGrid

  void gridRoundTrip() {
    PrecisionGrid grid;
    const Json map = Json::parse(
        R"([{"q":"fp8","k":"fp8","v":"fp8","o":"fp8","gate":"bf16","up":"fp8","down":"fp8"},
            {"q":"bf16","k":"fp8","v":"fp8","o":"fp8","gate":"fp8","up":"fp8","down":"bf16"}])");
    grid.setMap(map);
    QCOMPARE(grid.layers(), 2);
    QCOMPARE(grid.table()->rowCount(), 2);
    // The modules' columns, then the router's, hidden without experts, and the FP8 error
    // column, hidden while no per-linear error is known; latent attention's columns (q_a …
    // kv_b) hidden for a standard model.
    QCOMPARE(grid.table()->columnCount(), fp8rl::kModules + 2);
    QVERIFY(grid.table()->isColumnHidden(fp8rl::kModules));
    QVERIFY(grid.table()->isColumnHidden(PrecisionGrid::kHeatColumn));
    for (int m = 0; m < fp8rl::kModules; ++m)
      QCOMPARE(grid.table()->isColumnHidden(m), m >= fp8rl::kDenseModules);
    QCOMPARE(grid.cell(0, 4), QString("bf16"));
    QCOMPARE(grid.cell(1, 6), QString("bf16"));
    QCOMPARE(grid.table()->item(0, 4)->text(), QString("BF16"));
    QCOMPARE(grid.table()->item(0, 0)->text(), QString("FP8"));
    QVERIFY(grid.table()->item(0, 4)->background() != grid.table()->item(0, 0)->background());
    QCOMPARE(grid.map().dump(), map.dump());
    QVERIFY(grid.edits().isEmpty());
    QCOMPARE(grid.overridesFrom(Precision::fp8),
             QStringList({"0.gate=bf16", "1.q=bf16", "1.down=bf16"}));
    QVERIFY(grid.message().isEmpty());
  }

  // A model with experts: the router column, a layer's gate/up/down for all its experts
  // ("MIXED" when they differ), expert rows on a click of the layer's header, and the edits
  // as the contract's overrides.
  void gridWithExperts() {
    PrecisionGrid grid;
    fp8rl::PrecisionMap pm({0, 4}, fp8rl::Precision::fp8);  // layer 0 dense, layer 1: 4 experts
    grid.setMap(pm);
    QCOMPARE(grid.table()->rowCount(), 2);
    const int router = fp8rl::kModules;
    QVERIFY(!grid.table()->isColumnHidden(router));
    QCOMPARE(grid.cell(1, router), QString("bf16"));  // routers stay BF16
    QVERIFY(grid.table()->verticalHeaderItem(1)->text().contains("4 experts"));
    grid.toggleExpert(1, 2, fp8rl::Module::up);
    QCOMPARE(grid.cell(1, 5), QString("mixed"));
    QCOMPARE(grid.table()->item(1, 5)->text(), QString("MIXED"));
    QCOMPARE(grid.edits(), QStringList({"1.experts.2.up=bf16"}));
    // The header opens the layer: one row per expert, with only gate/up/down.
    grid.table()->verticalHeader()->sectionClicked(1);
    QVERIFY(grid.expanded(1));
    QCOMPARE(grid.table()->rowCount(), 6);
    const int r2 = grid.rowOf(1, 2);
    QCOMPARE(r2, 4);
    QCOMPARE(grid.table()->item(r2, 5)->text(), QString("BF16"));
    QVERIFY(grid.table()->item(r2, 0)->text().isEmpty());
    grid.table()->cellClicked(r2, 6);  // expert 2's down
    grid.toggle(1, router);            // the router to FP8
    QCOMPARE(grid.edits(),
             QStringList({"1.router=fp8", "1.experts.2.up=bf16", "1.experts.2.down=bf16"}));
    grid.toggle(1, 5);  // mixed: every expert's up to BF16
    QCOMPARE(grid.cell(1, 5), QString("bf16"));
    grid.table()->verticalHeader()->sectionClicked(1);
    QCOMPARE(grid.table()->rowCount(), 2);
    QVERIFY(fp8rl::PrecisionMap::from_json(grid.map()) == grid.shown());

    // Qwen3-30B-A3B's shape: 48 layers of 128 experts are 48 rows until a layer is opened.
    grid.setMap(fp8rl::PrecisionMap(std::vector<int64_t>(48, 128), fp8rl::Precision::fp8));
    QCOMPARE(grid.table()->rowCount(), 48);
    grid.setExpanded(47, true);
    QCOMPARE(grid.table()->rowCount(), 48 + 128);
    QCOMPARE(grid.rowOf(47, 127), 48 + 127);
    grid.toggle(47, 6);                                     // every expert's down in layer 47
    QCOMPARE(grid.edits(), QStringList({"47.down=bf16"}));  // one override for all 128
  }

  // DeepSeek-V3's layers: latent attention's columns instead of k and v, and a layer with experts
  // opens with its shared expert's row after the routed ones.
  void gridWithLatentAttentionAndSharedExperts() {
    using fp8rl::Module;
    PrecisionGrid grid;
    std::vector<fp8rl::LayerShape> shapes(2);
    for (auto& s : shapes) s.latent = true;
    shapes[1].experts = 2;
    shapes[1].shared_experts = true;
    grid.setMap(fp8rl::PrecisionMap(shapes, fp8rl::Precision::fp8));
    for (Module m : {Module::k, Module::v, Module::q_a, Module::q_b})
      QVERIFY(grid.table()->isColumnHidden(static_cast<int>(m)));
    for (Module m : {Module::q, Module::kv_a, Module::kv_b, Module::o, Module::down})
      QVERIFY(!grid.table()->isColumnHidden(static_cast<int>(m)));
    // Drawn in the order of the computation: q, kv_a, kv_b, o, then the MLP.
    const QHeaderView* header = grid.table()->horizontalHeader();
    auto visual = [&](Module m) { return header->visualIndex(static_cast<int>(m)); };
    QVERIFY(visual(Module::q) < visual(Module::kv_a) &&
            visual(Module::kv_a) < visual(Module::kv_b) &&
            visual(Module::kv_b) < visual(Module::o) && visual(Module::o) < visual(Module::gate));
    // The latent projections of a layer with experts are its own, not its experts'.
    QCOMPARE(grid.cell(1, static_cast<int>(Module::kv_a)), QString("fp8"));
    grid.toggle(0, static_cast<int>(Module::kv_b));
    grid.toggle(1, static_cast<int>(Module::k));  // no such linear: nothing happens
    QCOMPARE(grid.edits(), QStringList({"0.kv_b=bf16"}));
    grid.setExpanded(1, true);
    QCOMPARE(grid.table()->rowCount(), 2 + 2 + 1);
    const int shared = grid.rowOf(1, PrecisionGrid::kSharedRow);
    QCOMPARE(shared, 4);
    QVERIFY(grid.table()->verticalHeaderItem(shared)->text().contains("shared"));
    grid.table()->cellClicked(shared, static_cast<int>(Module::up));
    QCOMPARE(grid.cell(1, static_cast<int>(Module::up)), QString("mixed"));
    QCOMPARE(grid.edits(), QStringList({"0.kv_b=bf16", "1.shared.up=bf16"}));
    QVERIFY(fp8rl::PrecisionMap::from_json(grid.map()) == grid.shown());
  }

  void gridToggleAndEdits() {
    PrecisionGrid grid;
    grid.resize(500, 300);
    grid.show();
    grid.setUniform(2, Precision::fp8);
    QSignalSpy edited(&grid, &PrecisionGrid::edited);
    grid.toggle(0, 4);
    QCOMPARE(edited.count(), 1);
    QCOMPARE(grid.edits(), QStringList{"0.gate=bf16"});
    QCOMPARE(grid.overridesFrom(Precision::fp8), QStringList{"0.gate=bf16"});
    QCOMPARE(grid.overridesFrom(Precision::bf16).size(), 13);
    QCOMPARE(grid.cell(0, 4), QString("bf16"));
    QVERIFY(grid.table()->item(0, 4)->font().bold());
    QVERIFY(!grid.table()->item(0, 3)->font().bold());
    QCOMPARE(grid.map().as_array()[0].at("gate").as_string(), std::string("bf16"));

    // A click flips the cell back: no edits left.
    QTableWidget* t = grid.table();
    const QRect rect = t->visualItemRect(t->item(0, 4));
    QTest::mouseClick(t->viewport(), Qt::LeftButton, {}, rect.center());
    QCOMPARE(edited.count(), 2);
    QVERIFY(grid.edits().isEmpty());
    QVERIFY(!grid.table()->item(0, 4)->font().bold());

    // Space on the current cell flips it.
    t->setCurrentCell(1, 2);
    t->setFocus();
    QTest::keyClick(t, Qt::Key_Space);
    QCOMPARE(grid.edits(), QStringList{"1.v=bf16"});

    // A column header click flips the whole column; a row header the whole layer.
    emit t->horizontalHeader()->sectionClicked(6);
    QCOMPARE(grid.cell(0, 6), QString("bf16"));
    QCOMPARE(grid.cell(1, 6), QString("bf16"));
    emit t->horizontalHeader()->sectionClicked(6);
    QCOMPARE(grid.cell(0, 6), QString("fp8"));
    emit t->verticalHeader()->sectionClicked(0);
    for (int m = 0; m < 7; ++m) QCOMPARE(grid.cell(0, m), QString("bf16"));
    QCOMPARE(grid.edits().size(), 8);

    grid.markApplied();
    QVERIFY(grid.edits().isEmpty());
    grid.toggle(1, 0);
    grid.revert();
    QVERIFY(grid.edits().isEmpty());
    QCOMPARE(grid.cell(1, 0), QString("fp8"));
  }

  void gridInvalidMap() {
    PrecisionGrid grid;
    grid.show();
    grid.setUniform(3, Precision::bf16);
    grid.setMap(Json("nope"));
    QCOMPARE(grid.layers(), 0);
    QCOMPARE(grid.table()->rowCount(), 0);
    QVERIFY2(grid.message().contains("array"), qPrintable(grid.message()));
    auto* label = grid.findChild<QLabel*>();
    bool shown = false;
    for (QLabel* l : grid.findChildren<QLabel*>())
      shown = shown || (l->isVisible() && l->text() == grid.message());
    QVERIFY(label && shown);

    grid.setMap(
        Json::parse(R"([{"q":"fp8","k":"fp8","v":"fp8","o":"fp8","gate":"fp8","up":"fp8"}])"));
    QCOMPARE(grid.layers(), 0);
    QVERIFY2(grid.message().contains("'down'"), qPrintable(grid.message()));
    grid.setMap(Json::parse(
        R"([{"q":"fp16","k":"fp8","v":"fp8","o":"fp8","gate":"fp8","up":"fp8","down":"fp8"}])"));
    QVERIFY2(grid.message().contains("fp16"), qPrintable(grid.message()));

    // A valid map clears the message.
    grid.setUniform(1, Precision::fp8);
    QVERIFY(grid.message().isEmpty());
    QCOMPARE(grid.layers(), 1);
  }

  void gridLayerErrors() {
    PrecisionGrid grid;
    grid.setUniform(3, Precision::fp8);
    grid.setLayerErrors({0.021, std::numeric_limits<double>::quiet_NaN(), 0.35});
    QCOMPARE(grid.table()->verticalHeaderItem(0)->text(), QString::fromUtf8("L0 · err 2.1%"));
    QCOMPARE(grid.table()->verticalHeaderItem(1)->text(), QString("L1"));
    QCOMPARE(grid.table()->verticalHeaderItem(2)->text(), QString::fromUtf8("L2 · err 35%"));
    // Errors survive a new map of the same model.
    grid.setUniform(3, Precision::bf16);
    QCOMPARE(grid.table()->verticalHeaderItem(0)->text(), QString::fromUtf8("L0 · err 2.1%"));
  }

  // --- RunsTableModel / RunsPanel

  void panelShowsRuns() {
    RunsPanel panel;
    panel.setRuns(threeRuns(), kNow);
    QCOMPARE(panel.model()->rowCount(), 3);
    QCOMPARE(panel.visibleCount(), 3);
    QCOMPARE(panel.model()->columnCount(), int(RunsTableModel::kColumns));
    QCOMPARE(cellText(panel, 1, RunsTableModel::kName), QString("alpha"));
    QCOMPARE(cellText(panel, 1, RunsTableModel::kStatus), QString("finished"));
    QCOMPARE(cellText(panel, 1, RunsTableModel::kStep), QString("400"));
    QCOMPARE(cellText(panel, 3, RunsTableModel::kStep), QString());
    QCOMPARE(cellText(panel, 1, RunsTableModel::kAge), QString("5 d"));
    QCOMPARE(cellText(panel, 2, RunsTableModel::kAge), QString("2 h"));
    QCOMPARE(cellText(panel, 3, RunsTableModel::kAge), QString("3 min"));
    QCOMPARE(panel.model()->runAt(panel.model()->rowOf(2))->name, std::string("beta-bf16"));
    QCOMPARE(panel.model()->rowOf(99), -1);
    // Status colours differ.
    const auto color = [&](int64_t id) {
      return panel.model()
          ->index(panel.model()->rowOf(id), RunsTableModel::kStatus)
          .data(Qt::ForegroundRole)
          .value<QColor>();
    };
    QVERIFY(color(1) != color(2) && color(2) != color(3));
    QVERIFY(!panel.model()
                 ->index(0, RunsTableModel::kStatus)
                 .data(Qt::DecorationRole)
                 .value<QIcon>()
                 .isNull());
    // The flattened configuration.
    const QString config = panel.model()
                               ->index(panel.model()->rowOf(2), 0)
                               .data(RunsTableModel::kConfigRole)
                               .toString();
    QVERIFY2(config.contains("precision.default=bf16\n"), qPrintable(config));
    QVERIFY(config.contains("optimizer.lr=0.0005\n"));
    QVERIFY(config.contains("optimizer.betas=0.9,0.999\n"));
    // Newest first by default; the count label.
    QCOMPARE(shownIds(panel), (std::vector<int64_t>{3, 2, 1}));
    bool counted = false;
    for (QLabel* l : panel.findChildren<QLabel*>()) counted = counted || l->text() == "3 of 3 runs";
    QVERIFY(counted);
    QCOMPARE(panel.view()->selectionMode(), QAbstractItemView::ExtendedSelection);
    QCOMPARE(panel.view()->selectionBehavior(), QAbstractItemView::SelectRows);
  }

  void panelSortsNumerically() {
    RunsPanel panel;
    auto runs = threeRuns();
    runs[0].last_step = 9;
    runs[1].last_step = 100;
    runs[2].last_step = 10;
    panel.setRuns(runs, kNow);
    panel.view()->sortByColumn(RunsTableModel::kStep, Qt::AscendingOrder);
    QCOMPARE(shownIds(panel), (std::vector<int64_t>{1, 3, 2}));  // 9, 10, 100
    panel.view()->sortByColumn(RunsTableModel::kAge, Qt::AscendingOrder);
    QCOMPARE(shownIds(panel), (std::vector<int64_t>{3, 2, 1}));  // youngest first
    panel.view()->sortByColumn(RunsTableModel::kName, Qt::DescendingOrder);
    QCOMPARE(shownIds(panel), (std::vector<int64_t>{3, 2, 1}));
  }

  void panelUpdatesInPlace() {
    RunsPanel panel;
    panel.resize(900, 400);
    panel.show();
    QSignalSpy current(&panel, &RunsPanel::currentRunChanged);
    QSignalSpy selection(&panel, &RunsPanel::selectionChanged);
    panel.setRuns(threeRuns(), kNow);
    panel.selectRun(2);
    QCOMPARE(panel.currentRun(), int64_t(2));
    QCOMPARE(panel.selectedRuns(), std::vector<int64_t>{2});
    QVERIFY(current.count() >= 1);
    QCOMPARE(current.last().at(0).toLongLong(), qint64(2));
    QVERIFY(selection.count() >= 1);

    // A refresh: run 2 advanced, the rest unchanged. Nothing inserted or removed.
    QSignalSpy inserted(panel.model(), &QAbstractItemModel::rowsInserted);
    QSignalSpy removed(panel.model(), &QAbstractItemModel::rowsRemoved);
    QSignalSpy changed(panel.model(), &QAbstractItemModel::dataChanged);
    QSignalSpy reset(panel.model(), &QAbstractItemModel::modelReset);
    auto runs = threeRuns();
    runs[1].last_step = 11;
    runs[1].status = "paused";
    const int current_before = current.count();
    panel.setRuns(runs, kNow + 2);
    QCOMPARE(inserted.count(), 0);
    QCOMPARE(removed.count(), 0);
    QCOMPARE(reset.count(), 0);
    QVERIFY(changed.count() >= 1);
    QCOMPARE(cellText(panel, 2, RunsTableModel::kStep), QString("11"));
    QCOMPARE(cellText(panel, 2, RunsTableModel::kStatus), QString("paused"));
    QCOMPARE(panel.currentRun(), int64_t(2));
    QCOMPARE(panel.selectedRuns(), std::vector<int64_t>{2});
    QCOMPARE(current.count(), current_before);  // no spurious current-run change

    // A live run's usual refresh, its step alone: only the Step cells are signalled (a view
    // repaints what is signalled; with 100 live runs, every cell of every row was 7 ms).
    changed.clear();
    runs[1].last_step = 12;
    runs[2].last_step = 99;
    panel.setRuns(runs, kNow + 2);
    QVERIFY(changed.count() >= 1);
    for (const auto& args : changed) {
      QCOMPARE(args.at(0).toModelIndex().column(), int(RunsTableModel::kStep));
      QCOMPARE(args.at(1).toModelIndex().column(), int(RunsTableModel::kStep));
    }
    QCOMPARE(cellText(panel, 3, RunsTableModel::kStep), QString("99"));
    // A status change: the whole row (its icon, colour and every cell's tool tip).
    changed.clear();
    runs[1].status = "running";
    panel.setRuns(runs, kNow + 2);
    QCOMPARE(changed.count(), 1);
    QCOMPARE(changed[0].at(0).toModelIndex().column(), 0);
    QCOMPARE(changed[0].at(1).toModelIndex().column(), int(RunsTableModel::kColumns) - 1);

    // A new run is inserted; the selection stays.
    runs.push_back(makeRun(4, "delta", "running", "demo", "fp8", "reverse", 1, kNow));
    panel.setRuns(runs, kNow + 4);
    QCOMPARE(inserted.count(), 1);
    QCOMPARE(panel.model()->rowCount(), 4);
    QCOMPARE(panel.visibleCount(), 4);
    QCOMPARE(panel.selectedRuns(), std::vector<int64_t>{2});
    QCOMPARE(cellText(panel, 4, RunsTableModel::kName), QString("delta"));

    // Vanished runs are removed; the selection stays.
    runs.erase(runs.begin());  // run 1
    panel.setRuns(runs, kNow + 6);
    QCOMPARE(removed.count(), 1);
    QCOMPARE(panel.model()->rowCount(), 3);
    QCOMPARE(panel.model()->rowOf(1), -1);
    QCOMPARE(cellText(panel, 3, RunsTableModel::kName), QString("gamma"));
    QCOMPARE(cellText(panel, 4, RunsTableModel::kName), QString("delta"));
    QCOMPARE(panel.selectedRuns(), std::vector<int64_t>{2});
    QCOMPARE(panel.currentRun(), int64_t(2));

    // Multi-selection, in table order (newest first).
    panel.selectRuns({2, 4, 3});
    QCOMPARE(panel.selectedRuns(), (std::vector<int64_t>{4, 3, 2}));
    QCOMPARE(panel.currentRun(), int64_t(2));

    // The current run vanishing: no current run.
    runs.erase(runs.begin());  // run 2
    panel.setRuns(runs, kNow + 8);
    QCOMPARE(panel.selectedRuns(), (std::vector<int64_t>{4, 3}));
  }

  void panelFilters() {
    RunsPanel panel;
    panel.setRuns(threeRuns(), kNow);
    panel.filterEdit()->setText("ALPHA");
    QCOMPARE(panel.visibleCount(), 1);
    panel.filterEdit()->setText("tiny");  // preset
    QCOMPARE(panel.visibleCount(), 1);
    panel.filterEdit()->setText("bf16");  // precision summary and name
    QCOMPARE(panel.visibleCount(), 1);
    panel.filterEdit()->setText("a");
    QCOMPARE(panel.visibleCount(), 3);
    panel.filterEdit()->setText("running");  // status as text
    QCOMPARE(panel.visibleCount(), 1);

    // key=value against the configuration.
    panel.filterEdit()->setText("precision.default=bf16");
    QCOMPARE(panel.visibleCount(), 1);
    QCOMPARE(panel.view()->model()->index(0, 0).data(RunsTableModel::kRunIdRole).toLongLong(),
             qint64(2));
    panel.filterEdit()->setText("precision.default=fp8");
    QCOMPARE(panel.visibleCount(), 2);
    panel.filterEdit()->setText("task.name=reverse");
    QCOMPARE(panel.visibleCount(), 1);
    panel.filterEdit()->setText("task.name:SORT");
    QCOMPARE(panel.visibleCount(), 1);
    panel.filterEdit()->setText("optimizer.lr=5e-4");  // numbers compare as numbers
    QCOMPARE(panel.visibleCount(), 3);
    panel.filterEdit()->setText("default=bf16");  // the section may be left out
    QCOMPARE(panel.visibleCount(), 1);
    panel.filterEdit()->setText("nosuch.key=1");
    QCOMPARE(panel.visibleCount(), 0);
    // Several terms: all must match.
    panel.filterEdit()->setText("precision.default=fp8 gamma");
    QCOMPARE(panel.visibleCount(), 1);
    panel.filterEdit()->setText("precision.default=fp8 task.name=addition");
    QCOMPARE(panel.visibleCount(), 0);
    panel.filterEdit()->setText("");
    QCOMPARE(panel.visibleCount(), 3);
    QVERIFY(panel.filterError().isEmpty());

    // Numeric comparisons; a text that is no filter says why and filters nothing.
    panel.filterEdit()->setText("grpo.steps>=400 step<=10");
    QCOMPARE(panel.visibleCount(), 1);
    panel.filterEdit()->setText("step<abc");
    QCOMPARE(panel.visibleCount(), 3);
    QVERIFY2(panel.filterError().contains("'abc' is not a number"),
             qPrintable(panel.filterError()));
    panel.filterEdit()->setText("name=\"beta");
    QVERIFY2(panel.filterError().contains("unclosed quote"), qPrintable(panel.filterError()));
    panel.filterEdit()->setText("gamma");
    QVERIFY(panel.filterError().isEmpty());
    QCOMPARE(panel.visibleCount(), 1);
    panel.filterEdit()->setText("");

    // The status filter.
    QComboBox* status = panel.statusFilter();
    QCOMPARE(status->itemText(0), QString("All"));
    QCOMPARE(status->count(), 7);
    status->setCurrentIndex(status->findText("failed"));
    QCOMPARE(panel.visibleCount(), 1);
    status->setCurrentIndex(status->findText("paused"));
    QCOMPARE(panel.visibleCount(), 0);
    status->setCurrentIndex(status->findText("running"));
    panel.filterEdit()->setText("precision.default=bf16");
    QCOMPARE(panel.visibleCount(), 1);
    bool counted = false;
    for (QLabel* l : panel.findChildren<QLabel*>()) counted = counted || l->text() == "1 of 3 runs";
    QVERIFY(counted);
    status->setCurrentIndex(0);
    panel.filterEdit()->clear();
    QCOMPARE(panel.visibleCount(), 3);
  }

  void panelEditsTagsAndNotes() {
    RunsPanel panel;
    auto runs = threeRuns();
    runs[0].notes = "first try";
    panel.setRuns(runs, kNow);
    QSignalSpy edited(&panel, &RunsPanel::tagsNotesEdited);
    RunsTableModel* m = panel.model();
    const QModelIndex tags = m->index(m->rowOf(1), RunsTableModel::kTags);
    QVERIFY(m->flags(tags) & Qt::ItemIsEditable);
    QVERIFY(!(m->flags(m->index(0, RunsTableModel::kName)) & Qt::ItemIsEditable));
    QVERIFY(m->setData(tags, "baseline", Qt::EditRole));
    QCOMPARE(edited.count(), 1);
    QCOMPARE(edited.at(0).at(0).toLongLong(), qint64(1));
    QCOMPARE(edited.at(0).at(1).toString(), QString("baseline"));
    QCOMPARE(edited.at(0).at(2).toString(), QString("first try"));
    QCOMPARE(tags.data().toString(), QString("baseline"));
    QVERIFY(!m->setData(m->index(0, RunsTableModel::kName), "x", Qt::EditRole));

    // A refresh read before the store had the edit does not undo it.
    panel.setRuns(runs, kNow + 2);
    QCOMPARE(cellText(panel, 1, RunsTableModel::kTags), QString("baseline"));
    // Once the store has it, its values are shown again.
    runs[0].tags = "baseline";
    panel.setRuns(runs, kNow + 4);
    runs[0].tags = "changed elsewhere";
    panel.setRuns(runs, kNow + 6);
    QCOMPARE(cellText(panel, 1, RunsTableModel::kTags), QString("changed elsewhere"));

    // Tags can be filtered on.
    panel.filterEdit()->setText("elsewhere");
    QCOMPARE(panel.visibleCount(), 1);
  }

  void panelThousandRuns() {
    std::vector<RunStore::RunRow> runs;
    const char* statuses[] = {"running", "paused", "finished", "failed", "crashed", "stopped"};
    for (int i = 1; i <= 1000; ++i)
      runs.push_back(makeRun(i, "run-" + std::to_string(i), statuses[i % 6], "demo",
                             i % 3 ? "fp8" : "bf16", i % 2 ? "reverse" : "sort", i,
                             kNow - i * 60.0));
    RunsPanel panel;
    panel.resize(1000, 600);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    QElapsedTimer t;
    t.start();
    panel.setRuns(runs, kNow);
    QCoreApplication::processEvents();
    const qint64 first = t.elapsed();
    QCOMPARE(panel.visibleCount(), 1000);
    panel.selectRuns({500, 501});

    for (auto& r : runs) r.last_step = *r.last_step + 1;
    t.restart();
    panel.setRuns(runs, kNow + 2);
    QCoreApplication::processEvents();
    const qint64 refresh = t.elapsed();
    QCOMPARE(panel.selectedRuns(), (std::vector<int64_t>{501, 500}));

    t.restart();
    panel.filterEdit()->setText("precision.default=bf16 task.name=sort");
    const qint64 filter = t.elapsed();
    QCOMPARE(panel.visibleCount(), 166);
    qInfo("1000 runs: first setRuns %lld ms, refresh %lld ms, config filter %lld ms", first,
          refresh, filter);
    QVERIFY(first < 2000);
    QVERIFY(refresh < 1000);
  }

  // --- LaunchDialog

  void dialogBuildsTheForm() {
    const LaunchDialog::Choices choices = {{"grpo.importance", {"tis", "icepop", "off"}},
                                           {"precision.default", {"fp8", "bf16", "fp32"}},
                                           {"backend", {"auto", "cpu", "cuda"}}};
    LaunchDialog d(
        {"demo"}, [](const QString&, QString*) { return demoConfig(); }, fakeValidate, choices);
    QCOMPARE(d.preset(), QString("demo"));
    QCOMPARE(d.runName(), QString("demo"));
    QCOMPARE(d.launchButton()->text(), QString("Launch"));
    QVERIFY(d.launchButton()->isEnabled());
    QVERIFY(d.generalError().isEmpty());

    // Numbers keep integers integral.
    QCOMPARE(d.fieldText("model.num_hidden_layers"), QString("2"));
    QCOMPARE(d.fieldText("model.rope_theta"), QString("10000"));
    QCOMPARE(d.fieldText("grpo.steps"), QString("400"));
    QCOMPARE(d.fieldText("grpo.temperature"), QString("1"));
    QCOMPARE(d.fieldText("grpo.clip_low"), QString("0.2"));
    QCOMPARE(d.fieldText("optimizer.lr"), QString("0.0005"));
    QCOMPARE(d.fieldText("model.init_std"), QString("0.05"));
    QCOMPARE(d.fieldText("seed"), QString("1"));
    QCOMPARE(d.fieldText("optimizer.betas"), QString("0.9, 0.999"));
    QCOMPARE(d.fieldText("samples.enabled"), QString("true"));
    QCOMPARE(d.fieldText("task.path"), QString(""));
    QVERIFY(!d.setFieldText("nosuch.key", "1"));
    QVERIFY(d.fieldText("nosuch.key").isEmpty());

    // Editors by type: choices, checkboxes, text.
    auto* importance = d.findChild<QComboBox*>("grpo.importance");
    QVERIFY(importance);
    QCOMPARE(importance->currentText(), QString("tis"));
    QVERIFY(importance->findText("icepop") >= 0 && importance->findText("off") >= 0);
    QVERIFY(d.findChild<QComboBox*>("precision.default"));
    QVERIFY(d.findChild<QComboBox*>("backend"));
    QVERIFY(d.findChild<QCheckBox*>("samples.enabled"));
    QVERIFY(d.findChild<QLineEdit*>("task.path"));
    QVERIFY(d.findChild<QLineEdit*>("grpo.advantage"));  // no choices given: free text

    // One tab per section plus "general".
    auto* tabs = d.findChild<QTabWidget*>();
    QVERIFY(tabs);
    QStringList titles;
    for (int i = 0; i < tabs->count(); ++i) titles << tabs->tabText(i);
    for (const char* s :
         {"general", "grpo", "model", "optimizer", "precision", "task", "samples", "checkpoint"})
      QVERIFY2(titles.contains(s), s);

    // The unedited form gives back the preset's config.
    QCOMPARE(d.config().dump(), demoConfig().dump());

    // The grid follows the model's layers.
    QCOMPARE(d.precisionGrid()->layers(), 2);
    QCOMPARE(d.precisionGrid()->cell(1, 3), QString("fp8"));
  }

  void dialogValidatesNextToTheField() {
    LaunchDialog d(
        {"demo"}, [](const QString&, QString*) { return demoConfig(); }, fakeValidate);
    d.show();
    QVERIFY(d.setFieldText("optimizer.lr", "-1"));
    QCOMPARE(d.config().at("optimizer").at("lr").as_number(), -1.0);
    // Debounced: the message arrives after the timer.
    QTRY_COMPARE(d.fieldError("optimizer.lr"), QString("optimizer.lr must be positive"));
    QVERIFY(!d.launchButton()->isEnabled());
    QVERIFY(d.generalError().isEmpty());
    auto* tabs = d.findChild<QTabWidget*>();
    QCOMPARE(tabs->tabText(tabs->currentIndex()), QString("optimizer"));

    // Fixing it clears the message and enables Launch.
    d.setFieldText("optimizer.lr", "1e-3");
    QTRY_VERIFY(d.fieldError("optimizer.lr").isEmpty());
    QVERIFY(d.launchButton()->isEnabled());
    QCOMPARE(d.config().at("optimizer").at("lr").as_number(), 0.001);

    // A choice outside the allowed values, named in quotes.
    d.setFieldText("grpo.advantage", "bogus");
    QVERIFY(!d.validateNow());
    QVERIFY(d.fieldError("grpo.advantage").startsWith("setting 'grpo.advantage' is 'bogus'"));
    QCOMPARE(tabs->tabText(tabs->currentIndex()), QString("grpo"));
    d.setFieldText("grpo.advantage", "leave_one_out");
    QVERIFY(d.validateNow());
    QCOMPARE(d.config().at("grpo").at("advantage").as_string(), std::string("leave_one_out"));

    // Not a number: said next to the field, passed on as text.
    d.setFieldText("grpo.steps", "many");
    QVERIFY(!d.validateNow());
    QVERIFY2(d.fieldError("grpo.steps").contains("number"), qPrintable(d.fieldError("grpo.steps")));
    QVERIFY(!d.launchButton()->isEnabled());
    QCOMPARE(d.config().at("grpo").at("steps").as_string(), std::string("many"));
    d.setFieldText("grpo.steps", "-5");
    QVERIFY(!d.validateNow());
    QCOMPARE(d.fieldError("grpo.steps"), QString::fromUtf8("setting 'grpo.steps' must be ≥ 0"));
    d.setFieldText("grpo.steps", "50");
    QVERIFY(d.validateNow());
    QVERIFY(d.fieldError("grpo.steps").isEmpty());
    QVERIFY(d.config().at("grpo").at("steps").is_number());

    // Booleans and lists.
    d.setFieldText("samples.enabled", "false");
    QCOMPARE(d.config().at("samples").at("enabled").as_bool(), false);
    d.setFieldText("optimizer.betas", "0.8, 0.99");
    QCOMPARE(d.config().at("optimizer").at("betas").dump(),
             std::string("[0.80000000000000004,0.98999999999999999]"));
    d.setFieldText("name", "my run");
    QCOMPARE(d.runName(), QString("my run"));
    QCOMPARE(d.config().at("name").as_string(), std::string("my run"));
  }

  void dialogMapsMessages() {
    QString forced;
    LaunchDialog d(
        {"demo"}, [](const QString&, QString*) { return demoConfig(); },
        [&forced](const Json& c) { return forced.isEmpty() ? fakeValidate(c) : forced; });
    const auto errorOf = [&](const QString& message) {
      forced = message;
      d.validateNow();
      return std::pair{d.fieldError("grpo.steps"), d.generalError()};
    };
    // Longest key named as a word; quoted keys; the engine's source location dropped.
    forced = "setting 'model.num_hidden_layers' must be a number, got \"x\" (run_config.cpp:135)";
    QVERIFY(!d.validateNow());
    QCOMPARE(d.fieldError("model.num_hidden_layers"),
             QString("setting 'model.num_hidden_layers' must be a number, got \"x\""));
    forced = "fp8rl train: error: optimizer.lr must be positive (optimizer.cpp:11)\n";
    d.validateNow();
    QCOMPARE(d.fieldError("optimizer.lr"), QString("optimizer.lr must be positive"));
    forced = "grpo.clip_low must be in [0, 1) and grpo.clip_high ≥ 0";
    d.validateNow();
    QVERIFY(!d.fieldError("grpo.clip_low").isEmpty());
    forced = "setting 'name' is empty";
    d.validateNow();
    QVERIFY(!d.fieldError("name").isEmpty());
    forced = "precision override: layer '7' is not * or 0…1";
    d.validateNow();
    QVERIFY(!d.fieldError("precision.overrides").isEmpty());
    auto* tabs = d.findChild<QTabWidget*>();
    QCOMPARE(tabs->tabText(tabs->currentIndex()), QString("precision"));
    // task.name is a field; "name" inside it is not the run name.
    forced = "setting 'task.name' is 'zz' (allowed: reverse, addition, sort, jsonl)";
    d.validateNow();
    QVERIFY(!d.fieldError("task.name").isEmpty());
    QVERIFY(d.fieldError("name").isEmpty());
    // Nothing to attach it to: the general label, and the section's tab.
    auto [field, general] = errorOf("unknown setting 'grpo.foo' (allowed here: advantage, steps)");
    QVERIFY(field.isEmpty());
    QVERIFY(general.startsWith("unknown setting 'grpo.foo'"));
    QCOMPARE(tabs->tabText(tabs->currentIndex()), QString("grpo"));
    QVERIFY(!d.launchButton()->isEnabled());
    std::tie(field, general) = errorOf("");
    QVERIFY(general.isEmpty());
    QVERIFY(d.launchButton()->isEnabled());
  }

  void dialogGridLandsInConfig() {
    LaunchDialog d(
        {"demo"}, [](const QString&, QString*) { return demoConfig(); }, fakeValidate);
    PrecisionGrid* grid = d.precisionGrid();
    QCOMPARE(grid->layers(), 2);
    grid->toggle(0, 4);
    const Json overrides = d.config().at("precision").at("overrides");
    QCOMPARE(overrides.dump(), std::string(R"(["0.gate=bf16"])"));
    QVERIFY(d.validateNow());

    // More layers: the grid grows and keeps the edit.
    d.setFieldText("model.num_hidden_layers", "4");
    QCOMPARE(grid->layers(), 4);
    QCOMPARE(grid->cell(0, 4), QString("bf16"));
    QCOMPARE(grid->cell(3, 4), QString("fp8"));
    QCOMPARE(d.config().at("precision").at("overrides").dump(), std::string(R"(["0.gate=bf16"])"));
    QCOMPARE(d.config().at("model").at("num_hidden_layers").as_number(), 4.0);
    grid->toggle(3, 6);
    QCOMPARE(d.config().at("precision").at("overrides").dump(),
             std::string(R"(["0.gate=bf16","3.down=bf16"])"));
    // Fewer layers: overrides of vanished layers go.
    d.setFieldText("model.num_hidden_layers", "1");
    QCOMPARE(grid->layers(), 1);
    QCOMPARE(d.config().at("precision").at("overrides").dump(), std::string(R"(["0.gate=bf16"])"));
    QVERIFY(d.validateNow());

    // A BF16 default: the grid follows; overrides are relative to it.
    d.setFieldText("precision.default", "bf16");
    QCOMPARE(grid->cell(0, 0), QString("bf16"));
    grid->toggle(0, 0);
    QCOMPARE(d.config().at("precision").at("overrides").dump(), std::string(R"(["0.q=fp8"])"));
    // FP32: no per-layer map.
    d.setFieldText("precision.default", "fp32");
    QCOMPARE(grid->layers(), 0);
    QVERIFY(grid->message().contains("fp32"));
    QCOMPARE(d.config().at("precision").at("overrides").dump(), std::string("[]"));
    // An unusable layer count keeps the grid empty with a reason.
    d.setFieldText("precision.default", "fp8");
    d.setFieldText("model.num_hidden_layers", "x");
    QCOMPARE(grid->layers(), 0);
    QVERIFY(!grid->message().isEmpty());
    QCOMPARE(d.config().at("model").at("num_hidden_layers").as_string(), std::string("x"));
    QVERIFY(!d.validateNow());
    QVERIFY(!d.fieldError("model.num_hidden_layers").isEmpty());
  }

  void dialogPresetOverridesAndPresets() {
    const auto loader = [](const QString& preset, QString* error) -> Json {
      Json c = demoConfig();
      if (preset == "mixed") {
        c["name"] = Json("mixed");
        c["model"]["num_hidden_layers"] = Json(3);
        c["precision"]["overrides"] = Json(Json::Array{Json("*.down=bf16"), Json("1.q=bf16")});
        return c;
      }
      if (preset == "broken") {
        *error = "no such preset";
        return Json();
      }
      return c;
    };
    LaunchDialog d({"demo", "mixed", "broken"}, loader, fakeValidate);
    QCOMPARE(d.precisionGrid()->layers(), 2);
    d.setPreset("mixed");
    QCOMPARE(d.preset(), QString("mixed"));
    QCOMPARE(d.runName(), QString("mixed"));
    PrecisionGrid* grid = d.precisionGrid();
    QCOMPARE(grid->layers(), 3);
    QCOMPARE(grid->cell(2, 6), QString("bf16"));
    QCOMPARE(grid->cell(1, 0), QString("bf16"));
    QCOMPARE(grid->cell(0, 0), QString("fp8"));
    QVERIFY(grid->edits().isEmpty());  // the preset's map is the applied state
    // Unedited, the preset's overrides are kept as written.
    QCOMPARE(d.config().at("precision").at("overrides").dump(),
             std::string(R"(["*.down=bf16","1.q=bf16"])"));
    grid->toggle(1, 0);
    QCOMPARE(d.config().at("precision").at("overrides").dump(),
             std::string(R"(["0.down=bf16","1.down=bf16","2.down=bf16"])"));

    d.setPreset("broken");
    QVERIFY(d.generalError().contains("no such preset"));
    QVERIFY(!d.launchButton()->isEnabled());
    d.setPreset("demo");
    QVERIFY(d.generalError().isEmpty());
    QVERIFY(d.launchButton()->isEnabled());
    QCOMPARE(d.precisionGrid()->layers(), 2);
  }

  // The engine's own validation (what the studio's validator reports, without the process).
  void dialogWithEngineValidation() {
    const auto engine = [](const Json& c) -> QString {
      try {
        fp8rl::RunConfig::from_json(c);
        return {};
      } catch (const fp8rl::Error& e) {
        return QString::fromStdString(e.what());
      }
    };
    LaunchDialog d(
        {"defaults"}, [](const QString&, QString*) { return fp8rl::RunConfig::defaults(); },
        engine);
    QVERIFY2(d.validateNow(), qPrintable(d.generalError()));
    d.setFieldText("optimizer.lr", "0");
    QVERIFY(!d.validateNow());
    QVERIFY2(d.fieldError("optimizer.lr").contains("optimizer.lr"),
             qPrintable(d.fieldError("optimizer.lr") + " | " + d.generalError()));
    d.setFieldText("optimizer.lr", "0.002");
    QVERIFY(d.validateNow());
    d.setFieldText("grpo.importance", "sometimes");
    QVERIFY(!d.validateNow());
    QVERIFY2(d.fieldError("grpo.importance").contains("allowed"),
             qPrintable(d.fieldError("grpo.importance") + " | " + d.generalError()));
    d.setFieldText("grpo.importance", "icepop");
    d.setFieldText("grpo.mini_batches", "3");
    QVERIFY(!d.validateNow());
    QVERIFY2(!d.fieldError("grpo.mini_batches").isEmpty(), qPrintable(d.generalError()));
    d.setFieldText("grpo.mini_batches", "1");
    d.precisionGrid()->toggle(1, 4);
    QVERIFY2(d.validateNow(), qPrintable(d.generalError()));
    const fp8rl::RunConfig rc = fp8rl::RunConfig::from_json(d.config());
    QCOMPARE(rc.precision_overrides, std::vector<std::string>{"1.gate=bf16"});
    QCOMPARE(rc.optimizer.lr, 0.002);
    QCOMPARE(rc.model.num_hidden_layers, int64_t(2));
  }
};

QTEST_MAIN(TestRunsViews)
#include "test_runs_views.moc"
