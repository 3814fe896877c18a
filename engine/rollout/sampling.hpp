// Token sampling from logits: temperature, top-k, top-p, seeded. The recorded log-probability
// (g in the recipe) is that of the chosen token under softmax(logits / temperature) — the
// distribution the trainer recomputes (p); top-k/top-p truncation is not folded into it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.hpp"

namespace fp8rl {

struct SamplingParams {
  double temperature = 1.0;  // ≤ 0: greedy (argmax); its log-probs use temperature 1
  double top_p = 1.0;        // nucleus: smallest set of tokens with probability ≥ top_p
  int64_t top_k = 0;         // 0: off
  int64_t max_new_tokens = 64;
  int32_t eos_token = -1;                // −1: none
  std::vector<int32_t> more_eos_tokens;  // further ids that end a sequence (several eos ids)
  std::vector<int32_t> stop_tokens;
  uint64_t seed = 0;
  // Generator::generate: the index each prompt's sequence seeds its sampler with, one per
  // prompt (empty: its position). A data-parallel rank passes the sequences' indices in the
  // whole step's batch, so that it samples what one rank generating everything would.
  std::vector<int64_t> sequence_ids;
  // Generator::generate: when not empty, one per prompt: the sequence generates exactly that
  // many tokens (at most max_new_tokens), ending with finish_reason "length" whatever it
  // samples — <eos> and stop tokens included. Benchmarks force a workload's lengths this way.
  std::vector<int64_t> response_lengths;

  void validate() const;  // throws naming the bad field
  bool greedy() const { return temperature <= 0; }
  // The scale of the logits whose softmax g is taken from: 1/T, or 1 when greedy.
  float inv_temperature() const { return greedy() ? 1.0f : static_cast<float>(1.0 / temperature); }
};

struct Sampled {
  int32_t token;
  float logprob;
};

// Samples one token from a row of V logits.
Sampled sample_token(const float* logits, int64_t V, const SamplingParams& p, Rng& rng);

}  // namespace fp8rl
