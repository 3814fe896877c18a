// Batched autoregressive generation over the policy model with a KV cache (bf16 or FP8):
// prefill of the prompts in passes of up to GeneratorOptions::prefill_tokens tokens, then one
// decode row per active sequence per step; sequences that finish (EOS, a stop token,
// max_new_tokens) leave the batch at once. When the KV cache of every sequence does not fit the
// backend's free memory, the sequences go in waves that do (vLLM schedules them the same way).
// Generation uses the model's own linears — the same FP8 weight tiles the trainer uses.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/decoder.hpp"
#include "model/kv_cache.hpp"
#include "rollout/sampling.hpp"

namespace fp8rl {

struct Sequence {
  std::vector<int32_t> prompt;
  std::vector<int32_t> response;
  std::vector<float> logprobs;  // g: one per response token
  std::string finish_reason;    // "eos", "stop" or "length"
  // A mixture-of-experts model's routing of this sequence, per layer: the expert ids chosen
  // for each position the generator fed (prompt and response but the last token), [positions·k]
  // (empty for dense layers and dense models). The trainer compares or replays it.
  DecoderModel::Routing routing;
};

struct RolloutStats {
  int64_t sequences = 0, prompt_tokens = 0, generated_tokens = 0, decode_steps = 0;
  double prefill_seconds = 0, decode_seconds = 0, calibration_seconds = 0;
  int64_t cache_bytes = 0;  // the KV cache of one wave
  // Waves of sequences generated one after another (1 when every sequence fit at once), and
  // prefill passes (each up to GeneratorOptions::prefill_tokens prompt tokens).
  int64_t waves = 0, prefill_passes = 0;
  // Decode steps replayed from a recorded graph, the recordings made (one per batch bucket
  // used) and their time (inside decode_seconds), and why decode ran without graphs when they
  // were asked for and none was used ("" otherwise).
  int64_t graph_steps = 0, graph_captures = 0;
  double capture_seconds = 0;
  std::string graphs_unused;
  double tokens_per_second() const {
    const double t = prefill_seconds + decode_seconds;
    return t > 0 ? static_cast<double>(generated_tokens) / t : 0.0;
  }
};

// Where the next tokens are sampled. automatic: on the backend (Backend::sample_tokens, the
// logits stay in its memory) for greedy and whole-distribution sampling on any backend but the
// CPU, on the host otherwise. host / backend force one side; top-k and top-p, which the op does
// not do, always run on the host. On the CPU both sides run the same code (the tests force
// backend there to cover the device path's plumbing).
enum class SamplingSite { automatic, host, backend };

// Decode steps as recorded graphs (Backend::capture; CUDA graphs), which take the per-op launch
// cost off the step (a 28-layer model launches ~600 kernels per token). A step then runs a fixed
// bucket of rows (the next power of two ≥ the active sequences, at least 8) with inputs in
// device buffers; rows beyond the active ones are padding that writes and reads an extra cache
// slot and whose tokens are dropped. One recording per bucket, made when the batch enters it
// with at least kMinGraphSteps steps to go, dropped when it leaves it or generate() returns
// (weights and cache stay put meanwhile). Only with sampling on the backend.
//   automatic: where the backend records graphs (not the CPU); off: never;
//   unrecorded: the graph path's padded step run directly, without recording (on any backend:
//   the tests check that path's plumbing on the CPU).
enum class DecodeGraphs { automatic, off, unrecorded };

struct GeneratorOptions {
  KvDType kv_dtype = KvDType::bf16;
  int64_t max_cache_bytes = 0;  // 0: no limit; otherwise generate() refuses larger plans
  SamplingSite sampling = SamplingSite::automatic;
  DecodeGraphs graphs = DecodeGraphs::automatic;
  // Sequences in flight at once. 0: as many as the backend's free memory holds the KV cache of
  // (Backend::memory_available, after a reserve for a step's work: see kWorkReserve), all of
  // them on backends that do not limit memory (the CPU); n > 0: at most n. The rest wait for
  // the next wave. Results do not depend on it (each sequence samples with its own generator).
  int64_t max_batch = 0;
  // Prompt tokens per prefill pass: whole prompts, at least one per pass. Bounds the prefill's
  // activations (512 prompts of 256 tokens at Qwen3-8B width would take 3 GiB per SwiGLU
  // operand in one pass); vLLM's max_num_batched_tokens plays the same part.
  int64_t prefill_tokens = 8192;
};

class Generator {
 public:
  Generator(DecoderModel& model, GeneratorOptions opt);

  // Generates a response for every prompt. Each sequence samples with its own generator
  // seeded from (params.seed, its index or params.sequence_ids[i]), so results do not depend
  // on batch composition, waves or prefill passes. The KV cache is freed on return (training
  // gets its memory).
  std::vector<Sequence> generate(const std::vector<std::vector<int32_t>>& prompts,
                                 const SamplingParams& params);
  // Sequences of max_len positions (prompt + response) one wave can hold: opt.max_batch, or
  // what Backend::memory_available leaves for their KV cache and decode logits after
  // kWorkReserve and a prefill pass's activations; 0 where not even one fits. INT64_MAX where
  // neither limits.
  int64_t wave_capacity(int64_t max_len, bool graphs) const;

  const RolloutStats& last_stats() const { return stats_; }
  // FP8 KV scales (k, v per layer) the generator holds; empty until calibrated.
  std::vector<std::pair<float, float>> kv_scales() const;
  // Sets the FP8 KV scales (from the trainer's calibration after a step).
  void set_kv_scales(const std::vector<std::pair<float, float>>& s);
  // Calibrates the FP8 KV scales on prompts (forward pass recording amax of k and v).
  void calibrate(const std::vector<std::vector<int32_t>>& prompts);

 private:
  // One wave: generate() for sequences that fit at once.
  std::vector<Sequence> generate_wave(const std::vector<std::vector<int32_t>>& prompts,
                                      const SamplingParams& params, int64_t max_len, bool on_device,
                                      bool graphs);

  DecoderModel& model_;
  GeneratorOptions opt_;
  std::unique_ptr<KvCache> cache_;
  std::vector<std::pair<float, float>> scales_;
  RolloutStats stats_;
};

// A recording needs at least this many decode steps ahead to pay for itself: recording and
// instantiating cost about as much as one step launched op by op (a few µs per node), and each
// replay saves most of a step's launch time. A guess until measured on a GPU; 4 lets the GPU
// preset's 10-token answers use graphs.
inline constexpr int64_t kMinGraphSteps = 4;

// Device memory a wave leaves free beyond the KV cache, the decode logits and a prefill pass's
// activations: the GEMM libraries' workspaces, the sampler's buffers, recorded graphs and the
// allocator's fragmentation.
inline constexpr int64_t kWorkReserve = int64_t{1} << 30;

}  // namespace fp8rl
