// The decode GEMM for 1-8 rows as one weight stream: y [M, N] = dequant(q(x)) · dequant(w)ᵀ,
// x's 1x128 quantization done in the kernel (CudaBackend::linear_fp8 under linear_fp8_kernel = 3;
// the CPU reference is Backend::linear_fp8: quantize, then gemm_fp8).
//
// Why beside linear_fp8.cu's kernel: at 1 and 8 rows that kernel streamed a Qwen3-8B layer's FP8
// weights at 40 % and 31 % of the copy bandwidth on an H200. A 16 MB weight moves in ~4 µs at
// full rate; its fixed costs — a prologue that quantizes x into shared memory before the first
// product, and with K split over CTAs an epilogue that writes FP32 partials, counts CTAs with an
// atomic and lets the last one add the splits — are of the same order. Here nothing waits on
// another CTA and nothing is staged:
//  - a CTA owns 16 weight rows (one m16 tile of mma.sync m16n8k32 E4M3) over the whole of K; its
//    W warps (4, or 8 for narrow weights) take contiguous shares of K's 128-blocks, each warp
//    keeping 3 blocks in flight beyond the one it multiplies (16-byte loads into registers,
//    evict-first for the weight);
//  - each lane quantizes its own 32 values of x's block as it comes (x row g = lane / 4, values
//    32t .. 32t + 31, t = lane % 4; the block's amax over the row's four lanes by shuffles): the
//    arithmetic of quantize() (amax with NaN winning, block_scale, 1/s by IEEE division,
//    cvt.rn.satfinite of x·s), so the codes and scales are quantize()'s bits;
//  - per block the mma sums the codes' products (the tensor core's reduced-precision block sum,
//    as cuBLASLt's block-scaled kernels); that sum times (x's block scale · the tile's scale) is
//    added to FP32 accumulators in block order; the warps' sums meet in shared memory and are
//    added in warp order (deterministic) before the one store of y.
// K order inside a block is permuted identically for both operands, as in linear_fp8.cu: lane
// (g, t) holds bytes 32t .. 32t + 31 of the block of weight rows g and g + 8 and of x's row g;
// k32 step s takes bytes 8s .. 8s + 7 of each: A = (a0 row g bytes 8s..8s+3, a1 row g+8 the same,
// a2 row g bytes 8s+4..8s+7, a3 row g+8 the same), B = (b0 x row g bytes 8s..8s+3, b1 8s+4..8s+7)
// (PTX ISA, "Matrix fragments for mma.m16n8k32", 8-bit types); C: c0, c1 = (weight row g, x rows
// 2t, 2t+1), c2, c3 = (weight row g+8, the same).
#include "linear_fp8_stream.hpp"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "cuda_check.hpp"
#include "fp8/format.hpp"
#include "mma_ptx.cuh"

namespace fp8rl::cuda {
namespace {

using namespace ptx;  // mma.sync (mma_ptx.cuh)

constexpr int kRowsPerCta = 16;  // weight rows of a CTA: the mma's M
constexpr int kBlockK = static_cast<int>(kBlock);
constexpr int kMaxWarps = 8;
constexpr int kXRows = static_cast<int>(kStreamMaxRows);  // the mma's N: x rows

// A lane's operands of one 128-block: 32 bytes of weight rows g and g + 8 and 32 BF16 values of
// x row g (zeros past N, M or K).
struct Block {
  uint4 w0[2], w8[2], x[4];
};

__device__ __forceinline__ unsigned word(const uint4 (&v)[2], int i) {
  const uint4& h = v[i >> 2];
  const int j = i & 3;
  return j == 0 ? h.x : j == 1 ? h.y : j == 2 ? h.z : h.w;
}

// Block kb's operands for lane (g, t) of the CTA's rows row0 .. row0 + 15; zeros when !live.
__device__ __forceinline__ Block load_block(const StreamGemmArgs& a, int64_t row0, int kb, int g,
                                            int t, bool live) {
  Block b;
  const uint4 z = make_uint4(0u, 0u, 0u, 0u);
  b.w0[0] = b.w0[1] = b.w8[0] = b.w8[1] = z;
  b.x[0] = b.x[1] = b.x[2] = b.x[3] = z;
  if (!live) return b;
  const int64_t k = static_cast<int64_t>(kb) * kBlockK + 32 * t;
  // K % 16 == 0: a 16-byte piece of a row (8 values of x) is wholly inside K or wholly past it.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (k + 16 * h + 16 > a.K) continue;
    if (row0 + g < a.N)
      b.w0[h] = __ldcs(reinterpret_cast<const uint4*>(a.w + (row0 + g) * a.K + k + 16 * h));
    if (row0 + g + 8 < a.N)
      b.w8[h] = __ldcs(reinterpret_cast<const uint4*>(a.w + (row0 + g + 8) * a.K + k + 16 * h));
  }
  if (g < a.M) {
#pragma unroll
    for (int q = 0; q < 4; ++q)
      if (k + 8 * q + 8 <= a.K) b.x[q] = *reinterpret_cast<const uint4*>(a.x + g * a.K + k + 8 * q);
  }
  return b;
}

// max of two |x| where NaN wins (as quantize.cu).
__device__ __forceinline__ float amax_combine(float a, float b) {
  return (a != a || a > b) ? a : b;
}

// x row g's 32 values of the block as E4M3 codes (8 words, lowest k in the lowest byte) with
// quantize()'s arithmetic; returns 1/s, the block's dequantization scale.
__device__ __forceinline__ float quantize_x(const Block& b, bool pow2, uint32_t (&codes)[8]) {
  float v[32];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const unsigned u[4] = {b.x[q].x, b.x[q].y, b.x[q].z, b.x[q].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[8 * q + 2 * j] = __uint_as_float(u[j] << 16);
      v[8 * q + 2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
    }
  }
  float amax = 0.0f;
#pragma unroll
  for (int e = 0; e < 32; ++e) amax = amax_combine(amax, fabsf(v[e]));
  amax = amax_combine(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = amax_combine(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  const float s = block_scale(amax, Fp8Format::e4m3, pow2, nullptr);
#pragma unroll
  for (int w = 0; w < 8; ++w) {
    uint32_t packed = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      packed |= static_cast<uint32_t>(
                    __nv_cvt_float_to_fp8(__fmul_rn(v[4 * w + j], s), __NV_SATFINITE, __NV_E4M3))
                << (8 * j);
    codes[w] = packed;
  }
  return __fdiv_rn(1.0f, s);
}

template <int W>
__global__ void __launch_bounds__(32 * W) stream_gemm_kernel(StreamGemmArgs a) {
  __shared__ float part[kMaxWarps * kRowsPerCta * kXRows];  // each warp's sums

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRowsPerCta;
  const int kbs = static_cast<int>((a.K + kBlockK - 1) / kBlockK);
  const int per = (kbs + W - 1) / W;
  const int kb0 = min(kbs, warp * per), nkb = min(kbs, kb0 + per) - kb0;
  const float* wscale = a.ws + (row0 / kBlockK) * a.ws_stride;

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  Block f0 = load_block(a, row0, kb0, g, t, nkb > 0);
  Block f1 = load_block(a, row0, kb0 + 1, g, t, nkb > 1);
  Block f2 = load_block(a, row0, kb0 + 2, g, t, nkb > 2);
  for (int i = 0; i < nkb; ++i) {  // warp-uniform
    const Block f3 = load_block(a, row0, kb0 + i + 3, g, t, i + 3 < nkb);
    uint32_t xc[8];
    const float sinv = quantize_x(f0, a.pow2, xc);
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const uint32_t af[4] = {word(f0.w0, 2 * s), word(f0.w8, 2 * s), word(f0.w0, 2 * s + 1),
                              word(f0.w8, 2 * s + 1)};
      mma_fp8<true>(c, af, xc[2 * s], xc[2 * s + 1]);
    }
    // The scales of x rows 2t and 2t + 1 (held by lanes 8t and 8t + 4) times the tile's.
    const float sx0 = __shfl_sync(0xffffffffu, sinv, 8 * t);
    const float sx1 = __shfl_sync(0xffffffffu, sinv, 8 * t + 4);
    const float sw = __ldg(wscale + kb0 + i);
    const float s0 = sx0 * sw, s1 = sx1 * sw;
    acc[0] = fmaf(c[0], s0, acc[0]);  // (weight row g, x row 2t)
    acc[1] = fmaf(c[1], s1, acc[1]);  // (weight row g, x row 2t + 1)
    acc[2] = fmaf(c[2], s0, acc[2]);  // (weight row g + 8, x row 2t)
    acc[3] = fmaf(c[3], s1, acc[3]);  // (weight row g + 8, x row 2t + 1)
    f0 = f1;
    f1 = f2;
    f2 = f3;
  }

  // The warps' sums, added in warp order; y[m, row0 + r] for x rows m < M.
  float* mine = part + warp * kRowsPerCta * kXRows;
  mine[g * kXRows + 2 * t] = acc[0];
  mine[g * kXRows + 2 * t + 1] = acc[1];
  mine[(g + 8) * kXRows + 2 * t] = acc[2];
  mine[(g + 8) * kXRows + 2 * t + 1] = acc[3];
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < kRowsPerCta * kXRows; e += 32 * W) {
    const int m = e / kRowsPerCta, r = e - m * kRowsPerCta;
    const int64_t n = row0 + r;
    if (m >= a.M || n >= a.N) continue;
    float sum = 0.0f;
    for (int w = 0; w < W; ++w) sum += part[w * kRowsPerCta * kXRows + r * kXRows + m];
    if (a.y_bf16)
      static_cast<uint16_t*>(a.y)[m * a.N + n] = __bfloat16_as_ushort(__float2bfloat16_rn(sum));
    else
      static_cast<float*>(a.y)[m * a.N + n] = sum;
  }
}

}  // namespace

std::string stream_gemm_problem(const StreamGemmArgs& a) {
  if (a.M < 1 || a.M > kStreamMaxRows)
    return std::to_string(a.M) + " rows (the kernel takes 1.." + std::to_string(kStreamMaxRows) +
           ")";
  if (a.K <= 0 || a.K % 16 != 0) return "K = " + std::to_string(a.K) + " is not a multiple of 16";
  if (reinterpret_cast<uintptr_t>(a.x) % 16 != 0 || reinterpret_cast<uintptr_t>(a.w) % 16 != 0)
    return "x or w is not 16-byte aligned";
  if (a.warps != 4 && a.warps != 8) return std::to_string(a.warps) + " warps (4 or 8)";
  if ((a.N + kRowsPerCta - 1) / kRowsPerCta > INT32_MAX) return "too many weight rows";
  return "";
}

void linear_fp8_stream(const StreamGemmArgs& a, cudaStream_t stream) {
  const std::string problem = stream_gemm_problem(a);
  check(problem.empty(), "linear_fp8_stream: " + problem);
  if (a.N == 0) return;
  const unsigned ctas = static_cast<unsigned>((a.N + kRowsPerCta - 1) / kRowsPerCta);
  if (a.warps == 8)
    stream_gemm_kernel<8><<<ctas, 32 * 8, 0, stream>>>(a);
  else
    stream_gemm_kernel<4><<<ctas, 32 * 4, 0, stream>>>(a);
  check_launch("stream_gemm_kernel");
}

}  // namespace fp8rl::cuda
