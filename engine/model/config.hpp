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

// The mixture-of-experts MLP of Qwen3-MoE (Hugging Face Qwen3MoeSparseMoeBlock): a bias-free
// router linear, an FP32 softmax over all experts, the top experts_per_token, their weights
// divided by their sum when norm_topk_prob, and the weighted sum of those experts' SwiGLU
// outputs. Every token reaches its experts (no capacity limit).
struct MoeConfig {
  int64_t num_experts = 0;        // 0: every layer has a dense MLP
  int64_t experts_per_token = 0;  // num_experts_per_tok
  int64_t intermediate_size = 0;  // moe_intermediate_size
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;       // layer l has experts when (l + 1) % step == 0 …
  std::vector<int64_t> mlp_only_layers;  // … and l is not listed here
  double router_aux_loss_coef =
      0;  // config.json's value (the run config decides whether to use it)

  bool enabled() const { return num_experts > 0; }
  // Whether decoder layer l has experts (else a dense MLP of intermediate_size).
  bool layer_has_experts(int64_t layer) const;
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
  // config.json's rope_scaling (none, or Llama 3's with its four fields).
  RopeScalingType rope_scaling = RopeScalingType::none;
  double rope_factor = 1.0, rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;
  int64_t rope_original_max_position_embeddings = 8192;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qk_norm = true;  // per-head RMSNorm of q and k before RoPE (Qwen3); Llama has none
  MoeConfig moe;
  // Ids that end a sequence (config.json's eos_token_id, one id or a list); may be empty.
  std::vector<int32_t> eos_token_ids;

  // Throws an Error naming the first inconsistent field (config.json's name for it, through
  // name).
  void validate(ConfigKeyName name = model_config_key) const;
  // The rotary embedding the backends apply.
  Rope rope() const;
  // Hugging Face config.json of this family (architectures, model_type and its fields).
  Json to_json() const;
  // Reads config.json: the family from architectures / model_type (model/family.hpp), then its
  // fields; missing required fields and unsupported values are errors naming the key.
  static ModelConfig from_json(const Json& j, ConfigKeyName name = model_config_key);
  // Number of parameters (embedding and lm_head counted once when tied; every expert).
  int64_t parameter_count() const;
  // Parameters a token uses (its experts_per_token experts, not all of them).
  int64_t active_parameter_count() const;
  // Experts of each layer (0: a dense MLP): the shape of its precision map.
  std::vector<int64_t> experts_per_layer() const;
};

// A precision map of this model's shape with every linear p (routers bf16, or fp32 with p).
PrecisionMap uniform_precision(const ModelConfig& cfg, Precision p);

}  // namespace fp8rl
