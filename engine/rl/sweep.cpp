#include "rl/sweep.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/yaml.hpp"

namespace fp8rl {
namespace {

constexpr size_t kMaxPoints = 100000;

const std::vector<std::string>& file_keys() {
  static const std::vector<std::string> keys = {"name",   "description", "preset", "config", "set",
                                                "axes",   "points",      "replicate",
                                                "concurrency"};
  return keys;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

std::string sweep_value_text(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_bool()) return v.as_bool() ? "true" : "false";
  if (v.is_string()) return v.as_string();
  if (v.is_number()) {
    char buf[32];  // the shortest text that reads back as the same number: 20, 0.0005, 1e-05
    const auto end = std::to_chars(buf, buf + sizeof buf, v.as_number());
    return std::string(buf, end.ptr);
  }
  if (v.is_array()) {
    std::string s = "[";
    for (const Json& x : v.as_array()) s += (s.size() > 1 ? ", " : "") + sweep_value_text(x);
    return s + "]";
  }
  return v.dump();
}

Json SweepPointSpec::axis_json() const {
  Json::Object o;
  for (const auto& [axis, label] : axis_values) o[axis] = Json(label);
  return Json(std::move(o));
}

SweepSpec SweepSpec::load(const std::string& path) {
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const Error& e) {
    throw Error("sweep file " + path + ": " + e.message());
  }
  return parse(text, path);
}

SweepSpec SweepSpec::parse(const std::string& text, const std::string& source) {
  const std::string where = "sweep file " + (source.empty() ? std::string("(text)") : source);
  auto fail = [&](const std::string& what) -> Error { return Error(where + ": " + what); };
  SweepSpec s;
  s.source = source;
  try {
    s.doc = parse_yaml(text, source.empty() ? "sweep" : source);
  } catch (const Error& e) {
    throw fail(e.message());
  }
  if (!s.doc.is_object()) throw fail("expected a mapping of keys (" + join(file_keys()) + ")");
  for (const auto& [key, value] : s.doc.as_object())
    if (std::find(file_keys().begin(), file_keys().end(), key) == file_keys().end())
      throw fail("unknown key '" + key + "' (allowed: " + join(file_keys()) + ")");
  const auto text_of = [&](const char* key) -> std::string {
    if (!s.doc.contains(key) || s.doc.at(key).is_null()) return "";
    const Json& v = s.doc.at(key);
    if (!v.is_string() && !v.is_number()) throw fail("'" + std::string(key) + "' must be text");
    return sweep_value_text(v);
  };
  s.name = text_of("name");
  if (s.name.empty())
    s.name = source.empty() ? "sweep" : std::filesystem::path(source).stem().string();
  s.preset = text_of("preset");
  s.config_file = text_of("config");
  if (!s.preset.empty() && !s.config_file.empty())
    throw fail("give 'preset' or 'config', not both");
  if (!s.config_file.empty() && !source.empty() &&
      std::filesystem::path(s.config_file).is_relative())
    s.config_file =
        (std::filesystem::path(source).parent_path() / s.config_file).lexically_normal().string();
  if (s.doc.contains("set")) {
    const Json& set = s.doc.at("set");
    if (set.is_string()) {
      s.sets.push_back(set.as_string());
    } else if (set.is_array()) {
      for (const Json& x : set.as_array()) {
        if (!x.is_string()) throw fail("'set' items must be key=value text, got " + x.dump());
        s.sets.push_back(x.as_string());
      }
    } else if (set.is_object()) {  // set: {key: value} in block form
      for (const auto& [k, v] : set.as_object()) s.sets.push_back(k + "=" + sweep_value_text(v));
    } else if (!set.is_null()) {
      throw fail("'set' must be a list of key=value overrides");
    }
  }
  if (s.doc.contains("concurrency") && !s.doc.at("concurrency").is_null()) {
    const Json& c = s.doc.at("concurrency");
    if (!c.is_number() || c.as_number() < 1 || std::floor(c.as_number()) != c.as_number())
      throw fail("'concurrency' must be a whole number ≥ 1, got " + c.dump());
    s.concurrency = static_cast<int64_t>(c.as_number());
  }

  // axes: name → [values] (a configuration key) or name → {label: {key: value, …}} (variants).
  if (s.doc.contains("axes") && !s.doc.at("axes").is_null()) {
    const Json& axes = s.doc.at("axes");
    if (!axes.is_object()) throw fail("'axes' must be a mapping of axis name → values");
    for (const auto& [name, spec] : axes.as_object()) {
      SweepAxis axis;
      axis.name = name;
      if (spec.is_array()) {
        if (spec.as_array().empty()) throw fail("axis '" + name + "' is empty");
        std::set<std::string> seen;
        for (const Json& v : spec.as_array()) {
          if (v.is_object()) throw fail("axis '" + name + "': a value cannot be a mapping");
          const std::string label = sweep_value_text(v);
          if (!seen.insert(label).second)
            throw fail("axis '" + name + "': value '" + label + "' is given twice");
          axis.values.push_back({label, {{name, v}}});
        }
      } else if (spec.is_object()) {
        axis.variant = true;
        if (spec.as_object().empty()) throw fail("axis '" + name + "' is empty");
        for (const auto& [label, settings] : spec.as_object()) {
          if (!settings.is_object() || settings.as_object().empty())
            throw fail("axis '" + name + "' value '" + label +
                       "' must be a mapping of settings (key: value, one a line)");
          SweepAxis::Value value{label, {}};
          for (const auto& [key, v] : settings.as_object()) value.settings.emplace_back(key, v);
          axis.values.push_back(std::move(value));
        }
      } else if (spec.is_null()) {
        throw fail("axis '" + name + "' is empty");
      } else {
        throw fail("axis '" + name + "' must be a list of values or a mapping of named values");
      }
      s.axes.push_back(std::move(axis));
    }
  }

  // points: a list of mappings, each the same keys.
  if (s.doc.contains("points") && !s.doc.at("points").is_null()) {
    const Json& points = s.doc.at("points");
    if (!points.is_array()) throw fail("'points' must be a list of mappings (key: value)");
    if (points.as_array().empty()) throw fail("'points' is empty");
    std::vector<std::string> keys;
    for (size_t i = 0; i < points.as_array().size(); ++i) {
      const Json& p = points.as_array()[i];
      const std::string which = "points: point " + std::to_string(i + 1);
      if (!p.is_object() || p.as_object().empty())
        throw fail(which + " must be a mapping of settings (key: value)");
      std::vector<std::string> these;
      for (const auto& [k, v] : p.as_object()) these.push_back(k);
      if (i == 0) {
        keys = these;
        for (const auto& k : keys) s.points.push_back(SweepAxis{k, false, {}});
      } else if (these != keys) {
        throw fail(which + " names " + join(these) + "; every point names the same keys (" +
                   join(keys) + ")");
      }
      for (size_t k = 0; k < keys.size(); ++k) {
        const Json& v = p.at(keys[k]);
        s.points[k].values.push_back({sweep_value_text(v), {{keys[k], v}}});
      }
    }
    s.point_count = points.as_array().size();
    for (const auto& p : s.points)
      for (const auto& a : s.axes)
        if (a.name == p.name) throw fail("'" + p.name + "' is both an axis and a points key");
  }
  if (s.axes.empty() && s.points.empty()) throw fail("no 'axes' and no 'points': nothing to sweep");

  const std::vector<std::string> names = s.axis_names();
  if (s.doc.contains("replicate") && !s.doc.at("replicate").is_null()) {
    s.replicate = text_of("replicate");
    if (std::find(names.begin(), names.end(), s.replicate) == names.end())
      throw fail("'replicate' names '" + s.replicate + "', which is no axis (axes: " +
                 join(names) + ")");
  } else if (std::find(names.begin(), names.end(), "seed") != names.end()) {
    s.replicate = "seed";
  }
  return s;
}

std::vector<std::string> SweepSpec::axis_names() const {
  std::vector<std::string> out;
  for (const auto& a : axes)
    if (a.name == replicate) out.push_back(a.name);
  for (const auto& p : points) out.push_back(p.name);
  for (const auto& a : axes)
    if (a.name != replicate) out.push_back(a.name);
  return out;
}

std::vector<SweepPointSpec> SweepSpec::expand() const {
  const std::string where = "sweep file " + (source.empty() ? std::string("(text)") : source);
  // The base: preset or file, then `set`, validated once.
  RunConfig base;
  try {
    base = RunConfig::load(preset, config_file, sets);
  } catch (const Error& e) {
    throw Error(where + ": base configuration: " + e.message());
  }
  // Blocks in expansion order (the last varies fastest): the replicate axis, the listed
  // points (taken together), then every other axis.
  struct Block {
    std::vector<const SweepAxis*> axes;  // one for a crossed axis; the points' keys together
    size_t size = 0;
  };
  std::vector<Block> blocks;
  for (const auto& a : axes)
    if (a.name == replicate) blocks.push_back({{&a}, a.values.size()});
  if (!points.empty()) {
    Block b;
    for (const auto& p : points) b.axes.push_back(&p);
    b.size = point_count;
    blocks.push_back(std::move(b));
  }
  for (const auto& a : axes)
    if (a.name != replicate) blocks.push_back({{&a}, a.values.size()});
  size_t total = 1;
  for (const auto& b : blocks) {
    total *= b.size;
    if (total > kMaxPoints)
      throw Error(where + ": more than " + std::to_string(kMaxPoints) + " points");
  }

  std::vector<SweepPointSpec> out;
  out.reserve(total);
  std::vector<size_t> at(blocks.size(), 0);
  for (size_t n = 0; n < total; ++n) {
    SweepPointSpec p;
    p.index = static_cast<int64_t>(n);
    Json point_doc = base.doc;
    std::string label_text;
    for (size_t b = 0; b < blocks.size(); ++b)
      for (const SweepAxis* axis : blocks[b].axes) {
        const SweepAxis::Value& v = axis->values[at[b]];
        p.axis_values.emplace_back(axis->name, v.label);
        label_text += (label_text.empty() ? "" : ", ") + axis->name + "=" + v.label;
        for (const auto& [key, value] : v.settings) {
          p.sets.push_back(key + "=" + sweep_value_text(value));
          try {
            set_setting(point_doc, key, value, "setting");
          } catch (const Error& e) {
            throw Error(where + ": axis '" + axis->name + "' value '" + v.label + "': " +
                        e.message());
          }
        }
      }
    p.name = name;
    for (const auto& [axis, label] : p.axis_values) p.name += " " + axis + "=" + label;
    point_doc["name"] = Json(p.name);
    try {
      p.config = RunConfig::from_json(point_doc);
    } catch (const Error& e) {
      throw Error(where + ": point " + std::to_string(n + 1) + " (" + label_text +
                  "): " + e.message());
    }
    out.push_back(std::move(p));
    for (size_t b = blocks.size(); b-- > 0;) {  // odometer, the last block fastest
      if (++at[b] < blocks[b].size) break;
      at[b] = 0;
    }
  }
  return out;
}

std::string SweepSpec::hash(const std::string& name, const std::vector<SweepPointSpec>& points) {
  Json::Array list;
  for (const auto& p : points) {
    Json::Object o;
    o["axes"] = p.axis_json();
    o["config"] = p.config.doc;
    list.emplace_back(std::move(o));
  }
  Json::Object all;
  all["name"] = Json(name);
  all["points"] = Json(std::move(list));
  const std::string text = Json(std::move(all)).dump();
  // Two CRC-32C over the text and its reverse: 64 bits, enough to tell sweeps apart.
  const uint32_t a = crc32c(text.data(), text.size());
  const std::string rev(text.rbegin(), text.rend());
  const uint32_t b = crc32c(rev.data(), rev.size());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", a, b);
  return buf;
}

}  // namespace fp8rl
