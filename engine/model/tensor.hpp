// Owning tensors and parameters in a backend's memory.
#pragma once

#include <string>
#include <vector>

#include "backend/backend.hpp"

namespace fp8rl {

// A dense row-major [rows, cols] tensor owned in backend memory.
struct Tensor {
  Buffer buf;
  int64_t rows = 0, cols = 0;
  DType dtype = DType::f32;

  static Tensor make(Backend& be, int64_t rows, int64_t cols, DType dtype) {
    Tensor t;
    t.buf = be.alloc(static_cast<size_t>(rows * cols) * dtype_size(dtype));
    t.rows = rows;
    t.cols = cols;
    t.dtype = dtype;
    return t;
  }
  Matrix m() const { return Matrix{buf.data(), rows, cols, dtype}; }
  float* f32() const { return buf.as<float>(); }
  int64_t size() const { return rows * cols; }
  bool empty() const { return buf.data() == nullptr; }
};

// A block-quantized FP8 tensor owned in backend memory.
struct Fp8Tensor {
  Buffer codes, scales;
  Fp8Matrix q;

  static Fp8Tensor make(Backend& be, int64_t rows, int64_t cols, ScaleBlock block, Fp8Format f) {
    Fp8Tensor t;
    t.codes = be.alloc(static_cast<size_t>(rows * cols));
    t.scales = be.alloc(static_cast<size_t>(scale_count(block, rows, cols)) * 4);
    t.q = Fp8Matrix{t.codes.as<uint8_t>(), t.scales.as<float>(), rows, cols, block, f};
    return t;
  }
};

// A trainable parameter: FP32 master weights and FP32 gradient (accumulated), Hugging Face name.
struct Param {
  std::string name;
  Tensor master, grad;
  bool decay = true;  // weight decay applies (matrices yes, norm vectors no)

  static Param make(Backend& be, std::string name, int64_t rows, int64_t cols, bool decay) {
    Param p;
    p.name = std::move(name);
    p.master = Tensor::make(be, rows, cols, DType::f32);
    p.grad = Tensor::make(be, rows, cols, DType::f32);
    p.decay = decay;
    return p;
  }
};

// Host ↔ backend helpers.
inline void upload_floats(Backend& be, const Tensor& t, const std::vector<float>& v) {
  be.upload(t.buf.data(), v.data(), v.size() * 4);
}
inline std::vector<float> download_floats(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.size()));
  be.download(v.data(), t.buf.data(), v.size() * 4);
  return v;
}

}  // namespace fp8rl
