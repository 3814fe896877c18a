// The precision autopilot's policy on synthetic per_linear (rl/autopilot.hpp): the threshold held
// for N steps, the ranking, the budget, the cooldown, the hysteresis of a return, pins, a
// person's edit winning over a pending decision, confirmation, and its state surviving a
// checkpoint (a resumed policy decides as the uninterrupted one).
#include <QtTest>
#include <cmath>

#include "contract/autopilot.hpp"
#include "core/error.hpp"
#include "rl/autopilot.hpp"

using namespace fp8rl;

namespace {

// The demo model's shapes: hidden 128, 8 query heads and 4 KV heads of 16, intermediate 256.
std::pair<int64_t, int64_t> demo_shape(int64_t, Module m) {
  switch (m) {
    case Module::q:
    case Module::o:
      return {128, 128};
    case Module::k:
    case Module::v:
      return {128, 64};
    case Module::gate:
    case Module::up:
      return {128, 256};
    case Module::down:
      return {256, 128};
    case Module::q_a:  // no latent attention in the demo
    case Module::q_b:
    case Module::kv_a:
    case Module::kv_b:
      break;
  }
  return {0, 0};
}

PrecisionAutopilot make_autopilot() {
  return PrecisionAutopilot(autopilot_linears(PrecisionMap(2, Precision::fp8), demo_shape, 1));
}

AutopilotSettings settings() {
  AutopilotSettings s;
  s.on = true;
  s.metric = autopilot::kWatchPolicyKl;
  s.threshold = 0.05;
  s.patience = 3;
  s.moves = 1;
  s.cooldown = 2;
  s.budget = 0.5;
  s.hysteresis = 0.5;
  return s;
}

// Every linear of both layers with a small error, L1.down and then L0.up worse.
AutopilotObservation observe_step(int64_t step, double value, const PrecisionMap& map) {
  AutopilotObservation o;
  o.step = step;
  o.value = value;
  for (int64_t l = 0; l < 2; ++l)
    for (int mi = 0; mi < kModules; ++mi) {
      const AutopilotUnit u{l, Module(mi)};
      if (!map.has(l, u.module) || map.at(l, u.module) != Precision::fp8) continue;
      double e = 0.03 + 0.001 * mi;
      if (l == 1 && u.module == Module::down) e = 0.6;
      if (l == 0 && u.module == Module::up) e = 0.2;
      o.per_linear.push_back({u, e, e, 0.02, 0.03});
    }
  return o;
}

// Observes a step and, at the boundary, applies what the policy decided; returns the decision.
std::optional<AutopilotDecision> step(PrecisionAutopilot& ap, PrecisionMap& map, int64_t n,
                                      double value, const AutopilotSettings& s,
                                      const PrecisionAutopilot::Confirm& confirm = {}) {
  ap.observe(observe_step(n, value, map), map, s, confirm);
  auto d = ap.take(map);
  if (d) {
    for (const auto& o : d->edit().precision) o.apply(map);
    ap.applied(*d);
  }
  return d;
}

}  // namespace

class TestAutopilot : public QObject {
  Q_OBJECT
 private slots:
  // Three steps in a row above the threshold move the worst FP8 linear, with its evidence; a
  // step at or below it starts the count again.
  void thresholdForNSteps() {
    auto ap = make_autopilot();
    PrecisionMap map(2, Precision::fp8);
    const auto s = settings();
    QVERIFY(!step(ap, map, 1, 0.2, s));
    QVERIFY(!step(ap, map, 2, 0.2, s));
    QVERIFY(!step(ap, map, 3, 0.05, s));  // at the threshold: not above
    QCOMPARE(ap.streak(), int64_t{0});
    QVERIFY(!step(ap, map, 4, 0.2, s));
    QVERIFY(!step(ap, map, 5, 0.2, s));
    const auto d = step(ap, map, 6, 0.3, s);
    QVERIFY(d);
    QCOMPARE(QString::fromStdString(d->action), QString("move"));
    QCOMPARE(d->step, int64_t{6});
    QCOMPARE(d->linears.size(), size_t{1});
    QCOMPARE(QString::fromStdString(d->linears[0].name()), QString("L1.down"));
    QCOMPARE(QString::fromStdString(d->edit().describe()), QString("1.down=bf16"));
    QCOMPARE(map.at(1, Module::down), Precision::bf16);
    const Json& ev = d->evidence;
    QCOMPARE(ev.at("value").as_number(), 0.3);
    QCOMPARE(ev.at("threshold").as_number(), 0.05);
    QCOMPARE(ev.at("streak").as_int(), int64_t{3});
    QCOMPARE(QString::fromStdString(ev.at("ranking").as_array()[0].at("linear").as_string()),
             QString("L1.down"));
    QCOMPARE(ev.at("ranking").as_array()[0].at("error").as_number(), 0.6);
    QCOMPARE(QString::fromStdString(ev.at("ranking").as_array()[1].at("linear").as_string()),
             QString("L0.up"));
    QVERIFY(QString::fromStdString(d->message)
                .startsWith("L1.down to BF16: fp8/policy_kl 0.3 "
                            "above 0.05 for 3 steps"));
    // down is 2·256·128 of the 2·2·147456 FLOPs of both layers: 11%.
    QCOMPARE(ap.budget_used(true), 65536.0 / 589824.0);
    QCOMPARE(ap.held().size(), size_t{1});
    // A NaN metric counts as above (it is not a calm run).
    auto b = make_autopilot();
    PrecisionMap m2(2, Precision::fp8);
    for (int64_t n = 1; n <= 2; ++n) QVERIFY(!step(b, m2, n, NAN, s));
    QVERIFY(step(b, m2, 3, NAN, s));
    // Switched off, nothing counts; a step without the metric neither.
    auto c = make_autopilot();
    PrecisionMap m3(2, Precision::fp8);
    auto off = s;
    off.on = false;
    for (int64_t n = 1; n <= 5; ++n) QVERIFY(!step(c, m3, n, 1.0, off));
    QCOMPARE(c.streak(), int64_t{0});
    AutopilotObservation none = observe_step(6, 0, m3);
    none.value.reset();
    c.observe(none, m3, s);
    QCOMPARE(c.streak(), int64_t{0});
  }

  // After an action it only watches for `cooldown` steps; then the next worst goes.
  void cooldownThenTheNextWorst() {
    auto ap = make_autopilot();
    PrecisionMap map(2, Precision::fp8);
    auto s = settings();
    for (int64_t n = 1; n <= 2; ++n) step(ap, map, n, 0.2, s);
    QVERIFY(step(ap, map, 3, 0.2, s));
    QCOMPARE(ap.cooldown(), int64_t{2});
    for (int64_t n = 4; n <= 5; ++n) QVERIFY(!step(ap, map, n, 0.2, s));  // cooling down
    QCOMPARE(ap.streak(), int64_t{0});
    for (int64_t n = 6; n <= 7; ++n) QVERIFY(!step(ap, map, n, 0.2, s));
    const auto d = step(ap, map, 8, 0.2, s);
    QVERIFY(d);
    QCOMPARE(QString::fromStdString(d->linears[0].name()), QString("L0.up"));
    // Two moves per action take the two worst at once.
    auto two = make_autopilot();
    PrecisionMap m2(2, Precision::fp8);
    s.moves = 2;
    for (int64_t n = 1; n <= 2; ++n) step(two, m2, n, 0.2, s);
    const auto both = step(two, m2, 3, 0.2, s);
    QCOMPARE(QString::fromStdString(both->edit().describe()), QString("1.down=bf16, 0.up=bf16"));
  }

  // The budget caps what it holds: in FLOPs, L1.down (11%) fits 0.15 but L0.up (11%) then does
  // not, and the next worst that fits (a q, k or v) goes instead; below every candidate's share
  // it says once that it is blocked, and again only after a calm step.
  void budget() {
    auto ap = make_autopilot();
    PrecisionMap map(2, Precision::fp8);
    auto s = settings();
    s.budget = 0.15;
    s.cooldown = 0;
    s.patience = 1;
    QCOMPARE(QString::fromStdString(step(ap, map, 1, 0.2, s)->linears[0].name()),
             QString("L1.down"));
    const auto d = step(ap, map, 2, 0.2, s);
    QCOMPARE(QString::fromStdString(d->action), QString("move"));
    QVERIFY(d->linears[0].name() != "L0.up");
    QVERIFY(ap.budget_used(true) <= 0.15);
    // In linears: 2 of 14 fit 0.15, a third does not.
    auto byn = make_autopilot();
    PrecisionMap m2(2, Precision::fp8);
    s.budget_flops = false;
    QVERIFY(step(byn, m2, 1, 0.2, s));
    QVERIFY(step(byn, m2, 2, 0.2, s));
    const auto blocked = step(byn, m2, 3, 0.2, s);
    QCOMPARE(QString::fromStdString(blocked->action), QString("blocked"));
    QVERIFY(blocked->edit().empty());
    QVERIFY(QString::fromStdString(blocked->evidence.at("reason").as_string())
                .startsWith("the budget is spent: 14% of 15% linears held"));
    QVERIFY(!step(byn, m2, 4, 0.2, s));  // said once
    QVERIFY(!step(byn, m2, 5, 0.01, s));
    QCOMPARE(QString::fromStdString(step(byn, m2, 6, 0.2, s)->action), QString("blocked"));
    // A budget of 0 moves nothing.
    auto zero = make_autopilot();
    PrecisionMap m3(2, Precision::fp8);
    s.budget = 0;
    QCOMPARE(QString::fromStdString(step(zero, m3, 1, 0.2, s)->action), QString("blocked"));
  }

  // A person's edit pins what it names: the autopilot never moves it, and when a person pins
  // everything it says so; a whole-map override pins nothing but takes back what it held.
  void pins() {
    auto ap = make_autopilot();
    PrecisionMap map(2, Precision::fp8);
    auto s = settings();
    s.patience = 1;
    s.cooldown = 0;
    ap.person_edit(PrecisionOverride::parse("1.down=fp8"));
    QVERIFY(ap.is_pinned({1, Module::down}));
    QCOMPARE(QString::fromStdString(step(ap, map, 1, 0.2, s)->linears[0].name()), QString("L0.up"));
    ap.person_edit(PrecisionOverride::parse("*.*=fp8"));  // a new default: pins nothing
    for (const auto& o : std::vector<std::string>{"*.*=fp8"}) apply_precision_override(map, o);
    QVERIFY(ap.held().empty());
    QVERIFY(!ap.is_pinned({0, Module::up}));
    auto all = make_autopilot();
    PrecisionMap m2(2, Precision::fp8);
    all.person_edit(PrecisionOverride::parse("*.*=fp8"));
    all.person_edit(PrecisionOverride::parse("0.*=fp8"));
    all.person_edit(PrecisionOverride::parse("1.*=fp8"));
    const auto d = step(all, m2, 1, 0.2, s);
    QCOMPARE(QString::fromStdString(d->action), QString("blocked"));
    QCOMPARE(QString::fromStdString(d->evidence.at("reason").as_string()),
             QString("every FP8 linear is pinned by a person's edit"));
    // An expert override pins its module; a router override pins nothing of the autopilot's.
    auto e = make_autopilot();
    e.person_edit(PrecisionOverride::parse("*.router=bf16"));
    QVERIFY(e.pinned().empty());
  }

  // A person's edit reaching a linear between the decision and the boundary wins: the decision
  // is withdrawn (or keeps only the linears the person left alone).
  void aPersonsEditWins() {
    auto ap = make_autopilot();
    PrecisionMap map(2, Precision::fp8);
    auto s = settings();
    s.moves = 2;
    for (int64_t n = 1; n <= 3; ++n) ap.observe(observe_step(n, 0.2, map), map, s);
    QVERIFY(ap.pending());
    // At the boundary the person's edit applies first.
    const auto pe = PrecisionOverride::parse("1.down=bf16");
    pe.apply(map);
    ap.person_edit(pe);
    const auto d = ap.take(map);
    QCOMPARE(QString::fromStdString(d->action), QString("move"));
    QCOMPARE(QString::fromStdString(d->edit().describe()), QString("0.up=bf16"));
    QVERIFY(QString::fromStdString(d->message).contains("L1.down left out"));
    ap.applied(*d);
    QVERIFY(!ap.pending());
    // Every linear of the decision edited by the person: withdrawn, nothing to apply.
    auto b = make_autopilot();
    PrecisionMap m2(2, Precision::fp8);
    s.moves = 1;
    for (int64_t n = 1; n <= 3; ++n) b.observe(observe_step(n, 0.2, m2), m2, s);
    b.person_edit(PrecisionOverride::parse("1.*=fp8"));
    const auto w = b.take(m2);
    QCOMPARE(QString::fromStdString(w->action), QString("withdrawn"));
    QVERIFY(w->edit().empty());
    QCOMPARE(QString::fromStdString(w->evidence.at("was").as_string()), QString("move"));
  }

  // With return_to_fp8, a calm period (below the threshold by the hysteresis) returns the last
  // linear moved; a step between the calm level and the threshold is not calm; a linear moved
  // again after a return stays.
  void returnsAfterACalmPeriod() {
    auto ap = make_autopilot();
    PrecisionMap map(2, Precision::fp8);
    auto s = settings();
    s.return_to_fp8 = true;
    s.calm_steps = 3;
    s.cooldown = 0;
    s.patience = 1;
    QCOMPARE(s.calm_level(), 0.025);
    QVERIFY(step(ap, map, 1, 0.2, s));  // L1.down to BF16
    QVERIFY(!step(ap, map, 2, 0.01, s));
    QVERIFY(!step(ap, map, 3, 0.03, s));  // below the threshold, above the calm level
    QCOMPARE(ap.calm(), int64_t{0});
    QVERIFY(!step(ap, map, 4, 0.01, s));
    QVERIFY(!step(ap, map, 5, 0.01, s));
    const auto r = step(ap, map, 6, 0.01, s);
    QCOMPARE(QString::fromStdString(r->action), QString("return"));
    QCOMPARE(QString::fromStdString(r->edit().describe()), QString("1.down=fp8"));
    QCOMPARE(map.at(1, Module::down), Precision::fp8);
    QVERIFY(ap.held().empty());
    // It hurts again: moved again, and now it stays.
    QCOMPARE(QString::fromStdString(step(ap, map, 7, 0.2, s)->linears[0].name()),
             QString("L1.down"));
    QVERIFY(ap.held()[0].returned);
    for (int64_t n = 8; n <= 20; ++n) QVERIFY(!step(ap, map, n, 0.0, s));
    QCOMPARE(map.at(1, Module::down), Precision::bf16);
    // token_mult_prob_error's ideal is 1: the calm level lies between 1 and the threshold.
    s.metric = autopilot::kWatchTokenMultProbError;
    s.threshold = 1.05;
    QCOMPARE(s.calm_level(), 1.025);
  }

  // Confirmation re-ranks the candidates by the KL left with each in BF16.
  void confirmation() {
    auto ap = make_autopilot();
    PrecisionMap map(2, Precision::fp8);
    auto s = settings();
    s.confirm = true;
    std::vector<AutopilotUnit> asked;
    const PrecisionAutopilot::Confirm kl = [&](const std::vector<AutopilotUnit>& us) {
      asked = us;
      std::vector<double> v;
      for (const auto& u : us) v.push_back(u.module == Module::up ? 0.001 : 0.04);
      return v;
    };
    for (int64_t n = 1; n <= 2; ++n) step(ap, map, n, 0.2, s, kl);
    const auto d = step(ap, map, 3, 0.2, s, kl);
    QCOMPARE(asked.size(), size_t{3});  // the three worst by the signal
    QCOMPARE(QString::fromStdString(asked[0].name()), QString("L1.down"));
    QCOMPARE(QString::fromStdString(d->linears[0].name()), QString("L0.up"));
    QVERIFY(d->evidence.at("confirmed").as_bool());
    QCOMPARE(d->evidence.at("ranking").as_array()[0].at("kl_if_bf16").as_number(), 0.001);
  }

  // Its state in a checkpoint: restored into a fresh policy (the model's linears known again),
  // it decides at every later step exactly as the uninterrupted one.
  void resumeDecidesAsTheUninterruptedRun() {
    auto s = settings();
    s.return_to_fp8 = true;
    s.calm_steps = 2;
    s.cooldown = 1;
    const std::vector<double> values = {0.2, 0.2, 0.2, 0.2, 0.2, 0.01, 0.01, 0.01, 0.2,
                                        0.2, 0.2, 0.3, 0.3, 0.3, 0.01, 0.01, 0.01, 0.01};
    auto whole = make_autopilot();
    whole.person_edit(PrecisionOverride::parse("0.q=fp8"));
    PrecisionMap wmap(2, Precision::fp8);
    std::vector<std::string> want;
    for (size_t i = 0; i < values.size(); ++i) {
      const auto d = step(whole, wmap, int64_t(i) + 1, values[i], s);
      want.push_back(d ? d->to_json().dump() : "-");
    }
    for (size_t cut = 1; cut < values.size(); ++cut) {
      auto first = make_autopilot();
      first.person_edit(PrecisionOverride::parse("0.q=fp8"));
      PrecisionMap map(2, Precision::fp8);
      std::vector<std::string> got;
      for (size_t i = 0; i < cut; ++i) {
        // The checkpoint after step `cut` is written before its boundary: the decision of that
        // step is still pending in the saved state.
        first.observe(observe_step(int64_t(i) + 1, values[i], map), map, s);
        if (i + 1 == cut) break;
        auto d = first.take(map);
        if (d) {
          for (const auto& o : d->edit().precision) o.apply(map);
          first.applied(*d);
        }
        got.push_back(d ? d->to_json().dump() : "-");
      }
      const Json saved = Json::parse(first.state_json().dump());
      auto resumed = make_autopilot();
      resumed.restore(saved);
      QCOMPARE(resumed.state_json().dump(), saved.dump());
      auto d = resumed.take(map);
      if (d) {
        for (const auto& o : d->edit().precision) o.apply(map);
        resumed.applied(*d);
      }
      got.push_back(d ? d->to_json().dump() : "-");
      for (size_t i = cut; i < values.size(); ++i) {
        const auto e = step(resumed, map, int64_t(i) + 1, values[i], s);
        got.push_back(e ? e->to_json().dump() : "-");
      }
      QCOMPARE(got, want);
      QVERIFY(resumed.is_pinned({0, Module::q}));
    }
    auto bad = make_autopilot();
    bool threw = false;
    try {
      bad.restore(Json::parse(R"({"streak": 1})"));
    } catch (const Error& e) {
      threw = QString::fromStdString(e.message()).startsWith("the autopilot's saved state");
    }
    QVERIFY(threw);
  }
};

QTEST_APPLESS_MAIN(TestAutopilot)
#include "test_autopilot.moc"
