// CPU reference GEMMs: inputs are widened (BF16) or dequantized (FP8) to FP32 exactly as the
// formats define them, then the backend's FP32 GEMM (sgemm.hpp: one fixed order of operations
// per element, so results do not depend on the batch layout, the thread count or the CPU).
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/sgemm.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "fp8/codec.hpp"

namespace fp8rl {
namespace {

// Per-thread scratch for widened/dequantized operands: reused across calls, so a GEMM does not
// pay for zero-filling and page-faulting fresh memory each time. It keeps the largest size
// seen (the CPU backend trades that memory for speed).
float* scratch(int slot, int64_t n) {
  thread_local std::vector<float> buffers[3];
  auto& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
  return b.data();
}

const float* widen(const Matrix& m, int slot) {
  const int64_t n = m.rows * m.cols;
  if (m.dtype == DType::f32) return static_cast<const float*>(m.data);
  float* out = scratch(slot, n);
  const bf16* src = static_cast<const bf16*>(m.data);
  parallel_for(n, 1 << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = bf16_to_float(src[i]);
  });
  return out;
}

const float* dequantize_to_f32(const Fp8Matrix& q, int slot) {
  float* out = scratch(slot, q.rows * q.cols);
  const float* table = fp8_table(q.format);
  parallel_for(q.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(q.cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const uint8_t* codes = q.codes + r * q.cols;
                   float* dst = out + r * q.cols;
                   for (int64_t c0 = 0; c0 < q.cols; c0 += kBlock) {
                     const float inv = q.scale_inv[scale_index(q.block, q.rows, q.cols, r, c0)];
                     const int64_t c1 = std::min(q.cols, c0 + kBlock);
                     for (int64_t c = c0; c < c1; ++c) dst[c] = table[codes[c]] * inv;
                   }
                 }
               });
  return out;
}

// Writes an FP32 result into c (f32: already there; bf16: rounded to nearest even).
void store(const float* acc, const Matrix& c) {
  const int64_t n = c.rows * c.cols;
  bf16* dst = static_cast<bf16*>(c.data);
  parallel_for(n, 1 << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dst[i] = float_to_bf16(acc[i]);
  });
}

// Runs the FP32 product into c, through a scratch buffer when c is bf16.
void sgemm_into(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta,
                const Matrix& c) {
  if (c.dtype == DType::f32) {
    cpu_sgemm_nt(M, N, K, A, B, beta, static_cast<float*>(c.data));
  } else {
    float* acc = scratch(2, M * N);
    cpu_sgemm_nt(M, N, K, A, B, 0.0f, acc);
    store(acc, c);
  }
}

}  // namespace

std::string cpu_gemm_description() {
  std::string paths;
  for (CpuGemmPath p : cpu_gemm_paths())
    paths += std::string(paths.empty() ? "" : ", ") + cpu_gemm_path_name(p);
  return std::string("built-in FP32 GEMM, ") + cpu_gemm_path_name(cpu_gemm_default_path()) +
         " path (this CPU: " + paths + "; every path gives the same bits)";
}

void CpuBackend::gemm(const Matrix& a, const Matrix& b, const Matrix& c, float beta) {
  check_gemm_operands(a, b, c, beta);
  sgemm_into(a.rows, b.rows, a.cols, widen(a, 0), widen(b, 1), beta, c);
}

void CpuBackend::gemm_fp8(const Fp8Matrix& a, const Fp8Matrix& b, const Matrix& c, float beta) {
  check_gemm_fp8_operands(a, b, c, beta);
  sgemm_into(a.rows, b.rows, a.cols, dequantize_to_f32(a, 0), dequantize_to_f32(b, 1), beta, c);
}

}  // namespace fp8rl
