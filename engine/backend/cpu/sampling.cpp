// CPU reference: token sampling from logits (sample_tokens) and the row steps it shares with host
// sampling (rollout/sampling.cpp): softmax exponentials and log-sum-exp in the FP32 steps of
// token_logprobs, the inverse CDF in FP64 in index order, greedy argmax.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/access.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
using cpu::ld;

float cpu_softmax_exps(const float* logits, int64_t V, float inv_t, float* e, float* sum_out) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < V; ++j) mx = std::max(mx, logits[j] * inv_t);
  float sum = 0.0f;
  for (int64_t j = 0; j < V; ++j) sum += (e[j] = std::exp(logits[j] * inv_t - mx));
  if (sum_out) *sum_out = sum;
  return mx + std::log(sum);
}

int64_t cpu_inverse_cdf(const float* e, int64_t V, double u) {
  double total = 0;
  for (int64_t j = 0; j < V; ++j) total += e[j];
  if (!(total > 0) || !std::isfinite(total)) return -1;
  const double target = (u > 0 ? u : 0.0) * total;
  double acc = 0;
  for (int64_t j = 0; j < V; ++j) {
    acc += e[j];
    if (target < acc) return j;
  }
  // u ≥ 1: the last token with a non-zero probability (there is one: total > 0).
  int64_t last = V - 1;
  while (last > 0 && !(e[last] > 0)) --last;
  return last;
}

int64_t cpu_argmax(const float* logits, int64_t V) {
  return std::max_element(logits, logits + V) - logits;
}

void CpuBackend::sample_tokens(const Matrix& logits, float inv_t, const double* uniforms,
                               int32_t* tokens, float* logprobs) {
  const char* op = "sample_tokens";
  check(logits.dtype == DType::f32 || logits.dtype == DType::bf16,
        std::string(op) + ": logits must be f32 or bf16, got " + dtype_name(logits.dtype));
  check(std::isfinite(inv_t) && inv_t > 0,
        std::string(op) + ": inv_temperature must be positive and finite, got " +
            std::to_string(inv_t) + " (greedy decoding passes uniforms = nullptr)");
  const int64_t M = logits.rows, V = logits.cols;
  if (M <= 0) return;
  check(V > 0, std::string(op) + ": logits " + cpu::shape(logits) + " has no columns");
  check(V <= std::numeric_limits<int32_t>::max(),
        std::string(op) + ": vocabulary " + std::to_string(V) + " does not fit int32 token ids");
  check(tokens && logprobs, std::string(op) + ": tokens or logprobs is a null pointer");
  // Rows in parallel, at least ~64k logits per task.
  const int64_t grain = std::max<int64_t>(1, 65536 / V);
  parallel_for(M, grain, [&](int64_t m0, int64_t m1) {
    thread_local std::vector<float> row, e;
    e.resize(static_cast<size_t>(V));
    for (int64_t m = m0; m < m1; ++m) {
      const float* x = nullptr;
      if (logits.dtype == DType::f32) {
        x = static_cast<const float*>(logits.data) + m * V;
      } else {  // bf16: widened exactly
        row.resize(static_cast<size_t>(V));
        for (int64_t j = 0; j < V; ++j) row[static_cast<size_t>(j)] = ld(logits, m * V + j);
        x = row.data();
      }
      const float lse = cpu_softmax_exps(x, V, inv_t, e.data());
      int64_t j = -1;
      if (std::isfinite(lse))
        j = uniforms ? cpu_inverse_cdf(e.data(), V, uniforms[m]) : cpu_argmax(x, V);
      tokens[m] = static_cast<int32_t>(j);
      logprobs[m] = j >= 0 ? x[j] * inv_t - lse : NAN;
    }
  });
}

}  // namespace fp8rl
