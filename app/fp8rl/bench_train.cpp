// fp8rl bench train: tokens/s of a full training step (forward + backward, optimizer, FP8
// weight re-quantization) of a random-init Qwen3-shaped model, BF16 vs FP8 linears.
// fp8rl bench step: whole GRPO steps (GrpoRun::next) of a preset in BF16, FP8 linears and FP8
// linears + FP8 KV cache, with the phase split of the step records and the speed-up targets; on
// the CPU also the GEMMs' share of the FP32 peak and a PyTorch baseline of the same step.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "backend/cpu/sgemm.hpp"
#include "bench.hpp"
#include "core/error.hpp"
#include "model/decoder.hpp"
#include "model/optimizer.hpp"
#include "rl/run_loop.hpp"

namespace fp8rl::cli::bench {
namespace {

const char* verdict(bool pass) {
  return pass ? "PASS" : "FAIL";
}

Json target_json(const std::string& name, double value, const std::string& relation,
                 double target) {
  Json t;
  t["name"] = name;
  t["value"] = number(value);
  t["relation"] = relation;
  t["target"] = target;
  t["pass"] = relation == ">=" ? value >= target : value <= target;
  return t;
}

}  // namespace

Json bench_train(Backend& be, const TrainOptions& o) {
  const ModelConfig cfg = model_shape(o.model);
  check(o.batch > 0 && o.seq_len > 1, "--batch must be positive and --seq-len at least 2");
  check(o.steps > 0 && o.warmup >= 0, "--steps must be positive and --warmup not negative");
  check(o.seq_len <= cfg.max_position_embeddings,
        "--seq-len " + std::to_string(o.seq_len) + " exceeds the model's " +
            std::to_string(cfg.max_position_embeddings) + " positions");
  const int64_t B = o.batch, T = o.seq_len;
  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf(
      "model: %s (%s; %.1fM parameters); batch %lld x %lld tokens; per mode %lld warm-up + "
      "%lld timed steps\n",
      o.model.c_str(), describe(cfg).c_str(), static_cast<double>(cfg.parameter_count()) / 1e6,
      static_cast<long long>(B), static_cast<long long>(T), static_cast<long long>(o.warmup),
      static_cast<long long>(o.steps));
  std::fflush(stdout);

  // Random tokens; position t of each sequence predicts token t + 1: a plain next-token
  // cross-entropy, the mean over all B·T positions, through the model's forward/backward as a
  // run's supervised warm-up step (GrpoRun::sft_step) calls them.
  Rng rng(11);
  std::vector<int32_t> ids(static_cast<size_t>(B * T)), targets(ids.size());
  for (int64_t b = 0; b < B; ++b) {
    int32_t prev = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(cfg.vocab_size));
    for (int64_t t = 0; t < T; ++t) {
      const int32_t next = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(cfg.vocab_size));
      ids[static_cast<size_t>(b * T + t)] = prev;
      targets[static_cast<size_t>(b * T + t)] = next;
      prev = next;
    }
  }
  const std::vector<float> dlogp(ids.size(), -1.0f / static_cast<float>(B * T));

  struct Mode {
    const char* name;
    Precision p;
  };
  const Mode modes[] = {{"bf16 linears", Precision::bf16}, {"fp8 linears", Precision::fp8}};
  struct Times {
    double step = 0, fwd_bwd = 0, optimizer = 0, refresh = 0, loss = 0;
  };
  std::vector<Times> times;
  // One model (one random initialisation, the slow part for large shapes): each mode switches
  // the linears' precision, which re-makes the compute copies from the FP32 masters, and gets a
  // fresh optimizer.
  DecoderModel model(be, cfg, uniform_precision(cfg, Precision::bf16), 7);
  OptimizerConfig oc;
  oc.lr = 1e-4;
  // Every mode starts from the same weights (a host copy of the masters), so that the losses
  // of the modes are comparable.
  std::vector<std::vector<float>> initial;
  for (Param* prm : model.parameters()) initial.push_back(download_floats(be, prm->master));
  for (const Mode& m : modes) {
    const auto params = model.parameters();
    for (size_t pi = 0; pi < params.size(); ++pi)
      upload_floats(be, params[pi]->master, initial[pi]);
    model.set_precision(uniform_precision(cfg, m.p));
    AdamW opt(be, model.parameters(), oc);
    Times sum;
    for (int64_t i = 0; i < o.warmup + o.steps; ++i) {
      auto t0 = Clock::now();
      model.zero_grad();
      const ForwardResult res = model.forward(ids, targets, B, T, 1.0f, true);
      model.backward(dlogp);
      be.synchronize();
      const double fb = seconds_since(t0);
      auto t1 = Clock::now();
      opt.step();
      be.synchronize();
      const double os = seconds_since(t1);
      t1 = Clock::now();
      model.refresh();  // FP8: block quantization of W and Wᵀ; BF16: the BF16 copies
      be.synchronize();
      const double rq = seconds_since(t1);
      if (i < o.warmup) continue;
      sum.fwd_bwd += fb;
      sum.optimizer += os;
      sum.refresh += rq;
      sum.step += seconds_since(t0);
      double loss = 0;
      for (float lp : res.logp) loss -= lp;
      sum.loss = loss / static_cast<double>(res.logp.size());  // the last step's
    }
    model.clear_activations();
    times.push_back(sum);
  }

  const double n = static_cast<double>(o.steps), tokens = static_cast<double>(B * T);
  std::printf("%-14s %10s %11s %12s %11s %9s %11s %8s %8s\n", "mode", "step ms", "fwd+bwd ms",
              "optimizer ms", "requant ms", "requant%", "tokens/s", "vs bf16", "loss");
  Json run = backend_json(be);
  run["model"] = o.model;
  run["model_shape"] = describe(cfg);
  run["parameters"] = cfg.parameter_count();
  run["batch"] = B;
  run["seq_len"] = T;
  run["warmup"] = o.warmup;
  run["steps"] = o.steps;
  Json::Array rows;
  const double base_tps = tokens / (times[0].step / n);
  for (size_t mi = 0; mi < times.size(); ++mi) {
    const Times& t = times[mi];
    const double step = t.step / n, tps = tokens / step;
    std::printf("%-14s %10.2f %11.2f %12.2f %11.2f %8.1f%% %11.1f %7.2fx %8.4f\n", modes[mi].name,
                step * 1e3, t.fwd_bwd / n * 1e3, t.optimizer / n * 1e3, t.refresh / n * 1e3,
                100.0 * t.refresh / t.step, tps, tps / base_tps, t.loss);
    Json row;
    row["mode"] = modes[mi].name;
    row["precision"] = precision_name(modes[mi].p);
    row["step_seconds"] = number(step);
    row["forward_backward_seconds"] = number(t.fwd_bwd / n);
    row["optimizer_seconds"] = number(t.optimizer / n);
    row["requantization_seconds"] = number(t.refresh / n);
    row["requantization_share"] = number(t.refresh / t.step);
    row["tokens_per_s"] = number(tps);
    row["vs_bf16"] = number(tps / base_tps);
    row["loss"] = number(t.loss);
    rows.push_back(row);
  }
  std::printf(
      "requant = re-making the linears' compute copies from the FP32 masters after the optimizer\n"
      "  step (fp8: block quantization of W and W^T; bf16: BF16 copies of W and W^T).\n"
      "loss = next-token cross-entropy of the last timed step on random tokens (every mode\n"
      "  starts from the same weights).\n\n");
  run["rows"] = Json(rows);
  return run;
}

namespace {

// --op-times: one table per mode, per step (the timed steps' mean): the ops with the most
// device time first, the rest summed in one row.
void print_op_times(const char* mode, const std::vector<OpTiming>& ops, double steps,
                    double step_seconds) {
  std::printf("\nop times per step, %s (step %.3f s):\n", mode, step_seconds);
  if (ops.empty()) {
    std::printf("  none recorded\n");
    return;
  }
  std::printf("  %-26s %8s %10s %10s %7s\n", "op", "calls", "host ms", "device ms", "device%");
  double host = 0, device = 0;
  for (const OpTiming& t : ops) {
    host += t.host_seconds;
    device += std::max(t.device_seconds, 0.0);
  }
  constexpr size_t kShown = 16;
  OpTiming rest{"(" + std::to_string(ops.size() > kShown ? ops.size() - kShown : 0) + " more)"};
  rest.device_seconds = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpTiming& t = ops[i];
    if (i >= kShown) {
      rest.calls += t.calls;
      rest.host_seconds += t.host_seconds;
      rest.device_seconds += std::max(t.device_seconds, 0.0);
      continue;
    }
    std::printf("  %-26s %8.0f %10.2f %10.2f %6.1f%%\n", t.op.c_str(),
                static_cast<double>(t.calls) / steps, 1e3 * t.host_seconds / steps,
                1e3 * t.device_seconds / steps,
                100.0 * std::max(t.device_seconds, 0.0) / steps / step_seconds);
  }
  if (rest.calls > 0)
    std::printf("  %-26s %8.0f %10.2f %10.2f %6.1f%%\n", rest.op.c_str(),
                static_cast<double>(rest.calls) / steps, 1e3 * rest.host_seconds / steps,
                1e3 * rest.device_seconds / steps,
                100.0 * rest.device_seconds / steps / step_seconds);
  std::printf("  %-26s %8s %10.2f %10.2f %6.1f%%   (the step outside ops: %.2f ms host)\n",
              "all ops", "", 1e3 * host / steps, 1e3 * device / steps,
              100.0 * device / steps / step_seconds, 1e3 * (step_seconds - host / steps));
}

Json op_times_json(const std::vector<OpTiming>& ops, double steps) {
  Json::Array rows;
  for (const OpTiming& t : ops) {
    Json row;
    row["op"] = t.op;
    row["calls_per_step"] = number(static_cast<double>(t.calls) / steps);
    row["host_seconds_per_step"] = number(t.host_seconds / steps);
    row["device_seconds_per_step"] = number(t.device_seconds < 0 ? NAN : t.device_seconds / steps);
    rows.push_back(row);
  }
  return Json(rows);
}

}  // namespace

Json bench_step(Backend& be, const StepOptions& o) {
  check(o.steps > 0, "--steps must be positive");
  check(o.warmup >= 1,
        "--warmup must be at least 1: the first GRPO step of a run also measures the initial "
        "validation accuracy");
  // Settings common to the three modes: the model shape (--model), the user's --set, then what
  // the measurement needs: no supervised warm-up, validation only at the start (inside the
  // warm-up step) and at the end (never reached: the run has more steps than are timed).
  std::vector<std::string> sets;
  if (!o.model.empty()) {
    const ModelConfig m = model_shape(o.model);
    sets.push_back("model.hidden_size=" + std::to_string(m.hidden_size));
    sets.push_back("model.num_hidden_layers=" + std::to_string(m.num_hidden_layers));
    sets.push_back("model.num_attention_heads=" + std::to_string(m.num_attention_heads));
    sets.push_back("model.num_key_value_heads=" + std::to_string(m.num_key_value_heads));
    sets.push_back("model.head_dim=" + std::to_string(m.head_dim));
    sets.push_back("model.intermediate_size=" + std::to_string(m.intermediate_size));
  }
  sets.insert(sets.end(), o.sets.begin(), o.sets.end());
  const RunConfig preset = RunConfig::load(o.preset, "", sets);  // validates the user's settings
  const int64_t total = o.warmup + o.steps;
  sets.push_back("sft.steps=0");
  sets.push_back("validation.every=0");
  sets.push_back("grpo.steps=" + std::to_string(std::max(preset.steps, total + 1)));

  struct Mode {
    const char* name;
    std::vector<std::string> sets;
  };
  const Mode modes[] = {
      {"bf16 linears, bf16 KV",
       {"precision.default=bf16", "precision.overrides=[]", "precision.kv_cache=bf16"}},
      {"fp8 linears, bf16 KV", {"precision.default=fp8", "precision.kv_cache=bf16"}},
      {"fp8 linears, fp8 KV", {"precision.default=fp8", "precision.kv_cache=fp8"}}};
  constexpr size_t kModes = 3;
  // On the CPU (a machine shared with other work, whose load drifts) the modes take turns step
  // by step, so that a change of load hits all of them alike; on a GPU one mode after another.
  const bool cpu = be.name() == "cpu";
  const bool interleave = cpu;

  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf(
      "preset %s: per mode %lld warm-up + %lld timed GRPO steps (%lld prompts x %lld "
      "responses; no SFT steps, no validation in timed steps)%s\n",
      o.preset.c_str(), static_cast<long long>(o.warmup), static_cast<long long>(o.steps),
      static_cast<long long>(preset.prompts_per_step), static_cast<long long>(preset.group_size),
      interleave ? "; the modes take turns step by step" : "");
  std::fflush(stdout);
  struct Sums {
    double step = 0, gen = 0, logprob = 0, train = 0, recal = 0, audit = 0, response_tokens = 0,
           train_tokens = 0, response_length = 0, sequences = 0, gemm_flops = 0, gemm_seconds = 0,
           cpu = 0;
    std::vector<double> steps, cpu_steps;
    double tokens_before = 0;
    std::vector<OpTiming> ops;  // --op-times: the timed steps, op by op
  };
  std::vector<Sums> sums(kModes);
  std::string precision_summary[kModes], model_shape_text;
  ModelConfig shape;  // the runs' model (its vocabulary is the task's)
  int64_t longest_prompt = 1, longest_response = 1;
  std::unique_ptr<GrpoRun> runs[kModes];
  auto start = [&](size_t mi) {
    std::vector<std::string> s = sets;
    s.insert(s.end(), modes[mi].sets.begin(), modes[mi].sets.end());
    runs[mi] = std::make_unique<GrpoRun>(RunConfig::load(o.preset, "", s), be);
    precision_summary[mi] = runs[mi]->model().precision().summary();
    if (mi == 0) {  // the vocabulary comes from the task's tokenizer
      shape = runs[mi]->model().config();
      // The batch's longest prompt and response, as a batched PyTorch loop pads to them.
      const Task& task = runs[mi]->task();
      for (const auto& ex : task.validation())
        longest_prompt = std::max<int64_t>(
            longest_prompt, static_cast<int64_t>(task.encode_prompt(ex.prompt).size()));
      longest_response = task.max_response_tokens();
      model_shape_text = describe(shape);
      std::printf("model: %s (%.1fM parameters)\n", model_shape_text.c_str(),
                  static_cast<double>(runs[mi]->model().config().parameter_count()) / 1e6);
      std::fflush(stdout);
    }
  };
  auto step = [&](size_t mi, int64_t i) {
    Sums& sum = sums[mi];
    const CpuGemmTotals g0 = cpu_gemm_totals();
    const double c0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    const StepRecord r = runs[mi]->next();
    be.synchronize();
    const double t = seconds_since(t0);
    const double c = process_cpu_seconds() - c0;
    const CpuGemmTotals g1 = cpu_gemm_totals();
    auto scalar = [&](const char* key) {
      const auto it = r.scalars.find(key);
      return it == r.scalars.end() ? 0.0 : it->second;
    };
    const double tokens_total = scalar(metric::kTokensTotal);
    if (i >= o.warmup) {
      sum.step += t;
      sum.steps.push_back(t);
      sum.cpu += c;
      sum.cpu_steps.push_back(c);
      sum.gen += scalar(metric::kTimeGeneration);
      sum.logprob += scalar(metric::kTimeLogprob);
      sum.train += scalar(metric::kTimeTraining);
      sum.recal += scalar(metric::kTimeRecalibration);
      sum.audit += scalar(metric::kTimeAudit);
      sum.response_tokens += tokens_total - sum.tokens_before;
      sum.train_tokens += scalar(metric::kTrainTps) * scalar(metric::kTimeTraining);
      sum.response_length += scalar(metric::kResponseLength);
      sum.sequences += static_cast<double>(preset.prompts_per_step * preset.group_size);
      sum.gemm_flops += g1.flops - g0.flops;
      sum.gemm_seconds += g1.seconds - g0.seconds;
    }
    sum.tokens_before = tokens_total;
  };
  if (interleave) {
    for (size_t mi = 0; mi < kModes; ++mi) start(mi);
    for (int64_t i = 0; i < total; ++i)
      for (size_t mi = 0; mi < kModes; ++mi) step(mi, i);
  } else {
    for (size_t mi = 0; mi < kModes; ++mi) {
      start(mi);
      for (int64_t i = 0; i < total; ++i) {
        if (o.op_times && i == o.warmup) be.set_op_timing(true);
        step(mi, i);
      }
      if (o.op_times) {
        sums[mi].ops = be.op_timings();
        be.set_op_timing(false);
      }
      runs[mi].reset();
    }
  }
  for (auto& r : runs) r.reset();

  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? NAN : v[v.size() / 2];
  };
  const double n = static_cast<double>(o.steps);
  std::printf("%-22s %8s %8s %8s %8s %8s %8s %8s %8s %8s %7s %11s %11s %6s %8s\n", "mode", "step s",
              "median s", "cpu s", "gen s", "logp s", "train s", "recal s", "audit s", "other s",
              "recal%", "rollout t/s", "train t/s", "resp", "vs bf16");
  Json run = backend_json(be);
  run["preset"] = o.preset;
  run["model_shape"] = model_shape_text;
  run["prompts_per_step"] = preset.prompts_per_step;
  run["group_size"] = preset.group_size;
  run["warmup"] = o.warmup;
  run["steps"] = o.steps;
  run["interleaved"] = interleave;
  Json::Array set_list;
  for (const auto& s : o.sets) set_list.push_back(Json(s));
  run["sets"] = Json(set_list);
  Json::Array rows;
  const double base = sums[0].step / n;
  double speedup[kModes] = {1, 1, 1}, recal_share[kModes] = {0, 0, 0};
  for (size_t mi = 0; mi < kModes; ++mi) {
    const Sums& s = sums[mi];
    const double step_s = s.step / n;
    const double other = (s.step - s.gen - s.logprob - s.train - s.recal - s.audit) / n;
    const double rollout_tps = s.gen > 0 ? s.response_tokens / s.gen : 0.0;
    const double train_tps = s.train > 0 ? s.train_tokens / s.train : 0.0;
    speedup[mi] = base / step_s;
    recal_share[mi] = s.recal / s.step;
    std::printf(
        "%-22s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %6.1f%% %11.0f %11.0f "
        "%6.1f %7.2fx\n",
        modes[mi].name, step_s, median(s.steps), median(s.cpu_steps), s.gen / n, s.logprob / n,
        s.train / n, s.recal / n, s.audit / n, other, 100.0 * recal_share[mi], rollout_tps,
        train_tps, s.response_length / n, speedup[mi]);
    Json row;
    row["mode"] = modes[mi].name;
    row["precision"] = precision_summary[mi];
    row["kv_cache"] = mi == 2 ? "fp8" : "bf16";
    row["step_seconds"] = number(step_s);
    row["step_seconds_median"] = number(median(s.steps));
    row["step_cpu_seconds_median"] = number(median(s.cpu_steps));
    row["generation_seconds"] = number(s.gen / n);
    row["logprob_seconds"] = number(s.logprob / n);
    row["training_seconds"] = number(s.train / n);
    row["recalibration_seconds"] = number(s.recal / n);
    row["audit_seconds"] = number(s.audit / n);
    if (o.op_times) row["op_times"] = op_times_json(s.ops, n);
    row["other_seconds"] = number(other);
    row["recalibration_share"] = number(recal_share[mi]);
    row["rollout_tokens_per_s"] = number(rollout_tps);
    row["training_tokens_per_s"] = number(train_tps);
    row["response_length"] = number(s.response_length / n);
    row["vs_bf16"] = number(speedup[mi]);
    rows.push_back(row);
  }
  std::printf(
      "per step (mean; median s: the median step; cpu s: the median step's CPU time, all "
      "threads):\ngen = time/generation (prefill, decode, KV calibration), logp = time/logprob, "
      "train = time/policy_training, recal = "
      "time/recalibration (FP8 weight\nre-quantization, KV scales); audit = time/audit (the layer "
      "audit, audit.every); other = rewards,\nadvantages, telemetry; resp = mean response "
      "length in tokens; vs bf16 = step time ratio.\n");
  if (o.op_times) {
    if (interleave) {
      std::printf("\nop times: the %s backend has no op timing (use a profiler such as perf)\n",
                  be.name().c_str());
    } else {
      for (size_t mi = 0; mi < kModes; ++mi)
        print_op_times(modes[mi].name, sums[mi].ops, n, sums[mi].step / n);
    }
  }
  const double recal = std::max(recal_share[1], recal_share[2]);
  Json::Array targets = {
      target_json("step fp8 linears + fp8 KV vs bf16", speedup[2], ">=", 1.48),
      target_json("step fp8 linears vs bf16", speedup[1], ">=", 1.15),
      target_json("recalibration share of the step (fp8 modes, worst)", recal, "<=", 0.03)};
  if (cpu) {
    // The CPU emulates FP8 (dequantizes into an FP32 GEMM): what it can promise is that FP8
    // costs little over BF16, measured on the median step of the interleaved modes.
    // CPU time is what the step costs whatever else shares the cores; the wall time of the
    // median step is printed beside it (the same ratio on a quiet machine).
    const double ratio = median(sums[1].cpu_steps) / median(sums[0].cpu_steps),
                 wall = median(sums[1].steps) / median(sums[0].steps);
    targets.push_back(
        target_json("cpu: fp8 linears step / bf16 step (median CPU time)", ratio, "<=", 1.15));
    std::printf(
        "verdict (cpu): fp8 linears step = %.2fx the bf16 step in CPU time (median; target "
        "<= 1.15x) %s, %.2fx in wall time; recalibration %.1f%% of the step (target <= "
        "3%%) %s\n",
        ratio, verdict(ratio <= 1.15), wall, 100.0 * recal, verdict(recal <= 0.03));
    run["fp8_over_bf16_step_cpu_time"] = number(ratio);
    run["fp8_over_bf16_step_wall_time"] = number(wall);
  } else {
    std::printf(
        "verdict: fp8 + fp8 KV %.2fx bf16 (target >= 1.48x) %s; fp8 linears %.2fx (target >= "
        "1.15x) %s; recalibration %.1f%% of the step (target <= 3%%) %s\n",
        speedup[2], verdict(speedup[2] >= 1.48), speedup[1], verdict(speedup[1] >= 1.15),
        100.0 * recal, verdict(recal <= 0.03));
  }
  run["rows"] = Json(rows);
  run["targets"] = Json(targets);
  if (!cpu) {
    std::printf("\n");
    return run;
  }

  // How close the step's GEMMs come to what the cores can do: their FLOP/s (2·M·N·K per call,
  // over the wall time inside the GEMM) against the FP32 peak measured now, on the same threads.
  const CpuPeak peak = measure_cpu_peak();
  std::printf(
      "\nFP32 peak measured now (%d threads): %s %.1f GFLOP/s (%.1f per core); %s %.1f GFLOP/s "
      "(%.1f per core)\n",
      peak.threads, peak.fma_name.c_str(), peak.fma_all, peak.fma_core, peak.muladd_name.c_str(),
      peak.muladd_all, peak.muladd_core);
  std::printf("%-22s %10s %10s %10s %12s %14s\n", "mode", "gemm GF/s", "gemm share", "of FMA pk",
              "of mul+add pk", "GFLOP per step");
  Json::Array gemm_rows;
  for (size_t mi = 0; mi < kModes; ++mi) {
    const Sums& s = sums[mi];
    const double gflops = s.gemm_seconds > 0 ? s.gemm_flops / s.gemm_seconds / 1e9 : 0.0;
    std::printf("%-22s %10.1f %9.1f%% %9.1f%% %11.1f%% %14.2f\n", modes[mi].name, gflops,
                100.0 * s.gemm_seconds / s.step, 100.0 * gflops / peak.fma_all,
                100.0 * gflops / peak.muladd_all, s.gemm_flops / n / 1e9);
    Json g;
    g["mode"] = modes[mi].name;
    g["gemm_gflops"] = number(gflops);
    g["gemm_share_of_step"] = number(s.gemm_seconds / s.step);
    g["fraction_of_fma_peak"] = number(gflops / peak.fma_all);
    g["fraction_of_muladd_peak"] = number(gflops / peak.muladd_all);
    g["gemm_gflop_per_step"] = number(s.gemm_flops / n / 1e9);
    gemm_rows.push_back(g);
  }
  std::printf(
      "gemm GF/s = the step's GEMM FLOPs / the wall time inside the GEMM (all threads); the CPU "
      "GEMM never fuses\nmultiply and add (every instruction-set path must round alike), so the "
      "mul+add peak is its ceiling.\n");
  Json pk;
  pk["threads"] = peak.threads;
  pk["fma"] = peak.fma_name;
  pk["fma_gflops"] = number(peak.fma_all);
  pk["fma_gflops_per_core"] = number(peak.fma_core);
  pk["muladd"] = peak.muladd_name;
  pk["muladd_gflops"] = number(peak.muladd_all);
  pk["muladd_gflops_per_core"] = number(peak.muladd_core);
  run["cpu_peak"] = pk;
  run["gemm"] = Json(gemm_rows);

  // PyTorch on the same shapes: the same model, B = prompts × group sequences padded to the
  // task's longest prompt and response, a rollout with a KV cache and a GRPO training step.
  if (!o.pytorch) {
    std::printf("\npytorch: not measured (--no-pytorch)\n\n");
    return run;
  }
  const std::string py = find_torch_python(), script = find_tool("torch_grpo_step.py");
  if (py.empty() || script.empty()) {
    std::printf("\npytorch: not measured (%s)\n\n",
                py.empty() ? "no python3 with torch: apt install python3-torch, or FP8RL_PYTHON"
                           : "share/fp8rl/tools/torch_grpo_step.py not found (FP8RL_TOOLS)");
    return run;
  }
  const ModelConfig& mc = shape;
  const int64_t prompt_len = longest_prompt, new_tokens = longest_response;
  char cmd[1024];
  std::snprintf(
      cmd, sizeof cmd,
      "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} '%s' '%s' --hidden %lld --layers %lld "
      "--heads %lld --kv-heads %lld --head-dim %lld --intermediate %lld --vocab %lld "
      "--prompts %lld --group %lld --prompt-len %lld --new-tokens %lld --threads %d "
      "--steps %lld --warmup %lld",
      py.c_str(), script.c_str(), static_cast<long long>(mc.hidden_size),
      static_cast<long long>(mc.num_hidden_layers), static_cast<long long>(mc.num_attention_heads),
      static_cast<long long>(mc.num_key_value_heads), static_cast<long long>(mc.head_dim),
      static_cast<long long>(mc.intermediate_size), static_cast<long long>(mc.vocab_size),
      static_cast<long long>(preset.prompts_per_step), static_cast<long long>(preset.group_size),
      static_cast<long long>(prompt_len), static_cast<long long>(new_tokens), peak.threads,
      static_cast<long long>(o.steps), static_cast<long long>(o.warmup));
  std::fflush(stdout);
  try {
    const Json t = run_tool_json(cmd);
    const double tg = t.at("rollout_seconds").as_number(),
                 tt = t.at("training_seconds").as_number(),
                 tc = t.at("step_cpu_seconds").as_number();
    std::printf(
        "\npytorch %s (%s, FP32, eager, %lld threads), the same model, %lld sequences of %lld + "
        "%lld tokens:\n",
        t.at("torch").as_string().c_str(), py.c_str(),
        static_cast<long long>(t.at("threads").as_int()),
        static_cast<long long>(preset.prompts_per_step * preset.group_size),
        static_cast<long long>(prompt_len), static_cast<long long>(new_tokens));
    std::printf("%-22s %10s %10s %10s %10s %9s %9s\n", "", "rollout s", "train s", "step s",
                "cpu s", "vs wall", "vs cpu");
    std::printf("%-22s %10.3f %10.3f %10.3f %10.3f\n", "pytorch fp32", tg, tt, tg + tt, tc);
    for (size_t mi = 0; mi < 2; ++mi) {
      const Sums& s = sums[mi];
      const double mine = (s.gen + s.train) / n, cpu_s = median(s.cpu_steps);
      std::printf("%-22s %10.3f %10.3f %10.3f %10.3f %8.2fx %8.2fx\n", modes[mi].name, s.gen / n,
                  s.train / n, mine, cpu_s, (tg + tt) / mine, tc / cpu_s);
    }
    std::printf(
        "pytorch: median of the timed steps; rollout = prefill + sampling with a KV cache, train "
        "= forward,\nGRPO loss, backward, gradient clipping, AdamW (torch_grpo_step.py); vs = "
        "PyTorch's time / fp8rl's\n(rollout + train; cpu: CPU time of the whole step, all "
        "threads). Both pad: fp8rl each training micro-batch to\nits longest sequence, PyTorch "
        "every prompt to the longest prompt and every response to the task's\nlongest (a "
        "batched loop runs until its last sequence ends).\n\n");
    Json pt = t;
    pt["python"] = py;
    for (size_t mi = 0; mi < 2; ++mi) {
      const Sums& s = sums[mi];
      const std::string p = mi == 0 ? "bf16" : "fp8";
      pt["train_speedup_" + p] = number(tt / (s.train / n));
      pt["rollout_speedup_" + p] = number(tg / (s.gen / n));
      pt["step_speedup_" + p] = number((tg + tt) / ((s.gen + s.train) / n));
      pt["step_cpu_time_speedup_" + p] = number(tc / median(s.cpu_steps));
    }
    run["pytorch"] = pt;
  } catch (const Error& e) {
    std::printf("\npytorch: %s\n\n", error_text(e).c_str());
  }
  return run;
}

}  // namespace fp8rl::cli::bench
