// Qwen3 (Qwen3ForCausalLM): per-head RMSNorm of q and k before RoPE, dense SwiGLU MLPs, the
// ChatML template with the thinking switch.
#include "model/family.hpp"

namespace fp8rl {

extern const ModelFamily kQwen3Family = {
    "qwen3",
    "Qwen3ForCausalLM",
    "qwen3",
    "qwen3",
    [](const Json&, ModelConfig& c) { c.qk_norm = true; },
    [](const ModelConfig& c, Json& j) { write_rope_scaling(c, j); },
    "",
};

}  // namespace fp8rl
