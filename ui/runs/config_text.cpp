#include "ui/runs/config_text.hpp"

#include <charconv>
#include <cmath>

#include "contract/settings.hpp"

namespace fp8rl::ui {
namespace {

std::string_view trimmed(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

void flatten(const Json& v, const std::string& prefix, std::string& out) {
  if (v.is_object()) {
    for (const auto& [k, x] : v.as_object()) flatten(x, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  if (prefix.empty()) return;
  out += prefix;
  out += '=';
  out += v.is_null() ? std::string("null") : valueText(v, ",");
  out += '\n';
}

}  // namespace

std::string numberText(double d) {
  // Integers up to 2^53 are exact in a double.
  if (std::isfinite(d) && std::floor(d) == d && std::abs(d) < 9007199254740992.0)
    return std::to_string(static_cast<long long>(d));
  const double a = std::abs(d);
  char buf[64];
  const auto format = a >= 1e-5 && a < 1e15 ? std::chars_format::fixed : std::chars_format::general;
  const auto r = std::to_chars(buf, buf + sizeof buf, d, format);
  return std::string(buf, r.ptr);
}

std::optional<double> parseNumber(std::string_view text) {
  text = trimmed(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  double d = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), d);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() || !std::isfinite(d))
    return std::nullopt;
  return d;
}

std::string valueText(const Json& value, std::string_view list_separator) {
  if (value.is_number()) return numberText(value.as_number());
  if (value.is_string()) return value.as_string();
  if (value.is_bool()) return value.as_bool() ? "true" : "false";
  if (value.is_null()) return {};
  if (value.is_array()) {
    std::string out;
    bool first = true;
    for (const Json& x : value.as_array()) {
      if (!first) out += list_separator;
      first = false;
      out += valueText(x, list_separator);
    }
    return out;
  }
  return value.dump();
}

std::string flattenConfig(const Json& config) {
  std::string out;
  flatten(config, std::string(), out);
  return out;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (size_t begin = 0;;) {
    const size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end == std::string_view::npos ? end : end - begin));
    if (end == std::string_view::npos) return parts;
    begin = end + 1;
  }
}

const Json* findSetting(const Json& config, std::string_view key) {
  const Json* cur = &config;
  for (std::string_view part : split(key, '.')) {
    if (!cur->contains(std::string(part))) return nullptr;
    cur = &cur->at(std::string(part));
  }
  return cur;
}

void setSetting(Json& config, std::string_view key, Json value) {
  Json* cur = &config;
  for (std::string_view part : split(key, '.')) {
    if (!cur->is_object()) *cur = Json(Json::Object{});
    cur = &(*cur)[std::string(part)];
  }
  *cur = std::move(value);
}

std::string settingHint(std::string_view key) {
  const std::string k(key);
  const SettingSpec* s = find_setting(k);
  if (!s)
    return k.starts_with("model.")
               ? k + "\nthe model family's config.json field (Hugging Face name)"
               : k;
  std::string hint = k + "\n" + s->meaning;
  if (!s->allowed().empty()) hint += "\nallowed: " + s->allowed();
  hint += "\ndefault: " + valueText(s->default_value());
  if (!s->live.empty()) hint += "\nlive: can change while the run goes on, " + s->applies;
  return hint;
}

FieldKind fieldKind(const Json& value) {
  if (value.is_bool()) return FieldKind::kBool;
  if (value.is_number()) return FieldKind::kNumber;
  if (value.is_array()) return FieldKind::kList;
  if (value.is_null()) return FieldKind::kNullable;
  return FieldKind::kText;
}

Json fieldValue(FieldKind kind, std::string_view text, const Json* original) {
  switch (kind) {
    case FieldKind::kBool:
      return Json(text == "true");
    case FieldKind::kNumber:
      if (const auto d = parseNumber(text)) return Json(*d);
      return Json(std::string(text));
    case FieldKind::kNullable:
      if (trimmed(text).empty()) return Json();
      if (const auto d = parseNumber(text)) return Json(*d);
      return Json(std::string(text));
    case FieldKind::kList: {
      const bool was_list = original && original->is_array() && !original->as_array().empty();
      bool numbers = !was_list;  // nothing to go by: items that read as numbers are numbers
      if (was_list) {
        numbers = true;
        for (const Json& x : original->as_array()) numbers = numbers && x.is_number();
      }
      Json::Array items;
      for (std::string_view part : split(text, ',')) {
        const std::string_view item = trimmed(part);
        if (item.empty()) continue;
        const auto d = numbers ? parseNumber(item) : std::nullopt;
        items.push_back(d ? Json(*d) : Json(std::string(item)));
      }
      return Json(std::move(items));
    }
    case FieldKind::kText:
      break;
  }
  return Json(std::string(text));
}

}  // namespace fp8rl::ui
