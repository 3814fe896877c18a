#include "ui/data/autopilot_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "contract/autopilot.hpp"
#include "contract/live_settings.hpp"
#include "contract/metrics.hpp"
#include "contract/settings.hpp"
#include "core/error.hpp"
#include "ui/data/run_data.hpp"

namespace fp8rl::ui {
namespace {

std::string number(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "inf" : "-inf");
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100.0 * share);
  return buf;
}

std::string name(const LinearRef& u) {
  return "L" + std::to_string(u.first) + "." + module_short(u.second);
}

std::string names(const std::vector<LinearRef>& us) {
  std::string s;
  for (const auto& u : us) s += (s.empty() ? "" : ", ") + name(u);
  return s;
}

// The latest value of a scalar, NaN when it has none.
double latest(const RunData& run, const std::string& key) {
  const auto& s = run.series(key);
  return s.empty() ? NAN : s.back().value;
}

// A setting's value in force: the run's (its latest `set` event, else its configuration), else
// the schema's default (a configuration written before the autopilot existed lacks it).
std::optional<LiveValue> settingValue(const RunData& run, const char* key) {
  if (auto v = run.liveValue(key)) return v;
  const LiveSetting* s = find_live_setting(key);
  if (!s || !s->spec) return std::nullopt;
  try {
    return live_value_from_json(s->spec->default_value(), key);
  } catch (const Error&) {
    return std::nullopt;
  }
}

double settingNumber(const RunData& run, const char* key) {
  const auto v = settingValue(run, key);
  return v && std::holds_alternative<double>(*v) ? std::get<double>(*v) : NAN;
}

std::string settingChoice(const RunData& run, const char* key) {
  const auto v = settingValue(run, key);
  return v && std::holds_alternative<std::string>(*v) ? std::get<std::string>(*v) : std::string();
}

std::vector<LinearRef> unitsOf(const Json& data) {
  std::vector<LinearRef> out;
  if (!data.is_object() || !data.contains("units") || !data.at("units").is_array()) return out;
  for (const Json& u : data.at("units").as_array()) {
    if (!u.is_object() || !u.contains("layer") || !u.contains("module") ||
        !u.at("layer").is_number() || !u.at("module").is_string())
      continue;
    if (auto m = parse_module(u.at("module").as_string()))
      out.push_back({static_cast<int64_t>(u.at("layer").as_number()), *m});
  }
  return out;
}

std::string textOf(const Json& data, const char* key) {
  return data.is_object() && data.contains(key) && data.at(key).is_string()
             ? data.at(key).as_string()
             : std::string();
}

double numberOf(const Json& data, const char* key) {
  return data.is_object() && data.contains(key) && data.at(key).is_number()
             ? data.at(key).as_number()
             : NAN;
}

void addUnique(std::vector<LinearRef>& v, const LinearRef& u) {
  if (std::find(v.begin(), v.end(), u) == v.end()) v.push_back(u);
}

}  // namespace

std::vector<PrecisionOverride> precisionEventOverrides(const std::string& message) {
  std::vector<PrecisionOverride> out;
  size_t begin = 0;
  while (begin <= message.size()) {
    size_t end = message.find(',', begin);
    if (end == std::string::npos) end = message.size();
    std::string part = message.substr(begin, end - begin);
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    try {
      if (!part.empty()) out.push_back(PrecisionOverride::parse(part));
    } catch (const Error&) {
      // Not an override (a message of another version): nothing it names is known.
    }
    begin = end + 1;
  }
  return out;
}

AutopilotView autopilotView(const RunData& run) {
  AutopilotView v;
  const auto on = settingValue(run, autopilot::kLive);
  v.on = on && std::holds_alternative<bool>(*on) && std::get<bool>(*on);
  const int64_t layers = run.layers();
  // The linears the layers have (a pattern such as "0.*" pins only those), when the run's map
  // says; otherwise every module.
  std::optional<PrecisionMap> shape;
  try {
    if (const Json p = run.currentPrecision(); p.is_array()) shape = PrecisionMap::from_json(p);
  } catch (const Error&) {
  }
  // Pins: the launch configuration's overrides, then every person's precision edit.
  auto pin = [&](const PrecisionOverride& o) {
    for (int64_t l = 0; l < layers; ++l)
      for (int mi = 0; mi < kModules; ++mi)
        if ((!shape || l >= shape->layers() || shape->has(l, Module(mi))) &&
            autopilot::pins(o, l, Module(mi)))
          addUnique(v.pinned, {l, Module(mi)});
  };
  if (const Json* ov = find_setting_value(run.row.config, setting_key::kPrecisionOverrides);
      ov && ov->is_array())
    for (const Json& o : ov->as_array())
      if (o.is_string()) try {
          pin(PrecisionOverride::parse(o.as_string()));
        } catch (const Error&) {
        }
  const RunStore::EventRow* last = nullptr;
  for (const auto& e : run.events) {
    if (e.event.kind == event::kPrecision) {
      for (const auto& o : precisionEventOverrides(e.event.message)) {
        std::erase_if(v.held,
                      [&](const LinearRef& u) { return autopilot::reaches(o, u.first, u.second); });
        pin(o);
      }
    } else if (e.event.kind == event::kAutopilot) {
      last = &e;
      const std::string action = textOf(e.event.data, "action");
      for (const auto& u : unitsOf(e.event.data)) {
        if (action == autopilot::kActionMove) addUnique(v.held, u);
        if (action == autopilot::kActionReturn) std::erase(v.held, u);
      }
    }
  }

  const std::string metric = settingChoice(run, autopilot::kLiveMetric);
  const double threshold = settingNumber(run, autopilot::kLiveThreshold);
  const double hysteresis = settingNumber(run, autopilot::kLiveHysteresis);
  const double patience = settingNumber(run, autopilot::kLivePatience);
  const double cap = settingNumber(run, autopilot::kLiveBudget);
  const bool flops = settingChoice(run, autopilot::kLiveBudgetUnit) != autopilot::kUnitLinears;
  const double ideal = autopilot::ideal_value(metric);
  const double calm = threshold > ideal ? threshold - hysteresis * (threshold - ideal) : threshold;
  const double value = latest(run, autopilot::kScalarValue);
  const double streak = latest(run, autopilot::kScalarStreak);
  const double cooldown = latest(run, autopilot::kScalarCooldown);
  const double used = latest(run, autopilot::kScalarBudgetUsed);
  const std::string last_action = last ? textOf(last->event.data, "action") : "";
  const int64_t value_step =
      run.series(autopilot::kScalarValue).empty()
          ? -1
          : static_cast<int64_t>(run.series(autopilot::kScalarValue).back().step);

  if (!v.on) {
    v.state = "off";
    v.headline = "Off";
  } else if (last && last->step >= run.last_step &&
             (last_action == autopilot::kActionMove || last_action == autopilot::kActionReturn)) {
    v.state = "acting";
    v.headline = "Acting after step " + std::to_string(last->step) + ": " + last->event.message;
  } else if (last && last_action == autopilot::kActionBlocked && streak >= patience) {
    v.state = "blocked";
    v.headline = "Blocked after step " + std::to_string(last->step) + ": " +
                 textOf(last->event.data, "reason");
  } else if (cooldown > 0) {
    v.state = "cooling down";
    v.headline = "Cooling down: " + number(cooldown) + " more step" + (cooldown == 1 ? "" : "s") +
                 " before it acts again";
    if (std::isfinite(value)) v.headline += " · " + metric + " " + number(value);
  } else {
    v.state = "watching";
    v.headline = "Watching " + metric;
    if (value_step >= 0)
      v.headline += ": " + number(value) + " at step " + std::to_string(value_step);
    v.headline += " (acts above " + number(threshold) + " for " + number(patience) +
                  " steps; calm below " + number(calm) + ")";
    if (std::isfinite(streak) && streak > 0)
      v.headline += " · above it " + number(streak) + " of " + number(patience);
  }
  const std::string unit = flops ? "GEMM FLOPs" : "linears";
  v.budget = v.held.empty() ? "Holds nothing in BF16" : "Holds in BF16: " + names(v.held);
  v.budget += std::isfinite(used)
                  ? " — " + percent(used) + " of its budget of " + percent(cap) + " " + unit
                  : " — budget " + percent(cap) + " of " + unit;
  if (!v.pinned.empty()) {
    v.budget += " · pinned by a person: " + std::to_string(v.pinned.size()) + " linear" +
                (v.pinned.size() == 1 ? "" : "s");
  }
  return v;
}

std::string autopilotEvidenceText(const Json& d) {
  if (!d.is_object()) return {};
  std::string out;
  auto line = [&](const std::string& s) { out += (out.empty() ? "" : "\n") + s; };
  const std::string action = textOf(d, "action");
  line(textOf(d, "message"));
  const double value = numberOf(d, "value"), threshold = numberOf(d, "threshold");
  if (!textOf(d, "metric").empty())
    line(textOf(d, "metric") + " = " + number(value) + " (threshold " + number(threshold) +
         (std::isfinite(numberOf(d, "streak"))
              ? ", above it " + number(numberOf(d, "streak")) + " of " +
                    number(numberOf(d, "patience")) + " steps"
              : std::string()) +
         (std::isfinite(numberOf(d, "calm"))
              ? ", calm " + number(numberOf(d, "calm")) + " of " +
                    number(numberOf(d, "calm_steps")) + " steps below " +
                    number(numberOf(d, "calm_level"))
              : std::string()) +
         ")");
  if (d.contains("ranking") && d.at("ranking").is_array() && !d.at("ranking").as_array().empty()) {
    const bool confirmed =
        d.contains("confirmed") && d.at("confirmed").is_bool() && d.at("confirmed").as_bool();
    line(confirmed ? "candidates (confirmed by the KL with each in BF16):"
                   : "candidates by their FP8 error:");
    for (const Json& r : d.at("ranking").as_array()) {
      std::string s = "  " + textOf(r, "linear") + "  error " + number(numberOf(r, "error")) +
                      " (weight " + number(numberOf(r, "weight")) + ", activation " +
                      number(numberOf(r, "activation")) + ", gradient " +
                      number(numberOf(r, "gradient")) + ")";
      if (std::isfinite(numberOf(r, "kl_if_bf16")))
        s += ", KL in BF16 " + number(numberOf(r, "kl_if_bf16"));
      line(s);
    }
  }
  if (d.contains("budget") && d.at("budget").is_object()) {
    const Json& b = d.at("budget");
    line("budget: " + percent(numberOf(b, "used")) + " → " + percent(numberOf(b, "after")) +
         " of " + percent(numberOf(b, "cap")) + " " +
         (textOf(b, "unit") == autopilot::kUnitFlops ? "GEMM FLOPs" : "linears"));
  }
  if (!textOf(d, "reason").empty()) line("why nothing moved: " + textOf(d, "reason"));
  if (action == autopilot::kActionWithdrawn) line("a person's edit came first");
  return out;
}

}  // namespace fp8rl::ui
