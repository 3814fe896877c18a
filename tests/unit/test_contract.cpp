// The run contract: the log2 bins of the FP8 scale histograms; the live edits: one typed edit
// (precision overrides and settings), its JSON form, the live state it changes and the rules that
// state must keep.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "contract/histogram.hpp"
#include "contract/live_edit.hpp"
#include "contract/settings.hpp"
#include "core/error.hpp"
#include "fp8/format.hpp"

using namespace fp8rl;

namespace {

// A configuration's settings: the schema's defaults.
Json config_doc() {
  return setting_defaults();
}

QString refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return QString::fromStdString(e.message());
  }
  return {};
}

}  // namespace

class TestContract : public QObject {
  Q_OBJECT
 private slots:
  // scale_log2_bin must bin exactly as linear_histogram does on log2 of the value (the FP8 scale
  // histograms were made that way before the bins were read off the exponent bits).
  void log2BinsAsLinearHistogram() {
    std::vector<float> values = {0.0f,
                                 -0.0f,
                                 -1.0f,
                                 1.0f,
                                 2.0f,
                                 0.5f,
                                 3.0f,
                                 255.0f,
                                 256.0f,
                                 0x1p-32f,
                                 0x1.fffffep-33f,
                                 0x1p8f,
                                 0x1.fffffep7f,
                                 1e-40f,
                                 std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN(),
                                 -std::numeric_limits<float>::quiet_NaN(),
                                 std::numeric_limits<float>::max(),
                                 std::numeric_limits<float>::denorm_min()};
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 20000; ++i) {  // random bit patterns: every exponent, sign and NaN
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const auto bits = static_cast<uint32_t>(x >> 17);
      float v;
      std::memcpy(&v, &bits, 4);
      values.push_back(v);
    }
    for (float v : values) {
      const double l = v > 0 ? std::log2(static_cast<double>(v)) : NAN;
      const fp8rl::Histogram h = fp8rl::linear_histogram({l}, -32, 8, 40);
      const size_t want =
          static_cast<size_t>(std::find(h.counts.begin(), h.counts.end(), 1) - h.counts.begin());
      QCOMPARE(static_cast<size_t>(fp8rl::scale_log2_bin(v, -32, 8)), want);
    }
  }

  void editJsonRoundTrips() {
    LiveEdit e;
    e.add_precision("0.gate=bf16");
    e.add_precision("*.down=bf16");
    e.set("lr", 2e-4);
    e.set("validation_every", 5);
    e.set("lr", 3e-4);  // a later value of a key replaces the earlier
    QCOMPARE(e.settings.size(), size_t(2));
    QCOMPARE(e.value("lr"), std::optional<double>(3e-4));
    QCOMPARE(QString::fromStdString(e.describe()),
             QString("0.gate=bf16, *.down=bf16, lr = 0.0003, validation_every = 5"));
    const Json j = e.to_json();
    QCOMPARE(
        QString::fromStdString(j.dump()),
        QString(
            R"({"precision":["0.gate=bf16","*.down=bf16"],"settings":{"lr":0.00029999999999999997,"validation_every":5}})"));
    QVERIFY(LiveEdit::from_json(j) == LiveEdit::from_json(Json::parse(j.dump())));
    QCOMPARE(LiveEdit::from_json(j).describe(), e.describe());

    LiveEdit later;
    later.set("validation_every", 7);
    later.add_precision("1.q=fp8");
    e.merge(later);
    QCOMPARE(QString::fromStdString(e.describe()),
             QString("0.gate=bf16, *.down=bf16, 1.q=fp8, lr = 0.0003, validation_every = 7"));
  }

  void badEditsNameTheProblem() {
    const std::pair<const char*, const char*> bad[] = {
        {R"([])", "JSON object"},
        {R"({})", "changes nothing"},
        {R"({"precision": "0.q=bf16"})", "must be a list"},
        {R"({"precision": [1]})", "must be strings"},
        {R"({"precision": ["0.q=fp16"]})", "unknown precision 'fp16'"},
        {R"({"precision": ["0.gates=bf16"]})", "module 'gates'"},
        {R"({"settings": {"lr": "fast"}})", "fast is not a number"},
        {R"({"settings": {"lr": null}})", "needs a number, true/false or a name"},
        {R"({"settings": {"autopilot": 1}})", "bad value for autopilot: 1 must be true or false"},
        {R"({"settings": {"autopilot_metric": "loss"}})",
         "is 'loss' (allowed: token_mult_prob_error, gen_kl_error, fp8/policy_kl)"},
        {R"({"settings": {"autopilot_threshold": true}})", "true is not a number"},
        {R"({"settings": {"lr": 2}})", "bad value for lr"},
        {R"({"settings": {"learning_rate": 1}})", "unknown setting"},
        {R"({"settings": []})", "must be an object"},
        {R"({"precision": ["0.q=bf16"], "lr": 1})", "not \"lr\""},
    };
    for (const auto& [text, says] : bad) {
      const QString why = refusal([&] { LiveEdit::from_json(Json::parse(text)); });
      QVERIFY2(why.contains(says), qPrintable(QString("%1 → '%2'").arg(text, why)));
    }
  }

  void stateAppliesAnEditWholeOrNotAtAll() {
    LiveState st = LiveState::from_config(config_doc(), PrecisionMap(2, Precision::fp8));
    QCOMPARE(st.value("lr"), 0.001);
    QCOMPARE(st.value("is_max"), 2.0);
    const LiveState before = st;

    LiveEdit bad;  // a valid override with an is_min that breaks is_min < is_max
    bad.add_precision("0.q=bf16");
    bad.set("is_min", 1);
    bad.set("is_max", 1);
    QVERIFY(refusal([&] { st.apply(bad); }).contains("is_min < is_max"));
    QVERIFY(st == before);
    LiveEdit beyond;
    beyond.add_precision("2.q=bf16");
    QVERIFY(refusal([&] { st.apply(beyond); }).contains("the model has 2 layers"));
    LiveEdit mixed;
    mixed.add_precision("0.q=fp32");
    QVERIFY(refusal([&] { st.apply(mixed); }).contains("fp32 cannot be mixed"));
    QVERIFY(st == before);

    LiveEdit ok;
    ok.add_precision("*.down=bf16");
    ok.set("is_max", 3);
    st.apply(ok);
    QCOMPARE(st.value("is_max"), 3.0);
    QCOMPARE(st.precision.at(1, Module::down), Precision::bf16);
    QCOMPARE(st.precision.at(1, Module::up), Precision::fp8);

    // Checkpoints carry it as JSON; a configuration carries the settings at their paths.
    QVERIFY(LiveState::from_json(Json::parse(st.to_json().dump())) == st);
    Json doc = config_doc();
    st.write_settings(doc);
    QCOMPARE(doc.at("grpo").at("is_max").as_number(), 3.0);
    QVERIFY(LiveState::from_config(doc, st.precision) == st);
    QVERIFY(refusal([] {
              LiveState::from_json(Json::parse(R"({"precision": []})"));
            }).contains("needs"));
    // A checkpoint of an earlier version lacks the newer settings: they take their defaults.
    Json old = st.to_json();
    old["settings"].as_object().erase("autopilot");
    QCOMPARE(LiveState::from_json(old).flag("autopilot"), false);
  }

  // Booleans and choices are live values of their own type, checked by their schema row.
  void typedLiveValues() {
    LiveState st = LiveState::from_config(config_doc(), PrecisionMap(2, Precision::fp8));
    QCOMPARE(st.flag("autopilot"), false);
    QCOMPARE(st.choice("autopilot_metric"), std::string("token_mult_prob_error"));
    QVERIFY(refusal([&] { st.value("autopilot"); }).contains("not a number"));
    LiveEdit e;
    e.set("autopilot", true);
    e.set("autopilot_metric", "fp8/policy_kl");
    e.set("autopilot_threshold", 0.02);
    QCOMPARE(QString::fromStdString(e.describe()),
             QString("autopilot = true, autopilot_metric = fp8/policy_kl, "
                     "autopilot_threshold = 0.02"));
    QCOMPARE(QString::fromStdString(e.to_json().dump()),
             QString(R"({"settings":{"autopilot":true,"autopilot_metric":"fp8/policy_kl",)"
                     R"("autopilot_threshold":0.02}})"));
    QVERIFY(LiveEdit::from_json(e.to_json()) == e);
    QCOMPARE(e.value("autopilot"), std::optional<double>());  // not a number
    st.apply(e);
    QCOMPARE(st.flag("autopilot"), true);
    QCOMPARE(st.choice("autopilot_metric"), std::string("fp8/policy_kl"));
    Json doc = config_doc();
    st.write_settings(doc);
    QCOMPARE(doc.at("precision").at("autopilot").as_bool(), true);
    QCOMPARE(doc.at("autopilot").at("metric").as_string(), std::string("fp8/policy_kl"));
    QVERIFY(LiveState::from_config(doc, st.precision) == st);
    QVERIFY(LiveState::from_json(Json::parse(st.to_json().dump())) == st);
    QVERIFY(refusal([&] { e.set("autopilot", 1.0); }).contains("must be true or false"));
    QVERIFY(refusal([&] { e.set("autopilot_budget_unit", "bytes"); }).contains("allowed: flops"));
  }

  // The settings schema: every default passes its own row, the live settings are its rows with
  // a live key (in the order of the sections), and refusals name the value and what is allowed.
  void settingsSchema() {
    const Json defaults = setting_defaults();
    QVERIFY(setting_specs().size() >= 50);
    for (const SettingSpec& s : setting_specs()) {
      QVERIFY2(!s.meaning.empty(), s.key.c_str());
      QVERIFY2(!s.problem(s.default_value()), s.key.c_str());
      QCOMPARE(read_setting(defaults, s.key).dump(), s.default_value().dump());
      QCOMPARE(find_setting(s.key), &s);
      QCOMPARE(s.live.empty(), s.applies.empty());
    }
    QCOMPARE(live_setting_keys(),
             std::string("autopilot, lr, temperature, is_min, is_max, validation_every, "
                         "autopilot_metric, autopilot_threshold, autopilot_patience, "
                         "autopilot_moves, autopilot_budget, autopilot_budget_unit, "
                         "autopilot_cooldown, autopilot_hysteresis, autopilot_return, "
                         "autopilot_calm_steps, autopilot_confirm"));
    for (const LiveSetting& l : live_settings()) QCOMPARE(l.spec->live, std::string(l.key));
    const SettingSpec* steps = find_setting("grpo.steps");
    QCOMPARE(steps->allowed(), std::string("a whole number ≥ 0"));
    QCOMPARE(*steps->problem(Json(-1)), std::string("must be ≥ 0, got -1"));
    QCOMPARE(*steps->problem(Json(2.5)), std::string("must be a whole number, got 2.5"));
    QCOMPARE(*steps->problem(Json("x")), std::string("must be a number, got \"x\""));
    QCOMPARE(*find_setting("optimizer.lr")->problem(Json(5)),
             std::string("must be in (0, 1], got 5"));
    QCOMPARE(*find_setting("grpo.importance")->problem(Json("clamp")),
             std::string("is 'clamp' (allowed: tis, icepop, off)"));
    QCOMPARE(find_setting("grpo.group_size")->allowed(), std::string("a positive whole number"));
    QVERIFY(find_setting("grpo.nope") == nullptr);
    for (const char* k :
         {setting_key::kKlBeta, setting_key::kPromptsPerStep, setting_key::kMiniBatches,
          setting_key::kPrecisionDefault, setting_key::kPrecisionOverrides})
      QVERIFY2(find_setting(k) != nullptr, k);
    Json bad = defaults;
    bad["grpo"]["clip_low"] = 1.0;
    QVERIFY(refusal([&] {
              read_setting(bad, "grpo.clip_low");
            }).contains("setting 'grpo.clip_low' must be in [0, 1), got 1"));
    // The JSON rows carry what the studio's hints show.
    const Json rows = settings_to_json();
    QCOMPARE(rows.as_array().size(), setting_specs().size());
    const Json& lr =
        rows.as_array()[static_cast<size_t>(find_setting("optimizer.lr") - &setting_specs()[0])];
    QCOMPARE(lr.at("live").as_string(), std::string("lr"));
    QCOMPARE(lr.at("max").as_number(), 1.0);
  }

  // Maps of models with experts: the grammar reaches experts and routers, the JSON form and
  // the overrides from a base round-trip, refusals name the layer.
  void mapsWithExperts() {
    PrecisionMap pm({0, 3, 3}, Precision::fp8);  // layers 1 and 2 with 3 experts
    QCOMPARE(pm.router(1), Precision::bf16);
    for (const char* o : {"L1.mlp.experts.*.up=bf16", "2.experts.0.*=bf16", "*.router=fp8",
                          "*.down=bf16", "1.mlp.gate=bf16"})
      apply_precision_override(pm, o);
    QCOMPARE(pm.expert(1, 2, Module::up), Precision::bf16);
    QCOMPARE(pm.expert(2, 0, Module::gate), Precision::bf16);
    QCOMPARE(pm.expert(2, 1, Module::gate), Precision::fp8);
    QCOMPARE(pm.expert(2, 2, Module::down), Precision::bf16);
    QCOMPARE(pm.at(0, Module::down), Precision::bf16);
    QCOMPARE(pm.router(1), Precision::bf16);
    QCOMPARE(pm.router(2), Precision::fp8);
    QVERIFY(!pm.experts_uniform(2, Module::gate));
    QCOMPARE(PrecisionMap::from_json(Json::parse(pm.to_json().dump())), pm);
    PrecisionMap again({0, 3, 3}, Precision::fp8);
    for (const auto& o : pm.overrides_from(Precision::fp8)) apply_precision_override(again, o);
    QCOMPARE(again, pm);
    QCOMPARE(pm.linears().size(), size_t(7 + 2 * (4 + 1 + 9)));
    QVERIFY(refusal([&] {
              apply_precision_override(pm, "0.router=fp8");
            }).contains("layer 0 has no experts"));
    QVERIFY(refusal([&] {
              apply_precision_override(pm, "1.experts.3.up=fp8");
            }).contains("has 3 experts"));
    QVERIFY(refusal([&] {
              PrecisionOverride::parse("1.experts.0.q=bf16");
            }).contains("gate, up and down"));
    QCOMPARE(PrecisionOverride::parse("L3.mlp.experts.*.up=bf16").to_string(),
             std::string("3.experts.*.up=bf16"));
  }

  // DeepSeek-V3's layers: latent attention (q or q_a/q_b, kv_a, kv_b, o) and shared experts
  // beside the routed ones; the grammar reaches them, refuses what the layer lacks, and the JSON
  // form and overrides round-trip.
  void mapsWithLatentAttentionAndSharedExperts() {
    std::vector<LayerShape> shapes(3);
    for (auto& s : shapes) s.latent = s.q_lora = true;
    shapes[1].experts = shapes[2].experts = 2;
    shapes[1].shared_experts = shapes[2].shared_experts = true;
    PrecisionMap pm(shapes, Precision::fp8);
    std::vector<std::string> names;
    for (const LinearSlot& s : pm.linears()) names.push_back(s.name());
    const std::vector<std::string> layer1 = {
        "L1.q_a",    "L1.q_b",     "L1.kv_a",        "L1.kv_b",      "L1.o",
        "L1.router", "L1.e0.gate", "L1.e0.up",       "L1.e0.down",   "L1.e1.gate",
        "L1.e1.up",  "L1.e1.down", "L1.shared.gate", "L1.shared.up", "L1.shared.down"};
    QCOMPARE(std::vector<std::string>(names.begin() + 8, names.begin() + 8 + 15), layer1);
    QCOMPARE(names.size(), size_t(8 + 2 * 15));
    // NeMo RL's MLA exclusion in one line, a shared expert alone, every expert's up.
    for (const char* o : {"*.q_a=bf16", "*.q_b=bf16", "*.kv_a=bf16", "*.kv_b=bf16",
                          "2.shared.down=bf16", "1.up=bf16"})
      apply_precision_override(pm, o);
    QCOMPARE(pm.at(0, Module::kv_b), Precision::bf16);
    QCOMPARE(pm.at(2, Module::o), Precision::fp8);
    QCOMPARE(pm.shared(2, Module::down), Precision::bf16);
    QCOMPARE(pm.shared(1, Module::up), Precision::bf16);  // "every expert's" includes the shared
    QCOMPARE(pm.expert(1, 1, Module::up), Precision::bf16);
    QVERIFY(!pm.experts_uniform(2, Module::down));
    QCOMPARE(LinearSlot({2, Module::down, -1, false, true}).override_text(Precision::bf16),
             std::string("2.shared.down=bf16"));
    QCOMPARE(PrecisionMap::from_json(Json::parse(pm.to_json().dump())), pm);
    PrecisionMap again(shapes, Precision::fp8);
    for (const auto& o : pm.overrides_from(Precision::fp8)) apply_precision_override(again, o);
    QCOMPARE(again, pm);
    QCOMPARE(QString::fromStdString(pm.summary()), QString("fp8 (16 of 36 linears bf16)"));
    QVERIFY(refusal([&] {
              apply_precision_override(pm, "0.k=bf16");
            }).contains("layer 0 has no k linear"));
    QVERIFY(refusal([&] { apply_precision_override(pm, "*.v=bf16"); }).contains("has no v linear"));
    QVERIFY(refusal([&] {
              apply_precision_override(pm, "0.shared.up=bf16");
            }).contains("layer 0 has no experts"));
    QVERIFY(refusal([&] {
              PrecisionOverride::parse("1.shared.q=bf16");
            }).contains("gate, up and down"));
    QCOMPARE(PrecisionOverride::parse("3.mlp.shared_experts.*=bf16").to_string(),
             std::string("3.shared.*=bf16"));
    // Without query compression latent attention has q.
    PrecisionMap plain(std::vector<LayerShape>{{0, false, true, false}}, Precision::fp8);
    std::vector<std::string> plain_names;
    for (const LinearSlot& s : plain.linears()) plain_names.push_back(s.name());
    QCOMPARE(plain_names, (std::vector<std::string>{"L0.q", "L0.kv_a", "L0.kv_b", "L0.o", "L0.gate",
                                                    "L0.up", "L0.down"}));
    QVERIFY(refusal([&] {
              apply_precision_override(plain, "0.q_a=bf16");
            }).contains("has no q_a linear"));
    // NeMo RL's exclusion as one override: the low-rank projections the layer has, nothing else.
    PrecisionMap one(shapes, Precision::fp8);
    apply_precision_override(one, "*.low_rank=bf16");
    PrecisionMap four(shapes, Precision::fp8);
    for (const char* o : {"*.q_a=bf16", "*.q_b=bf16", "*.kv_a=bf16", "*.kv_b=bf16"})
      apply_precision_override(four, o);
    QCOMPARE(one, four);
    QCOMPARE(PrecisionOverride::parse("L1.low_rank=bf16").to_string(),
             std::string("1.low_rank=bf16"));
    apply_precision_override(plain, "0.low_rank=bf16");
    QCOMPARE(plain.at(0, Module::kv_a), Precision::bf16);
    QCOMPARE(plain.at(0, Module::q), Precision::fp8);
    PrecisionMap standard(std::vector<LayerShape>(1), Precision::fp8);
    QVERIFY(refusal([&] {
              apply_precision_override(standard, "*.low_rank=bf16");
            }).contains("the model has no latent attention"));
  }
};

QTEST_APPLESS_MAIN(TestContract)
#include "test_contract.moc"
