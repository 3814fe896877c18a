// Layer sensitivity on a tiny model (the demo's two layers, 3 prompts × 4 responses): a planted
// outlier makes one linear the FP8-sensitive one; the analysis ranks it first, recommends it,
// and the recommendation applied from its override strings measures within the budget. Budget
// errors, the JSON keys, the model's precision restored, and the command line's --json output.
#include <QtTest>

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <cmath>
#include <limits>

#include "backend/backend_registry.hpp"
#include "core/error.hpp"
#include "error_of.hpp"
#include "model/tensor.hpp"
#include "rl/group_rollouts.hpp"
#include "rl/sensitivity.hpp"

using namespace fp8rl;

namespace {

const std::vector<std::string> kSets = {"grpo.group_size=4", "grpo.prompts_per_step=3",
                                        "task.max_len=4", "precision.overrides=[\"0.q=bf16\"]",
                                        "precision.lm_head=fp32"};
constexpr int64_t kLayer = 1;
constexpr int kDead[2] = {5, 133};  // one intermediate channel in each 128-column tile of down

// Layer 1's down projection gets one weight of 1e6 × init_std in each of its two 128×128 tiles,
// in the column of an intermediate channel whose gate and up rows are zeroed: the channel is 0
// in every precision (silu(0)·0), so the outliers change no output, but they set their tiles'
// FP8 scales (amax / 448), and nearly every ordinary weight rounds to zero in E4M3 (those above
// about 2 init_std to its smallest subnormal).
void plant_outliers(DecoderModel& model, double init_std) {
  Backend& be = model.backend();
  Param& down = model.linear(kLayer, Module::down).weight();
  QCOMPARE(down.master.cols, int64_t{256});
  std::vector<float> w = download_floats(be, down.master);
  for (int j : kDead) w[static_cast<size_t>(j)] = static_cast<float>(1e6 * init_std);
  upload_floats(be, down.master, w);
  for (Module m : {Module::gate, Module::up}) {
    Param& p = model.linear(kLayer, m).weight();
    std::vector<float> v = download_floats(be, p.master);
    const int64_t cols = p.master.cols;
    for (int j : kDead) std::fill(v.begin() + j * cols, v.begin() + (j + 1) * cols, 0.0f);
    upload_floats(be, p.master, v);
  }
  model.refresh();
}

}  // namespace

class TestSensitivity : public QObject {
  Q_OBJECT
  std::unique_ptr<Backend> be_ = make_cpu_backend();
  RunConfig cfg_;
  std::unique_ptr<Task> task_;
  std::unique_ptr<DecoderModel> model_;
  SensitivityResult r_;

 private slots:
  void initTestCase() {
    cfg_ = RunConfig::load("demo", "", kSets);
    task_ = make_task(cfg_.task);
    model_ = make_run_model(cfg_, *be_, *task_);
    plant_outliers(*model_, cfg_.init_std);
    r_ = analyse_sensitivity(*model_, cfg_, *task_, SensitivityOptions{});
  }

  void plantedModuleRanksFirstAndIsKept() {
    QVERIFY(r_.ranking.size() == 2 * kDenseModules + 1);
    const LinearRef& top = r_.ranking.front().linear;
    QVERIFY2(!top.lm_head && top.slot.layer == kLayer && top.slot.module == Module::down,
             qPrintable(QString::fromStdString(top.name())));
    // Far ahead of the next: the plant, not chance.
    QVERIFY(r_.ranking[0].only_fp8.kl > 10 * r_.ranking[1].only_fp8.kl);
    QVERIFY(r_.ranking[0].only_fp8.token_mult_prob_error > 1.0);
    QVERIFY(r_.ranking[0].only_fp8.has_loss);
    QVERIFY(!r_.keep_bf16.empty());
    QCOMPARE(r_.keep_bf16.front().name(), std::string("L1.down"));
    QCOMPARE(r_.overrides.front(), std::string("*.*=fp8"));
    QCOMPARE(r_.overrides[1], std::string("1.down=bf16"));
    QCOMPARE(r_.overrides.size(), r_.keep_bf16.size() + 1);
    QVERIFY(r_.budget_is_default);
    QCOMPARE(r_.budget, r_.all_fp8.kl / 2);
    QVERIFY(r_.meets_budget);
  }

  // The override strings, parsed by the contract onto a map that is not all FP8, give the map
  // that was measured; a fresh probe (the same batch) measures it within the budget.
  void recommendationAppliedMeetsTheBudget() {
    const int64_t L = cfg_.model.num_hidden_layers;
    PrecisionMap pm(L, Precision::bf16);
    for (const auto& o : r_.overrides) apply_precision_override(pm, o);
    for (int64_t l = 0; l < L; ++l)
      for (int mi = 0; mi < kDenseModules; ++mi) {
        bool kept = false;
        for (const auto& k : r_.keep_bf16) kept |= k.slot.layer == l && k.slot.module == Module(mi);
        QCOMPARE(pm.at(l, Module(mi)), kept ? Precision::bf16 : Precision::fp8);
      }
    SensitivityProbe probe(*model_, cfg_, *task_, cfg_.prompts_per_step);
    QCOMPARE(probe.response_tokens(), r_.response_tokens);
    const SensitivityMeasure m = probe.measure(pm, Precision::bf16, false);
    QVERIFY2(m.kl <= r_.budget, qPrintable(QString("KL %1 > budget %2").arg(m.kl).arg(r_.budget)));
    QCOMPARE(m.kl, r_.recommended.kl);  // the CPU computes the same bits
    // Without the kept linears the same probe is over the budget.
    QVERIFY(probe.measure(PrecisionMap(L, Precision::fp8), Precision::bf16, false).kl > r_.budget);
  }

  void badBudgetsAreRefused() {
    const PrecisionMap before = model_->precision();
    for (double b : {-1e-3, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
      SensitivityOptions opt;
      opt.budget = b;
      const QString e = error_of([&] { analyse_sensitivity(*model_, cfg_, *task_, opt); });
      QVERIFY2(e.contains("budget"), qPrintable(e));
    }
    QVERIFY(model_->precision() == before);
  }

  void jsonHasTheDocumentedKeys() {
    const Json j = sensitivity_json(r_);
    for (const char* k : {"batch", "reference", "all_fp8", "all_fp8_lm_head_fp8", "ranking",
                          "budget", "budget_is_default", "recommendation", "seconds"})
      QVERIFY2(j.contains(k), k);
    for (const char* k : {"prompts", "group_size", "sequences", "response_tokens", "vocab_size",
                          "temperature", "mean_reward"})
      QVERIFY2(j.at("batch").contains(k), k);
    const Json& first = j.at("ranking").as_array().front();
    for (const char* k : {"rank", "module", "layer", "only_fp8", "all_fp8_but_kl"})
      QVERIFY2(first.contains(k), k);
    QCOMPARE(first.at("module").as_string(), std::string("L1.down"));
    for (const char* k : {"kl", "abs_dlogp", "token_mult_prob_error", "loss", "delta_loss",
                          "grad_norm", "delta_grad_norm"})
      QVERIFY2(first.at("only_fp8").contains(k), k);
    const Json& rec = j.at("recommendation");
    for (const char* k : {"keep_bf16", "overrides", "override_setting", "steps", "measure", "kl",
                          "meets_budget", "lm_head_fp8_kl", "keep_lm_head_bf16", "lm_head"})
      QVERIFY2(rec.contains(k), k);
    QCOMPARE(rec.at("override_setting").as_string(), overrides_assignment(r_.overrides));
    QVERIFY(rec.at("lm_head").as_string() == "bf16" || rec.at("lm_head").as_string() == "fp8");
    // The dump parses back.
    QVERIFY(Json::parse(j.dump()).contains("ranking"));
  }

  // The config's map (fp8 with 0.q in bf16) and lm_head (fp32) are back after the analysis.
  void modelPrecisionIsRestored() {
    QVERIFY(model_->precision() == cfg_.precision_map(cfg_.model));
    QCOMPARE(model_->precision().at(0, Module::q), Precision::bf16);
    QCOMPARE(model_->lm_head_precision(), Precision::fp32);
    QCOMPARE(model_->lm_head_setting(), Precision::fp32);
  }

  // The command: a bad --budget is an error naming it; --json writes one JSON object on stdout
  // and one progress line per measurement on stderr.
  void commandLine() {
    QProcess p;
    p.start(FP8RL_CLI, {"sensitivity", "--preset", "demo", "--backend", "cpu", "--budget", "abc"});
    QVERIFY(p.waitForFinished(60000));
    QVERIFY(p.exitCode() != 0);
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(err.contains("--budget") && err.contains("'abc'"), qPrintable(err));

    p.start(FP8RL_CLI, {"sensitivity", "--preset", "demo", "--backend", "cpu", "--prompts", "1",
                        "--set", "grpo.group_size=2", "--set", "task.max_len=3", "--json"});
    QVERIFY(p.waitForFinished(120000));
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    const QString progress = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(p.exitCode() == 0, qPrintable(progress));
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(out.toUtf8(), &pe);
    QVERIFY2(pe.error == QJsonParseError::NoError && doc.isObject(), qPrintable(out));
    QVERIFY(doc.object().contains("recommendation"));
    const QStringList lines = progress.split('\n', Qt::SkipEmptyParts);
    const QRegularExpression line(R"(^\[[#.]{24}\] (\d+)/(\d+) \S.*$)");
    int progress_lines = 0;
    for (const QString& l : lines)
      if (line.match(l).hasMatch()) ++progress_lines;
    QVERIFY2(progress_lines >= 2 * 2 * kDenseModules + 4, qPrintable(progress));
    const auto last = line.match(lines.back());
    QVERIFY2(last.hasMatch() && last.captured(1) == last.captured(2), qPrintable(lines.back()));
  }
};

QTEST_GUILESS_MAIN(TestSensitivity)
#include "test_sensitivity.moc"
