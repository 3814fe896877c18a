// The names of what a run records (docs/telemetry.md has their meaning): step scalars, the
// per-layer FP8 and KV-scale scalars, histogram names, event kinds and run statuses. Producers (the
// run loop, the run session) and readers (the store's tools, the command line, the studio) take
// names from here only.
#pragma once

#include <cstdint>
#include <string>

namespace fp8rl {

namespace metric {
inline constexpr const char* kReward = "reward/mean";
inline constexpr const char* kRewardStd = "reward/std";
inline constexpr const char* kTrainAccuracy = "accuracy/train";
inline constexpr const char* kValAccuracy = "accuracy/validation";
inline constexpr const char* kValAccuracyInitial = "accuracy/validation_initial";
inline constexpr const char* kLoss = "loss";
inline constexpr const char* kSftLoss = "sft/loss";
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
// Seconds of the layer audit before the step's rollout (steps that audit only).
inline constexpr const char* kTimeAudit = "time/audit";
// Seconds of the step's validation passes (the initial accuracy before the first RL step, the
// periodic validation.every one); absent when the step validated nothing.
inline constexpr const char* kTimeValidation = "time/validation";
// Seconds the run spent on the previous step's telemetry: the run-store write and the sinks
// (JSON encoding, printing), plus, in a worker, sending what it queued (docs/telemetry.md).
inline constexpr const char* kTimeTelemetry = "time/telemetry";
inline constexpr const char* kRolloutTps = "throughput/rollout_tokens_per_s";
inline constexpr const char* kTrainTps = "throughput/training_tokens_per_s";
inline constexpr const char* kTokensTotal = "tokens/total";
inline constexpr const char* kResponseLength = "response_length/mean";
inline constexpr const char* kLr = "lr";
inline constexpr const char* kMemory = "memory/rss_mb";
// Linears whose generator and trainer weights or precisions differ in the step's layer audit
// (0 when every one is bit-identical; absent when the step was not audited).
inline constexpr const char* kAuditMismatches = "audit/mismatches";
// Data-parallel runs (docs/distributed.md): the number of ranks (absent for one), the seconds
// rank 0 spent in collectives during the step and the bytes it passed to them, and each rank's
// own throughput,
// "throughput/rank{r}/rollout_tokens_per_s" and "throughput/rank{r}/training_tokens_per_s"
// (the run's throughput/… scalars are the sums).
inline constexpr const char* kRanks = "dist/ranks";
inline constexpr const char* kTimeCommunication = "time/communication";
inline constexpr const char* kCommBytes = "dist/bytes";  // payload rank 0 passed to collectives
inline constexpr const char* kRankThroughputPrefix = "throughput/rank";
inline std::string rank_rollout_tps(int64_t rank) {
  return kRankThroughputPrefix + std::to_string(rank) + "/rollout_tokens_per_s";
}
inline std::string rank_train_tps(int64_t rank) {
  return kRankThroughputPrefix + std::to_string(rank) + "/training_tokens_per_s";
}

// Per-layer FP8 quantization scalars: "fp8/L{layer}/{kind}/{stat}", kind one of kFp8Kinds,
// stat one of kFp8Stats.
inline constexpr const char* kFp8Prefix = "fp8/L";
inline constexpr const char* kFp8Kinds[] = {"weight", "activation", "gradient"};
inline constexpr const char* kFp8Stats[] = {"saturated_frac", "flushed_frac", "rel_error"};
inline std::string fp8(int64_t layer, const std::string& kind, const std::string& stat) {
  return kFp8Prefix + std::to_string(layer) + "/" + kind + "/" + stat;
}
// The per-linear FP8 error signal (docs/autopilot.md): "fp8_error/L{layer}/{module}" (module
// short name), on every RL step with FP8 linears: the largest, over the linear's FP8 operands
// (its weight at recalibration, the activation it reads and the gradient it receives in the
// step's first micro-batch), of relative error + flushed share + saturated share.
inline constexpr const char* kFp8ErrorPrefix = "fp8_error/L";
inline std::string fp8_error(int64_t layer, const std::string& module) {
  return kFp8ErrorPrefix + std::to_string(layer) + "/" + module;
}
// KL(π_bf16 ‖ π) per response token of the step's first micro-batch: what the run's FP8 linears
// change in the policy (measured while the precision autopilot watches it).
inline constexpr const char* kFp8PolicyKl = "fp8/policy_kl";
// The generator's FP8 KV-cache scales: "kv_scale/L{layer}/{k|v}".
// Mixture of experts (layers with experts only): the share of tokens whose experts differ
// between the generator and the trainer's router (per layer, and in at least one layer), the
// router softmax's mean entropy (nats; per layer and over layers), the load-balancing loss.
inline constexpr const char* kMoePrefix = "moe/L";
inline constexpr const char* kMoeRoutingMismatch = "moe/routing_mismatch";  // mean over layers
inline constexpr const char* kMoeTokensRerouted = "moe/tokens_rerouted";    // any layer
inline constexpr const char* kMoeRouterEntropy = "moe/router_entropy";      // mean over layers
inline constexpr const char* kMoeAuxLoss = "moe/aux_loss";
inline std::string moe(int64_t layer,
                       const std::string& stat) {  // routing_mismatch, router_entropy
  return std::string(kMoePrefix) + std::to_string(layer) + "/" + stat;
}

inline constexpr const char* kKvScalePrefix = "kv_scale/L";
inline std::string kv_scale(int64_t layer, const std::string& k_or_v) {
  return kKvScalePrefix + std::to_string(layer) + "/" + k_or_v;
}

// Whether a scalar measures the machine (time, throughput, memory) rather than the
// computation: two runs of one config on one machine differ only in these.
inline bool measures_machine(const std::string& key) {
  return key.rfind("time/", 0) == 0 || key.rfind("throughput/", 0) == 0 ||
         key.rfind("memory/", 0) == 0;
}
}  // namespace metric

namespace histogram {
// log w = p − g of every response token, 80 bins over [−0.5, 0.5] with under/overflow: fine
// around 0, where a healthy run's weights are.
inline constexpr const char* kImportanceLogWeight = "importance_log_weight";
inline constexpr double kImportanceLogWeightRange = 0.5;
inline constexpr int kImportanceLogWeightBins = 80;
// log2 of the FP8 dequantization scales: "fp8_scale_log2/L{layer}/{kind}".
// Tokens per expert of a layer with experts in a step's training forwards: bin e counts the
// (token, choice) pairs that went to expert e (edges 0, 1, …, E).
inline constexpr const char* kExpertLoadPrefix = "expert_load/L";
inline std::string expert_load(int64_t layer) {
  return std::string(kExpertLoadPrefix) + std::to_string(layer);
}

inline constexpr const char* kFp8ScalePrefix = "fp8_scale_log2/L";
inline std::string fp8_scale_log2(int64_t layer, const std::string& kind) {
  return kFp8ScalePrefix + std::to_string(layer) + "/" + kind;
}
}  // namespace histogram

// Event kinds a run records.
namespace event {
inline constexpr const char* kStart = "start";
inline constexpr const char* kPause = "pause";
inline constexpr const char* kResume = "resume";
inline constexpr const char* kPrecision = "precision";  // data: the new map
inline constexpr const char* kSet = "set";              // data: {"key", "value"}
// A decision of the precision autopilot; data: its evidence (contract/autopilot.hpp).
inline constexpr const char* kAutopilot = "autopilot";
inline constexpr const char* kCheckpoint = "checkpoint";
inline constexpr const char* kStop = "stop";
inline constexpr const char* kFinish = "finish";
inline constexpr const char* kError = "error";
// Dead MLP channels injected for a demonstration (outliers.linears); data: {"linears", "scale"}.
inline constexpr const char* kOutliers = "outliers";
// Text an imported run logged (TensorBoard's text plugin): message "tag: text".
inline constexpr const char* kText = "text";
}  // namespace event

// Run statuses as the store keeps them.
namespace run_status {
inline constexpr const char* kRunning = "running";
inline constexpr const char* kPaused = "paused";
inline constexpr const char* kFinished = "finished";
inline constexpr const char* kFailed = "failed";
inline constexpr const char* kCrashed = "crashed";  // set by readers: the process is gone
inline constexpr const char* kStopped = "stopped";
// Whether a worker may still be serving a run with this status (running or paused).
inline bool is_live(const std::string& status) {
  return status == kRunning || status == kPaused;
}
}  // namespace run_status

}  // namespace fp8rl
