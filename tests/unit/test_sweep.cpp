// Sweeps: a sweep file parsed and expanded (product order, listed points, the replicate axis),
// bad files refused before anything starts with one error naming the key, and the queue runner
// killed with kill -9 while runs go on, then run again: every point ends with exactly one
// finished run (none lost, none run twice); one of the orphaned runs killed too is continued
// from its checkpoint. Then `fp8rl compare` and `fp8rl report` on the sweep (~30 s).
#include <QtTest>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QDir>
#include <QDirIterator>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <map>
#include <set>

#include "core/error.hpp"
#include "error_of.hpp"
#include "rl/sweep.hpp"
#include "run_process.hpp"
#include "store/run_store.hpp"

namespace {

const QString kCli = QStringLiteral(FP8RL_CLI);

// A short base: the demo's model, a few small steps (about 0.1 s each).
const char* kBase = R"(preset: demo
set:
  - sft.steps=2
  - grpo.prompts_per_step=4
  - validation.every=4
  - task.validation_size=16
)";

fp8rl::SweepSpec parse(const std::string& text) {
  return fp8rl::SweepSpec::parse(text, "");
}

void write_file(const QString& path, const QByteArray& text) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
  f.write(text);
}

}  // namespace

class TestSweep : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    env_ = QProcessEnvironment::systemEnvironment();
    env_.insert("FP8RL_THREADS", "1");
  }

  void expandsAProductReplicateFirst() {
    const auto spec = parse(std::string(kBase) + R"(name: grid
axes:
  seed: [1, 2]
  precision:
    bf16:
      precision.default: bf16
    fp8-kv:
      precision.default: fp8
      precision.kv_cache: fp8
  optimizer.lr: [0.001, 5e-4]
)");
    QCOMPARE(spec.replicate, std::string("seed"));
    const auto names = spec.axis_names();
    QCOMPARE(names, (std::vector<std::string>{"seed", "optimizer.lr", "precision"}));
    const auto points = spec.expand();
    QCOMPARE(points.size(), size_t{8});
    // The replicate axis is slowest: the first four points are seed 1.
    for (size_t i = 0; i < 4; ++i) QCOMPARE(points[i].axis_values[0].second, std::string("1"));
    QCOMPARE(points[1].name, std::string("grid seed=1 optimizer.lr=0.001 precision=fp8-kv"));
    QCOMPARE(points[1].config.kv_cache, fp8rl::KvDType::fp8);
    QCOMPARE(points[2].config.optimizer.lr, 5e-4);
    QCOMPARE(points[7].config.seed, uint64_t{2});
    QCOMPARE(points[0].config.sft_steps, int64_t{2});  // the base's set
    QCOMPARE(points[0].config.doc.at("name").as_string(), points[0].name);
    // The same file, the same hash; another point, another hash.
    QCOMPARE(fp8rl::SweepSpec::hash("grid", points), fp8rl::SweepSpec::hash("grid", spec.expand()));
    auto fewer = points;
    fewer.pop_back();
    QVERIFY(fp8rl::SweepSpec::hash("grid", fewer) != fp8rl::SweepSpec::hash("grid", points));
  }

  void listedPointsCrossTheAxes() {
    const auto spec = parse(std::string(kBase) + R"(points:
  - optimizer.lr: 0.001
    optimizer.warmup_steps: 10
  - optimizer.lr: 0.002
    optimizer.warmup_steps: 20
axes:
  seed: [1, 2, 3]
)");
    const auto points = spec.expand();
    QCOMPARE(points.size(), size_t{6});
    QCOMPARE(points[1].config.optimizer.warmup_steps, int64_t{20});
    QCOMPARE(points[1].config.optimizer.lr, 0.002);
    QCOMPARE(
        QString::fromStdString(points[1].axis_json().dump()),
        QStringLiteral(R"({"optimizer.lr":"0.002","optimizer.warmup_steps":"20","seed":"1"})"));
  }

  void badFilesNameTheKey_data() {
    QTest::addColumn<QByteArray>("text");
    QTest::addColumn<QString>("error");
    QTest::newRow("unknown key") << QByteArray("preset: demo\naxis:\n  seed: [1]\n")
                                 << "unknown key 'axis' (allowed: ";
    QTest::newRow("empty axis") << QByteArray("preset: demo\naxes:\n  seed: []\n")
                                << "axis 'seed' is empty";
    QTest::newRow("empty variant axis")
        << QByteArray("preset: demo\naxes:\n  precision:\n") << "axis 'precision' is empty";
    QTest::newRow("refused value")
        << QByteArray("preset: demo\naxes:\n  precision:\n    odd:\n      precision.default: fp9\n")
        << "point 1 (precision=odd): setting 'precision.default' is 'fp9'";
    QTest::newRow("unknown setting")
        << QByteArray("preset: demo\naxes:\n  optimizer.lrate: [0.1]\n")
        << "axis 'optimizer.lrate' value '0.1': unknown setting 'optimizer.lrate'";
    QTest::newRow("wrong type") << QByteArray("preset: demo\naxes:\n  grpo.steps: [ten]\n")
                                << "setting 'grpo.steps' must be a number";
    QTest::newRow("bad base set") << QByteArray(
                                         "preset: demo\nset: [grpo.stepz=3]\naxes:\n  seed: [1]\n")
                                  << "base configuration: unknown setting 'grpo.stepz'";
    QTest::newRow("unknown preset")
        << QByteArray("preset: nope\naxes:\n  seed: [1]\n") << "unknown preset 'nope'";
    QTest::newRow("points differ")
        << QByteArray("preset: demo\npoints:\n  - seed: 1\n  - optimizer.lr: 0.1\n")
        << "points: point 2 names optimizer.lr; every point names the same keys (seed)";
    QTest::newRow("replicate") << QByteArray("preset: demo\nreplicate: sed\naxes:\n  seed: [1]\n")
                               << "'replicate' names 'sed', which is no axis";
    QTest::newRow("nothing") << QByteArray("preset: demo\n") << "nothing to sweep";
  }

  // Refused by the command before anything is recorded: exit 1, one line naming the key.
  // The demonstration sweep of the precision autopilot (docs/autopilot.md) expands to what its
  // verdict compares: 5 seeds × {bf16, fp8, fp8+autopilot}, layer 1's down projection damaged
  // in every one, the autopilot on only in its group and watching fp8/policy_kl.
  void autopilotDemoSweepExpands() {
    const auto spec =
        fp8rl::SweepSpec::load(FP8RL_SOURCE_DIR "/resources/sweeps/demo-autopilot.yaml");
    const auto points = spec.expand();
    QCOMPARE(points.size(), size_t{15});
    int on = 0;
    for (const auto& p : points) {
      QCOMPARE(p.config.outlier_layers, std::vector<int64_t>({1}));
      QCOMPARE(p.config.autopilot.metric, std::string("fp8/policy_kl"));
      const std::string group = p.axis_values.back().second;
      QCOMPARE(p.config.autopilot.on, group == "fp8+autopilot");
      on += p.config.autopilot.on ? 1 : 0;
    }
    QCOMPARE(on, 5);
  }

  void badFilesNameTheKey() {
    QFETCH(QByteArray, text);
    QFETCH(QString, error);
    // Within the engine (the refusal of a value happens in expand()).
    const QString direct = error_of([&] { (void)parse(text.toStdString()).expand(); });
    QVERIFY2(direct.contains(error), qPrintable(direct));
    // And from the command: nothing recorded, not even the database.
    const QString file = dir_.filePath("bad.yaml"), db = dir_.filePath("bad/runs.sqlite");
    write_file(file, text);
    const ProcessResult r = run_process(kCli, {"sweep", file, "--db", db}, env_);
    QCOMPARE(r.code, 1);
    const QStringList lines = r.out.trimmed().split('\n');
    QVERIFY2(lines.size() == 1 && lines[0].contains(error) && lines[0].contains(file),
             qPrintable(r.out));
    QVERIFY(!QFileInfo::exists(db));
  }

  void killedRunnerResumesWithoutLosingOrRepeatingARun() {
    const QString file = dir_.filePath("resume.yaml"), db = dir_.filePath("resume/runs.sqlite");
    write_file(file, R"(name: resume
preset: demo
set:
  - sft.steps=2
  - grpo.steps=24
  - grpo.prompts_per_step=4
  - validation.every=4
  - task.validation_size=16
  - checkpoint.every=4
concurrency: 2
axes:
  seed: [1, 2, 3]
  precision:
    bf16:
      precision.default: bf16
    fp8:
      precision.default: fp8
)");
    QProcess runner;
    runner.setProcessEnvironment(env_);
    runner.start(kCli, {"sweep", file, "--db", db, "--nice", "0"});
    QVERIFY(runner.waitForStarted());
    // Wait until a point is done and two runs are under way, with checkpoints.
    QElapsedTimer t;
    t.start();
    std::vector<int64_t> running;
    int64_t done = 0;
    while (t.elapsed() < 120000) {
      QTest::qWait(200);
      if (!QFileInfo::exists(db)) continue;
      try {
        fp8rl::RunStore store(db.toStdString(), /*read_only=*/true);
        running.clear();
        done = 0;
        for (const auto& r : store.list_runs()) {
          if (r.status == "finished") ++done;
          if (r.status == "running" && r.checkpoint_step) running.push_back(r.id);
        }
      } catch (const fp8rl::Error&) {
        continue;
      }
      if (done >= 1 && running.size() == 2) break;
    }
    QVERIFY2(done >= 1 && running.size() == 2, "the sweep did not get going");
    // kill -9 the runner: its runs go on, orphaned. Then one of them too (a machine crash).
    ::kill(static_cast<pid_t>(runner.processId()), SIGKILL);
    QVERIFY(runner.waitForFinished(5000));
    int64_t killed_run = running.front();
    {
      fp8rl::RunStore store(db.toStdString(), /*read_only=*/true);
      ::kill(static_cast<pid_t>(store.find_run(killed_run)->pid), SIGKILL);
    }
    // The same command again continues the sweep.
    const ProcessResult again = run_process(kCli, {"sweep", file, "--db", db, "--nice", "0"}, env_);
    QVERIFY2(again.code == 0, qPrintable(again.out));
    QVERIFY2(again.out.contains("continuing sweep 1"), qPrintable(again.out));
    QVERIFY2(again.out.contains("from run " + QString::number(killed_run) + "'s checkpoint"),
             qPrintable(again.out));
    QVERIFY2(again.out.contains("sweep 1 complete: 6/6 done"), qPrintable(again.out));

    fp8rl::RunStore store(db.toStdString(), /*read_only=*/true);
    const auto points = store.sweep_points(1);
    QCOMPARE(points.size(), size_t{6});
    std::map<int64_t, int> finished_per_point;
    int sweep_runs = 0;
    for (const auto& r : store.list_runs()) {
      QVERIFY(r.sweep_id.has_value());
      ++sweep_runs;
      if (r.status == "finished") ++finished_per_point[r.sweep_point];
      // Every run of the sweep carries its axis values.
      QVERIFY(r.axis_values.contains("seed") && r.axis_values.contains("precision"));
    }
    // Six runs for six points: the killed one was continued (the same run), nothing doubled.
    QCOMPARE(sweep_runs, 6);
    for (const auto& p : points) {
      QCOMPARE(finished_per_point[p.point], 1);
      QCOMPARE(p.attempts, int64_t{1});
      const auto run = store.find_run(*p.run_id);
      QCOMPARE(run->status, std::string("finished"));
      QCOMPARE(run->last_step.value_or(0), int64_t{24});
      // Every step once: a continued run records the steps after its checkpoint again.
      const auto steps = store.scalar_series(run->id, "reward/mean");
      QCOMPARE(steps.size(), size_t{24});
    }
    QVERIFY(store.find_sweep(1)->ended_at.has_value());
    QCOMPARE(store.find_sweep(1)->runner_pid, int64_t{0});
    // Run once more: nothing to do.
    const ProcessResult third = run_process(kCli, {"sweep", file, "--db", db}, env_);
    QCOMPARE(third.code, 0);
    QVERIFY2(third.out.contains("is complete: nothing to do"), qPrintable(third.out));
    // What the sweep wrote beside the store is the user's alone: folders 0700, files 0600.
    const QDir data = QFileInfo(db).dir();
    int checked = 0;
    for (const QString& sub : {QStringLiteral("logs"), QStringLiteral("checkpoints")}) {
      QCOMPARE(QFile::permissions(data.filePath(sub)), QFile::ReadOwner | QFile::WriteOwner |
                                                           QFile::ExeOwner | QFile::ReadUser |
                                                           QFile::WriteUser | QFile::ExeUser);
      QDirIterator it(data.filePath(sub), QDir::Files, QDirIterator::Subdirectories);
      while (it.hasNext()) {
        const QFileInfo f(it.next());
        QVERIFY2(f.permissions() ==
                     (QFile::ReadOwner | QFile::WriteOwner | QFile::ReadUser | QFile::WriteUser),
                 qPrintable(f.filePath()));
        ++checked;
      }
    }
    QVERIFY(checked >= 4);
    db_ = db;
  }

  void compareAndReportTheSweep() {
    if (db_.isEmpty()) QSKIP("needs the sweep of the previous test");
    const ProcessResult r = run_process(
        kCli, {"compare", "--sweep", "1", "--db", db_, "--json", "--target", "0"}, env_);
    QVERIFY2(r.code == 0, qPrintable(r.out));
    const QJsonObject o = QJsonDocument::fromJson(r.out.toUtf8()).object();
    const QJsonArray verdicts = o["verdicts"].toArray();
    QCOMPARE(verdicts.size(), 1);  // fp8 against bf16
    const QJsonObject v = verdicts[0].toObject();
    QCOMPARE(v["a"].toObject()["label"].toString(), QStringLiteral("fp8"));
    QCOMPARE(v["b"].toObject()["label"].toString(), QStringLiteral("bf16"));
    QVERIFY(v["paired"].toBool());
    const QJsonArray metrics = v["metrics"].toArray();
    QCOMPARE(metrics.size(), 5);
    for (const auto& m : metrics) {
      const QJsonObject mo = m.toObject();
      QCOMPARE(mo["a"].toArray().size(), 3);  // three seeds each
      QVERIFY(mo["sentence"].toString().contains("3 seeds each"));
    }
    // The same groups named one by one.
    const ProcessResult text = run_process(
        kCli, {"compare", "--group", "1:fp8", "--group", "1:precision=bf16", "--db", db_}, env_);
    QVERIFY2(text.code == 0 && text.out.contains("fp8 − bf16 final validation accuracy"),
             qPrintable(text.out));
    const ProcessResult none =
        run_process(kCli, {"compare", "--group", "1:fp16", "--group", "1:bf16", "--db", db_}, env_);
    QVERIFY2(
        none.code == 1 && none.out.contains("no group of sweep 1 has fp16 (groups: bf16, fp8)"),
        qPrintable(none.out));
    // The report: self-contained HTML with a chart per metric.
    const QString html = dir_.filePath("report.html");
    const ProcessResult rep =
        run_process(kCli, {"report", "--sweep", "1", "--db", db_, "--out", html}, env_);
    QVERIFY2(rep.code == 0, qPrintable(rep.out));
    QFile f(html);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QString doc = QString::fromUtf8(f.readAll());
    QVERIFY(doc.startsWith("<!DOCTYPE html>"));
    QVERIFY(doc.count("<svg") >= 8);
    QVERIFY(doc.contains("fp8 against bf16"));
    // Nothing fetched: no scripts, no links, no sources.
    for (const char* outside : {"<script", "src=", "href=", "<link", "@import", "url("})
      QVERIFY2(!doc.contains(QLatin1String(outside)), outside);
  }

 private:
  QTemporaryDir dir_;
  QProcessEnvironment env_;
  QString db_;
};

QTEST_GUILESS_MAIN(TestSweep)
#include "test_sweep.moc"
