// Block-scaled FP8 grouped GEMM (mixture-of-experts experts, tokens sorted by expert) in one
// launch: c_g = dequant(a_g) · dequant(b_g)ᵀ for every group g, a 1x128 along K (activations),
// b 128x128 tiles (weights), FP32 accumulation — Backend::gemm_fp8_grouped's contract, without
// one cuBLASLt matmul per group (whose host cost dominates at expert sizes of a few hundred
// rows).
//
// A CTA computes one 128x128 tile of one group's output: blockIdx.x → (group, row tile, column
// tile) through a binary search over the groups' first CTA. It walks K in steps of 128 (one
// scale block of both operands): the A and B tiles (128 rows x 128 bytes each) are fetched with
// cp.async into a double buffer while the previous step multiplies. 8 warps, 2 (rows) x 4
// (columns), each owning 64 x 32 of the tile: per 32-wide k step, 4 A fragments and 2 B ldmatrix
// loads feed 16 mma.sync.m16n8k32 FP8 products. A K step's products sum in FP32 registers
// (`part`), which are then promoted into the accumulators with the step's scales,
// acc += part · (sa[row] · sb[tile]) — DeepGEMM's scheme, the block scales applied once per 128
// of K. Rows past a group's end and columns past N are zero-filled in shared memory and not
// stored; K must be a multiple of 16 (whole 16-byte chunks), a partial last block zero-filled.
//
// Fragment layouts relied on (PTX ISA, "Matrix fragments for mma.m16n8k32" with 8-bit types, and
// "ldmatrix"): lane = threadIdx.x % 32, g = lane / 4, c = lane % 4; each .b32 holds four FP8
// values, the lowest k in the lowest byte.
//  [A] A (16x32, .row): a0 = (row g, k 4c..4c+3), a1 = (row g+8, k 4c..4c+3),
//      a2 = (row g, k 16+4c..16+4c+3), a3 = (row g+8, k 16+4c..16+4c+3).
//  [B] B (32x8, .col): b0 = (k 4c..4c+3, col g), b1 = (k 16+4c..16+4c+3, col g).
//  [C] C/D (16x8 f32): c0, c1 = (row g, cols 2c, 2c+1), c2, c3 = (row g+8, cols 2c, 2c+1).
//  [L] ldmatrix .m8n8.x4.b16: lanes 8i .. 8i+7 give the 8 row addresses (16 bytes each) of
//      matrix i; register ri of a lane holds bytes 4c .. 4c+3 of row g of matrix i.
// So A from a row-major [m][k] tile at (m0, k0): lane l addresses row m0 + l%8 + 8·((l/8)%2),
// byte k0 + 16·(l/16) — matrices (rows 0-7, k 0-15), (rows 8-15, k 0-15), (rows 0-7, k 16-31),
// (rows 8-15, k 16-31) = a0..a3. B from a tile stored [n][k] (the weight's rows) at (n0, k0):
// lane l addresses row n0 + l%8 + 8·(l/16), byte k0 + 16·((l/8)%2) — matrices (n 0-7, k 0-15),
// (n 0-7, k 16-31), (n 8-15, k 0-15), (n 8-15, k 16-31): {r0, r1} = b0, b1 of n tile n0,
// {r2, r3} of n0 + 8. Shared rows are 144 bytes (a 16-byte pad: each row 4 banks on, so an
// ldmatrix matrix's 8 rows hit 8 different 4-bank groups).
#include "gemm_grouped_mma.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "cuda_check.hpp"
#include "fp8/format.hpp"
#include "mma_ptx.cuh"

namespace fp8rl::cuda {
namespace {

using namespace ptx;  // cp.async, ldmatrix, mma.sync (mma_ptx.cuh)

constexpr int kThreads = 256;       // 8 warps: 2 (rows) x 4 (columns)
constexpr int kTile = 128;          // output rows and columns of a CTA; K per step
constexpr int kPitch = kTile + 16;  // bytes of a shared row
constexpr int kTileBytes = kTile * kPitch;
constexpr size_t kSmem = 4 * static_cast<size_t>(kTileBytes);  // A and B, double-buffered
constexpr int kMaxGroups = 128;  // groups a launch takes (they travel as kernel parameters)

struct Params {
  const uint8_t* a;
  const float* a_scales;
  void* c;
  int64_t N, K;
  int groups, n_tiles;
  float beta;
  bool c_bf16;
  const uint8_t* b[kMaxGroups];
  const float* b_scales[kMaxGroups];
  int64_t first[kMaxGroups + 1];   // stacked row where each group starts; [groups]: the end
  int tile_first[kMaxGroups + 1];  // first CTA of each group; [groups]: the CTA count
};

template <bool kE4m3>
__global__ void __launch_bounds__(kThreads) grouped_fp8_mma_kernel(Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  // The group of this CTA: the last g with tile_first[g] ≤ blockIdx.x.
  const int t = static_cast<int>(blockIdx.x);
  int lo = 0, hi = p.groups - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (p.tile_first[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int grp = lo;
  const int local = t - p.tile_first[grp];
  const int64_t rows = p.first[grp + 1] - p.first[grp];
  const int64_t row0 = static_cast<int64_t>(local / p.n_tiles) * kTile;  // within the group
  const int64_t n0 = static_cast<int64_t>(local % p.n_tiles) * kTile;
  const int m_valid = static_cast<int>(min(static_cast<int64_t>(kTile), rows - row0));
  const int n_valid = static_cast<int>(min(static_cast<int64_t>(kTile), p.N - n0));
  const int64_t K = p.K, kbs = blocks_of(K);
  const uint8_t* A = p.a + (p.first[grp] + row0) * K;
  const uint8_t* B = p.b[grp] + n0 * K;
  const float* sa = p.a_scales + kbs * p.first[grp];  // [kbs][rows]
  const float* sb = p.b_scales[grp] + (n0 / kTile) * tile_scale_stride(K);

  // Stage `buf` ← K step kb: 128 rows x 8 chunks of 16 bytes for A, then B; chunks past the
  // group's rows, N or K are zeros.
  auto load = [&](int buf, int64_t kb) {
    unsigned char* tiles = smem + buf * 2 * kTileBytes;
    const int64_t k0 = kb * kTile;
#pragma unroll
    for (int i = 0; i < 2 * kTile * 8 / kThreads; ++i) {
      const int piece = static_cast<int>(threadIdx.x) + i * kThreads;
      const int which = piece / (kTile * 8), r = (piece / 8) % kTile, q = piece % 8;
      const int64_t k = k0 + 16 * q;
      unsigned char* dst = tiles + which * kTileBytes + r * kPitch + 16 * q;
      const bool valid = (which == 0 ? r < m_valid : r < n_valid) && k < K;
      if (valid) {
        cp_async16(dst, (which == 0 ? A : B) + r * K + k);
      } else {
        *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
      }
    }
  };

  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int wm = warp / 4, wn = warp % 4;  // rows 64·wm .., columns 32·wn ..
  const int gq = lane >> 2, cq = lane & 3;
  // The lane's ldmatrix row and byte offsets within a tile ([L]).
  const uint32_t a_lane = static_cast<uint32_t>(
      (64 * wm + (lane & 7) + 8 * ((lane >> 3) & 1)) * kPitch + 16 * (lane >> 4));
  const uint32_t b_lane = static_cast<uint32_t>((32 * wn + (lane & 7) + 8 * (lane >> 4)) * kPitch +
                                                16 * ((lane >> 3) & 1));

  float acc[4][4][4] = {};

  load(0, 0);
  cp_async_commit();
  for (int64_t kb = 0; kb < kbs; ++kb) {
    const int buf = static_cast<int>(kb & 1);
    if (kb + 1 < kbs) load(buf ^ 1, kb + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const uint32_t As = smem_addr(smem + buf * 2 * kTileBytes), Bs = As + kTileBytes;
    float part[4][4][4] = {};
    // Not unrolled: one k step's fragments live at a time (the accumulators and the step's
    // partial sums already hold 128 registers).
#pragma unroll 1
    for (int ks = 0; ks < kTile / 32; ++ks) {
      uint32_t af[4][4], bf[2][4];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) ldsm_x4(af[mi], As + a_lane + (16 * mi) * kPitch + 32 * ks);
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) ldsm_x4(bf[nj], Bs + b_lane + (16 * nj) * kPitch + 32 * ks);
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          mma_fp8<kE4m3>(part[mi][ni], af[mi], bf[ni / 2][2 * (ni % 2)],
                         bf[ni / 2][2 * (ni % 2) + 1]);
    }
    // Promotion: this K step's block scales, once per row (rows past the group's end: 0).
    const float s_b = sb[kb];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = 64 * wm + 16 * mi + gq + 8 * half;
        const float s = r < m_valid ? sa[kb * rows + row0 + r] * s_b : 0.0f;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          acc[mi][ni][2 * half] += part[mi][ni][2 * half] * s;
          acc[mi][ni][2 * half + 1] += part[mi][ni][2 * half + 1] * s;
        }
      }
    __syncthreads();  // this buffer is refilled by the next step's load
  }
  cp_async_wait<0>();  // the last step's (empty) group

  // c = acc (+ beta·c), the group's rows and N's columns only.
  const int64_t ldc = p.N;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = 64 * wm + 16 * mi + gq + 8 * half;
      if (r >= m_valid) continue;
      const int64_t out_row = (p.first[grp] + row0 + r) * ldc + n0;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int col = 32 * wn + 8 * ni + 2 * cq;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (col + e >= n_valid) continue;
          const float v = acc[mi][ni][2 * half + e];
          if (p.c_bf16) {
            static_cast<__nv_bfloat16*>(p.c)[out_row + col + e] = __float2bfloat16_rn(v);
          } else {
            float* o = static_cast<float*>(p.c) + out_row + col + e;
            *o = p.beta != 0.0f ? v + p.beta * *o : v;
          }
        }
      }
    }
}

template <bool kE4m3>
void launch(const Params& p, unsigned ctas, cudaStream_t stream) {
  auto kernel = grouped_fp8_mma_kernel<kE4m3>;
  int device = 0, optin = 0;
  FP8RL_CUDA_CHECK(cudaGetDevice(&device));
  FP8RL_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  check(kSmem <= static_cast<size_t>(optin),
        "grouped_fp8_mma_kernel: needs " + std::to_string(kSmem) +
            " bytes of shared memory per block, the device allows " + std::to_string(optin));
  FP8RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmem)));
  kernel<<<ctas, kThreads, kSmem, stream>>>(p);
  check_launch("grouped_fp8_mma_kernel");
}

}  // namespace

std::string grouped_mma_problem(const GroupedMmaArgs& a) {
  if (a.K % 16 != 0) return "K = " + std::to_string(a.K) + " is not a multiple of 16";
  if (a.c_bf16 && a.beta != 0.0f) return "beta with a bf16 output";
  if (a.b.size() != a.rows.size() || a.b_scales.size() != a.rows.size())
    return "one weight per group needed";
  if (reinterpret_cast<uintptr_t>(a.a) % 16 != 0) return "a's codes are not 16-byte aligned";
  for (size_t g = 0; g < a.b.size(); ++g)
    if (a.rows[g] > 0 && reinterpret_cast<uintptr_t>(a.b[g]) % 16 != 0)
      return "group " + std::to_string(g) + "'s weight codes are not 16-byte aligned";
  return {};
}

void gemm_fp8_grouped_mma(const GroupedMmaArgs& a, cudaStream_t stream) {
  const std::string problem = grouped_mma_problem(a);
  check(problem.empty(), "gemm_fp8_grouped_mma: " + problem);
  if (a.N == 0 || a.K == 0) return;  // the caller handles empty products
  const int64_t n_tiles = (a.N + kTile - 1) / kTile;
  const size_t G = a.rows.size();
  int64_t first = 0;
  for (size_t g0 = 0; g0 < G; g0 += kMaxGroups) {
    Params p{};
    p.a = a.a;
    p.a_scales = a.a_scales;
    p.c = a.c;
    p.N = a.N;
    p.K = a.K;
    p.n_tiles = static_cast<int>(n_tiles);
    p.beta = a.beta;
    p.c_bf16 = a.c_bf16;
    const size_t count = std::min<size_t>(kMaxGroups, G - g0);
    p.groups = static_cast<int>(count);
    int64_t ctas = 0;
    for (size_t i = 0; i < count; ++i) {
      const int64_t rows = a.rows[g0 + i];
      p.b[i] = a.b[g0 + i];
      p.b_scales[i] = a.b_scales[g0 + i];
      p.first[i] = first;
      p.tile_first[i] = static_cast<int>(ctas);
      ctas += (rows + kTile - 1) / kTile * n_tiles;
      first += rows;
    }
    p.first[count] = first;
    check(ctas <= INT32_MAX, "gemm_fp8_grouped_mma: too many output tiles");
    p.tile_first[count] = static_cast<int>(ctas);
    if (ctas == 0) continue;
    const auto n = static_cast<unsigned>(ctas);
    if (a.e4m3)
      launch<true>(p, n, stream);
    else
      launch<false>(p, n, stream);
  }
}

}  // namespace fp8rl::cuda
