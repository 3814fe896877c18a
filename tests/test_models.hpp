// The small decoders the tests run (unit tests and the op registry): one shape — 2 layers, 4
// query heads over 2 key-value heads — with the sizes each test's point needs (partial FP8
// tiles, a tied head, …). Qwen3 family; rope_theta and the context as ModelConfig's defaults
// unless given.
#pragma once

#include <cstdint>

#include "model/config.hpp"

namespace fp8rl::testing {

inline ModelConfig test_decoder(int64_t hidden, int64_t head_dim, int64_t intermediate,
                                int64_t vocab,
                                int64_t positions = ModelConfig{}.max_position_embeddings,
                                double rope_theta = ModelConfig{}.rope_theta) {
  ModelConfig c;
  c.hidden_size = hidden;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = head_dim;
  c.intermediate_size = intermediate;
  c.vocab_size = vocab;
  c.max_position_embeddings = positions;
  c.rope_theta = rope_theta;
  return c;
}

}  // namespace fp8rl::testing
