// fp8rl-studio: the Qt desktop app.
//   fp8rl-studio [--db PATH] [--run ID] [--compare ID,ID,…] [--groups SWEEP]
//   fp8rl-studio --screenshots DIR [--db PATH] [--run ID] [--compare ID,ID,…] [--groups SWEEP]
//                [--scenario]
//       save a PNG of every view once the window is ready, then quit (tools/screenshots.sh);
//       --scenario first launches an FP8 and a BF16 demo run, flips layer 0's MLP of the FP8
//       run to BF16 mid-run, and a short FP8 demo run with a damaged linear and the precision
//       autopilot on; waits for them to finish, then measures the FP8 run's layer sensitivity
//   fp8rl-studio --bench [--db PATH] [--runs N] [--steps N] [--live N] [--seconds S]
//                [--replay DB:RUN [--rate R]] [--all-data] [--profile]
//       the GUI performance benchmark (docs/benchmarks.md); --profile adds the slowest event
//       dispatches while the live runs stream
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QIcon>
#include <QTabWidget>
#include <QTimer>
#include <algorithm>

#include "core/version.hpp"
#include "dispatch_profile.hpp"
#include "studio_bench.hpp"
#include "ui/about_dialog.hpp"
#include "ui/compare/compare_view.hpp"
#include "ui/data/run_data.hpp"
#include "ui/data/studio_session.hpp"
#include "ui/engine_report_view.hpp"
#include "ui/groups/group_view.hpp"
#include "ui/main_window.hpp"
#include "ui/run/precision_tab.hpp"
#include "ui/run/run_view.hpp"
#include "ui/run/sensitivity_panel.hpp"
#include "ui/runs/launch_dialog.hpp"
#include "ui/runs/runs_panel.hpp"
#include "ui/runs/sweep_dialog.hpp"
#include "ui/runs/sweeps_panel.hpp"

namespace {

using fp8rl::ui::LaunchDialog;
using fp8rl::ui::MainWindow;

void settle(int ms) {
  QTimer t;
  t.setSingleShot(true);
  QEventLoop loop;
  QObject::connect(&t, &QTimer::timeout, &loop, &QEventLoop::quit);
  t.start(ms);
  loop.exec();
}

QString slug(QString s) {
  return s.toLower().remove('&').simplified().replace(' ', '-');
}

// Saves the run view's tabs, the compare view, the system report, the launch dialog and the
// About dialog as DIR/studio-*.png; with an autopilot run, its Precision tab
// (studio-autopilot.png).
void saveScreenshots(MainWindow& w, const QString& dir, qint64 run,
                     const std::vector<int64_t>& compare, qint64 groups, qint64 autopilot_run) {
  QDir().mkpath(dir);
  const auto save = [&](const QString& name) {
    settle(400);
    w.grab().save(QDir(dir).filePath(QStringLiteral("studio-%1.png").arg(name)));
  };
  if (run < 0 && !w.session()->runs().empty()) run = w.session()->runs().back().id;
  if (run >= 0) {
    w.runsPanel()->selectRun(run);
    w.showRun(run);
    auto* tabs = w.runView()->tabs();
    for (int i = 0; i < tabs->count(); ++i) {
      if (!tabs->isTabVisible(i)) continue;  // e.g. Experts of a dense run
      w.centralTabs()->setCurrentWidget(w.runView());
      tabs->setCurrentIndex(i);
      save(QStringLiteral("run-") + slug(tabs->tabText(i)));
    }
  }
  if (autopilot_run >= 0) {
    w.runsPanel()->selectRun(autopilot_run);
    w.showRun(autopilot_run);
    w.centralTabs()->setCurrentWidget(w.runView());
    auto* tabs = w.runView()->tabs();  // its tabs sit in scroll areas: found by their text
    for (int i = 0; i < tabs->count(); ++i)
      if (tabs->tabText(i).remove('&') == QStringLiteral("Precision")) tabs->setCurrentIndex(i);
    save(QStringLiteral("autopilot"));
  }
  if (compare.size() >= 2) {
    w.runsPanel()->selectRuns(compare);
    w.compareRuns(compare);
    save(QStringLiteral("compare"));
  }
  // A sweep's groups (the newest sweep, or --groups ID): the Groups view with the runs panel's
  // Sweeps tab beside it; then the Sweep… form.
  if (!w.session()->sweeps().empty()) {
    const qint64 sweep = groups >= 0 ? groups : w.session()->sweeps().back().id;
    w.runsPanel()->tabs()->setCurrentWidget(w.runsPanel()->sweeps());
    w.showGroups(sweep);
    QElapsedTimer t;
    t.start();
    while (w.session()->groupSnapshot()->version <= 0 && t.elapsed() < 30000) settle(100);
    const auto labels = w.session()->sweepGroups(sweep);
    QStringList pair;
    for (const auto& g : labels) pair << QString::fromStdString(g.label);
    w.runsPanel()->sweeps()->selectGroups(sweep, pair);
    // FP8 against BF16 when the sweep has them: the question the sweep answers.
    if (pair.contains(QStringLiteral("bf16")))
      for (const QString& a : pair)
        if (a != QStringLiteral("bf16")) {
          w.groupView()->setPair(a, QStringLiteral("bf16"));
          break;
        }
    save(QStringLiteral("groups"));
    w.groupView()->detailTabs()->setCurrentIndex(1);
    save(QStringLiteral("groups-table"));
    w.groupView()->detailTabs()->setCurrentIndex(0);
    w.runsPanel()->tabs()->setCurrentIndex(0);
  }
  if (fp8rl::ui::SweepDialog* d = w.openSweepDialog(
          w.session()->cli().presetConfig(QStringLiteral("demo")), QStringLiteral("demo-sweep"))) {
    settle(400);
    d->grab().save(QDir(dir).filePath(QStringLiteral("studio-sweep-dialog.png")));
    d->close();
  }
  w.centralTabs()->setCurrentWidget(w.systemReport());
  save(QStringLiteral("system"));
  if (LaunchDialog* d = w.openLaunchDialog()) {
    d->setPreset(QStringLiteral("demo"));
    if (auto* sections = d->findChild<QTabWidget*>())  // the task section: its reward choices
      for (int i = 0; i < sections->count(); ++i)
        if (sections->tabText(i) == QStringLiteral("task")) sections->setCurrentIndex(i);
    settle(400);
    d->grab().save(QDir(dir).filePath(QStringLiteral("studio-launch.png")));
    d->close();
  }
  fp8rl::ui::AboutDialog* about = w.openAboutDialog();
  QEventLoop wait;
  QObject::connect(about->engine(), &fp8rl::ui::EngineReportView::finished, &wait,
                   &QEventLoop::quit);
  QTimer::singleShot(30000, &wait, &QEventLoop::quit);
  wait.exec();
  settle(200);
  about->grab().save(QDir(dir).filePath(QStringLiteral("studio-about.png")));
  about->close();
}

// The screenshot scenario: what a user does in the studio, driven through the real session.
// Returns the run ids: FP8, BF16, then the autopilot's (empty on failure, with a message on
// stderr).
std::vector<int64_t> runScenario(MainWindow& w) {
  QString err;
  fp8rl::Json cfg = w.session()->cli().presetConfig(QStringLiteral("demo"), &err);
  if (cfg.is_null()) {
    qCritical("scenario: %s", qPrintable(err));
    return {};
  }
  cfg["grpo"]["steps"] = 250;
  cfg["validation"]["every"] = 10;
  std::vector<int64_t> ids;
  QObject::connect(w.session(), &fp8rl::ui::StudioSession::runLaunched,
                   [&ids](qint64 id) { ids.push_back(id); });
  for (const char* p : {"fp8", "bf16"}) {
    cfg["precision"]["default"] = p;
    cfg["precision"]["kv_cache"] = p;
    const QString e = w.session()->launch(cfg, QStringLiteral("demo-%1").arg(QLatin1String(p)),
                                          QStringLiteral("demo"));
    if (!e.isEmpty()) {
      qCritical("scenario: %s", qPrintable(e));
      return {};
    }
  }
  QElapsedTimer t;
  t.start();
  const auto wait_until = [&](auto cond, int ms) {
    while (!cond() && t.elapsed() < ms) settle(100);
    return cond();
  };
  // FP8 with layer 1's down projection damaged (outliers that block scaling cannot hide) and
  // the autopilot watching what FP8 costs the policy (resources/sweeps/demo-autopilot.yaml).
  fp8rl::Json damaged = cfg;
  damaged["precision"]["default"] = "fp8";
  damaged["precision"]["kv_cache"] = "bf16";
  damaged["precision"]["autopilot"] = true;
  damaged["grpo"]["steps"] = 40;
  damaged["autopilot"]["metric"] = "fp8/policy_kl";
  damaged["autopilot"]["threshold"] = 0.002;
  damaged["outliers"]["linears"] = fp8rl::Json(fp8rl::Json::Array{fp8rl::Json("1.down")});
  if (const QString e =
          w.session()->launch(damaged, QStringLiteral("demo-autopilot"), QStringLiteral("demo"));
      !e.isEmpty()) {
    qCritical("scenario: %s", qPrintable(e));
    return {};
  }
  if (!wait_until([&] { return ids.size() == 3; }, 60000)) return {};
  // Runs are identified in whatever order their workers report: order them by name.
  w.session()->refresh();
  const auto named = [&](const char* name) {
    for (int64_t id : ids)
      if (const auto* row = w.session()->runRow(id); row && row->name == name) return id;
    return int64_t{-1};
  };
  ids = {named("demo-fp8"), named("demo-bf16"), named("demo-autopilot")};
  if (std::find(ids.begin(), ids.end(), int64_t{-1}) != ids.end()) return {};
  const int64_t fp8 = ids[0];
  w.showRun(fp8);
  const fp8rl::ui::RunData* d = w.session()->data(fp8);
  wait_until([&] { return d && d->last_step >= 120; }, 600000);
  fp8rl::LiveEdit mlp_bf16;  // layer 0's MLP to BF16 while the run goes on
  for (const char* o : {"0.gate=bf16", "0.up=bf16", "0.down=bf16"}) mlp_bf16.add_precision(o);
  w.session()->applyLive(fp8, mlp_bf16);
  const auto done = [&] {
    w.session()->refresh();
    for (int64_t id : ids) {
      const auto* row = w.session()->runRow(id);
      if (!row || fp8rl::run_status::is_live(row->status)) return false;
    }
    return true;
  };
  if (!wait_until(done, 1200000)) qWarning("scenario: runs still going after 20 min");
  // The FP8 run's layer sensitivity, measured from its final checkpoint (Measure…).
  w.showRun(fp8);
  fp8rl::ui::SensitivityPanel* panel = w.runView()->precision()->sensitivity();
  const QString e = panel->measure();
  if (!e.isEmpty())
    qWarning("scenario: sensitivity: %s", qPrintable(e));
  else if (!wait_until([&] { return panel->report() != nullptr; }, t.elapsed() + 600000))
    qWarning("scenario: the sensitivity measurement did not finish in 10 min");
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Launch, watch, steer and compare FP8 RL runs."));
  const QCommandLineOption help = parser.addHelpOption();
  const QCommandLineOption version = parser.addVersionOption();
  const QCommandLineOption db(QStringLiteral("db"), QStringLiteral("Run database to open."),
                              QStringLiteral("PATH"));
  const QCommandLineOption run(QStringLiteral("run"), QStringLiteral("Show this run."),
                               QStringLiteral("ID"));
  const QCommandLineOption compare(QStringLiteral("compare"),
                                   QStringLiteral("Compare these runs (comma-separated ids)."),
                                   QStringLiteral("IDS"));
  const QCommandLineOption shots(QStringLiteral("screenshots"),
                                 QStringLiteral("Save a PNG of every view into DIR, then quit."),
                                 QStringLiteral("DIR"));
  const QCommandLineOption groups_option(
      QStringLiteral("groups"), QStringLiteral("Show the groups of this sweep (screenshots: of it)."),
      QStringLiteral("SWEEP"));
  const QCommandLineOption size_option(
      QStringLiteral("size"),
      QStringLiteral("With --screenshots: the window's size (default 1600x1000, the Xvfb screen; "
                     "1440x900 is the studio's default)."),
      QStringLiteral("WxH"));
  const QCommandLineOption scenario(
      QStringLiteral("scenario"),
      QStringLiteral("With --screenshots: launch an FP8 and a BF16 demo run first."));
  const QCommandLineOption bench(QStringLiteral("bench"),
                                 QStringLiteral("Run the GUI performance benchmark and quit."));
  const QCommandLineOption bench_runs(QStringLiteral("runs"),
                                      QStringLiteral("Benchmark: finished runs in the database."),
                                      QStringLiteral("N"), QStringLiteral("1000"));
  const QCommandLineOption bench_steps(QStringLiteral("steps"),
                                       QStringLiteral("Benchmark: steps of each finished run."),
                                       QStringLiteral("N"), QStringLiteral("40"));
  const QCommandLineOption bench_live(QStringLiteral("live"),
                                      QStringLiteral("Benchmark: live workers streaming."),
                                      QStringLiteral("N"), QStringLiteral("4"));
  const QCommandLineOption bench_seconds(
      QStringLiteral("seconds"),
      QStringLiteral("Benchmark: how long the latency is measured with the live workers."),
      QStringLiteral("S"), QStringLiteral("10"));
  const QCommandLineOption bench_replay(
      QStringLiteral("replay"),
      QStringLiteral("Benchmark: replay this recorded run (DB:RUN) as the live runs instead of "
                     "training workers."),
      QStringLiteral("DB:RUN"));
  const QCommandLineOption bench_rate(
      QStringLiteral("rate"),
      QStringLiteral("Benchmark with --replay: steps a second per live run (default: as recorded)."),
      QStringLiteral("R"));
  const QCommandLineOption bench_all_data(
      QStringLiteral("all-data"),
      QStringLiteral("Benchmark: hold every live run's data, as if each were open."));
  const QCommandLineOption bench_profile(
      QStringLiteral("profile"),
      QStringLiteral("Benchmark: time every event the GUI thread dispatches while the live runs "
                     "stream, and list the slowest."));
  parser.addOptions({db, run, compare, groups_option, shots, size_option, scenario, bench,
                     bench_runs, bench_steps, bench_live, bench_seconds, bench_replay, bench_rate,
                     bench_all_data, bench_profile});
  // Help and the version print and quit: they must work where there is no display (a server,
  // an SSH session), so they start on Qt's "minimal" platform, which needs none. The text is
  // the same; anything else the command line holds is left to process() below.
  {
    QStringList words;
    for (int i = 0; i < argc; ++i) words << QString::fromLocal8Bit(argv[i]);
    (void)parser.parse(words);
    if (parser.isSet(help) || parser.isSet(QStringLiteral("help-all")) || parser.isSet(version))
      qputenv("QT_QPA_PLATFORM", "minimal");
  }
  fp8rl::studio::StudioApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("FP8 RL Studio"));
  QApplication::setOrganizationName(QStringLiteral("fp8rl"));
  QApplication::setApplicationVersion(QStringLiteral(FP8RL_VERSION " (" FP8RL_GIT_DESCRIBE ")"));
  parser.process(app);

  const QString dir = QApplication::applicationDirPath();
  const QString cli = fp8rl::ui::EngineCli::besideApplication();
  QApplication::setWindowIcon(
      QIcon(dir + QStringLiteral("/../share/fp8rl/icons/fp8rl-studio.svg")));
  if (parser.isSet(bench))
    return fp8rl::studio::runBench(
        cli, {parser.value(db), parser.value(bench_runs).toInt(), parser.value(bench_steps).toInt(),
              parser.value(bench_live).toInt(), parser.value(bench_seconds).toInt(),
              parser.value(bench_replay), parser.value(bench_rate).toDouble(),
              parser.isSet(bench_all_data), parser.isSet(bench_profile)});

  MainWindow window(cli, parser.value(db));
  if (parser.isSet(shots)) {
    // The Xvfb screen of tools/screenshots.sh, or --size.
    const QStringList wh = parser.value(size_option).split('x');
    if (wh.size() == 2 && wh[0].toInt() > 0 && wh[1].toInt() > 0)
      window.resize(wh[0].toInt(), wh[1].toInt());
    else
      window.resize(1600, 1000);
  }
  window.show();
  std::vector<int64_t> ids;
  for (const auto& s : parser.value(compare).split(',', Qt::SkipEmptyParts))
    ids.push_back(s.toLongLong());
  qint64 run_id = parser.isSet(run) ? parser.value(run).toLongLong() : -1;
  const qint64 groups_id = parser.isSet(groups_option) ? parser.value(groups_option).toLongLong() : -1;
  if (parser.isSet(shots)) {
    const QString out = parser.value(shots);
    const bool with_scenario = parser.isSet(scenario);
    QObject::connect(window.systemReport(), &fp8rl::ui::EngineReportView::finished, &app,
                     [&window, out, run_id, ids, with_scenario, groups_id] {
                       QTimer::singleShot(300, [&window, out, run_id, ids, with_scenario,
                                                groups_id] {
                         auto shown = ids;
                         qint64 first = run_id, autopilot_run = -1;
                         if (with_scenario) {
                           shown = runScenario(window);
                           if (!shown.empty()) {
                             first = shown[0];  // the FP8 run
                             autopilot_run = shown[2];
                             shown = {shown[1], shown[0]};  // BF16 is the base
                           }
                         }
                         saveScreenshots(window, out, first, shown, groups_id, autopilot_run);
                         QApplication::quit();
                       });
                     });
  } else {
    if (run_id >= 0) {
      window.runsPanel()->selectRun(run_id);
      window.showRun(run_id);
    }
    if (ids.size() >= 2) window.compareRuns(ids);
    if (groups_id >= 0) window.showGroups(groups_id);
  }
  return QApplication::exec();
}
