// RMSNorm's pieces shared by rmsnorm.cu and the CUDA emulation's test
// (tests/emulation/test_quantize_emulated.cpp): the row reduction, the forward kernel (also the
// rstd pass of the fused FP8 forward), the backward's dx kernel (also the row-mean pass of the
// fused FP8 backward), their launches, and the producers that quantize_produced_kernel runs.
// Shapes as in rmsnorm.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"
#include "quantize.cuh"

namespace fp8rl::rmsnorm_kernels {

using cuda::In, cuda::Out;

constexpr int kThreads = 256;
constexpr int64_t kWarpRowMax = 1024;  // rows up to this width are reduced by one warp

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

// kGroup threads per row (row_group). The row loop is uniform across each group (a whole block
// when kGroup == kThreads), as group_sum needs. Without kWriteY only rstd is written (the fused
// producer normalizes and quantizes in its own pass).
template <int kGroup, bool kWriteY = true>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_forward_kernel(In x, In w, float eps, Out y, float* __restrict__ rstd, int64_t M,
                           int64_t H) {
  __shared__ float warp_sums[kThreads / 32];
  const auto [lane, first, stride] = row_group<kGroup>();
  for (int64_t m = first; m < M; m += stride) {
    const int64_t row = m * H;
    float ss = 0.0f;
    for (int64_t h = lane; h < H; h += kGroup) {
      const float v = x[row + h];
      ss += v * v;
    }
    ss = group_sum<kGroup>(ss, warp_sums);
    const float r = 1.0f / sqrtf(ss / static_cast<float>(H) + eps);
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

// Launches the forward kernel's rstd pass (kWriteY false) or the whole forward.
template <bool kWriteY>
void launch_rmsnorm_forward(const Matrix& x, const Matrix& w, float eps, const Matrix& y,
                            float* rstd, cudaStream_t stream, int sm_count) {
  const int64_t M = x.rows, H = x.cols;
  const int64_t cap = int64_t{32} * sm_count;
  if (H <= kWarpRowMax) {
    rmsnorm_forward_kernel<32, kWriteY>
        <<<cuda::grid_for(M, kThreads / 32, cap), kThreads, 0, stream>>>(
            cuda::in_of(x), cuda::in_of(w), eps, cuda::out_of(y), rstd, M, H);
  } else {
    rmsnorm_forward_kernel<kThreads, kWriteY><<<cuda::grid_for(M, 1, cap), kThreads, 0, stream>>>(
        cuda::in_of(x), cuda::in_of(w), eps, cuda::out_of(y), rstd, M, H);
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

// Launches the row pass over x [M, H] with about 4 blocks per SM (each adding its column sums to
// dw once): dx written (kWriteDx) or the row means into mean. False (nothing launched) for rows
// wider than kThreads·32, whose column sums would not fit a thread's registers.
template <bool kWriteDx>
bool launch_rmsnorm_backward_rows(const Matrix& dy, const Matrix& x, const Matrix& w,
                                  const float* rstd, const Matrix& dx, float* mean, float* dw,
                                  cudaStream_t stream, int sm_count) {
  const int64_t M = x.rows, H = x.cols;
  const int64_t cap = int64_t{4} * sm_count;
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
