// The layer audit and generator/trainer identity: a normal run audits every linear OK and its
// trainer recomputes the generator's log-probs bit for bit; a linear quantized differently on
// the generator's side is reported, exactly that one; `fp8rl audit` prints what was stored.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "backend/backend_registry.hpp"
#include "contract/metrics.hpp"
#include "error_of.hpp"
#include "model/weight_audit.hpp"
#include "rl/run_loop.hpp"
#include "run_process.hpp"
#include "store/run_store.hpp"

using namespace fp8rl;

namespace {

// What `fp8rl ARGS` printed and its exit status.
ProcessResult run_cli(const QStringList& args) {
  return run_process(QStringLiteral(FP8RL_CLI), args);
}

int64_t mismatches(const std::vector<AuditRow>& rows) {
  int64_t n = 0;
  for (const auto& r : rows) n += !r.ok;
  return n;
}

}  // namespace

class TestAudit : public QObject {
  Q_OBJECT

 private slots:
  // telemetry.fp8_every = 2: FP8 quantization telemetry (scale histograms, statistics) on RL
  // steps 1 and 3 only; the audit (every step) is unaffected.
  void fp8TelemetryOnEveryNthStep() {
    RunConfig cfg =
        RunConfig::load("demo", "", {"grpo.steps=3", "sft.steps=0", "telemetry.fp8_every=2"});
    auto be = make_cpu_backend();
    GrpoRun run(cfg, *be);
    for (int step = 1; step <= 3; ++step) {
      const StepRecord r = run.next();
      int64_t scale_histograms = 0, fp8_scalars = 0;
      for (const auto& h : r.histograms)
        scale_histograms += h.name.rfind("fp8_scale_log2/", 0) == 0;
      for (const auto& [key, v] : r.scalars) fp8_scalars += key.rfind("fp8/", 0) == 0;
      const bool due = step != 2;
      QCOMPARE(scale_histograms > 0, due);
      QCOMPARE(fp8_scalars > 0, due);
      QVERIFY(!r.audit.empty());
    }
    QVERIFY(error_of([] {
              RunConfig::load("demo", "", {"telemetry.fp8_every=-1"});
            }).contains("telemetry.fp8_every"));
  }

  // How often a step makes the host wait for the backend (what it would cost a device): an
  // FP8 step with FP8 telemetry off waits exactly as often as a BF16 step — the re-quantized
  // weights' statistics are taken only when observed — with it on, two waits more, and with an
  // FP8 KV cache one more per training forward. The counts are printed.
  void fp8StepSynchronisesAsOftenAsBf16() {
    auto syncs_of_second_step = [](const char* precision, const char* every,
                                   const char* kv = "bf16") {
      RunConfig cfg = RunConfig::load(
          "demo", "",
          {"grpo.steps=3", "sft.steps=0", "validation.every=0", "grpo.prompts_per_step=4",
           std::string("precision.default=") + precision,
           std::string("telemetry.fp8_every=") + every, std::string("precision.kv_cache=") + kv});
      auto be = make_cpu_backend();
      GrpoRun run(cfg, *be);
      run.next();  // the first step also validates
      const int64_t before = be->host_syncs();
      run.next();
      return be->host_syncs() - before;
    };
    const int64_t bf16 = syncs_of_second_step("bf16", "0"), fp8 = syncs_of_second_step("fp8", "0"),
                  fp8_observed = syncs_of_second_step("fp8", "1"),
                  fp8_kv = syncs_of_second_step("fp8", "0", "fp8");
    qInfo(
        "host synchronisations per demo step: bf16 %lld, fp8 %lld, fp8 with FP8 telemetry %lld, "
        "fp8 with an FP8 KV cache %lld",
        static_cast<long long>(bf16), static_cast<long long>(fp8),
        static_cast<long long>(fp8_observed), static_cast<long long>(fp8_kv));
    QVERIFY(bf16 > 0);
    QCOMPARE(fp8, bf16);
    // The FP8 telemetry (scale histograms and statistics of every observed quantization) is
    // summed on the backend and read in two downloads per step, whatever the model's size.
    QVERIFY(fp8_observed <= bf16 + 2);
    // With an FP8 KV cache the training forwards record the amax of q, k and v on the backend
    // (Backend::amax_into) and the host reads them once per forward — here one (32 samples, in
    // micro-batches of 64) — not three times a layer.
    QCOMPARE(fp8_kv, bf16 + 1);
  }

  // The demo (FP8 linears, BF16 KV cache) without warm-up, a live precision edit at step 2:
  // every step's audit covers every linear and finds it OK, and the trainer's log-probs equal
  // the generator's bit for bit (error exactly 1, KL exactly 0, p − g = 0 for every token).
  void normalRunIsAuditedOkAndBitIdentical() {
    RunConfig cfg = RunConfig::load("demo", "", {"grpo.steps=3", "sft.steps=0"});
    auto be = make_cpu_backend();
    GrpoRun run(cfg, *be);
    const int64_t linears = run.model().config().num_hidden_layers * kDenseModules;
    for (int step = 1; step <= 3; ++step) {
      if (step == 2) {
        LiveEdit edit;
        edit.add_precision("0.gate=bf16");
        edit.add_precision("1.q=bf16");
        run.apply(edit);
      }
      const StepRecord r = run.next();
      QCOMPARE(r.step, int64_t(step));
      QCOMPARE(int64_t(r.audit.size()), linears);
      QCOMPARE(mismatches(r.audit), int64_t(0));
      for (const auto& a : r.audit) {
        QCOMPARE(a.max_abs_diff, 0.0);
        QCOMPARE(a.generator_precision, a.trainer_precision);
      }
      QCOMPARE(r.scalars.at(metric::kAuditMismatches), 0.0);
      QCOMPARE(r.scalars.at(metric::kTokenMultProbError), 1.0);
      QCOMPARE(r.scalars.at(metric::kGenKlError), 0.0);
      QVERIFY(!r.samples.empty());
      for (const auto& s : r.samples) {
        QVERIFY(!s.tokens.empty());
        QCOMPARE(s.tokens.size(), s.logprob_diff.size());
        for (double d : s.logprob_diff) QCOMPARE(d, 0.0);
      }
    }
    QCOMPARE(run.model().linear(0, Module::gate).precision(), Precision::bf16);
  }

  // One linear requantized on the generator's side with other scales (powers of two or not)
  // and one computing in BF16 where the trainer holds FP8: the audit names exactly those two;
  // the run's steps keep recording them (a weight sync refreshes each linear as it computes:
  // it does not mend a divergence), until the precision map is applied again.
  void deliberateMismatchIsReportedExactly() {
    RunConfig cfg = RunConfig::load("demo", "", {"grpo.steps=2", "sft.steps=0"});
    auto be = make_cpu_backend();
    GrpoRun run(cfg, *be);
    DecoderModel& model = run.model();
    QVERIFY(audit_weights(model, model.precision(), model.quant_options()).size() > 2);
    QCOMPARE(mismatches(audit_weights(model, model.precision(), model.quant_options())),
             int64_t(0));

    QuantOptions other = model.quant_options();
    other.pow2_scales = !other.pow2_scales;
    model.linear(1, Module::up).set_precision(Precision::fp8, other);
    model.linear(0, Module::v).set_precision(Precision::bf16, model.quant_options());
    const auto rows = audit_weights(model, model.precision(), model.quant_options());
    QCOMPARE(mismatches(rows), int64_t(2));
    for (const auto& r : rows) {
      const bool up1 = r.layer == 1 && r.module == "up", v0 = r.layer == 0 && r.module == "v";
      QCOMPARE(r.ok, !(up1 || v0));
      if (up1) {
        QCOMPARE(QString::fromStdString(r.generator_precision), QString("fp8"));
        QCOMPARE(QString::fromStdString(r.trainer_precision), QString("fp8"));
        QVERIFY(r.max_abs_diff > 0);
      }
      if (v0) {
        QCOMPARE(QString::fromStdString(r.generator_precision), QString("bf16"));
        QCOMPARE(QString::fromStdString(r.trainer_precision), QString("fp8"));
      }
    }

    const StepRecord first = run.next();
    QCOMPARE(mismatches(first.audit), int64_t(2));
    QCOMPARE(first.scalars.at(metric::kAuditMismatches), 2.0);
    const StepRecord second = run.next();
    QCOMPARE(mismatches(second.audit), int64_t(2));
    model.set_precision(model.precision());
    QCOMPARE(mismatches(audit_weights(model, model.precision(), model.quant_options())),
             int64_t(0));
  }

  // `fp8rl audit --run ID` prints the stored audit: exit 0 when all OK, 1 naming the
  // mismatching linear, and clear errors for a missing run or step.
  void auditCommandPrintsTheStoredAudit() {
    QTemporaryDir dir;
    const QString db = dir.filePath("runs.sqlite");
    int64_t run_ok = 0, run_bad = 0;
    {
      RunStore store(db.toStdString());
      StepRecord r;
      r.phase = "rl";
      r.step = 1;
      r.audit = {{0, "q", "fp8", "fp8", 0.0, true}, {0, "k", "bf16", "bf16", 0.0, true}};
      run_ok = store.create_run("ok", "demo", Json(Json::Object{}), "fp8");
      store.record_step(run_ok, r);
      r.step = 2;
      r.audit[1] = {0, "k", "fp8", "bf16", 0.25, false};
      run_bad = store.create_run("bad", "demo", Json(Json::Object{}), "fp8");
      store.record_step(run_bad, r);
      r.step = 3;
      r.audit[1].ok = true;
      r.audit[1].trainer_precision = "fp8";
      r.audit[1].max_abs_diff = 0;
      store.record_step(run_bad, r);
    }
    ProcessResult c = run_cli({"audit", "--run", QString::number(run_ok), "--db", db});
    QCOMPARE(c.code, 0);
    QVERIFY2(c.out.contains("2 linears, 0 mismatches"), qPrintable(c.out));

    c = run_cli({"audit", "--run", QString::number(run_bad), "--db", db, "--step", "2"});
    QCOMPARE(c.code, 1);
    QVERIFY2(c.out.contains("MISMATCH") && c.out.contains("1 mismatch\n"), qPrintable(c.out));
    c = run_cli({"audit", "--run", QString::number(run_bad), "--db", db, "--all"});
    QCOMPARE(c.code, 0);  // the latest audit (step 3) is clean
    QVERIFY2(c.out.contains("before step 3"), qPrintable(c.out));

    c = run_cli({"audit", "--run", "99", "--db", db});
    QCOMPARE(c.code, 1);
    QVERIFY2(c.out.contains("no run 99"), qPrintable(c.out));
    c = run_cli({"audit", "--run", QString::number(run_ok), "--db", db, "--step", "7"});
    QCOMPARE(c.code, 1);
    QVERIFY2(c.out.contains("no audit at step 7"), qPrintable(c.out));
  }
};

QTEST_GUILESS_MAIN(TestAudit)
#include "test_audit.moc"
