// Element access for the CPU reference ops: f32 or bf16 matrices read and written as float
// (writes round to nearest even), plus shape checks shared by the op files.
#pragma once

#include <string>

#include "backend/backend.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"

namespace fp8rl::cpu {

inline float ld(const Matrix& m, int64_t i) {
  return m.dtype == DType::f32 ? static_cast<const float*>(m.data)[i]
                               : bf16_to_float(static_cast<const bf16*>(m.data)[i]);
}

inline void st(const Matrix& m, int64_t i, float v) {
  if (m.dtype == DType::f32)
    static_cast<float*>(m.data)[i] = v;
  else
    static_cast<bf16*>(m.data)[i] = float_to_bf16(v);
}

inline std::string shape(const Matrix& m) {
  return "[" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + "]";
}

// Throws unless m is an f32/bf16 matrix of the given shape.
inline void expect(const Matrix& m, int64_t rows, int64_t cols, const char* op, const char* name) {
  check(m.dtype != DType::fp8, std::string(op) + ": " + name + " must be f32 or bf16");
  check(m.rows == rows && m.cols == cols, std::string(op) + ": " + name + " is " + shape(m) +
                                              ", expected [" + std::to_string(rows) + ", " +
                                              std::to_string(cols) + "]");
}

inline void expect_f32(const Matrix& m, const char* op, const char* name) {
  check(m.dtype == DType::f32, std::string(op) + ": " + name + " must be f32");
}

}  // namespace fp8rl::cpu
