// Token log-probabilities (and entropy) of logits, and their gradient (mirrors
// engine/backend/cpu/logprobs.cpp). Shapes: logits, dlogits [M, V] (f32 or bf16), targets [M]
// int32 (device), logp, entropy, dlogp [M] f32. z = logits·inv_t per row:
//   logp = z[target] − lse(z),  entropy = lse(z) − Σ softmax(z)·z,
//   dlogits = dlogp·inv_t·(onehot(target) − softmax(z)).
//
// One block per row (V reaches ~150k). The softmax statistics come from one read of the row with
// an online update (running max m, Σ e^(z−m), Σ e^(z−m)·z), merged across threads in a fixed
// order; the CPU takes the max first and sums after, so the two agree up to rounding.
// Elements with z = −inf add nothing (their probability is 0; the reference's 0·(−inf) would
// make the entropy NaN, which is not the limit). A target outside [0, V) cannot be rejected
// before launch without a synchronisation: it gives logp = NaN and a gradient without the
// one-hot term.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"

namespace fp8rl {
namespace {

using cuda::In, cuda::Out;
using cuda::SoftmaxStats;

constexpr int kThreads = cuda::kSoftmaxRowThreads;  // token_logprobs' lse = sample_tokens' lse

template <bool kEntropy>
__global__ void __launch_bounds__(kThreads)
    token_logprobs_kernel(In logits, int64_t M, int64_t V, const int32_t* __restrict__ targets,
                          float inv_t, float* __restrict__ logp, float* __restrict__ entropy) {
  __shared__ SoftmaxStats warp_stats[cuda::kSoftmaxRowWarps];
  for (int64_t row = blockIdx.x; row < M; row += gridDim.x) {  // block-uniform
    const SoftmaxStats st =
        cuda::row_softmax_stats<kThreads, kEntropy>(logits, row, V, inv_t, warp_stats);
    if (threadIdx.x == 0) {
      const float lse = st.lse();
      const int64_t target = targets[row];
      const float zt = (target >= 0 && target < V) ? logits[row * V + target] * inv_t : NAN;
      logp[row] = zt - lse;
      if constexpr (kEntropy) entropy[row] = lse - st.t / st.s;
    }
  }
}

// Each thread reads an element before writing its gradient at the same index, after the whole
// row was read for the statistics: dlogits may alias logits of the same dtype.
__global__ void __launch_bounds__(kThreads)
    token_logprobs_backward_kernel(In logits, int64_t M, int64_t V,
                                   const int32_t* __restrict__ targets, float inv_t,
                                   const float* __restrict__ dlogp, Out dlogits) {
  __shared__ SoftmaxStats warp_stats[cuda::kSoftmaxRowWarps];
  for (int64_t row = blockIdx.x; row < M; row += gridDim.x) {  // block-uniform
    const SoftmaxStats st =
        cuda::row_softmax_stats<kThreads, false>(logits, row, V, inv_t, warp_stats);
    const float g = dlogp[row] * inv_t;
    const int64_t target = targets[row];
    for (int64_t j = threadIdx.x; j < V; j += kThreads) {
      const float p = expf(logits[row * V + j] * inv_t - st.m) / st.s;
      dlogits.store(row * V + j, g * ((j == target ? 1.0f : 0.0f) - p));
    }
  }
}

unsigned row_grid(int64_t M, int sm_count) {
  return cuda::grid_for(M, 1, int64_t{8} * std::max(sm_count, 1));
}

}  // namespace

void CudaBackend::token_logprobs(const Matrix& logits, const int32_t* targets,
                                 float inv_temperature, float* logp, float* entropy) {
  const OpScope scope(*this, "token_logprobs");
  const char* op = "token_logprobs";
  cuda::check_activation(op, "logits", logits);
  const int64_t M = logits.rows, V = logits.cols;
  if (M == 0) return;
  check(V > 0, std::string(op) + ": " + cuda::shape_of("logits", logits) + " has no columns");
  cuda::check_data(op, "logits", logits.data);
  cuda::check_data(op, "targets", targets);
  cuda::check_data(op, "logp", logp);
  make_current();
  const unsigned grid = row_grid(M, sm_count_);
  if (entropy) {
    token_logprobs_kernel<true><<<grid, kThreads, 0, stream_>>>(cuda::in_of(logits), M, V, targets,
                                                                inv_temperature, logp, entropy);
  } else {
    token_logprobs_kernel<false><<<grid, kThreads, 0, stream_>>>(cuda::in_of(logits), M, V, targets,
                                                                 inv_temperature, logp, nullptr);
  }
  cuda::check_launch("token_logprobs_kernel");
}

void CudaBackend::token_logprobs_backward(const Matrix& logits, const int32_t* targets,
                                          float inv_temperature, const float* dlogp,
                                          const Matrix& dlogits) {
  const OpScope scope(*this, "token_logprobs_backward");
  const char* op = "token_logprobs_backward";
  cuda::check_activation(op, "logits", logits);
  const int64_t M = logits.rows, V = logits.cols;
  cuda::check_activation(op, "dlogits", dlogits, M, V);
  if (M == 0 || V == 0) return;
  cuda::check_data(op, "logits", logits.data);
  cuda::check_data(op, "targets", targets);
  cuda::check_data(op, "dlogp", dlogp);
  cuda::check_data(op, "dlogits", dlogits.data);
  check(dlogits.data != logits.data || dlogits.dtype == logits.dtype,
        std::string(op) + ": dlogits aliases logits of another dtype");
  make_current();
  token_logprobs_backward_kernel<<<row_grid(M, sm_count_), kThreads, 0, stream_>>>(
      cuda::in_of(logits), M, V, targets, inv_temperature, dlogp, cuda::out_of(dlogits));
  cuda::check_launch("token_logprobs_backward_kernel");
}

}  // namespace fp8rl
