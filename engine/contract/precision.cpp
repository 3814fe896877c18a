#include "contract/precision.hpp"

#include <cstdlib>
#include <map>

#include "core/error.hpp"

namespace fp8rl {

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> n = {"fp32", "bf16", "fp8"};
  return n;
}

const char* precision_name(Precision p) {
  return precision_names()[static_cast<size_t>(p)].c_str();
}

Precision parse_precision(const std::string& s) {
  const auto& n = precision_names();
  for (size_t i = 0; i < n.size(); ++i)
    if (s == n[i]) return static_cast<Precision>(i);
  throw Error("unknown precision '" + s + "' (allowed: fp32, bf16, fp8)");
}

const char* module_name(Module m) {
  static const char* n[] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                            "gate_proj", "up_proj", "down_proj"};
  return n[static_cast<int>(m)];
}

const std::vector<std::string>& module_short_names() {
  static const std::vector<std::string> n = {"q", "k", "v", "o", "gate", "up", "down"};
  return n;
}

const char* module_short(Module m) {
  return module_short_names()[static_cast<size_t>(m)].c_str();
}

std::optional<Module> parse_module(const std::string& s) {
  const auto& n = module_short_names();
  for (size_t i = 0; i < n.size(); ++i)
    if (s == n[i]) return static_cast<Module>(i);
  return std::nullopt;
}

PrecisionMap::PrecisionMap(int64_t layers, Precision all) {
  check(layers >= 0, "precision map: negative layer count");
  std::array<Precision, kModules> row;
  row.fill(all);
  map_.assign(static_cast<size_t>(layers), row);
}

Precision PrecisionMap::at(int64_t layer, Module m) const {
  check(layer >= 0 && layer < layers(), "precision map: layer " + std::to_string(layer) +
                                            " out of range (" + std::to_string(layers()) +
                                            " layers)");
  return map_[static_cast<size_t>(layer)][static_cast<size_t>(m)];
}

void PrecisionMap::set(int64_t layer, Module m, Precision p) {
  check(layer >= 0 && layer < layers(), "precision map: layer " + std::to_string(layer) +
                                            " out of range (" + std::to_string(layers()) +
                                            " layers)");
  map_[static_cast<size_t>(layer)][static_cast<size_t>(m)] = p;
}

bool PrecisionMap::all_fp32() const {
  for (const auto& row : map_)
    for (Precision p : row)
      if (p != Precision::fp32) return false;
  return true;
}

void PrecisionMap::validate() const {
  bool any32 = false, other = false;
  for (const auto& row : map_)
    for (Precision p : row) (p == Precision::fp32 ? any32 : other) = true;
  check(!(any32 && other),
        "precision map: fp32 cannot be mixed with bf16/fp8 (fp32 is the "
        "all-FP32 reference; use bf16 for layers kept out of FP8)");
}

std::string PrecisionMap::summary() const {
  std::map<Precision, int> count;
  for (const auto& row : map_)
    for (Precision p : row) ++count[p];
  if (count.size() <= 1) return count.empty() ? "empty" : precision_name(count.begin()->first);
  const int total = static_cast<int>(map_.size()) * kModules;
  const int bf16 = count[Precision::bf16];
  return "fp8 (" + std::to_string(bf16) + " of " + std::to_string(total) + " linears bf16)";
}

std::vector<std::string> PrecisionMap::overrides_from(Precision base) const {
  std::vector<std::string> out;
  for (int64_t l = 0; l < layers(); ++l)
    for (int mi = 0; mi < kModules; ++mi)
      if (at(l, Module(mi)) != base)
        out.push_back(PrecisionOverride{l, Module(mi), at(l, Module(mi))}.to_string());
  return out;
}

Json PrecisionMap::to_json() const {
  Json::Array layers_json;
  for (const auto& row : map_) {
    Json o(Json::Object{});
    for (int mi = 0; mi < kModules; ++mi)
      o[module_short(Module(mi))] = precision_name(row[static_cast<size_t>(mi)]);
    layers_json.push_back(std::move(o));
  }
  return Json(std::move(layers_json));
}

PrecisionMap PrecisionMap::from_json(const Json& j) {
  const auto& rows = j.as_array("precision map");
  PrecisionMap pm(static_cast<int64_t>(rows.size()), Precision::fp8);
  for (size_t l = 0; l < rows.size(); ++l) {
    const std::string where = "precision map layer " + std::to_string(l);
    check(rows[l].is_object(), where + " is not an object");
    for (int mi = 0; mi < kModules; ++mi) {
      const char* m = module_short(Module(mi));
      check(rows[l].contains(m), where + " has no '" + m + "'");
      pm.set(static_cast<int64_t>(l), Module(mi),
             parse_precision(rows[l].at(m).as_string(where + "." + m)));
    }
  }
  return pm;
}

PrecisionOverride PrecisionOverride::parse(const std::string& o, int64_t layers) {
  const size_t eq = o.find('='), dot = o.find('.');
  check(eq != std::string::npos && dot != std::string::npos && dot < eq,
        "precision override '" + o +
            "' is not LAYER.MODULE=PRECISION (e.g. 0.gate=bf16, *.down=bf16)");
  const std::string layer = o.substr(0, dot), module = o.substr(dot + 1, eq - dot - 1);
  PrecisionOverride out;
  out.precision = parse_precision(o.substr(eq + 1));
  if (layer != "*") {
    char* end = nullptr;
    const long v = std::strtol(layer.c_str(), &end, 10);
    check(!layer.empty() && *end == '\0' && v >= 0 && (layers < 0 || v < layers),
          "precision override: layer '" + layer + "' is not * or " +
              (layers < 0 ? std::string("a layer index") : "0…" + std::to_string(layers - 1)));
    out.layer = v;
  }
  if (module != "*") {
    out.module = parse_module(module);
    check(out.module.has_value(), "precision override: module '" + module +
                                      "' is not one of: *, q, k, v, o, gate, up, down");
  }
  return out;
}

std::string PrecisionOverride::to_string() const {
  return (layer ? std::to_string(*layer) : std::string("*")) + "." +
         (module ? module_short(*module) : "*") + "=" + precision_name(precision);
}

void PrecisionOverride::apply(PrecisionMap& pm) const {
  if (layer && *layer >= pm.layers())
    throw Error("precision override " + to_string() + ": the model has " +
                std::to_string(pm.layers()) + " layers (0…" + std::to_string(pm.layers() - 1) + ")");
  for (int64_t l = 0; l < pm.layers(); ++l)
    for (int mi = 0; mi < kModules; ++mi)
      if ((!layer || *layer == l) && (!module || *module == Module(mi))) pm.set(l, Module(mi), precision);
}

void apply_precision_override(PrecisionMap& pm, const std::string& override_text) {
  PrecisionOverride::parse(override_text, pm.layers()).apply(pm);
}

}  // namespace fp8rl
