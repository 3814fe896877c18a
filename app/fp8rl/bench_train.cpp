// fp8rl bench train: tokens/s of a full training step (forward + backward, optimizer, FP8
// weight re-quantization) of a random-init Qwen3-shaped model, BF16 vs FP8 linears.
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

}  // namespace fp8rl::cli::bench
