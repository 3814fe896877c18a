// RMSNorm's forward pieces shared by rmsnorm.cu and the CUDA emulation's test
// (tests/emulation/test_quantize_emulated.cpp): the row reduction, the forward kernel (also the
// rstd pass of the fused FP8 forward), its launch, and the producer that quantize_produced_kernel
// runs. Shapes as in rmsnorm.cu.
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

}  // namespace fp8rl::rmsnorm_kernels
