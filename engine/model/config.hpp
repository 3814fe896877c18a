// Model configuration: the Hugging Face config.json fields the engine uses, for every model
// family (model/family.hpp: Qwen3, Llama 3.1, Qwen3-MoE). The family says how config.json reads
// into these fields; the decoder runs from them. The per-linear precision map is part of the run
// contract (contract/precision.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/rope_rules.hpp"
#include "contract/precision.hpp"
#include "core/json.hpp"

namespace fp8rl {

// The mixture-of-experts MLP: a bias-free router linear scoring every expert, each token's top
// experts_per_token, and the weighted sum of those experts' SwiGLU outputs. Every token reaches
// its experts (no capacity limit).
//   Qwen3-MoE (Qwen3MoeSparseMoeBlock): an FP32 softmax over all experts, the top k, their
//   weights divided by their sum when norm_topk_prob.
//   DeepSeekMoE (DeepseekV3MoE, topk_method noaux_tc): FP32 sigmoid scores; for the choice only,
//   the score-correction bias added (e_score_correction_bias), the experts in n_group groups of
//   which the topk_group with the largest sums of their two best scores are kept, the top k of
//   those; weights the chosen sigmoid scores (÷ their sum when norm_topk_prob) ×
//   routed_scaling_factor; beside the experts a shared SwiGLU MLP of
//   n_shared_experts·moe_intermediate_size every token passes through.
enum class RouterScoring { softmax, sigmoid };

struct MoeConfig {
  int64_t num_experts = 0;        // 0: every layer has a dense MLP
  int64_t experts_per_token = 0;  // num_experts_per_tok
  int64_t intermediate_size = 0;  // moe_intermediate_size
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;       // layer l has experts when (l + 1) % step == 0 …
  std::vector<int64_t> mlp_only_layers;  // … and l is not listed here …
  int64_t first_k_dense_replace = 0;     // … and l ≥ first_k_dense_replace …
  int64_t moe_layer_freq = 1;            // … and l % moe_layer_freq == 0 (DeepSeek's rule)
  double router_aux_loss_coef =
      0;  // config.json's value (the run config decides whether to use it)
  RouterScoring scoring = RouterScoring::softmax;
  int64_t n_group = 1, topk_group = 1;  // group-limited choice (1, 1: none)
  double routed_scaling_factor = 1.0;
  bool score_correction_bias = false;  // e_score_correction_bias (noaux_tc)
  int64_t shared_experts = 0;          // n_shared_experts

  bool enabled() const { return num_experts > 0; }
  // Whether decoder layer l has experts (else a dense MLP of intermediate_size).
  bool layer_has_experts(int64_t layer) const;
};

// Multi-head latent attention (DeepSeek-V2/V3, Moonlight; kv_lora_rank > 0). Keys and values
// are compressed to a latent of kv_lora_rank per token (kv_a_proj_with_mqa, then RMSNorm
// kv_a_layernorm) expanded per head by kv_b_proj into a no-RoPE key part (qk_nope_head_dim) and
// a value (v_head_dim); kv_a_proj_with_mqa also gives qk_rope_head_dim features rotated by RoPE
// and shared by every head as the key's RoPE part. The query: q_proj, or with q_lora_rank
// q_a_proj → RMSNorm q_a_layernorm → q_b_proj; per head a no-RoPE and a RoPE part. Softmax
// scale 1/sqrt(qk_nope_head_dim + qk_rope_head_dim), × mscale² with YaRN's mscale_all_dim.
struct MlaConfig {
  int64_t q_lora_rank = 0;  // 0: q_proj
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool rope_interleave = true;  // the published checkpoints' rotary layout (pairs 2i, 2i + 1)
  // The low-rank norms' epsilon: Hugging Face's DeepseekV3RMSNorm default (not rms_norm_eps).
  static constexpr double kNormEps = 1e-6;

  bool enabled() const { return kv_lora_rank > 0; }
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

// How an error names a config.json field: "model config: hidden_size" (model_config_key) for a
// model folder, "setting 'model.hidden_size'" for a run configuration's model section.
using ConfigKeyName = std::string (*)(const std::string& key);
std::string model_config_key(const std::string& key);

struct ModelConfig {
  std::string family = "qwen3";  // model/family.hpp
  int64_t hidden_size = 64;
  int64_t num_hidden_layers = 2;
  int64_t num_attention_heads = 4;
  int64_t num_key_value_heads = 2;
  int64_t head_dim = 16;
  int64_t intermediate_size = 128;
  int64_t vocab_size = 64;
  int64_t max_position_embeddings = 512;
  double rope_theta = 1000000.0;
  // config.json's rope_scaling (none, Llama 3's with its four fields, or YaRN's: factor,
  // original_max_position_embeddings, beta_fast, beta_slow, mscale, mscale_all_dim; an mscale
  // of 0 stands for one config.json leaves out).
  RopeScalingType rope_scaling = RopeScalingType::none;
  double rope_factor = 1.0, rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;
  int64_t rope_original_max_position_embeddings = 8192;
  double rope_beta_fast = 32.0, rope_beta_slow = 1.0, rope_mscale = 0.0, rope_mscale_all_dim = 0.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qk_norm = true;  // per-head RMSNorm of q and k before RoPE (Qwen3); Llama has none
  MoeConfig moe;
  MlaConfig mla;
  // Multi-token-prediction layers a checkpoint carries after the decoder's (DeepSeek-V3's
  // num_nextn_predict_layers): not run; their tensors are skipped when loading.
  int64_t mtp_layers = 0;
  // Ids that end a sequence (config.json's eos_token_id, one id or a list); may be empty.
  std::vector<int32_t> eos_token_ids;

  // Throws an Error naming the first inconsistent field (config.json's name for it, through
  // name).
  void validate(ConfigKeyName name = model_config_key) const;
  // The rotary embedding the backends apply (latent attention: over qk_rope_head_dim features,
  // interleaved as rope_interleave says, with YaRN's attention factor).
  Rope rope() const;
  // The attention softmax's scale: 1/sqrt(head_dim), or latent attention's (MlaConfig).
  double attention_scale() const;
  // Hugging Face config.json of this family (architectures, model_type and its fields).
  Json to_json() const;
  // Reads config.json: the family from architectures / model_type (model/family.hpp), then its
  // fields; missing required fields and unsupported values are errors naming the key.
  static ModelConfig from_json(const Json& j, ConfigKeyName name = model_config_key);
  // Number of parameters (embedding and lm_head counted once when tied; every expert).
  int64_t parameter_count() const;
  // Parameters a token uses (its experts_per_token experts, not all of them).
  int64_t active_parameter_count() const;
  // Experts of each layer (0: a dense MLP).
  std::vector<int64_t> experts_per_layer() const;
  // The linears of each layer: the shape of its precision map.
  std::vector<LayerShape> layer_shapes() const;
};

// A precision map of this model's shape with every linear p (routers bf16, or fp32 with p).
PrecisionMap uniform_precision(const ModelConfig& cfg, Precision p);

}  // namespace fp8rl
