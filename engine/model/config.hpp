// Model configuration (the Hugging Face Qwen3 config.json fields we use) and the per-linear
// precision map.
#pragma once

#include <array>
#include <string>
#include <vector>

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

// Precision of a linear layer's GEMMs. fp32 exists on the CPU backend only (the reference).
enum class Precision { fp32, bf16, fp8 };
const char* precision_name(Precision p);
Precision parse_precision(const std::string& s);  // throws naming the allowed values

// The seven linear modules of a decoder layer, in Hugging Face order.
enum class Module { q, k, v, o, gate, up, down };
inline constexpr int kModules = 7;
const char* module_name(Module m);   // "q_proj", ..., "down_proj"
const char* module_short(Module m);  // "q", ..., "down"

// Precision of every linear of every layer. Activations are f32 when every linear is fp32 and
// bf16 otherwise (mixing fp32 with bf16/fp8 is refused).
class PrecisionMap {
 public:
  PrecisionMap() = default;
  PrecisionMap(int64_t layers, Precision all);

  Precision at(int64_t layer, Module m) const;
  void set(int64_t layer, Module m, Precision p);
  int64_t layers() const { return static_cast<int64_t>(map_.size()); }
  bool all_fp32() const;
  // Throws when fp32 is mixed with other precisions.
  void validate() const;
  // "fp8" / "bf16" / "fp32" when uniform, else e.g. "fp8 (3 of 28 linears bf16)".
  std::string summary() const;

 private:
  std::vector<std::array<Precision, kModules>> map_;
};

}  // namespace fp8rl
