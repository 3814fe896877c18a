// The studio killed (kill -9) while three workers it launched write their runs: the workers own
// their runs, so each goes on to the end; the run store passes its integrity check, every
// step of every run is there once, and a studio opened afterwards shows them finished.
//
// The killed studio is this test binary run again as `--as-studio DB`: a real MainWindow
// (offscreen) that launches the three runs through its session and prints "streaming" once
// their telemetry arrives.
#include <QtTest>

#include <QApplication>
#include <QProcess>
#include <QTemporaryDir>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <set>

#include "contract/metrics.hpp"
#include "store/run_store.hpp"
#include "ui/data/run_data.hpp"
#include "ui/data/studio_session.hpp"
#include "ui/main_window.hpp"
#include "worker_test_support.hpp"

using fp8rl::ui::MainWindow;

namespace {

constexpr int kRuns = 3;
constexpr int kSftSteps = 1;
// Long enough that no run can end between "streaming" and the kill, even on a fast machine
// (60 steps once ended in that window); a demo step with 4 prompts takes a few milliseconds.
constexpr int kRlSteps = 200;

// The studio to be killed: launches kRuns demo runs and keeps showing them.
int run_as_studio(const QString& db) {
  MainWindow w(QStringLiteral(FP8RL_CLI), db);
  w.show();
  QString err;
  fp8rl::Json cfg = w.session()->cli().presetConfig(QStringLiteral("demo"), &err);
  if (cfg.is_null()) {
    std::fprintf(stderr, "as-studio: %s\n", qPrintable(err));
    return 1;
  }
  cfg["sft"]["steps"] = kSftSteps;
  cfg["grpo"]["steps"] = kRlSteps;
  cfg["grpo"]["prompts_per_step"] = 4;
  cfg["validation"]["every"] = 0;
  std::vector<qint64> ids;
  QObject::connect(w.session(), &fp8rl::ui::StudioSession::runLaunched,
                   [&ids](qint64 id) { ids.push_back(id); });
  for (int i = 0; i < kRuns; ++i) {
    const QString e =
        w.session()->launch(cfg, QStringLiteral("crash-%1").arg(i), QStringLiteral("demo"));
    if (!e.isEmpty()) {
      std::fprintf(stderr, "as-studio: launch: %s\n", qPrintable(e));
      return 1;
    }
  }
  const bool streaming = wait_for(
      [&] {
        if (static_cast<int>(ids.size()) < kRuns) return false;
        for (qint64 id : ids) {
          const auto* d = w.session()->data(id);
          if (!d || d->last_step < 2) return false;
        }
        return true;
      },
      90000);
  if (!streaming) {
    std::fprintf(stderr, "as-studio: the runs did not stream in time\n");
    return 1;
  }
  std::printf("streaming\n");
  std::fflush(stdout);
  return QApplication::exec();  // until killed
}

}  // namespace

class TestStudioCrash : public QObject {
  Q_OBJECT
 private slots:
  void killedStudioLosesNothing() {
    QTemporaryDir dir;
    const QString db = dir.filePath("runs.sqlite");
    QProcess studio;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("QT_QPA_PLATFORM", "offscreen");
    studio.setProcessEnvironment(env);
    studio.start(QCoreApplication::applicationFilePath(), {"--as-studio", db});
    QVERIFY(studio.waitForStarted());
    QVERIFY2(wait_for(
                 [&] {
                   return studio.readAllStandardOutput().contains("streaming") ||
                          studio.state() != QProcess::Running;
                 },
                 120000) &&
                 studio.state() == QProcess::Running,
             qPrintable(QString::fromUtf8(studio.readAllStandardError())));
    QTest::qWait(100);  // mid-run for every worker
    ::kill(static_cast<pid_t>(studio.processId()), SIGKILL);
    QVERIFY(studio.waitForFinished(10000));
    {
      // The kill fell while the workers were writing: none of the runs had ended.
      fp8rl::RunStore store(db.toStdString());
      const auto runs = store.list_runs();
      QCOMPARE(static_cast<int>(runs.size()), kRuns);
      for (const auto& r : runs)
        QVERIFY2(r.status == "running" && r.last_step && *r.last_step < kRlSteps,
                 qPrintable(QStringLiteral("run %1 was %2 at step %3 when the studio died")
                                .arg(r.id)
                                .arg(QString::fromStdString(r.status))
                                .arg(r.last_step.value_or(-1))));
    }

    // A studio opened afterwards: the runs went on without the one that launched them.
    MainWindow w(QStringLiteral(FP8RL_CLI), db);
    WorkerReaper reaper{*w.session()};
    auto finished = [&] {
      w.session()->refresh();
      int n = 0;
      for (const auto& r : w.session()->runs()) n += r.status == "finished";
      return n == kRuns;
    };
    QVERIFY2(wait_for(finished, 180000), "the workers did not finish their runs");
    QCOMPARE(static_cast<int>(w.session()->runs().size()), kRuns);

    // Integrity, and every step of every run exactly once.
    fp8rl::RunStore store(db.toStdString());
    QCOMPARE(QString::fromStdString(store.integrity_check()), QStringLiteral("ok"));
    for (const auto& r : store.list_runs()) {
      const auto reward = store.scalar_series(r.id, fp8rl::metric::kReward);
      std::set<int64_t> steps;
      for (const auto& p : reward) steps.insert(p.step);
      QCOMPARE(static_cast<int>(reward.size()), kRlSteps);  // none twice
      QCOMPARE(static_cast<int>(steps.size()), kRlSteps);   // none missing
      QCOMPARE(*steps.begin(), int64_t(1));
      QCOMPARE(*steps.rbegin(), int64_t(kRlSteps));
      QCOMPARE(r.last_step, std::optional<int64_t>(kRlSteps));
    }
  }
};

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--as-studio") == 0) {
    QApplication app(argc, argv);
    return run_as_studio(QString::fromLocal8Bit(argv[2]));
  }
  QApplication app(argc, argv);
  TestStudioCrash t;
  return QTest::qExec(&t, argc, argv);
}

#include "test_studio_crash.moc"
