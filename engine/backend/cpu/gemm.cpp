// CPU reference GEMMs: inputs are widened (BF16) or dequantized (FP8) to FP32 exactly as the
// formats define them, then one FP32 sgemm with FP32 accumulation.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "fp8/codec.hpp"

#if defined(FP8RL_HAVE_BLAS)
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c, const int* ldc);
#endif
#if defined(FP8RL_HAVE_OPENBLAS)
extern "C" int openblas_get_num_threads(void);
extern "C" char* openblas_get_config(void);
#endif

namespace fp8rl {
namespace {

std::vector<float> widen(const Matrix& m) {
  const int64_t n = m.rows * m.cols;
  std::vector<float> out(static_cast<size_t>(n));
  if (m.dtype == DType::f32) {
    std::copy_n(static_cast<const float*>(m.data), n, out.data());
  } else {
    const bf16* src = static_cast<const bf16*>(m.data);
    parallel_for(n, 1 << 16, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) out[static_cast<size_t>(i)] = bf16_to_float(src[i]);
    });
  }
  return out;
}

std::vector<float> dequantize_to_f32(const Fp8Matrix& q) {
  std::vector<float> out(static_cast<size_t>(q.rows * q.cols));
  const float* table = fp8_table(q.format);
  parallel_for(q.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(q.cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const uint8_t* codes = q.codes + r * q.cols;
                   float* dst = out.data() + r * q.cols;
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
void store(const std::vector<float>& acc, const Matrix& c) {
  const int64_t n = c.rows * c.cols;
  bf16* dst = static_cast<bf16*>(c.data);
  parallel_for(n, 1 << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dst[i] = float_to_bf16(acc[static_cast<size_t>(i)]);
  });
}

// Runs the FP32 product into c, through a scratch buffer when c is bf16.
void sgemm_into(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta,
                const Matrix& c) {
  if (c.dtype == DType::f32) {
    cpu_sgemm_nt(M, N, K, A, B, beta, static_cast<float*>(c.data));
  } else {
    std::vector<float> acc(static_cast<size_t>(M * N));
    cpu_sgemm_nt(M, N, K, A, B, 0.0f, acc.data());
    store(acc, c);
  }
}

}  // namespace

void cpu_sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta,
                  float* C) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M * N; ++i) C[i] = beta == 0.0f ? 0.0f : beta * C[i];
    return;
  }
#if defined(FP8RL_HAVE_BLAS)
  check(M < (int64_t{1} << 31) && N < (int64_t{1} << 31) && K < (int64_t{1} << 31),
        "cpu gemm: dimensions exceed the BLAS 32-bit index range");
  // Row-major C[M,N] = A·Bᵀ is column-major Cᵀ = B·Aᵀ: sgemm("T", "N", N, M, K).
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  const float alpha = 1.0f;
  sgemm_("T", "N", &m, &n, &k, &alpha, B, &k, A, &k, &beta, C, &m);
#else
  parallel_for(M, 1, [&](int64_t m0, int64_t m1) {
    for (int64_t i = m0; i < m1; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float acc = 0.0f;
        const float* a = A + i * K;
        const float* b = B + j * K;
        for (int64_t k = 0; k < K; ++k) acc += a[k] * b[k];
        float& out = C[i * N + j];
        out = beta == 0.0f ? acc : acc + beta * out;
      }
  });
#endif
}

std::string cpu_blas_description() {
#if defined(FP8RL_HAVE_OPENBLAS)
  return std::string(openblas_get_config()) + " (" + std::to_string(openblas_get_num_threads()) +
         " threads)";
#elif defined(FP8RL_HAVE_BLAS)
  return "system BLAS (sgemm)";
#else
  return "no BLAS: built-in FP32 loop";
#endif
}

void CpuBackend::gemm(const Matrix& a, const Matrix& b, const Matrix& c, float beta) {
  check_gemm_operands(a, b, c, beta);
  if (a.dtype == DType::f32) {
    sgemm_into(a.rows, b.rows, a.cols, static_cast<const float*>(a.data),
               static_cast<const float*>(b.data), beta, c);
    return;
  }
  const auto A = widen(a), B = widen(b);
  sgemm_into(a.rows, b.rows, a.cols, A.data(), B.data(), beta, c);
}

void CpuBackend::gemm_fp8(const Fp8Matrix& a, const Fp8Matrix& b, const Matrix& c, float beta) {
  check_gemm_fp8_operands(a, b, c, beta);
  const auto A = dequantize_to_f32(a), B = dequantize_to_f32(b);
  sgemm_into(a.rows, b.rows, a.cols, A.data(), B.data(), beta, c);
}

}  // namespace fp8rl
