// CPU reference: token sampling from logits (sample_tokens), row by row with the sampling rules
// of backend/sampling_rules.hpp (which host sampling in rollout/sampling.cpp follows too).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/access.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/sampling_rules.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
using cpu::ld;

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
      const float lse = softmax_exps(x, V, inv_t, e.data());
      int64_t j = -1;
      if (std::isfinite(lse))
        j = uniforms ? inverse_cdf(e.data(), V, uniforms[m]) : first_argmax(x, V);
      tokens[m] = static_cast<int32_t>(j);
      logprobs[m] = j >= 0 ? x[j] * inv_t - lse : NAN;
    }
  });
}

}  // namespace fp8rl
