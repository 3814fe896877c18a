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
// BF16 and FP8 operands are converted to the FP32 values they stand for while B's panels are
// packed and A's rows are staged per K slice: the same values a separate widening or
// dequantization pass would have produced, so the same bits, without that pass and its copy.
#include "backend/cpu/sgemm.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
namespace {

// Cache blocking: all of B is packed once per call, as panels of 16 columns per K slice of KC
// (dequantized or widened on the way), before any task starts; a task owns a MB×NB block of C
// and walks K in slices, reading its rows of A in place (FP32) or converted into a small
// buffer (BF16, FP8) once per slice. The accumulator round-trips through C (or, for a BF16 C,
// through an FP32 tile of the block) between K slices, which keeps the order of the sum (FP32
// values are stored exactly).
constexpr int64_t kNr = 16;  // columns of a micro-tile (one lane each)
constexpr int64_t kKc = 256;
constexpr int64_t kNb = 256;  // multiple of kNr
constexpr int64_t kMb = 72;   // a multiple of every path's micro-tile rows (12, 6, 3)

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

// Writes elements [k0, k0 + kc) of row `row` of op as FP32 values to dst[0], dst[stride], …
// (the values the operand stands for: see CpuGemmOperand).
[[gnu::always_inline]] inline void read_row(const CpuGemmOperand& op, int64_t row, int64_t k0,
                                            int64_t kc, float* dst, int64_t stride) {
  const int64_t at = row * op.cols + k0;
  switch (op.kind) {
    case CpuGemmOperand::Kind::f32: {
      const float* src = static_cast<const float*>(op.data) + at;
      for (int64_t k = 0; k < kc; ++k) dst[k * stride] = src[k];
      return;
    }
    case CpuGemmOperand::Kind::bf16: {
      const bf16* src = static_cast<const bf16*>(op.data) + at;
      for (int64_t k = 0; k < kc; ++k) dst[k * stride] = bf16_to_float(src[k]);
      return;
    }
    case CpuGemmOperand::Kind::fp8: {
      const uint8_t* src = static_cast<const uint8_t*>(op.data) + at;
      // One scale per 128 columns: the runs between block boundaries.
      for (int64_t b0 = 0; b0 < kc;) {
        const int64_t c = k0 + b0, b1 = std::min(kc, (c / kBlock + 1) * kBlock - k0);
        const float inv = op.scale_inv[scale_index(op.block, op.rows, op.cols, row, c)];
        for (int64_t k = b0; k < b1; ++k) dst[k * stride] = op.table[src[k]] * inv;
        b0 = b1;
      }
      return;
    }
  }
}

struct Problem {
  int64_t M, N, K;
  const CpuGemmOperand* A;
  const float* Bp;  // packed B: K slice at Bp + k0·Np, its panel p at + p·kc·kNr
  int64_t Np;       // N rounded up to kNr
  float beta;
  void* C;
  bool c_bf16;
};

// Packs panel p of the K slice starting at k0 (kc columns): bp[k][j] = B[16p + j][k0 + k],
// zero past N (those lanes are computed and dropped).
void pack_b_panel(const CpuGemmOperand& B, int64_t N, int64_t p, int64_t k0, int64_t kc,
                  float* bp) {
  for (int64_t j = 0; j < kNr; ++j) {
    const int64_t col = p * kNr + j;
    if (col >= N) {
      for (int64_t k = 0; k < kc; ++k) bp[k * kNr + j] = 0.0f;
      continue;
    }
    read_row(B, col, k0, kc, bp + j, kNr);
  }
}

// One task: C[m0..m0+mb, n0..n0+nb) over all of K with micro-tiles of MR rows. Rows past the
// block's end read the block's first row (valid memory; results dropped). abuf holds kMb×kKc
// floats (A's rows when A is not FP32), ctile kMb×kNb (the accumulators when C is BF16).
template <int MR, class V>
[[gnu::always_inline]] inline void block(const Problem& pr, int64_t m0, int64_t mb, int64_t n0,
                                         int64_t nb, float* abuf, float* ctile) {
  const int64_t panels = (nb + kNr - 1) / kNr;
  alignas(64) float c[MR * kNr];
  static_assert(sizeof(V) * (kNr * sizeof(float) / sizeof(V)) == kNr * sizeof(float));
  const bool a_in_place = pr.A->kind == CpuGemmOperand::Kind::f32;
  const float* a_f32 = static_cast<const float*>(pr.A->data);
  // The block's accumulators: C itself (FP32), or an FP32 tile that becomes BF16 at the end.
  float* acc = pr.c_bf16 ? ctile : static_cast<float*>(pr.C) + m0 * pr.N + n0;
  const int64_t ldc = pr.c_bf16 ? nb : pr.N;
  auto c_in = [&](int64_t i, int64_t j) {  // C's value at (i, j) before the call
    return pr.c_bf16 ? bf16_to_float(static_cast<const bf16*>(pr.C)[i * pr.N + j])
                     : static_cast<const float*>(pr.C)[i * pr.N + j];
  };
  for (int64_t k0 = 0; k0 < pr.K; k0 += kKc) {
    const int64_t kc = std::min(kKc, pr.K - k0);
    if (!a_in_place)
      for (int64_t r = 0; r < mb; ++r) read_row(*pr.A, m0 + r, k0, kc, abuf + r * kKc, 1);
    const float* bslice = pr.Bp + k0 * pr.Np + (n0 / kNr) * kc * kNr;
    for (int64_t i0 = m0; i0 < m0 + mb; i0 += MR) {
      const int64_t rows = std::min<int64_t>(MR, m0 + mb - i0);
      const float* a[MR];
      for (int r = 0; r < MR; ++r) {
        const int64_t row = r < rows ? i0 + r : m0;
        a[r] = a_in_place ? a_f32 + row * pr.K + k0 : abuf + (row - m0) * kKc;
      }
      for (int64_t p = 0; p < panels; ++p) {
        const int64_t j0 = n0 + p * kNr, cols = std::min(kNr, n0 + nb - j0);
        float* cblk = acc + (i0 - m0) * ldc + (j0 - n0);
        // The accumulator starts as 0 or beta·C (first slice) or the partial sum so far.
        for (int64_t r = 0; r < MR; ++r)
          for (int64_t j = 0; j < kNr; ++j) {
            float v = 0.0f;
            if (r < rows && j < cols)
              v = k0 > 0            ? cblk[r * ldc + j]
                  : pr.beta == 0.0f ? 0.0f
                                    : pr.beta * c_in(i0 + r, j0 + j);
            c[r * kNr + j] = v;
          }
        micro_tile<MR, V>(a, bslice + p * kc * kNr, kc, c);
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(cblk + r * ldc, c + r * kNr, sizeof(float) * size_t(cols));
      }
    }
  }
  if (pr.c_bf16)
    for (int64_t r = 0; r < mb; ++r) {
      bf16* dst = static_cast<bf16*>(pr.C) + (m0 + r) * pr.N + n0;
      for (int64_t j = 0; j < nb; ++j) dst[j] = float_to_bf16(ctile[r * ldc + j]);
    }
}

#if defined(__x86_64__)
// Same arithmetic, more rows per micro-tile where the ISA has the registers for it.
__attribute__((target("avx512f,avx512vl"))) void block_avx512(const Problem& pr, int64_t m0,
                                                              int64_t mb, int64_t n0, int64_t nb,
                                                              float* abuf, float* ctile) {
  block<12, v16>(pr, m0, mb, n0, nb, abuf, ctile);
}
__attribute__((target("avx2"))) void block_avx2(const Problem& pr, int64_t m0, int64_t mb,
                                                int64_t n0, int64_t nb, float* abuf, float* ctile) {
  block<6, v8>(pr, m0, mb, n0, nb, abuf, ctile);
}
#endif
void block_generic(const Problem& pr, int64_t m0, int64_t mb, int64_t n0, int64_t nb, float* abuf,
                   float* ctile) {
  block<3, v4>(pr, m0, mb, n0, nb, abuf, ctile);
}

using BlockFn = void (*)(const Problem&, int64_t, int64_t, int64_t, int64_t, float*, float*);

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

namespace {
std::atomic<int64_t> total_calls{0}, total_nanoseconds{0};
std::atomic<double> total_flops{0};
}  // namespace

CpuGemmTotals cpu_gemm_totals() {
  return {total_calls.load(), total_flops.load(),
          static_cast<double>(total_nanoseconds.load()) * 1e-9};
}

void cpu_gemm_nt(int64_t M, int64_t N, int64_t K, const CpuGemmOperand& A, const CpuGemmOperand& B,
                 float beta, void* C, bool c_bf16, CpuGemmPath path) {
  if (M <= 0 || N <= 0) return;
  struct Count {  // counted on every return
    std::chrono::steady_clock::time_point t0;
    double flops;
    ~Count() {
      total_calls.fetch_add(1, std::memory_order_relaxed);
      total_flops.fetch_add(flops, std::memory_order_relaxed);
      total_nanoseconds.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::steady_clock::now() - t0)
                                      .count(),
                                  std::memory_order_relaxed);
    }
  } count{std::chrono::steady_clock::now(),
          2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K)};
  if (K == 0) {
    for (int64_t i = 0; i < M * N; ++i) {
      if (c_bf16) {
        bf16& c = static_cast<bf16*>(C)[i];
        c = float_to_bf16(beta == 0.0f ? 0.0f : beta * bf16_to_float(c));
      } else {
        float& c = static_cast<float*>(C)[i];
        c = beta == 0.0f ? 0.0f : beta * c;
      }
    }
    return;
  }
  const BlockFn fn = block_fn(path);
  // B's panels, once for all tasks (in the calling thread's buffer, read by every worker).
  const int64_t panels = (N + kNr - 1) / kNr, slices = (K + kKc - 1) / kKc;
  thread_local std::vector<float> packed;
  if (packed.size() < size_t(panels * kNr * K)) packed.resize(size_t(panels * kNr * K));
  float* bp = packed.data();
  parallel_for(slices * panels, std::max<int64_t>(1, 16384 / (kNr * std::min(K, kKc))),
               [&](int64_t t0, int64_t t1) {
                 for (int64_t t = t0; t < t1; ++t) {
                   const int64_t s = t / panels, p = t % panels;
                   const int64_t k0 = s * kKc, kc = std::min(kKc, K - k0);
                   pack_b_panel(B, N, p, k0, kc, bp + k0 * panels * kNr + p * kc * kNr);
                 }
               });
  const Problem pr{M, N, K, &A, bp, panels * kNr, beta, C, c_bf16};
  const int64_t mblocks = (M + kMb - 1) / kMb, nblocks = (N + kNb - 1) / kNb;
  // Tasks are disjoint blocks of C, so any split between threads gives the same result.
  parallel_for(mblocks * nblocks, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> abuf, ctile;
    if (A.kind != CpuGemmOperand::Kind::f32 && abuf.size() < size_t(kMb * kKc))
      abuf.resize(size_t(kMb * kKc));
    if (c_bf16 && ctile.size() < size_t(kMb * kNb)) ctile.resize(size_t(kMb * kNb));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t mi = t / nblocks, ni = t % nblocks;
      const int64_t m0 = mi * kMb, n0 = ni * kNb;
      fn(pr, m0, std::min(kMb, M - m0), n0, std::min(kNb, N - n0), abuf.data(), ctile.data());
    }
  });
}

void cpu_sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta,
                  float* C, CpuGemmPath path) {
  const CpuGemmOperand a{CpuGemmOperand::Kind::f32, A, M, K, nullptr, nullptr, {}};
  const CpuGemmOperand b{CpuGemmOperand::Kind::f32, B, N, K, nullptr, nullptr, {}};
  cpu_gemm_nt(M, N, K, a, b, beta, C, false, path);
}

void cpu_sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta,
                  float* C) {
  cpu_sgemm_nt(M, N, K, A, B, beta, C, cpu_gemm_default_path());
}

}  // namespace fp8rl
