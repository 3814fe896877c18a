// The Hugging Face block-FP8 checkpoint format (Qwen3-FP8, DeepSeek-V3; vLLM and SGLang serve
// it as it is). Each quantized linear weight W [out, in] is stored as F8_E4M3 codes with a
// sibling `<module>.weight_scale_inv` (F32, [ceil(out/128), ceil(in/128)]): the dequantization
// scale of each 128×128 tile, W ≈ code · scale_inv (one FP32 multiply). Every other tensor
// (embeddings, norms, lm_head, linears kept unquantized) is BF16. (Some publishers store the
// scales as BF16; those are read too and written back as they were.) config.json carries
// "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
// "weight_block_size": [128, 128], "modules_to_not_convert": [module names kept in BF16]}.
//
// Our quantizer (Backend::quantize, 128×128 tiles, the one the trainer and the rollout use)
// produces exactly this: its scale array is the same grid with rows padded to L4 entries
// (fp8/format.hpp), so an export writes the codes a run generated with. Loading these
// checkpoints is part of load_checkpoint (checkpoint.hpp); this header holds the format's
// pieces and the two exporters.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "model/decoder.hpp"
#include "model/safetensors.hpp"

namespace fp8rl {

// The quantization_config of a block-FP8 config.json (the fields we read and write).
struct BlockFp8Config {
  // Module names (Hugging Face names without ".weight") whose weights stay BF16.
  std::vector<std::string> modules_to_not_convert;

  // {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
  //  "weight_block_size": [128, 128], "modules_to_not_convert": [...]}
  Json to_json() const;
};

// Reads the quantization_config of a parsed config.json: nullopt when it has none (or null).
// Anything this loader cannot reproduce exactly is an Error naming `where`, the field, its value
// and what is supported: quant_method other than "fp8", fmt other than "e4m3",
// activation_scheme other than "dynamic", weight_block_size other than [128, 128] or missing
// (per-tensor FP8).
std::optional<BlockFp8Config> parse_block_fp8_config(const Json& config, const std::string& where);

// The scale grid of a [rows, cols] weight in Hugging Face's dense layout
// [ceil(rows/128), ceil(cols/128)] from ours (scale_count(tile128x128, rows, cols) floats,
// rows padded to L4 = tile_scale_stride(cols)), and back (padding set to 1).
std::vector<float> tile_scales_to_hf(const std::vector<float>& ours, int64_t rows, int64_t cols);
std::vector<float> tile_scales_from_hf(const std::vector<float>& hf, int64_t rows, int64_t cols);

// The FP8 tiles of one [rows, cols] weight in host memory: codes row-major, scale_inv in the
// 128×128 tile layout of fp8/format.hpp.
struct Fp8WeightTiles {
  Fp8Format format = Fp8Format::e4m3;
  std::vector<uint8_t> codes;
  std::vector<float> scale_inv;
  // How the file stores the scales: f32 (the format, our quantizer) or bf16 (some publishers,
  // e.g. Qwen3.5-FP8); kept so that an export writes the same bytes.
  DType scale_dtype = DType::f32;
};

// Reads weight `name` ([rows, cols], F8_E4M3 or F8_E5M2) and its scale tensor `scale_name`
// (F32 or BF16, [ceil(rows/128), ceil(cols/128)]). A wrong dtype or shape is an Error naming
// `where`, the tensor and what was expected.
Fp8WeightTiles read_fp8_weight(const SafeTensor& weight, const SafeTensor& scale,
                               const std::string& name, const std::string& scale_name, int64_t rows,
                               int64_t cols, const std::string& where);
// The dequantized weight [rows, cols]: code value · scale_inv of its tile, one FP32 multiply per
// element (what Backend::dequantize computes).
std::vector<float> dequantize_tiles(const Fp8WeightTiles& w, int64_t rows, int64_t cols);

// Glob match on module names: '*' matches any run of characters (dots included), '?' one
// character, everything else itself. "model.layers.0.*", "*.down_proj", "lm_head".
bool module_name_matches(const std::string& pattern, const std::string& name);

struct Fp8ExportOptions {
  // Module-name globs kept in BF16 (matched against the decoder linears and lm_head); a pattern
  // that matches nothing is an error (a typo would silently quantize what it meant to keep).
  std::vector<std::string> keep_bf16;
  uint64_t max_shard_bytes = kDefaultMaxShardBytes;
  // The config.json to extend (the source checkpoint's, so fields we do not model survive);
  // null: the model's own. Its sizes must be the model's.
  Json base_config;
  // Tensors written as they are beside the model's (a source checkpoint's multi-token-prediction
  // layers: read_mtp_tensors).
  std::map<std::string, SafeTensor> pass_through;
};

struct ExportSummary {
  int64_t tensors = 0;       // tensors written, scales included
  int64_t fp8_linears = 0;   // linears written as F8_E4M3 + weight_scale_inv
  int64_t bf16_linears = 0;  // decoder linears written as BF16
  uint64_t bytes = 0;        // tensor data bytes
  int64_t files = 0;         // safetensors files (1, or the shard count)
  // Layers whose q/k/v or gate/up are split between FP8 and BF16: vLLM and SGLang fuse those
  // projections and refuse mixed precision inside a fused module.
  std::vector<std::string> split_fused;
};

// The multi-token-prediction layers' tensors of checkpoint folder dir (is_mtp_tensor), as the
// file holds them, or (to_bf16) as BF16: FP8 weights dequantized with their scales, the scales
// dropped, everything else rounded to BF16.
std::map<std::string, SafeTensor> read_mtp_tensors(const std::string& dir, const ModelConfig& cfg,
                                                   bool to_bf16);

// Writes dir/config.json (with quantization_config) and the weights in the block-FP8 format.
// A decoder linear goes to FP8 when the model runs it in fp8 and no keep_bf16 pattern names it;
// its codes and scales are the tiles a checkpoint gave it, scales in the file's dtype
// (Linear::given_fp8_weight, so FP8 → load → export reproduces the file's bytes), or else our
// quantizer's tiles of its masters with F32 scales (exactly what the model computes with). The
// model's quantizer must use E4M3. Every other tensor is the BF16 rounding of its master (the
// score-correction biases of DeepSeek-V3's routers F32, as DeepSeek publishes them: they decide
// between close scores); BF16 linears, routers and lm_head are listed in modules_to_not_convert.
ExportSummary save_fp8_checkpoint(const std::string& dir, DecoderModel& model,
                                  const Fp8ExportOptions& opt = {});

// Writes dir/config.json (no quantization_config) and every tensor as the BF16 rounding of its
// master: for a model loaded from FP8, the dequantized weights rounded once to BF16 (exact when
// the scales are powers of two).
ExportSummary save_bf16_checkpoint(const std::string& dir, DecoderModel& model,
                                   uint64_t max_shard_bytes = kDefaultMaxShardBytes,
                                   const Json& base_config = Json(),
                                   const std::map<std::string, SafeTensor>& pass_through = {});

}  // namespace fp8rl
