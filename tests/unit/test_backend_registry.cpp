// Backend selection: names, auto fallback with a reason, cuda refusing with the reason.
#include <QtTest>

#include "backend/backend_registry.hpp"
#include "core/error.hpp"

using namespace fp8rl;

class TestBackendRegistry : public QObject {
  Q_OBJECT
 private slots:
  void parsesChoices() {
    QVERIFY(parse_backend_choice("auto") == BackendChoice::automatic);
    QVERIFY(parse_backend_choice("cpu") == BackendChoice::cpu);
    QVERIFY(parse_backend_choice("cuda") == BackendChoice::cuda);
    try {
      parse_backend_choice("gpu");
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(QString(e.what()).contains("allowed: auto, cpu, cuda"), e.what());
    }
  }

  void cpuAlwaysWorks() {
    auto sel = make_backend(BackendChoice::cpu);
    QCOMPARE(QString::fromStdString(sel.backend->name()), QStringLiteral("cpu"));
    QVERIFY(sel.fallback_reason.empty());
  }

  void autoExplainsFallback() {
    const auto& st = cuda_module_status();
    auto sel = make_backend(BackendChoice::automatic);
    if (st.usable) {
      QCOMPARE(QString::fromStdString(sel.backend->name()), QStringLiteral("cuda"));
    } else {
      QCOMPARE(QString::fromStdString(sel.backend->name()), QStringLiteral("cpu"));
      QVERIFY(!sel.fallback_reason.empty());
      QCOMPARE(sel.fallback_reason, st.why_not());
      QVERIFY_THROWS_EXCEPTION(Error, make_backend(BackendChoice::cuda));
      qInfo("auto fell back to the CPU: %s", sel.fallback_reason.c_str());
    }
  }

  // $FP8RL_KERNEL_OPTIONS: malformed entries are named; a backend without kernel options (the
  // CPU) takes a well-formed list as nothing. (Unknown names on a device: the GPU round.)
  void kernelOptionsFromTheEnvironment() {
    auto be = make_cpu_backend();
    apply_kernel_options(*be, "attention_kernel=3,linear_fp8_max_rows=8,");
    apply_kernel_options(*be, "");
    for (const char* bad : {"attention_kernel", "attention_kernel=", "=3", "attention_kernel=3x"}) {
      try {
        apply_kernel_options(*be, std::string("linear_fp8_splits=2,") + bad);
        QFAIL(bad);
      } catch (const Error& e) {
        QVERIFY2(QString(e.what()).contains(QString("'%1' is not name=integer").arg(bad)),
                 e.what());
      }
    }
  }

  void buffersAreMovable() {
    auto be = make_cpu_backend();
    Buffer a = be->alloc(100);
    void* p = a.data();
    Buffer b = std::move(a);
    QCOMPARE(b.data(), p);
    QCOMPARE(a.data(), nullptr);
    b.reset();
    QCOMPARE(b.bytes(), size_t{0});
  }
};

QTEST_APPLESS_MAIN(TestBackendRegistry)
#include "test_backend_registry.moc"
