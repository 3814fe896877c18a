// The demo preset as `./run.sh --headless` runs it (slow: about a minute per run): in FP8 and in
// BF16 the run must reach the accuracy every seed of the 10-seed benchmark reached and RL must
// raise the reward (and so must the DeepSeek-V3-shaped moonlight-demo in FP8); and FP8 machinery
// with every layer switched to BF16 must be BF16, bit for bit. FP8-vs-BF16 accuracy parity is not
// asserted here: one seed is no evidence (two runs are chaotic trajectories); `fp8rl bench train
// --seeds N` measures it over seeds (docs/benchmarks.md).
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <algorithm>
#include <cmath>

namespace {

struct Curve {
  QList<double> rewards, val;
  double first_val = NAN, last_val = NAN;
  QList<double> mult_err;
  double seconds = 0;
  QList<QJsonObject> steps;  // every step's scalars but time, throughput and memory
};

Curve train(const QStringList& extra, const QString& preset = QStringLiteral("demo")) {
  QProcess p;
  p.start(
      QStringLiteral(FP8RL_CLI),
      QStringList{"train", "--preset", preset, "--json", "--backend", "cpu", "--no-db"} + extra);
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
    auto s = o["scalars"].toObject();
    if (o["phase"].toString() == "rl") {
      c.rewards << s["reward/mean"].toDouble();
      c.mult_err << s["token_mult_prob_error"].toDouble();
    }
    for (const auto& key : s.keys())  // what measures the machine, not the computation
      if (key.startsWith("time/") || key.startsWith("throughput/") || key.startsWith("memory/"))
        s.remove(key);
    c.steps << s;
  }
  return c;
}

double mean(const QList<double>& v, qsizetype from, qsizetype n) {
  double s = 0;
  for (qsizetype i = from; i < from + n; ++i) s += v[i];
  return s / static_cast<double>(n);
}

}  // namespace

// What "learns" means for the demo (reverse 3–6 letters; the supervised warm-up leaves
// validation at 0.8–0.95, the long strings not yet right): validation ends at 0.9 or more and
// not below where RL started, and the mean reward of the last 20 RL steps is at least 0.05
// above the first 10 steps' (sampling at temperature 1.5 starts near 0.8). Every one of the
// 10 seeds × 2 precisions of `fp8rl bench train --seeds 10` ended at 0.969 or more and reached
// 0.9 (docs/benchmarks.md); the preset's seed is the same run on every x86-64 machine, so
// these floors catch a run that stopped learning, with margin.
void expect_learns(const Curve& c, const char* precision) {
  QVERIFY2(c.rewards.size() >= 40, qPrintable(QString("the %1 demo run failed").arg(precision)));
  const double reward_first = mean(c.rewards, 0, 10),
               reward_last = mean(c.rewards, c.rewards.size() - 20, 20);
  qInfo("%s demo: validation %.3f → %.3f, reward first 10 / last 20 %.3f → %.3f, %.0f s", precision,
        c.first_val, c.last_val, reward_first, reward_last, c.seconds);
  QVERIFY2(c.last_val >= 0.9, qPrintable(QString("final validation %1").arg(c.last_val)));
  QVERIFY2(c.last_val >= c.first_val,
           qPrintable(QString("validation fell: %1 → %2").arg(c.first_val).arg(c.last_val)));
  QVERIFY2(reward_last - reward_first >= 0.05,
           qPrintable(QString("reward gain %1").arg(reward_last - reward_first)));
}

class TestDemo : public QObject {
  Q_OBJECT

 private slots:
  void demoLearnsInFp8() {
    const Curve f8 = train({});
    expect_learns(f8, "fp8");
    if (QTest::currentTestFailed()) return;
    // Generator and trainer see the same FP8 weights: the median step's mismatch is small.
    QList<double> sorted = f8.mult_err;
    std::sort(sorted.begin(), sorted.end());
    QVERIFY(sorted[sorted.size() / 2] < 1.05);
  }

  void demoLearnsInBf16() { expect_learns(train({"--set", "precision.default=bf16"}), "bf16"); }

  // The DeepSeek-V3-shaped demo (latent attention over the FP8 latent cache, DeepSeekMoE with
  // shared experts, routing replay) learns in FP8 by the same measure: every seed of 1–5 ended
  // at 1.000 in FP8 (docs/training.md); the preset's seed: 0.883 → 1.000, reward 0.93 → 1.00.
  void moonlightDemoLearnsInFp8() {
    const Curve c = train({}, QStringLiteral("moonlight-demo"));
    expect_learns(c, "fp8 moonlight-demo");
    if (QTest::currentTestFailed()) return;
    // Over an FP8 latent cache the median step stays well inside NeMo RL's gate for an FP8 KV
    // cache (median < 2; the preset's seed: 1.0005).
    QList<double> sorted = c.mult_err;
    std::sort(sorted.begin(), sorted.end());
    QVERIFY(sorted[sorted.size() / 2] < 1.1);
  }

  // precision.default=fp8 with every linear overridden to BF16 runs the FP8 build of the run
  // (recalibration, statistics, the FP8 code paths' bookkeeping) on BF16 layers: it must be the
  // BF16 run exactly, step by step. Short runs: one differing bit shows within steps.
  void fp8WithEveryLayerInBf16IsBf16() {
    const QStringList shorter = {"--set",       "grpo.steps=12", "--set",
                                 "sft.steps=4", "--set",         "validation.every=6"};
    const Curve all_bf16 = train(shorter + QStringList{"--set", "precision.default=fp8", "--set",
                                                       R"(precision.overrides=["*.*=bf16"])"});
    const Curve bf = train(shorter + QStringList{"--set", "precision.default=bf16"});
    QCOMPARE(all_bf16.steps.size(), qsizetype(16));
    QCOMPARE(bf.steps.size(), all_bf16.steps.size());
    for (qsizetype i = 0; i < bf.steps.size(); ++i)
      for (const auto& key : bf.steps[i].keys() + all_bf16.steps[i].keys())
        QVERIFY2(all_bf16.steps[i][key] == bf.steps[i][key],
                 qPrintable(QString("step %1 %2: %3 vs %4")
                                .arg(i)
                                .arg(key)
                                .arg(all_bf16.steps[i][key].toDouble(), 0, 'g', 17)
                                .arg(bf.steps[i][key].toDouble(), 0, 'g', 17)));
  }
};

QTEST_GUILESS_MAIN(TestDemo)
#include "test_demo.moc"
