// Checkpoints: a directory with config.json and model.safetensors (or shards with
// model.safetensors.index.json) in the Hugging Face Qwen3 layout and names (FP32 master
// weights, norm weights 1-D), plus optimizer.safetensors and trainer_state.json when an
// optimizer is saved. Loading also reads Hugging Face BF16/F16 checkpoints and the block-FP8
// format (fp8_checkpoint.hpp).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "model/decoder.hpp"
#include "model/fp8_checkpoint.hpp"
#include "model/optimizer.hpp"

namespace fp8rl {

// Writes the model (FP32 masters; sharded above kDefaultMaxShardBytes) and the optimizer when
// given into dir (created if needed).
void save_checkpoint(const std::string& dir, DecoderModel& model, const AdamW* optimizer = nullptr,
                     const Json& trainer_state = Json());

// Writes a checkpoint directory so that whoever reads it — or a process killed meanwhile — sees
// the previous checkpoint complete or the new one complete, never a mix of the two: fill(tmp)
// writes the files into a fresh sibling folder (DIR.partial, removed first if a killed writer
// left one), checksums.json (the size and CRC-32C of every file) is added, and the folder then
// takes dir's place in one atomic exchange (renameat2 RENAME_EXCHANGE). On file systems without
// it, two renames: dir → DIR.previous, DIR.partial → dir; a kill between them leaves
// DIR.previous, which checkpoint_dir_to_read finds.
void write_checkpoint_dir(const std::string& dir,
                          const std::function<void(const std::string& tmp)>& fill);

// The folder to read for checkpoint dir: dir, or DIR.previous when a writer was killed between
// the two renames of write_checkpoint_dir's fallback. Throws an Error when neither exists.
std::string checkpoint_dir_to_read(const std::string& dir);

// Checks every file listed in dir/checksums.json against its recorded size and CRC-32C and
// throws an Error naming the first that differs (written incompletely, or changed since).
// Folders without checksums.json (checkpoints from elsewhere) pass unchecked.
void verify_checkpoint(const std::string& dir);

// A checkpoint folder's config.json, read once: the folder to read (checkpoint_dir_to_read,
// verified with verify_checkpoint), the model's configuration and its block-FP8 quantization
// (nullopt: not an FP8 checkpoint; an unsupported one is an error naming the field, see
// parse_block_fp8_config). Errors name the file and the field.
struct CheckpointInfo {
  std::string dir;
  ModelConfig model;
  std::optional<BlockFp8Config> block_fp8;
  // What a reader should be told (checkpoint_notes).
  std::vector<std::string> notes;
};
CheckpointInfo read_checkpoint_info(const std::string& dir);

// Notes about what of a checkpoint is not used: DeepSeek-V3's multi-token-prediction layers
// (num_nextn_predict_layers), whose tensors loading skips.
std::vector<std::string> checkpoint_notes(const ModelConfig& cfg);
// Whether tensor `name` belongs to a multi-token-prediction layer of cfg's checkpoints
// ("model.layers.{L + i}.…" for i < mtp_layers, L the decoder's layers).
bool is_mtp_tensor(const ModelConfig& cfg, const std::string& name);

// Reads config.json of a checkpoint directory.
ModelConfig read_checkpoint_config(const std::string& dir);

// Loads a checkpoint (single file or sharded) into a new model, from checkpoint_dir_to_read(dir)
// after verify_checkpoint. Every tensor must be present
// with its shape; a missing, unexpected or wrongly shaped tensor, or an unsupported dtype, is an
// error naming it. Accepted dtypes: F32, BF16, F16 (converted to the FP32 masters) and, in a
// block-FP8 checkpoint, F8_E4M3 (or F8_E5M2) weights with their weight_scale_inv: the masters
// hold the dequantized values, and each such decoder linear keeps the file's tiles
// (Linear::set_fp8_weight), so fp8 inference computes with exactly the file's bytes until the
// optimizer changes the weights (the next refresh()). Linears the file keeps in BF16 run in
// bf16 where `precision` says fp8. Scales of the wrong dtype or shape are errors naming them.
std::unique_ptr<DecoderModel> load_checkpoint(Backend& be, const std::string& dir,
                                              const PrecisionMap& precision,
                                              QuantOptions qopt = {});
// The same for a folder read_checkpoint_info has read (and verified) already.
std::unique_ptr<DecoderModel> load_checkpoint(Backend& be, const CheckpointInfo& info,
                                              const PrecisionMap& precision,
                                              QuantOptions qopt = {});

// Loads optimizer.safetensors of dir into an optimizer built for the same model.
void load_optimizer_state(const std::string& dir, AdamW& optimizer);

}  // namespace fp8rl
