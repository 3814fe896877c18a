// Data-parallel launches from the studio: the launch dialog's Ranks and Hostfile fields, and the
// worker command they turn into (EngineCli::workerCommand, wrapped by fp8rl::ranks_command),
// offscreen. Nothing is started: the mpirun that is looked for does not exist.
#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "contract/rank_launch.hpp"
#include "core/error.hpp"
#include "ui/data/engine_cli.hpp"
#include "ui/runs/launch_dialog.hpp"

using fp8rl::Json;
using fp8rl::ui::EngineCli;
using fp8rl::ui::LaunchDialog;
using fp8rl::ui::ProcessCommand;
using fp8rl::ui::RankLaunch;

namespace {

const char* kConfig = R"({
  "grpo": {"group_size": 8, "mini_batches": 1, "prompts_per_step": 16, "steps": 400},
  "model": {"hidden_size": 128, "num_hidden_layers": 2},
  "name": "demo",
  "optimizer": {"lr": 0.0005},
  "precision": {"default": "fp8", "overrides": []},
  "seed": 1
})";

const QString kExe = "/opt/fp8rl/bin/fp8rl";
const QString kDb = "/data/runs.sqlite";
const QString kControl = "ipc://@studio-control";
const QString kTelemetry = "ipc://@studio-telemetry";

// `fp8rl worker …` as the studio starts it for one rank.
QStringList workerArgs() {
  return {"worker",    "--db",   kDb,
          "--control", kControl, "--telemetry",
          kTelemetry,  "--nice", QString::number(EngineCli::kWorkerNice)};
}

ProcessCommand commandFor(const LaunchDialog& d) {
  return EngineCli(kExe).workerCommand(kDb, kControl, kTelemetry, {d.ranks(), d.hostfile()});
}

}  // namespace

class TestLaunchRanks : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { qunsetenv("FP8RL_MPIRUN"); }

  void dialogLaunchesRanks() {
    LaunchDialog d(
        {"demo"}, [](const QString&, QString*) { return Json::parse(kConfig); },
        [](const Json&) { return QString(); });
    auto* ranks = d.findChild<QSpinBox*>("ranks");
    auto* hostfile = d.findChild<QLineEdit*>("hostfile");
    QVERIFY(ranks && hostfile && d.findChild<QPushButton*>("hostfileBrowse"));
    QCOMPARE(ranks->minimum(), 1);
    QCOMPARE(ranks->maximum(), fp8rl::kMaxLaunchRanks);
    QCOMPARE(d.ranks(), 1);
    QVERIFY(d.hostfile().isEmpty());
    for (const char* word : {"MPI", "grpo.prompts_per_step", "grpo.mini_batches"})
      QVERIFY2(ranks->toolTip().contains(word), word);
    QVERIFY(hostfile->toolTip().contains("slots=N"));

    // One rank, no hostfile: the worker itself.
    QVERIFY(d.validateNow());
    ProcessCommand c = commandFor(d);
    QCOMPARE(c.program, kExe);
    QCOMPARE(c.arguments, workerArgs());

    // Two ranks on the machines of a hostfile: mpirun starts the same worker command.
    QTemporaryDir dir;
    const QString hosts = dir.filePath("hosts");
    QFile f(hosts);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("localhost slots=2\n");
    f.close();
    ranks->setValue(2);
    hostfile->setText(" " + hosts + " ");  // typed with stray spaces
    QVERIFY(d.validateNow());
    QVERIFY(d.launchButton()->isEnabled());
    QCOMPARE(d.ranks(), 2);
    QCOMPARE(d.hostfile(), hosts);
    c = commandFor(d);
    QCOMPARE(c.program, QString("mpirun"));
    QStringList expected = {"-np", "2", "--hostfile", hosts, "--bind-to", "none"};
    if (::geteuid() == 0) expected << "--allow-run-as-root";
    expected << kExe << workerArgs();
    QCOMPARE(c.arguments, expected);
    // The configuration does not carry the ranks.
    QCOMPARE(d.config().dump(), Json::parse(kConfig).dump());

    // A hostfile that is not there: said under the field, Launch disabled.
    hostfile->setText(dir.filePath("nosuch"));
    QVERIFY(!d.validateNow());
    QVERIFY(!d.launchButton()->isEnabled());
    QVERIFY2(d.hostfileError().contains("no such file"), qPrintable(d.hostfileError()));
    hostfile->clear();
    QVERIFY(d.validateNow());
    QVERIFY(d.hostfileError().isEmpty());

    // More ranks than the batch can be shared by (16 prompts): said under Ranks, Launch disabled;
    // the message is the run contract's, the one the engine refuses such a run with.
    ranks->setValue(17);
    QVERIFY(!d.validateNow());
    QVERIFY(!d.launchButton()->isEnabled());
    const QString why = d.ranksError();
    QVERIFY2(
        why.contains("grpo.prompts_per_step (16) must be at least ranks × mini_batches (17 × 1)"),
        qPrintable(why));
    ranks->setValue(16);
    QVERIFY(d.validateNow());
    QVERIFY(d.ranksError().isEmpty());
    ranks->setValue(2);

    // Several ranks without a hostfile share this machine.
    c = commandFor(d);
    QCOMPARE(c.arguments.mid(0, 3), (QStringList{"-np", "2", "--oversubscribe"}));
    QCOMPARE(c.arguments.mid(c.arguments.size() - workerArgs().size()), workerArgs());

    // The studio's screenshot of the form, when asked for.
    if (const QString shots = qEnvironmentVariable("FP8RL_SCREENSHOTS"); !shots.isEmpty()) {
      hostfile->setText(hosts);
      QVERIFY(d.validateNow());
      d.show();
      QVERIFY(QTest::qWaitForWindowExposed(&d));
      QTest::qWait(100);
      QVERIFY(d.grab().save(QDir(shots).filePath("studio-launch-ranks.png")));
    }
  }

  void missingMpirunIsSaid() {
    QTemporaryDir dir;
    const QString db = dir.filePath("runs.sqlite");
    qputenv("FP8RL_MPIRUN", QFile::encodeName(dir.filePath("bin/mpirun")));
    EngineCli::Spawned w;
    QString error;
    const bool started = EngineCli(kExe).spawnWorker(db, RankLaunch{2, QString()}, &w, &error);
    qunsetenv("FP8RL_MPIRUN");
    QVERIFY(!started);
    QVERIFY2(error.contains("Open MPI's mpirun was not found") && error.contains("openmpi-bin"),
             qPrintable(error));
    QVERIFY(!QDir(dir.filePath("logs")).exists());  // nothing was made

    // Fewer than one rank is refused before anything starts.
    QVERIFY_THROWS_EXCEPTION(fp8rl::Error,
                             EngineCli(kExe).workerCommand(kDb, kControl, kTelemetry, {0, {}}));
  }
};

QTEST_MAIN(TestLaunchRanks)
#include "test_launch_ranks.moc"
