// The demo preset as `./run.sh --headless` runs it (slow: minutes): RL must show its own gain,
// and FP8 must match BF16. These are the acceptance measurements of the run loop.
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <cmath>

namespace {

struct Curve {
  QList<double> rewards, val;
  double first_val = NAN, last_val = NAN;
  QList<double> mult_err;
  double seconds = 0;
};

Curve train(const QStringList& extra) {
  QProcess p;
  p.start(
      QStringLiteral(FP8RL_CLI),
      QStringList{"train", "--preset", "demo", "--json", "--backend", "cpu", "--no-db"} + extra);
  Curve c;
  if (!p.waitForFinished(15 * 60 * 1000) || p.exitCode() != 0) return c;
  for (const auto& line :
       QString::fromUtf8(p.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts)) {
    const auto o = QJsonDocument::fromJson(line.toUtf8()).object();
    if (o["summary"].toBool()) {
      c.first_val = o["validation_accuracy_initial"].toDouble();
      c.last_val = o["validation_accuracy_final"].toDouble();
      c.seconds = o["wall_seconds"].toDouble();
      continue;
    }
    const auto s = o["scalars"].toObject();
    if (o["phase"].toString() == "rl") {
      c.rewards << s["reward/mean"].toDouble();
      c.mult_err << s["token_mult_prob_error"].toDouble();
    }
  }
  return c;
}

double mean(const QList<double>& v, qsizetype from, qsizetype n) {
  double s = 0;
  for (qsizetype i = from; i < from + n; ++i) s += v[i];
  return s / static_cast<double>(n);
}

}  // namespace

class TestDemo : public QObject {
  Q_OBJECT
  Curve f8;

 private slots:
  void demoLearnsInFp8() {
    f8 = train({});
    QVERIFY2(f8.rewards.size() >= 40, "the FP8 demo run failed");
    const double gain = f8.last_val - f8.first_val;
    const double reward_gain =
        mean(f8.rewards, f8.rewards.size() - 20, 20) - mean(f8.rewards, 0, 20);
    qInfo("fp8 demo: validation %.3f → %.3f, reward first/last 20 %.3f → %.3f, %.0f s",
          f8.first_val, f8.last_val, mean(f8.rewards, 0, 20),
          mean(f8.rewards, f8.rewards.size() - 20, 20), f8.seconds);
    QVERIFY2(gain >= 0.4, qPrintable(QString("validation gain %1").arg(gain)));
    QVERIFY2(reward_gain >= 0.2, qPrintable(QString("reward gain %1").arg(reward_gain)));
    QList<double> sorted = f8.mult_err;
    std::sort(sorted.begin(), sorted.end());
    QVERIFY(sorted[sorted.size() / 2] < 1.05);
  }

  void fp8MatchesBf16() {
    if (f8.rewards.isEmpty()) QSKIP("needs the FP8 run of demoLearnsInFp8");
    const Curve bf = train({"--set", "precision.default=bf16"});
    QVERIFY2(bf.rewards.size() >= 40, "the BF16 demo run failed");
    qInfo("bf16 demo: validation %.3f → %.3f", bf.first_val, bf.last_val);
    // The acceptance target: same preset and seed, final validation within 0.05. Measured on
    // the 2-core machine: fp8 0.148 → 0.930, bf16 0.133 → 0.922 (docs/training.md). Both runs
    // end near the task's ceiling, so the comparison is not at the mercy of where two chaotic
    // trajectories happen to be at step 400.
    QVERIFY2(std::fabs(bf.last_val - f8.last_val) <= 0.05,
             qPrintable(QString("fp8 %1 vs bf16 %2").arg(f8.last_val).arg(bf.last_val)));
  }
};

QTEST_GUILESS_MAIN(TestDemo)
#include "test_demo.moc"
