// The CPU backend's FP32 GEMM, written so that its result depends on nothing but the inputs.
//
// Every output element is computed by one fixed sequence of FP32 operations (see sgemm.hpp):
// the order of the sum over K never depends on M or N, on where the element sits in a tile,
// on how the work is split between threads, or on the instruction set. Vectors run across
// output columns (one lane per element), never along K, and products and sums are rounded
// separately (no fused multiply-add: the project builds with -ffp-contract=off), so the SSE2,
// AVX2 and AVX-512 paths below give the same bits. A BLAS library gives none of this: its
// kernels (chosen per CPU model) and edge kernels (chosen per matrix size) sum in different
// orders, so a row's result changed with the batch it was computed in.
//
// Shapes: C[M,N] row-major (leading dimension N), A[M,K] and B[N,K] row-major (K contiguous).
#include "backend/cpu/sgemm.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
namespace {

// Cache blocking: a task owns a MB×NB block of C and walks K in slices of KC; the slice of B
// (NB×KC floats, 256 KiB) is packed once per task and slice and stays in L2 while the task's
// rows stream past it. The accumulator round-trips through C between K slices, which keeps
// the order of the sum (FP32 values are stored exactly).
constexpr int64_t kNr = 16;  // columns of a micro-tile (one lane each)
constexpr int64_t kKc = 256;
constexpr int64_t kNb = 256;  // multiple of kNr
constexpr int64_t kMb = 64;

// FP32 vectors of 4, 8 and 16 lanes (SSE2, AVX, AVX-512 registers). Lanes are independent
// output columns, so the width changes the speed, not the arithmetic.
using v4 = float __attribute__((vector_size(16)));
using v8 = float __attribute__((vector_size(32)));
using v16 = float __attribute__((vector_size(64)));

// c[r][0..16) += a_r[k] · bp[k][0..16) for k in [0, kc), rows r < MR; c holds MR×16 floats
// and bp is the packed panel (kc rows of 16 floats). V is the vector type used for a row.
template <int MR, class V>
[[gnu::always_inline]] inline void micro_tile(const float* const* a, const float* bp, int64_t kc,
                                              float* c) {
  constexpr int kLanes = sizeof(V) / sizeof(float), kVecs = kNr / kLanes;
  // One memcpy per vector: a wider copy is split into narrower moves by GCC, and loading a
  // vector from those stores stalls store forwarding (measured: AVX2 path at a third speed).
  V acc[MR][kVecs];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < kVecs; ++v) std::memcpy(&acc[r][v], c + r * kNr + v * kLanes, sizeof(V));
  for (int64_t k = 0; k < kc; ++k) {
    V b[kVecs];
    for (int v = 0; v < kVecs; ++v) std::memcpy(&b[v], bp + k * kNr + v * kLanes, sizeof(V));
    for (int r = 0; r < MR; ++r) {
      const float x = a[r][k];
      for (int v = 0; v < kVecs; ++v) acc[r][v] = acc[r][v] + x * b[v];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < kVecs; ++v) std::memcpy(c + r * kNr + v * kLanes, &acc[r][v], sizeof(V));
}

struct Problem {
  int64_t M, N, K;
  const float* A;
  const float* B;
  float beta;
  float* C;
};

// Packs B rows [n0, n0+nb), columns [k0, k0+kc) as panels of 16 columns: bp[p][k][j] =
// B[n0 + 16p + j][k0 + k], zero past nb (those lanes are computed and dropped).
void pack_b(const Problem& pr, int64_t n0, int64_t nb, int64_t k0, int64_t kc, float* bp) {
  const int64_t panels = (nb + kNr - 1) / kNr;
  for (int64_t p = 0; p < panels; ++p) {
    float* dst = bp + p * kc * kNr;
    for (int64_t j = 0; j < kNr; ++j) {
      const int64_t col = p * kNr + j;
      if (col >= nb) {
        for (int64_t k = 0; k < kc; ++k) dst[k * kNr + j] = 0.0f;
        continue;
      }
      const float* src = pr.B + (n0 + col) * pr.K + k0;
      for (int64_t k = 0; k < kc; ++k) dst[k * kNr + j] = src[k];
    }
  }
}

// One task: C[m0..m0+mb, n0..n0+nb) over all of K with micro-tiles of MR rows. Rows past the
// block's end read row m0 (valid memory; results dropped).
template <int MR, class V>
[[gnu::always_inline]] inline void block(const Problem& pr, int64_t m0, int64_t mb, int64_t n0,
                                         int64_t nb, float* bp) {
  const int64_t panels = (nb + kNr - 1) / kNr;
  alignas(64) float c[MR * kNr];
  static_assert(sizeof(V) * (kNr * sizeof(float) / sizeof(V)) == kNr * sizeof(float));
  for (int64_t k0 = 0; k0 < pr.K; k0 += kKc) {
    const int64_t kc = std::min(kKc, pr.K - k0);
    pack_b(pr, n0, nb, k0, kc, bp);
    for (int64_t i0 = m0; i0 < m0 + mb; i0 += MR) {
      const int64_t rows = std::min<int64_t>(MR, m0 + mb - i0);
      const float* a[MR];
      for (int r = 0; r < MR; ++r) a[r] = pr.A + (r < rows ? i0 + r : i0) * pr.K + k0;
      for (int64_t p = 0; p < panels; ++p) {
        const int64_t j0 = n0 + p * kNr, cols = std::min(kNr, n0 + nb - j0);
        // The accumulator starts as 0 or beta·C (first slice) or the partial sum in C.
        for (int64_t r = 0; r < MR; ++r)
          for (int64_t j = 0; j < kNr; ++j) {
            float v = 0.0f;
            if (r < rows && j < cols) {
              const float cij = pr.C[(i0 + r) * pr.N + j0 + j];
              v = k0 > 0 ? cij : pr.beta == 0.0f ? 0.0f : pr.beta * cij;
            }
            c[r * kNr + j] = v;
          }
        micro_tile<MR, V>(a, bp + p * kc * kNr, kc, c);
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(pr.C + (i0 + r) * pr.N + j0, c + r * kNr, sizeof(float) * size_t(cols));
      }
    }
  }
}

#if defined(__x86_64__)
// Same arithmetic, more rows per micro-tile where the ISA has the registers for it.
__attribute__((target("avx512f,avx512vl"))) void block_avx512(const Problem& pr, int64_t m0,
                                                              int64_t mb, int64_t n0, int64_t nb,
                                                              float* bp) {
  block<12, v16>(pr, m0, mb, n0, nb, bp);
}
__attribute__((target("avx2"))) void block_avx2(const Problem& pr, int64_t m0, int64_t mb,
                                                int64_t n0, int64_t nb, float* bp) {
  block<6, v8>(pr, m0, mb, n0, nb, bp);
}
#endif
void block_generic(const Problem& pr, int64_t m0, int64_t mb, int64_t n0, int64_t nb, float* bp) {
  block<3, v4>(pr, m0, mb, n0, nb, bp);
}

using BlockFn = void (*)(const Problem&, int64_t, int64_t, int64_t, int64_t, float*);

BlockFn block_fn(CpuGemmPath path) {
  switch (path) {
#if defined(__x86_64__)
    case CpuGemmPath::avx512:
      return block_avx512;
    case CpuGemmPath::avx2:
      return block_avx2;
#endif
    case CpuGemmPath::generic:
      return block_generic;
    default:
      break;
  }
  throw Error("cpu gemm: the " + std::string(cpu_gemm_path_name(path)) +
              " path does not exist on this CPU");
}

}  // namespace

const char* cpu_gemm_path_name(CpuGemmPath p) {
  switch (p) {
    case CpuGemmPath::generic:
      return "generic";
    case CpuGemmPath::avx2:
      return "avx2";
    case CpuGemmPath::avx512:
      return "avx512";
  }
  return "?";
}

std::vector<CpuGemmPath> cpu_gemm_paths() {
  std::vector<CpuGemmPath> out{CpuGemmPath::generic};
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) out.push_back(CpuGemmPath::avx2);
  if (__builtin_cpu_supports("avx512f")) out.push_back(CpuGemmPath::avx512);
#endif
  return out;
}

CpuGemmPath cpu_gemm_default_path() {
  static const CpuGemmPath path = [] {
    const auto paths = cpu_gemm_paths();
    if (const char* env = std::getenv("FP8RL_CPU_GEMM")) {
      for (CpuGemmPath p : paths)
        if (std::string(env) == cpu_gemm_path_name(p)) return p;
      std::string known;
      for (CpuGemmPath p : paths)
        known += std::string(known.empty() ? "" : ", ") + cpu_gemm_path_name(p);
      throw Error("FP8RL_CPU_GEMM='" + std::string(env) + "' is not a GEMM path of this CPU (" +
                  known + ")");
    }
    return paths.back();
  }();
  return path;
}

void cpu_sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta,
                  float* C, CpuGemmPath path) {
  if (M <= 0 || N <= 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M * N; ++i) C[i] = beta == 0.0f ? 0.0f : beta * C[i];
    return;
  }
  const BlockFn fn = block_fn(path);
  const Problem pr{M, N, K, A, B, beta, C};
  const int64_t mblocks = (M + kMb - 1) / kMb, nblocks = (N + kNb - 1) / kNb;
  // Tasks are disjoint blocks of C, so any split between threads gives the same result.
  parallel_for(mblocks * nblocks, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> packed;
    if (packed.size() < size_t(kNb * kKc)) packed.resize(size_t(kNb * kKc));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t mi = t / nblocks, ni = t % nblocks;
      const int64_t m0 = mi * kMb, n0 = ni * kNb;
      fn(pr, m0, std::min(kMb, M - m0), n0, std::min(kNb, N - n0), packed.data());
    }
  });
}

void cpu_sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta,
                  float* C) {
  cpu_sgemm_nt(M, N, K, A, B, beta, C, cpu_gemm_default_path());
}

}  // namespace fp8rl
