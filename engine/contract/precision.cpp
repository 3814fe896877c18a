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
  static const char* n[] = {"q_proj",   "k_proj",    "v_proj",   "o_proj",   "gate_proj",
                            "up_proj",  "down_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
                            "kv_b_proj"};
  return n[static_cast<int>(m)];
}

const std::vector<std::string>& module_short_names() {
  static const std::vector<std::string> n = {"q",    "k",   "v",   "o",    "gate", "up",
                                             "down", "q_a", "q_b", "kv_a", "kv_b"};
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

// A layer's attention linears in Hugging Face order.
std::vector<Module> attention_modules(const LayerShape& s) {
  if (!s.latent) return {Module::q, Module::k, Module::v, Module::o};
  if (s.q_lora) return {Module::q_a, Module::q_b, Module::kv_a, Module::kv_b, Module::o};
  return {Module::q, Module::kv_a, Module::kv_b, Module::o};
}

}  // namespace

bool is_attention_module(Module m) {
  return !is_mlp(m);
}

bool LayerShape::has(Module m) const {
  switch (m) {
    case Module::gate:
    case Module::up:
    case Module::down:
      return experts == 0;
    case Module::q:
      return !latent || !q_lora;
    case Module::k:
    case Module::v:
      return !latent;
    case Module::o:
      return true;
    case Module::q_a:
    case Module::q_b:
      return latent && q_lora;
    case Module::kv_a:
    case Module::kv_b:
      return latent;
  }
  return false;
}

PrecisionMap::PrecisionMap(int64_t layers, Precision all)
    : PrecisionMap(std::vector<LayerShape>(static_cast<size_t>(std::max<int64_t>(layers, 0))),
                   all) {
  check(layers >= 0, "precision map: negative layer count");
}

PrecisionMap::PrecisionMap(const std::vector<int64_t>& experts, Precision all, Precision router)
    : PrecisionMap(
          [&] {
            std::vector<LayerShape> s(experts.size());
            for (size_t l = 0; l < experts.size(); ++l) s[l].experts = experts[l];
            return s;
          }(),
          all, router) {}

PrecisionMap::PrecisionMap(const std::vector<LayerShape>& shapes, Precision all, Precision router)
    : shapes_(shapes) {
  const size_t L = shapes.size();
  std::array<Precision, kModules> row;
  std::array<Precision, 3> three;
  three.fill(all);
  map_.assign(L, row);
  experts_.assign(L, {});
  routers_.assign(L, all == Precision::fp32 ? all : Precision::bf16);
  shared_.assign(L, three);
  for (size_t l = 0; l < L; ++l) {
    const LayerShape& s = shapes[l];
    check(s.experts >= 0, "precision map: negative expert count");
    check(!s.shared_experts || s.experts > 0,
          "precision map: a shared expert needs routed experts beside it");
    check(!s.q_lora || s.latent, "precision map: q_a/q_b belong to latent attention");
    experts_[l].assign(static_cast<size_t>(s.experts), three);
    if (s.experts > 0) routers_[l] = all == Precision::fp32 ? Precision::fp32 : router;
    // Entries a layer does not have (a layer with experts has no gate/up/down of its own: they
    // stand for the experts') hold one value, so equal maps compare equal however they were made.
    for (int mi = 0; mi < kModules; ++mi)
      map_[l][static_cast<size_t>(mi)] = s.has(Module(mi)) ? all : Precision::fp8;
    if (!s.shared_experts) shared_[l].fill(Precision::fp8);
  }
}

void PrecisionMap::check_layer(int64_t layer) const {
  check(layer >= 0 && layer < layers(), "precision map: layer " + std::to_string(layer) +
                                            " out of range (" + std::to_string(layers()) +
                                            " layers)");
}

const LayerShape& PrecisionMap::shape(int64_t layer) const {
  check_layer(layer);
  return shapes_[static_cast<size_t>(layer)];
}

bool PrecisionMap::has(int64_t layer, Module m) const {
  const LayerShape& s = shape(layer);
  return s.has(m) || (is_mlp(m) && s.experts > 0);
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
  check(has(layer, m),
        "precision map: layer " + std::to_string(layer) + " has no " + module_short(m) + " linear");
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
  check(has(layer, m),
        "precision map: layer " + std::to_string(layer) + " has no " + module_short(m) + " linear");
  const size_t l = static_cast<size_t>(layer);
  auto& ex = experts_[l];
  if (ex.empty() || !is_mlp(m)) {
    map_[l][static_cast<size_t>(m)] = p;
    return;
  }
  for (auto& e : ex) e[static_cast<size_t>(expert_slot(m))] = p;
  if (shapes_[l].shared_experts) shared_[l][static_cast<size_t>(expert_slot(m))] = p;
}

Precision PrecisionMap::expert(int64_t layer, int64_t e, Module m) const {
  check(e >= 0 && e < experts(layer) && is_mlp(m), "precision map: layer " + std::to_string(layer) +
                                                       " has no expert " + std::to_string(e) + " " +
                                                       module_short(m));
  return experts_[static_cast<size_t>(layer)][static_cast<size_t>(e)]
                 [static_cast<size_t>(expert_slot(m))];
}

void PrecisionMap::set_expert(int64_t layer, int64_t e, Module m, Precision p) {
  check(e >= 0 && e < experts(layer) && is_mlp(m), "precision map: layer " + std::to_string(layer) +
                                                       " has no expert " + std::to_string(e) + " " +
                                                       module_short(m));
  experts_[static_cast<size_t>(layer)][static_cast<size_t>(e)]
          [static_cast<size_t>(expert_slot(m))] = p;
}

bool PrecisionMap::experts_uniform(int64_t layer, Module m) const {
  const size_t l = static_cast<size_t>(layer);
  const auto& ex = experts_[l];
  const size_t s = static_cast<size_t>(expert_slot(m));
  for (const auto& e : ex)
    if (e[s] != ex.front()[s]) return false;
  return !shapes_[l].shared_experts || ex.empty() || shared_[l][s] == ex.front()[s];
}

Precision PrecisionMap::shared(int64_t layer, Module m) const {
  check(shape(layer).shared_experts && is_mlp(m), "precision map: layer " + std::to_string(layer) +
                                                      " has no shared expert " + module_short(m));
  return shared_[static_cast<size_t>(layer)][static_cast<size_t>(expert_slot(m))];
}

void PrecisionMap::set_shared(int64_t layer, Module m, Precision p) {
  check(shape(layer).shared_experts && is_mlp(m), "precision map: layer " + std::to_string(layer) +
                                                      " has no shared expert " + module_short(m));
  shared_[static_cast<size_t>(layer)][static_cast<size_t>(expert_slot(m))] = p;
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
  if (shared) return l + "shared." + module_short(module);
  if (expert >= 0) return l + "e" + std::to_string(expert) + "." + module_short(module);
  return l + module_short(module);
}

std::string LinearSlot::override_text(Precision p) const {
  if (router)
    return PrecisionOverride{layer, std::nullopt, p, PrecisionOverride::Target::router}.to_string();
  if (shared)
    return PrecisionOverride{layer, module, p, PrecisionOverride::Target::shared}.to_string();
  if (expert >= 0)
    return PrecisionOverride{layer, module, p, PrecisionOverride::Target::experts, expert}
        .to_string();
  return PrecisionOverride{layer, module, p}.to_string();
}

std::vector<LinearSlot> PrecisionMap::linears() const {
  std::vector<LinearSlot> out;
  for (int64_t l = 0; l < layers(); ++l) {
    const LayerShape& s = shapes_[static_cast<size_t>(l)];
    for (Module m : attention_modules(s)) out.push_back({l, m});
    if (s.experts == 0) {
      for (Module m : kExpertModules) out.push_back({l, m});
      continue;
    }
    out.push_back({l, Module::gate, -1, true});
    for (int64_t e = 0; e < s.experts; ++e)
      for (Module m : kExpertModules) out.push_back({l, m, e});
    if (s.shared_experts)
      for (Module m : kExpertModules) out.push_back({l, m, -1, false, true});
  }
  return out;
}

Precision PrecisionMap::get(const LinearSlot& s) const {
  if (s.router) return router(s.layer);
  if (s.shared) return shared(s.layer, s.module);
  if (s.expert >= 0) return expert(s.layer, s.expert, s.module);
  return at(s.layer, s.module);
}

void PrecisionMap::set(const LinearSlot& s, Precision p) {
  if (s.router)
    set_router(s.layer, p);
  else if (s.shared)
    set_shared(s.layer, s.module, p);
  else if (s.expert >= 0)
    set_expert(s.layer, s.expert, s.module, p);
  else
    set(s.layer, s.module, p);
}

bool PrecisionMap::all_fp32() const {
  bool all = true;
  for (const LinearSlot& s : linears()) all = all && get(s) == Precision::fp32;
  return all;
}

void PrecisionMap::validate() const {
  bool any32 = false, other = false;
  for (const LinearSlot& s : linears()) (get(s) == Precision::fp32 ? any32 : other) = true;
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
  for (const LinearSlot& s : linears()) {
    if (s.router && routers_default) continue;
    ++count[get(s)];
    ++total;
  }
  if (count.size() <= 1) return count.empty() ? "empty" : precision_name(count.begin()->first);
  const int bf16 = count[Precision::bf16];
  return "fp8 (" + std::to_string(bf16) + " of " + std::to_string(total) + " linears bf16)";
}

std::vector<std::string> PrecisionMap::overrides_from(Precision base) const {
  std::vector<std::string> out;
  for (int64_t l = 0; l < layers(); ++l) {
    const LayerShape& s = shapes_[static_cast<size_t>(l)];
    const auto& ex = experts_[static_cast<size_t>(l)];
    for (Module m : attention_modules(s))
      if (at(l, m) != base) out.push_back(PrecisionOverride{l, m, at(l, m)}.to_string());
    if (ex.empty()) {
      for (Module m : kExpertModules)
        if (at(l, m) != base) out.push_back(PrecisionOverride{l, m, at(l, m)}.to_string());
      continue;
    }
    for (Module m : kExpertModules) {
      if (experts_uniform(l, m)) {
        if (ex.front()[static_cast<size_t>(expert_slot(m))] != base)
          out.push_back(PrecisionOverride{l, m, expert(l, 0, m)}.to_string());
        continue;
      }
      for (int64_t e = 0; e < static_cast<int64_t>(ex.size()); ++e)
        if (expert(l, e, m) != base)
          out.push_back(
              PrecisionOverride{l, m, expert(l, e, m), PrecisionOverride::Target::experts, e}
                  .to_string());
      if (s.shared_experts && shared(l, m) != base)
        out.push_back(
            PrecisionOverride{l, m, shared(l, m), PrecisionOverride::Target::shared}.to_string());
    }
    const Precision router_default = base == Precision::fp32 ? Precision::fp32 : Precision::bf16;
    if (router(l) != router_default)
      out.push_back(PrecisionOverride{l, std::nullopt, router(l), PrecisionOverride::Target::router}
                        .to_string());
  }
  return out;
}

Json PrecisionMap::to_json() const {
  Json::Array layers_json;
  for (size_t l = 0; l < map_.size(); ++l) {
    Json o(Json::Object{});
    const LayerShape& s = shapes_[l];
    const auto& ex = experts_[l];
    for (int mi = 0; mi < kModules; ++mi)
      if (s.has(Module(mi)))
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
    if (s.shared_experts) {
      Json so(Json::Object{});
      for (Module m : kExpertModules)
        so[module_short(m)] = precision_name(shared_[l][static_cast<size_t>(expert_slot(m))]);
      o["shared"] = std::move(so);
    }
    layers_json.push_back(std::move(o));
  }
  return Json(std::move(layers_json));
}

PrecisionMap PrecisionMap::from_json(const Json& j) {
  const auto& rows = j.as_array("precision map");
  std::vector<LayerShape> shapes(rows.size());
  for (size_t l = 0; l < rows.size(); ++l) {
    check(rows[l].is_object(), "precision map layer " + std::to_string(l) + " is not an object");
    LayerShape& s = shapes[l];
    if (rows[l].contains("experts"))
      s.experts = static_cast<int64_t>(
          rows[l]
              .at("experts")
              .as_array("precision map layer " + std::to_string(l) + " experts")
              .size());
    s.shared_experts = s.experts > 0 && rows[l].contains("shared");
    s.latent = rows[l].contains("kv_a");
    s.q_lora = s.latent && rows[l].contains("q_a");
  }
  PrecisionMap pm(shapes, Precision::fp8);
  for (size_t l = 0; l < rows.size(); ++l) {
    const std::string where = "precision map layer " + std::to_string(l);
    const int64_t L = static_cast<int64_t>(l);
    auto read = [&](const Json& o, const char* key, const std::string& at) {
      check(o.contains(key), at + " has no '" + key + "'");
      return parse_precision(o.at(key).as_string(at + "." + key));
    };
    for (int mi = 0; mi < kModules; ++mi) {
      const Module m = Module(mi);
      if (!shapes[l].has(m)) continue;
      pm.map_[l][static_cast<size_t>(mi)] = read(rows[l], module_short(m), where);
    }
    if (shapes[l].experts == 0) continue;
    pm.set_router(L, read(rows[l], "router", where));
    const auto& es = rows[l].at("experts").as_array();
    for (size_t e = 0; e < es.size(); ++e) {
      const std::string at = where + " expert " + std::to_string(e);
      check(es[e].is_object(), at + " is not an object");
      for (Module m : kExpertModules)
        pm.set_expert(L, static_cast<int64_t>(e), m, read(es[e], module_short(m), at));
    }
    if (shapes[l].shared_experts) {
      const Json& so = rows[l].at("shared");
      check(so.is_object(), where + " shared is not an object");
      for (Module m : kExpertModules)
        pm.set_shared(L, m, read(so, module_short(m), where + " shared"));
    }
  }
  return pm;
}

namespace {

const char* kGrammar =
    "LAYER.MODULE=PRECISION, LAYER.experts.EXPERT.MODULE=PRECISION, LAYER.shared.MODULE=PRECISION, "
    "LAYER.router=PRECISION or LAYER.low_rank=PRECISION (e.g. 0.gate=bf16, *.down=bf16, "
    "3.experts.*.up=bf16, *.router=fp8, *.kv_b=bf16, *.low_rank=bf16)";

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
  if (target == "low_rank") {
    out.target = Target::low_rank;
    return out;
  }
  if (target.rfind("mlp.", 0) == 0) target = target.substr(4);
  if (target.rfind("self_attn.", 0) == 0) target = target.substr(10);
  std::string module = target;
  if (target.rfind("experts.", 0) == 0) {
    out.target = Target::experts;
    const std::string rest = target.substr(8);
    const size_t d = rest.find('.');
    check(d != std::string::npos,
          "precision override '" + o + "': experts need EXPERT.MODULE, as in " + kGrammar);
    out.expert = parse_index(rest.substr(0, d), "expert", o, -1);
    module = rest.substr(d + 1);
  } else if (target.rfind("shared.", 0) == 0 || target.rfind("shared_experts.", 0) == 0) {
    out.target = Target::shared;
    module = target.substr(target.find('.') + 1);
  }
  if (module != "*") {
    out.module = parse_module(module);
    check(out.module.has_value(), "precision override '" + o + "': module '" + module +
                                      "' is not one of: *, q, k, v, o, gate, up, down, q_a, q_b, "
                                      "kv_a, kv_b (" +
                                      kGrammar + ")");
    check((out.target != Target::experts && out.target != Target::shared) || is_mlp(*out.module),
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
    case Target::shared:
      return l + ".shared." + m + p;
    case Target::low_rank:
      return l + ".low_rank" + p;
    case Target::module:
      break;
  }
  return l + "." + m + p;
}

void PrecisionOverride::apply(PrecisionMap& pm) const {
  if (layer && *layer >= pm.layers())
    throw Error("precision override " + to_string() + ": the model has " +
                std::to_string(pm.layers()) + " layers (0…" + std::to_string(pm.layers() - 1) +
                ")");
  if (target != Target::module && target != Target::low_rank && layer && pm.experts(*layer) == 0)
    throw Error("precision override " + to_string() + ": layer " + std::to_string(*layer) +
                " has no experts (a dense MLP: use gate, up, down)");
  if (target == Target::shared && layer && !pm.shape(*layer).shared_experts)
    throw Error("precision override " + to_string() + ": layer " + std::to_string(*layer) +
                " has no shared expert");
  bool reached = false;
  for (int64_t l = 0; l < pm.layers(); ++l) {
    if (layer && *layer != l) continue;
    const int64_t E = pm.experts(l);
    if (target == Target::router) {
      if (E > 0) pm.set_router(l, precision), reached = true;
      continue;
    }
    if (target == Target::low_rank) {
      for (Module m : {Module::q_a, Module::q_b, Module::kv_a, Module::kv_b})
        if (pm.has(l, m)) pm.set(l, m, precision), reached = true;
      continue;
    }
    if (target == Target::shared) {
      if (!pm.shape(l).shared_experts) continue;
      for (Module m : kExpertModules)
        if (!module || *module == m) pm.set_shared(l, m, precision), reached = true;
      continue;
    }
    if (target == Target::experts) {
      if (E == 0) continue;
      if (expert && *expert >= E)
        throw Error("precision override " + to_string() + ": layer " + std::to_string(l) + " has " +
                    std::to_string(E) + " experts (0…" + std::to_string(E - 1) + ")");
      for (int64_t e = 0; e < E; ++e)
        if (!expert || *expert == e)
          for (Module m : kExpertModules)
            if (!module || *module == m) pm.set_expert(l, e, m, precision), reached = true;
      continue;
    }
    for (int mi = 0; mi < kModules; ++mi)
      if ((!module || *module == Module(mi)) && pm.has(l, Module(mi)))
        pm.set(l, Module(mi), precision), reached = true;
  }
  if (target == Target::module && module && !reached) {
    std::string present;
    for (int mi = 0; mi < kModules; ++mi)
      if (pm.layers() > 0 && pm.has(layer.value_or(0), Module(mi)))
        present += (present.empty() ? "" : ", ") + std::string(module_short(Module(mi)));
    throw Error("precision override " + to_string() + ": " +
                (layer ? "layer " + std::to_string(*layer) : std::string("the model")) +
                " has no " + module_short(*module) + " linear (" +
                (layer ? "it has " : "layer 0 has ") + present + ")");
  }
  check(reached || target == Target::module,
        "precision override " + to_string() + ": " +
            (target == Target::low_rank
                 ? (layer ? "layer " + std::to_string(*layer) : std::string("the model")) +
                       " has no latent attention (low_rank: its q_a, q_b, kv_a, kv_b)"
                 : std::string("the model has no ") +
                       (target == Target::shared ? "shared experts" : "experts")));
}

void apply_precision_override(PrecisionMap& pm, const std::string& override_text) {
  PrecisionOverride::parse(override_text, pm.layers()).apply(pm);
}

}  // namespace fp8rl
