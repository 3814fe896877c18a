// How a token is drawn from a row of logits: the rules every backend's sample_tokens follows
// (CPU reference: backend/cpu/sampling.cpp; CUDA: kernels/sampling.cu, the same order of
// operations) and host sampling (rollout/sampling.cpp) uses, so that all choose identical tokens.
// Part of the backend interface, not of any backend.
#pragma once

#include <cstdint>

namespace fp8rl {

// Fills e[j] = exp(z_j − max z), z_j = logits[j]·inv_t (FP32), and returns lse = max z + log Σ e
// with the FP32 sum in index order (also stored in *sum when given): the steps of
// token_logprobs. Not finite when the row holds a NaN or +inf logit or only −inf ones (then no
// token may be drawn from it). logits and e hold V floats.
float softmax_exps(const float* logits, int64_t V, float inv_t, float* e, float* sum = nullptr);
// Inverse CDF of e[0..V) in index order with FP64 sums: the smallest j with Σ_{i≤j} e_i > u·Σ e
// (u < 0 counts as 0); the last j with e_j > 0 when none qualifies (u ≥ 1); −1 when Σ e is NaN
// or not positive.
int64_t inverse_cdf(const float* e, int64_t V, double u);
// The first index of the largest logit (greedy decoding); V > 0, no NaN.
int64_t first_argmax(const float* logits, int64_t V);

}  // namespace fp8rl
