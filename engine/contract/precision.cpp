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

namespace {

constexpr Module kExpertModules[3] = {Module::gate, Module::up, Module::down};

// Index of an expert module (gate 0, up 1, down 2), or -1.
int expert_slot(Module m) {
  return m == Module::gate ? 0 : m == Module::up ? 1 : m == Module::down ? 2 : -1;
}

bool is_mlp(Module m) {
  return expert_slot(m) >= 0;
}

}  // namespace

PrecisionMap::PrecisionMap(int64_t layers, Precision all) {
  check(layers >= 0, "precision map: negative layer count");
  std::array<Precision, kModules> row;
  row.fill(all);
  map_.assign(static_cast<size_t>(layers), row);
  experts_.assign(static_cast<size_t>(layers), {});
  routers_.assign(static_cast<size_t>(layers), all == Precision::fp32 ? all : Precision::bf16);
}

PrecisionMap::PrecisionMap(const std::vector<int64_t>& experts, Precision all, Precision router)
    : PrecisionMap(static_cast<int64_t>(experts.size()), all) {
  for (size_t l = 0; l < experts.size(); ++l) {
    check(experts[l] >= 0, "precision map: negative expert count");
    std::array<Precision, 3> e;
    e.fill(all);
    experts_[l].assign(static_cast<size_t>(experts[l]), e);
    routers_[l] = all == Precision::fp32 ? Precision::fp32 : router;
    // A layer with experts keeps its own gate/up/down entries at one value (they stand for the
    // experts'), so equal maps compare equal however they were made.
    if (experts[l] > 0)
      for (Module m : kExpertModules) map_[l][static_cast<size_t>(m)] = Precision::fp8;
  }
}

void PrecisionMap::check_layer(int64_t layer) const {
  check(layer >= 0 && layer < layers(), "precision map: layer " + std::to_string(layer) +
                                            " out of range (" + std::to_string(layers()) +
                                            " layers)");
}

int64_t PrecisionMap::experts(int64_t layer) const {
  check_layer(layer);
  return static_cast<int64_t>(experts_[static_cast<size_t>(layer)].size());
}

bool PrecisionMap::has_experts() const {
  for (const auto& e : experts_)
    if (!e.empty()) return true;
  return false;
}

Precision PrecisionMap::at(int64_t layer, Module m) const {
  check_layer(layer);
  const auto& ex = experts_[static_cast<size_t>(layer)];
  if (!ex.empty() && is_mlp(m)) {
    check(experts_uniform(layer, m), "precision map: the experts of layer " +
                                         std::to_string(layer) + " differ in " + module_short(m) +
                                         " (ask each expert's)");
    return ex.front()[static_cast<size_t>(expert_slot(m))];
  }
  return map_[static_cast<size_t>(layer)][static_cast<size_t>(m)];
}

void PrecisionMap::set(int64_t layer, Module m, Precision p) {
  check_layer(layer);
  auto& ex = experts_[static_cast<size_t>(layer)];
  if (ex.empty() || !is_mlp(m)) {
    map_[static_cast<size_t>(layer)][static_cast<size_t>(m)] = p;
    return;
  }
  for (auto& e : ex) e[static_cast<size_t>(expert_slot(m))] = p;
}

Precision PrecisionMap::expert(int64_t layer, int64_t e, Module m) const {
  check(e >= 0 && e < experts(layer) && is_mlp(m),
        "precision map: layer " + std::to_string(layer) + " has no expert " + std::to_string(e) +
            " " + module_short(m));
  return experts_[static_cast<size_t>(layer)][static_cast<size_t>(e)]
                 [static_cast<size_t>(expert_slot(m))];
}

void PrecisionMap::set_expert(int64_t layer, int64_t e, Module m, Precision p) {
  check(e >= 0 && e < experts(layer) && is_mlp(m),
        "precision map: layer " + std::to_string(layer) + " has no expert " + std::to_string(e) +
            " " + module_short(m));
  experts_[static_cast<size_t>(layer)][static_cast<size_t>(e)]
          [static_cast<size_t>(expert_slot(m))] = p;
}

bool PrecisionMap::experts_uniform(int64_t layer, Module m) const {
  const auto& ex = experts_[static_cast<size_t>(layer)];
  const size_t s = static_cast<size_t>(expert_slot(m));
  for (const auto& e : ex)
    if (e[s] != ex.front()[s]) return false;
  return true;
}

Precision PrecisionMap::router(int64_t layer) const {
  check(experts(layer) > 0, "precision map: layer " + std::to_string(layer) + " has no router");
  return routers_[static_cast<size_t>(layer)];
}

void PrecisionMap::set_router(int64_t layer, Precision p) {
  check(experts(layer) > 0, "precision map: layer " + std::to_string(layer) + " has no router");
  routers_[static_cast<size_t>(layer)] = p;
}

std::string LinearSlot::name() const {
  const std::string l = "L" + std::to_string(layer) + ".";
  if (router) return l + "router";
  if (expert >= 0) return l + "e" + std::to_string(expert) + "." + module_short(module);
  return l + module_short(module);
}

std::string LinearSlot::override_text(Precision p) const {
  if (router)
    return PrecisionOverride{layer, std::nullopt, p, PrecisionOverride::Target::router}.to_string();
  if (expert >= 0)
    return PrecisionOverride{layer, module, p, PrecisionOverride::Target::experts, expert}
        .to_string();
  return PrecisionOverride{layer, module, p}.to_string();
}

std::vector<LinearSlot> PrecisionMap::linears() const {
  std::vector<LinearSlot> out;
  for (int64_t l = 0; l < layers(); ++l) {
    const int64_t E = experts(l);
    for (int mi = 0; mi < kModules; ++mi)
      if (E == 0 || !is_mlp(Module(mi))) out.push_back({l, Module(mi)});
    if (E == 0) continue;
    out.push_back({l, Module::gate, -1, true});
    for (int64_t e = 0; e < E; ++e)
      for (Module m : kExpertModules) out.push_back({l, m, e});
  }
  return out;
}

Precision PrecisionMap::get(const LinearSlot& s) const {
  if (s.router) return router(s.layer);
  if (s.expert >= 0) return expert(s.layer, s.expert, s.module);
  return at(s.layer, s.module);
}

void PrecisionMap::set(const LinearSlot& s, Precision p) {
  if (s.router)
    set_router(s.layer, p);
  else if (s.expert >= 0)
    set_expert(s.layer, s.expert, s.module, p);
  else
    set(s.layer, s.module, p);
}

namespace {

// Calls f(precision) for every linear of the map (routers included when with_routers).
template <class F>
void for_each_precision(const std::vector<std::array<Precision, kModules>>& map,
                        const std::vector<std::vector<std::array<Precision, 3>>>& experts,
                        const std::vector<Precision>& routers, bool with_routers, F f) {
  for (size_t l = 0; l < map.size(); ++l) {
    const bool moe = !experts[l].empty();
    for (int mi = 0; mi < kModules; ++mi)
      if (!(moe && is_mlp(Module(mi)))) f(map[l][static_cast<size_t>(mi)]);
    for (const auto& e : experts[l])
      for (Precision p : e) f(p);
    if (moe && with_routers) f(routers[l]);
  }
}

}  // namespace

bool PrecisionMap::all_fp32() const {
  bool all = true;
  for_each_precision(map_, experts_, routers_, true,
                     [&](Precision p) { all = all && p == Precision::fp32; });
  return all;
}

void PrecisionMap::validate() const {
  bool any32 = false, other = false;
  for_each_precision(map_, experts_, routers_, true,
                     [&](Precision p) { (p == Precision::fp32 ? any32 : other) = true; });
  check(!(any32 && other),
        "precision map: fp32 cannot be mixed with bf16/fp8 (fp32 is the "
        "all-FP32 reference; use bf16 for layers kept out of FP8)");
}

std::string PrecisionMap::summary() const {
  bool routers_default = true;
  for (size_t l = 0; l < routers_.size(); ++l)
    if (!experts_[l].empty() && routers_[l] != Precision::bf16 && routers_[l] != Precision::fp32)
      routers_default = false;
  std::map<Precision, int> count;
  int total = 0;
  for_each_precision(map_, experts_, routers_, !routers_default, [&](Precision p) {
    ++count[p];
    ++total;
  });
  if (count.size() <= 1) return count.empty() ? "empty" : precision_name(count.begin()->first);
  const int bf16 = count[Precision::bf16];
  return "fp8 (" + std::to_string(bf16) + " of " + std::to_string(total) + " linears bf16)";
}

std::vector<std::string> PrecisionMap::overrides_from(Precision base) const {
  std::vector<std::string> out;
  for (int64_t l = 0; l < layers(); ++l) {
    const auto& ex = experts_[static_cast<size_t>(l)];
    for (int mi = 0; mi < kModules; ++mi) {
      const Module m = Module(mi);
      if (!ex.empty() && is_mlp(m)) continue;
      if (at(l, m) != base) out.push_back(PrecisionOverride{l, m, at(l, m)}.to_string());
    }
    if (ex.empty()) continue;
    for (Module m : kExpertModules) {
      if (experts_uniform(l, m)) {
        if (ex.front()[static_cast<size_t>(expert_slot(m))] != base)
          out.push_back(PrecisionOverride{l, m, expert(l, 0, m)}.to_string());
        continue;
      }
      for (int64_t e = 0; e < static_cast<int64_t>(ex.size()); ++e)
        if (expert(l, e, m) != base)
          out.push_back(PrecisionOverride{l, m, expert(l, e, m),
                                          PrecisionOverride::Target::experts, e}
                            .to_string());
    }
    const Precision router_default = base == Precision::fp32 ? Precision::fp32 : Precision::bf16;
    if (router(l) != router_default)
      out.push_back(PrecisionOverride{l, std::nullopt, router(l),
                                      PrecisionOverride::Target::router}
                        .to_string());
  }
  return out;
}

Json PrecisionMap::to_json() const {
  Json::Array layers_json;
  for (size_t l = 0; l < map_.size(); ++l) {
    Json o(Json::Object{});
    const auto& ex = experts_[l];
    for (int mi = 0; mi < kModules; ++mi)
      if (ex.empty() || !is_mlp(Module(mi)))
        o[module_short(Module(mi))] = precision_name(map_[l][static_cast<size_t>(mi)]);
    if (!ex.empty()) {
      o["router"] = precision_name(routers_[l]);
      Json::Array es;
      for (const auto& e : ex) {
        Json eo(Json::Object{});
        for (Module m : kExpertModules)
          eo[module_short(m)] = precision_name(e[static_cast<size_t>(expert_slot(m))]);
        es.push_back(std::move(eo));
      }
      o["experts"] = Json(std::move(es));
    }
    layers_json.push_back(std::move(o));
  }
  return Json(std::move(layers_json));
}

PrecisionMap PrecisionMap::from_json(const Json& j) {
  const auto& rows = j.as_array("precision map");
  std::vector<int64_t> experts(rows.size(), 0);
  for (size_t l = 0; l < rows.size(); ++l) {
    check(rows[l].is_object(), "precision map layer " + std::to_string(l) + " is not an object");
    if (rows[l].contains("experts"))
      experts[l] = static_cast<int64_t>(
          rows[l].at("experts").as_array("precision map layer " + std::to_string(l) + " experts")
              .size());
  }
  PrecisionMap pm(experts, Precision::fp8);
  for (size_t l = 0; l < rows.size(); ++l) {
    const std::string where = "precision map layer " + std::to_string(l);
    const int64_t L = static_cast<int64_t>(l);
    auto read = [&](const Json& o, const char* key, const std::string& at) {
      check(o.contains(key), at + " has no '" + key + "'");
      return parse_precision(o.at(key).as_string(at + "." + key));
    };
    for (int mi = 0; mi < kModules; ++mi) {
      const Module m = Module(mi);
      if (experts[l] > 0 && is_mlp(m)) continue;
      pm.map_[l][static_cast<size_t>(mi)] = read(rows[l], module_short(m), where);
    }
    if (experts[l] == 0) continue;
    pm.set_router(L, read(rows[l], "router", where));
    const auto& es = rows[l].at("experts").as_array();
    for (size_t e = 0; e < es.size(); ++e) {
      const std::string at = where + " expert " + std::to_string(e);
      check(es[e].is_object(), at + " is not an object");
      for (Module m : kExpertModules)
        pm.set_expert(L, static_cast<int64_t>(e), m, read(es[e], module_short(m), at));
    }
  }
  return pm;
}

namespace {

const char* kGrammar =
    "LAYER.MODULE=PRECISION, LAYER.experts.EXPERT.MODULE=PRECISION or LAYER.router=PRECISION "
    "(e.g. 0.gate=bf16, *.down=bf16, 3.experts.*.up=bf16, *.router=fp8)";

// "3", "L3" or "*": nullopt for *.
std::optional<int64_t> parse_index(const std::string& text, const std::string& what,
                                   const std::string& whole, int64_t bound) {
  if (text == "*") return std::nullopt;
  std::string digits = text;
  if (what == "layer" && !digits.empty() && (digits[0] == 'L' || digits[0] == 'l'))
    digits = digits.substr(1);
  char* end = nullptr;
  const long v = std::strtol(digits.c_str(), &end, 10);
  check(!digits.empty() && *end == '\0' && v >= 0 && (bound < 0 || v < bound),
        "precision override '" + whole + "': " + what + " '" + text + "' is not * or " +
            (bound < 0 ? "an index" : "0…" + std::to_string(bound - 1)));
  return v;
}

}  // namespace

PrecisionOverride PrecisionOverride::parse(const std::string& o, int64_t layers) {
  const size_t eq = o.find('='), dot = o.find('.');
  check(eq != std::string::npos && dot != std::string::npos && dot < eq,
        "precision override '" + o + "' is not " + kGrammar);
  PrecisionOverride out;
  out.precision = parse_precision(o.substr(eq + 1));
  out.layer = parse_index(o.substr(0, dot), "layer", o, layers);
  std::string target = o.substr(dot + 1, eq - dot - 1);
  if (target == "router" || target == "mlp.gate") {
    out.target = Target::router;
    return out;
  }
  if (target.rfind("mlp.", 0) == 0) target = target.substr(4);
  std::string module = target;
  if (target.rfind("experts.", 0) == 0) {
    out.target = Target::experts;
    const std::string rest = target.substr(8);
    const size_t d = rest.find('.');
    check(d != std::string::npos,
          "precision override '" + o + "': experts need EXPERT.MODULE, as in " + kGrammar);
    out.expert = parse_index(rest.substr(0, d), "expert", o, -1);
    module = rest.substr(d + 1);
  }
  if (module != "*") {
    out.module = parse_module(module);
    check(out.module.has_value(), "precision override '" + o + "': module '" + module +
                                      "' is not one of: *, q, k, v, o, gate, up, down (" +
                                      kGrammar + ")");
    check(out.target != Target::experts || is_mlp(*out.module),
          "precision override '" + o + "': an expert has gate, up and down, not " + module);
  }
  return out;
}

std::string PrecisionOverride::to_string() const {
  const std::string l = layer ? std::to_string(*layer) : std::string("*");
  const std::string m = module ? module_short(*module) : "*";
  const std::string p = std::string("=") + precision_name(precision);
  switch (target) {
    case Target::router:
      return l + ".router" + p;
    case Target::experts:
      return l + ".experts." + (expert ? std::to_string(*expert) : std::string("*")) + "." + m + p;
    case Target::module:
      break;
  }
  return l + "." + m + p;
}

void PrecisionOverride::apply(PrecisionMap& pm) const {
  if (layer && *layer >= pm.layers())
    throw Error("precision override " + to_string() + ": the model has " +
                std::to_string(pm.layers()) + " layers (0…" + std::to_string(pm.layers() - 1) + ")");
  if (target != Target::module && layer && pm.experts(*layer) == 0)
    throw Error("precision override " + to_string() + ": layer " + std::to_string(*layer) +
                " has no experts (a dense MLP: use gate, up, down)");
  bool reached = false;
  for (int64_t l = 0; l < pm.layers(); ++l) {
    if (layer && *layer != l) continue;
    const int64_t E = pm.experts(l);
    if (target == Target::router) {
      if (E > 0) pm.set_router(l, precision), reached = true;
      continue;
    }
    if (target == Target::experts) {
      if (E == 0) continue;
      if (expert && *expert >= E)
        throw Error("precision override " + to_string() + ": layer " + std::to_string(l) +
                    " has " + std::to_string(E) + " experts (0…" + std::to_string(E - 1) + ")");
      for (int64_t e = 0; e < E; ++e)
        if (!expert || *expert == e)
          for (Module m : kExpertModules)
            if (!module || *module == m) pm.set_expert(l, e, m, precision), reached = true;
      continue;
    }
    for (int mi = 0; mi < kModules; ++mi)
      if (!module || *module == Module(mi)) pm.set(l, Module(mi), precision), reached = true;
  }
  check(reached || target == Target::module,
        "precision override " + to_string() + ": the model has no experts");
}

void apply_precision_override(PrecisionMap& pm, const std::string& override_text) {
  PrecisionOverride::parse(override_text, pm.layers()).apply(pm);
}

}  // namespace fp8rl
