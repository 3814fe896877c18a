#include "contract/live_settings.hpp"

#include <cmath>

namespace fp8rl {

const std::vector<LiveSetting>& live_settings() {
  static const std::vector<LiveSetting> s = {
      {"lr", "optimizer.lr", "learning rate of the policy optimizer (> 0)", false, true},
      {"temperature", "grpo.temperature", "sampling temperature of the rollouts (> 0)", false,
       true},
      {"is_min", "grpo.is_min", "lower importance-weight bound C_min (0 ≤ is_min < is_max)", false,
       false},
      {"is_max", "grpo.is_max", "upper importance-weight bound C (is_min < is_max)", false, false},
      {"validation_every", "validation.every", "steps between validations (0: only at the end)",
       true, false},
  };
  return s;
}

const LiveSetting* find_live_setting(const std::string& key) {
  for (const auto& s : live_settings())
    if (key == s.key) return &s;
  return nullptr;
}

std::string live_setting_keys() {
  std::string out;
  for (const auto& s : live_settings()) out += std::string(out.empty() ? "" : ", ") + s.key;
  return out;
}

std::optional<std::string> live_setting_error(const std::string& key, double value) {
  const LiveSetting* s = find_live_setting(key);
  if (!s) return "unknown setting \"" + key + "\" (allowed: " + live_setting_keys() + ")";
  const std::string shown = std::isfinite(value) ? Json(value).dump() : "a non-finite number";
  if (!std::isfinite(value) || (s->positive ? value <= 0 : value < 0))
    return "bad value for " + key + ": " + shown + " (" + s->meaning + ")";
  if (s->integer && value != std::floor(value))
    return "bad value for " + key + ": " + shown + " is not a whole number";
  return std::nullopt;
}

std::optional<std::string> importance_bounds_error(double is_min, double is_max) {
  if (!(is_min >= 0 && is_min < is_max))
    return "importance-weight bounds need 0 ≤ is_min < is_max (got is_min " + Json(is_min).dump() +
           ", is_max " + Json(is_max).dump() + ")";
  return std::nullopt;
}

std::optional<double> live_setting_in_config(const Json& config, const std::string& key) {
  const LiveSetting* s = find_live_setting(key);
  if (!s || !config.is_object()) return std::nullopt;
  const std::string path = s->config_path;
  const size_t dot = path.find('.');
  const std::string section = path.substr(0, dot), name = path.substr(dot + 1);
  if (!config.contains(section) || !config.at(section).is_object() ||
      !config.at(section).contains(name) || !config.at(section).at(name).is_number())
    return std::nullopt;
  return config.at(section).at(name).as_number();
}

Json live_setting_event_data(const std::string& key, double value) {
  Json d;
  d["key"] = key;
  d["value"] = value;
  return d;
}

}  // namespace fp8rl
