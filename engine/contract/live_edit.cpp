#include "contract/live_edit.hpp"

#include "core/error.hpp"

namespace fp8rl {
namespace {

size_t setting_index(const LiveSetting* s) {
  return static_cast<size_t>(s - live_settings().data());
}

const LiveSetting& setting_or_throw(const std::string& key) {
  const LiveSetting* s = find_live_setting(key);
  if (!s) throw Error("unknown setting \"" + key + "\" (allowed: " + live_setting_keys() + ")");
  return *s;
}

}  // namespace

void LiveEdit::add_precision(const std::string& override_text) {
  precision.push_back(PrecisionOverride::parse(override_text));
}

void LiveEdit::set(const std::string& key, const LiveValue& v) {
  if (auto e = live_setting_error(key, v)) throw Error(*e);
  const LiveSetting* s = &setting_or_throw(key);
  for (auto& sv : settings)
    if (sv.setting == s) {
      sv.value = v;
      return;
    }
  settings.push_back({s, v});
}

std::optional<double> LiveEdit::value(const std::string& key) const {
  const auto v = get(key);
  if (!v || !std::holds_alternative<double>(*v)) return std::nullopt;
  return std::get<double>(*v);
}

std::optional<LiveValue> LiveEdit::get(const std::string& key) const {
  for (const auto& sv : settings)
    if (key == sv.setting->key) return sv.value;
  return std::nullopt;
}

void LiveEdit::merge(const LiveEdit& later) {
  precision.insert(precision.end(), later.precision.begin(), later.precision.end());
  for (const auto& sv : later.settings) set(sv.setting->key, sv.value);
}

std::string LiveEdit::describe() const {
  std::string out;
  for (const auto& o : precision) out += (out.empty() ? "" : ", ") + o.to_string();
  for (const auto& sv : settings)
    out += (out.empty() ? "" : ", ") + std::string(sv.setting->key) + " = " +
           live_value_text(sv.value);
  return out;
}

Json LiveEdit::to_json() const {
  Json j(Json::Object{});
  if (!precision.empty()) {
    Json::Array p;
    for (const auto& o : precision) p.emplace_back(o.to_string());
    j["precision"] = Json(std::move(p));
  }
  if (!settings.empty()) {
    Json s(Json::Object{});
    for (const auto& sv : settings) s[sv.setting->key] = live_value_json(sv.value);
    j["settings"] = std::move(s);
  }
  return j;
}

LiveEdit LiveEdit::from_json(const Json& j) {
  check(j.is_object(), "a live edit must be a JSON object with \"precision\" and/or \"settings\"");
  for (const auto& [k, v] : j.as_object()) {
    (void)v;
    check(k == "precision" || k == "settings",
          "a live edit has \"precision\" (a list of LAYER.MODULE=PRECISION) and \"settings\" "
          "(an object of values), not \"" +
              k + "\"");
  }
  LiveEdit e;
  if (j.contains("precision")) {
    const Json& p = j.at("precision");
    check(p.is_array(),
          "\"precision\" must be a list like [\"0.gate=bf16\"], not " + std::string(p.type_name()));
    for (const auto& o : p.as_array()) {
      check(o.is_string(), "\"precision\" items must be strings like \"0.gate=bf16\"");
      e.add_precision(o.as_string());
    }
  }
  if (j.contains("settings")) {
    const Json& s = j.at("settings");
    check(s.is_object(), "\"settings\" must be an object like {\"lr\": 0.0001}, not " +
                             std::string(s.type_name()));
    for (const auto& [key, v] : s.as_object())
      e.set(key, live_value_from_json(v, "setting \"" + key + "\""));
  }
  check(!e.empty(), "the live edit changes nothing (no precision overrides, no settings)");
  return e;
}

const LiveValue& LiveState::get(const std::string& key) const {
  const size_t i = setting_index(&setting_or_throw(key));
  check(i < values.size(), "live state: no value for " + key);
  return values[i];
}

double LiveState::value(const std::string& key) const {
  const LiveValue& v = get(key);
  check(std::holds_alternative<double>(v), "live state: " + key + " is not a number");
  return std::get<double>(v);
}

bool LiveState::flag(const std::string& key) const {
  const LiveValue& v = get(key);
  check(std::holds_alternative<bool>(v), "live state: " + key + " is not true or false");
  return std::get<bool>(v);
}

const std::string& LiveState::choice(const std::string& key) const {
  const LiveValue& v = get(key);
  check(std::holds_alternative<std::string>(v), "live state: " + key + " is not a choice");
  return std::get<std::string>(v);
}

void LiveState::apply(const LiveEdit& e) {
  LiveState next = *this;
  for (const auto& o : e.precision) o.apply(next.precision);
  next.precision.validate();
  for (const auto& sv : e.settings) {
    if (auto err = live_setting_error(sv.setting->key, sv.value)) throw Error(*err);
    next.values[setting_index(sv.setting)] = sv.value;
  }
  if (auto err = importance_bounds_error(next.value("is_min"), next.value("is_max")))
    throw Error(*err);
  *this = std::move(next);
}

Json LiveState::to_json() const {
  Json j;
  j["precision"] = precision.to_json();
  Json s(Json::Object{});
  for (size_t i = 0; i < live_settings().size(); ++i)
    s[live_settings()[i].key] = live_value_json(values.at(i));
  j["settings"] = std::move(s);
  return j;
}

LiveState LiveState::from_json(const Json& j) {
  check(j.is_object() && j.contains("precision") && j.contains("settings"),
        "live state: needs \"precision\" (a map) and \"settings\" (an object)");
  LiveState st;
  st.precision = PrecisionMap::from_json(j.at("precision"));
  const Json& s = j.at("settings");
  check(s.is_object(), "live state: \"settings\" must be an object");
  for (const auto& row : live_settings()) {
    const std::string what = std::string("live state: setting \"") + row.key + "\"";
    const LiveValue v = s.contains(row.key) ? live_value_from_json(s.at(row.key), what)
                                            : live_value_from_json(row.spec->default_value(), what);
    if (auto err = live_setting_error(row.key, v)) throw Error("live state: " + *err);
    st.values.push_back(v);
  }
  return st;
}

LiveState LiveState::from_config(const Json& config, PrecisionMap precision) {
  LiveState st;
  st.precision = std::move(precision);
  for (const auto& row : live_settings()) {
    const auto v = live_setting_in_config(config, row.key);
    check(v.has_value(), std::string("the run configuration has no ") + row.config_path);
    st.values.push_back(*v);
  }
  return st;
}

void LiveState::write_settings(Json& config) const {
  for (size_t i = 0; i < live_settings().size(); ++i)
    set_live_setting_in_config(config, live_settings()[i].key, values.at(i));
}

}  // namespace fp8rl
