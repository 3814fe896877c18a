// GRPO math on hand-computed cases, the tasks' rewards and data, and run-configuration errors.
#include <QtTest>

#include <QTemporaryDir>
#include <cmath>
#include <fstream>

#include "contract/settings.hpp"
#include "core/error.hpp"
#include "core/yaml.hpp"
#include "error_of.hpp"
#include "rl/grpo.hpp"
#include "rl/run_config.hpp"
#include "rl/tasks.hpp"
#include "text/char_tokenizer.hpp"

using namespace fp8rl;

namespace {
bool near(double a, double b, double tol = 1e-9) {
  return std::fabs(a - b) <= tol;
}

}  // namespace

class TestRl : public QObject {
  Q_OBJECT
 private slots:
  void advantagesMeanStd() {
    // Group [1, 0, 0, 1]: mean 0.5, sample sd sqrt(1/3); group [0.5 ×4]: no variance → 0.
    const auto a = compute_advantages({1, 0, 0, 1, 0.5, 0.5, 0.5, 0.5}, 4, AdvantageMode::mean_std);
    const double sd = std::sqrt(1.0 / 3.0);
    QVERIFY(near(a[0], 0.5 / (sd + 1e-6)));
    QVERIFY(near(a[1], -0.5 / (sd + 1e-6)));
    for (int i = 4; i < 8; ++i) QCOMPARE(a[i], 0.0);
  }

  void advantagesLeaveOneOut() {
    // [1, 0, 0]: baselines (0+0)/2 = 0, (1+0)/2, (1+0)/2; sd = sqrt(1/3).
    const auto a = compute_advantages({1, 0, 0}, 3, AdvantageMode::leave_one_out);
    const double sd = std::sqrt(1.0 / 3.0);
    QVERIFY(near(a[0], 1.0 / (sd + 1e-6)));
    QVERIFY(near(a[1], -0.5 / (sd + 1e-6)));
    QVERIFY_THROWS_EXCEPTION(Error, compute_advantages({1, 2, 3}, 2, AdvantageMode::mean_std));
  }

  void importanceWeights() {
    LossConfig c;  // tis, [0, 2]
    QVERIFY(near(importance_weight(std::log(1.5), 0, c), 1.5));
    QCOMPARE(importance_weight(std::log(3.0), 0, c), 2.0);  // clamped
    c.importance = ImportanceMode::icepop;
    QCOMPARE(importance_weight(std::log(3.0), 0, c), 0.0);  // masked
    QVERIFY(near(importance_weight(std::log(0.5), 0, c), 0.5));
    c.importance = ImportanceMode::off;
    QCOMPARE(importance_weight(5.0, 0, c), 1.0);
    c.importance = ImportanceMode::tis;
    QCOMPARE(importance_weight(1000.0, -1000.0, c), 0.0);  // exp overflows: inf → 0 (the recipe)
  }

  void clippedLossWithTis() {
    LossConfig cfg;  // ε 0.2/0.2, tis [0, 2]
    // Token 0: r = 1.1 (inside), A = 2, w = exp(0.3) → loss −A·r·w, dL/dc = −A·r·w.
    // Token 1: r = 1.5 > 1.2 with A = 2: clipped branch (−2·1.2 > −2·1.5) → loss −2·1.2·w, grad 0.
    // Token 2: r = 0.5 < 0.8 with A = 2: unclipped branch is larger (−1 > −1.6) → gradient.
    const float p[3] = {0, 0, 0}, g[3] = {-0.3f, 0, 0};
    const float c[3] = {static_cast<float>(std::log(1.1)), static_cast<float>(std::log(1.5)),
                        static_cast<float>(std::log(0.5))};
    float dc[3];
    TokenLossSums s;
    add_token_loss(cfg, 2.0, c, p, g, nullptr, 3, dc, s);
    const double w0 = std::exp(0.3);
    QVERIFY(near(dc[0], -2.0 * 1.1 * w0, 1e-5));
    QCOMPARE(dc[1], 0.0f);
    QVERIFY(near(dc[2], -2.0 * 0.5, 1e-6));
    QVERIFY(near(s.loss, -2.0 * 1.1 * w0 - 2.0 * 1.2 - 2.0 * 0.5, 1e-5));
    QCOMPARE(s.clipped, int64_t{1});
    QCOMPARE(s.tokens, int64_t{3});
    // Negative advantage: r = 1.5 → unclipped −A·r = 1.5 > 1.2: gradient flows.
    TokenLossSums s2;
    add_token_loss(cfg, -1.0, c + 1, p, p, nullptr, 1, dc, s2);
    QVERIFY(near(dc[0], 1.5, 1e-6));
  }

  void klPenalty() {
    LossConfig cfg;
    cfg.kl_beta = 0.1;
    const float c[1] = {-1.0f}, p[1] = {-1.0f}, g[1] = {-1.0f}, ref[1] = {-0.5f};
    float dc[1];
    TokenLossSums s;
    add_token_loss(cfg, 0.0, c, p, g, ref, 1, dc, s);
    const double d = 0.5, k3 = std::exp(d) - d - 1;
    QVERIFY(near(s.kl, k3, 1e-6));
    QVERIFY(near(dc[0], 0.1 * (1 - std::exp(d)), 1e-6));
  }

  void mismatchDiagnostics() {
    LossConfig cfg;
    const auto m = mismatch_stats({0.0f, std::log(3.0f)}, {0.0f, 0.0f}, cfg);
    QVERIFY(near(m.token_mult_prob_error, (1 + 3) / 2.0, 1e-6));
    QVERIFY(near(m.gen_kl_error, (3 - std::log(3.0) - 1) / 2, 1e-6));
    QVERIFY(near(m.mean_weight, 2.0, 1e-6));
    QVERIFY(near(m.out_of_bounds, 0.5));
    QVERIFY(near(m.effective_sample_size, 16.0 / (2 * 10), 1e-6));
    const auto h = log_histogram({0.0, 0.5, 1.0, 2.0, 1e9}, -2, 2, 4);
    QCOMPARE(h.counts.front(), int64_t{1});  // 0 underflows
    QCOMPARE(h.counts.back(), int64_t{1});   // 1e9 overflows
  }

  // The benchmarks' synthetic task: prompts of the configured lengths over a vocabulary of any
  // size, responses forced to lengths drawn per sequence (the same for the same index and seed),
  // a reward that is a fixed function of the ids, and a tokenizer that round-trips.
  void syntheticTask() {
    TaskConfig tc;
    tc.name = "synthetic";
    tc.min_len = 5;
    tc.max_len = 9;
    tc.vocab_size = 151936;
    tc.max_response_tokens = 64;
    tc.response_tokens_min = 16;
    tc.validation_size = 3;
    const auto task = make_task(tc);
    QCOMPARE(task->tokenizer().vocab_size(), 151936);
    Rng rng(4);
    for (int i = 0; i < 20; ++i) {
      const Example ex = task->sample(rng);
      const auto ids = task->encode_prompt(ex.prompt);
      QVERIFY(ids.size() >= 6 && ids.size() <= 10 && ids[0] == 1);
      QCOMPARE(task->tokenizer().decode(ids), ex.prompt);
    }
    const std::vector<int64_t> seqs = {0, 1, 2, 3, 500};
    const auto n = task->forced_response_lengths(seqs, 77);
    QCOMPARE(n.size(), seqs.size());
    for (int64_t x : n) QVERIFY(x >= 16 && x <= 64);
    QCOMPARE(task->forced_response_lengths({500}, 77)[0], n[4]);  // by index, not by position
    QCOMPARE(task->reward(Example{}, "t4 t5 t6 t8", false), 0.75);
    QVERIFY(!task->correct(Example{}, "t4", true));
    QVERIFY(error_of([&] { task->tokenizer().encode("t2 x9"); }).contains("'t2'"));
    tc.response_tokens_min = 0;  // every response exactly max_response_tokens
    for (int64_t x : make_task(tc)->forced_response_lengths(seqs, 1)) QCOMPARE(x, int64_t{64});
    tc.vocab_size = 3;
    QVERIFY(error_of([&] { make_task(tc); }).contains("task.vocab_size"));
  }

  void taskRewards() {
    QCOMPARE(partial_credit("abcd", "abcd", true), 1.0);
    QCOMPARE(partial_credit("abcd", "abxd", true), 0.75);
    QCOMPARE(partial_credit("abcd", "abcdef", true), 4.0 / 6.0);
    QCOMPARE(partial_credit("abcd", "abcd", false), 0.0);  // no <eos>
    QCOMPARE(shaped_reward("abcd", "abcd", true), 1.0);
    QCOMPARE(shaped_reward("abcd", "abc", true), 0.5 * 0.75);  // a dropped character
    QCOMPARE(shaped_reward("abcd", "abcd", false), 0.0);
    TaskConfig tc;
    for (const char* name : {"reverse", "sort", "addition"}) {
      tc.name = name;
      tc.max_len = 4;
      auto t = make_task(tc);
      Rng rng(3);
      QCOMPARE(static_cast<int64_t>(t->validation().size()), tc.validation_size);
      for (int i = 0; i < 200; ++i) {
        const Example ex = t->sample(rng);
        for (const auto& v : t->validation()) QVERIFY(v.prompt != ex.prompt);  // held out
        QCOMPARE(t->reward(ex, ex.answer, true), 1.0);
        QVERIFY(t->correct(ex, ex.answer, true));
        const auto ids = t->encode_prompt(ex.prompt);
        QCOMPARE(ids.front(), CharTokenizer::kBos);
        QCOMPARE(t->tokenizer().decode(ids), ex.prompt);
      }
    }
    tc.name = "reverse";
    Rng rng(1);
    const Example ex = make_task(tc)->sample(rng);
    QCOMPARE(std::string(ex.answer.rbegin(), ex.answer.rend()) + "=", ex.prompt);
    // The reward kinds: auto is shaped for the built-in tasks.
    const std::string near_miss = ex.answer.substr(0, ex.answer.size() - 1);
    const double partial = partial_credit(ex.answer, near_miss, true);
    QCOMPARE(make_task(tc)->reward(ex, near_miss, true), 0.5 * partial);
    tc.reward = "partial";
    QCOMPARE(make_task(tc)->reward(ex, near_miss, true), partial);
    tc.reward = "exact";
    QCOMPARE(make_task(tc)->reward(ex, near_miss, true), 0.0);
    QCOMPARE(make_task(tc)->reward(ex, ex.answer, true), 1.0);
    tc.reward = "numeric";
    QVERIFY(error_of([&] { make_task(tc); }).contains("task.reward 'numeric' is for the jsonl"));
  }

  void jsonlTaskAndErrors() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("t.jsonl").toStdString();
    {
      std::ofstream f(path);
      f << R"({"prompt": "2+2=", "answer": "4"})"
        << "\n\n"
        << R"({"prompt": "3+4=", "answer": 7, "split": "validation"})"
        << "\n";
    }
    TaskConfig tc;
    tc.name = "jsonl";
    tc.path = path;
    tc.reward = "numeric";
    auto t = make_task(tc);
    QCOMPARE(t->validation().size(), size_t{1});
    const Example v = t->validation().front();
    QCOMPARE(t->reward(v, "7", true), 1.0);
    QCOMPARE(t->reward(v, "7.0", true), 1.0);  // numeric
    QCOMPARE(t->reward(v, "8", true), 0.0);
    tc.reward = "auto";  // exact for jsonl
    QCOMPARE(make_task(tc)->reward(v, "7.0", true), 0.0);
    QCOMPARE(make_task(tc)->reward(v, "7", true), 1.0);
    tc.reward = "exact";
    {
      std::ofstream f(path);
      f << R"({"prompt": "a", "answer": "b"})"
        << "\n"
        << R"({"prompt": "a"})"
        << "\n";
    }
    QVERIFY2(error_of([&] { make_task(tc); }).contains("t.jsonl:2: missing \"answer\""),
             qPrintable(error_of([&] { make_task(tc); })));
    {
      std::ofstream f(path);
      f << "{not json\n";
    }
    QVERIFY(error_of([&] { make_task(tc); }).contains("t.jsonl:1: not valid JSON"));
  }

  void configErrorsNameTheKey() {
    QVERIFY(error_of([] {
              RunConfig::load("", "", {"grpo.stepz=3"});
            }).contains("unknown setting 'grpo.stepz' (allowed here:"));
    QVERIFY(error_of([] {
              RunConfig::load("", "", {"grpo.importance=clamp"});
            }).contains("'grpo.importance' is 'clamp' (allowed: tis, icepop, off)"));
    QVERIFY(error_of([] {
              RunConfig::load("", "", {"grpo.steps=many"});
            }).contains("'grpo.steps' must be a number"));
    QVERIFY(error_of([] {
              RunConfig::load("", "", {"precision.overrides=[9.q=bf16]"});
            }).contains("layer '9'"));
    QVERIFY(error_of([] { RunConfig::load("no-such-preset", "", {}); }).contains("unknown preset"));
    const RunConfig c =
        RunConfig::load("", "", {"precision.overrides=[*.down=bf16, 0.q=bf16]", "grpo.steps=5"});
    QCOMPARE(c.steps, int64_t{5});
    const PrecisionMap pm = c.precision_map(c.model);
    QVERIFY(pm.at(1, Module::down) == Precision::bf16 && pm.at(0, Module::q) == Precision::bf16);
    QVERIFY(pm.at(1, Module::q) == Precision::fp8);
  }

  // Every setting of the schema that constrains its values is enforced by RunConfig::from_json
  // (so from_json reads it): a value just outside the row's range, or not one of its choices,
  // is refused naming the key.
  void everySchemaRowIsChecked() {
    int checked = 0;
    for (const SettingSpec& s : setting_specs()) {
      Json bad;
      if (s.kind == SettingKind::choice)
        bad = Json("not-a-choice");
      else if ((s.kind == SettingKind::integer || s.kind == SettingKind::number) &&
               std::isfinite(s.lo))
        bad = Json(s.lo_open ? s.lo : s.lo - 1);
      else if ((s.kind == SettingKind::integer || s.kind == SettingKind::number) &&
               std::isfinite(s.hi))
        bad = Json(s.hi_open ? s.hi : s.hi + 1);
      else
        continue;
      Json doc = RunConfig::defaults();
      set_setting(doc, s.key, bad, "test");
      const std::string e = error_of([&] { RunConfig::from_json(doc); }).toStdString();
      QVERIFY2(e.find("'" + s.key + "'") != std::string::npos, (s.key + ": " + e).c_str());
      ++checked;
    }
    QVERIFY(checked >= 40);
  }

  // The model section is the family's config.json: a family's defaults under a preset's
  // fields; another family starts from its own defaults keeping the shared fields; the names of
  // the first form are read with a note; errors name the field as a setting.
  void modelSectionIsTheFamilysConfig() {
    const RunConfig moe =
        RunConfig::load("", "", {"model.model_type=qwen3_moe", "model.hidden_size=64"});
    QCOMPARE(moe.model.family, std::string("qwen3_moe"));
    QCOMPARE(moe.model.hidden_size, int64_t{64});
    QCOMPARE(moe.model.moe.num_experts, int64_t{8});
    QCOMPARE(moe.doc.at("model").at("architectures").as_array()[0].as_string(),
             std::string("Qwen3MoeForCausalLM"));
    QVERIFY(moe.notes.empty());
    const RunConfig llama =
        RunConfig::load("", "",
                        {"model.model_type=llama", "model.rope_scaling.rope_type=llama3",
                         "model.rope_scaling.factor=8", "model.rope_scaling.low_freq_factor=1",
                         "model.rope_scaling.high_freq_factor=4",
                         "model.rope_scaling.original_max_position_embeddings=32"});
    QVERIFY(llama.model.rope_scaling == RopeScalingType::llama3);
    QCOMPARE(llama.model.rope_original_max_position_embeddings, int64_t{32});
    QVERIFY(!llama.model.qk_norm);
    // The first form: family, rope_scaling by name with rope_* beside it, init_std.
    Json old = RunConfig::defaults();
    Json m;
    m["family"] = "llama";
    m["rope_scaling"] = "llama3";
    m["rope_original_max_position_embeddings"] = int64_t{32};
    m["init_std"] = 0.07;
    Json over;
    over["model"] = m;
    const RunConfig migrated = RunConfig::from_json(over);
    QCOMPARE(migrated.model.family, std::string("llama"));
    QCOMPARE(migrated.model.rope_original_max_position_embeddings, int64_t{32});
    QCOMPARE(migrated.model.rope_factor, 8.0);
    QCOMPARE(migrated.init_std, 0.07);
    QCOMPARE(migrated.notes.size(), size_t{1});
    QVERIFY(migrated.notes[0].find("family → model_type") != std::string::npos);
    QVERIFY(!migrated.doc.at("model").contains("family"));
    QVERIFY(error_of([] {
              RunConfig::load("", "", {"model.hidden_size=-64"});
            }).contains("setting 'model.hidden_size' must be positive, got -64"));
    QVERIFY(
        error_of([] {
          RunConfig::load("", "", {"model.model_type=gpt2"});
        }).contains("setting 'model.model_type' is \"gpt2\" (allowed: qwen3, llama, qwen3_moe)"));
    QVERIFY(error_of([] {
              RunConfig::load("", "", {"model.num_experts=4"});
            }).contains("unknown setting 'model.num_experts'"));
  }

  void yamlSubset() {
    const Json j =
        parse_yaml("a: 1\nb:\n  c: \"x # y\"  # comment\n  d: [1, two]\ne:\n- 3\n- k: v\n", "t");
    QCOMPARE(j.at("a").as_number(), 1.0);
    QCOMPARE(QString::fromStdString(j.at("b").at("c").as_string()), QStringLiteral("x # y"));
    QCOMPARE(j.at("b").at("d").as_array().size(), size_t{2});
    QCOMPARE(j.at("e").as_array()[1].at("k").as_string(), std::string("v"));
    QVERIFY(error_of([] { parse_yaml("a: 1\n  b: 2\n", "f.yaml"); }).contains("f.yaml:2"));
    QVERIFY(error_of([] { parse_yaml("a: 1\na: 2\n", "f.yaml"); }).contains("duplicate key"));
  }
};

QTEST_APPLESS_MAIN(TestRl)
#include "test_rl.moc"
