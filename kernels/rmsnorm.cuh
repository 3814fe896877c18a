// RMSNorm's pieces shared by rmsnorm.cu and the CUDA emulation's test
// (tests/emulation/test_quantize_emulated.cpp): the row reduction, the forward kernel (also the
// rstd pass of the fused FP8 forward), the backward's dx kernel (also the row-mean pass of the
// fused FP8 backward), their launches, and the producers that quantize_produced_kernel runs.
// Shapes as in rmsnorm.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backend/backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"
#include "quantize.cuh"

namespace fp8rl::rmsnorm_kernels {

using cuda::In, cuda::Out;

constexpr int kThreads = 256;
constexpr int64_t kWarpRowMax = 1024;  // rows up to this width are reduced by one warp
constexpr int kMaxVals = 16;  // values a thread of rmsnorm_quantize_rows_kernel's block rows holds

// Sum over the kGroup threads that share a row (a warp, or the whole block).
template <int kGroup>
__device__ __forceinline__ float group_sum(float v, float* smem) {
  if constexpr (kGroup == 32) {
    return cuda::warp_sum(v);
  } else {
    static_assert(kGroup == kThreads, "a row is reduced by a warp or by the whole block");
    return cuda::block_sum(v, smem);
  }
}

// A thread's place among the kGroup threads of a row: kThreads / kGroup rows per block, rows
// grid-stride (first, first + stride, ...), lane = the thread's index within the row's group.
struct RowGroup {
  int lane;
  int64_t first, stride;
};
template <int kGroup>
__device__ __forceinline__ RowGroup row_group() {
  constexpr int kRowsPerBlock = kThreads / kGroup;
  return {static_cast<int>(threadIdx.x) % kGroup,
          static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kGroup,
          static_cast<int64_t>(gridDim.x) * kRowsPerBlock};
}

// One normalized element: x·r·w in this order (the reference's), one spelling for the forward
// kernel and the fused producer below so that both round the same products.
__device__ __forceinline__ float normalized(float x, float r, float w) {
  return x * r * w;
}

// A row's 1/sqrt(mean of squares + eps) from its sum of squares, IEEE division and square root
// (the reference's), one spelling for both forward kernels.
__device__ __forceinline__ float rstd_of(float sum_squares, int64_t H, float eps) {
  return 1.0f / sqrtf(sum_squares / static_cast<float>(H) + eps);
}

// x's element i, or — with a residual (res.p set) — x[i] + res[i] rounded to x's dtype and
// stored back to x (x_out: x written): the residual stream's add (add_kernel's arithmetic) in the
// norm's read of x.
__device__ __forceinline__ float residual_sum(In x, In res, Out x_out, int64_t i) {
  if (!res.p) return x[i];
  const float v = x_out.round(x[i] + res[i]);
  x_out.store(i, v);
  return v;
}

// kGroup threads per row (row_group). The row loop is uniform across each group (a whole block
// when kGroup == kThreads), as group_sum needs. Without kWriteY only rstd is written (the fused
// producer normalizes and quantizes in its own pass). With a residual (res.p set) x += res
// first, in the same read (residual_sum; each element read and written by one thread, which
// reads it again for y).
template <int kGroup, bool kWriteY = true>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_forward_kernel(In x, In w, float eps, Out y, float* __restrict__ rstd, int64_t M,
                           int64_t H, In res, Out x_out) {
  __shared__ float warp_sums[kThreads / 32];
  const auto [lane, first, stride] = row_group<kGroup>();
  for (int64_t m = first; m < M; m += stride) {
    const int64_t row = m * H;
    float ss = 0.0f;
    for (int64_t h = lane; h < H; h += kGroup) {
      const float v = residual_sum(x, res, x_out, row + h);
      ss += v * v;
    }
    ss = group_sum<kGroup>(ss, warp_sums);
    const float r = rstd_of(ss, H, eps);
    if (lane == 0) rstd[m] = r;
    if constexpr (kWriteY)
      for (int64_t h = lane; h < H; h += kGroup) y.store(row + h, normalized(x[row + h], r, w[h]));
  }
}

// The normalized rows y = x·rstd·w of [M, H] for quantize_produced_kernel (rstd already
// computed), stored to y when it has data.
struct RmsnormProducer {
  static constexpr int kOutputs = 1;
  In x, w;
  const float* rstd;
  Out y;
  int64_t H;
  __device__ __forceinline__ float value(int, int64_t r, int64_t c) const {
    const int64_t i = r * H + c;
    const float v = y.round(normalized(x[i], rstd[r], w[c]));
    if (y.p) y.store(i, v);
    return v;
  }
  __device__ __forceinline__ void value8(int, int64_t r, int64_t c, float (&v)[8]) const {
    const int64_t i = r * H + c;
    float xv[8], wv[8];
    quant::load8(x, i, xv);
    quant::load8(w, c, wv);
    const float rr = rstd[r];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = y.round(normalized(xv[j], rr, wv[j]));
    if (y.p) quant::store8(y, i, v);
  }
};

// The forward and the 1x128 quantization of its forward-only operand in one pass (decode and
// prefill steps, the log-prob pass), where the two-pass path reads x twice in two launches: a
// row's values stay in registers between the sum of squares and its blocks. The threads, their
// elements and the sum are rmsnorm_forward_kernel's (thread l of a row's kGroup holds elements
// l + kGroup·j, j < kVals), so rstd is its bits; y = x·r·w rounded to y's dtype (stored when y
// has data) is quantized as quantize() quantizes y: a block's amax (the largest |v|, NaN
// winning: any order gives the same), block_scale, the codes of v·s. kGroup 32: each block's 128
// elements are lanes l's j = 4b .. 4b + 3 (quantize_warp_block's layout). kGroup 256: a block's
// 128 elements are one per thread of four warps, whose amaxes meet in shared memory. With a
// residual (res.p set) x += res first, as rmsnorm_forward_kernel does.
template <int kGroup, int kVals, Fp8Format F, bool kStats>
__global__ void __launch_bounds__(kThreads, kGroup == kThreads ? 2 : 1)
    rmsnorm_quantize_rows_kernel(In x, In w, float eps, Out y, float* __restrict__ rstd, int64_t M,
                                 int64_t H, bool pow2, uint8_t* __restrict__ q,
                                 float* __restrict__ qs, DeviceQuantStats* stats, In res,
                                 Out x_out) {
  static_assert(kGroup == 32 || kGroup == kThreads, "a row is a warp's or the whole block's");
  static_assert(kVals % 4 == 0, "whole blocks of 128 per warp row");
  __shared__ float warp_sums[kThreads / 32];
  __shared__ float warp_amax[kGroup == kThreads ? kVals * (kThreads / 32) : 1];
  const auto [lane, first, stride] = row_group<kGroup>();
  quant::ThreadStats st;
  for (int64_t m = first; m < M; m += stride) {  // uniform across the row's group
    const int64_t row = m * H;
    float v[kVals];
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < kVals; ++j) {
      const int64_t h = lane + int64_t{j} * kGroup;
      v[j] = 0.0f;
      if (h < H) {
        v[j] = residual_sum(x, res, x_out, row + h);
        ss += v[j] * v[j];
      }
    }
    ss = group_sum<kGroup>(ss, warp_sums);
    const float r = rstd_of(ss, H, eps);
    if (lane == 0) rstd[m] = r;
#pragma unroll
    for (int j = 0; j < kVals; ++j) {
      const int64_t h = lane + int64_t{j} * kGroup;
      if (h < H) {
        v[j] = y.round(normalized(v[j], r, w[h]));
        if (y.p) y.store(row + h, v[j]);
      }
    }
    if constexpr (kGroup == 32) {
#pragma unroll
      for (int b = 0; b < kVals / 4; ++b) {
        const int64_t c0 = int64_t{b} * quant::kTile;
        if (c0 >= H) break;  // warp-uniform
        const float bv[4] = {v[4 * b], v[4 * b + 1], v[4 * b + 2], v[4 * b + 3]};
        quant::quantize_warp_block<F, kStats>(
            bv, static_cast<int>(min(int64_t{quant::kTile}, H - c0)), lane, pow2, q + row + c0,
            qs + scale_index(ScaleBlock::row1x128, M, H, m, c0), st);
      }
    } else {
      const int warp = lane >> 5;
#pragma unroll
      for (int j = 0; j < kVals; ++j) {  // each warp's amax of its 32 elements of every j
        const int64_t h = lane + int64_t{j} * kGroup;
        const float a = quant::warp_amax(h < H ? fabsf(v[j]) : 0.0f);
        if ((lane & 31) == 0) warp_amax[j * (kThreads / 32) + warp] = a;
      }
      __syncthreads();
      const int w0 = (lane / quant::kTile) * (quant::kTile / 32);  // the first warp of the block
#pragma unroll
      for (int j = 0; j < kVals; ++j) {
        const int64_t h = lane + int64_t{j} * kGroup, c0 = h - lane % quant::kTile;
        if (c0 >= H) continue;  // uniform across the block's four warps
        const float* wa = warp_amax + j * (kThreads / 32) + w0;
        const float amax = quant::amax_combine(quant::amax_combine(wa[0], wa[1]),
                                               quant::amax_combine(wa[2], wa[3]));
        bool degenerate = false;
        const float s = block_scale(amax, F, pow2, &degenerate);
        const float sinv = __fdiv_rn(1.0f, s);
        if (lane % quant::kTile == 0) {
          qs[scale_index(ScaleBlock::row1x128, M, H, m, c0)] = sinv;
          if constexpr (kStats) {
            ++st.blocks;
            st.degenerate += degenerate ? 1 : 0;
          }
        }
        if (h < H) {
          const float xs = __fmul_rn(v[j], s);
          const uint8_t code = quant::encode<F>(xs);
          q[row + h] = code;
          if constexpr (kStats) quant::count_element<F>(st, v[j], xs, code, sinv);
        }
      }
      __syncthreads();  // warp_amax is the next row's
    }
  }
  if constexpr (kStats) quant::flush_stats(st, stats);
}

// Launches rmsnorm_quantize_rows_kernel for a forward-only target (tg without a transposed
// copy) of x [M, H], M and H > 0 — with a residual (its data set) x += residual first: false
// (nothing launched) for rows wider than 4,096, whose
// values a thread would hold in more registers than it has (ptxas: 32 a thread of a block row
// spill ~1 KB at the 128 registers that two blocks an SM leave).
inline bool launch_rmsnorm_quantize_rows(const Matrix& x, const Matrix& w, float eps,
                                         const Matrix& y, float* rstd, const QuantOptions& opt,
                                         const quant::QuantTarget& tg, cudaStream_t stream,
                                         int sm_count, const Matrix& residual = Matrix{}) {
  const int64_t M = x.rows, H = x.cols;
  if (tg.qt != nullptr || H > int64_t{kThreads} * kMaxVals) return false;
  using Kernel = void (*)(In, In, float, Out, float*, int64_t, int64_t, bool, uint8_t*, float*,
                          DeviceQuantStats*, In, Out);
  const bool warp_row = H <= kWarpRowMax, stats = tg.stats != nullptr;
  const bool e4m3 = opt.format == Fp8Format::e4m3;
  // The values a thread holds: as few as the row needs (registers: occupancy).
  auto pick = [&](auto group, auto vals) -> Kernel {
    constexpr int kG = decltype(group)::value, kV = decltype(vals)::value;
    return e4m3 ? (stats ? rmsnorm_quantize_rows_kernel<kG, kV, Fp8Format::e4m3, true>
                         : rmsnorm_quantize_rows_kernel<kG, kV, Fp8Format::e4m3, false>)
                : (stats ? rmsnorm_quantize_rows_kernel<kG, kV, Fp8Format::e5m2, true>
                         : rmsnorm_quantize_rows_kernel<kG, kV, Fp8Format::e5m2, false>);
  };
  using Warp = std::integral_constant<int, 32>;
  using Block = std::integral_constant<int, kThreads>;
  const Kernel kernel = warp_row ? pick(Warp{}, std::integral_constant<int, 32>{})
                        : H <= 8 * kThreads
                            ? pick(Block{}, std::integral_constant<int, 8>{})
                            : pick(Block{}, std::integral_constant<int, kMaxVals>{});
  const int64_t cap = int64_t{32} * sm_count;
  kernel<<<cuda::grid_for(M, warp_row ? kThreads / 32 : 1, cap), kThreads, 0, stream>>>(
      cuda::in_of(x), cuda::in_of(w), eps, cuda::out_of(y), rstd, M, H, opt.pow2_scales, tg.q,
      tg.qs, tg.stats, residual.data ? cuda::in_of(residual) : In{nullptr, false},
      residual.data ? cuda::out_of(x) : Out{nullptr, false});
  cuda::check_launch("rmsnorm_quantize_rows_kernel");
  return true;
}

// Launches the forward kernel's rstd pass (kWriteY false) or the whole forward; with a
// residual (its data set: [M, H]) x += residual first.
template <bool kWriteY>
void launch_rmsnorm_forward(const Matrix& x, const Matrix& w, float eps, const Matrix& y,
                            float* rstd, cudaStream_t stream, int sm_count,
                            const Matrix& residual = Matrix{}) {
  const int64_t M = x.rows, H = x.cols;
  const int64_t cap = int64_t{32} * sm_count;
  const In res = residual.data ? cuda::in_of(residual) : In{nullptr, false};
  const Out x_out = residual.data ? cuda::out_of(x) : Out{nullptr, false};
  if (H <= kWarpRowMax) {
    rmsnorm_forward_kernel<32, kWriteY>
        <<<cuda::grid_for(M, kThreads / 32, cap), kThreads, 0, stream>>>(
            cuda::in_of(x), cuda::in_of(w), eps, cuda::out_of(y), rstd, M, H, res, x_out);
  } else {
    rmsnorm_forward_kernel<kThreads, kWriteY><<<cuda::grid_for(M, 1, cap), kThreads, 0, stream>>>(
        cuda::in_of(x), cuda::in_of(w), eps, cuda::out_of(y), rstd, M, H, res, x_out);
  }
  cuda::check_launch("rmsnorm_forward_kernel");
}

// One element of the input gradient, r·(w·dy − x̂·mean) with x̂ = x·r: spelled with _rn
// intrinsics (no contraction into FMAs the reference does not use), one spelling for the dx
// kernel and the fused producer.
__device__ __forceinline__ float input_gradient(float r, float w, float dy, float xh, float mean) {
  return __fmul_rn(r, __fsub_rn(__fmul_rn(w, dy), __fmul_rn(xh, mean)));
}

// dx = rstd·(w·dy − x̂·mean_h(w·dy·x̂)), x̂ = x·rstd; same row mapping as the forward kernel.
// Without kWriteDx only each row's mean_h(w·dy·x̂) is written, to mean (the fused producer's
// row pass: the same reduction, hence the same means).
template <int kGroup, bool kWriteDx = true>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_backward_dx_kernel(In dy, In x, In w, const float* __restrict__ rstd, Out dx,
                               float* __restrict__ mean_out, int64_t M, int64_t H) {
  __shared__ float warp_sums[kThreads / 32];
  const auto [lane, first, stride] = row_group<kGroup>();
  for (int64_t m = first; m < M; m += stride) {
    const int64_t row = m * H;
    const float r = rstd[m];
    float dot = 0.0f;
    for (int64_t h = lane; h < H; h += kGroup) dot += w[h] * dy[row + h] * (x[row + h] * r);
    dot = group_sum<kGroup>(dot, warp_sums);
    const float mean = dot / static_cast<float>(H);
    if constexpr (kWriteDx) {
      for (int64_t h = lane; h < H; h += kGroup)
        dx.store(row + h, input_gradient(r, w[h], dy[row + h], x[row + h] * r, mean));
    } else if (lane == 0) {
      mean_out[m] = mean;
    }
  }
}

// Launches the dx kernel (kWriteDx) or its row-mean pass into mean [M].
template <bool kWriteDx>
void launch_rmsnorm_backward_dx(const Matrix& dy, const Matrix& x, const Matrix& w,
                                const float* rstd, const Matrix& dx, float* mean,
                                cudaStream_t stream, int sm_count) {
  const int64_t M = x.rows, H = x.cols;
  const int64_t cap = int64_t{32} * sm_count;
  if (H <= kWarpRowMax) {
    rmsnorm_backward_dx_kernel<32, kWriteDx>
        <<<cuda::grid_for(M, kThreads / 32, cap), kThreads, 0, stream>>>(
            cuda::in_of(dy), cuda::in_of(x), cuda::in_of(w), rstd, cuda::out_of(dx), mean, M, H);
  } else {
    rmsnorm_backward_dx_kernel<kThreads, kWriteDx>
        <<<cuda::grid_for(M, 1, cap), kThreads, 0, stream>>>(
            cuda::in_of(dy), cuda::in_of(x), cuda::in_of(w), rstd, cuda::out_of(dx), mean, M, H);
  }
  cuda::check_launch("rmsnorm_backward_dx_kernel");
}

// The backward in one pass over the rows: each row's mean_h(w·dy·x̂) (the dx kernel's
// reduction, spelled the same, so the same means) and, from the same read of dy and x,
// dw[h] += Σ_m dy·x̂ (f32): a thread's columns h = lane + kGroup·j (j < kCols, kCols·kGroup ≥ H)
// summed in registers over its rows, then added into dw once per block (a warp-per-row block's
// warps first add theirs in shared memory). The grid decides how many atomics reach dw. Then
// either the row's dx (kWriteDx: rmsnorm_backward; each element read before the same thread
// writes it, so dx may alias dy or x) or its mean, to mean_out (the fused producer's row pass).
template <int kGroup, int kCols, bool kWriteDx>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_backward_rows_kernel(In dy, In x, In w, const float* __restrict__ rstd, Out dx,
                                 float* __restrict__ mean_out, float* __restrict__ dw, int64_t M,
                                 int64_t H) {
  __shared__ float warp_sums[kThreads / 32];
  __shared__ float col_sums[kGroup == 32 ? kWarpRowMax : 1];
  const auto [lane, first, stride] = row_group<kGroup>();
  if constexpr (kGroup == 32) {
    for (int64_t h = threadIdx.x; h < H; h += kThreads) col_sums[h] = 0.0f;
    __syncthreads();
  }
  float acc[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) acc[j] = 0.0f;
  for (int64_t m = first; m < M; m += stride) {
    const int64_t row = m * H;
    const float r = rstd[m];
    float dot = 0.0f;
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int64_t h = lane + int64_t{j} * kGroup;
      if (h < H) {
        const float d = dy[row + h], xh = x[row + h] * r;
        dot += w[h] * d * xh;
        acc[j] += d * xh;
      }
    }
    dot = group_sum<kGroup>(dot, warp_sums);
    const float mean = dot / static_cast<float>(H);
    if constexpr (kWriteDx) {
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const int64_t h = lane + int64_t{j} * kGroup;
        if (h < H) dx.store(row + h, input_gradient(r, w[h], dy[row + h], x[row + h] * r, mean));
      }
    } else if (lane == 0) {
      mean_out[m] = mean;
    }
  }
  if constexpr (kGroup == 32) {
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int64_t h = lane + int64_t{j} * kGroup;
      if (h < H) atomicAdd(&col_sums[h], acc[j]);
    }
    __syncthreads();
    for (int64_t h = threadIdx.x; h < H; h += kThreads) atomicAdd(dw + h, col_sums[h]);
  } else {
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int64_t h = lane + int64_t{j} * kGroup;
      if (h < H) atomicAdd(dw + h, acc[j]);
    }
  }
}

// The row pass of rows whose width H is a multiple of 8 up to kWarpRowMax, 16-byte aligned: a
// group of kLanes lanes per row (16 for rows up to 128 — a per-head norm's, two rows a warp —
// else 32), lane l holding columns 8(l + kLanes·v) .. + 7 (v < kVecs, kVecs·8·kLanes ≥ H) read
// with 16-byte loads and kept in registers from the row's sum to its dx (so dx may alias dy or
// x: every lane of the group has read before any writes). The same per-element expressions as
// rmsnorm_backward_rows_kernel (its sums in another order); dw through shared memory as there.
// Rows go in warp-uniform steps (the halves of a 16-lane warp shuffle together).
template <int kLanes, int kVecs, bool kWriteDx>
__global__ void __launch_bounds__(kThreads, 2)
    rmsnorm_backward_rows_vec_kernel(In dy, In x, In w, const float* __restrict__ rstd, Out dx,
                                     float* __restrict__ mean_out, float* __restrict__ dw,
                                     int64_t M, int64_t H) {
  static_assert(kLanes == 16 || kLanes == 32, "a row is a half-warp or a warp");
  __shared__ float col_sums[kWarpRowMax];
  constexpr int kRowsPerWarp = 32 / kLanes, kRowsPerBlock = kThreads / kLanes;
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const int sub = static_cast<int>(threadIdx.x & 31) / kLanes;  // the row within the warp
  for (int64_t h = threadIdx.x; h < H; h += kThreads) col_sums[h] = 0.0f;
  __syncthreads();
  float acc[kVecs][8];
#pragma unroll
  for (int v = 0; v < kVecs; ++v)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[v][e] = 0.0f;
  const int64_t warp_first =
      static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5) * kRowsPerWarp;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kRowsPerBlock;
  for (int64_t base = warp_first; base < M; base += stride) {  // warp-uniform
    const int64_t m = base + sub;
    const bool valid = m < M;
    const int64_t row = m * H;
    const float r = valid ? rstd[m] : 0.0f;
    float d[kVecs][8], xh[kVecs][8];
    float dot = 0.0f;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const int64_t c = 8 * (lane + int64_t{kLanes} * v);
      if (valid && c < H) {
        float wv[8];
        quant::load8(dy, row + c, d[v]);
        quant::load8(x, row + c, xh[v]);
        quant::load8(w, c, wv);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          xh[v][e] = xh[v][e] * r;
          dot += wv[e] * d[v][e] * xh[v][e];
          acc[v][e] += d[v][e] * xh[v][e];
        }
      }
    }
#pragma unroll
    for (int off = kLanes / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    const float mean = dot / static_cast<float>(H);
    if (!valid) continue;
    if constexpr (kWriteDx) {
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        const int64_t c = 8 * (lane + int64_t{kLanes} * v);
        if (c < H) {
          float wv[8], g[8];
          quant::load8(w, c, wv);
#pragma unroll
          for (int e = 0; e < 8; ++e)
            g[e] = dx.round(input_gradient(r, wv[e], d[v][e], xh[v][e], mean));
          quant::store8(dx, row + c, g);
        }
      }
    } else if (lane == 0) {
      mean_out[m] = mean;
    }
  }
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int64_t c = 8 * (lane + int64_t{kLanes} * v);
    if (c < H)
#pragma unroll
      for (int e = 0; e < 8; ++e) atomicAdd(&col_sums[c + e], acc[v][e]);
  }
  __syncthreads();
  for (int64_t h = threadIdx.x; h < H; h += kThreads) atomicAdd(dw + h, col_sums[h]);
}

// Launches rmsnorm_backward_rows_vec_kernel<kLanes, kVecs> on up to 4 blocks per SM.
template <int kLanes, int kVecs, bool kWriteDx>
void launch_rows_vec(const Matrix& dy, const Matrix& x, const Matrix& w, const float* rstd,
                     const Matrix& dx, float* mean, float* dw, cudaStream_t stream, int sm_count) {
  const int64_t M = x.rows, H = x.cols;
  rmsnorm_backward_rows_vec_kernel<kLanes, kVecs, kWriteDx>
      <<<cuda::grid_for(M, kThreads / kLanes, int64_t{4} * sm_count), kThreads, 0, stream>>>(
          cuda::in_of(dy), cuda::in_of(x), cuda::in_of(w), rstd, cuda::out_of(dx), mean, dw, M, H);
  cuda::check_launch("rmsnorm_backward_rows_vec_kernel");
}

// Launches the row pass over x [M, H] with about 4 blocks per SM (each adding its column sums to
// dw once): dx written (kWriteDx) or the row means into mean. False (nothing launched) for rows
// wider than kThreads·32, whose column sums would not fit a thread's registers.
template <bool kWriteDx>
bool launch_rmsnorm_backward_rows(const Matrix& dy, const Matrix& x, const Matrix& w,
                                  const float* rstd, const Matrix& dx, float* mean, float* dw,
                                  cudaStream_t stream, int sm_count) {
  const int64_t M = x.rows, H = x.cols;
  const int64_t cap = int64_t{4} * sm_count;
  auto aligned = [](const Matrix& m) { return cuda::pointer_alignment(m.data) >= 16; };
  if (H % 8 == 0 && H <= kWarpRowMax && aligned(dy) && aligned(x) && aligned(w) &&
      (!kWriteDx || aligned(dx))) {
    if (H <= 128) {
      launch_rows_vec<16, 1, kWriteDx>(dy, x, w, rstd, dx, mean, dw, stream, sm_count);
    } else if (H <= 256) {
      launch_rows_vec<32, 1, kWriteDx>(dy, x, w, rstd, dx, mean, dw, stream, sm_count);
    } else if (H <= 512) {
      launch_rows_vec<32, 2, kWriteDx>(dy, x, w, rstd, dx, mean, dw, stream, sm_count);
    } else {
      launch_rows_vec<32, 4, kWriteDx>(dy, x, w, rstd, dx, mean, dw, stream, sm_count);
    }
    return true;
  }
  if (H <= kWarpRowMax) {
    rmsnorm_backward_rows_kernel<32, kWarpRowMax / 32, kWriteDx>
        <<<cuda::grid_for(M, kThreads / 32, cap), kThreads, 0, stream>>>(
            cuda::in_of(dy), cuda::in_of(x), cuda::in_of(w), rstd, cuda::out_of(dx), mean, dw, M,
            H);
  } else if (H <= int64_t{kThreads} * 32) {
    rmsnorm_backward_rows_kernel<kThreads, 32, kWriteDx>
        <<<cuda::grid_for(M, 1, cap), kThreads, 0, stream>>>(cuda::in_of(dy), cuda::in_of(x),
                                                             cuda::in_of(w), rstd, cuda::out_of(dx),
                                                             mean, dw, M, H);
  } else {
    return false;
  }
  cuda::check_launch("rmsnorm_backward_rows_kernel");
  return true;
}

// The residual stream's gradient dx = residual + d for quantize_produced_kernel, d the input
// gradient rounded to dx's dtype (rstd and the row means already computed); residual.p null:
// dx = d. Stored to dx when it has data. The tiles see dx as [M, K], the norm as rows of D
// (K = heads·D: a per-head norm's groups side by side; heads = 1: the norm's own rows).
struct RmsnormGradProducer {
  static constexpr int kOutputs = 1;
  In dy, x, w, residual;
  const float *rstd, *mean;
  Out dx;
  int64_t K;
  int D, heads;
  __device__ __forceinline__ float value(int, int64_t r, int64_t c) const {
    const int64_t i = r * K + c;
    const int g = static_cast<int>(c) / D;
    const int64_t n = r * heads + g;  // the norm's row
    const float rr = rstd[n];
    const float d = dx.round(input_gradient(rr, w[c - int64_t{g} * D], dy[i], x[i] * rr, mean[n]));
    const float v = residual.p ? dx.round(residual[i] + d) : d;
    if (dx.p) dx.store(i, v);
    return v;
  }
  // D % 8 == 0: the eight elements lie in one group.
  __device__ __forceinline__ void value8(int, int64_t r, int64_t c, float (&v)[8]) const {
    const int64_t i = r * K + c;
    const int g = static_cast<int>(c) / D;
    const int64_t n = r * heads + g;
    float dyv[8], xv[8], wv[8], rv[8];
    quant::load8(dy, i, dyv);
    quant::load8(x, i, xv);
    quant::load8(w, c - int64_t{g} * D, wv);
    const float rr = rstd[n], mr = mean[n];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = dx.round(input_gradient(rr, wv[j], dyv[j], xv[j] * rr, mr));
    if (residual.p) {
      quant::load8(residual, i, rv);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = dx.round(rv[j] + v[j]);
    }
    if (dx.p) quant::store8(dx, i, v);
  }
};

}  // namespace fp8rl::rmsnorm_kernels
