// DeepSeek-V3 (DeepseekV3ForCausalLM; Moonlight-16B-A3B is one too): multi-head latent attention
// (kv_lora_rank, optional q_lora_rank, a no-RoPE and a RoPE part per head with one RoPE key part
// shared by the heads, v_head_dim), YaRN rotary scaling (rope_scaling type yarn), DeepSeekMoE
// (sigmoid router scores with the score-correction bias used for the choice only, group-limited
// top k, routed_scaling_factor, shared experts, dense MLPs in the first first_k_dense_replace
// layers and where moe_layer_freq skips); DeepSeek-V3's chat template. Multi-token-prediction
// layers (num_nextn_predict_layers) are read and written back but not run: their tensors in a
// checkpoint are skipped with a note.
#include "model/family.hpp"

#include "core/error.hpp"

namespace fp8rl {

namespace {

void read_deepseek_v3(const Json& j, ModelConfig& c) {
  c.qk_norm = false;
  auto integer = [&](const char* key) {
    check(j.contains(key) && !j.at(key).is_null(),
          std::string("config.json (DeepSeek-V3) has no ") + key);
    return j.at(key).as_int(key);
  };
  auto optional_int = [&](const char* key, int64_t fallback) {
    return j.contains(key) && !j.at(key).is_null() ? j.at(key).as_int(key) : fallback;
  };
  auto optional_number = [&](const char* key, double fallback) {
    return j.contains(key) && !j.at(key).is_null() ? j.at(key).as_number(key) : fallback;
  };
  // Latent attention. head_dim is qk_rope_head_dim (transformers' DeepseekV3Config sets it so).
  MlaConfig& a = c.mla;
  a.kv_lora_rank = integer("kv_lora_rank");
  a.q_lora_rank = optional_int("q_lora_rank", 0);
  check(!(j.contains("q_lora_rank") && !j.at("q_lora_rank").is_null() && a.q_lora_rank <= 0),
        "q_lora_rank must be positive or null, got " + std::to_string(a.q_lora_rank));
  a.qk_nope_head_dim = integer("qk_nope_head_dim");
  a.qk_rope_head_dim = integer("qk_rope_head_dim");
  a.v_head_dim = integer("v_head_dim");
  if (j.contains("rope_interleave"))
    a.rope_interleave = j.at("rope_interleave").as_bool("rope_interleave");
  c.head_dim = a.qk_rope_head_dim;
  check(a.kv_lora_rank > 0, "kv_lora_rank must be positive, got " + std::to_string(a.kv_lora_rank));
  // DeepSeekMoE. A null n_routed_experts is a dense model.
  MoeConfig& m = c.moe;
  m.num_experts = optional_int("n_routed_experts", 0);
  if (m.num_experts > 0) {
    m.experts_per_token = integer("num_experts_per_tok");
    m.intermediate_size = integer("moe_intermediate_size");
  }
  m.shared_experts = optional_int("n_shared_experts", 0);
  m.routed_scaling_factor = optional_number("routed_scaling_factor", 1.0);
  m.n_group = optional_int("n_group", 1);
  m.topk_group = optional_int("topk_group", 1);
  m.first_k_dense_replace = optional_int("first_k_dense_replace", 0);
  m.moe_layer_freq = optional_int("moe_layer_freq", 1);
  if (j.contains("norm_topk_prob"))
    m.norm_topk_prob = j.at("norm_topk_prob").as_bool("norm_topk_prob");
  m.scoring = RouterScoring::sigmoid;
  if (j.contains("scoring_func") && !j.at("scoring_func").is_null()) {
    const std::string f = j.at("scoring_func").as_string("scoring_func");
    check(f == "sigmoid", "scoring_func \"" + f + "\" is not supported (DeepSeek-V3: sigmoid)");
  }
  // noaux_tc: the score-correction bias steers the choice (transformers' DeepseekV3TopkRouter
  // always has it).
  m.score_correction_bias = true;
  if (j.contains("topk_method") && !j.at("topk_method").is_null()) {
    const std::string t = j.at("topk_method").as_string("topk_method");
    check(t == "noaux_tc", "topk_method \"" + t + "\" is not supported (DeepSeek-V3: noaux_tc)");
  }
  // The sequence-wise auxiliary loss's weight (read, used only if the run asks: it is 0 in RL).
  m.router_aux_loss_coef = optional_number("aux_loss_alpha", 0.0);
  c.mtp_layers = optional_int("num_nextn_predict_layers", 0);
  check(c.mtp_layers >= 0, "num_nextn_predict_layers must be ≥ 0");
}

void write_deepseek_v3(const ModelConfig& c, Json& j) {
  write_rope_scaling(c, j);
  const MlaConfig& a = c.mla;
  const MoeConfig& m = c.moe;
  j["head_dim"] = a.qk_rope_head_dim;
  j["q_lora_rank"] = a.q_lora_rank > 0 ? Json(a.q_lora_rank) : Json();
  j["kv_lora_rank"] = a.kv_lora_rank;
  j["qk_nope_head_dim"] = a.qk_nope_head_dim;
  j["qk_rope_head_dim"] = a.qk_rope_head_dim;
  j["v_head_dim"] = a.v_head_dim;
  j["rope_interleave"] = a.rope_interleave;
  j["n_routed_experts"] = m.num_experts > 0 ? Json(m.num_experts) : Json();
  j["num_experts_per_tok"] = m.experts_per_token;
  j["moe_intermediate_size"] = m.intermediate_size;
  j["n_shared_experts"] = m.shared_experts;
  j["routed_scaling_factor"] = m.routed_scaling_factor;
  j["n_group"] = m.n_group;
  j["topk_group"] = m.topk_group;
  j["topk_method"] = "noaux_tc";
  j["scoring_func"] = "sigmoid";
  j["norm_topk_prob"] = m.norm_topk_prob;
  j["first_k_dense_replace"] = m.first_k_dense_replace;
  j["moe_layer_freq"] = m.moe_layer_freq;
  j["aux_loss_alpha"] = m.router_aux_loss_coef;
  j["num_nextn_predict_layers"] = c.mtp_layers;
}

}  // namespace

extern const ModelFamily kDeepseekV3Family = {
    "deepseek_v3",
    "DeepseekV3ForCausalLM",
    "deepseek_v3",
    "deepseek_v3",
    read_deepseek_v3,
    write_deepseek_v3,
    // A Moonlight-shaped model: no query compression, one dense first layer, then 8 routed
    // experts (top 2, sigmoid scores, one group) beside one shared expert.
    R"(
num_key_value_heads: 4
head_dim: 16
q_lora_rank: null
kv_lora_rank: 64
qk_nope_head_dim: 32
qk_rope_head_dim: 16
v_head_dim: 32
rope_interleave: true
n_routed_experts: 8
num_experts_per_tok: 2
moe_intermediate_size: 64
n_shared_experts: 1
routed_scaling_factor: 2.446
n_group: 1
topk_group: 1
topk_method: noaux_tc
scoring_func: sigmoid
norm_topk_prob: true
first_k_dense_replace: 1
moe_layer_freq: 1
aux_loss_alpha: 0.0
num_nextn_predict_layers: 0
)",
};

}  // namespace fp8rl
