// What a run reports: per-step scalars (names as NeMo RL / verl use them), histograms,
// events and sample responses. The run loop produces StepRecords; sinks (the run store, the
// terminal, the worker's telemetry socket) consume them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "rl/grpo.hpp"

namespace fp8rl {

struct HistogramRecord {
  std::string name;  // "importance_weight", "fp8_scale_log2/L0/weight", ...
  Histogram hist;
};

struct SampleRecord {
  std::string prompt, response, answer;
  double reward = 0;
};

struct EventRecord {
  std::string kind;  // start, pause, resume, precision, checkpoint, error, validation, finish
  std::string message;
  Json data;
};

struct StepRecord {
  int64_t step = 0;         // 1-based RL step (warm-up steps are negative: −N … −1)
  std::string phase;        // "sft" or "rl"
  double wall_seconds = 0;  // since the run started
  std::map<std::string, double> scalars;
  std::vector<HistogramRecord> histograms;
  std::vector<SampleRecord> samples;
  std::vector<EventRecord> events;

  Json to_json() const;  // one object (the `fp8rl train --json` line)
};

// Scalar names of a step (documented in docs/telemetry.md).
namespace metric {
inline constexpr const char* kReward = "reward/mean";
inline constexpr const char* kRewardStd = "reward/std";
inline constexpr const char* kTrainAccuracy = "accuracy/train";
inline constexpr const char* kValAccuracy = "accuracy/validation";
inline constexpr const char* kLoss = "loss";
inline constexpr const char* kGradNorm = "grad_norm";
inline constexpr const char* kEntropy = "entropy";
inline constexpr const char* kClipFraction = "ppo/clip_fraction";
inline constexpr const char* kTokenMultProbError = "token_mult_prob_error";
inline constexpr const char* kGenKlError = "gen_kl_error";
inline constexpr const char* kMeanWeight = "is/mean_weight";
inline constexpr const char* kOutOfBounds = "is/out_of_bounds";
inline constexpr const char* kEss = "is/effective_sample_size";
inline constexpr const char* kKl = "kl_ref";
inline constexpr const char* kTimeGeneration = "time/generation";
inline constexpr const char* kTimeLogprob = "time/logprob";
inline constexpr const char* kTimeTraining = "time/policy_training";
inline constexpr const char* kTimeRecalibration = "time/recalibration";
inline constexpr const char* kTimeTotal = "time/total_step";
inline constexpr const char* kRolloutTps = "throughput/rollout_tokens_per_s";
inline constexpr const char* kTrainTps = "throughput/training_tokens_per_s";
inline constexpr const char* kTokensTotal = "tokens/total";
inline constexpr const char* kResponseLength = "response_length/mean";
inline constexpr const char* kLr = "lr";
inline constexpr const char* kMemory = "memory/rss_mb";
}  // namespace metric

}  // namespace fp8rl
