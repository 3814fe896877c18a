#include "model/family.hpp"

#include "core/error.hpp"
#include "core/yaml.hpp"

namespace fp8rl {

// The families, each defined in its own file of model/families/.
extern const ModelFamily kQwen3Family;
extern const ModelFamily kLlamaFamily;
extern const ModelFamily kQwen3MoeFamily;
extern const ModelFamily kDeepseekV3Family;

const std::vector<const ModelFamily*>& model_families() {
  static const std::vector<const ModelFamily*> all = {&kQwen3Family, &kLlamaFamily,
                                                      &kQwen3MoeFamily, &kDeepseekV3Family};
  return all;
}

std::string model_family_names() {
  std::string out;
  for (const ModelFamily* f : model_families())
    out += (out.empty() ? "" : ", ") + std::string(f->name);
  return out;
}

const ModelFamily& model_family(const std::string& name) {
  for (const ModelFamily* f : model_families())
    if (name == f->name) return *f;
  throw Error("unknown model family \"" + name + "\" (known: " + model_family_names() + ")");
}

const ModelFamily& model_family_of(const Json& config) {
  std::string arch, type;
  if (config.contains("architectures") && config.at("architectures").is_array() &&
      !config.at("architectures").as_array().empty())
    arch = config.at("architectures").as_array()[0].as_string("architectures[0]");
  if (config.contains("model_type")) type = config.at("model_type").as_string("model_type");
  for (const ModelFamily* f : model_families())
    if (arch == f->architecture || (arch.empty() && type == f->model_type)) return *f;
  std::string known;
  for (const ModelFamily* f : model_families())
    known += (known.empty() ? "" : ", ") + std::string(f->architecture);
  throw Error("model architecture \"" + (arch.empty() ? "model_type " + type : arch) +
              "\" is not supported (supported: " + known + ")");
}

Json model_defaults(const ModelFamily& f) {
  // A two-layer decoder the CPU trains in seconds (the demo presets' shape).
  Json d = parse_yaml(R"(
hidden_size: 128
num_hidden_layers: 2
num_attention_heads: 4
num_key_value_heads: 2
head_dim: 32
intermediate_size: 256
max_position_embeddings: 64
rope_theta: 10000
rope_scaling: null
rms_norm_eps: 1.0e-6
tie_word_embeddings: false
initializer_range: 0.05
)",
                      "model defaults");
  d["architectures"] = Json(Json::Array{Json(f.architecture)});
  d["model_type"] = f.model_type;
  if (f.defaults && *f.defaults) {
    const Json own = parse_yaml(f.defaults, std::string(f.name) + " defaults");
    for (const auto& [k, v] : own.as_object()) d[k] = v;
  }
  return d;
}

void read_rope_scaling(const Json& config, ModelConfig& c) {
  if (!config.contains("rope_scaling") || config.at("rope_scaling").is_null()) return;
  const Json& s = config.at("rope_scaling");
  check(s.is_object(), "rope_scaling must be an object or null");
  const char* type_key = s.contains("rope_type") ? "rope_type" : "type";
  check(s.contains(type_key), "rope_scaling has no rope_type");
  const std::string type = s.at(type_key).as_string("rope_scaling.rope_type");
  if (type == "default") return;
  if (type == "yarn") {
    // Hugging Face's _compute_yarn_parameters: factor required; the original context defaults
    // to max_position_embeddings, beta_fast/beta_slow to 32/1; mscale and mscale_all_dim
    // optional (absent reads as 0, as Python's falsy test treats them).
    check(s.contains("factor"), "rope_scaling (yarn) has no factor");
    auto number = [&](const char* key, double fallback) {
      return s.contains(key) && !s.at(key).is_null()
                 ? s.at(key).as_number(std::string("rope_scaling.") + key)
                 : fallback;
    };
    c.rope_scaling = RopeScalingType::yarn;
    c.rope_factor = number("factor", 1.0);
    c.rope_original_max_position_embeddings = static_cast<int64_t>(
        number("original_max_position_embeddings",
               config.contains("max_position_embeddings")
                   ? config.at("max_position_embeddings").as_number("max_position_embeddings")
                   : static_cast<double>(c.max_position_embeddings)));
    c.rope_beta_fast = number("beta_fast", 32.0);
    c.rope_beta_slow = number("beta_slow", 1.0);
    if (c.rope_beta_fast == 0) c.rope_beta_fast = 32.0;  // Python's `or 32`
    if (c.rope_beta_slow == 0) c.rope_beta_slow = 1.0;
    c.rope_mscale = number("mscale", 0.0);
    c.rope_mscale_all_dim = number("mscale_all_dim", 0.0);
    return;
  }
  check(type == "llama3", "rope_scaling.rope_type \"" + type +
                              "\" is not supported (supported: default, llama3, yarn)");
  auto field = [&](const char* key) {
    check(s.contains(key), std::string("rope_scaling (llama3) has no ") + key);
    return s.at(key).as_number(std::string("rope_scaling.") + key);
  };
  c.rope_scaling = RopeScalingType::llama3;
  c.rope_factor = field("factor");
  c.rope_low_freq_factor = field("low_freq_factor");
  c.rope_high_freq_factor = field("high_freq_factor");
  c.rope_original_max_position_embeddings =
      static_cast<int64_t>(field("original_max_position_embeddings"));
}

void write_rope_scaling(const ModelConfig& c, Json& config) {
  if (c.rope_scaling == RopeScalingType::yarn) {
    Json s;
    s["type"] = "yarn";  // DeepSeek-V3's config.json spells it so
    s["factor"] = c.rope_factor;
    s["original_max_position_embeddings"] = c.rope_original_max_position_embeddings;
    s["beta_fast"] = c.rope_beta_fast;
    s["beta_slow"] = c.rope_beta_slow;
    if (c.rope_mscale != 0) s["mscale"] = c.rope_mscale;
    if (c.rope_mscale_all_dim != 0) s["mscale_all_dim"] = c.rope_mscale_all_dim;
    config["rope_scaling"] = std::move(s);
    return;
  }
  if (c.rope_scaling != RopeScalingType::llama3) {
    config["rope_scaling"] = Json();
    return;
  }
  Json s;
  s["rope_type"] = "llama3";
  s["factor"] = c.rope_factor;
  s["low_freq_factor"] = c.rope_low_freq_factor;
  s["high_freq_factor"] = c.rope_high_freq_factor;
  s["original_max_position_embeddings"] = c.rope_original_max_position_embeddings;
  config["rope_scaling"] = std::move(s);
}

}  // namespace fp8rl
