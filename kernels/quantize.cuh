// Block quantization on the device, shared by the quantize kernels (quantize.cu; the x / xᵀ
// kernels live here) and the producers that quantize what they write (RMSNorm, SwiGLU:
// quantize_produced_kernel below). A tensor with a transposed copy is quantized in 128x128 tiles:
// whole tiles from registers (quantize_tile_registers, the default) and the rest staged in shared
// memory (quantize_staged_lines; every tile with the kernel option quantize_tile_kernel 1). The
// CUDA emulation runs this file on the CPU (tests/emulation/test_quantize_emulated.cpp).
// Bit-exact with the CPU reference (engine/backend/cpu/quantize.cpp): see quantize.cu.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "fp8/format.hpp"
#include "ops_common.cuh"

namespace fp8rl::quant {

inline constexpr int kThreads = 256;  // every kernel here: 8 warps
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kTile = static_cast<int>(kBlock);  // 128
inline constexpr int kPitch = kTile + 1;  // shared tile row pitch in floats: odd, so columns are
                                          // read without bank conflicts
inline constexpr size_t kTransposeSmem = sizeof(float) * kTile * kPitch;  // 66,048 bytes
inline constexpr unsigned kFullMask = 0xffffffffu;

// --- element helpers

__device__ __forceinline__ float load_elem(const float* __restrict__ p, int64_t i) {
  return __ldg(p + i);
}
// bf16 as raw bits: the value is bits << 16 (exact).
__device__ __forceinline__ float load_elem(const uint16_t* __restrict__ p, int64_t i) {
  return __uint_as_float(static_cast<unsigned>(__ldg(p + i)) << 16);
}

template <Fp8Format F>
__device__ __forceinline__ __nv_fp8_interpretation_t interpretation() {
  return F == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2;
}

// Round to nearest even, saturating to the finite maximum (±inf too), NaN → 0x7f.
template <Fp8Format F>
__device__ __forceinline__ uint8_t encode(float v) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, interpretation<F>());
}

// Exact: every FP8 value is a half value.
template <Fp8Format F>
__device__ __forceinline__ float decode(uint8_t code) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, interpretation<F>())));
}

// max of two |x| values where NaN wins (fmaxf would drop it).
__device__ __forceinline__ float amax_combine(float a, float b) {
  return (a != a || a > b) ? a : b;
}

__device__ __forceinline__ float warp_amax(float a) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) a = amax_combine(a, __shfl_xor_sync(kFullMask, a, off));
  return a;
}

// --- statistics

struct ThreadStats {
  unsigned long long elements = 0, blocks = 0, saturated = 0, flushed = 0, degenerate = 0;
  double err_sq = 0.0, ref_sq = 0.0;
};

// One quantized element: x the input, v = x·s, code = encode(v), sinv = 1/s.
template <Fp8Format F>
__device__ __forceinline__ void count_element(ThreadStats& st, float x, float v, uint8_t code,
                                              float sinv) {
  ++st.elements;
  if (!isnan(v) && fabsf(v) > fp8_max(F)) ++st.saturated;
  if (isfinite(x)) {
    if (x != 0.0f && (code & 0x7f) == 0) ++st.flushed;
    const float d = __fmul_rn(decode<F>(code), sinv);
    const double e = static_cast<double>(x) - static_cast<double>(d);
    st.err_sq += e * e;
    st.ref_sq += static_cast<double>(x) * static_cast<double>(x);
  }
}

// Adds a thread's partial sums into out. Every thread of the block must call it.
__device__ __forceinline__ void flush_stats(ThreadStats st, DeviceQuantStats* out) {
  if (out == nullptr) return;  // uniform: a kernel argument
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    st.elements += __shfl_down_sync(kFullMask, st.elements, off);
    st.blocks += __shfl_down_sync(kFullMask, st.blocks, off);
    st.saturated += __shfl_down_sync(kFullMask, st.saturated, off);
    st.flushed += __shfl_down_sync(kFullMask, st.flushed, off);
    st.degenerate += __shfl_down_sync(kFullMask, st.degenerate, off);
    st.err_sq += __shfl_down_sync(kFullMask, st.err_sq, off);
    st.ref_sq += __shfl_down_sync(kFullMask, st.ref_sq, off);
  }
  if ((threadIdx.x & 31) != 0) return;
  if (st.elements) atomicAdd(&out->elements, st.elements);
  if (st.blocks) atomicAdd(&out->blocks, st.blocks);
  if (st.saturated) atomicAdd(&out->saturated, st.saturated);
  if (st.flushed) atomicAdd(&out->flushed_to_zero, st.flushed);
  if (st.degenerate) atomicAdd(&out->degenerate_blocks, st.degenerate);
  if (st.err_sq != 0.0) atomicAdd(&out->err_sq, st.err_sq);
  if (st.ref_sq != 0.0) atomicAdd(&out->ref_sq, st.ref_sq);
}

// --- one 1x128 block held by a warp: lane l holds elements l, l+32, l+64, l+96 (v[j]); n ≤ 128
// of them are valid. Writes the n codes to q[0..n) and 1/s to *scale. Warp-collective.
template <Fp8Format F, bool kStats>
__device__ __forceinline__ void quantize_warp_block(const float (&v)[4], int n, int lane, bool pow2,
                                                    uint8_t* __restrict__ q,
                                                    float* __restrict__ scale, ThreadStats& st) {
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (lane + 32 * j < n) amax = amax_combine(amax, fabsf(v[j]));
  amax = warp_amax(amax);
  bool degenerate = false;
  const float s = block_scale(amax, F, pow2, &degenerate);
  const float sinv = __fdiv_rn(1.0f, s);
  if (lane == 0) {
    *scale = sinv;
    if constexpr (kStats) {
      ++st.blocks;
      st.degenerate += degenerate ? 1 : 0;
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int c = lane + 32 * j;
    if (c < n) {
      const float x = v[j];
      const float xs = __fmul_rn(x, s);
      const uint8_t code = encode<F>(xs);
      q[c] = code;
      if constexpr (kStats) count_element<F>(st, x, xs, code, sinv);
    }
  }
}

// Where column c of a 128-wide tile row lives in the staged tile: each group of 8 columns is
// rotated by c / 32, so that the 16-byte staging (lane h writes columns 8h .. 8h + 7) spreads
// over the banks (at most 2-way), while rows (lane + 32j) and columns (row e = lane + 32j,
// pitch 129) are still read without conflicts.
__device__ __forceinline__ int tile_col(int c) {
  return (c & ~7) | (((c & 7) + (c >> 5)) & 7);
}

// How a 128x128 tile is staged in shared memory: FP32 values with an odd row pitch (column
// reads hit 32 banks), or — for values that are BF16 (every value of a BF16 tensor) — their
// 16-bit patterns with a pitch of 130 halves (65 words: again 32 banks down a column), half the
// shared memory, so twice the blocks per SM. Both hold the values exactly.
template <class S>
struct Stage;
template <>
struct Stage<float> {
  static constexpr int kPitch = kTile + 1;
  __device__ static float get(const float* t, int i) { return t[i]; }
  __device__ static void put(float* t, int i, float v) { t[i] = v; }
};
template <>
struct Stage<uint16_t> {
  static constexpr int kPitch = kTile + 2;
  __device__ static float get(const uint16_t* t, int i) {
    return __uint_as_float(static_cast<unsigned>(t[i]) << 16);
  }
  // v is a BF16 value (its low 16 bits zero): exact.
  __device__ static void put(uint16_t* t, int i, float v) {
    t[i] = static_cast<uint16_t>(__float_as_uint(v) >> 16);
  }
};
// Shared memory of a staged tile.
template <class S>
inline constexpr size_t kStageSmem = sizeof(S) * kTile* Stage<S>::kPitch;

// Line i < lines of a tile staged in shared memory ([kTile][pitch]: row i, or with kColumns
// column i) is one 1x128 block of len values: its codes go to row r0 + i of q [rows, cols] from
// column c0, its 1/s to the matching entry of qs. Warp w takes lines w, w + kWarps, ...
template <Fp8Format F, bool kStats, bool kColumns, class S = float>
__device__ __forceinline__ void quantize_staged_lines(const S* tile, int lines, int len, int lane,
                                                      int warp, bool pow2, uint8_t* __restrict__ q,
                                                      float* __restrict__ qs, int64_t rows,
                                                      int64_t cols, int64_t r0, int64_t c0,
                                                      ThreadStats& st) {
  constexpr int kP = Stage<S>::kPitch;
  for (int i = warp; i < lines; i += kWarps) {  // warp-uniform
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = lane + 32 * j;
      v[j] = e < len ? Stage<S>::get(tile, kColumns ? e * kP + tile_col(i) : i * kP + tile_col(e))
                     : 0.0f;
    }
    const int64_t r = r0 + i;
    quantize_warp_block<F, kStats>(v, len, lane, pow2, q + r * cols + c0,
                                   qs + scale_index(ScaleBlock::row1x128, rows, cols, r, c0), st);
  }
}

// The codes of v·s into q[0..8) (q 8-byte aligned); statistics per element when asked.
template <Fp8Format F, bool kStats>
__device__ __forceinline__ void encode8(const float (&v)[8], float s, float sinv,
                                        uint8_t* __restrict__ q, ThreadStats& st) {
  unsigned lo = 0, hi = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float xs = __fmul_rn(v[j], s);
    const uint8_t code = encode<F>(xs);
    if (j < 4) {
      lo |= static_cast<unsigned>(code) << (8 * j);
    } else {
      hi |= static_cast<unsigned>(code) << (8 * (j - 4));
    }
    if constexpr (kStats) count_element<F>(st, v[j], xs, code, sinv);
  }
  *reinterpret_cast<uint2*>(q) = make_uint2(lo, hi);
}

// --- 16-byte loads of x (the 16-byte paths of quantize.cu and the staging below)

// x[0..8) → v (x 16-byte aligned).
__device__ __forceinline__ void load8(const uint16_t* __restrict__ x, float (&v)[8]) {
  const uint4 u = __ldg(reinterpret_cast<const uint4*>(x));
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __uint_as_float(w[i] << 16);  // little-endian: the first bf16 is the low half
    v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void load8(const float* __restrict__ x, float (&v)[8]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(x));
  const float4 b = __ldg(reinterpret_cast<const float4*>(x) + 1);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// --- x and xᵀ quantized from one staged read (quantize_with_transpose)

// x [M, K] → q [M, K] 1x128 along K and qt [K, M] 1x128 along M, from one read of x: a 128x128
// tile of x is staged in shared memory (dynamic, kStageSmem<S> bytes); warps then quantize its
// rows (blocks of q) and its columns (blocks of qt). stats: 2 records (q, qt) or null.
// S: the staging (Stage), uint16_t only for a BF16 x. edges_only: whole tiles are skipped (the
// register kernel below took them).
template <typename T, Fp8Format F, bool kStats, class S>
__global__ void __launch_bounds__(kThreads)
    quantize_transpose_kernel(const T* __restrict__ x, int64_t M, int64_t K, bool pow2,
                              uint8_t* __restrict__ q, float* __restrict__ qs,
                              uint8_t* __restrict__ qt, float* __restrict__ qts,
                              DeviceQuantStats* stats, bool vec, bool edges_only) {
  extern __shared__ __align__(16) unsigned char stage_smem[];
  S* tile = reinterpret_cast<S*>(stage_smem);  // [kTile][Stage<S>::kPitch]
  constexpr int kP = Stage<S>::kPitch;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t kbs = blocks_of(K);
  const int64_t tiles = blocks_of(M) * kbs;
  ThreadStats st_along, st_trans;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // block-uniform
    const int64_t m0 = (t / kbs) * kBlock, k0 = (t % kbs) * kBlock;
    const int nm = static_cast<int>(min(kBlock, M - m0));
    const int nk = static_cast<int>(min(kBlock, K - k0));
    if (edges_only && nm == kTile && nk == kTile) continue;  // block-uniform
    __syncthreads();                          // readers of the previous tile are done
    if (vec && nm == kTile && nk == kTile) {  // block-uniform: 16-byte loads of a whole tile
      const int h = threadIdx.x & 15;
#pragma unroll
      for (int p = 0; p < kTile / 16; ++p) {
        const int i = (threadIdx.x >> 4) + 16 * p;
        float v[8];
        load8(x + (m0 + i) * K + k0 + 8 * h, v);
#pragma unroll
        for (int j = 0; j < 8; ++j) Stage<S>::put(tile, i * kP + tile_col(8 * h + j), v[j]);
      }
    } else {
      for (int i = warp; i < nm; i += kWarps) {
        const T* xr = x + (m0 + i) * K + k0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = lane + 32 * j;
          if (c < nk) Stage<S>::put(tile, i * kP + tile_col(c), load_elem(xr, c));
        }
      }
    }
    __syncthreads();
    // Rows of the tile: blocks of q (row m0 + i, cols k0 ..).
    quantize_staged_lines<F, kStats, false, S>(tile, nm, nk, lane, warp, pow2, q, qs, M, K, m0, k0,
                                               st_along);
    // Columns of the tile: blocks of qt (row k0 + i of xᵀ, cols m0 ..).
    quantize_staged_lines<F, kStats, true, S>(tile, nk, nm, lane, warp, pow2, qt, qts, K, M, k0, m0,
                                              st_trans);
  }
  if constexpr (kStats) {
    flush_stats(st_along, stats);
    flush_stats(st_trans, stats + 1);
  }
}

// --- x and xᵀ quantized from registers (kernel option quantize_tile_kernel 2, the default)

// A whole 128x128 tile held by the block's 256 threads, nothing staged: thread t holds rows
// 8g .. 8g + 7 (g = t / 16) and columns 8h .. 8h + 7 (h = t % 16) as v[p][j] (row 8g + p, column
// 8h + j). A row's 16 threads are one half-warp, which reduce-scatters the rows' amaxes (lanes
// 2p and 2p + 1 end with row p's) and shuffles each row's scale back; a column's 16 threads span
// the warps, whose partial amaxes over 16 rows meet in shared memory, where 128 threads make the
// columns' scales. Codes leave eight at a time: a row's eight columns to q, a column's eight rows
// to qt (8-byte stores: K % 8 == 0, M % 8 == 0, q and qt 8-byte aligned). Per block the same
// amax, scale and codes as quantize_staged_lines (amaxes are exact in any order); statistics are
// summed in another order. Instructions per element are what bound the staged kernels (a warp per
// 1x128 line, five shuffle rounds and a scale per line): here a row costs a quarter of a shuffle
// round per thread, a scale is made once per row or column, and nothing is staged.
// Its shared memory, in floats: the columns' amaxes over each warp's 16 rows ([kWarps][kTile]),
// then the columns' scales and their inverses ([kTile] each).
inline constexpr int kRegisterTileFloats = (kWarps + 2) * kTile;

// Quantizes the tile at (m0, k0) of [M, K] held in v as above: rows into q / qs (statistics into
// st_rows when kStatsRows), columns into qt / qts ([K, M]; st_cols when kStatsCols). Every thread
// of the block calls it; two barriers.
template <Fp8Format F, bool kStatsRows, bool kStatsCols>
__device__ __forceinline__ void quantize_tile_registers(
    const float (&v)[8][8], bool pow2, uint8_t* __restrict__ q, float* __restrict__ qs,
    uint8_t* __restrict__ qt, float* __restrict__ qts, int64_t M, int64_t K, int64_t m0, int64_t k0,
    float* smem, ThreadStats& st_rows, ThreadStats& st_cols) {
  float* part = smem;  // [kWarps][kTile]
  float* col_s = smem + kWarps * kTile;
  float* col_sinv = col_s + kTile;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int h = threadIdx.x & 15, g = threadIdx.x >> 4;
  // Columns first: the thread's amax of each of its columns, the warp's two row groups combined
  // (each lane keeping four of the eight columns), into shared memory; the rows' work below hides
  // the barrier's wait.
  {
    float c8[8], c4[4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      c8[j] = 0.0f;
#pragma unroll
      for (int p = 0; p < 8; ++p) c8[j] = amax_combine(c8[j], fabsf(v[p][j]));
    }
    const bool hi16 = lane & 16;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      c4[i] = amax_combine(hi16 ? c8[4 + i] : c8[i],
                           __shfl_xor_sync(kFullMask, hi16 ? c8[i] : c8[4 + i], 16));
#pragma unroll
    for (int i = 0; i < 4; ++i) part[warp * kTile + 8 * h + (hi16 ? 4 : 0) + i] = c4[i];
  }
  // Rows: the thread's amax of each row, reduce-scattered over the half-warp (the exchanges
  // across lane bits 3, 2 and 1 each halve the rows a lane keeps; bit 0 completes the pair).
  {
    float a8[8], a4[4], a2[2];
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      a8[p] = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) a8[p] = amax_combine(a8[p], fabsf(v[p][j]));
    }
    const bool hi8 = h & 8, hi4 = h & 4, hi2 = h & 2;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      a4[i] = amax_combine(hi8 ? a8[4 + i] : a8[i],
                           __shfl_xor_sync(kFullMask, hi8 ? a8[i] : a8[4 + i], 8));
#pragma unroll
    for (int i = 0; i < 2; ++i)
      a2[i] = amax_combine(hi4 ? a4[2 + i] : a4[i],
                           __shfl_xor_sync(kFullMask, hi4 ? a4[i] : a4[2 + i], 4));
    float amax =
        amax_combine(hi2 ? a2[1] : a2[0], __shfl_xor_sync(kFullMask, hi2 ? a2[0] : a2[1], 2));
    amax = amax_combine(amax, __shfl_xor_sync(kFullMask, amax, 1));
    bool degenerate = false;
    const float s = block_scale(amax, F, pow2, &degenerate);  // row 8g + h / 2
    const float sinv = __fdiv_rn(1.0f, s);
    if ((h & 1) == 0) {
      qs[scale_index(ScaleBlock::row1x128, M, K, m0 + 8 * g + (h >> 1), k0)] = sinv;
      if constexpr (kStatsRows) {
        ++st_rows.blocks;
        st_rows.degenerate += degenerate ? 1 : 0;
      }
    }
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      const int src = (lane & 16) | (p << 1);  // a lane holding row p's scale
      const float sp = __shfl_sync(kFullMask, s, src);
      float sinvp = 0.0f;
      if constexpr (kStatsRows) sinvp = __shfl_sync(kFullMask, sinv, src);
      encode8<F, kStatsRows>(v[p], sp, sinvp, q + (m0 + 8 * g + p) * K + k0 + 8 * h, st_rows);
    }
  }
  __syncthreads();            // the columns' partial amaxes are in
  if (threadIdx.x < kTile) {  // warp-uniform
    const int c = threadIdx.x;
    float amax = part[c];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) amax = amax_combine(amax, part[w * kTile + c]);
    bool degenerate = false;
    const float s = block_scale(amax, F, pow2, &degenerate);
    const float sinv = __fdiv_rn(1.0f, s);
    col_s[c] = s;
    col_sinv[c] = sinv;
    qts[scale_index(ScaleBlock::row1x128, K, M, k0 + c, m0)] = sinv;
    if constexpr (kStatsCols) {
      ++st_cols.blocks;
      st_cols.degenerate += degenerate ? 1 : 0;
    }
  }
  __syncthreads();  // the columns' scales are in
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    float col[8];
#pragma unroll
    for (int p = 0; p < 8; ++p) col[p] = v[p][j];
    const int c = 8 * h + j;
    encode8<F, kStatsCols>(col, col_s[c], col_sinv[c], qt + (k0 + c) * M + m0 + 8 * g, st_cols);
  }
}

// Whether the register kernels can take the whole tiles of [M, K]: the 16-byte loads (vec), the
// codes' 8-byte stores, at least one whole tile.
inline bool registers_fit(int64_t M, int64_t K, bool vec, const void* q, const void* qt) {
  return vec && M % 8 == 0 && M >= kBlock && K >= kBlock && cuda::pointer_alignment(q) >= 8 &&
         cuda::pointer_alignment(qt) >= 8;
}

// quantize_transpose_kernel's whole tiles from registers (the edges: quantize_transpose_kernel
// with edges_only). x's rows 16-byte aligned (K % 8 == 0).
template <typename T, Fp8Format F, bool kStats>
__global__ void __launch_bounds__(kThreads, 2)
    quantize_transpose_registers_kernel(const T* __restrict__ x, int64_t M, int64_t K, bool pow2,
                                        uint8_t* __restrict__ q, float* __restrict__ qs,
                                        uint8_t* __restrict__ qt, float* __restrict__ qts,
                                        DeviceQuantStats* stats) {
  __shared__ float regs_smem[kRegisterTileFloats];
  const int h = threadIdx.x & 15, g = threadIdx.x >> 4;
  const int64_t kts = K / kBlock, tiles = (M / kBlock) * kts;
  ThreadStats st_along, st_trans;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // block-uniform
    const int64_t m0 = (t / kts) * kBlock, k0 = (t % kts) * kBlock;
    float v[8][8];
#pragma unroll
    for (int p = 0; p < 8; ++p) load8(x + (m0 + 8 * g + p) * K + k0 + 8 * h, v[p]);
    quantize_tile_registers<F, kStats, kStats>(v, pow2, q, qs, qt, qts, M, K, m0, k0, regs_smem,
                                               st_along, st_trans);
  }
  if constexpr (kStats) {
    flush_stats(st_along, stats);
    flush_stats(st_trans, stats + 1);
  }
}

// Blocks of a grid-stride kernel: enough to fill the device (sm_count SMs), no more than there
// is work (work_blocks).
template <class Kernel>
unsigned fill_grid(Kernel kernel, size_t smem, int64_t work_blocks, int sm_count) {
  int per_sm = 0;
  FP8RL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
  const int64_t cap = static_cast<int64_t>(std::max(per_sm, 1)) * std::max(sm_count, 1);
  return static_cast<unsigned>(std::clamp<int64_t>(work_blocks, 1, cap));
}

// Launches the quantization of x [M, K] (both > 0) and xᵀ on the stream: with registers, the
// whole tiles from registers where they fit (registers_fit) and the edge tiles staged; else every
// tile staged (quantize_transpose_kernel; whole tiles with 16-byte loads when every row start is
// 16-byte aligned).
template <typename T, Fp8Format F, bool kStats, class S>
void launch_quantize_transpose(const T* x, int64_t M, int64_t K, bool pow2, uint8_t* q, float* qs,
                               uint8_t* qt, float* qts, DeviceQuantStats* stats, bool registers,
                               cudaStream_t stream, int sm_count) {
  const bool vec = K % 8 == 0 && cuda::pointer_alignment(x) >= 16;
  const int64_t tiles = blocks_of(M) * blocks_of(K);
  int64_t staged = tiles;  // tiles left to the staged kernel
  if (registers && registers_fit(M, K, vec, q, qt)) {
    auto kernel = quantize_transpose_registers_kernel<T, F, kStats>;
    const int64_t whole = (M / kBlock) * (K / kBlock);
    kernel<<<fill_grid(kernel, 0, whole, sm_count), kThreads, 0, stream>>>(x, M, K, pow2, q, qs, qt,
                                                                           qts, stats);
    cuda::check_launch("quantize_transpose_registers_kernel");
    staged -= whole;
    if (staged == 0) return;
  }
  auto kernel = quantize_transpose_kernel<T, F, kStats, S>;
  constexpr size_t kSmem = kStageSmem<S>;
  FP8RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmem)));
  kernel<<<fill_grid(kernel, kSmem, staged, sm_count), kThreads, kSmem, stream>>>(
      x, M, K, pow2, q, qs, qt, qts, stats, vec, staged != tiles);
  cuda::check_launch("quantize_transpose_kernel");
}

// One 1x128 block held by a half-warp: lane h of the half holds elements 8h .. 8h + 7 (v).
// Every lane of the warp must call it (the amax is reduced by shuffles within each half); a half
// whose `valid` is false only takes part in them. A valid half writes 1/s to *scale (lane h 0)
// and its codes to block[8h .. 8h + 8) (8-byte aligned).
template <Fp8Format F, bool kStats>
__device__ __forceinline__ void quantize_half_warp_block(const float (&v)[8], bool valid, int h,
                                                         bool pow2, uint8_t* __restrict__ block,
                                                         float* __restrict__ scale,
                                                         ThreadStats& st) {
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) amax = amax_combine(amax, fabsf(v[j]));
#pragma unroll
  for (int off = 8; off > 0; off >>= 1)  // within the half-warp
    amax = amax_combine(amax, __shfl_xor_sync(kFullMask, amax, off));
  if (!valid) return;
  bool degenerate = false;
  const float s = block_scale(amax, F, pow2, &degenerate);
  const float sinv = __fdiv_rn(1.0f, s);
  if (h == 0) {
    *scale = sinv;
    if constexpr (kStats) {
      ++st.blocks;
      st.degenerate += degenerate ? 1 : 0;
    }
  }
  encode8<F, kStats>(v, s, sinv, block + 8 * h, st);
}

// --- producers that quantize what they write

// Where a produced tensor's FP8 operands go: along [M, K] 1x128 along K (q, qs) and transposed
// [K, M] 1x128 along M (qt, qts; null: a forward-only input); the statistics of `along` are
// added to stats (null: none).
struct QuantTarget {
  uint8_t* q = nullptr;
  float* qs = nullptr;
  uint8_t* qt = nullptr;
  float* qts = nullptr;
  DeviceQuantStats* stats = nullptr;
};

// One pass over the 128x128 tiles of a tensor [M, K] that a producer computes element by element
// (an RMSNorm, a SwiGLU). For each of its Producer::kOutputs outputs (1 or 2) a tile is staged in
// shared memory (dynamic, kStageSmem<S> bytes) as the producer gives it — rounded to the output's
// dtype, and stored to the output by the producer when it has one — then the tile's rows are
// quantized into the target's `along` and its columns into `transposed`: the codes and scales
// quantize_1x128 / quantize_transpose_kernel make when they read the written output.
// Producer: value(o, r, c) → element (r, c) of output o; value8(o, r, c, v) → elements
// (r, c .. c + 7) (c a multiple of 8; used when vec: K % 8 == 0 and the producer's operands are
// 16-byte aligned, for whole tiles).
// S: the staging (Stage), uint16_t only for outputs whose values are BF16. edges_only: whole
// tiles are skipped (quantize_produced_registers_kernel took them).
template <class Producer, Fp8Format F, bool kStats, class S>
__global__ void __launch_bounds__(kThreads)
    quantize_produced_kernel(Producer prod, int64_t M, int64_t K, bool pow2, QuantTarget t0,
                             QuantTarget t1, bool vec, bool edges_only) {
  extern __shared__ __align__(16) unsigned char stage_smem[];
  S* tile = reinterpret_cast<S*>(stage_smem);  // [kTile][Stage<S>::kPitch]
  constexpr int kP = Stage<S>::kPitch;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t kbs = blocks_of(K);
  const int64_t tiles = blocks_of(M) * kbs;
  ThreadStats st[Producer::kOutputs];
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // block-uniform
    const int64_t m0 = (t / kbs) * kBlock, k0 = (t % kbs) * kBlock;
    const int nm = static_cast<int>(min(kBlock, M - m0));
    const int nk = static_cast<int>(min(kBlock, K - k0));
    if (edges_only && nm == kTile && nk == kTile) continue;  // block-uniform
#pragma unroll
    for (int o = 0; o < Producer::kOutputs; ++o) {
      const QuantTarget& tg = o == 0 ? t0 : t1;
      __syncthreads();                          // readers of the previous tile are done
      if (vec && nm == kTile && nk == kTile) {  // block-uniform: 8 consecutive elements a thread
        const int h = threadIdx.x & 15;
#pragma unroll 2
        for (int p = 0; p < kTile / 16; ++p) {
          const int i = (threadIdx.x >> 4) + 16 * p;
          float v[8];
          prod.value8(o, m0 + i, k0 + 8 * h, v);
#pragma unroll
          for (int j = 0; j < 8; ++j) Stage<S>::put(tile, i * kP + tile_col(8 * h + j), v[j]);
        }
      } else {
        for (int i = warp; i < nm; i += kWarps) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int c = lane + 32 * j;
            if (c < nk) Stage<S>::put(tile, i * kP + tile_col(c), prod.value(o, m0 + i, k0 + c));
          }
        }
      }
      __syncthreads();
      quantize_staged_lines<F, kStats, false, S>(tile, nm, nk, lane, warp, pow2, tg.q, tg.qs, M, K,
                                                 m0, k0, st[o]);
      if (tg.qt)  // block-uniform; no statistics of the transposed copy (as
                  // quantize_with_transpose)
        quantize_staged_lines<F, false, true, S>(tile, nk, nm, lane, warp, pow2, tg.qt, tg.qts, K,
                                                 M, k0, m0, st[o]);
    }
  }
  if constexpr (kStats) {
    flush_stats(st[0], t0.stats);
    if constexpr (Producer::kOutputs > 1) flush_stats(st[1], t1.stats);
  }
}

// The forward-only case (no transposed copy) of one output, K % 128 == 0, vec: no staging. A
// half-warp per 1x128 block, lane h of the half computing elements 8h .. 8h + 7 (value8) —
// the arithmetic of quantize_1x128_vec_kernel, so the same codes and scales.
template <class Producer, Fp8Format F, bool kStats>
__global__ void __launch_bounds__(kThreads)
    quantize_produced_rows_kernel(Producer prod, int64_t M, int64_t K, bool pow2, QuantTarget t0) {
  const int lane = threadIdx.x & 31, h = lane & 15, half = lane >> 4;
  const int64_t kbs = K / kBlock;
  const int64_t tasks = M * kbs;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) >> 5;
  const int64_t step = 2 * ((static_cast<int64_t>(gridDim.x) * kThreads) >> 5);
  ThreadStats st;
  for (int64_t base = 2 * warp; base < tasks; base += step) {  // warp-uniform
    const int64_t t = base + half;
    const int64_t r = t / kbs, c0 = (t % kbs) * kBlock;
    float v[8];
    if (t < tasks) {
      prod.value8(0, r, c0 + 8 * h, v);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = 0.0f;
    }
    const bool valid = t < tasks;
    quantize_half_warp_block<F, kStats>(
        v, valid, h, pow2, valid ? t0.q + r * K + c0 : nullptr,
        valid ? t0.qs + scale_index(ScaleBlock::row1x128, M, K, r, c0) : nullptr, st);
  }
  if constexpr (kStats) flush_stats(st, t0.stats);
}

// quantize_produced_kernel's whole tiles from registers (quantize_tile_registers), for outputs
// that all have a transposed copy: each output's tile computed with value8 (vec), quantized along
// (statistics of `along`, as the staged kernel) and transposed.
template <class Producer, Fp8Format F, bool kStats>
__global__ void __launch_bounds__(kThreads, 2)
    quantize_produced_registers_kernel(Producer prod, int64_t M, int64_t K, bool pow2,
                                       QuantTarget t0, QuantTarget t1) {
  __shared__ float regs_smem[kRegisterTileFloats];
  const int h = threadIdx.x & 15, g = threadIdx.x >> 4;
  const int64_t kts = K / kBlock, tiles = (M / kBlock) * kts;
  ThreadStats st[Producer::kOutputs], unused;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // block-uniform
    const int64_t m0 = (t / kts) * kBlock, k0 = (t % kts) * kBlock;
#pragma unroll
    for (int o = 0; o < Producer::kOutputs; ++o) {
      const QuantTarget& tg = o == 0 ? t0 : t1;
      float v[8][8];
#pragma unroll
      for (int p = 0; p < 8; ++p) prod.value8(o, m0 + 8 * g + p, k0 + 8 * h, v[p]);
      quantize_tile_registers<F, kStats, false>(v, pow2, tg.q, tg.qs, tg.qt, tg.qts, M, K, m0, k0,
                                                regs_smem, st[o], unused);
    }
  }
  if constexpr (kStats) {
    flush_stats(st[0], t0.stats);
    if constexpr (Producer::kOutputs > 1) flush_stats(st[1], t1.stats);
  }
}

// How the tiles of a tensor with a transposed copy are quantized (the kernel options
// quantize_tile_kernel and quantize_stage_bf16): whole tiles from registers where they fit, and
// the rest staged in shared memory, as FP32 values or (stage_bf16) as BF16 patterns.
struct TileChoice {
  bool registers = true;
  bool stage_bf16 = false;
};

// Launches the quantization of what prod produces over [M, K] (both > 0) on the stream: for one
// forward-only output of whole 1x128 blocks on the 16-byte path, quantize_produced_rows_kernel;
// else, with registers, the whole tiles from registers where they fit (every output transposed,
// registers_fit) and the edge tiles staged (quantize_produced_kernel); else every tile staged.
template <class Producer, Fp8Format F, bool kStats, class S>
void launch_produced(const Producer& prod, int64_t M, int64_t K, bool pow2, const QuantTarget& t0,
                     const QuantTarget& t1, bool vec, bool registers, cudaStream_t stream,
                     int sm_count) {
  if constexpr (Producer::kOutputs == 1) {
    if (t0.qt == nullptr && vec && K % kBlock == 0 && cuda::pointer_alignment(t0.q) >= 8) {
      auto kernel = quantize_produced_rows_kernel<Producer, F, kStats>;
      const int64_t warps = (M * (K / kBlock) + 1) / 2;  // two blocks per warp
      kernel<<<fill_grid(kernel, 0, (warps + kWarps - 1) / kWarps, sm_count), kThreads, 0,
               stream>>>(prod, M, K, pow2, t0);
      cuda::check_launch("quantize_produced_rows_kernel");
      return;
    }
  }
  const int64_t tiles = blocks_of(M) * blocks_of(K);
  int64_t staged = tiles;  // tiles left to the staged kernel
  bool fit = registers && t0.qt && registers_fit(M, K, vec, t0.q, t0.qt);
  if constexpr (Producer::kOutputs > 1) fit = fit && t1.qt && registers_fit(M, K, vec, t1.q, t1.qt);
  if (fit) {
    auto kernel = quantize_produced_registers_kernel<Producer, F, kStats>;
    const int64_t whole = (M / kBlock) * (K / kBlock);
    kernel<<<fill_grid(kernel, 0, whole, sm_count), kThreads, 0, stream>>>(prod, M, K, pow2, t0,
                                                                           t1);
    cuda::check_launch("quantize_produced_registers_kernel");
    staged -= whole;
    if (staged == 0) return;
  }
  auto kernel = quantize_produced_kernel<Producer, F, kStats, S>;
  constexpr size_t kSmem = kStageSmem<S>;
  FP8RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmem)));
  kernel<<<fill_grid(kernel, kSmem, staged, sm_count), kThreads, kSmem, stream>>>(
      prod, M, K, pow2, t0, t1, vec, staged != tiles);
  cuda::check_launch("quantize_produced_kernel");
}

// The same for the run-time format, the targets' statistics and the tile kernels (tiles).
template <class Producer, Fp8Format F, bool kStats>
void launch_produced(const Producer& prod, int64_t M, int64_t K, bool pow2, const QuantTarget& t0,
                     const QuantTarget& t1, bool vec, TileChoice tiles, cudaStream_t stream,
                     int sm_count) {
  if (tiles.stage_bf16) {
    launch_produced<Producer, F, kStats, uint16_t>(prod, M, K, pow2, t0, t1, vec, tiles.registers,
                                                   stream, sm_count);
  } else {
    launch_produced<Producer, F, kStats, float>(prod, M, K, pow2, t0, t1, vec, tiles.registers,
                                                stream, sm_count);
  }
}
template <class Producer>
void launch_produced(const Producer& prod, int64_t M, int64_t K, const QuantOptions& opt,
                     const QuantTarget& t0, const QuantTarget& t1, bool vec, TileChoice tiles,
                     cudaStream_t stream, int sm_count) {
  const bool stats = t0.stats || t1.stats;
  const bool pow2 = opt.pow2_scales;
  if (opt.format == Fp8Format::e4m3) {
    stats ? launch_produced<Producer, Fp8Format::e4m3, true>(prod, M, K, pow2, t0, t1, vec, tiles,
                                                             stream, sm_count)
          : launch_produced<Producer, Fp8Format::e4m3, false>(prod, M, K, pow2, t0, t1, vec, tiles,
                                                              stream, sm_count);
  } else {
    stats ? launch_produced<Producer, Fp8Format::e5m2, true>(prod, M, K, pow2, t0, t1, vec, tiles,
                                                             stream, sm_count)
          : launch_produced<Producer, Fp8Format::e5m2, false>(prod, M, K, pow2, t0, t1, vec, tiles,
                                                              stream, sm_count);
  }
}

// The target of out for a produced tensor [M, K] with opt (checked: shapes, blocks, formats,
// data), op naming the producer in errors.
inline QuantTarget produced_target(const char* op, int64_t M, int64_t K, const Fp8Operands& out,
                                   const QuantOptions& opt) {
  const std::string where = std::string(op) + ": ";
  const Fp8Matrix &a = out.along, &t = out.transposed;
  check(a.rows == M && a.cols == K && a.block == ScaleBlock::row1x128 && a.format == opt.format,
        where + "`along` must be [" + std::to_string(M) + ", " + std::to_string(K) +
            "] 1x128 in the options' format");
  check(a.codes && a.scale_inv, where + "null `along` data");
  QuantTarget tg{a.codes, a.scale_inv, nullptr, nullptr, opt.stats_sum};
  if (t.codes) {
    check(t.rows == K && t.cols == M && t.block == ScaleBlock::row1x128 && t.format == opt.format,
          where + "`transposed` must be [" + std::to_string(K) + ", " + std::to_string(M) +
              "] 1x128 in the options' format");
    check(t.scale_inv != nullptr, where + "null `transposed` scales");
    tg.qt = t.codes;
    tg.qts = t.scale_inv;
  }
  return tg;
}

// Eight consecutive elements x[i .. i + 8) of an f32 or bf16 operand (16-byte aligned) and their
// store, the 16-byte accesses of the vector path.
__device__ __forceinline__ void load8(const cuda::In& x, int64_t i, float (&v)[8]) {
  if (x.bf16) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(x.p) + i));
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[2 * j] = __uint_as_float(w[j] << 16);  // little-endian: the first bf16 is the low half
      v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
  } else {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(x.p) + i);
    const float4 a = __ldg(p), b = __ldg(p + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
}
// v must already be rounded to y's dtype (the bits are then exact).
__device__ __forceinline__ void store8(const cuda::Out& y, int64_t i, const float (&v)[8]) {
  if (y.bf16) {
    unsigned w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      w[j] = (__float_as_uint(v[2 * j]) >> 16) | (__float_as_uint(v[2 * j + 1]) & 0xffff0000u);
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(y.p) + i) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    float4* p = reinterpret_cast<float4*>(static_cast<float*>(y.p) + i);
    p[0] = make_float4(v[0], v[1], v[2], v[3]);
    p[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

}  // namespace fp8rl::quant
