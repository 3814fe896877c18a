// The studio end to end, offscreen, against real worker processes: launch the demo preset from
// the dialog, watch plots gain points, pause and resume, flip a layer to BF16 and see the
// worker's event and the marker, compare two runs and read the summary table; plus the system
// report, the runs panel at the default size and a corrupt database.
#include <QtTest>

#include <csignal>

#include <QAction>
#include <QComboBox>
#include <QLabel>
#include <QPushButton>
#include <QScrollBar>
#include <QSettings>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <tuple>

#include "core/version.hpp"
#include "store/run_store.hpp"
#include "ui/about_dialog.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/compare/compare_view.hpp"
#include "ui/data/studio_session.hpp"
#include "ui/engine_report_view.hpp"
#include "ui/main_window.hpp"
#include "ui/run/run_view.hpp"
#include "ui/runs/launch_dialog.hpp"
#include "ui/runs/runs_panel.hpp"
#include "ui/widgets/precision_grid.hpp"
#include "worker_test_support.hpp"

using namespace fp8rl::ui;

namespace {

// Fills the launch dialog with a small demo run and launches it; returns the run id.
qint64 launch_from_dialog(MainWindow& w, const QString& precision, const QString& name) {
  QSignalSpy launched(w.session(), &StudioSession::runLaunched);
  LaunchDialog* d = w.openLaunchDialog();
  if (!d) return -1;
  d->setPreset(QStringLiteral("demo"));
  // The choice fields list what the engine allows (fp8rl train --list-choices).
  const auto* reward = d->findChild<QComboBox*>(QStringLiteral("task.reward"));
  if (!reward || reward->findText(QStringLiteral("shaped")) < 0) {
    qWarning() << "task.reward offers no engine choices";
    return -1;
  }
  const std::pair<const char*, QString> fields[] = {{"sft.steps", "0"},
                                                    {"grpo.steps", "300"},
                                                    {"grpo.prompts_per_step", "4"},
                                                    {"grpo.group_size", "4"},
                                                    {"validation.every", "3"},
                                                    {"task.validation_size", "8"},
                                                    {"precision.default", precision},
                                                    {"name", name}};
  for (const auto& [k, v] : fields)
    if (!d->setFieldText(QString::fromLatin1(k), v)) qWarning() << "no field" << k;
  if (!d->validateNow()) {
    qWarning() << "invalid:" << d->generalError();
    return -1;
  }
  QTest::mouseClick(d->launchButton(), Qt::LeftButton);
  if (!launched.wait(60000) && launched.isEmpty()) return -1;
  return launched.first().first().toLongLong();
}

}  // namespace

class TestStudio : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    // Settings of the test go to their own file, never the user's.
    QCoreApplication::setOrganizationName(QStringLiteral("fp8rl-tests"));
    QSettings().clear();
  }

  void mainWindowShowsSystemReport() {
    QTemporaryDir dir;
    MainWindow w(QStringLiteral(FP8RL_CLI), dir.filePath("runs.sqlite"));
    QSignalSpy done(w.systemReport(), &EngineReportView::finished);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY(done.count() > 0 || done.wait(60000));
    QCOMPARE(done.first().first().toInt(), 0);
    QVERIFY2(w.systemReport()->text().contains("CPU backend"),
             qPrintable(w.systemReport()->text()));
    QVERIFY(w.windowTitle().contains(QStringLiteral("FP8 RL Studio")));
    QVERIFY(w.launchAction()->isEnabled());
    QVERIFY(!w.pauseAction()->isEnabled());  // no run selected
  }

  // Help › About names the studio's version and revision and shows the engine's backends as
  // `fp8rl --version` reports them.
  void aboutShowsVersionsAndBackends() {
    QTemporaryDir dir;
    MainWindow w(QStringLiteral(FP8RL_CLI), dir.filePath("runs.sqlite"));
    AboutDialog* about = w.openAboutDialog();
    QVERIFY(about);
    QSignalSpy done(about->engine(), &EngineReportView::finished);
    QVERIFY(done.count() > 0 || done.wait(60000));
    QCOMPARE(done.first().first().toInt(), 0);
    const QString engine = about->engine()->text();
    QVERIFY2(engine.startsWith(QStringLiteral("fp8rl " FP8RL_VERSION " (" FP8RL_GIT_DESCRIBE ")")),
             qPrintable(engine));
    QVERIFY2(engine.contains(QStringLiteral("  cpu   available: ")), qPrintable(engine));
    QVERIFY2(engine.contains(QStringLiteral("  cuda  ")), qPrintable(engine));
    bool names_studio_version = false;
    for (auto* label : about->findChildren<QLabel*>())
      names_studio_version |= label->text().contains(QStringLiteral(FP8RL_VERSION " (revision "));
    QVERIFY(names_studio_version);
    about->close();
  }

  // At the studio's default size (1440 × 900, no saved layout) the runs panel shows its columns
  // whole with no horizontal scrollbar — id, name, status, step, precision, preset — a long name
  // elided in the middle and whole in its tooltip, as is every column hidden for want of room.
  // The runs come after the window opened (the dock took its width from no run).
  void runsPanelFitsTheDefaultSize() {
    QTemporaryDir dir;
    const QString db = dir.filePath("runs.sqlite");
    const std::string long_name = "moe-demo-fp8-lr3e-4-routing-replay-seed-3";
    const std::string mixed = "fp8 (3 of 14 linears bf16)";
    MainWindow w(QStringLiteral(FP8RL_CLI), db);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QCOMPARE(w.size(), QSize(1440, 900));
    {
      fp8rl::RunStore store(db.toStdString());
      const fp8rl::Json config = fp8rl::Json::parse(R"({"grpo": {"steps": 10}})");
      for (const auto& [name, preset, precision] :
           {std::tuple{std::string("demo-bf16"), "demo", std::string("bf16")},
            std::tuple{std::string("demo-fp8"), "demo", mixed},
            std::tuple{long_name, "moe-demo", std::string("fp8")}}) {
        const int64_t id = store.create_run(name, preset, config, precision);
        store.set_tags_notes(id, "baseline, fp8", "the first run with the new learning rate");
        store.set_status(id, "finished");
      }
    }
    RunsPanel* panel = w.runsPanel();
    QTRY_COMPARE_WITH_TIMEOUT(panel->model()->rowCount(), 3, 15000);
    QTableView* view = panel->view();
    QTest::qWait(50);  // the column fit runs at the next turn of the event loop
    QVERIFY(!view->horizontalScrollBar()->isVisible());
    int shown = 0;
    QStringList widths;
    for (int c = 0; c < RunsTableModel::kColumns; ++c) {
      widths << QStringLiteral("%1:%2").arg(c).arg(view->isColumnHidden(c) ? 0
                                                                           : view->columnWidth(c));
      if (!view->isColumnHidden(c)) shown += view->columnWidth(c);
    }
    QVERIFY2(shown <= view->viewport()->width(),
             qPrintable(QStringLiteral("%1 px of columns in %2: %3")
                            .arg(shown)
                            .arg(view->viewport()->width())
                            .arg(widths.join(' '))));
    for (int c : {RunsTableModel::kId, RunsTableModel::kName, RunsTableModel::kStatus,
                  RunsTableModel::kStep, RunsTableModel::kPrecision, RunsTableModel::kPreset})
      QVERIFY2(!view->isColumnHidden(c), qPrintable(widths.join(' ')));
    const QFontMetrics fm = view->fontMetrics();
    QVERIFY(view->columnWidth(RunsTableModel::kPrecision) >=
            fm.horizontalAdvance(QString::fromStdString(mixed)));
    // The long name: elided (in the middle), whole in the tooltip with the run's other texts.
    const QModelIndex cell = panel->model()->index(panel->model()->rowOf(3), RunsTableModel::kName);
    QVERIFY(view->columnWidth(RunsTableModel::kName) <
            fm.horizontalAdvance(QString::fromStdString(long_name)));
    QCOMPARE(view->textElideMode(), Qt::ElideMiddle);
    const QString tip = cell.data(Qt::ToolTipRole).toString();
    for (const QString& text : {QString::fromStdString(long_name), QStringLiteral("moe-demo"),
                                QStringLiteral("baseline, fp8"),
                                QStringLiteral("the first run with the new learning rate")})
      QVERIFY2(tip.contains(text), qPrintable(tip));
  }

  void missingCliIsReportedNotCrashed() {
    EngineReportView v(QStringLiteral("/nonexistent/fp8rl"));
    QSignalSpy done(&v, &EngineReportView::finished);
    v.refresh();
    QCOMPARE(done.count(), 1);
    QCOMPARE(done.first().first().toInt(), -1);
  }

  void corruptDatabaseKeepsTheStudioUp() {
    QTemporaryDir dir;
    QFile f(dir.filePath("bad.sqlite"));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(8192, 'z'));
    f.close();
    MainWindow w(QStringLiteral(FP8RL_CLI), dir.filePath("good.sqlite"));
    w.show();
    QVERIFY(!w.openDatabase(f.fileName(), /*quiet=*/true));
    QVERIFY(w.session()->hasDatabase());  // the previous one stays open
    QVERIFY(w.session()->databasePath().endsWith(QStringLiteral("good.sqlite")));
  }

  // The whole user story of the product against real workers.
  void launchWatchSteerCompare() {
    QTemporaryDir dir;
    MainWindow w(QStringLiteral(FP8RL_CLI), dir.filePath("runs.sqlite"));
    WorkerReaper reaper{*w.session()};
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));

    // Launch the demo preset from the dialog.
    const qint64 a = launch_from_dialog(w, QStringLiteral("fp8"), QStringLiteral("fp8-run"));
    QVERIFY2(a >= 0, "the dialog did not launch a run");
    QVERIFY(w.runView()->run() && w.runView()->run()->id == a);

    // Plots gain points.
    const auto charts = w.runView()->findChildren<ChartView*>();
    QVERIFY(!charts.isEmpty());
    ChartView* reward = nullptr;
    for (auto* c : charts)
      if (c->title().contains(QStringLiteral("eward"))) reward = c;
    QVERIFY2(reward, "no reward chart");
    QVERIFY2(
        wait_for([&] { return reward->curveCount() > 0 && reward->pointCount(0) >= 3; }, 60000),
        "the reward chart did not gain points");
    const auto points = reward->pointCount(0);
    QVERIFY(wait_for([&] { return reward->pointCount(0) > points; }, 30000));

    // Pause and resume.
    QVERIFY(wait_for([&] { return w.pauseAction()->isEnabled(); }, 5000));
    w.pauseAction()->trigger();
    QVERIFY(wait_for(
        [&] {
          w.session()->refresh();
          return w.resumeAction()->isEnabled();
        },
        30000));
    QCOMPARE(QString::fromStdString(w.session()->runRow(a)->status), QStringLiteral("paused"));
    QTest::qWait(600);
    const auto frozen = reward->pointCount(0);
    QTest::qWait(1200);
    QCOMPARE(reward->pointCount(0), frozen);

    // Flip layer 0's gate projection to BF16 from the Precision tab while paused.
    auto* grid = w.runView()->findChild<PrecisionGrid*>();
    QVERIFY(grid);
    QVERIFY(grid->layers() > 0);
    grid->toggle(0, 4);  // gate
    QCOMPARE(grid->edits(), QStringList{QStringLiteral("0.gate=bf16")});
    QPushButton* apply = nullptr;
    for (auto* b : w.runView()->findChildren<QPushButton*>())
      if (b->text().remove('&') == QStringLiteral("Apply")) apply = b;
    QVERIFY(apply);
    QVERIFY(apply->isEnabled());
    QTest::mouseClick(apply, Qt::LeftButton);
    w.resumeAction()->trigger();
    const auto* data = w.session()->data(a);
    QVERIFY2(wait_for([&] { return !data->precisionChanges().empty(); }, 30000),
             "no precision event from the worker");
    bool event_seen = false;
    for (const auto& e : data->events)
      if (e.event.kind == "precision" && e.event.message.find("0.gate=bf16") != std::string::npos)
        event_seen = true;
    QVERIFY(event_seen);
    QVERIFY(wait_for([&] { return reward->markerCount() >= 1; }, 5000));
    QVERIFY(wait_for(
        [&] {
          return grid->cell(0, 4).toLower() == QStringLiteral("bf16") && grid->edits().isEmpty();
        },
        5000));
    QVERIFY(wait_for([&] { return reward->pointCount(0) > frozen; }, 30000));

    // A second run in BF16, then compare the two.
    const qint64 b = launch_from_dialog(w, QStringLiteral("bf16"), QStringLiteral("bf16-run"));
    QVERIFY(b >= 0 && b != a);
    QVERIFY(wait_for(
        [&] { return w.session()->data(b)->series("accuracy/validation").size() >= 1; }, 60000));
    w.runsPanel()->selectRuns({a, b});
    QVERIFY(w.compareAction()->isEnabled());
    w.compareAction()->trigger();
    QCOMPARE(w.centralTabs()->currentWidget(), static_cast<QWidget*>(w.compareView()));
    QTableWidget* summary = w.compareView()->summaryTable();
    QCOMPARE(summary->rowCount(), 2);
    bool names = false;
    for (int r = 0; r < summary->rowCount(); ++r)
      for (int c = 0; c < summary->columnCount(); ++c)
        if (summary->item(r, c) && summary->item(r, c)->text().contains(QStringLiteral("bf16-run")))
          names = true;
    QVERIFY2(names, "the summary table does not name the runs");
    QVERIFY(w.compareView()->diffTable()->rowCount() >= 1);  // precision.default differs

    w.session()->stop(a);
    w.session()->stop(b);
    QVERIFY(wait_for(
        [&] {
          w.session()->refresh();
          return w.session()->runRow(a)->status == "stopped" &&
                 w.session()->runRow(b)->status == "stopped";
        },
        60000));
  }
};

QTEST_MAIN(TestStudio)
#include "test_studio.moc"
