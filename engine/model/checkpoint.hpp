// Checkpoints: a directory with config.json and model.safetensors (or shards with
// model.safetensors.index.json) in the Hugging Face Qwen3 layout and names (FP32 master
// weights, norm weights 1-D), plus optimizer.safetensors and trainer_state.json when an
// optimizer is saved. Loading also reads Hugging Face BF16/F16 checkpoints and the block-FP8
// format (fp8_checkpoint.hpp).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "model/fp8_checkpoint.hpp"
#include "model/optimizer.hpp"
#include "model/qwen3.hpp"

namespace fp8rl {

// Writes the model (FP32 masters; sharded above kDefaultMaxShardBytes) and the optimizer when
// given into dir (created if needed).
void save_checkpoint(const std::string& dir, Qwen3Model& model, const AdamW* optimizer = nullptr,
                     const Json& trainer_state = Json());

// Reads config.json of a checkpoint directory.
ModelConfig read_checkpoint_config(const std::string& dir);

// The block-FP8 quantization_config of dir/config.json (nullopt: not an FP8 checkpoint); an
// unsupported one is an error naming the field (see parse_block_fp8_config).
std::optional<BlockFp8Config> read_checkpoint_quantization(const std::string& dir);

// Loads a checkpoint (single file or sharded) into a new model. Every tensor must be present
// with its shape; a missing, unexpected or wrongly shaped tensor, or an unsupported dtype, is an
// error naming it. Accepted dtypes: F32, BF16, F16 (converted to the FP32 masters) and, in a
// block-FP8 checkpoint, F8_E4M3 (or F8_E5M2) weights with their weight_scale_inv: the masters
// hold the dequantized values, and each such decoder linear keeps the file's tiles
// (Linear::set_fp8_weight), so fp8 inference computes with exactly the file's bytes until the
// optimizer changes the weights (the next refresh()). Linears the file keeps in BF16 run in
// bf16 where `precision` says fp8. Scales of the wrong dtype or shape are errors naming them.
std::unique_ptr<Qwen3Model> load_checkpoint(Backend& be, const std::string& dir,
                                            const PrecisionMap& precision, QuantOptions qopt = {});

// Loads optimizer.safetensors of dir into an optimizer built for the same model.
void load_optimizer_state(const std::string& dir, AdamW& optimizer);

}  // namespace fp8rl
