// fp8rl bench step: whole GRPO steps (GrpoRun::next) of a preset in BF16, FP8 linears and FP8
// linears + FP8 KV cache — the modes measured in one run — split by phase (generation,
// log-probs, training, recalibration, audit, other: each in seconds, as a share of the step and
// as the ratio to the BF16 mode), with the speed-up targets; on the CPU also the GEMMs' share of
// the FP32 peak and a PyTorch baseline of the same step. One function per part: the modes,
// measuring them, the step table, the phase table, the targets, the CPU's GEMMs, PyTorch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "backend/cpu/sgemm.hpp"
#include "bench.hpp"
#include "contract/metrics.hpp"
#include "core/error.hpp"
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

struct StepMode {
  const char* name;
  const char* key;  // its name in --modes
  std::vector<std::string> sets;
  const char* kv_cache;
};
// The modes compared in one run; the first is the baseline of every ratio.
const StepMode kStepModes[] = {
    {"bf16 linears, bf16 KV",
     "bf16",
     {"precision.default=bf16", "precision.overrides=[]", "precision.kv_cache=bf16"},
     "bf16"},
    {"fp8 linears, bf16 KV", "fp8", {"precision.default=fp8", "precision.kv_cache=bf16"}, "bf16"},
    {"fp8 linears, fp8 KV", "fp8kv", {"precision.default=fp8", "precision.kv_cache=fp8"}, "fp8"}};
constexpr size_t kModes = std::size(kStepModes);
constexpr size_t kFp8 = 1, kFp8Kv = 2;

// The modes --modes names (all of them when empty), in kStepModes' order; the BF16 baseline
// must be one of them, and on the CPU the FP8 one too (the CPU's verdict compares the two).
std::vector<size_t> selected_modes(const StepOptions& o, bool cpu) {
  std::vector<size_t> sel;
  std::string known;
  for (const StepMode& sm : kStepModes) known += (known.empty() ? "" : ", ") + std::string(sm.key);
  for (const std::string& k : o.modes) {
    size_t mi = 0;
    while (mi < kModes && k != kStepModes[mi].key) ++mi;
    check(mi < kModes, "--modes: unknown mode '" + k + "' (one of " + known + ")");
    if (std::find(sel.begin(), sel.end(), mi) == sel.end()) sel.push_back(mi);
  }
  if (sel.empty())
    for (size_t mi = 0; mi < kModes; ++mi) sel.push_back(mi);
  std::sort(sel.begin(), sel.end());
  check(sel.front() == 0, "--modes must include bf16: every ratio is to the BF16 mode");
  check(!cpu || (sel.size() > 1 && sel[1] == kFp8),
        "--modes on the CPU must include bf16 and fp8 (the CPU's verdict compares them)");
  return sel;
}

// The phases of a GRPO step as its record times them; `other` is the rest of the wall time
// (rewards, advantages, telemetry).
struct Phases {
  double generation = 0, logprob = 0, training = 0, recalibration = 0, audit = 0, other = 0;

  static constexpr const char* kNames[] = {"generation",    "logprob", "training",
                                           "recalibration", "audit",   "other"};
  double at(size_t i) const {
    const double v[] = {generation, logprob, training, recalibration, audit, other};
    return v[i];
  }
  // wall: the step's time without its validation passes (time/validation).
  void add(const StepRecord& r, double wall) {
    auto scalar = [&](const char* key) {
      const auto it = r.scalars.find(key);
      return it == r.scalars.end() ? 0.0 : it->second;
    };
    const double g = scalar(metric::kTimeGeneration), l = scalar(metric::kTimeLogprob),
                 t = scalar(metric::kTimeTraining), c = scalar(metric::kTimeRecalibration),
                 a = scalar(metric::kTimeAudit);
    generation += g, logprob += l, training += t, recalibration += c, audit += a;
    other += wall - g - l - t - c - a;
  }
};

// Phase k of Phases::kNames, or the whole step for k = kWholeStep; its name.
constexpr size_t kWholeStep = std::size(Phases::kNames);
const char* phase_name(size_t k) {
  return k == kWholeStep ? "step" : Phases::kNames[k];
}

// One mode's timed steps.
struct ModeTimes {
  double step = 0, cpu = 0, response_tokens = 0, train_tokens = 0, response_length = 0,
         gemm_flops = 0, gemm_seconds = 0;
  // The generator against the trainer (their kernels may differ): sums over the timed steps.
  double mult_prob_error = 0, gen_kl_error = 0;
  Phases phases;
  std::vector<double> steps, cpu_steps;
  double tokens_before = 0;
  std::vector<OpTiming> ops;  // --op-times: the timed steps, op by op
  std::string precision;      // the run's precision summary
  StackedLayers stacked;      // layers whose q/k/v and gate/up generation runs as one GEMM each
  // Phase k's seconds over the timed steps (the whole step's for kWholeStep).
  double seconds(size_t k) const { return k == kWholeStep ? step : phases.at(k); }
};

// What measuring the modes found: each mode's times, and the runs' model and batch shape.
struct StepMeasurement {
  std::vector<ModeTimes> modes = std::vector<ModeTimes>(kModes);
  std::vector<size_t> run;  // the modes measured (indices in kStepModes, the BF16 one first)
  ModelConfig shape;        // the runs' model (its vocabulary is the task's)
  std::string shape_text;
  int64_t longest_prompt = 1, longest_response = 1;
  bool interleaved = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? NAN : v[v.size() / 2];
}

// Runs the modes: `warmup` untimed then `steps` timed GRPO steps each. On the CPU (a machine
// shared with other work, whose load drifts) the modes take turns step by step, so that a
// change of load hits all of them alike; on a device one mode after another (--op-times needs
// that).
StepMeasurement measure_step_modes(Backend& be, const StepOptions& o,
                                   const std::vector<std::string>& sets) {
  StepMeasurement m;
  m.interleaved = be.name() == "cpu";
  m.run = selected_modes(o, m.interleaved);
  const int64_t total = o.warmup + o.steps;
  std::unique_ptr<GrpoRun> runs[kModes];
  auto start = [&](size_t mi) {
    std::vector<std::string> s = sets;
    s.insert(s.end(), kStepModes[mi].sets.begin(), kStepModes[mi].sets.end());
    runs[mi] = std::make_unique<GrpoRun>(RunConfig::load(o.preset, "", s), be);
    m.modes[mi].precision = runs[mi]->model().precision().summary();
    m.modes[mi].stacked = runs[mi]->model().stacked_layers();
    if (mi == 0) {  // the vocabulary comes from the task's tokenizer
      m.shape = runs[mi]->model().config();
      // The batch's longest prompt and response, as a batched PyTorch loop pads to them.
      const Task& task = runs[mi]->task();
      for (const auto& ex : task.validation())
        m.longest_prompt = std::max<int64_t>(
            m.longest_prompt, static_cast<int64_t>(task.encode_prompt(ex.prompt).size()));
      m.longest_response = task.max_response_tokens();
      m.shape_text = describe(m.shape);
      std::printf("model: %s (%.1fM parameters)\n", m.shape_text.c_str(),
                  static_cast<double>(m.shape.parameter_count()) / 1e6);
      std::fflush(stdout);
    }
    std::printf(
        "%s: generation runs q, k and v as one GEMM in %lld, gate and up in %lld of %lld layers\n",
        kStepModes[mi].name, static_cast<long long>(m.modes[mi].stacked.qkv),
        static_cast<long long>(m.modes[mi].stacked.gate_up),
        static_cast<long long>(runs[mi]->model().config().num_hidden_layers));
  };
  auto step = [&](size_t mi, int64_t i) {
    ModeTimes& sum = m.modes[mi];
    const CpuGemmTotals g0 = cpu_gemm_totals();
    const double c0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    const StepRecord r = runs[mi]->next();
    be.synchronize();
    auto scalar = [&](const char* key) {
      const auto it = r.scalars.find(key);
      return it == r.scalars.end() ? 0.0 : it->second;
    };
    // The validation passes (the initial accuracy in a run's first step) are not the step's.
    const double validation = scalar(metric::kTimeValidation);
    const double t = seconds_since(t0) - validation;
    const double c = process_cpu_seconds() - c0;
    const CpuGemmTotals g1 = cpu_gemm_totals();
    const double tokens_total = scalar(metric::kTokensTotal);
    if (i >= o.warmup) {
      sum.step += t;
      sum.steps.push_back(t);
      sum.cpu += c;
      sum.cpu_steps.push_back(c);
      sum.phases.add(r, t);
      sum.response_tokens += tokens_total - sum.tokens_before;
      sum.train_tokens += scalar(metric::kTrainTps) * scalar(metric::kTimeTraining);
      sum.response_length += scalar(metric::kResponseLength);
      sum.mult_prob_error += scalar(metric::kTokenMultProbError);
      sum.gen_kl_error += scalar(metric::kGenKlError);
      sum.gemm_flops += g1.flops - g0.flops;
      sum.gemm_seconds += g1.seconds - g0.seconds;
    }
    sum.tokens_before = tokens_total;
    // Progress, flushed: a run cut short (a time limit) still shows what each step took.
    Phases one;
    one.add(r, t);
    std::printf("step: %s %lld of %lld (%s) %.3f s:", kStepModes[mi].name,
                static_cast<long long>(i + 1), static_cast<long long>(total),
                i < o.warmup ? "warm-up" : "timed", t);
    for (size_t k = 0; k < std::size(Phases::kNames); ++k)
      std::printf("%s %s %.3f s", k ? "," : "", Phases::kNames[k], one.at(k));
    if (validation > 0) std::printf("; validation %.3f s (not counted)", validation);
    std::printf("\n");
    std::fflush(stdout);
  };
  if (m.interleaved) {
    for (size_t mi : m.run) start(mi);
    for (int64_t i = 0; i < total; ++i)
      for (size_t mi : m.run) step(mi, i);
  } else {
    for (size_t mi : m.run) {
      start(mi);
      for (int64_t i = 0; i < total; ++i) {
        if (o.op_times && i == o.warmup) be.set_op_timing(true);
        step(mi, i);
      }
      if (o.op_times) {
        m.modes[mi].ops = be.op_timings();
        be.set_op_timing(false);
      }
      runs[mi].reset();
    }
  }
  return m;
}

// The table of whole steps per mode (time, throughput, ratio to the first mode) and its rows.
Json step_table(const StepMeasurement& m, const StepOptions& o) {
  const double n = static_cast<double>(o.steps);
  std::printf("%-22s %8s %8s %8s %8s %8s %8s %8s %8s %8s %7s %11s %11s %6s %8s\n", "mode", "step s",
              "median s", "cpu s", "gen s", "logp s", "train s", "recal s", "audit s", "other s",
              "recal%", "rollout t/s", "train t/s", "resp", "vs bf16");
  Json::Array rows;
  const double base = m.modes[0].step / n;
  for (size_t mi : m.run) {
    const ModeTimes& s = m.modes[mi];
    const Phases& p = s.phases;
    const double step_s = s.step / n;
    const double rollout_tps = p.generation > 0 ? s.response_tokens / p.generation : 0.0;
    const double train_tps = p.training > 0 ? s.train_tokens / p.training : 0.0;
    const double speedup = base / step_s, recal_share = p.recalibration / s.step;
    std::printf(
        "%-22s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %6.1f%% %11.0f %11.0f "
        "%6.1f %7.2fx\n",
        kStepModes[mi].name, step_s, median(s.steps), median(s.cpu_steps), p.generation / n,
        p.logprob / n, p.training / n, p.recalibration / n, p.audit / n, p.other / n,
        100.0 * recal_share, rollout_tps, train_tps, s.response_length / n, speedup);
    Json row;
    row["mode"] = kStepModes[mi].name;
    row["precision"] = s.precision;
    row["stacked_qkv_layers"] = s.stacked.qkv;
    row["stacked_gate_up_layers"] = s.stacked.gate_up;
    row["kv_cache"] = kStepModes[mi].kv_cache;
    row["step_seconds"] = number(step_s);
    row["step_seconds_median"] = number(median(s.steps));
    row["step_cpu_seconds_median"] = number(median(s.cpu_steps));
    for (size_t k = 0; k < std::size(Phases::kNames); ++k)
      row[std::string(Phases::kNames[k]) + "_seconds"] = number(p.at(k) / n);
    if (o.op_times) row["op_times"] = op_times_json(s.ops, n);
    row["recalibration_share"] = number(recal_share);
    row["rollout_tokens_per_s"] = number(rollout_tps);
    row["training_tokens_per_s"] = number(train_tps);
    row["response_length"] = number(s.response_length / n);
    row["vs_bf16"] = number(speedup);
    row["token_mult_prob_error"] = number(s.mult_prob_error / n);
    row["gen_kl_error"] = number(s.gen_kl_error / n);
    rows.push_back(row);
  }
  std::printf("generator vs trainer (mean per step):");
  for (size_t mi : m.run)
    std::printf("%s %s: token_mult_prob_error %.5f, gen_kl_error %.2e", mi ? ";" : "",
                kStepModes[mi].name, m.modes[mi].mult_prob_error / n, m.modes[mi].gen_kl_error / n);
  std::printf("\n");
  std::printf(
      "per step (mean; median s: the median step; cpu s: the median step's CPU time, all "
      "threads):\ngen = time/generation (prefill, decode, KV calibration), logp = time/logprob, "
      "train = time/policy_training, recal = "
      "time/recalibration (FP8 weight\nre-quantization, KV scales); audit = time/audit (the layer "
      "audit, audit.every); other = rewards,\nadvantages, telemetry; resp = mean response "
      "length in tokens; vs bf16 = step time ratio. Validation passes (time/validation) are not "
      "counted.\n");
  return Json(rows);
}

// Each phase per mode: seconds per step, share of the step, and the first mode's time over
// this mode's (> 1: faster than BF16) — where a precision wins or loses its time.
Json phase_table(const StepMeasurement& m, const StepOptions& o) {
  const double n = static_cast<double>(o.steps);
  std::printf("\n%-14s", "phase");
  for (size_t mi : m.run) std::printf(" | %-31s", kStepModes[mi].name);
  std::printf("\n%-14s", "");
  for (size_t mi = 0; mi < m.run.size(); ++mi)
    std::printf(" | %9s %8s %11s", "s/step", "share", "bf16/this");
  std::printf("\n");
  Json phases(Json::Object{});
  for (size_t k = 0; k <= kWholeStep; ++k) {
    const std::string name = phase_name(k);
    std::printf("%-14s", name.c_str());
    Json per_mode(Json::Object{});
    for (size_t mi : m.run) {
      const ModeTimes& s = m.modes[mi];
      const double t = s.seconds(k), base = m.modes[0].seconds(k);
      const double ratio = t > 0 && base > 0 ? base / t : NAN;
      if (std::isfinite(ratio))
        std::printf(" | %9.4f %7.1f%% %10.2fx", t / n, 100.0 * t / s.step, ratio);
      else  // a phase this run does not have (no time in either mode)
        std::printf(" | %9.4f %7.1f%% %11s", t / n, 100.0 * t / s.step, "-");
      Json e;
      e["seconds"] = number(t / n);
      e["share"] = number(t / s.step);
      e["bf16_over_this"] = number(ratio);
      per_mode[kStepModes[mi].name] = e;
    }
    std::printf("\n");
    phases[name] = per_mode;
  }
  std::printf(
      "share: of the mode's step; bf16/this: the BF16 mode's time for the phase over this mode's "
      "(> 1: faster).\n");
  return phases;
}

// The speed-up targets and their verdict (on the CPU, which emulates FP8, the promise is that
// FP8 costs little over BF16, in the median step's CPU time).
// The recipe workloads' phase targets (ratios to the BF16 mode in the same run): generation and
// training are where FP8 must win at the lengths RL generates (docs/benchmarks.md).
struct PhaseTarget {
  const char* preset;
  size_t mode;   // index in kStepModes
  size_t phase;  // index in Phases::kNames, or std::size(Phases::kNames) for the whole step
  double at_least;
};
const PhaseTarget kPhaseTargets[] = {
    {"recipe-8b", kFp8Kv, 0, 1.4},            // generation, FP8 + FP8 KV
    {"recipe-8b", kFp8, 2, 1.35},             // training, FP8 linears
    {"recipe-8b", kFp8Kv, kWholeStep, 1.3},   // the whole step
    {"recipe-8b-long", kFp8Kv, 0, 1.6},       // generation at 64 x 4,096
    {"recipe-0.6b", kFp8, 2, 1.1},            // training at the 0.6B shape
    {"recipe-moe", kFp8Kv, kWholeStep, 1.3},  // the MoE step (Qwen3-30B-A3B-shaped layers)
};

Json step_targets(const StepMeasurement& m, const StepOptions& o, Json& run) {
  const bool cpu = m.interleaved;
  auto measured = [&](size_t mi) {
    return std::find(m.run.begin(), m.run.end(), mi) != m.run.end();
  };
  double speedup[kModes], recal = 0;
  for (size_t mi = 0; mi < kModes; ++mi) {
    speedup[mi] = measured(mi) ? m.modes[0].step / m.modes[mi].step : NAN;
    if (mi > 0 && measured(mi))
      recal = std::max(recal, m.modes[mi].phases.recalibration / m.modes[mi].step);
  }
  // The targets of modes this run did not measure (--modes) are left out.
  Json::Array targets;
  if (measured(kFp8Kv))
    targets.push_back(
        target_json("step fp8 linears + fp8 KV vs bf16", speedup[kFp8Kv], ">=", 1.48));
  if (measured(kFp8))
    targets.push_back(target_json("step fp8 linears vs bf16", speedup[kFp8], ">=", 1.15));
  if (m.run.size() > 1)
    targets.push_back(
        target_json("recalibration share of the step (fp8 modes, worst)", recal, "<=", 0.03));
  for (const PhaseTarget& t : kPhaseTargets) {
    if (o.preset != t.preset) continue;
    // The training phase does not read the KV cache: FP8 + FP8 KV stands in for FP8 linears.
    size_t mode = t.mode;
    if (!measured(mode) && mode == kFp8 && t.phase == 2) mode = kFp8Kv;
    if (!measured(mode)) continue;
    const double base = m.modes[0].seconds(t.phase), mine = m.modes[mode].seconds(t.phase);
    const double ratio = mine > 0 ? base / mine : NAN;
    const std::string name = std::string(phase_name(t.phase)) + " " + kStepModes[mode].name +
                             " vs bf16 (" + t.preset + ")";
    targets.push_back(target_json(name, ratio, ">=", t.at_least));
    std::printf("target: %s %.2fx (>= %.2fx) %s\n", name.c_str(), ratio, t.at_least,
                verdict(ratio >= t.at_least));
  }
  if (cpu) {
    // CPU time is what the step costs whatever else shares the cores; the wall time of the
    // median step is printed beside it (the same ratio on a quiet machine).
    const double ratio = median(m.modes[1].cpu_steps) / median(m.modes[0].cpu_steps),
                 wall = median(m.modes[1].steps) / median(m.modes[0].steps);
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
    std::printf("verdict:");
    if (measured(kFp8Kv))
      std::printf(" fp8 + fp8 KV %.2fx bf16 (target >= 1.48x) %s;", speedup[kFp8Kv],
                  verdict(speedup[kFp8Kv] >= 1.48));
    if (measured(kFp8))
      std::printf(" fp8 linears %.2fx (target >= 1.15x) %s;", speedup[kFp8],
                  verdict(speedup[kFp8] >= 1.15));
    if (m.run.size() > 1)
      std::printf(" recalibration %.1f%% of the step (target <= 3%%) %s", 100.0 * recal,
                  verdict(recal <= 0.03));
    std::printf("\n");
  }
  return Json(targets);
}

// How close the step's GEMMs come to what the cores can do (the CPU backend): returns the peak
// measured now, on the same threads.
CpuPeak cpu_gemm_efficiency(const StepMeasurement& m, const StepOptions& o, Json& run) {
  const double n = static_cast<double>(o.steps);
  const CpuPeak peak = measure_cpu_peak();
  std::printf(
      "\nFP32 peak measured now (%d threads): %s %.1f GFLOP/s (%.1f per core); %s %.1f GFLOP/s "
      "(%.1f per core)\n",
      peak.threads, peak.fma_name.c_str(), peak.fma_all, peak.fma_core, peak.muladd_name.c_str(),
      peak.muladd_all, peak.muladd_core);
  std::printf("%-22s %10s %10s %10s %12s %14s\n", "mode", "gemm GF/s", "gemm share", "of FMA pk",
              "of mul+add pk", "GFLOP per step");
  Json::Array gemm_rows;
  for (size_t mi : m.run) {
    const ModeTimes& s = m.modes[mi];
    const double gflops = s.gemm_seconds > 0 ? s.gemm_flops / s.gemm_seconds / 1e9 : 0.0;
    std::printf("%-22s %10.1f %9.1f%% %9.1f%% %11.1f%% %14.2f\n", kStepModes[mi].name, gflops,
                100.0 * s.gemm_seconds / s.step, 100.0 * gflops / peak.fma_all,
                100.0 * gflops / peak.muladd_all, s.gemm_flops / n / 1e9);
    Json g;
    g["mode"] = kStepModes[mi].name;
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

  return peak;
}

// PyTorch on the same shapes: the same model, B = prompts × group sequences padded to the
// task's longest prompt and response, a rollout with a KV cache and a GRPO training step.
void pytorch_baseline(const StepMeasurement& m, const StepOptions& o, const RunConfig& preset,
                      const CpuPeak& peak, Json& run) {
  const double n = static_cast<double>(o.steps);
  if (!o.pytorch) {
    std::printf("\npytorch: not measured (--no-pytorch)\n\n");
    return;
  }
  const std::string py = find_torch_python(), script = find_tool("torch_grpo_step.py");
  if (py.empty() || script.empty()) {
    std::printf("\npytorch: not measured (%s)\n\n",
                py.empty() ? "no python3 with torch: apt install python3-torch, or FP8RL_PYTHON"
                           : "share/fp8rl/tools/torch_grpo_step.py not found (FP8RL_TOOLS)");
    return;
  }
  const ModelConfig& mc = m.shape;
  const int64_t prompt_len = m.longest_prompt, new_tokens = m.longest_response;
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
      const ModeTimes& s = m.modes[mi];
      const double mine = (s.phases.generation + s.phases.training) / n,
                   cpu_s = median(s.cpu_steps);
      std::printf("%-22s %10.3f %10.3f %10.3f %10.3f %8.2fx %8.2fx\n", kStepModes[mi].name,
                  s.phases.generation / n, s.phases.training / n, mine, cpu_s, (tg + tt) / mine,
                  tc / cpu_s);
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
      const ModeTimes& s = m.modes[mi];
      const std::string p = mi == 0 ? "bf16" : "fp8";
      pt["train_speedup_" + p] = number(tt / (s.phases.training / n));
      pt["rollout_speedup_" + p] = number(tg / (s.phases.generation / n));
      pt["step_speedup_" + p] = number((tg + tt) / ((s.phases.generation + s.phases.training) / n));
      pt["step_cpu_time_speedup_" + p] = number(tc / median(s.cpu_steps));
    }
    run["pytorch"] = pt;
  } catch (const Error& e) {
    std::printf("\npytorch: %s\n\n", error_text(e).c_str());
  }
}

}  // namespace

// --project-layers: each phase per mode at the measured layers (m) and at fewer (half, m_half),
// fitted as a fixed part plus a part per layer and projected to o.project_layers layers, with
// the BF16 mode's projected time over each mode's. What a model cut to one GPU's memory hides:
// its BF16 lm_head and embedding (a fixed part) weigh more than in the whole model.
Json projection_table(const StepMeasurement& m, const StepMeasurement& m_half,
                      const StepOptions& o) {
  const double n = static_cast<double>(o.steps);
  const double L = static_cast<double>(m.shape.num_hidden_layers);
  const double Lh = static_cast<double>(m_half.shape.num_hidden_layers);
  const double N = static_cast<double>(o.project_layers);
  auto project = [&](double t, double th) {  // seconds per step at N layers
    const double per_layer = (t - th) / (L - Lh);
    return t + (N - L) * per_layer;
  };
  std::printf(
      "\nprojected to %lld layers (measured at %lld and %lld: a fixed part + a part per "
      "layer)\n%-14s",
      static_cast<long long>(o.project_layers), static_cast<long long>(Lh),
      static_cast<long long>(L), "phase");
  for (size_t mi : m.run) std::printf(" | %-40s", kStepModes[mi].name);
  std::printf("\n%-14s", "");
  for (size_t mi = 0; mi < m.run.size(); ++mi)
    std::printf(" | %8s %8s %10s %10s", "s half", "s", "projected", "bf16/this");
  std::printf("\n");
  Json phases(Json::Object{});
  double base[kWholeStep + 1] = {};
  for (size_t k = 0; k <= kWholeStep; ++k) {
    const std::string name = phase_name(k);
    std::printf("%-14s", name.c_str());
    Json per_mode(Json::Object{});
    for (size_t mi : m.run) {
      const double t = m.modes[mi].seconds(k) / n, th = m_half.modes[mi].seconds(k) / n;
      const double p = std::max(0.0, project(t, th));
      if (mi == m.run.front()) base[k] = p;
      const double ratio = p > 0 && base[k] > 0 ? base[k] / p : NAN;
      char cell[16] = "-";
      if (std::isfinite(ratio)) std::snprintf(cell, sizeof cell, "%.2fx", ratio);
      std::printf(" | %8.3f %8.3f %10.3f %10s", th, t, p, cell);
      Json e;
      e["seconds_half"] = number(th);
      e["seconds"] = number(t);
      e["projected_seconds"] = number(p);
      e["bf16_over_this"] = number(ratio);
      per_mode[kStepModes[mi].name] = e;
    }
    std::printf("\n");
    phases[name] = per_mode;
  }
  std::printf(
      "(one fit per phase and mode through two measurements: noisy where a phase is "
      "small)\n");
  Json j;
  j["layers"] = o.project_layers;
  j["measured_layers"] = Json::Array{Json(static_cast<int64_t>(Lh)), Json(static_cast<int64_t>(L))};
  j["phases"] = phases;
  return j;
}

Json bench_step(Backend& be, const StepOptions& o) {
  check(o.steps > 0, "--steps must be positive");
  check(o.warmup >= 0, "--warmup must not be negative");
  // Settings common to the modes: the model shape (--model), the user's --set, then what the
  // measurement needs: no supervised warm-up, validation only at the start (in the first step,
  // its time not counted) and at the end (never reached: the run has more steps than are timed).
  std::vector<std::string> sets;
  if (!o.model.empty()) {
    const ModelConfig mc = model_shape(o.model);
    sets.push_back("model.hidden_size=" + std::to_string(mc.hidden_size));
    sets.push_back("model.num_hidden_layers=" + std::to_string(mc.num_hidden_layers));
    sets.push_back("model.num_attention_heads=" + std::to_string(mc.num_attention_heads));
    sets.push_back("model.num_key_value_heads=" + std::to_string(mc.num_key_value_heads));
    sets.push_back("model.head_dim=" + std::to_string(mc.head_dim));
    sets.push_back("model.intermediate_size=" + std::to_string(mc.intermediate_size));
  }
  sets.insert(sets.end(), o.sets.begin(), o.sets.end());
  const RunConfig preset = RunConfig::load(o.preset, "", sets);  // validates the user's settings
  sets.push_back("sft.steps=0");
  sets.push_back("validation.every=0");
  sets.push_back("grpo.steps=" + std::to_string(std::max(preset.steps, o.warmup + o.steps + 1)));

  const bool cpu = be.name() == "cpu";
  selected_modes(o, cpu);  // --modes is checked before anything runs
  check(o.project_layers <= 0 || preset.model.num_hidden_layers >= 2,
        "--project-layers: the model has " + std::to_string(preset.model.num_hidden_layers) +
            " layer; it needs 2 or more to be measured again at half of them");
  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf(
      "preset %s: per mode %lld warm-up + %lld timed GRPO steps (%lld prompts x %lld "
      "responses; no SFT steps; the first step's validation not counted)%s\n",
      o.preset.c_str(), static_cast<long long>(o.warmup), static_cast<long long>(o.steps),
      static_cast<long long>(preset.prompts_per_step), static_cast<long long>(preset.group_size),
      cpu ? "; the modes take turns step by step" : "");
  std::fflush(stdout);
  const StepMeasurement m = measure_step_modes(be, o, sets);

  Json run = backend_json(be);
  run["preset"] = o.preset;
  run["model_shape"] = m.shape_text;
  run["prompts_per_step"] = preset.prompts_per_step;
  run["group_size"] = preset.group_size;
  run["warmup"] = o.warmup;
  run["steps"] = o.steps;
  run["interleaved"] = m.interleaved;
  Json::Array mode_list;
  for (size_t mi : m.run) mode_list.push_back(Json(kStepModes[mi].key));
  run["modes"] = Json(mode_list);
  Json::Array set_list;
  for (const auto& s : o.sets) set_list.push_back(Json(s));
  run["sets"] = Json(set_list);
  run["rows"] = step_table(m, o);
  if (o.op_times) {
    if (m.interleaved) {
      std::printf("\nop times: the %s backend has no op timing (use a profiler such as perf)\n",
                  be.name().c_str());
    } else {
      for (size_t mi : m.run)
        print_op_times(kStepModes[mi].name, m.modes[mi].ops, static_cast<double>(o.steps),
                       m.modes[mi].step / static_cast<double>(o.steps));
    }
  }
  run["phases"] = phase_table(m, o);
  run["targets"] = step_targets(m, o, run);
  if (o.project_layers > 0) {
    const int64_t half = m.shape.num_hidden_layers / 2;
    std::printf("\n--project-layers %lld: the modes again with %lld of the %lld layers\n",
                static_cast<long long>(o.project_layers), static_cast<long long>(half),
                static_cast<long long>(m.shape.num_hidden_layers));
    std::fflush(stdout);
    StepOptions oh = o;
    oh.op_times = false;
    std::vector<std::string> sets_half = sets;
    sets_half.push_back("model.num_hidden_layers=" + std::to_string(half));
    const StepMeasurement mh = measure_step_modes(be, oh, sets_half);
    run["projection"] = projection_table(m, mh, o);
  }
  if (!cpu) {
    std::printf("\n");
    return run;
  }
  const CpuPeak peak = cpu_gemm_efficiency(m, o, run);
  pytorch_baseline(m, o, preset, peak, run);
  return run;
}

}  // namespace fp8rl::cli::bench
