#include "rl/autopilot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "contract/autopilot.hpp"
#include "core/error.hpp"

namespace fp8rl {
namespace {

constexpr double kEps = 1e-9;        // budget comparisons: shares summed in another order
constexpr size_t kRankingShown = 5;  // candidates named in a decision's evidence

bool is_mlp(Module m) {
  return m == Module::gate || m == Module::up || m == Module::down;
}

// The unit's precision in the map (nullopt: its experts differ).
std::optional<Precision> unit_precision(const PrecisionMap& map, const AutopilotUnit& u) {
  if (u.layer < 0 || u.layer >= map.layers()) return std::nullopt;
  if (map.experts(u.layer) > 0 && is_mlp(u.module) && !map.experts_uniform(u.layer, u.module))
    return std::nullopt;
  return map.at(u.layer, u.module);
}

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100.0 * share);
  return buf;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

Json unit_json(const AutopilotUnit& u) {
  Json j;
  j["layer"] = u.layer;
  j["module"] = module_short(u.module);
  return j;
}

AutopilotUnit unit_from_json(const Json& j) {
  AutopilotUnit u;
  u.layer = j.at("layer").as_int("layer");
  const auto m = parse_module(j.at("module").as_string("module"));
  check(m.has_value(), "autopilot state: unknown module " + j.at("module").dump());
  u.module = *m;
  return u;
}

Json units_json(const std::vector<AutopilotUnit>& us) {
  Json::Array a;
  for (const auto& u : us) a.push_back(unit_json(u));
  return Json(std::move(a));
}

std::vector<AutopilotUnit> units_from_json(const Json& j, const std::string& what) {
  std::vector<AutopilotUnit> out;
  for (const Json& u : j.as_array(what)) out.push_back(unit_from_json(u));
  return out;
}

Json names_json(const std::vector<AutopilotUnit>& us) {
  Json::Array a;
  for (const auto& u : us) a.emplace_back(u.name());
  return Json(std::move(a));
}

std::string names_text(const std::vector<AutopilotUnit>& us) {
  std::string s;
  for (const auto& u : us) s += (s.empty() ? "" : ", ") + u.name();
  return s;
}

// A finite number, or null (JSON has no NaN).
Json finite_or_null(double v) {
  return std::isfinite(v) ? Json(v) : Json();
}

}  // namespace

double AutopilotSettings::calm_level() const {
  const double ideal = autopilot::ideal_value(metric);
  if (!(threshold > ideal)) return threshold;
  return threshold - hysteresis * (threshold - ideal);
}

std::string AutopilotUnit::name() const {
  return "L" + std::to_string(layer) + "." + module_short(module);
}

std::string AutopilotUnit::override_text(Precision p) const {
  return std::to_string(layer) + "." + module_short(module) + "=" + precision_name(p);
}

LiveEdit AutopilotDecision::edit() const {
  LiveEdit e;
  const bool move = action == autopilot::kActionMove;
  if (!move && action != autopilot::kActionReturn) return e;
  for (const auto& u : linears)
    e.add_precision(u.override_text(move ? Precision::bf16 : Precision::fp8));
  return e;
}

Json AutopilotDecision::to_json() const {
  Json j = evidence.is_object() ? evidence : Json(Json::Object{});
  j["action"] = action;
  j["step"] = step;
  j["linears"] = names_json(linears);
  j["units"] = units_json(linears);
  j["message"] = message;
  return j;
}

AutopilotDecision AutopilotDecision::from_json(const Json& j) {
  AutopilotDecision d;
  d.action = j.at("action").as_string("action");
  d.step = j.at("step").as_int("step");
  d.linears = units_from_json(j.at("units"), "units");
  d.message = j.at("message").as_string("message");
  d.evidence = j;
  d.evidence.as_object().erase("units");
  d.evidence.as_object().erase("message");
  return d;
}

PrecisionAutopilot::PrecisionAutopilot(std::vector<AutopilotLinear> linears)
    : linears_(std::move(linears)) {}

double PrecisionAutopilot::weight(const AutopilotUnit& u, bool flops) const {
  double total = 0, mine = 0;
  for (const auto& l : linears_) {
    const double w = flops ? l.flops : 1.0;
    total += w;
    if (l.unit == u) mine = w;
  }
  return total > 0 ? mine / total : 0.0;
}

double PrecisionAutopilot::budget_used(bool flops) const {
  double used = 0;
  for (const auto& h : held_) used += weight(h.unit, flops);
  return used;
}

bool PrecisionAutopilot::is_pinned(const AutopilotUnit& u) const {
  return std::find(pinned_.begin(), pinned_.end(), u) != pinned_.end();
}

void PrecisionAutopilot::person_edit(const PrecisionOverride& o) {
  for (const auto& l : linears_) {
    const AutopilotUnit& u = l.unit;
    if (!autopilot::reaches(o, u.layer, u.module)) continue;
    std::erase_if(held_, [&](const Held& h) { return h.unit == u; });
    if (autopilot::pins(o, u.layer, u.module) && !is_pinned(u)) pinned_.push_back(u);
  }
}

void PrecisionAutopilot::observe(const AutopilotObservation& o, const PrecisionMap& map,
                                 const AutopilotSettings& s, const Confirm& confirm) {
  if (!s.on) {
    streak_ = calm_ = 0;
    blocked_said_ = false;
    if (cooldown_ > 0) --cooldown_;
    return;
  }
  if (!o.value) return;
  if (cooldown_ > 0) {
    --cooldown_;
    streak_ = calm_ = 0;
    return;
  }
  const double v = *o.value;
  if (!(v <= s.threshold)) {  // a NaN counts as above
    ++streak_;
    calm_ = 0;
  } else {
    streak_ = 0;
    blocked_said_ = false;
    calm_ = v < s.calm_level() ? calm_ + 1 : 0;
  }
  if (streak_ >= s.patience) {
    auto d = decide_move(o, map, s, confirm);
    if (d && d->action == autopilot::kActionMove) {
      pending_ = std::move(d);
      cooldown_ = s.cooldown;
      streak_ = 0;
      blocked_said_ = false;
    } else if (d && !blocked_said_) {
      pending_ = std::move(d);
      blocked_said_ = true;
    }
  } else if (s.return_to_fp8 && calm_ >= s.calm_steps) {
    if (auto d = decide_return(o, s)) {
      pending_ = std::move(d);
      cooldown_ = s.cooldown;
      calm_ = 0;
    }
  }
}

std::optional<AutopilotDecision> PrecisionAutopilot::decide_move(const AutopilotObservation& o,
                                                                 const PrecisionMap& map,
                                                                 const AutopilotSettings& s,
                                                                 const Confirm& confirm) {
  using Signal = AutopilotObservation::Signal;
  std::vector<Signal> ranked;
  bool pinned_fp8 = false;
  for (const Signal& sig : o.per_linear) {
    if (unit_precision(map, sig.unit) != Precision::fp8) continue;
    if (is_pinned(sig.unit)) {
      pinned_fp8 = true;
      continue;
    }
    ranked.push_back(sig);
  }
  // Worst first; NaN errors (nothing measured) last; ties keep the model's order.
  std::stable_sort(ranked.begin(), ranked.end(), [](const Signal& a, const Signal& b) {
    const double x = std::isnan(a.error) ? -1.0 : a.error, y = std::isnan(b.error) ? -1.0 : b.error;
    return x > y;
  });
  const double used = budget_used(s.budget_flops);
  const std::string unit = s.budget_flops ? "GEMM FLOPs" : "linears";
  // The candidates the budget leaves room for, each alone; the first few are considered.
  std::vector<Signal> fitting;
  for (const Signal& sig : ranked)
    if (used + weight(sig.unit, s.budget_flops) <= s.budget + kEps) fitting.push_back(sig);
  const size_t considered_n =
      std::min(fitting.size(), static_cast<size_t>(std::max<int64_t>(3, 2 * s.moves)));
  std::vector<Signal> considered(fitting.begin(),
                                 fitting.begin() + static_cast<std::ptrdiff_t>(considered_n));
  std::vector<double> kl(considered.size(), std::numeric_limits<double>::quiet_NaN());
  bool confirmed = false;
  if (s.confirm && confirm && !considered.empty()) {
    std::vector<AutopilotUnit> units;
    for (const auto& c : considered) units.push_back(c.unit);
    const std::vector<double> measured = confirm(units);
    check(measured.size() == considered.size(),
          "autopilot: the confirmation measured " + std::to_string(measured.size()) + " of " +
              std::to_string(considered.size()) + " candidates");
    kl = measured;
    confirmed = true;
    // By the KL left with each in BF16 (lowest first); ties keep the signal's order.
    std::vector<size_t> order(considered.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const double x = std::isnan(kl[a]) ? INFINITY : kl[a],
                   y = std::isnan(kl[b]) ? INFINITY : kl[b];
      return x < y;
    });
    std::vector<Signal> c2;
    std::vector<double> k2;
    for (size_t i : order) {
      c2.push_back(considered[i]);
      k2.push_back(kl[i]);
    }
    considered = std::move(c2);
    kl = std::move(k2);
  }
  std::vector<AutopilotUnit> picks;
  double after = used;
  for (const Signal& c : considered) {
    if (static_cast<int64_t>(picks.size()) >= s.moves) break;
    const double w = weight(c.unit, s.budget_flops);
    if (after + w > s.budget + kEps) continue;
    picks.push_back(c.unit);
    after += w;
  }

  AutopilotDecision d;
  d.step = o.step;
  Json ev;
  ev["metric"] = s.metric;
  ev["value"] = finite_or_null(*o.value);
  ev["threshold"] = s.threshold;
  ev["patience"] = s.patience;
  ev["streak"] = streak_;
  Json::Array ranking;
  // The considered candidates first (in the order they were weighed), then the signal's next.
  std::vector<std::pair<Signal, double>> shown;
  for (size_t i = 0; i < considered.size(); ++i) shown.push_back({considered[i], kl[i]});
  for (const Signal& sig : ranked) {
    if (shown.size() >= kRankingShown) break;
    bool seen = false;
    for (const auto& [c, k] : shown) seen = seen || c.unit == sig.unit;
    if (!seen) shown.push_back({sig, NAN});
  }
  for (const auto& [sig, k] : shown) {
    Json r;
    r["linear"] = sig.unit.name();
    r["error"] = finite_or_null(sig.error);
    r["weight"] = finite_or_null(sig.weight);
    r["activation"] = finite_or_null(sig.activation);
    r["gradient"] = finite_or_null(sig.gradient);
    if (!std::isnan(k)) r["kl_if_bf16"] = k;
    r["budget_share"] = weight(sig.unit, s.budget_flops);
    ranking.push_back(r);
  }
  ev["ranking"] = Json(std::move(ranking));
  ev["confirmed"] = confirmed;
  Json budget;
  budget["unit"] = s.budget_flops ? autopilot::kUnitFlops : autopilot::kUnitLinears;
  budget["cap"] = s.budget;
  budget["used"] = used;
  budget["after"] = after;
  ev["budget"] = budget;
  const std::string why = s.metric + " " + number(*o.value) + " above " + number(s.threshold) +
                          " for " + std::to_string(streak_) + " step" + (streak_ == 1 ? "" : "s");
  if (picks.empty()) {
    d.action = autopilot::kActionBlocked;
    std::string reason;
    if (ranked.empty())
      reason =
          pinned_fp8 ? "every FP8 linear is pinned by a person's edit" : "no linear is left in FP8";
    else
      reason = "the budget is spent: " + percent(used) + " of " + percent(s.budget) + " " + unit +
               " held, and the worst, " + ranked.front().unit.name() + ", needs " +
               percent(weight(ranked.front().unit, s.budget_flops));
    ev["reason"] = reason;
    d.message = "nothing moved (" + why + "): " + reason;
  } else {
    d.action = autopilot::kActionMove;
    d.linears = picks;
    const Signal* first = nullptr;
    for (const auto& c : considered)
      if (c.unit == picks.front()) first = &c;
    std::string detail;
    if (first)
      detail = "; FP8 error " + number(first->error) + " (weight " + number(first->weight) +
               ", activation " + number(first->activation) + ", gradient " +
               number(first->gradient) + ")";
    if (confirmed) detail += ", confirmed by KL";
    d.message = names_text(picks) + " to BF16: " + why + detail + "; budget " + percent(after) +
                " of " + percent(s.budget) + " " + unit;
  }
  Json::Array overrides;
  for (const auto& u : picks) overrides.emplace_back(u.override_text(Precision::bf16));
  ev["overrides"] = Json(std::move(overrides));
  d.evidence = std::move(ev);
  return d;
}

std::optional<AutopilotDecision> PrecisionAutopilot::decide_return(const AutopilotObservation& o,
                                                                   const AutopilotSettings& s) {
  const Held* last = nullptr;
  for (const auto& h : held_)
    if (!h.returned) last = &h;  // the most recent move (held_ is in the order of moves)
  if (!last) return std::nullopt;
  AutopilotDecision d;
  d.action = autopilot::kActionReturn;
  d.step = o.step;
  d.linears = {last->unit};
  Json ev;
  ev["metric"] = s.metric;
  ev["value"] = finite_or_null(*o.value);
  ev["threshold"] = s.threshold;
  ev["calm_level"] = s.calm_level();
  ev["calm"] = calm_;
  ev["calm_steps"] = s.calm_steps;
  ev["held_since"] = last->step;
  Json budget;
  budget["unit"] = s.budget_flops ? autopilot::kUnitFlops : autopilot::kUnitLinears;
  budget["cap"] = s.budget;
  const double used = budget_used(s.budget_flops);
  budget["used"] = used;
  budget["after"] = used - weight(last->unit, s.budget_flops);
  ev["budget"] = budget;
  ev["overrides"] = Json(Json::Array{Json(last->unit.override_text(Precision::fp8))});
  d.evidence = std::move(ev);
  d.message = last->unit.name() + " back to FP8: " + s.metric + " below " + number(s.calm_level()) +
              " for " + std::to_string(calm_) + " steps (held since step " +
              std::to_string(last->step) + ")";
  return d;
}

std::optional<AutopilotDecision> PrecisionAutopilot::take(const PrecisionMap& map) {
  if (!pending_) return std::nullopt;
  AutopilotDecision d = std::move(*pending_);
  pending_.reset();
  const bool move = d.action == autopilot::kActionMove;
  if (!move && d.action != autopilot::kActionReturn) return d;
  const Precision from = move ? Precision::fp8 : Precision::bf16;
  std::vector<AutopilotUnit> keep, dropped;
  for (const auto& u : d.linears) {
    const bool held =
        std::any_of(held_.begin(), held_.end(), [&](const Held& h) { return h.unit == u; });
    const bool ok = !is_pinned(u) && unit_precision(map, u) == from && (move || held);
    (ok ? keep : dropped).push_back(u);
  }
  if (dropped.empty()) return d;
  d.evidence["dropped"] = names_json(dropped);
  if (keep.empty()) {
    d.evidence["was"] = d.action;
    d.action = autopilot::kActionWithdrawn;
    d.evidence["action"] = d.action;
    d.linears = dropped;
    d.message = "withdrawn (" + names_text(dropped) + "): a person's edit reached " +
                (dropped.size() == 1 ? "it" : "them") + " first";
    return d;
  }
  d.linears = keep;
  Json::Array overrides;
  for (const auto& u : keep)
    overrides.emplace_back(u.override_text(move ? Precision::bf16 : Precision::fp8));
  d.evidence["overrides"] = Json(std::move(overrides));
  d.message += " (" + names_text(dropped) + " left out: a person's edit reached " +
               (dropped.size() == 1 ? "it" : "them") + " first)";
  return d;
}

void PrecisionAutopilot::applied(const AutopilotDecision& d) {
  if (d.action == autopilot::kActionMove) {
    for (const auto& u : d.linears) {
      std::erase_if(held_, [&](const Held& h) { return h.unit == u; });
      const bool before = std::find(returned_.begin(), returned_.end(), u) != returned_.end();
      held_.push_back({u, d.step, before});
    }
  } else if (d.action == autopilot::kActionReturn) {
    for (const auto& u : d.linears) {
      std::erase_if(held_, [&](const Held& h) { return h.unit == u; });
      if (std::find(returned_.begin(), returned_.end(), u) == returned_.end())
        returned_.push_back(u);
    }
  }
}

Json PrecisionAutopilot::state_json() const {
  Json j;
  j["streak"] = streak_;
  j["calm"] = calm_;
  j["cooldown"] = cooldown_;
  j["blocked_said"] = blocked_said_;
  Json::Array held;
  for (const auto& h : held_) {
    Json e = unit_json(h.unit);
    e["step"] = h.step;
    e["returned"] = h.returned;
    held.push_back(e);
  }
  j["held"] = Json(std::move(held));
  j["pinned"] = units_json(pinned_);
  j["returned"] = units_json(returned_);
  j["pending"] = pending_ ? pending_->to_json() : Json();
  return j;
}

void PrecisionAutopilot::restore(const Json& j) {
  try {
    check(j.is_object(), "not an object");
    streak_ = j.at("streak").as_int("streak");
    calm_ = j.at("calm").as_int("calm");
    cooldown_ = j.at("cooldown").as_int("cooldown");
    blocked_said_ = j.at("blocked_said").as_bool("blocked_said");
    held_.clear();
    for (const Json& e : j.at("held").as_array("held"))
      held_.push_back(
          {unit_from_json(e), e.at("step").as_int("step"), e.at("returned").as_bool("returned")});
    pinned_ = units_from_json(j.at("pinned"), "pinned");
    returned_ = units_from_json(j.at("returned"), "returned");
    pending_.reset();
    if (!j.at("pending").is_null()) pending_ = AutopilotDecision::from_json(j.at("pending"));
  } catch (const Error& e) {
    throw Error("the autopilot's saved state: " + e.message());
  }
}

std::vector<AutopilotLinear> autopilot_linears(
    const PrecisionMap& map,
    const std::function<std::pair<int64_t, int64_t>(int64_t, Module)>& shape,
    int64_t experts_per_token) {
  std::vector<AutopilotLinear> out;
  for (int64_t l = 0; l < map.layers(); ++l)
    for (int mi = 0; mi < kModules; ++mi) {
      const Module m = Module(mi);
      if (!map.has(l, m)) continue;  // e.g. latent attention's linears in a standard model
      const auto [in, outf] = shape(l, m);
      double flops = 2.0 * static_cast<double>(in) * static_cast<double>(outf);
      if (map.experts(l) > 0 && is_mlp(m)) flops *= static_cast<double>(experts_per_token);
      out.push_back({{l, m}, flops});
    }
  return out;
}

}  // namespace fp8rl
