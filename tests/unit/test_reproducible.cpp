// Same machine, same seed, same config → the same run, bit for bit: every step's metrics and
// the final weights and optimizer state. Also with one CPU thread instead of all and with each
// GEMM instruction-set path, which stand in for machines with other core counts and CPUs
// (scripts/test-cpu-matrix.sh goes through more of those). A short FP8 run with an FP8 KV cache:
// every FP8 path of generation and training is in it.
#include <QtTest>

#include <QCryptographicHash>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>

namespace {

struct Run {
  bool ok = false;
  QString error;
  QList<QJsonObject> steps;  // scalars that describe the computation, per step
  QByteArray state_digest;   // weights + optimizer state
};

// Scalars that measure the machine (time, throughput, memory), not the computation.
bool measures_the_machine(const QString& key) {
  return key.startsWith("time/") || key.startsWith("throughput/") || key.startsWith("memory/");
}

Run train(const QString& out_dir, const QProcessEnvironment& env) {
  QProcess p;
  p.setProcessEnvironment(env);
  p.start(QStringLiteral(FP8RL_CLI),
          {"train", "--preset", "demo", "--backend", "cpu", "--no-db", "--json", "--output",
           out_dir, "--set", "grpo.steps=4", "--set", "sft.steps=2", "--set", "validation.every=2",
           "--set", "task.validation_size=16", "--set", "precision.kv_cache=fp8"});
  Run r;
  if (!p.waitForFinished(120000) || p.exitCode() != 0) {
    r.error = QString::fromUtf8(p.readAllStandardError());
    return r;
  }
  for (const auto& line :
       QString::fromUtf8(p.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts)) {
    QJsonObject o = QJsonDocument::fromJson(line.toUtf8()).object();
    if (o["summary"].toBool()) continue;
    QJsonObject scalars = o["scalars"].toObject();
    for (const auto& key : scalars.keys())
      if (measures_the_machine(key)) scalars.remove(key);
    o["scalars"] = scalars;
    o.remove("wall_seconds");
    r.steps << o;
  }
  QCryptographicHash h(QCryptographicHash::Sha256);
  for (const char* f :
       {"model.safetensors", "optimizer.safetensors", "sft_optimizer.safetensors"}) {
    QFile file(out_dir + "/" + f);
    if (!file.open(QIODevice::ReadOnly)) {
      r.error = QString("no %1 in the checkpoint").arg(f);
      return r;
    }
    h.addData(file.readAll());
  }
  r.state_digest = h.result().toHex();
  r.ok = true;
  return r;
}

}  // namespace

class TestReproducible : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  void compare(const Run& a, const Run& b, const QString& what) {
    QVERIFY2(a.ok && b.ok, qPrintable(a.error + b.error));
    QCOMPARE(b.steps.size(), a.steps.size());
    for (qsizetype i = 0; i < a.steps.size(); ++i) {
      // QJsonObject equality compares doubles exactly: any last-bit difference shows.
      const auto sa = a.steps[i]["scalars"].toObject(), sb = b.steps[i]["scalars"].toObject();
      for (const auto& key : sa.keys())
        QVERIFY2(sb[key] == sa[key], qPrintable(QString("%1: step %2 %3: %4 vs %5")
                                                    .arg(what)
                                                    .arg(a.steps[i]["step"].toInt())
                                                    .arg(key)
                                                    .arg(sa[key].toDouble(), 0, 'g', 17)
                                                    .arg(sb[key].toDouble(), 0, 'g', 17)));
      QCOMPARE(sb.keys(), sa.keys());
      QVERIFY2(b.steps[i] == a.steps[i], qPrintable(what + ": samples differ"));
    }
    QVERIFY2(a.state_digest == b.state_digest, qPrintable(what + ": weights or optimizer differ"));
  }

 private slots:
  void sameConfigSameBits() {
    const auto env = QProcessEnvironment::systemEnvironment();
    const Run first = train(dir_.filePath("a"), env);
    const Run again = train(dir_.filePath("b"), env);
    QVERIFY2(first.ok, qPrintable(first.error));
    QVERIFY(first.steps.size() >= 6);
    // The run computed something: FP8 statistics and the generator/trainer mismatch are there.
    const auto last = first.steps.back()["scalars"].toObject();
    QVERIFY(last.contains("fp8/L0/weight/rel_error") && last.contains("token_mult_prob_error"));
    compare(first, again, "second run");

    auto one_thread = env;
    one_thread.insert("FP8RL_THREADS", "1");
    compare(first, train(dir_.filePath("c"), one_thread), "FP8RL_THREADS=1");

    auto generic = env;
    generic.insert("FP8RL_CPU_GEMM", "generic");
    compare(first, train(dir_.filePath("d"), generic), "FP8RL_CPU_GEMM=generic");
  }

  void unknownGemmPathIsAnError() {
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("FP8RL_CPU_GEMM", "avx9000");
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(FP8RL_CLI), {"train", "--preset", "demo", "--backend", "cpu", "--no-db",
                                        "--set", "grpo.steps=1", "--set", "sft.steps=0"});
    QVERIFY(p.waitForFinished(60000));
    QVERIFY(p.exitCode() != 0);
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(err.contains("FP8RL_CPU_GEMM='avx9000'") && err.contains("generic"), qPrintable(err));
  }
};

QTEST_GUILESS_MAIN(TestReproducible)
#include "test_reproducible.moc"
