#include "contract/live_settings.hpp"

#include <cmath>
#include <cstdio>
#include <utility>

#include "core/error.hpp"

namespace fp8rl {
std::string live_value_text(const LiveValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const std::string* s = std::get_if<std::string>(&value)) return *s;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", std::get<double>(value));
  return buf;
}

Json live_value_json(const LiveValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return Json(*b);
  if (const std::string* s = std::get_if<std::string>(&value)) return Json(*s);
  return Json(std::get<double>(value));
}

LiveValue live_value_from_json(const Json& j, const std::string& what) {
  if (j.is_number()) return j.as_number();
  if (j.is_bool()) return j.as_bool();
  if (j.is_string()) return j.as_string();
  throw Error(what + " needs a number, true/false or a name, not " + std::string(j.type_name()));
}

const std::vector<LiveSetting>& live_settings() {
  // The schema's rows with a live key, in the schema's order (pointers into its static rows).
  static const std::vector<LiveSetting> s = [] {
    std::vector<LiveSetting> live;
    for (const SettingSpec& r : setting_specs())
      if (!r.live.empty())
        live.push_back({r.live.c_str(), r.key.c_str(), r.meaning.c_str(),
                        r.kind == SettingKind::integer, r.lo, r.hi, r.lo_open, r.applies.c_str(),
                        &r, r.kind});
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

std::optional<std::string> live_setting_error(const std::string& key, const LiveValue& v) {
  const LiveSetting* s = find_live_setting(key);
  if (!s) return "unknown setting \"" + key + "\" (allowed: " + live_setting_keys() + ")";
  if (s->kind == SettingKind::boolean || s->kind == SettingKind::choice) {
    // The schema's row says what is allowed ("must be true or false", "is 'x' (allowed: …)").
    if (auto p = s->spec->problem(live_value_json(v)))
      return "bad value for " + key + ": " + live_value_text(v) + " " + *p;
    return std::nullopt;
  }
  if (!std::holds_alternative<double>(v))
    return "bad value for " + key + ": " + live_value_text(v) + " is not a number (" + s->meaning +
           ")";
  const double value = std::get<double>(v);
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

std::optional<LiveValue> live_setting_in_config(const Json& config, const std::string& key) {
  const LiveSetting* s = find_live_setting(key);
  if (!s || !config.is_object()) return std::nullopt;
  const auto [section, name] = config_section_name(*s);
  if (!config.contains(section) || !config.at(section).is_object() ||
      !config.at(section).contains(name))
    return std::nullopt;
  const Json& v = config.at(section).at(name);
  const bool number = s->kind == SettingKind::integer || s->kind == SettingKind::number;
  if (number && v.is_number()) return v.as_number();
  if (s->kind == SettingKind::boolean && v.is_bool()) return v.as_bool();
  if (s->kind == SettingKind::choice && v.is_string()) return v.as_string();
  return std::nullopt;
}

void set_live_setting_in_config(Json& config, const std::string& key, const LiveValue& value) {
  const LiveSetting* s = find_live_setting(key);
  check(s != nullptr, "unknown setting \"" + key + "\" (allowed: " + live_setting_keys() + ")");
  const auto [section, name] = config_section_name(*s);
  check(config.is_object() && config.contains(section) && config.at(section).is_object(),
        "the run configuration has no section " + section);
  config[section][name] = live_value_json(value);
}

Json live_setting_event_data(const std::string& key, const LiveValue& value) {
  Json d;
  d["key"] = key;
  d["value"] = live_value_json(value);
  return d;
}

}  // namespace fp8rl
