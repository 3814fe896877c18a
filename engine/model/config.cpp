#include "model/config.hpp"

#include <map>

#include "core/error.hpp"

namespace fp8rl {

void ModelConfig::validate() const {
  auto positive = [](int64_t v, const char* name) {
    check(v > 0,
          std::string("model config: ") + name + " must be positive, got " + std::to_string(v));
  };
  positive(hidden_size, "hidden_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(num_key_value_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(intermediate_size, "intermediate_size");
  positive(vocab_size, "vocab_size");
  positive(max_position_embeddings, "max_position_embeddings");
  check(num_attention_heads % num_key_value_heads == 0,
        "model config: num_attention_heads (" + std::to_string(num_attention_heads) +
            ") must be a multiple of num_key_value_heads (" + std::to_string(num_key_value_heads) +
            ")");
  check(head_dim % 2 == 0,
        "model config: head_dim must be even (rotary pairs), got " + std::to_string(head_dim));
  check(rope_theta > 0, "model config: rope_theta must be positive");
  check(rms_norm_eps > 0, "model config: rms_norm_eps must be positive");
}

Json ModelConfig::to_json() const {
  Json j;
  j["architectures"] = Json(Json::Array{Json("Qwen3ForCausalLM")});
  j["model_type"] = "qwen3";
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
  return j;
}

ModelConfig ModelConfig::from_json(const Json& j) {
  check(j.is_object(), "expected a JSON object");
  if (j.contains("model_type")) {
    const auto& t = j.at("model_type").as_string("model_type");
    check(t == "qwen3", "model_type \"" + t + "\" is not supported (only qwen3)");
  }
  if (j.contains("attention_bias"))
    check(!j.at("attention_bias").as_bool("attention_bias"),
          "attention_bias = true is not supported");
  ModelConfig c;
  auto integer = [&](const char* key) {
    return j.at(key).as_int(std::string(key));
  };
  c.hidden_size = integer("hidden_size");
  c.num_hidden_layers = integer("num_hidden_layers");
  c.num_attention_heads = integer("num_attention_heads");
  c.num_key_value_heads =
      j.contains("num_key_value_heads") ? integer("num_key_value_heads") : c.num_attention_heads;
  c.head_dim = j.contains("head_dim") ? integer("head_dim") : c.hidden_size / c.num_attention_heads;
  c.intermediate_size = integer("intermediate_size");
  c.vocab_size = integer("vocab_size");
  if (j.contains("max_position_embeddings"))
    c.max_position_embeddings = integer("max_position_embeddings");
  if (j.contains("rope_theta"))
    c.rope_theta = j.at("rope_theta").as_number("rope_theta");
  if (j.contains("rms_norm_eps"))
    c.rms_norm_eps = j.at("rms_norm_eps").as_number("rms_norm_eps");
  if (j.contains("tie_word_embeddings"))
    c.tie_word_embeddings = j.at("tie_word_embeddings").as_bool("tie_word_embeddings");
  c.validate();
  return c;
}

int64_t ModelConfig::parameter_count() const {
  const int64_t H = hidden_size, D = head_dim;
  const int64_t attn = H * num_attention_heads * D * 2 + H * num_key_value_heads * D * 2 + 2 * D;
  const int64_t mlp = 3 * H * intermediate_size;
  const int64_t layer = attn + mlp + 2 * H;
  return num_hidden_layers * layer + vocab_size * H * (tie_word_embeddings ? 1 : 2) + H;
}

}  // namespace fp8rl
