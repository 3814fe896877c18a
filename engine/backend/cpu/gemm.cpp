// CPU reference GEMMs: inputs are widened (BF16) or dequantized (FP8) to FP32 exactly as the
// formats define them, then one FP32 sgemm with FP32 accumulation.
#include <algorithm>
#include <mutex>
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
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_config(void);
#endif

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
  // One thread pool for the whole CPU backend: BLAS runs single-threaded inside our parallel
  // loop (OpenBLAS's own threads would spin after each call and starve the quantization and
  // dequantization loops that surround every FP8 GEMM). Split the larger of M and N.
  const bool split_m = M >= N;
  const int64_t outer = split_m ? M : N;
  const int64_t grain = std::max<int64_t>(64, outer / cpu_threads() + 1);
  parallel_for(outer, grain, [&](int64_t o0, int64_t o1) {
    // Row-major C[M,N] = A·Bᵀ is column-major Cᵀ = B·Aᵀ: sgemm("T", "N", N, M, K).
    const int k = static_cast<int>(K), ldc = static_cast<int>(N);
    const float alpha = 1.0f;
    if (split_m) {
      const int m = static_cast<int>(N), n = static_cast<int>(o1 - o0);
      sgemm_("T", "N", &m, &n, &k, &alpha, B, &k, A + o0 * K, &k, &beta, C + o0 * N, &ldc);
    } else {
      const int m = static_cast<int>(o1 - o0), n = static_cast<int>(M);
      sgemm_("T", "N", &m, &n, &k, &alpha, B + o0 * K, &k, A, &k, &beta, C + o0, &ldc);
    }
  });
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

void cpu_blas_init() {
#if defined(FP8RL_HAVE_OPENBLAS)
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
#endif
}

std::string cpu_blas_description() {
#if defined(FP8RL_HAVE_OPENBLAS)
  return std::string(openblas_get_config()) + ", called single-threaded per chunk";
#elif defined(FP8RL_HAVE_BLAS)
  return "system BLAS (sgemm)";
#else
  return "no BLAS: built-in FP32 loop";
#endif
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
