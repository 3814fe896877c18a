// Qwen3-MoE (Qwen3MoeForCausalLM): Qwen3's attention (QK-norm) with a mixture of experts in the
// layers decoder_sparse_step and mlp_only_layers pick (model/config.hpp: MoeConfig), dense
// SwiGLU MLPs of intermediate_size in the others; Qwen3's chat template.
#include "model/family.hpp"

#include "core/error.hpp"

namespace fp8rl {

extern const ModelFamily kQwen3MoeFamily = {
    "qwen3_moe",
    "Qwen3MoeForCausalLM",
    "qwen3_moe",
    "qwen3",
    [](const Json& j, ModelConfig& c) {
      c.qk_norm = true;
      auto integer = [&](const char* key) {
        check(j.contains(key), std::string("config.json (Qwen3-MoE) has no ") + key);
        return j.at(key).as_int(key);
      };
      c.moe.num_experts = integer("num_experts");
      c.moe.experts_per_token = integer("num_experts_per_tok");
      c.moe.intermediate_size = integer("moe_intermediate_size");
      if (j.contains("norm_topk_prob"))
        c.moe.norm_topk_prob = j.at("norm_topk_prob").as_bool("norm_topk_prob");
      if (j.contains("decoder_sparse_step"))
        c.moe.decoder_sparse_step = integer("decoder_sparse_step");
      if (j.contains("mlp_only_layers"))
        for (const auto& l : j.at("mlp_only_layers").as_array("mlp_only_layers"))
          c.moe.mlp_only_layers.push_back(l.as_int("mlp_only_layers item"));
      if (j.contains("router_aux_loss_coef"))
        c.moe.router_aux_loss_coef = j.at("router_aux_loss_coef").as_number("router_aux_loss_coef");
      check(c.moe.num_experts > 0, "num_experts must be positive (Qwen3-MoE)");
    },
    [](const ModelConfig& c, Json& j) {
      write_rope_scaling(c, j);
      j["num_experts"] = c.moe.num_experts;
      j["num_experts_per_tok"] = c.moe.experts_per_token;
      j["moe_intermediate_size"] = c.moe.intermediate_size;
      j["norm_topk_prob"] = c.moe.norm_topk_prob;
      j["decoder_sparse_step"] = c.moe.decoder_sparse_step;
      Json::Array only;
      for (int64_t l : c.moe.mlp_only_layers) only.emplace_back(l);
      j["mlp_only_layers"] = Json(std::move(only));
      j["router_aux_loss_coef"] = c.moe.router_aux_loss_coef;
      j["output_router_logits"] = false;
    },
    R"(
num_experts: 8
num_experts_per_tok: 2
moe_intermediate_size: 128
norm_topk_prob: true
decoder_sparse_step: 1
mlp_only_layers: []
)",
};

}  // namespace fp8rl
