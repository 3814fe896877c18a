#include "ui/data/sensitivity_report.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>
#include <sstream>
#include <utility>

#include "core/error.hpp"

namespace fp8rl::ui {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw Error("sensitivity report: " + what);
}

// The value at key of object o, which is at `path` in the document ("" for the top).
const Json& need(const Json& o, const std::string& path, const std::string& key) {
  const std::string where = path.empty() ? key : path + "." + key;
  if (!o.is_object()) fail("\"" + path + "\" is " + o.type_name() + ", not an object");
  if (!o.contains(key)) fail("missing key \"" + where + "\"");
  return o.at(key);
}

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

double number(const Json& o, const std::string& path, const std::string& key) {
  const Json& v = need(o, path, key);
  if (!v.is_number()) fail("\"" + join(path, key) + "\" is " + v.type_name() + ", not a number");
  return v.as_number();
}

int64_t integer(const Json& o, const std::string& path, const std::string& key) {
  const double v = number(o, path, key);
  if (v != std::floor(v)) fail("\"" + join(path, key) + "\" is not an integer");
  return static_cast<int64_t>(v);
}

bool boolean(const Json& o, const std::string& path, const std::string& key) {
  const Json& v = need(o, path, key);
  if (!v.is_bool()) fail("\"" + join(path, key) + "\" is " + v.type_name() + ", not a boolean");
  return v.as_bool();
}

const std::string& text(const Json& o, const std::string& path, const std::string& key) {
  const Json& v = need(o, path, key);
  if (!v.is_string()) fail("\"" + join(path, key) + "\" is " + v.type_name() + ", not a string");
  return v.as_string();
}

const Json::Array& array(const Json& o, const std::string& path, const std::string& key) {
  const Json& v = need(o, path, key);
  if (!v.is_array()) fail("\"" + join(path, key) + "\" is " + v.type_name() + ", not an array");
  return v.as_array();
}

std::vector<std::string> strings(const Json& o, const std::string& path, const std::string& key) {
  std::vector<std::string> out;
  const auto& a = array(o, path, key);
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_string())
      fail("\"" + join(path, key) + "[" + std::to_string(i) + "]\" is not a string");
    out.push_back(a[i].as_string());
  }
  return out;
}

SensitivityMeasure measure(const Json& o, const std::string& path, const std::string& key) {
  const Json& m = need(o, path, key);
  const std::string p = join(path, key);
  static constexpr std::pair<const char*, double SensitivityMeasure::*> kKeys[] = {
      {"kl", &SensitivityMeasure::kl},
      {"abs_dlogp", &SensitivityMeasure::abs_dlogp},
      {"token_mult_prob_error", &SensitivityMeasure::token_mult_prob_error},
      {"loss", &SensitivityMeasure::loss},
      {"delta_loss", &SensitivityMeasure::delta_loss},
      {"grad_norm", &SensitivityMeasure::grad_norm},
      {"delta_grad_norm", &SensitivityMeasure::delta_grad_norm}};
  SensitivityMeasure r;
  for (const auto& [name, field] : kKeys) r.*field = number(m, p, name);
  return r;
}

std::string num(double v) {
  std::ostringstream s;
  s.precision(4);
  s << v;
  return s.str();
}

// "L3.down" → (3, down), "L3.router", "L3.e5.up" → (3, expert 5, up), "L3.shared.up" → (3,
// the shared expert, up); throws naming path when it is none of those nor "lm_head".
void parseModuleName(SensitivityEntry& e, const std::string& path) {
  if (e.module == "lm_head") return;
  static const std::regex re(R"(L(\d+)\.(?:e(\d+)\.|(shared)\.)?([a-z_]+))");
  std::smatch m;
  std::optional<Module> linear;
  bool router = false;
  if (std::regex_match(e.module, m, re)) {
    router = !m[2].matched && !m[3].matched && m[4].str() == "router";
    if (!router) linear = parse_module(m[4].str());
    if (linear && (m[2].matched || m[3].matched) && is_attention_module(*linear))
      linear.reset();  // an expert has gate, up and down only
  }
  if (!linear && !router)
    fail("\"" + path + ".module\" is \"" + e.module + "\", not L<layer>.<" +
         [] {
           std::string s;
           for (const auto& n : module_short_names()) s += (s.empty() ? "" : "|") + n;
           return s;
         }() +
         ">, L<layer>.router, L<layer>.e<expert>.<gate|up|down>, L<layer>.shared.<gate|up|down> "
         "or lm_head");
  if (m[2].matched) e.expert = std::stoll(m[2].str());
  e.shared = m[3].matched;
  e.router = router;
  const int64_t layer = std::stoll(m[1].str());
  if (e.layer && *e.layer != layer)
    fail("\"" + path + ".layer\" is " + std::to_string(*e.layer) + " but the module is " +
         e.module);
  e.layer = layer;
  e.linear = linear;
}

}  // namespace

std::string SensitivityMeasure::describe() const {
  return "KL " + num(kl) + " · |Δlogp| " + num(abs_dlogp) + " · token_mult_prob_error " +
         num(token_mult_prob_error) + "\nloss " + num(loss) + " (Δ " + num(delta_loss) +
         ") · grad norm " + num(grad_norm) + " (Δ " + num(delta_grad_norm) + ")";
}

std::vector<std::string> SensitivityRecommendation::overrideTexts() const {
  std::vector<std::string> out;
  for (const auto& o : overrides) out.push_back(o.to_string());
  return out;
}

SensitivityReport SensitivityReport::parse(const std::string& text) {
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Error& e) {
    fail(e.message());
  }
  return fromJson(doc);
}

SensitivityReport SensitivityReport::fromJson(const Json& doc) {
  if (!doc.is_object()) fail(std::string("the document is ") + doc.type_name() + ", not an object");
  SensitivityReport r;
  const Json& b = need(doc, "", "batch");
  using Batch = SensitivityReport::Batch;
  static constexpr std::pair<const char*, int64_t Batch::*> kCounts[] = {
      {"prompts", &Batch::prompts},
      {"group_size", &Batch::group_size},
      {"sequences", &Batch::sequences},
      {"response_tokens", &Batch::response_tokens},
      {"vocab_size", &Batch::vocab_size}};
  for (const auto& [name, field] : kCounts) r.batch.*field = integer(b, "batch", name);
  r.batch.temperature = number(b, "batch", "temperature");
  r.batch.mean_reward = number(b, "batch", "mean_reward");
  r.reference = measure(doc, "", "reference");
  r.all_fp8 = measure(doc, "", "all_fp8");
  r.all_fp8_lm_head_fp8 = measure(doc, "", "all_fp8_lm_head_fp8");

  const auto& ranking = array(doc, "", "ranking");
  for (size_t i = 0; i < ranking.size(); ++i) {
    const std::string p = "ranking[" + std::to_string(i) + "]";
    const Json& j = ranking[i];
    SensitivityEntry e;
    e.rank = integer(j, p, "rank");
    e.module = text(j, p, "module");
    const Json& layer = need(j, p, "layer");
    if (!layer.is_null()) e.layer = integer(j, p, "layer");
    parseModuleName(e, p);
    e.only_fp8 = measure(j, p, "only_fp8");
    e.all_fp8_but_kl = number(j, p, "all_fp8_but_kl");
    if (e.layer) r.layers = std::max(r.layers, *e.layer + 1);
    r.ranking.push_back(std::move(e));
  }
  r.budget = number(doc, "", "budget");
  r.budget_is_default = boolean(doc, "", "budget_is_default");

  const Json& rec = need(doc, "", "recommendation");
  const std::string rp = "recommendation";
  SensitivityRecommendation& out = r.recommendation;
  out.keep_bf16 = strings(rec, rp, "keep_bf16");
  const auto overrides = strings(rec, rp, "overrides");
  for (size_t i = 0; i < overrides.size(); ++i) {
    try {
      out.overrides.push_back(PrecisionOverride::parse(overrides[i], r.layers));
    } catch (const Error& e) {
      fail("\"" + rp + ".overrides[" + std::to_string(i) + "]\": " + e.message());
    }
  }
  out.override_setting = text(rec, rp, "override_setting");
  out.measure = measure(rec, rp, "measure");
  out.kl = number(rec, rp, "kl");
  out.meets_budget = boolean(rec, rp, "meets_budget");
  out.lm_head_fp8_kl = number(rec, rp, "lm_head_fp8_kl");
  out.keep_lm_head_bf16 = boolean(rec, rp, "keep_lm_head_bf16");
  r.seconds = number(doc, "", "seconds");
  return r;
}

const SensitivityEntry* SensitivityReport::find(int64_t layer, Module m) const {
  for (const auto& e : ranking)
    if (e.layer == layer && e.linear == m) return &e;
  return nullptr;
}

const SensitivityEntry* SensitivityReport::lmHead() const {
  for (const auto& e : ranking)
    if (!e.layer) return &e;
  return nullptr;
}

bool SensitivityReport::recommended(const SensitivityEntry& e) const {
  if (!e.layer) return recommendation.keep_lm_head_bf16;
  const auto& keep = recommendation.keep_bf16;
  return std::find(keep.begin(), keep.end(), e.module) != keep.end();
}

std::string SensitivityReport::describe(const SensitivityEntry& e) const {
  std::string s =
      e.module + " (rank " + std::to_string(e.rank) + " of " + std::to_string(ranking.size()) + ")";
  if (recommended(e)) s += " · recommended: keep in BF16";
  s += "\nonly " + e.module + " in FP8: " + e.only_fp8.describe();
  s += "\nall FP8 but " + e.module + ": KL " + num(e.all_fp8_but_kl) +
       " (all FP8: " + num(all_fp8.kl) + ")";
  return s;
}

double sensitivityValue(const SensitivityEntry& e, SensitivityValue which) {
  return which == SensitivityValue::only_fp8_kl ? e.only_fp8.kl : e.all_fp8_but_kl;
}

SensitivityGrid sensitivityGrid(const SensitivityReport& report, SensitivityValue which) {
  SensitivityGrid g;
  const int layers = static_cast<int>(report.layers);
  g.rows = layers + 1;
  // The modules the ranking has, in Module order (a standard model's seven when it has none).
  std::vector<char> seen(kModules, 0);
  for (const auto& e : report.ranking)
    if (e.linear) seen[static_cast<size_t>(*e.linear)] = 1;
  for (int m = 0; m < kModules; ++m)
    if (seen[static_cast<size_t>(m)]) g.columns.push_back(Module(m));
  if (g.columns.empty())
    for (int m = 0; m < kDenseModules; ++m) g.columns.push_back(Module(m));
  g.cols = static_cast<int>(g.columns.size());
  std::vector<int> column_of(kModules, -1);
  for (int c = 0; c < g.cols; ++c)
    column_of[static_cast<size_t>(g.columns[static_cast<size_t>(c)])] = c;
  const size_t cells = static_cast<size_t>(g.rows) * static_cast<size_t>(g.cols);
  g.values.assign(cells, std::numeric_limits<double>::quiet_NaN());
  g.recommended.assign(cells, 0);
  g.entries.assign(cells, nullptr);
  double lowest = std::numeric_limits<double>::infinity();
  for (const auto& e : report.ranking) {
    const double v = sensitivityValue(e, which);
    if (v > 0 && std::isfinite(v)) lowest = std::min(lowest, v);
  }
  const double floor = std::isfinite(lowest) ? std::log10(lowest) : 0.0;
  auto put = [&](int c, int r, const SensitivityEntry& e) {
    const size_t i = static_cast<size_t>(c) * static_cast<size_t>(g.rows) + static_cast<size_t>(r);
    const double v = sensitivityValue(e, which);
    g.values[i] = v > 0 ? std::log10(v) : (std::isnan(v) ? v : floor);
    g.recommended[i] = report.recommended(e);
    g.entries[i] = &e;
  };
  for (const auto& e : report.ranking) {
    // A layer's experts (the shared one too) share its gate/up/down cells: the cell shows the
    // most sensitive (the ranking is sorted by only-FP8 KL, so the first to arrive); routers
    // have no column.
    if (e.layer && e.linear && *e.layer < layers) {
      const int c = column_of[static_cast<size_t>(*e.linear)];
      const size_t i =
          static_cast<size_t>(c) * static_cast<size_t>(g.rows) + static_cast<size_t>(*e.layer);
      if ((!e.expert && !e.shared) || g.entries[i] == nullptr)
        put(c, static_cast<int>(*e.layer), e);
    } else if (!e.layer)
      for (int c = 0; c < g.cols; ++c) put(c, layers, e);
  }
  return g;
}

std::optional<SensitivityProgress> parseSensitivityProgress(const std::string& line) {
  static const std::regex re(R"(^\s*\[[^\]]*\]\s*(\d+)\s*/\s*(\d+)\s*(.*?)\s*$)");
  std::smatch m;
  if (!std::regex_match(line, m, re)) return std::nullopt;
  SensitivityProgress p;
  p.done = std::stoll(m[1].str());
  p.planned = std::stoll(m[2].str());
  p.what = m[3].str();
  return p;
}

}  // namespace fp8rl::ui
