// safetensors files: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the
// raw tensor bytes (little-endian, row-major). Read and written here without any library.
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

struct SafeTensorsFile {
  std::map<std::string, SafeTensor> tensors;
  std::map<std::string, std::string> metadata;

  // Reads a file; malformed headers, overlapping or out-of-range offsets, sizes that do not
  // match the shape are errors naming the file and the tensor.
  static SafeTensorsFile read(const std::string& path);
  // Writes atomically (to path.tmp, then rename).
  void write(const std::string& path) const;
};

}  // namespace fp8rl
