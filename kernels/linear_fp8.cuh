// The decode GEMM kernel of CudaBackend::linear_fp8 (linear_fp8.cu): y [M, N] = dequant(q(x)) ·
// dequant(w)ᵀ for few rows (M ≤ linear_fp8_max_rows), with x's 1x128 quantization fused in. The CPU
// reference is Backend::linear_fp8 (quantize, then gemm_fp8); larger M, E5M2 and shapes the kernel
// does not take go that way here too (quantize + cuBLASLt).
//
// A decode step's linear reads N·K weight bytes for 2·M·N·K FLOPs: it is bound by the weight
// stream. One launch:
//  - CTA (m tile, n tile, k split) owns 128 weight rows (one tile row of the 128x128 scales) and
//    Mt = 8·NT rows of x (NT ∈ {1, 2, 4, 8, 16}; M > 128 takes several m tiles, which re-read the
//    weight tile, from L2 when they run together: m tiles are the grid's fastest index), over
//    the 128-blocks [kb0, kb0 + nkb) of K.
//  - Its 8 warps first issue the loads of their first two weight blocks, then quantize x's
//    blocks of the split into shared memory — the arithmetic of quantize() (amax with NaN
//    winning, block_scale, 1/s by IEEE division, cvt.rn.satfinite of x·s), so the codes and
//    scales are quantize()'s bits — then stream the weight: warp w holds rows 16w .. 16w + 15 of
//    the tile, two blocks ahead in registers (16-byte loads, evict-first).
//  - Per 128-block, mma.sync m16n8k32 E4M3 (the weight rows as A, x's rows as B) sums the codes'
//    products; that sum times (x's block scale · the tile's scale) is added to FP32
//    accumulators. Like cuBLASLt's block-scaled kernels, the tensor cores sum each block in
//    reduced precision before the FP32 promotion (tests/ops/cases_gemm.cpp's device bound).
//  - K order inside a block is permuted identically for both operands (thread t of a row group
//    holds bytes 32t .. 32t + 31 of the block of weight rows g and g + 8 and of x's row g), so
//    each thread's weight bytes are one contiguous 32-byte read and a warp reads whole 128-byte
//    rows.
//  - With one split the CTA writes y. With more, each CTA writes its FP32 partial [split][M][N]
//    to scratch and counts itself on the tile's counter; the last CTA adds the splits in split
//    order (deterministic, whatever order they finished in), writes y and resets the counter.
//
// A header of its own so that the CUDA emulation runs the kernel on the CPU
// (tests/emulation/test_linear_fp8_emulated.cpp).
#pragma once

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda_check.hpp"
#include "fp8/format.hpp"
#include "mma_ptx.cuh"
#include "ops_common.cuh"

namespace fp8rl::decode_gemm {

using cuda::In, cuda::Out;
using namespace cuda::ptx;  // mma.sync (mma_ptx.cuh)

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16 * kWarps;             // weight rows per CTA: one scale tile row
constexpr int kBlockK = static_cast<int>(kBlock);  // 128
constexpr int kPitchPad = 16;                      // bytes after each staged row of x (banks)
constexpr size_t kSmemBudget = size_t{96} << 10;   // dynamic shared memory per CTA at most
constexpr int kMaxNt = 16;                         // Mt ≤ 128

struct DecodeGemmArgs {
  In x;
  const uint8_t* w;    // [N, K] E4M3 codes
  const float* ws;     // tile scales, s[(n / 128)·ws_stride + k / 128]
  Out y;               // [M, N]
  float* partial;      // [splits][M][N] when splits > 1
  unsigned* counters;  // one per (m tile, n tile) when splits > 1
  int64_t M, N, K, ws_stride;
  int kbs;           // 128-blocks of K
  int kb_per_split;  // blocks per split (the last split may have fewer)
  int splits;
  bool pow2;
};

// 32 bytes of weight row `row` at column k (both 16-byte halves guarded: K % 16 == 0, so a half
// is wholly inside or wholly outside the row); zeros outside the matrix.
struct RowChunk {
  uint4 lo, hi;
};
__device__ __forceinline__ RowChunk load_row_chunk(const DecodeGemmArgs& a, int64_t row,
                                                   int64_t k) {
  RowChunk c{make_uint4(0u, 0u, 0u, 0u), make_uint4(0u, 0u, 0u, 0u)};
  if (row < a.N) {
    const uint8_t* p = a.w + row * a.K + k;
    if (k + 16 <= a.K) c.lo = __ldcs(reinterpret_cast<const uint4*>(p));
    if (k + 32 <= a.K) c.hi = __ldcs(reinterpret_cast<const uint4*>(p + 16));
  }
  return c;
}

// A thread's share of one 128-block of its warp's 16 weight rows: rows g and g + 8, bytes
// 32t .. 32t + 31 (g = lane / 4, t = lane % 4).
struct WeightFrag {
  RowChunk r0, r8;
};

__device__ __forceinline__ unsigned word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
// Word i (0..7) of a 32-byte chunk.
__device__ __forceinline__ unsigned word(const RowChunk& c, int i) {
  return i < 4 ? word(c.lo, i) : word(c.hi, i - 4);
}

// max of two |x| where NaN wins (as quantize.cu).
__device__ __forceinline__ float amax_combine(float a, float b) {
  return (a != a || a > b) ? a : b;
}

template <int NT>
__global__ void __launch_bounds__(kThreads, 1) decode_gemm_kernel(DecodeGemmArgs a) {
  constexpr int kMt = 8 * NT;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int last_flag[1];

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kMt;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kTileRows;
  const int split = static_cast<int>(blockIdx.z);
  const int kb0 = split * a.kb_per_split;
  const int nkb = min(a.kb_per_split, a.kbs - kb0);  // ≥ 1 (the host sizes the splits)
  const int pitch = nkb * kBlockK + kPitchPad;       // bytes per staged row of x
  unsigned char* xq = smem;                          // [kMt][pitch] codes
  float* xs = reinterpret_cast<float*>(smem + static_cast<size_t>(kMt) * pitch);  // [nkb][kMt]

  // Weight rows of this thread and where its bytes of block kb start.
  const int64_t row_a = n0 + 16 * warp + g, row_b = row_a + 8;
  auto load_block = [&](int kbl) {
    WeightFrag f;
    const int64_t k = static_cast<int64_t>(kb0 + kbl) * kBlockK + 32 * t;
    f.r0 = load_row_chunk(a, row_a, k);
    f.r8 = load_row_chunk(a, row_b, k);
    return f;
  };
  const WeightFrag zero_frag{};
  WeightFrag f0 = load_block(0), f1 = nkb > 1 ? load_block(1) : zero_frag;

  // Stage q(x) for rows m0 .. m0 + kMt − 1 and this split's blocks: warp-per-block tasks, lane l
  // holding elements 4l .. 4l + 3 (one 32-bit store of codes). Rows ≥ M: zero codes and scales.
  // A warp's tasks go kBatch at a time, their loads issued before any is reduced: one memory
  // latency per batch, not per task (at 64 rows a warp has 32 tasks).
  constexpr int kBatch = 8;
  const int tasks = kMt * nkb;
  for (int task0 = warp; task0 < tasks; task0 += kWarps * kBatch) {  // warp-uniform
    float v[kBatch][4];
    int n[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int task = task0 + kWarps * b, m = task / nkb, kbl = task - m * nkb;
      const int64_t row = m0 + m, k0 = static_cast<int64_t>(kb0 + kbl) * kBlockK;
      n[b] = task < tasks && row < a.M  // warp-uniform; 0: no values (zero codes and scale)
                 ? static_cast<int>(min(static_cast<int64_t>(kBlockK), a.K - k0))
                 : 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = 4 * lane + j;
        v[b][j] = c < n[b] ? a.x[row * a.K + k0 + c] : 0.0f;
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int task = task0 + kWarps * b, m = task / nkb, kbl = task - m * nkb;
      if (task >= tasks) break;  // warp-uniform
      unsigned packed = 0;
      float sinv = 0.0f;
      if (n[b] > 0) {  // warp-uniform
        float amax = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (4 * lane + j < n[b]) amax = amax_combine(amax, fabsf(v[b][j]));
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
          amax = amax_combine(amax, __shfl_xor_sync(cuda::kFullMask, amax, off));
        const float s = block_scale(amax, Fp8Format::e4m3, a.pow2, nullptr);
        sinv = __fdiv_rn(1.0f, s);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const unsigned code = 4 * lane + j < n[b]
                                    ? static_cast<unsigned>(__nv_cvt_float_to_fp8(
                                          __fmul_rn(v[b][j], s), __NV_SATFINITE, __NV_E4M3))
                                    : 0u;
          packed |= code << (8 * j);
        }
      }
      *reinterpret_cast<unsigned*>(xq + static_cast<size_t>(m) * pitch + kbl * kBlockK + 4 * lane) =
          packed;
      if (lane == 0) xs[kbl * kMt + m] = sinv;
    }
  }
  __syncthreads();

  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  const float* wscale = a.ws + (n0 / kBlockK) * a.ws_stride + kb0;
  for (int kbl = 0; kbl < nkb; ++kbl) {
    const WeightFrag f2 = kbl + 2 < nkb ? load_block(kbl + 2) : zero_frag;
    const float sw = __ldg(wscale + kbl);
    const unsigned char* xb = xq + kbl * kBlockK + 32 * t;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const unsigned char* xr = xb + static_cast<size_t>(8 * j + g) * pitch;
      const uint4 xlo = *reinterpret_cast<const uint4*>(xr);
      const uint4 xhi = *reinterpret_cast<const uint4*>(xr + 16);
      const RowChunk xc{xlo, xhi};
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int s = 0; s < 4; ++s) {  // k32 steps over bytes 8s .. 8s + 7 of the thread's chunk
        const uint32_t af[4] = {word(f0.r0, 2 * s), word(f0.r8, 2 * s), word(f0.r0, 2 * s + 1),
                                word(f0.r8, 2 * s + 1)};
        mma_fp8<true>(c, af, word(xc, 2 * s), word(xc, 2 * s + 1));  // E4M3, FP32 accumulation
      }
      const float2 sx = *reinterpret_cast<const float2*>(xs + kbl * kMt + 8 * j + 2 * t);
      const float s0 = sx.x * sw, s1 = sx.y * sw;
      acc[j][0] = fmaf(c[0], s0, acc[j][0]);  // (row g, col 2t)
      acc[j][1] = fmaf(c[1], s1, acc[j][1]);  // (row g, col 2t + 1)
      acc[j][2] = fmaf(c[2], s0, acc[j][2]);  // (row g + 8, col 2t)
      acc[j][3] = fmaf(c[3], s1, acc[j][3]);  // (row g + 8, col 2t + 1)
    }
    f0 = f1;
    f1 = f2;
  }

  // C fragment: acc[j][2h + e] is weight row row_a + 8h (output column n) and x row
  // m0 + 8j + 2t + e (output row m).
  auto for_each_acc = [&](auto&& f) {
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t m = m0 + 8 * j + 2 * t + e, n = row_a + 8 * h;
          if (m < a.M && n < a.N) f(m, n, acc[j][2 * h + e]);
        }
  };
  if (a.splits == 1) {
    for_each_acc([&](int64_t m, int64_t n, float v) { a.y.store(m * a.N + n, v); });
    return;
  }
  float* part = a.partial + static_cast<int64_t>(split) * a.M * a.N;
  for_each_acc([&](int64_t m, int64_t n, float v) { part[m * a.N + n] = v; });
  __threadfence();  // the partial is visible device-wide before the count
  __syncthreads();
  unsigned* counter = a.counters + static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0)
    last_flag[0] = atomicAdd(counter, 1u) == static_cast<unsigned>(a.splits - 1) ? 1 : 0;
  __syncthreads();
  if (!last_flag[0]) return;  // block-uniform
  __threadfence();
  // The last CTA of the tile: y = Σ_split partial, in split order, coalesced along n.
  const int rows = static_cast<int>(min(static_cast<int64_t>(kMt), a.M - m0));
  const int cols = static_cast<int>(min(static_cast<int64_t>(kTileRows), a.N - n0));
  for (int e = threadIdx.x; e < rows * kTileRows; e += kThreads) {
    const int mm = e / kTileRows, nn = e - mm * kTileRows;
    if (nn >= cols) continue;
    const int64_t at = (m0 + mm) * a.N + n0 + nn;
    float sum = 0.0f;
    for (int z = 0; z < a.splits; ++z) sum += __ldcg(a.partial + z * a.M * a.N + at);
    a.y.store(at, sum);
  }
  if (threadIdx.x == 0) *counter = 0u;  // ready for the next launch (stream order)
}

// The launch of one NT. Dynamic shared memory above 48 KB needs the attribute, once per device
// (the runtime keeps it per device context).
template <int NT>
void launch_decode_gemm(const DecodeGemmArgs& a, dim3 grid, size_t smem, int device,
                        cudaStream_t stream) {
  static uint64_t attribute_set = 0;  // bit d: set on device d (one thread at a time per backend)
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (attribute_set & bit) == 0) {
    FP8RL_CUDA_CHECK(cudaFuncSetAttribute(decode_gemm_kernel<NT>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kSmemBudget)));
    attribute_set |= bit;
  }
  decode_gemm_kernel<NT><<<grid, kThreads, smem, stream>>>(a);
  cuda::check_launch("decode_gemm_kernel");
}

// Shared memory of a CTA with Mt rows and nkb blocks: the codes (rows padded) and the scales.
inline size_t decode_gemm_smem(int mt, int nkb) {
  return static_cast<size_t>(mt) * (static_cast<size_t>(nkb) * kBlockK + kPitchPad) +
         static_cast<size_t>(nkb) * mt * sizeof(float);
}

// How a call is laid out: nt n8 tiles of x rows a CTA (the fewest that hold M, at most 16: then
// several m tiles), the splits of K (`splits` when given, else enough CTAs for `cta_target`;
// then as few blocks per split as that needs within shared memory, and the split count that
// covers K with them), the grid and the shared memory.
struct Plan {
  int nt = 1, kb_per = 1, splits = 1;
  int64_t tiles = 1;  // m tiles × n tiles
  dim3 grid;
  size_t smem = 0;
};
inline Plan plan_decode_gemm(int64_t M, int64_t N, int64_t K, int64_t splits, int64_t cta_target) {
  Plan p;
  while (p.nt < kMaxNt && 8 * p.nt < M) p.nt *= 2;
  const int mt = 8 * p.nt;
  const int64_t m_tiles = (M + mt - 1) / mt, n_tiles = (N + kTileRows - 1) / kTileRows;
  const int kbs = static_cast<int>(blocks_of(K));
  int kb_cap = 1;  // blocks a CTA's shared memory holds
  while (kb_cap < kbs && decode_gemm_smem(mt, kb_cap + 1) <= kSmemBudget) ++kb_cap;
  p.tiles = m_tiles * n_tiles;
  int64_t want = splits > 0 ? splits : (cta_target + p.tiles - 1) / p.tiles;
  want = std::clamp<int64_t>(want, 1, kbs);
  p.kb_per = std::min(static_cast<int>((kbs + want - 1) / want), kb_cap);
  p.splits = (kbs + p.kb_per - 1) / p.kb_per;
  p.grid = dim3(static_cast<unsigned>(m_tiles), static_cast<unsigned>(n_tiles),
                static_cast<unsigned>(p.splits));
  p.smem = decode_gemm_smem(mt, p.kb_per);
  return p;
}

// Launches the plan's kernel on a (its kbs, kb_per_split and splits are set from the plan; the
// caller sets the rest, with partial and counters when the plan has splits).
inline void launch(DecodeGemmArgs a, const Plan& p, int device, cudaStream_t stream) {
  a.kbs = static_cast<int>(blocks_of(a.K));
  a.kb_per_split = p.kb_per;
  a.splits = p.splits;
  switch (p.nt) {
    case 1:
      launch_decode_gemm<1>(a, p.grid, p.smem, device, stream);
      break;
    case 2:
      launch_decode_gemm<2>(a, p.grid, p.smem, device, stream);
      break;
    case 4:
      launch_decode_gemm<4>(a, p.grid, p.smem, device, stream);
      break;
    case 8:
      launch_decode_gemm<8>(a, p.grid, p.smem, device, stream);
      break;
    default:
      launch_decode_gemm<16>(a, p.grid, p.smem, device, stream);
      break;
  }
}

}  // namespace fp8rl::decode_gemm
