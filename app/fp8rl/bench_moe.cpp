// bench moe: whole GRPO steps of a mixture-of-experts preset against a dense model with the
// same active parameters (a dense MLP as wide as the k experts a token uses), and the cost of
// rollout routing replay; with the mismatch each leaves between generator and trainer.
#include <algorithm>
#include <cstdio>

#include "bench.hpp"
#include "contract/metrics.hpp"
#include "core/error.hpp"
#include "rl/run_loop.hpp"

namespace fp8rl::cli::bench {

Json bench_moe(Backend& be, const StepOptions& o) {
  check(o.steps > 0, "--steps must be positive");
  check(o.warmup >= 1, "--warmup must be at least 1 (the first step also validates)");
  const RunConfig base = RunConfig::load(o.preset, "", o.sets);
  check(base.model.moe.enabled(),
        "bench moe: preset " + o.preset +
            " has no experts (model.model_type qwen3_moe or deepseek_v3)");
  const int64_t total = o.warmup + o.steps;
  std::vector<std::string> common = o.sets;
  common.insert(common.end(), {"sft.steps=0", "validation.every=0",
                               "grpo.steps=" + std::to_string(std::max(base.steps, total + 1))});
  const auto& moe = base.model.moe;
  struct Mode {
    std::string name;
    std::vector<std::string> sets;
  };
  // The dense model's MLP is as wide as what a token passes through: its k routed experts and
  // the shared ones. With latent attention it stays in its family, every layer dense, so the
  // attention is the same; otherwise it is a Qwen3 decoder.
  const std::string active_width =
      "model.intermediate_size=" +
      std::to_string((moe.experts_per_token + moe.shared_experts) * moe.intermediate_size);
  const std::vector<std::string> dense =
      base.model.mla.enabled()
          ? std::vector<std::string>{"model.first_k_dense_replace=" +
                                         std::to_string(base.model.num_hidden_layers),
                                     active_width}
          : std::vector<std::string>{"model.model_type=qwen3", active_width};
  const std::vector<Mode> modes = {
      {"dense, same active params", dense},
      {"moe, replay off", {"moe.routing_replay=off"}},
      {"moe, replay rollout", {"moe.routing_replay=rollout"}},
  };
  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf(
      "preset %s: %lld experts of %lld, top %lld, %lld shared; per mode %lld warm-up + %lld timed "
      "GRPO steps\n",
      o.preset.c_str(), static_cast<long long>(moe.num_experts),
      static_cast<long long>(moe.intermediate_size), static_cast<long long>(moe.experts_per_token),
      static_cast<long long>(moe.shared_experts), static_cast<long long>(o.warmup),
      static_cast<long long>(o.steps));
  std::printf("%-26s %9s %9s %9s %8s %8s %10s %10s %10s %9s\n", "mode", "params M", "active M",
              "step s", "train s", "gen s", "vs dense", "mismatch", "rerouted", "gen KL");
  std::fflush(stdout);
  Json run = backend_json(be);
  run["preset"] = o.preset;
  run["warmup"] = o.warmup;
  run["steps"] = o.steps;
  Json::Array rows;
  double dense_step = 0, replay_off_step = 0;
  for (const Mode& m : modes) {
    std::vector<std::string> s = common;
    s.insert(s.end(), m.sets.begin(), m.sets.end());
    GrpoRun grpo(RunConfig::load(o.preset, "", s), be);
    double step = 0, train = 0, gen = 0, mismatch = 0, rerouted = 0, kl = 0;
    std::vector<double> mult;
    for (int64_t i = 0; i < total; ++i) {
      const auto t0 = Clock::now();
      const StepRecord r = grpo.next();
      be.synchronize();
      if (i < o.warmup) continue;
      auto scalar = [&](const char* key) {
        const auto it = r.scalars.find(key);
        return it == r.scalars.end() ? 0.0 : it->second;
      };
      step += seconds_since(t0);
      train += scalar(metric::kTimeTraining);
      gen += scalar(metric::kTimeGeneration);
      mismatch += scalar(metric::kMoeRoutingMismatch);
      rerouted += scalar(metric::kMoeTokensRerouted);
      kl += scalar(metric::kGenKlError);
      mult.push_back(scalar(metric::kTokenMultProbError));
    }
    const double n = static_cast<double>(o.steps);
    std::sort(mult.begin(), mult.end());
    const double median_mult = mult[mult.size() / 2];
    const ModelConfig& mc = grpo.model().config();
    if (rows.empty()) dense_step = step / n;
    if (rows.size() == 1) replay_off_step = step / n;
    std::printf("%-26s %9.3f %9.3f %9.3f %8.3f %8.3f %9.2fx %10.4f %10.4f %10.6f\n", m.name.c_str(),
                static_cast<double>(mc.parameter_count()) / 1e6,
                static_cast<double>(mc.active_parameter_count()) / 1e6, step / n, train / n,
                gen / n, step / n / dense_step, mismatch / n, rerouted / n, kl / n);
    std::fflush(stdout);
    Json row;
    row["mode"] = m.name;
    row["parameters"] = mc.parameter_count();
    row["active_parameters"] = mc.active_parameter_count();
    row["step_seconds"] = number(step / n);
    row["training_seconds"] = number(train / n);
    row["generation_seconds"] = number(gen / n);
    row["vs_dense"] = number(step / n / dense_step);
    row["routing_mismatch"] = number(mismatch / n);
    row["tokens_rerouted"] = number(rerouted / n);
    row["gen_kl_error"] = number(kl / n);
    row["median_token_mult_prob_error"] = number(median_mult);
    rows.push_back(row);
  }
  const double replay_cost =
      rows.size() == 3 ? (rows[2].at("step_seconds").as_number() / replay_off_step - 1.0) : 0.0;
  std::printf(
      "vs dense = step time against the dense model with the same active parameters; mismatch = "
      "share of tokens\nwhose experts differ between generator and trainer (mean over layers), "
      "rerouted = in at least one layer;\nrouting replay costs %+.1f%% of the step.\n",
      100.0 * replay_cost);
  run["rows"] = Json(rows);
  run["routing_replay_cost"] = number(replay_cost);
  return run;
}

}  // namespace fp8rl::cli::bench
