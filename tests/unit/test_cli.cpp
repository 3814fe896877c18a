// The fp8rl command as a user runs it: version, doctor (honest without a GPU), errors, and the
// binaries' link lines (no CUDA library, no Qt in the CLI).
#include <QtTest>

#include <QProcess>

namespace {

struct Run {
  int code = -1;
  QString out;
};

Run run(const QString& program, const QStringList& args,
        const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
  QProcess p;
  p.setProcessEnvironment(env);
  p.setProcessChannelMode(QProcess::MergedChannels);
  p.start(program, args);
  if (!p.waitForFinished(120000)) return {};
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAll())};
}

const QString kCli = QStringLiteral(FP8RL_CLI);

}  // namespace

class TestCli : public QObject {
  Q_OBJECT
 private slots:
  void version() {
    const auto r = run(kCli, {"--version"});
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.startsWith("fp8rl 0."), qPrintable(r.out));
  }

  void doctorIsHonestAndExitsZero() {
    const auto r = run(kCli, {"doctor"});
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.contains("CPU backend") && r.out.contains("BLAS:"), qPrintable(r.out));
    QVERIFY2(r.out.contains("CUDA backend module"), qPrintable(r.out));
    QVERIFY2(r.out.contains("--backend auto selects:"), qPrintable(r.out));
    // Either a usable GPU, or the reason there is none.
    QVERIFY2(r.out.contains("usable:         yes") || r.out.contains("usable:         no: "),
             qPrintable(r.out));
  }

  void doctorWithoutTheModule() {
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("FP8RL_CUDA_MODULE", "/nonexistent/libfp8rl_cuda.so");
    const auto r = run(kCli, {"doctor"}, env);
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.contains("module not found"), qPrintable(r.out));
    QVERIFY2(r.out.contains("--backend auto selects: cpu"), qPrintable(r.out));
  }

  void errorsNameTheProblem() {
    auto r = run(kCli, {"frobnicate"});
    QCOMPARE(r.code, 2);
    QVERIFY(r.out.contains("unknown command 'frobnicate'"));
    r = run(kCli, {"doctor", "--fast"});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.out.contains("unknown option --fast"), qPrintable(r.out));
    r = run(kCli, {"bench", "gemm", "--backend", "cpu", "--shapes", "1,2"});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.out.contains("'1,2' is not M,N,K"), qPrintable(r.out));
  }

  void trainSaysItIsNotThereYet() {
    const auto r = run(kCli, {"train", "--preset", "demo"});
    QCOMPARE(r.code, 3);
    QVERIFY2(r.out.contains("not part of this build yet"), qPrintable(r.out));
  }

  void benchGemmPrintsRatios() {
    const auto r =
        run(kCli, {"bench", "gemm", "--backend", "cpu", "--shapes", "64,48,256", "--seconds", "0"});
    QCOMPARE(r.code, 0);
    for (const char* op : {"fprop", "dgrad", "wgrad"})
      QVERIFY2(r.out.contains(op), qPrintable(r.out));
    QVERIFY2(r.out.contains("fp8/best"), qPrintable(r.out));
  }

  void binariesLinkNoCudaLibrary() {
    QStringList bins = {kCli};
    if (!QStringLiteral(FP8RL_STUDIO).isEmpty()) bins << QStringLiteral(FP8RL_STUDIO);
    for (const auto& bin : bins) {
      const auto r = run("ldd", {bin});
      if (r.code != 0) QSKIP("ldd not available");
      for (const char* lib : {"libcuda", "libcudart", "libcublas", "libnccl"})
        QVERIFY2(!r.out.contains(lib), qPrintable(bin + " links " + lib + ":\n" + r.out));
    }
    const auto r = run("ldd", {kCli});
    QVERIFY2(!r.out.contains("libQt"), "the CLI must not link Qt");
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
