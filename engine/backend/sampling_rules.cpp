#include "backend/sampling_rules.hpp"

#include <algorithm>
#include <cmath>

namespace fp8rl {

float softmax_exps(const float* logits, int64_t V, float inv_t, float* e, float* sum_out) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < V; ++j) mx = std::max(mx, logits[j] * inv_t);
  float sum = 0.0f;
  for (int64_t j = 0; j < V; ++j) sum += (e[j] = std::exp(logits[j] * inv_t - mx));
  if (sum_out) *sum_out = sum;
  return mx + std::log(sum);
}

int64_t inverse_cdf(const float* e, int64_t V, double u) {
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

int64_t first_argmax(const float* logits, int64_t V) {
  return std::max_element(logits, logits + V) - logits;
}

}  // namespace fp8rl
