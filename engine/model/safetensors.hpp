// safetensors files: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the
// raw tensor bytes (little-endian, row-major). Read and written here without any library.
//
// A checkpoint directory holds its weights in model.safetensors, or sharded (Hugging Face
// layout) in model-00001-of-0000N.safetensors … with model.safetensors.index.json
// {"metadata": {"total_size": BYTES}, "weight_map": {tensor: file}}.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fp8rl {

struct SafeTensor {
  std::string dtype;  // "F32", "BF16", "F16", "F8_E4M3", "F8_E5M2", "I32", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // raw bytes
};

// Bytes per element of a safetensors dtype name; throws on an unknown one.
size_t safetensors_dtype_size(const std::string& dtype);

// The values of a F32, BF16, F16, F8_E4M3 or F8_E5M2 tensor as floats (exact: each format is a
// subset of FP32); FP8 codes are returned as their values, without any scale. Other dtypes are
// an error naming `what` and the dtype.
std::vector<float> safetensor_floats(const SafeTensor& t, const std::string& what);
// A tensor of `shape` holding v as dtype "F32" or "BF16" (rounded to nearest even).
SafeTensor make_safetensor(const std::vector<float>& v, std::vector<int64_t> shape,
                           const std::string& dtype);

// Hugging Face's default shard limit (5 GB): checkpoints up to this size are one file.
inline constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000ull;

struct SafeTensorsFile {
  std::map<std::string, SafeTensor> tensors;
  std::map<std::string, std::string> metadata;
  // Tensor name → the file it was read from (filled by read and read_dir; for error messages).
  std::map<std::string, std::string> origin;

  // Reads a file; malformed headers, overlapping or out-of-range offsets, sizes that do not
  // match the shape are errors naming the file and the tensor.
  static SafeTensorsFile read(const std::string& path);
  // Writes atomically (to path.tmp, then rename).
  void write(const std::string& path) const;

  // Reads the weights of a checkpoint directory: the shards listed in
  // model.safetensors.index.json when it exists, else model.safetensors. A shard that is
  // missing, a tensor listed in the index but absent from its shard, a tensor of a shard that
  // the index does not list there, or one held by two shards, is an error naming it. Metadata
  // of the shards is merged.
  static SafeTensorsFile read_dir(const std::string& dir);
  // Writes the tensors into dir (created if needed): model.safetensors when their data takes at
  // most max_shard_bytes, else shards of at most max_shard_bytes each (a larger tensor gets a
  // shard of its own), in name order, plus the index. Weight files of the other layout left in
  // dir by an earlier write are removed, so read_dir reads exactly these tensors. Returns the
  // number of safetensors files written.
  int64_t write_dir(const std::string& dir, uint64_t max_shard_bytes = kDefaultMaxShardBytes) const;
  // Bytes of tensor data (without headers).
  uint64_t data_bytes() const;
};

}  // namespace fp8rl
