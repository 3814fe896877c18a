#include "rollout/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/sampling_rules.hpp"
#include "core/error.hpp"

namespace fp8rl {

void SamplingParams::validate() const {
  check(std::isfinite(temperature), "sampling.temperature must be finite");
  check(top_p > 0 && top_p <= 1, "sampling.top_p must be in (0, 1], got " + std::to_string(top_p));
  check(top_k >= 0, "sampling.top_k must be ≥ 0");
  check(max_new_tokens > 0, "sampling.max_new_tokens must be positive");
}

Sampled sample_token(const float* logits, int64_t V, const SamplingParams& p, Rng& rng) {
  check(V > 0, "sample_token: empty row of logits");
  const bool greedy = p.greedy();
  const float inv_t = p.inv_temperature();
  // log-softmax in the same FP32 steps as the backends' token_logprobs; the exponentials are
  // kept for sampling, so a row costs one exp per logit (a Qwen3 vocabulary is 151,936). The
  // greedy and full-distribution paths are the CPU backend's sample_tokens code, so the two
  // choose identical tokens.
  thread_local std::vector<float> e;
  e.resize(static_cast<size_t>(V));
  float sum = 0;  // Σ e in FP32 (the nucleus is measured against it)
  const float lse = softmax_exps(logits, V, inv_t, e.data(), &sum);
  check(std::isfinite(lse),
        "sample_token: the logits hold a NaN or +inf, or are all −inf: no token can be drawn");
  auto logprob = [&](int64_t j) { return logits[j] * inv_t - lse; };

  int64_t choice = 0;
  if (greedy) {
    choice = first_argmax(logits, V);
  } else if (p.top_k <= 0 && p.top_p >= 1.0) {
    // The whole distribution: inverse CDF over the vocabulary in index order.
    choice = inverse_cdf(e.data(), V, rng.uniform());
  } else {
    // Descending by logit (ties by index: deterministic); only the top-k prefix is ordered.
    thread_local std::vector<int32_t> idx;
    idx.resize(static_cast<size_t>(V));
    std::iota(idx.begin(), idx.end(), 0);
    auto before = [&](int32_t a, int32_t b) {
      return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
    };
    int64_t keep = V;
    if (p.top_k > 0) {
      keep = std::min(keep, p.top_k);
      std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(), before);
    } else {
      std::sort(idx.begin(), idx.end(), before);
    }
    double total = 0;
    for (int64_t i = 0; i < keep; ++i) total += e[static_cast<size_t>(idx[static_cast<size_t>(i)])];
    if (p.top_p < 1.0) {  // the nucleus: smallest prefix with probability ≥ top_p
      const double target = p.top_p * static_cast<double>(sum);
      double cum = 0;
      int64_t n = 0;
      while (n < keep) {
        cum += e[static_cast<size_t>(idx[static_cast<size_t>(n)])];
        ++n;
        if (cum >= target) break;
      }
      keep = n;
      total = cum;
    }
    const double u = rng.uniform() * total;
    double acc = 0;
    choice = idx[static_cast<size_t>(keep - 1)];
    for (int64_t i = 0; i < keep; ++i) {
      acc += e[static_cast<size_t>(idx[static_cast<size_t>(i)])];
      if (u < acc) {
        choice = idx[static_cast<size_t>(i)];
        break;
      }
    }
  }
  return {static_cast<int32_t>(choice), logprob(choice)};
}

}  // namespace fp8rl
