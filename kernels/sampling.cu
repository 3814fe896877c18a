// Token sampling from logits on the device (mirrors engine/backend/cpu/sampling.cpp): inverse-CDF
// sampling from the whole softmax(logits·inv_t), or greedy argmax. Shapes: logits [M, V] (f32 or
// bf16), uniforms [M] f64, tokens [M] int32, logprobs [M] f32, all in device memory.
//
// One block of kThreads per row (grid-stride over rows), no atomics, a fixed partition and
// summation order: the result depends only on the inputs.
//  1. Softmax statistics (max m, s = Σ e^(z−m)) by row_softmax_stats with token_logprobs' block
//     size, so lse = m + log s and the log-probability are those token_logprobs computes for the
//     same row (logprobs.cu).
//  2. Thread t owns the contiguous chunk [t·c, (t+1)·c), c = ⌈V / kThreads⌉, and sums its
//     e_j = exp(z_j − m) (FP32 values, as on the CPU) in FP64. FP64 rather than Kahan FP32: the
//     partial and prefix sums then carry ~1e-16 relative error, so the device CDF differs from
//     the CPU's sequential FP64 one only through expf's rounding of each e_j, and a u·Σ e that
//     lands closer than that to a boundary is the only way the two pick different tokens; the
//     extra FP64 add per element is hidden behind the loads.
//  3. Inclusive scan of the chunk sums in thread order: chained lane after lane within a warp,
//     warp totals added in warp order. Chained sums are monotone and an all-zero chunk adds
//     exactly nothing, so the chunk boundaries B_t never decrease and repeat across empty chunks.
//  4. target = max(u, 0)·Σ e. The owner is the first thread with target < B_t (a warp ballot, then
//     the first warp): its chunk has a non-zero e and B_{t−1} ≤ target. It walks the chunk, FP64
//     again, for the first j whose partial sum exceeds target − B_{t−1}; should rounding let the
//     walk pass the end, the chunk's last non-zero e_j. No owner (target ≥ Σ e: u ≥ 1): the row's
//     last j with e_j > 0.
// Greedy (uniforms = nullptr): the first index of the largest logit, from a strided pass merged
// by (value, lower index).
// Non-finite rows: when lse or Σ e is not finite (a NaN or +inf logit, or every logit −inf) the
// row gets token −1 and log-prob NaN, as on the CPU; nothing is drawn from it (token_logprobs
// gives NaN there too).
// Products z = logit·inv_t are rounded before the subtraction (__fmul_rn: no FMA contraction),
// as on the CPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"

namespace fp8rl {
namespace {

using cuda::In;
using cuda::kFullMask;
using cuda::SoftmaxStats;

constexpr int kThreads = cuda::kSoftmaxRowThreads;  // token_logprobs' lse = sample_tokens' lse
constexpr int kWarps = cuda::kSoftmaxRowWarps;

// e_j = exp(z_j − m) with z_j = logit·inv_t rounded first, as the CPU computes it.
__device__ __forceinline__ float exp_term(In logits, int64_t i, float inv_t, float m) {
  return expf(__fmul_rn(logits[i], inv_t) - m);
}

__device__ __forceinline__ float logprob_of(In logits, int64_t i, float inv_t, float lse) {
  return __fmul_rn(logits[i], inv_t) - lse;
}

__global__ void __launch_bounds__(kThreads)
    sample_tokens_kernel(In logits, int64_t M, int64_t V, float inv_t,
                         const double* __restrict__ uniforms, int32_t* __restrict__ tokens,
                         float* __restrict__ logprobs) {
  __shared__ SoftmaxStats warp_stats[kWarps];
  __shared__ double warp_sum[kWarps];      // Σ e of the warp's chunks
  __shared__ long long warp_last[kWarps];  // last j with e_j > 0 in the warp's chunks, or −1
  __shared__ int warp_first[kWarps];       // first thread of the warp with target < B_t
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  const int64_t chunk = (V + kThreads - 1) / kThreads;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * chunk;
  const int64_t begin = first < V ? first : V;
  const int64_t end = begin + chunk < V ? begin + chunk : V;
  for (int64_t row = blockIdx.x; row < M; row += gridDim.x) {  // block-uniform
    const SoftmaxStats st =
        cuda::row_softmax_stats<kThreads, false>(logits, row, V, inv_t, warp_stats);
    const float lse = st.lse();
    const int64_t base = row * V;

    // 2. This thread's chunk: Σ e in FP64 and the last non-zero e.
    double sum = 0.0;
    long long last = -1;
    for (int64_t j = begin; j < end; ++j) {
      const float e = exp_term(logits, base + j, inv_t, st.m);
      sum += e;
      if (e > 0.0f) last = j;
    }

    // 3. Inclusive scan in thread order. Lane i adds its sum to lane i−1's final value at step i.
    double incl = sum;
    for (int i = 1; i < 32; ++i) {
      const double prev = __shfl_up_sync(kFullMask, incl, 1);
      if (lane == i) incl = prev + sum;
    }
    long long wlast = last;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const long long o = __shfl_xor_sync(kFullMask, wlast, off);
      wlast = o > wlast ? o : wlast;
    }
    if (lane == 31) warp_sum[warp] = incl;
    if (lane == 0) warp_last[warp] = wlast;
    __syncthreads();
    double prefix = 0.0;  // Σ of the earlier warps, in warp order
    for (int w = 0; w < warp; ++w) prefix += warp_sum[w];
    double total = prefix;  // the same sequence continued: equal in every thread
    for (int w = warp; w < kWarps; ++w) total += warp_sum[w];
    const double hi = prefix + incl;  // B_t
    // B_{t−1}: the previous lane's B, or for lane 0 the prefix, which is the previous warp's last
    // B computed by the same addition (0 for thread 0).
    const double hi_prev = __shfl_up_sync(kFullMask, hi, 1);
    const double lo = lane == 0 ? prefix : hi_prev;

    // 4. The owner of target, then its walk.
    const bool valid = isfinite(lse) && isfinite(total) && total > 0.0;
    const double u = uniforms[row];
    const double target = (u > 0.0 ? u : 0.0) * total;  // a NaN u counts as 0 too
    const unsigned owners = __ballot_sync(kFullMask, valid && target < hi);
    if (lane == 0)
      warp_first[warp] = owners ? warp * 32 + __ffs(static_cast<int>(owners)) - 1 : kThreads;
    __syncthreads();
    int owner = kThreads;
    for (int w = 0; w < kWarps && owner == kThreads; ++w) owner = warp_first[w];
    if (static_cast<int>(threadIdx.x) == owner) {
      const double rem = target - lo;  // ≥ 0: B_{t−1} ≤ target
      double acc = 0.0;                // the same additions as `sum`
      long long choice = last;         // ≥ 0: the owner's chunk sum is positive
      for (int64_t j = begin; j < end; ++j) {
        acc += exp_term(logits, base + j, inv_t, st.m);
        if (rem < acc) {
          choice = j;
          break;
        }
      }
      tokens[row] = static_cast<int32_t>(choice);
      logprobs[row] = logprob_of(logits, base + choice, inv_t, lse);
    } else if (owner == kThreads && threadIdx.x == 0) {
      long long choice = -1;  // invalid row, or u ≥ 1: the last token with e_j > 0
      if (valid)
        for (int w = 0; w < kWarps; ++w) choice = warp_last[w] > choice ? warp_last[w] : choice;
      tokens[row] = static_cast<int32_t>(choice);
      logprobs[row] = choice >= 0 ? logprob_of(logits, base + choice, inv_t, lse) : NAN;
    }
    __syncthreads();  // the shared arrays are rewritten for the next row
  }
}

// Greedy: the first index of the largest logit (NaN logits never win; such rows are invalid).
__global__ void __launch_bounds__(kThreads)
    argmax_tokens_kernel(In logits, int64_t M, int64_t V, float inv_t, int32_t* __restrict__ tokens,
                         float* __restrict__ logprobs) {
  __shared__ SoftmaxStats warp_stats[kWarps];
  __shared__ float warp_best[kWarps];
  __shared__ long long warp_index[kWarps];
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  for (int64_t row = blockIdx.x; row < M; row += gridDim.x) {  // block-uniform
    const SoftmaxStats st =
        cuda::row_softmax_stats<kThreads, false>(logits, row, V, inv_t, warp_stats);
    const float lse = st.lse();
    const int64_t base = row * V;
    float best = -INFINITY;
    long long index = V;  // V: none yet (loses every tie)
    for (int64_t j = threadIdx.x; j < V; j += kThreads) {
      const float x = logits[base + j];
      if (x > best) {  // strictly: this thread's first occurrence
        best = x;
        index = j;
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float ob = __shfl_xor_sync(kFullMask, best, off);
      const long long oi = __shfl_xor_sync(kFullMask, index, off);
      if (ob > best || (ob == best && oi < index)) {
        best = ob;
        index = oi;
      }
    }
    if (lane == 0) {
      warp_best[warp] = best;
      warp_index[warp] = index;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kWarps; ++w)
        if (warp_best[w] > best || (warp_best[w] == best && warp_index[w] < index)) {
          best = warp_best[w];
          index = warp_index[w];
        }
      const bool valid = isfinite(lse) && index < V;
      tokens[row] = valid ? static_cast<int32_t>(index) : -1;
      logprobs[row] = valid ? logprob_of(logits, base + index, inv_t, lse) : NAN;
    }
    __syncthreads();  // the shared arrays are rewritten for the next row
  }
}

}  // namespace

void CudaBackend::sample_tokens(const Matrix& logits, float inv_temperature, const double* uniforms,
                                int32_t* tokens, float* logprobs) {
  const OpScope scope(*this, "sample_tokens");
  const char* op = "sample_tokens";
  cuda::check_activation(op, "logits", logits);
  check(std::isfinite(inv_temperature) && inv_temperature > 0,
        std::string(op) + ": inv_temperature must be positive and finite, got " +
            std::to_string(inv_temperature) + " (greedy decoding passes uniforms = nullptr)");
  const int64_t M = logits.rows, V = logits.cols;
  if (M == 0) return;
  check(V > 0, std::string(op) + ": " + cuda::shape_of("logits", logits) + " has no columns");
  check(V <= std::numeric_limits<int32_t>::max(),
        std::string(op) + ": vocabulary " + std::to_string(V) + " does not fit int32 token ids");
  cuda::check_data(op, "logits", logits.data);
  cuda::check_data(op, "tokens", tokens);
  cuda::check_data(op, "logprobs", logprobs);
  make_current();
  const unsigned grid = cuda::grid_for(M, 1, int64_t{8} * std::max(sm_count_, 1));
  if (uniforms) {
    sample_tokens_kernel<<<grid, kThreads, 0, stream_>>>(cuda::in_of(logits), M, V, inv_temperature,
                                                         uniforms, tokens, logprobs);
    cuda::check_launch("sample_tokens_kernel");
  } else {
    argmax_tokens_kernel<<<grid, kThreads, 0, stream_>>>(cuda::in_of(logits), M, V, inv_temperature,
                                                         tokens, logprobs);
    cuda::check_launch("argmax_tokens_kernel");
  }
}

}  // namespace fp8rl
