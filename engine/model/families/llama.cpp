// Llama 3.1 (LlamaForCausalLM): no QK-norm, Llama 3's rotary scaling (rope_scaling rope_type
// llama3), dense SwiGLU MLPs, untied head for 8B, the Llama 3 chat template (header ids,
// <|eot_id|>, the system header's dates), several eos ids in the Instruct models.
#include "model/family.hpp"

#include "core/error.hpp"

namespace fp8rl {

extern const ModelFamily kLlamaFamily = {
    "llama",
    "LlamaForCausalLM",
    "llama",
    "llama3",
    [](const Json& j, ModelConfig& c) {
      c.qk_norm = false;
      if (!j.contains("rope_theta")) c.rope_theta = 10000.0;  // LlamaConfig's default
      if (j.contains("mlp_bias"))
        check(!j.at("mlp_bias").as_bool("mlp_bias"), "mlp_bias = true is not supported");
    },
    [](const ModelConfig& c, Json& j) {
      write_rope_scaling(c, j);
      j["mlp_bias"] = false;
    },
    "mlp_bias: false\n",
};

}  // namespace fp8rl
