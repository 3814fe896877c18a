#include "model/config.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "model/family.hpp"

namespace fp8rl {

bool MoeConfig::layer_has_experts(int64_t layer) const {
  return enabled() && (layer + 1) % decoder_sparse_step == 0 &&
         std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) ==
             mlp_only_layers.end() &&
         layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
}

std::string model_config_key(const std::string& key) {
  return "model config: " + key;
}

void ModelConfig::validate(ConfigKeyName name) const {
  auto positive = [name](int64_t v, const char* key) {
    check(v > 0, name(key) + " must be positive, got " + std::to_string(v));
  };
  model_family(family);  // throws naming the known families
  positive(hidden_size, "hidden_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(num_key_value_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(intermediate_size, "intermediate_size");
  positive(vocab_size, "vocab_size");
  positive(max_position_embeddings, "max_position_embeddings");
  check(num_attention_heads % num_key_value_heads == 0,
        name("num_attention_heads") + " (" + std::to_string(num_attention_heads) +
            ") must be a multiple of num_key_value_heads (" + std::to_string(num_key_value_heads) +
            ")");
  check(head_dim % 2 == 0,
        name("head_dim") + " must be even (rotary pairs), got " + std::to_string(head_dim));
  check(rope_theta > 0, name("rope_theta") + " must be positive");
  check(rms_norm_eps > 0, name("rms_norm_eps") + " must be positive");
  if (rope_scaling == RopeScalingType::yarn) {
    check(mla.enabled(), name("rope_scaling") +
                             ": rope_scaling.rope_type \"yarn\" is not supported (supported: "
                             "default, llama3; yarn with multi-head latent attention)");
    check(rope_factor > 0, name("rope_scaling.factor") + " must be positive");
    check(rope_original_max_position_embeddings > 0,
          name("rope_scaling.original_max_position_embeddings") + " must be positive");
    check(rope_beta_fast > 0 && rope_beta_slow > 0,
          name("rope_scaling") + " needs positive beta_fast and beta_slow");
  }
  if (mla.enabled()) {
    check(!qk_norm, name("kv_lora_rank") + ": latent attention has no per-head q/k norms");
    check(mla.q_lora_rank >= 0, name("q_lora_rank") + " must be positive or null");
    positive(mla.qk_nope_head_dim, "qk_nope_head_dim");
    positive(mla.qk_rope_head_dim, "qk_rope_head_dim");
    positive(mla.v_head_dim, "v_head_dim");
    check(mla.qk_rope_head_dim % 2 == 0, name("qk_rope_head_dim") +
                                             " must be even (rotary pairs), got " +
                                             std::to_string(mla.qk_rope_head_dim));
  }
  if (rope_scaling == RopeScalingType::llama3) {
    check(rope_factor > 0, name("rope_scaling.factor") + " must be positive");
    check(rope_low_freq_factor > 0 && rope_high_freq_factor > rope_low_freq_factor,
          name("rope_scaling") + " needs 0 < low_freq_factor < high_freq_factor");
    check(rope_original_max_position_embeddings > 0,
          name("rope_scaling.original_max_position_embeddings") + " must be positive");
  }
  if (moe.enabled()) {
    positive(moe.experts_per_token, "num_experts_per_tok");
    positive(moe.intermediate_size, "moe_intermediate_size");
    positive(moe.decoder_sparse_step, "decoder_sparse_step");
    check(moe.experts_per_token <= moe.num_experts,
          name("num_experts_per_tok") + " (" + std::to_string(moe.experts_per_token) +
              ") is larger than num_experts (" + std::to_string(moe.num_experts) + ")");
    for (int64_t l : moe.mlp_only_layers)
      check(l >= 0 && l < num_hidden_layers, name("mlp_only_layers") + " lists layer " +
                                                 std::to_string(l) + " of " +
                                                 std::to_string(num_hidden_layers));
    check(moe.first_k_dense_replace >= 0, name("first_k_dense_replace") + " must be ≥ 0");
    positive(moe.moe_layer_freq, "moe_layer_freq");
    positive(moe.n_group, "n_group");
    positive(moe.topk_group, "topk_group");
    check(moe.shared_experts >= 0, name("n_shared_experts") + " must be ≥ 0");
    check(moe.routed_scaling_factor > 0, name("routed_scaling_factor") + " must be positive");
    check(moe.num_experts % moe.n_group == 0, name("n_group") + " (" + std::to_string(moe.n_group) +
                                                  ") must divide the routed experts (" +
                                                  std::to_string(moe.num_experts) + ")");
    check(moe.topk_group <= moe.n_group,
          name("topk_group") + " (" + std::to_string(moe.topk_group) +
              ") is larger than n_group (" + std::to_string(moe.n_group) + ")");
    check(moe.n_group == 1 || moe.num_experts / moe.n_group >= 2,
          name("n_group") +
              ": a group needs at least two experts (its score is the sum of its "
              "two best)");
    check(moe.experts_per_token <= moe.topk_group * (moe.num_experts / moe.n_group),
          name("num_experts_per_tok") + " (" + std::to_string(moe.experts_per_token) +
              ") is larger than the experts of topk_group groups (" +
              std::to_string(moe.topk_group * (moe.num_experts / moe.n_group)) + ")");
  }
}

Rope ModelConfig::rope() const {
  Rope r;
  r.theta = static_cast<float>(rope_theta);
  r.scaling = rope_scaling;
  r.factor = static_cast<float>(rope_factor);
  r.low_freq_factor = static_cast<float>(rope_low_freq_factor);
  r.high_freq_factor = static_cast<float>(rope_high_freq_factor);
  r.original_max_positions = static_cast<float>(rope_original_max_position_embeddings);
  r.interleaved = mla.enabled() && mla.rope_interleave;
  if (rope_scaling == RopeScalingType::yarn) {
    const int64_t D = mla.enabled() ? mla.qk_rope_head_dim : head_dim;
    yarn_correction_range(rope_theta, D, rope_beta_fast, rope_beta_slow,
                          static_cast<double>(rope_original_max_position_embeddings), &r.yarn_low,
                          &r.yarn_high);
    // Hugging Face's _compute_yarn_parameters: mscale / mscale_all_dim when both are given.
    r.attention_factor = static_cast<float>(rope_mscale != 0 && rope_mscale_all_dim != 0
                                                ? yarn_mscale(rope_factor, rope_mscale) /
                                                      yarn_mscale(rope_factor, rope_mscale_all_dim)
                                                : yarn_mscale(rope_factor, 1.0));
  }
  return r;
}

double ModelConfig::attention_scale() const {
  if (!mla.enabled()) return 1.0 / std::sqrt(static_cast<double>(head_dim));
  double s = 1.0 / std::sqrt(static_cast<double>(mla.qk_head_dim()));
  if (rope_scaling == RopeScalingType::yarn && rope_mscale_all_dim != 0) {
    const double m = yarn_mscale(rope_factor, rope_mscale_all_dim);
    s *= m * m;
  }
  return s;
}

Json ModelConfig::to_json() const {
  const ModelFamily& f = model_family(family);
  Json j;
  j["architectures"] = Json(Json::Array{Json(f.architecture)});
  j["model_type"] = f.model_type;
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["intermediate_size"] = intermediate_size;
  j["vocab_size"] = vocab_size;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rope_theta"] = rope_theta;
  j["rms_norm_eps"] = rms_norm_eps;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["torch_dtype"] = "bfloat16";
  if (eos_token_ids.size() == 1) j["eos_token_id"] = static_cast<int64_t>(eos_token_ids[0]);
  if (eos_token_ids.size() > 1) {
    Json::Array ids;
    for (int32_t id : eos_token_ids) ids.emplace_back(static_cast<int64_t>(id));
    j["eos_token_id"] = Json(std::move(ids));
  }
  f.write(*this, j);
  return j;
}

ModelConfig ModelConfig::from_json(const Json& j, ConfigKeyName name) {
  check(j.is_object(), "expected a JSON object");
  const ModelFamily& f = model_family_of(j);
  if (j.contains("attention_bias"))
    check(!j.at("attention_bias").as_bool("attention_bias"),
          "attention_bias = true is not supported");
  if (j.contains("hidden_act"))
    check(j.at("hidden_act").as_string("hidden_act") == "silu",
          "hidden_act \"" + j.at("hidden_act").as_string() + "\" is not supported (only silu)");
  ModelConfig c;
  c.family = f.name;
  auto integer = [&](const char* key) {
    check(j.contains(key), std::string("config.json has no ") + key);
    return j.at(key).as_int(std::string(key));
  };
  c.hidden_size = integer("hidden_size");
  c.num_hidden_layers = integer("num_hidden_layers");
  c.num_attention_heads = integer("num_attention_heads");
  c.num_key_value_heads =
      j.contains("num_key_value_heads") ? integer("num_key_value_heads") : c.num_attention_heads;
  check(c.num_attention_heads > 0, "num_attention_heads must be positive");
  c.head_dim = j.contains("head_dim") && !j.at("head_dim").is_null()
                   ? integer("head_dim")
                   : c.hidden_size / c.num_attention_heads;
  c.intermediate_size = integer("intermediate_size");
  c.vocab_size = integer("vocab_size");
  if (j.contains("max_position_embeddings"))
    c.max_position_embeddings = integer("max_position_embeddings");
  if (j.contains("rope_theta")) c.rope_theta = j.at("rope_theta").as_number("rope_theta");
  if (j.contains("rms_norm_eps")) c.rms_norm_eps = j.at("rms_norm_eps").as_number("rms_norm_eps");
  if (j.contains("tie_word_embeddings"))
    c.tie_word_embeddings = j.at("tie_word_embeddings").as_bool("tie_word_embeddings");
  if (j.contains("eos_token_id") && !j.at("eos_token_id").is_null()) {
    const Json& e = j.at("eos_token_id");
    if (e.is_array())
      for (const auto& id : e.as_array())
        c.eos_token_ids.push_back(static_cast<int32_t>(id.as_int("eos_token_id item")));
    else
      c.eos_token_ids.push_back(static_cast<int32_t>(e.as_int("eos_token_id")));
  }
  read_rope_scaling(j, c);
  f.read(j, c);
  c.validate(name);
  return c;
}

int64_t ModelConfig::parameter_count() const {
  const int64_t H = hidden_size, D = head_dim, Hq = num_attention_heads;
  int64_t attn =
      H * num_attention_heads * D * 2 + H * num_key_value_heads * D * 2 + (qk_norm ? 2 * D : 0);
  if (mla.enabled()) {
    const int64_t dqk = mla.qk_head_dim(), rq = mla.q_lora_rank, rkv = mla.kv_lora_rank;
    attn = (rq > 0 ? H * rq + rq + rq * Hq * dqk : H * Hq * dqk) +
           H * (rkv + mla.qk_rope_head_dim) + rkv +
           rkv * Hq * (mla.qk_nope_head_dim + mla.v_head_dim) + Hq * mla.v_head_dim * H;
  }
  int64_t total = vocab_size * H * (tie_word_embeddings ? 1 : 2) + H;
  for (int64_t l = 0; l < num_hidden_layers; ++l) {
    const int64_t mlp = moe.layer_has_experts(l)
                            ? moe.num_experts * 3 * H * moe.intermediate_size +
                                  moe.num_experts * H +
                                  (moe.score_correction_bias ? moe.num_experts : 0) +
                                  moe.shared_experts * 3 * H * moe.intermediate_size
                            : 3 * H * intermediate_size;
    total += attn + mlp + 2 * H;
  }
  return total;
}

int64_t ModelConfig::active_parameter_count() const {
  int64_t total = parameter_count();
  for (int64_t l = 0; l < num_hidden_layers; ++l)
    if (moe.layer_has_experts(l))
      total -= (moe.num_experts - moe.experts_per_token) * 3 * hidden_size * moe.intermediate_size;
  return total;
}

std::vector<int64_t> ModelConfig::experts_per_layer() const {
  std::vector<int64_t> e(static_cast<size_t>(num_hidden_layers), 0);
  for (int64_t l = 0; l < num_hidden_layers; ++l)
    if (moe.layer_has_experts(l)) e[static_cast<size_t>(l)] = moe.num_experts;
  return e;
}

std::vector<LayerShape> ModelConfig::layer_shapes() const {
  std::vector<LayerShape> s(static_cast<size_t>(num_hidden_layers));
  for (int64_t l = 0; l < num_hidden_layers; ++l) {
    LayerShape& x = s[static_cast<size_t>(l)];
    if (moe.layer_has_experts(l)) {
      x.experts = moe.num_experts;
      x.shared_experts = moe.shared_experts > 0;
    }
    x.latent = mla.enabled();
    x.q_lora = mla.enabled() && mla.q_lora_rank > 0;
  }
  return s;
}

PrecisionMap uniform_precision(const ModelConfig& cfg, Precision p) {
  return PrecisionMap(cfg.layer_shapes(), p);
}

}  // namespace fp8rl
