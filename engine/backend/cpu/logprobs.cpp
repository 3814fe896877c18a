// CPU reference: token log-probabilities (and entropy) of logits, and their gradient.
#include <cmath>

#include "backend/cpu/access.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
using cpu::expect;
using cpu::ld;
using cpu::st;

namespace {
// log Σ exp(z) of row m of logits·inv_t.
float row_logsumexp(const Matrix& logits, int64_t m, float inv_t) {
  const int64_t V = logits.cols;
  float mx = -INFINITY;
  for (int64_t j = 0; j < V; ++j) mx = std::max(mx, ld(logits, m * V + j) * inv_t);
  float sum = 0.0f;
  for (int64_t j = 0; j < V; ++j) sum += std::exp(ld(logits, m * V + j) * inv_t - mx);
  return mx + std::log(sum);
}
void check_targets(const int32_t* targets, int64_t M, int64_t V, const char* op) {
  for (int64_t m = 0; m < M; ++m)
    check(targets[m] >= 0 && targets[m] < V,
          std::string(op) + ": target " + std::to_string(targets[m]) + " at row " +
              std::to_string(m) + " outside vocabulary " + std::to_string(V));
}
}  // namespace

void CpuBackend::token_logprobs(const Matrix& logits, const int32_t* targets, float inv_t,
                                float* logp, float* entropy) {
  const int64_t V = logits.cols;
  check_targets(targets, logits.rows, V, "token_logprobs");
  parallel_for(logits.rows, 4, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const float lse = row_logsumexp(logits, m, inv_t);
      logp[m] = ld(logits, m * V + targets[m]) * inv_t - lse;
      if (entropy) {
        float e = 0.0f;  // Σ p·z
        for (int64_t j = 0; j < V; ++j) {
          const float z = ld(logits, m * V + j) * inv_t;
          e += std::exp(z - lse) * z;
        }
        entropy[m] = lse - e;
      }
    }
  });
}

void CpuBackend::token_logprobs_backward(const Matrix& logits, const int32_t* targets, float inv_t,
                                         const float* dlogp, const Matrix& dlogits) {
  const int64_t V = logits.cols;
  expect(dlogits, logits.rows, V, "token_logprobs_backward", "dlogits");
  check_targets(targets, logits.rows, V, "token_logprobs_backward");
  parallel_for(logits.rows, 4, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const float lse = row_logsumexp(logits, m, inv_t);
      const float g = dlogp[m] * inv_t;
      for (int64_t j = 0; j < V; ++j) {
        const float p = std::exp(ld(logits, m * V + j) * inv_t - lse);
        st(dlogits, m * V + j, g * ((j == targets[m] ? 1.0f : 0.0f) - p));
      }
    }
  });
}

}  // namespace fp8rl
