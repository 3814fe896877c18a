// fp8rl bench gemm|quant|rollout|decode|experts|attention|train|step|telemetry: the command line
// of the benchmarks (bench_*.cpp). Each prints a table per backend, ratios against the baseline
// measured in the same run; --json FILE also writes the measured rows as one JSON document.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "args.hpp"
#include "bench.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "rl/run_config.hpp"

namespace fp8rl::cli {
namespace {

constexpr const char* kUsage =
    R"(usage: fp8rl bench gemm|quant|rollout|decode|experts|attention|train|step|telemetry|tokenize|
       ranks [options]

common options:
  --backend all|cpu|cuda|auto   where to measure (default: all; train and step: auto)
  --json FILE                   also write the measured rows as a JSON document

gemm [--shapes M,N,K;...] [--seconds S] [--algos N]
    BF16 vs block-scaled FP8 fprop, dgrad and wgrad (TFLOP/s and the ratio to the fastest
    baseline; on the CPU the FP32 sgemm that the FP8 emulation wraps is a baseline too).
    --algos N (GPUs): also each precision's best of cuBLASLt's first N algorithms (kernel
    option gemm_algo) and which, at up to 0.05 s a timing.
    Default shapes: 8192^3 and Qwen3-1.7B/8B and Llama-8B linears on GPUs, 1024^3 and
    0.6B-model linears on the CPU.
quant [--seconds S]
    quantization and dequantization GB/s against a plain copy in the same run.
rollout [--model M] [--batch B[,B...]] [--prompt-len P] [--new-tokens N] [--ragged MIN]
    decode tokens/s of a random Qwen3-shaped model with BF16, FP8 linears, FP8 linears + FP8
    KV cache; a comma list of batch sizes measures each. Defaults: small, batch 16, prompt 32,
    32 new tokens on the CPU; qwen3-0.6b, batch 64, prompt 128, 128 new tokens on GPUs. With
    --ragged, BF16 and FP8 + FP8 KV also generate responses of lengths drawn from [MIN, N]
    (finished sequences leave the batch): decode time per token against the forced lengths'.
decode [--model M] [--batch B[,B...]] [--contexts C[,C...]] [--seconds S]
    one decode step's kernels at the model's shapes, for each batch of B rows, against a device
    copy measured in the same run: the FP8 linear with its activation quantization fused
    (GB/s, share of the copy's) beside quantize + GEMM and BF16, for each linear and a layer's
    seven; attention over BF16 and FP8 KV caches of C positions per row (also without sequence
    splits and with the first kernel); a layer's linears + attention BF16 over FP8 + FP8 KV.
    Targets: a layer's FP8 weights streamed at >= 80% of the copy bandwidth up to 256 rows;
    the FP8 cache read at >= 70% of it at 4096 positions (8 rows or more). On GPUs also sweeps
    of the kernels' split counts and of the rows up to which the fused GEMM pays, at the
    largest batch up to 256. Each timing at least S seconds. Defaults: small, batch 4, context
    48, S 0 on the CPU; qwen3-8b, batches 1,8,64,256,512, contexts 1280,4096, S 0.05 on GPUs.
attention [--seq-lens T[,T...]] [--tokens N] [--seconds S]
    causal grouped-query attention at Qwen3-8B's heads (32 query / 8 kv heads of 128), BF16,
    B = max(1, N / T) sequences of T tokens: forward and backward ms and TFLOP/s (causal FLOPs,
    FlashAttention's convention: forward 4*B*Hq*T^2*D/2, backward 2.5x the forward). On GPUs
    both on the FP32 kernels and on the tensor cores (kernel option attention_mma), their
    ratios and the relative difference of their outputs. Target: the tensor-core backward
    >= 200 TFLOP/s at T >= 1024. Each timing at least S seconds. Defaults: T 512,1024,2048,4096,
    N 16384, S 0.2 on GPUs; T 32,64, N 128, S 0 on the CPU.
train [--model M] [--batch B] [--seq-len T] [--steps N] [--warmup W]
    tokens/s of a full training step (forward + backward, AdamW step, re-quantization of the
    FP8 weights) of a random Qwen3-shaped model on random tokens (next-token cross-entropy),
    BF16 vs FP8 linears, with the phase split. N steps (default 5) timed after W warm-up steps
    (default 1). Defaults: small, batch 4 x 64 tokens on the CPU; qwen3-0.6b, batch 4 x 1024
    tokens on GPUs.
train --seeds N [--preset NAME] [--set key=value ...] [--target ACC]
    FP8 vs BF16 accuracy: the preset (default demo) run to the end for N seeds (the preset's
    seed and the N - 1 after it), each in FP8 and in BF16; final validation accuracy per run,
    means, standard deviations, the FP8 - BF16 gap with its standard error and 95% interval,
    and per run the wall seconds to the first validation >= ACC (default 0.9; the median
    over seeds) and to the end of the run.
step [--preset NAME] [--set key=value ...] [--model M] [--steps N] [--warmup W] [--no-pytorch]
     [--op-times] [--modes bf16,fp8,fp8kv] [--project-layers L]
    whole GRPO steps (GrpoRun::next) of a preset (default demo; --set as for fp8rl train) in
    three modes: BF16, FP8 linears, FP8 linears + FP8 KV cache (--modes: a subset, bf16
    included; on the CPU bf16 and fp8 included). No SFT steps; validation only in the first
    step, its time not counted. W warm-up steps (default 1; 0 where a step is long enough for
    its one-time work not to matter), then N timed (default 5). A line per step as it ends
    (its phases), then the phase split of the step records, recalibration's share, tokens/s,
    the speed-up vs BF16, and a verdict for the targets: FP8 + FP8 KV >= 1.48x BF16, FP8 linears >= 1.15x,
    recalibration <= 3% of the step. --model replaces the preset's model shape. On the CPU the
    modes take turns step by step, the verdict is FP8 step / BF16 step <= 1.15 (median CPU
    time), the step's GEMM FLOP/s are set against the FP32 peak measured in the same run, and
    when a python3 with torch is found (FP8RL_PYTHON) the same step in PyTorch is timed
    (tools/cpu/torch_grpo_step.py); --no-pytorch skips it. --op-times (device backends) adds
    per mode where the timed steps' time goes, op by op: calls, host and device time per step
    (the CPU backend has no op timing: use perf). --project-layers L measures the modes again
    with half the layers and projects each phase to L layers (a fixed part plus a part per
    layer, fitted through the two): a model cut to what one GPU holds has its BF16 lm_head
    and embedding weigh more than in the whole model, which understates what FP8 gains.
telemetry [--steps N] [--warmup W]
    what a worker's telemetry costs per RL step of the demo preset (run-store write, JSON
    encoding, sending on a PUB socket to a draining subscriber) against the step itself;
    W warm-up steps (default 2), then N timed (default 20). Target: below 1% of the step time.

experts [--tokens T[,T...]] [--experts E] [--top-k K] [--hidden H] [--inter I] [--seconds S]
    one mixture-of-experts layer's expert GEMMs (gate, up, down; tokens routed uniformly to K
    experts each, sorted by expert) per pass (fprop, dgrad, wgrad): one GEMM call per expert
    against one grouped call for all experts, BF16 and block-scaled FP8 on the same operands
    (quantized before the timing): TFLOP/s, the grouped speed-up, FP8 against BF16; on a
    device also the grouped call under kernel option gemm_grouped_kernel=2. Target:
    >= 1000 TFLOP/s in FP8 at Qwen3-30B-A3B's expert shapes. Defaults on GPUs: Qwen3-30B-A3B
    (128 experts of 768 on hidden 2048, top 8), tokens 4096,16384, S 0.2; on the CPU a tiny
    layer (8 experts of 128 on 256, top 2), 64 tokens, S 0.
moe [--preset NAME] [--set key=value ...] [--steps N] [--warmup W]
    whole GRPO steps of a mixture-of-experts preset (default moe-demo; moonlight-demo) against a
    dense model with the same active parameters (a dense MLP as wide as the experts a token
    uses, shared ones included; with latent attention the same model with every layer dense),
    and with routing replay off and on: step time, the ratio to the dense model, the cost of
    the replay, and the mismatch each leaves (routing mismatch, tokens rerouted, gen_kl_error,
    median token_mult_prob_error). W warm-up steps (default 1), then N timed (default 5).

ranks [--ranks 1,2] [--preset NAME] [--set key=value ...] [--steps N] [--warmup W]
    whole GRPO steps of a preset (default demo) on each number of data-parallel ranks, each
    started as `mpirun -np R fp8rl train` (docs/distributed.md) with the same global batch:
    step time, speed-up and scaling efficiency against the first count, summed rollout and
    training tokens/s, the share of the step spent in collectives and the bytes per step.
    W warm-up steps (default 1, at least 1), then N timed (default 5).

import [--runs N] [--scalars M] [--dir DIR]
    TensorBoard logs of N runs (default 1000) of about M scalars each (default 10000; NeMo
    RL's names, one event per scalar) imported into a fresh run database (target: 1,000 ×
    10,000 in under 10 s), then the run list of those runs timed against as many recorded
    ones. DIR keeps the logs and databases (default: a temporary folder, removed).

tokenize --tokenizer DIR [--megabytes M]
    encode and decode MB/s of a Hugging Face tokenizer (DIR holds tokenizer.json) on about M
    MB of mixed text (default 4), one core; the first pass (word cache cold) against the
    target of 1 MB/s.

--model: small | qwen3-0.6b | qwen3-1.7b | qwen3-8b | small-mla | moonlight-mla (random
  initialisation, the real models' shapes; qwen3-8b for bench decode's kernel shapes: its whole
  model does not fit with training state; the -mla ones: DeepSeek-V3's latent attention with
  dense MLPs, moonlight-mla Moonlight-16B-A3B's attention in 27 layers).
)";

// The options each bench accepts besides --backend and --json.
const std::map<std::string, std::set<std::string>>& bench_options() {
  static const std::map<std::string, std::set<std::string>> m = {
      {"gemm", {"shapes", "seconds", "algos"}},
      {"quant", {"seconds"}},
      {"rollout", {"model", "batch", "prompt-len", "new-tokens", "ragged"}},
      {"decode", {"model", "batch", "contexts", "seconds"}},
      {"attention", {"seq-lens", "tokens", "seconds"}},
      {"train",
       {"model", "batch", "seq-len", "steps", "warmup", "seeds", "preset", "set", "target"}},
      {"step", {"preset", "set", "model", "steps", "warmup", "modes", "project-layers"}},
      {"moe", {"preset", "set", "steps", "warmup"}},
      {"experts", {"tokens", "experts", "top-k", "hidden", "inter", "seconds"}},
      {"telemetry", {"steps", "warmup"}},
      {"tokenize", {"tokenizer", "megabytes"}},
      {"import", {"runs", "scalars", "dir"}},
      {"ranks", {"ranks", "preset", "set", "steps", "warmup"}},
  };
  return m;
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  // --set may repeat (as for fp8rl train): collect it before the parser sees the rest.
  std::vector<std::string> rest = args;
  const std::vector<std::string> sets = take_repeated(rest, "set");
  const std::set<std::string> valued = {
      "backend",    "json",           "shapes", "seconds", "batch",   "model",  "prompt-len",
      "new-tokens", "seq-len",        "steps",  "warmup",  "preset",  "seeds",  "tokenizer",
      "megabytes",  "ranks",          "target", "runs",    "scalars", "dir",    "contexts",
      "tokens",     "experts",        "top-k",  "hidden",  "inter",   "ragged", "seq-lens",
      "modes",      "project-layers", "algos"};
  const Args a(rest, valued, {"help", "no-pytorch", "op-times"});
  const auto& pos = a.positional();
  const auto& options = bench_options();
  if (a.flag("help")) return print_help(kUsage);
  std::string names;
  for (const auto& [name, accepted] : options) names += (names.empty() ? "" : ", ") + name;
  need(!pos.empty(), "needs a benchmark: one of " + names);
  need(options.count(pos[0]) > 0, "unknown benchmark '" + pos[0] + "' (one of " + names + ")");
  a.max_positional(1);
  const std::string& what = pos[0];
  const auto& accepted = options.at(what);
  auto given = [&](const std::string& name) {
    for (size_t i = 0; i < rest.size(); ++i)
      if (rest[i] == "--" + name || rest[i].rfind("--" + name + "=", 0) == 0) return true;
    return false;
  };
  for (const auto& name : valued)
    if (name != "backend" && name != "json" && !accepted.count(name) && given(name))
      throw UsageError("option --" + name + " does not apply to bench " + what);
  need(!a.flag("no-pytorch") || what == "step", "option --no-pytorch applies to bench step only");
  need(!a.flag("op-times") || what == "step", "option --op-times applies to bench step only");
  need(sets.empty() || accepted.count("set") > 0,
       "option --set does not apply to bench " + what +
           " (only to bench step, bench moe and bench train --seeds)");
  if (what == "tokenize") {
    need(given("tokenizer"), "bench tokenize needs --tokenizer DIR (a folder with tokenizer.json)");
    const double mb =
        given("megabytes") ? bench::seconds_option(a.get("megabytes", ""), "megabytes") : 4;
    check(mb > 0, "--megabytes must be positive");
    const Json run = bench::bench_tokenize(a.get("tokenizer", ""), mb);
    if (given("json")) bench::write_json(a.get("json", ""), what, Json::Array{run});
    return 0;
  }
  if (what == "import") {
#if defined(FP8RL_HAVE_STORE)
    const Json run = bench::bench_import(
        given("runs") ? bench::positive_option(a.get("runs", ""), "runs") : 1000,
        given("scalars") ? bench::positive_option(a.get("scalars", ""), "scalars") : 10000,
        a.get("dir", ""));
    if (given("json")) bench::write_json(a.get("json", ""), what, Json::Array{run});
    return 0;
#else
    throw Error("this build has no SQLite: the run store is not available");
#endif
  }
  if (what == "ranks") {
    bench::RanksOptions o;
    o.preset = a.get("preset", "demo");
    o.sets = sets;
    o.backend = a.get("backend", "auto");
    o.ranks = bench::parse_positive_list(a.get("ranks", "1,2"), "ranks");
    o.steps = given("steps") ? bench::positive_option(a.get("steps", ""), "steps") : 5;
    o.warmup = given("warmup") ? bench::integer_option(a.get("warmup", ""), "warmup", 1) : 1;
    const Json run = bench::bench_ranks(o);
    if (given("json")) bench::write_json(a.get("json", ""), what, Json::Array{run});
    return 0;
  }
  if (what == "train") {
    const bool seeds = given("seeds");
    for (const char* name : {"model", "batch", "seq-len", "steps", "warmup"})
      if (seeds && given(name))
        throw UsageError(std::string("option --") + name +
                         " does not apply to bench train --seeds (it runs the preset to the end)");
    need(seeds || !(given("preset") || !sets.empty() || given("target")),
         "options --preset, --set and --target of bench train need --seeds N");
  }

  auto int_option = [&](const std::string& name, int64_t fallback) {
    return given(name) ? bench::positive_option(a.get(name, ""), name) : fallback;
  };
  auto count_option = [&](const std::string& name, int64_t fallback) {  // ≥ 0
    return given(name) ? bench::integer_option(a.get(name, ""), name, 0) : fallback;
  };
  // Every given option is checked before anything is measured.
  for (const char* name : {"prompt-len", "new-tokens", "seq-len", "steps", "seeds", "ragged",
                           "project-layers", "algos"})
    if (given(name)) int_option(name, 0);
  if (given("warmup")) count_option("warmup", 0);
  if (given("batch") && (what == "rollout" || what == "decode"))
    bench::parse_positive_list(a.get("batch", ""), "batch");
  if (given("contexts")) bench::parse_positive_list(a.get("contexts", ""), "contexts");
  // --tokens: a list for experts, one count for attention.
  if (given("tokens")) {
    if (what == "attention")
      int_option("tokens", 0);
    else
      bench::parse_positive_list(a.get("tokens", ""), "tokens");
  }
  for (const char* name : {"experts", "top-k", "hidden", "inter"})
    if (given(name)) int_option(name, 0);
  if (given("seq-lens")) bench::parse_positive_list(a.get("seq-lens", ""), "seq-lens");
  if (given("batch") && what == "train") int_option("batch", 0);
  if (given("model")) bench::model_shape(a.get("model", ""));
  if (given("shapes")) bench::parse_gemm_shapes(a.get("shapes", ""));
#if !defined(FP8RL_HAVE_IPC)
  if (what == "telemetry")
    throw Error("this build has no ZeroMQ: worker telemetry cannot be measured");
#endif
  const double min_s = bench::seconds_option(a.get("seconds", "0.3"), "seconds");
  const bool heavy = what == "train" || what == "step" || what == "moe";
  const std::string json_path = a.get("json", "");
  Json::Array runs;
  for (auto& be : bench::backends_for(a.get("backend", heavy ? "auto" : "all"))) {
    const bool cpu = be->name() == "cpu";
    if (what == "gemm") {
      const std::string spec = a.get("shapes", "");
      runs.push_back(bench::bench_gemm(
          *be,
          spec.empty() ? (cpu ? bench::gemm_cpu_shapes() : bench::gemm_gpu_shapes())
                       : bench::parse_gemm_shapes(spec),
          min_s, int_option("algos", 1)));
    } else if (what == "quant") {
      std::vector<std::pair<int64_t, int64_t>> shapes;
      if (cpu)
        shapes = {{1024, 1024}, {2048, 4096}};
      else  // Qwen3-8B's activations, a square, then the 0.6B-shaped step's micro-batch (8 x
            // 1,280 tokens of width 1024) and its q heads' per-head norm rows (16 a token, of
            // 128), where round 5 found RMSNorm's backward slow
        shapes = {{8192, 4096}, {8192, 12288}, {16384, 16384}, {10240, 1024}, {163840, 128}};
      runs.push_back(bench::bench_quant(*be, shapes, min_s));
    } else if (what == "rollout") {
      bench::RolloutOptions o;
      o.model = a.get("model", cpu ? "small" : "qwen3-0.6b");
      o.batches = bench::parse_positive_list(a.get("batch", cpu ? "16" : "64"), "batch");
      o.prompt_len = int_option("prompt-len", cpu ? 32 : 128);
      o.new_tokens = int_option("new-tokens", cpu ? 32 : 128);
      o.ragged_min = int_option("ragged", 0);
      check(o.ragged_min <= o.new_tokens, "--ragged must be at most --new-tokens");
      runs.push_back(bench::bench_rollout(*be, o));
    } else if (what == "decode") {
      bench::DecodeOptions o;
      o.model = a.get("model", cpu ? "small" : "qwen3-8b");
      o.batches = bench::parse_positive_list(a.get("batch", cpu ? "4" : "1,8,64,256,512"), "batch");
      o.contexts =
          bench::parse_positive_list(a.get("contexts", cpu ? "48" : "1280,4096"), "contexts");
      for (int64_t b : o.batches)
        if (b <= 256) o.sweep_batch = std::max(o.sweep_batch, b);
      o.seconds = given("seconds") ? min_s : cpu ? 0.0 : 0.05;
      runs.push_back(bench::bench_decode(*be, o));
    } else if (what == "experts") {
      bench::ExpertsOptions o;
      o.tokens = bench::parse_positive_list(a.get("tokens", cpu ? "64" : "4096,16384"), "tokens");
      o.experts = int_option("experts", cpu ? 8 : 128);
      o.top_k = int_option("top-k", cpu ? 2 : 8);
      o.hidden = int_option("hidden", cpu ? 256 : 2048);
      o.inter = int_option("inter", cpu ? 128 : 768);
      o.seconds = given("seconds") ? min_s : cpu ? 0.0 : 0.2;
      runs.push_back(bench::bench_experts(*be, o));
    } else if (what == "attention") {
      bench::AttentionOptions o;
      o.seq_lens = bench::parse_positive_list(
          a.get("seq-lens", cpu ? "32,64" : "512,1024,2048,4096"), "seq-lens");
      o.tokens = int_option("tokens", cpu ? 128 : 16384);
      o.seconds = given("seconds") ? min_s : cpu ? 0.0 : 0.2;
      runs.push_back(bench::bench_attention(*be, o));
    } else if (what == "train" && given("seeds")) {
      bench::SeedsOptions o;
      o.preset = a.get("preset", "demo");
      o.sets = sets;
      o.seeds = int_option("seeds", 1);
      o.first_seed = static_cast<int64_t>(RunConfig::load(o.preset, "", sets).seed);
      if (given("target")) {
        o.target = bench::seconds_option(a.get("target", ""), "target");
        check(o.target <= 1, "--target is an accuracy in [0, 1]");
      }
      runs.push_back(bench::bench_seeds(*be, o));
    } else if (what == "train") {
      bench::TrainOptions o;
      o.model = a.get("model", cpu ? "small" : "qwen3-0.6b");
      o.batch = int_option("batch", 4);
      o.seq_len = int_option("seq-len", cpu ? 64 : 1024);
      o.steps = int_option("steps", 5);
      o.warmup = count_option("warmup", 1);
      runs.push_back(bench::bench_train(*be, o));
    } else if (what == "step" || what == "moe") {
      bench::StepOptions o;
      o.preset = a.get("preset", what == "moe" ? "moe-demo" : "demo");
      o.model = a.get("model", "");
      o.sets = sets;
      o.steps = int_option("steps", 5);
      o.warmup = count_option("warmup", 1);
      o.pytorch = what == "step" && !a.flag("no-pytorch");
      o.op_times = a.flag("op-times");
      o.project_layers = int_option("project-layers", 0);
      if (given("modes")) {  // names checked by bench_step
        std::stringstream list(a.get("modes", ""));
        for (std::string m; std::getline(list, m, ',');) o.modes.push_back(m);
      }
      runs.push_back(what == "moe" ? bench::bench_moe(*be, o) : bench::bench_step(*be, o));
    } else {
      const int64_t steps = int_option("steps", 20), warmup = count_option("warmup", 2);
#if defined(FP8RL_HAVE_IPC)
      runs.push_back(bench::bench_telemetry(*be, warmup, steps));
#else
      (void)steps, (void)warmup;
#endif
    }
    std::fflush(stdout);
    // Written after each backend, so a failure on a later one keeps what was measured.
    if (!json_path.empty()) bench::write_json(json_path, what, runs);
  }
  return 0;
}

}  // namespace fp8rl::cli
