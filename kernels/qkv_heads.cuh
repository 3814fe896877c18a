// The one-pass kernel of CudaBackend::qkv_heads (kernels/qkv_heads.cu) and its launch, shared
// with the CUDA emulation's test (tests/emulation/test_qkv_heads_emulated.cpp). A generation
// step's q, k and v from the stacked q/k/v projection (mirrors Backend::qkv_heads' default:
// copy_columns, rmsnorm_forward of the heads, rope). Shapes: qkv [M, (hq + 2·hkv)·D], q
// [M, hq·D], k and v [M, hkv·D], norm weights [1, D], positions [M] (int32).
//
// A warp per (row, head), lane l holding the head's elements l + 32j (j < D/32): the layout,
// sum of squares and formulas of rmsnorm_forward_kernel's warp rows (kernels/rmsnorm.cuh), so
// rstd and the normalized values rounded to the output's dtype are its bits; the rotary pairs
// (i, i + D/2) then lie in one lane (D/2 a multiple of 32) and turn with rope_kernel's
// arithmetic (kernels/rope.cu: rope_inv_freq, sincosf, _rn products) on those rounded values. v
// is copied through. Head dims 64, 128 and 256.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"
#include "rmsnorm.cuh"

namespace fp8rl::qkv_heads_kernels {

using cuda::In, cuda::Out;

constexpr int kThreads = 256;

template <int kVals>  // D / 32
__global__ void __launch_bounds__(kThreads)
    qkv_heads_kernel(In qkv, int64_t M, int hq, int hkv, In q_norm, In k_norm, bool norm, float eps,
                     const int32_t* __restrict__ pos, Rope rope, Out q, Out k, Out v) {
  constexpr int kD = 32 * kVals, kHalf = kD / 2;
  const int lane = threadIdx.x & 31;
  const int heads = hq + 2 * hkv;
  const int64_t units = M * heads;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * kThreads) >> 5;
  for (int64_t u = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) >> 5; u < units;
       u += warps) {  // warp-uniform
    const int64_t m = u / heads;
    const int h = static_cast<int>(u - m * heads);
    const int64_t src = u * kD;  // row m's head h: (m·heads + h)·D
    float x[kVals];
#pragma unroll
    for (int j = 0; j < kVals; ++j) x[j] = qkv[src + lane + 32 * j];
    if (h >= hq + hkv) {  // v
      const int64_t dst = (m * hkv + (h - hq - hkv)) * kD;
#pragma unroll
      for (int j = 0; j < kVals; ++j) v.store(dst + lane + 32 * j, x[j]);
      continue;
    }
    const bool is_q = h < hq;
    const Out& out = is_q ? q : k;
    const int64_t dst = is_q ? (m * hq + h) * kD : (m * hkv + (h - hq)) * kD;
    if (norm) {  // rmsnorm_forward_kernel<32>'s row: the sum, rstd, x·r·w rounded as stored
      const In& w = is_q ? q_norm : k_norm;
      float ss = 0.0f;
#pragma unroll
      for (int j = 0; j < kVals; ++j) {
        const float val = x[j];
        ss += val * val;
      }
      ss = cuda::warp_sum(ss);
      const float r = rmsnorm_kernels::rstd_of(ss, kD, eps);
#pragma unroll
      for (int j = 0; j < kVals; ++j)
        x[j] = out.round(rmsnorm_kernels::normalized(x[j], r, w[lane + 32 * j]));
    }
    // rope_kernel's rotation of pair (i, i + D/2), not inverse.
    const float p = static_cast<float>(pos[m]);
#pragma unroll
    for (int j = 0; j < kVals / 2; ++j) {
      const int i = lane + 32 * j;
      const float inv_freq = rope_inv_freq(rope, i, 2 * kHalf);
      const float angle = p * inv_freq;
      float s, c;
      sincosf(angle, &s, &c);
      const float x1 = x[j], x2 = x[j + kVals / 2];
      out.store(dst + i, __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
      out.store(dst + i + kHalf, __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
    }
  }
}

// Launches qkv_heads_kernel (shapes checked by the caller, M > 0): false (nothing launched) for
// a head dim other than 64, 128 and 256. q_norm / k_norm: both null (no QK-norm) or both given.
inline bool launch_qkv_heads(const Matrix& qkv, int64_t hq, int64_t hkv, const Matrix& q_norm,
                             const Matrix& k_norm, float eps, const int32_t* positions,
                             const Rope& rope, const Matrix& q, const Matrix& k, const Matrix& v,
                             cudaStream_t stream, int sm_count) {
  const int64_t M = qkv.rows, D = q.cols / hq;
  if (D != 64 && D != 128 && D != 256) return false;
  const bool norm = q_norm.data != nullptr;
  const unsigned grid = cuda::grid_for(M * (hq + 2 * hkv), kThreads / 32, int64_t{32} * sm_count);
  auto launch = [&](auto kernel) {
    kernel<<<grid, kThreads, 0, stream>>>(
        cuda::in_of(qkv), M, static_cast<int>(hq), static_cast<int>(hkv),
        norm ? cuda::in_of(q_norm) : In{nullptr, false},
        norm ? cuda::in_of(k_norm) : In{nullptr, false}, norm, eps, positions, rope,
        cuda::out_of(q), cuda::out_of(k), cuda::out_of(v));
  };
  if (D == 64) launch(qkv_heads_kernel<2>);
  if (D == 128) launch(qkv_heads_kernel<4>);
  if (D == 256) launch(qkv_heads_kernel<8>);
  cuda::check_launch("qkv_heads_kernel");
  return true;
}

}  // namespace fp8rl::qkv_heads_kernels
