#include "contract/live_settings.hpp"

#include <cmath>
#include <cstdio>
#include <utility>

#include "core/error.hpp"

namespace fp8rl {
std::string live_value_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

const std::vector<LiveSetting>& live_settings() {
  // The schema's rows with a live key, in the schema's order (pointers into its static rows).
  static const std::vector<LiveSetting> s = [] {
    std::vector<LiveSetting> live;
    for (const SettingSpec& r : setting_specs())
      if (!r.live.empty())
        live.push_back({r.live.c_str(), r.key.c_str(), r.meaning.c_str(),
                        r.kind == SettingKind::integer, r.lo, r.hi, r.lo_open, r.applies.c_str(),
                        &r});
    return live;
  }();
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
  const std::string shown = std::isfinite(value) ? live_value_text(value) : "a non-finite number";
  const bool below = s->lo_open ? value <= s->lo : value < s->lo;
  if (!std::isfinite(value) || below || value > s->hi)
    return "bad value for " + key + ": " + shown + " (" + s->meaning + ")";
  if (s->integer && value != std::floor(value))
    return "bad value for " + key + ": " + shown + " is not a whole number";
  return std::nullopt;
}

std::optional<std::string> importance_bounds_error(double is_min, double is_max) {
  if (auto e = live_setting_error("is_min", is_min)) return e;
  if (auto e = live_setting_error("is_max", is_max)) return e;
  if (!(is_min < is_max))
    return "importance-weight bounds need is_min < is_max (got is_min " + live_value_text(is_min) +
           ", is_max " + live_value_text(is_max) + ")";
  return std::nullopt;
}

namespace {
// "grpo.is_max" → {"grpo", "is_max"}.
std::pair<std::string, std::string> config_section_name(const LiveSetting& s) {
  const std::string path = s.config_path;
  const size_t dot = path.find('.');
  return {path.substr(0, dot), path.substr(dot + 1)};
}
}  // namespace

std::optional<double> live_setting_in_config(const Json& config, const std::string& key) {
  const LiveSetting* s = find_live_setting(key);
  if (!s || !config.is_object()) return std::nullopt;
  const auto [section, name] = config_section_name(*s);
  if (!config.contains(section) || !config.at(section).is_object() ||
      !config.at(section).contains(name) || !config.at(section).at(name).is_number())
    return std::nullopt;
  return config.at(section).at(name).as_number();
}

void set_live_setting_in_config(Json& config, const std::string& key, double value) {
  const LiveSetting* s = find_live_setting(key);
  check(s != nullptr, "unknown setting \"" + key + "\" (allowed: " + live_setting_keys() + ")");
  const auto [section, name] = config_section_name(*s);
  check(config.is_object() && config.contains(section) && config.at(section).is_object(),
        "the run configuration has no section " + section);
  config[section][name] = value;
}

Json live_setting_event_data(const std::string& key, double value) {
  Json d;
  d["key"] = key;
  d["value"] = value;
  return d;
}

}  // namespace fp8rl
