// Checkpoints: a directory with config.json and model.safetensors in the Hugging Face Qwen3
// layout and names (FP32 master weights, norm weights 1-D), plus optimizer.safetensors and
// trainer_state.json when an optimizer is saved.
#pragma once

#include <memory>
#include <string>

#include "model/optimizer.hpp"
#include "model/qwen3.hpp"

namespace fp8rl {

// Writes the model (and the optimizer when given) into dir (created if needed).
void save_checkpoint(const std::string& dir, Qwen3Model& model, const AdamW* optimizer = nullptr,
                     const Json& trainer_state = Json());

// Reads config.json of a checkpoint directory.
ModelConfig read_checkpoint_config(const std::string& dir);

// Loads a checkpoint into a new model. Every tensor must be present with its shape; a missing,
// unexpected or wrongly shaped tensor, or an unsupported dtype, is an error naming it.
// Accepted dtypes: F32, BF16, F16 (converted to the FP32 masters).
std::unique_ptr<Qwen3Model> load_checkpoint(Backend& be, const std::string& dir,
                                            const PrecisionMap& precision, QuantOptions qopt = {});

// Loads optimizer.safetensors of dir into an optimizer built for the same model.
void load_optimizer_state(const std::string& dir, AdamW& optimizer);

}  // namespace fp8rl
