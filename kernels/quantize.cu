// FP8 block quantization kernels and the CudaBackend methods quantize, quantize_with_transpose,
// dequantize and transpose_fp8. Bit-exact with the CPU reference (engine/backend/cpu/quantize.cpp):
//  - amax of a block: NaN when any element is NaN, else max |x|;
//  - s = block_scale(amax, ...) (fp8/format.hpp, compiled for the device here), stored 1/s is an
//    IEEE division, codes are cvt.rn.satfinite(x·s) with x·s an IEEE product (no FTZ, no fast
//    math: the module is built without --use_fast_math).
// Statistics are per-thread partial sums, reduced per warp and added with one atomic per warp.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "fp8/format.hpp"
#include "grid_stride.cuh"
#include "ops_common.cuh"
#include "quantize.cuh"

namespace fp8rl {
namespace {

using namespace quant;  // the block quantization shared with the producers' fused kernels

// Calls inside(v[i][j], rr, cc) for each element v[i][j] a thread holds of a 128x128 tile that
// lies in the tile's valid nr x nc part, outside(v[i][j]) for the others: tile row
// rr = warp + kWarps·i, column cc = lane + 32j.
constexpr int kTileRowsPerThread = kTile / kWarps;  // 16
struct NoElementOp {
  __device__ void operator()(float&) const {}
};
template <class Inside, class Outside = NoElementOp>
__device__ __forceinline__ void for_each_tile_element(float (&v)[kTileRowsPerThread][4], int warp,
                                                      int lane, int nr, int nc, Inside inside,
                                                      Outside outside = {}) {
#pragma unroll
  for (int i = 0; i < kTileRowsPerThread; ++i) {
    const int rr = warp + kWarps * i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int cc = lane + 32 * j;
      if (rr < nr && cc < nc) {
        inside(v[i][j], rr, cc);
      } else {
        outside(v[i][j]);
      }
    }
  }
}

// The scale of the 128x128 tile at (r0, c0) from each thread's amax of its elements. Block-
// collective (every thread calls it; warp_max: kWarps floats of shared memory). Thread 0 writes
// 1/s to the tile's scale entry, and the last tile of a tile row its padding entries (1.0, see
// fp8/format.hpp).
struct TileScale {
  float s, sinv;
};
template <Fp8Format F, bool kStats>
__device__ __forceinline__ TileScale tile_scale(float amax, float* warp_max, int lane, int warp,
                                                bool pow2, float* __restrict__ qs, int64_t rows,
                                                int64_t cols, int64_t r0, int64_t c0,
                                                ThreadStats& st) {
  amax = warp_amax(amax);
  if (lane == 0) warp_max[warp] = amax;
  __syncthreads();
  amax = warp_max[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) amax = amax_combine(amax, warp_max[w]);
  __syncthreads();  // warp_max is rewritten for the next tile
  bool degenerate = false;
  const float s = block_scale(amax, F, pow2, &degenerate);
  const float sinv = __fdiv_rn(1.0f, s);
  if (threadIdx.x == 0) {
    qs[scale_index(ScaleBlock::tile128x128, rows, cols, r0, c0)] = sinv;
    if (c0 + kBlock >= cols)
      for (int64_t cb = blocks_of(cols); cb < tile_scale_stride(cols); ++cb)
        qs[(r0 / kBlock) * tile_scale_stride(cols) + cb] = 1.0f;
    if constexpr (kStats) {
      ++st.blocks;
      st.degenerate += degenerate ? 1 : 0;
    }
  }
  return {s, sinv};
}

// --- kernels

// 1x128 blocks along cols: one warp per block, grid-stride over the rows·blocks_of(cols) blocks
// (consecutive warps take consecutive blocks of a row, so loads are contiguous).
template <typename T, Fp8Format F, bool kStats>
__global__ void __launch_bounds__(kThreads)
    quantize_1x128_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, bool pow2,
                          uint8_t* __restrict__ q, float* __restrict__ qs,
                          DeviceQuantStats* stats) {
  const int lane = threadIdx.x & 31;
  const int64_t kbs = blocks_of(cols);
  const int64_t tasks = rows * kbs;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) >> 5;
  const int64_t step = (static_cast<int64_t>(gridDim.x) * kThreads) >> 5;
  ThreadStats st;
  for (int64_t t = first; t < tasks; t += step) {  // warp-uniform
    const int64_t r = t / kbs;
    const int64_t c0 = (t % kbs) * kBlock;
    const int n = static_cast<int>(min(kBlock, cols - c0));
    const T* xb = x + r * cols + c0;
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = lane + 32 * j;
      v[j] = c < n ? load_elem(xb, c) : 0.0f;
    }
    quantize_warp_block<F, kStats>(v, n, lane, pow2, q + r * cols + c0,
                                   qs + scale_index(ScaleBlock::row1x128, rows, cols, r, c0), st);
  }
  if constexpr (kStats) flush_stats(st, stats);
}

// 128x128 tiles: one block per tile (grid-stride). Thread (warp w, lane l) holds rows w + 8i
// (i < 16) and cols l + 32j (j < 4) of the tile in registers: one read of x.
template <typename T, Fp8Format F, bool kStats>
__global__ void __launch_bounds__(kThreads)
    quantize_tile_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, bool pow2,
                         uint8_t* __restrict__ q, float* __restrict__ qs, DeviceQuantStats* stats) {
  __shared__ float warp_max[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t cbs = blocks_of(cols);
  const int64_t tiles = blocks_of(rows) * cbs;
  ThreadStats st;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // block-uniform
    const int64_t r0 = (t / cbs) * kBlock, c0 = (t % cbs) * kBlock;
    const int nr = static_cast<int>(min(kBlock, rows - r0));
    const int nc = static_cast<int>(min(kBlock, cols - c0));
    float v[kTileRowsPerThread][4];
    float amax = 0.0f;
    for_each_tile_element(
        v, warp, lane, nr, nc,
        [&](float& e, int rr, int cc) {
          e = load_elem(x, (r0 + rr) * cols + c0 + cc);
          amax = amax_combine(amax, fabsf(e));
        },
        [](float& e) { e = 0.0f; });
    const TileScale ts =
        tile_scale<F, kStats>(amax, warp_max, lane, warp, pow2, qs, rows, cols, r0, c0, st);
    const float s = ts.s, sinv = ts.sinv;
    for_each_tile_element(v, warp, lane, nr, nc, [&](float& e, int rr, int cc) {
      const float xs = __fmul_rn(e, s);
      const uint8_t code = encode<F>(xs);
      q[(r0 + rr) * cols + c0 + cc] = code;
      if constexpr (kStats) count_element<F>(st, e, xs, code, sinv);
    });
  }
  if constexpr (kStats) flush_stats(st, stats);
}

// --- 16-byte paths: eight consecutive elements per thread (one 16-byte load of bf16, two of
// f32) and their eight codes in one 8-byte store. Used where every block is whole (cols a
// multiple of 128) and x, q are aligned for it (see vector_ok); the same arithmetic per element,
// and amax is a max (NaN wins whatever the order), so the codes and scales are the same bits.

// 1x128 blocks along cols (cols % 128 == 0): a half-warp per block, lane h of the half holds
// elements 8h .. 8h + 7; a warp takes two consecutive blocks and the loads of its next pair are
// issued before the current pair is quantized (two pairs in flight per warp).
template <typename T, Fp8Format F, bool kStats>
__global__ void __launch_bounds__(kThreads)
    quantize_1x128_vec_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, bool pow2,
                              uint8_t* __restrict__ q, float* __restrict__ qs,
                              DeviceQuantStats* stats) {
  const int lane = threadIdx.x & 31, h = lane & 15, half = lane >> 4;
  const int64_t kbs = cols / kBlock;
  const int64_t tasks = rows * kbs;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) >> 5;
  const int64_t step = 2 * ((static_cast<int64_t>(gridDim.x) * kThreads) >> 5);
  ThreadStats st;
  auto load = [&](int64_t t, float(&v)[8]) {
    if (t < tasks) {
      load8(x + t * kBlock + 8 * h, v);  // block t starts at element t·128 (whole blocks)
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = 0.0f;
    }
  };
  float v[8], next[8];
  int64_t t = 2 * warp + half;
  load(t, v);
  for (int64_t base = 2 * warp; base < tasks; base += step) {  // warp-uniform
    load(t + step, next);
    const bool valid = t < tasks;
    const int64_t r = t / kbs, c0 = (t % kbs) * kBlock;
    // Block t starts at element t·128 (whole blocks).
    quantize_half_warp_block<F, kStats>(
        v, valid, h, pow2, valid ? q + t * kBlock : nullptr,
        valid ? qs + scale_index(ScaleBlock::row1x128, rows, cols, r, c0) : nullptr, st);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = next[j];
    t += step;
  }
  if constexpr (kStats) flush_stats(st, stats);
}

// 128x128 tiles (cols % 128 == 0 and whole tile rows; the last tile row may be partial): one
// block per tile, grid-stride. Thread (warp w, lane l) holds tile rows 2w + (l >> 4) + 16p
// (p < 8) at columns 8(l & 15) .. + 7 in registers: 16-byte loads, one read of x.
template <typename T, Fp8Format F, bool kStats>
__global__ void __launch_bounds__(kThreads)
    quantize_tile_vec_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, bool pow2,
                             uint8_t* __restrict__ q, float* __restrict__ qs,
                             DeviceQuantStats* stats) {
  __shared__ float warp_max[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row_in = 2 * warp + (lane >> 4), col_in = 8 * (lane & 15);
  const int64_t cbs = cols / kBlock;
  const int64_t tiles = blocks_of(rows) * cbs;
  ThreadStats st;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // block-uniform
    const int64_t r0 = (t / cbs) * kBlock, c0 = (t % cbs) * kBlock;
    const int nr = static_cast<int>(min(kBlock, rows - r0));
    float v[8][8];
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      const int rr = row_in + 16 * p;
      if (rr < nr) {
        load8(x + (r0 + rr) * cols + c0 + col_in, v[p]);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) v[p][j] = 0.0f;
      }
    }
    // Eight independent chains of eight (a max is exact in any order), not one of 64.
    float part[8];
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      part[p] = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) part[p] = amax_combine(part[p], fabsf(v[p][j]));
    }
    float amax = 0.0f;
#pragma unroll
    for (int p = 0; p < 8; ++p) amax = amax_combine(amax, part[p]);
    const TileScale ts =
        tile_scale<F, kStats>(amax, warp_max, lane, warp, pow2, qs, rows, cols, r0, c0, st);
    const float s = ts.s, sinv = ts.sinv;
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      const int rr = row_in + 16 * p;
      if (rr < nr) encode8<F, kStats>(v[p], s, sinv, q + (r0 + rr) * cols + c0 + col_in, st);
    }
  }
  if constexpr (kStats) flush_stats(st, stats);
}

// out[r, c] = decode(q[r, c]) · scale_inv[block of (r, c)] (one FP32 multiply). Block x covers
// kThreads columns; rows grid-stride over blockIdx.y.
template <Fp8Format F, typename OutT>
__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const uint8_t* __restrict__ q, const float* __restrict__ qs, int64_t rows,
                      int64_t cols, ScaleBlock block, OutT* __restrict__ out) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t i = r * cols + c;
    const uint8_t code = q[i];
    float v = __fmul_rn(decode<F>(code), __ldg(qs + scale_index(block, rows, cols, r, c)));
    if constexpr (sizeof(OutT) == 4) {
      // A NaN code gives the CPU's bits: its decode table holds ±NAN (0x7fc00000 with the
      // code's sign) and x86 passes that operand through the multiply; the GPU would return
      // 0x7fffffff.
      if (isnan(v)) v = __uint_as_float((code & 0x80) ? 0xffc00000u : 0x7fc00000u);
      out[i] = v;
    } else {
      out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
  }
}

// out [cols, rows] = in [rows, cols]ᵀ for bytes, through a 32x32 shared tile (block 32x8).
// Block x covers 32 columns of in; row tiles grid-stride over blockIdx.y.
__global__ void __launch_bounds__(kThreads)
    transpose_codes_kernel(const uint8_t* __restrict__ in, int64_t rows, int64_t cols,
                           uint8_t* __restrict__ out) {
  __shared__ uint32_t tile[32][33];  // 32-bit cells: conflict-free column reads
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * 32;
  const int64_t row_tiles = (rows + 31) / 32;
  for (int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {  // block-uniform
    const int64_t r0 = rt * 32;
#pragma unroll
    for (int i = 0; i < 32; i += 8) {
      const int64_t r = r0 + ty + i, c = c0 + tx;
      if (r < rows && c < cols) tile[ty + i][tx] = in[r * cols + c];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 32; i += 8) {
      const int64_t orow = c0 + ty + i, ocol = r0 + tx;  // out is [cols, rows]
      if (orow < cols && ocol < rows)
        out[orow * rows + ocol] = static_cast<uint8_t>(tile[tx][ty + i]);
    }
    __syncthreads();
  }
}

// Scale grid of wt [cols, rows] = that of w [rows, cols] transposed; the thread of a tile row's
// last tile also writes that row's padding entries (1.0, see fp8/format.hpp).
__global__ void __launch_bounds__(kThreads)
    transpose_tile_scales_kernel(const float* __restrict__ s, int64_t rows, int64_t cols,
                                 float* __restrict__ st) {
  const int64_t cbs = blocks_of(cols);
  const int64_t n = blocks_of(rows) * cbs;
  cuda::for_each_index<kThreads>(n, [&](int64_t i) {
    const int64_t r = (i / cbs) * kBlock, c = (i % cbs) * kBlock;
    st[scale_index(ScaleBlock::tile128x128, cols, rows, c, r)] =
        s[scale_index(ScaleBlock::tile128x128, rows, cols, r, c)];
    if (r + kBlock >= rows)  // wt's tile row c / 128 ends here
      for (int64_t cb = blocks_of(rows); cb < tile_scale_stride(rows); ++cb)
        st[(c / kBlock) * tile_scale_stride(rows) + cb] = 1.0f;
  });
}

// --- launch helpers

struct QuantLaunch {
  const void* x = nullptr;
  int64_t rows = 0, cols = 0;
  bool pow2 = false;
  uint8_t* q = nullptr;
  float* qs = nullptr;
  uint8_t* qt = nullptr;  // quantize_with_transpose only
  float* qts = nullptr;
  DeviceQuantStats* stats = nullptr;
  ScaleBlock block = ScaleBlock::row1x128;
  TileChoice tiles;  // quantize_with_transpose: the tile kernels
  cudaStream_t stream = nullptr;
  int sm_count = 1;
};

// Whether the 16-byte kernels apply: whole 1x128 blocks (cols % 128 == 0, so every row starts
// 16-byte aligned when x does) and 8-byte aligned codes.
bool vector_ok(const QuantLaunch& p) {
  return p.cols % kBlock == 0 && cuda::pointer_alignment(p.x) >= 16 &&
         cuda::pointer_alignment(p.q) >= 8;
}

// Launches a grid-stride kernel of p on fill_grid blocks for work_blocks blocks of work.
template <class Kernel, class... Args>
void launch_grid_stride(Kernel kernel, const char* name, size_t smem, int64_t work_blocks,
                        const QuantLaunch& p, Args... args) {
  const unsigned grid = fill_grid(kernel, smem, work_blocks, p.sm_count);
  kernel<<<grid, kThreads, smem, p.stream>>>(args...);
  cuda::check_launch(name);
}

template <typename T, Fp8Format F, bool kStats>
struct LaunchQuantize {
  static void run(const QuantLaunch& p) {
    const T* x = static_cast<const T*>(p.x);
    const bool vec = vector_ok(p);
    if (p.block == ScaleBlock::row1x128) {
      const int64_t blocks = p.rows * blocks_of(p.cols);
      if (vec) {
        const int64_t warps = (blocks + 1) / 2;  // two blocks per warp
        launch_grid_stride(quantize_1x128_vec_kernel<T, F, kStats>, "quantize_1x128_vec_kernel", 0,
                           (warps + kWarps - 1) / kWarps, p, x, p.rows, p.cols, p.pow2, p.q, p.qs,
                           p.stats);
      } else {
        launch_grid_stride(quantize_1x128_kernel<T, F, kStats>, "quantize_1x128_kernel", 0,
                           (blocks + kWarps - 1) / kWarps, p, x, p.rows, p.cols, p.pow2, p.q, p.qs,
                           p.stats);
      }
    } else if (vec) {
      launch_grid_stride(quantize_tile_vec_kernel<T, F, kStats>, "quantize_tile_vec_kernel", 0,
                         blocks_of(p.rows) * blocks_of(p.cols), p, x, p.rows, p.cols, p.pow2, p.q,
                         p.qs, p.stats);
    } else {
      launch_grid_stride(quantize_tile_kernel<T, F, kStats>, "quantize_tile_kernel", 0,
                         blocks_of(p.rows) * blocks_of(p.cols), p, x, p.rows, p.cols, p.pow2, p.q,
                         p.qs, p.stats);
    }
  }
};

template <typename T, Fp8Format F, bool kStats>
struct LaunchQuantizeTranspose {
  template <class S>
  static void run_staged(const QuantLaunch& p) {
    launch_quantize_transpose<T, F, kStats, S>(static_cast<const T*>(p.x), p.rows, p.cols, p.pow2,
                                               p.q, p.qs, p.qt, p.qts, p.stats, p.tiles.registers,
                                               p.stream, p.sm_count);
  }
  static void run(const QuantLaunch& p) {
    if constexpr (std::is_same_v<T, uint16_t>) {
      if (p.tiles.stage_bf16) return run_staged<uint16_t>(p);
    }
    run_staged<float>(p);
  }
};

// Picks the instantiation for the run-time input dtype, format and statistics flag.
template <template <typename, Fp8Format, bool> class Launch, typename T>
void dispatch_format(const QuantLaunch& p, Fp8Format f) {
  const bool stats = p.stats != nullptr;
  if (f == Fp8Format::e4m3) {
    stats ? Launch<T, Fp8Format::e4m3, true>::run(p) : Launch<T, Fp8Format::e4m3, false>::run(p);
  } else {
    stats ? Launch<T, Fp8Format::e5m2, true>::run(p) : Launch<T, Fp8Format::e5m2, false>::run(p);
  }
}

template <template <typename, Fp8Format, bool> class Launch>
void dispatch(const QuantLaunch& p, DType dtype, Fp8Format f) {
  if (dtype == DType::f32) {
    dispatch_format<Launch, float>(p, f);
  } else {
    dispatch_format<Launch, uint16_t>(p, f);
  }
}

std::string shape(const char* name, int64_t rows, int64_t cols) {
  return std::string(name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

void check_format(const char* op, const char* name, const Fp8Matrix& m, const QuantOptions& opt) {
  check(m.format == opt.format, std::string(op) + ": " + name + " is " + fp8_format_name(m.format) +
                                    " but the options ask for " + fp8_format_name(opt.format));
}

// Launch parameters of quantizing x into out (quantize, and the along-K output of
// quantize_with_transpose); stats: the device records or null.
QuantLaunch quant_launch(const Matrix& x, const Fp8Matrix& out, const QuantOptions& opt,
                         DeviceQuantStats* stats, cudaStream_t stream, int sm_count) {
  QuantLaunch p;
  p.x = x.data;
  p.rows = x.rows;
  p.cols = x.cols;
  p.pow2 = opt.pow2_scales;
  p.q = out.codes;
  p.qs = out.scale_inv;
  p.block = out.block;
  p.stream = stream;
  p.sm_count = sm_count;
  p.stats = stats;
  return p;
}

// The log2 bins of a scale grid's valid entries (scale_log2_bin): counted in shared memory per
// block, then one 64-bit atomic per non-empty bin per block. nbins = hi − lo + 2 ≤ 258.
constexpr int kMaxHistogramBins = 258;
__global__ void __launch_bounds__(kThreads)
    scale_log2_histogram_kernel(const float* __restrict__ s, int64_t rows, int64_t cols,
                                ScaleBlock block, int lo, int hi,
                                unsigned long long* __restrict__ counts) {
  __shared__ unsigned int bins[kMaxHistogramBins];
  const int nbins = hi - lo + 2;
  for (int i = static_cast<int>(threadIdx.x); i < nbins; i += kThreads) bins[i] = 0;
  __syncthreads();
  const int64_t cbs = blocks_of(cols);
  const int64_t rbs = block == ScaleBlock::row1x128 ? rows : blocks_of(rows);
  const int64_t rstep = block == ScaleBlock::row1x128 ? 1 : kBlock;
  cuda::for_each_index<kThreads>(rbs * cbs, [&](int64_t i) {
    const int64_t r = (i / cbs) * rstep, c = (i % cbs) * kBlock;
    atomicAdd(&bins[scale_log2_bin(s[scale_index(block, rows, cols, r, c)], lo, hi)], 1u);
  });
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < nbins; i += kThreads)
    if (bins[i] != 0) atomicAdd(counts + i, static_cast<unsigned long long>(bins[i]));
}

template <Fp8Format F, typename OutT>
void launch_dequantize(const Fp8Matrix& q, void* out, dim3 grid, cudaStream_t stream) {
  dequantize_kernel<F, OutT><<<grid, kThreads, 0, stream>>>(q.codes, q.scale_inv, q.rows, q.cols,
                                                            q.block, static_cast<OutT*>(out));
}

}  // namespace

quant::TileChoice CudaBackend::tile_choice(bool bf16) const {
  // quantize_tile_kernel 1 stages every tile; quantize_stage_bf16 1 stages BF16 values as their
  // 16-bit patterns.
  return {options_.quantize_tile_kernel != 1, options_.quantize_stage_bf16 == 1 && bf16};
}

void CudaBackend::quantize(const Matrix& x, const Fp8Matrix& out, const QuantOptions& opt,
                           QuantStats* stats) {
  const OpScope scope(*this, "quantize");
  check_quantize_operands(x, out);
  check_format("quantize", "output", out, opt);
  if (x.rows == 0 || x.cols == 0) {
    if (stats) *stats = QuantStats{};
    return;
  }
  check(x.data && out.codes && out.scale_inv, "quantize: null data pointer");
  make_current();
  const bool want_stats = stats || opt.stats_sum;
  const QuantLaunch p =
      quant_launch(x, out, opt, want_stats ? begin_stats() : nullptr, stream_, sm_count_);
  dispatch<LaunchQuantize>(p, x.dtype, opt.format);
  if (opt.stats_sum) add_stats(opt.stats_sum);
  if (stats) finish_stats(stats, nullptr);
}

void CudaBackend::quantize_with_transpose(const Matrix& x, const Fp8Matrix& along,
                                          const Fp8Matrix& transposed, const QuantOptions& opt,
                                          QuantStats* stats_along, QuantStats* stats_transposed) {
  const OpScope scope(*this, "quantize_with_transpose");
  check_quantize_operands(x, along);
  check(transposed.rows == x.cols && transposed.cols == x.rows,
        "quantize_with_transpose: " + shape("transposed", transposed.rows, transposed.cols) +
            " must be the transpose of " + shape("x", x.rows, x.cols));
  check(along.block == ScaleBlock::row1x128 && transposed.block == ScaleBlock::row1x128,
        "quantize_with_transpose: both outputs must be 1x128-scaled");
  check_format("quantize_with_transpose", "along", along, opt);
  check_format("quantize_with_transpose", "transposed", transposed, opt);
  if (x.rows == 0 || x.cols == 0) {
    if (stats_along) *stats_along = QuantStats{};
    if (stats_transposed) *stats_transposed = QuantStats{};
    return;
  }
  check(x.data && along.codes && along.scale_inv && transposed.codes && transposed.scale_inv,
        "quantize_with_transpose: null data pointer");
  make_current();
  const bool want_stats = stats_along || stats_transposed || opt.stats_sum;
  QuantLaunch p =
      quant_launch(x, along, opt, want_stats ? begin_stats() : nullptr, stream_, sm_count_);
  p.qt = transposed.codes;
  p.qts = transposed.scale_inv;
  p.tiles = tile_choice(x.dtype == DType::bf16);
  dispatch<LaunchQuantizeTranspose>(p, x.dtype, opt.format);
  if (opt.stats_sum) add_stats(opt.stats_sum);
  if (stats_along || stats_transposed) finish_stats(stats_along, stats_transposed);
}

namespace {

// sum += the record a quantization left in stats (one thread: a handful of additions).
__global__ void add_stats_kernel(DeviceQuantStats* __restrict__ sum,
                                 const DeviceQuantStats* __restrict__ stats) {
  sum->elements += stats->elements;
  sum->blocks += stats->blocks;
  sum->saturated += stats->saturated;
  sum->flushed_to_zero += stats->flushed_to_zero;
  sum->degenerate_blocks += stats->degenerate_blocks;
  sum->err_sq += stats->err_sq;
  sum->ref_sq += stats->ref_sq;
}

}  // namespace

void CudaBackend::add_stats(QuantStatsSum* sum) {
  add_stats_kernel<<<1, 1, 0, stream_>>>(sum, stats_dev_);
  cuda::check_launch("add_stats_kernel");
}

void CudaBackend::dequantize(const Fp8Matrix& q, const Matrix& out) {
  const OpScope scope(*this, "dequantize");
  check(q.rows == out.rows && q.cols == out.cols, "dequantize: " + shape("input", q.rows, q.cols) +
                                                      " vs " + shape("output", out.rows, out.cols));
  check(out.dtype == DType::f32 || out.dtype == DType::bf16,
        "dequantize: output must be f32 or bf16");
  if (q.rows == 0 || q.cols == 0) return;
  check(q.codes && q.scale_inv && out.data, "dequantize: null data pointer");
  make_current();
  const int64_t col_blocks = (q.cols + kThreads - 1) / kThreads;
  check(col_blocks <= INT_MAX, "dequantize: too many columns");
  const dim3 grid(static_cast<unsigned>(col_blocks),
                  static_cast<unsigned>(std::min<int64_t>(q.rows, 65535)));
  const bool f32 = out.dtype == DType::f32;
  if (q.format == Fp8Format::e4m3) {
    f32 ? launch_dequantize<Fp8Format::e4m3, float>(q, out.data, grid, stream_)
        : launch_dequantize<Fp8Format::e4m3, uint16_t>(q, out.data, grid, stream_);
  } else {
    f32 ? launch_dequantize<Fp8Format::e5m2, float>(q, out.data, grid, stream_)
        : launch_dequantize<Fp8Format::e5m2, uint16_t>(q, out.data, grid, stream_);
  }
  cuda::check_launch("dequantize_kernel");
}

void CudaBackend::transpose_fp8(const Fp8Matrix& w, const Fp8Matrix& wt) {
  const OpScope scope(*this, "transpose_fp8");
  check(w.block == ScaleBlock::tile128x128 && wt.block == ScaleBlock::tile128x128,
        std::string("transpose_fp8: needs 128x128-tile matrices, got w ") +
            scale_block_name(w.block) + " and wt " + scale_block_name(wt.block) +
            " (1x128 blocks do not survive a transpose: re-quantize instead)");
  check(wt.rows == w.cols && wt.cols == w.rows, "transpose_fp8: " + shape("wt", wt.rows, wt.cols) +
                                                    " must be the transpose of " +
                                                    shape("w", w.rows, w.cols));
  check(wt.format == w.format, "transpose_fp8: w and wt differ in FP8 format");
  if (w.rows == 0 || w.cols == 0) return;
  check(w.codes && w.scale_inv && wt.codes && wt.scale_inv, "transpose_fp8: null data pointer");
  check(w.codes != wt.codes && w.scale_inv != wt.scale_inv,
        "transpose_fp8: in-place transposition is not supported");
  make_current();
  const int64_t col_tiles = (w.cols + 31) / 32;
  check(col_tiles <= INT_MAX, "transpose_fp8: too many columns");
  const dim3 grid(static_cast<unsigned>(col_tiles),
                  static_cast<unsigned>(std::min<int64_t>((w.rows + 31) / 32, 65535)));
  transpose_codes_kernel<<<grid, dim3(32, kThreads / 32), 0, stream_>>>(w.codes, w.rows, w.cols,
                                                                        wt.codes);
  cuda::check_launch("transpose_codes_kernel");
  const int64_t tiles = blocks_of(w.rows) * blocks_of(w.cols);
  const unsigned sgrid =
      static_cast<unsigned>(std::clamp<int64_t>((tiles + kThreads - 1) / kThreads, 1, 4096));
  transpose_tile_scales_kernel<<<sgrid, kThreads, 0, stream_>>>(w.scale_inv, w.rows, w.cols,
                                                                wt.scale_inv);
  cuda::check_launch("transpose_tile_scales_kernel");
}

void CudaBackend::scale_log2_histogram(const Fp8Matrix& q, int lo, int hi, int64_t* counts) {
  const OpScope scope(*this, "scale_log2_histogram");
  check(lo < hi && hi - lo <= kMaxHistogramBins - 2,
        "scale_log2_histogram: bins from 2^" + std::to_string(lo) + " to 2^" + std::to_string(hi) +
            " (lo < hi, at most 256 bins)");
  if (q.rows == 0 || q.cols == 0) return;
  check(q.scale_inv && counts, "scale_log2_histogram: null data pointer");
  make_current();
  const int64_t n =
      (q.block == ScaleBlock::row1x128 ? q.rows : blocks_of(q.rows)) * blocks_of(q.cols);
  // Few blocks: each adds its bins to the global counts once.
  const unsigned grid = cuda::grid_for(n, int64_t{kThreads} * 16, int64_t{2} * sm_count_);
  static_assert(sizeof(unsigned long long) == sizeof(int64_t));
  scale_log2_histogram_kernel<<<grid, kThreads, 0, stream_>>>(
      q.scale_inv, q.rows, q.cols, q.block, lo, hi, reinterpret_cast<unsigned long long*>(counts));
  cuda::check_launch("scale_log2_histogram_kernel");
}

std::string CudaBackend::kernel_image_problem() {
  cudaFuncAttributes attr{};
  const cudaError_t e =
      cudaFuncGetAttributes(&attr, quantize_1x128_kernel<float, Fp8Format::e4m3, false>);
  if (e == cudaSuccess) return {};
  (void)cudaGetLastError();
  return std::string("the module's kernels cannot run on this device: ") + cudaGetErrorName(e) +
         ": " + cudaGetErrorString(e);
}

}  // namespace fp8rl
