// fp8rl bench: what the bench families share (timing, model shapes, backends, the --json
// document) and the entry point of each family. Each family prints a human-readable table and
// returns its measured rows as JSON (one object per backend it ran on).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "core/json.hpp"
#include "core/rng.hpp"
#include "model/config.hpp"

namespace fp8rl::cli::bench {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0);
// CPU time of this process so far, all threads (what a step costs, whatever else the machine
// runs at the same time).
double process_cpu_seconds();

// Median wall time in seconds of fn() (followed by a synchronize), after one warm-up call.
double time_op(Backend& be, const std::function<void()>& fn, double min_seconds, int min_reps);

// Device memory holding n random standard-normal BF16 values (a fixed table of draws, picked by
// rng: fast enough for 10^9 elements).
Buffer upload_random_bf16(Backend& be, int64_t n, Rng& rng);

// The backends named by --backend: all (the CPU, then CUDA when usable), cpu, cuda or auto.
std::vector<std::unique_ptr<Backend>> backends_for(const std::string& choice);

// The model shapes the benchmarks run, by --model name: "small" (a random model small enough
// for a 2-core CPU), "qwen3-0.6b" and "qwen3-1.7b" (the Hugging Face configs' shapes, tied
// embeddings as there), "qwen3-8b" (its 36 layers, untied: for kernel shapes; a whole model of
// it needs ~100 GB with training state). Unknown names are errors naming --model and the allowed
// names.
const std::vector<std::string>& model_names();
ModelConfig model_shape(const std::string& name);
// "hidden 1024, 28 layers, 16/8 heads of 128, intermediate 3072, vocab 151936"
std::string describe(const ModelConfig& cfg);

// "64,256" → {64, 256}: positive integers; errors name the option and the bad item.
std::vector<int64_t> parse_positive_list(const std::string& text, const std::string& option);
// An integer ≥ min / a positive integer / a non-negative number of seconds given to an option;
// errors name the option.
int64_t integer_option(const std::string& text, const std::string& option, int64_t min);
int64_t positive_option(const std::string& text, const std::string& option);
double seconds_option(const std::string& text, const std::string& option);

// A number for the JSON document (null when not finite: JSON has no NaN or infinity).
Json number(double v);
// {"backend": name, "device": description} of a backend, the start of each run's object.
Json backend_json(Backend& be);
// Writes {"bench": name, "version": ..., "runs": runs} to path (the --json option); errors name
// the file.
void write_json(const std::string& path, const std::string& bench, const Json::Array& runs);

// --- The families. Each prints its table to stdout and returns the run's JSON object.

// Imports `runs` TensorBoard runs of about `scalars` scalars each (NeMo RL's names, one event
// per scalar) made in dir (a temporary folder when ""; kept when given) into a fresh store, then
// times the run list of those runs against as many recorded ones (docs/tensorboard.md).
Json bench_import(int64_t runs, int64_t scalars, const std::string& dir);

// Encode and decode MB/s of the tokenizer in dir on about `megabytes` of mixed text (one core).
Json bench_tokenize(const std::string& dir, double megabytes);

struct GemmShape {
  std::string name;
  int64_t M, N, K;
};
std::vector<GemmShape> gemm_gpu_shapes();
std::vector<GemmShape> gemm_cpu_shapes();
std::vector<GemmShape> parse_gemm_shapes(const std::string& spec);  // "M,N,K;M,N,K"
// BF16 vs FP8 fprop, dgrad and wgrad per shape; with algos > 1 (backends with the kernel option
// gemm_algo) also each precision's best of cuBLASLt's first `algos` algorithms, and which.
Json bench_gemm(Backend& be, const std::vector<GemmShape>& shapes, double min_seconds,
                int64_t algos = 1);
Json bench_quant(Backend& be, const std::vector<std::pair<int64_t, int64_t>>& shapes,
                 double min_seconds);

struct RolloutOptions {
  std::string model;
  std::vector<int64_t> batches;
  int64_t prompt_len = 0, new_tokens = 0;
  // > 0: also generate with ragged lengths, each response's drawn uniformly from
  // [ragged_min, new_tokens] (BF16 and FP8 + FP8 KV): finished sequences leave the batch.
  int64_t ragged_min = 0;
};
Json bench_rollout(Backend& be, const RolloutOptions& o);

// bench decode: one decode step's kernels at a model's shapes, each batch of `batches` rows,
// against a device copy measured in the same run. The FP8 linears (linear_fp8, quantization
// fused) beside quantize + GEMM and BF16, per linear and summed over a layer's seven; attention
// over BF16 and FP8 KV caches of each of `contexts` positions per row (the decode kernel, no
// sequence split, the first kernel); the layer's linears + attention FP8 + FP8 KV against BF16.
// Operands rotate through copies of at least 512 MiB on a device, so each call streams from
// device memory rather than L2. On a backend with kernel options, sweeps at `sweep_batch` rows
// (0: none): the GEMM's K splits, the rows up to which the fused GEMM pays, the attention's
// sequence splits. Each timing takes at least `seconds`.
struct DecodeOptions {
  std::string model;
  std::vector<int64_t> batches, contexts;
  int64_t sweep_batch = 0;
  double seconds = 0.05;
};
Json bench_decode(Backend& be, const DecodeOptions& o);

// bench attention: causal GQA attention forward and backward (BF16) at heads_q / heads_kv heads
// of head_dim, for each sequence length T with max(1, tokens / T) sequences: ms and TFLOP/s
// (causal FLOPs: forward 4·B·Hq·T²·D/2, backward 2.5x), on each kernel the backend has (CUDA:
// attention_mma 2, the FP32 kernels, and 1, the tensor cores, with their speed ratios and the
// relative difference of their outputs). Each timing takes at least `seconds`.
struct AttentionOptions {
  std::vector<int64_t> seq_lens;
  int64_t tokens = 0;
  int64_t heads_q = 32, heads_kv = 8, head_dim = 128;  // Qwen3-8B
  double seconds = 0.2;
};
Json bench_attention(Backend& be, const AttentionOptions& o);

struct TrainOptions {
  std::string model;
  int64_t batch = 0, seq_len = 0, warmup = 1, steps = 0;
};
Json bench_train(Backend& be, const TrainOptions& o);

// bench train --seeds N: the preset run to the end for N seeds (from first_seed) in FP8 and in
// BF16; final validation accuracies, their means, spread, the FP8 − BF16 gap with its 95 %
// interval, and per run the wall time to the first validation >= target and to the end.
struct SeedsOptions {
  std::string preset;
  std::vector<std::string> sets;
  int64_t seeds = 0, first_seed = 1;
  double target = 0.9;  // the validation accuracy whose first arrival is timed
};
Json bench_seeds(Backend& be, const SeedsOptions& o);

struct StepOptions {
  std::string preset;
  std::string model;  // empty: the preset's own shape
  std::vector<std::string> sets;
  int64_t warmup = 1, steps = 0;
  std::vector<std::string> modes;  // bench step --modes (bf16, fp8, fp8kv); empty: all three
  bool pytorch = true;             // CPU: also time the step in PyTorch when torch is importable
  bool op_times = false;           // device backends: the timed steps' time op by op, per mode
  int64_t project_layers = 0;      // > 0: also measure at half the layers, project to this many
};
Json bench_step(Backend& be, const StepOptions& o);

// bench experts: one mixture-of-experts layer's expert GEMMs (gate, up, down of `experts`
// experts of `inter` features on `hidden`, tokens routed uniformly to top_k each) for each count
// of `tokens`: fprop, dgrad and wgrad, one call per expert against one grouped call, BF16 and
// block-scaled FP8; TFLOP/s, the grouped call's speed-up and FP8 against BF16. Each timing at
// least `seconds`.
struct ExpertsOptions {
  std::vector<int64_t> tokens;
  int64_t experts = 0, top_k = 0, hidden = 0, inter = 0;
  double seconds = 0;
};
Json bench_experts(Backend& be, const ExpertsOptions& o);
// bench moe: GRPO steps of a mixture-of-experts preset, a dense model with the same active
// parameters, and routing replay off and on (o.model is not used).
Json bench_moe(Backend& be, const StepOptions& o);

// The cores' FP32 peak, measured in this process (bench_cpu.cpp): GFLOP/s of a loop of
// independent vector FMAs (fma_*; a multiply and an add where the CPU has no FMA) and of
// multiplies then adds (muladd_*: the instruction mix of the CPU GEMM, which never fuses so that
// every instruction-set path rounds alike), on one thread and on all of the backend's threads.
struct CpuPeak {
  int threads = 1;
  std::string fma_name, muladd_name;
  bool fma_has_fma = false;
  double fma_core = 0, fma_all = 0, muladd_core = 0, muladd_all = 0;
};
CpuPeak measure_cpu_peak();
// A Python that can import torch ($FP8RL_PYTHON, python3, /usr/bin/python3), or "".
std::string find_torch_python();
// A kernel option set for the life of the guard (restored to its default after); ok() says
// whether the backend has the option (the CPU has none).
class OptionGuard {
 public:
  OptionGuard(Backend& be, const std::string& name, int64_t value) : be_(be), name_(name) {
    ok_ = be_.set_kernel_option(name_, value);
  }
  ~OptionGuard() {
    if (ok_) be_.set_kernel_option(name_, 0);
  }
  OptionGuard(const OptionGuard&) = delete;
  OptionGuard& operator=(const OptionGuard&) = delete;
  bool ok() const { return ok_; }

 private:
  Backend& be_;
  std::string name_;
  bool ok_ = false;
};

// A helper script installed with the engine (share/fp8rl/tools, or $FP8RL_TOOLS), or "".
std::string find_tool(const std::string& name);
// Runs a shell command and parses the last line of its stdout as JSON; errors name it.
Json run_tool_json(const std::string& command);

// bench ranks: GRPO steps of a preset on each rank count (mpirun, fp8rl train), against the
// first count.
struct RanksOptions {
  std::string preset, backend;
  std::vector<std::string> sets;
  std::vector<int64_t> ranks;
  int64_t warmup = 1, steps = 0;
};
Json bench_ranks(const RanksOptions& o);

#if defined(FP8RL_HAVE_IPC)
Json bench_telemetry(Backend& be, int64_t warmup, int64_t steps);
#endif

}  // namespace fp8rl::cli::bench
