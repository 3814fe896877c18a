// Model configuration (the Hugging Face Qwen3 config.json fields we use). The per-linear
// precision map is part of the run contract (contract/precision.hpp).
#pragma once

#include <string>

#include "contract/precision.hpp"
#include "core/json.hpp"

namespace fp8rl {

struct ModelConfig {
  int64_t hidden_size = 64;
  int64_t num_hidden_layers = 2;
  int64_t num_attention_heads = 4;
  int64_t num_key_value_heads = 2;
  int64_t head_dim = 16;
  int64_t intermediate_size = 128;
  int64_t vocab_size = 64;
  int64_t max_position_embeddings = 512;
  double rope_theta = 1000000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;

  // Throws an Error naming the first inconsistent field.
  void validate() const;
  // Hugging Face config.json (model_type "qwen3", architectures ["Qwen3ForCausalLM"]).
  Json to_json() const;
  // Reads the fields above from config.json; missing required fields are errors naming them.
  static ModelConfig from_json(const Json& j);
  // Number of parameters (embedding and lm_head counted once when tied).
  int64_t parameter_count() const;
};

}  // namespace fp8rl
