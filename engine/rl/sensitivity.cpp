#include "rl/sensitivity.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/error.hpp"

namespace fp8rl {
namespace {

// Above this the reference logits would crowd the host: fewer prompts measure the same thing.
constexpr double kMaxReferenceBytes = 4.0 * 1024 * 1024 * 1024;

// log Σ exp(z_v · s) in FP64.
double log_sum_exp(const float* z, int64_t V, double s) {
  double m = -INFINITY;
  for (int64_t v = 0; v < V; ++v) m = std::max(m, z[v] * s);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(z[v] * s - m);
  return m + std::log(sum);
}

}  // namespace

std::string LinearRef::name() const {
  return lm_head ? std::string("lm_head") : slot.name();
}

std::string LinearRef::bf16_override() const {
  check(!lm_head, "the lm_head has no precision override (it is set by precision.lm_head)");
  return slot.override_text(Precision::bf16);
}

SensitivityProbe::SensitivityProbe(DecoderModel& model, const RunConfig& cfg, const Task& task,
                                   int64_t prompts)
    : model_(model), saved_map_(model.precision()), saved_head_(model.lm_head_setting()) {
  check(prompts > 0, "sensitivity: the batch needs at least one prompt");
  check(cfg.sampling.temperature > 0,
        "sensitivity: grpo.temperature must be positive (log-probs are taken at it)");
  loss_ = cfg.loss;
  loss_.importance = ImportanceMode::off;  // importance weights 1: one policy generated
  inv_t_ = static_cast<float>(1.0 / cfg.sampling.temperature);
  micro_batch_ = static_cast<size_t>(cfg.micro_batch_size);
  model_.set_precision(uniform_precision(model_.config(), Precision::bf16));
  model_.set_lm_head_precision(Precision::bf16);
  {
    // The reference generates with a BF16 KV cache (an all-BF16 model).
    Generator gen(
        model_, GeneratorOptions{KvDType::bf16, 0, SamplingSite::automatic,
                                 cfg.decode_graphs ? DecodeGraphs::automatic : DecodeGraphs::off});
    batch_ = generate_group_rollouts(cfg, task, gen, 1, prompts);
  }
  record_reference();
  ref_ = measure(uniform_precision(model_.config(), Precision::bf16), Precision::bf16, true);
}

SensitivityProbe::SensitivityProbe(DecoderModel& model, const RunConfig& cfg,
                                   std::vector<TrainSeq> sequences)
    : model_(model), saved_map_(model.precision()), saved_head_(model.lm_head_setting()) {
  check(cfg.sampling.temperature > 0,
        "sensitivity: grpo.temperature must be positive (log-probs are taken at it)");
  loss_ = cfg.loss;
  loss_.importance = ImportanceMode::off;
  inv_t_ = static_cast<float>(1.0 / cfg.sampling.temperature);
  micro_batch_ = static_cast<size_t>(cfg.micro_batch_size);
  batch_.train = std::move(sequences);
  without_loss_ = true;
  model_.set_precision(uniform_precision(model_.config(), Precision::bf16));
  model_.set_lm_head_precision(Precision::bf16);
  record_reference();
  ref_ = measure(uniform_precision(model_.config(), Precision::bf16), Precision::bf16, false);
}

void SensitivityProbe::record_reference() {
  for (const auto& s : batch_.train) tokens_ += static_cast<int64_t>(s.g.size());
  const int64_t V = model_.config().vocab_size;
  const double bytes = static_cast<double>(tokens_) * static_cast<double>(V) * 4.0;
  check(bytes <= kMaxReferenceBytes,
        "sensitivity: the reference distributions of " + std::to_string(tokens_) +
            " response tokens × " + std::to_string(V) + " vocabulary entries need " +
            std::to_string(static_cast<int64_t>(bytes / (1024 * 1024))) +
            " MiB (at most 4096): take fewer prompts (--prompts)");
  check(tokens_ > 0, "sensitivity: the batch has no response tokens");
  ref_logits_.reserve(static_cast<size_t>(tokens_ * V));
  for_each_response_row(
      [&](const float* z, int32_t) { ref_logits_.insert(ref_logits_.end(), z, z + V); });
}

SensitivityProbe::~SensitivityProbe() {
  try {
    // The setting first: set_precision then runs the head as that map runs it.
    model_.clear_activations();
    model_.set_lm_head_precision(saved_head_);
    model_.set_precision(saved_map_);
  } catch (...) {  // a destructor must not throw; the model is left as measured
  }
}

void SensitivityProbe::for_each_response_row(const std::function<void(const float*, int32_t)>& f) {
  const int64_t V = model_.config().vocab_size;
  for (size_t b = 0; b < batch_.train.size(); b += micro_batch_) {
    const MicroBatch mb =
        pack_micro_batch(batch_.train, b, std::min(batch_.train.size(), b + micro_batch_));
    const auto logits = model_.logits(mb.ids, mb.B, mb.T);
    for (auto [si, row] : mb.rows) {
      const int64_t n = static_cast<int64_t>(batch_.train[si].g.size());
      for (int64_t k = row; k < row + n; ++k)
        f(logits.data() + k * V, mb.targets[static_cast<size_t>(k)]);
    }
  }
}

SensitivityMeasure SensitivityProbe::measure(const PrecisionMap& pm, Precision lm_head,
                                             bool with_loss) {
  check(lm_head == Precision::bf16 || lm_head == Precision::fp8,
        "sensitivity: the lm_head is measured in bf16 or fp8");
  check(!(with_loss && without_loss_),
        "sensitivity: a probe of given sequences has no reference loss to measure against");
  model_.clear_activations();
  model_.set_precision(pm);
  model_.set_lm_head_precision(lm_head);
  const int64_t V = model_.config().vocab_size;
  const double s = inv_t_;
  SensitivityMeasure m;
  double kl = 0, adl = 0, mult = 0;
  size_t ref_row = 0;
  for_each_response_row([&](const float* q, int32_t x) {
    const float* a = ref_logits_.data() + ref_row++ * static_cast<size_t>(V);
    const double la = log_sum_exp(a, V, s), lq = log_sum_exp(q, V, s);
    double row_kl = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double lpa = a[v] * s - la, lpq = q[v] * s - lq;
      row_kl += std::exp(lpa) * (lpa - lpq);
    }
    kl += row_kl;
    const double d = std::fabs((q[x] * s - lq) - (a[x] * s - la));
    adl += d;
    mult += std::exp(d);
  });
  const double n = static_cast<double>(tokens_);
  m.kl = kl / n;
  m.abs_dlogp = adl / n;
  m.token_mult_prob_error = mult / n;
  if (!with_loss) return m;

  // The GRPO loss on the same tokens: one mini-batch, token-level mean.
  const bool is_reference = ref_logp_.empty();
  if (is_reference) ref_logp_.resize(batch_.train.size());
  model_.zero_grad();
  TokenLossSums sums;
  for (size_t b = 0; b < batch_.train.size(); b += micro_batch_) {
    const MicroBatch mb =
        pack_micro_batch(batch_.train, b, std::min(batch_.train.size(), b + micro_batch_));
    const auto res = model_.forward(mb.ids, mb.targets, mb.B, mb.T, inv_t_, true);
    std::vector<float> dlogp(res.logp.size(), 0.0f);
    for (auto [si, row] : mb.rows) {
      const TrainSeq& t = batch_.train[si];
      const int64_t len = static_cast<int64_t>(t.g.size());
      const float* c = res.logp.data() + row;
      if (is_reference) ref_logp_[si].assign(c, c + len);
      const float* p = ref_logp_[si].data();
      add_token_loss(loss_, t.advantage, c, p, p, p, len, dlogp.data() + row, sums);
      for (int64_t k = 0; k < len; ++k)
        dlogp[static_cast<size_t>(row + k)] /= static_cast<float>(tokens_);
    }
    model_.backward(dlogp);
  }
  double ss = 0;
  for (Param* prm : model_.parameters())
    ss += model_.backend().sum_squares(prm->grad.f32(), prm->grad.size());
  model_.zero_grad();
  m.has_loss = true;
  m.loss = sums.loss / n;
  m.grad_norm = std::sqrt(ss);
  if (!is_reference) {
    m.delta_loss = m.loss - ref_.loss;
    m.delta_grad_norm = m.grad_norm - ref_.grad_norm;
  }
  return m;
}

SensitivityResult analyse_sensitivity(DecoderModel& model, const RunConfig& cfg, const Task& task,
                                      const SensitivityOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opt.budget)
    check(std::isfinite(*opt.budget) && *opt.budget >= 0,
          "sensitivity: the KL budget must be a non-negative number, got " +
              std::to_string(*opt.budget));
  const int64_t n_linears =
      static_cast<int64_t>(uniform_precision(model.config(), Precision::bf16).linears().size());
  // Planned: the reference, two all-FP8 baselines, every module alone in FP8 and every decoder
  // linear alone in BF16, the recommendation with the lm_head in FP8 and its full measure; the
  // greedy search adds one per step.
  int64_t planned = 3 + (n_linears + 1) + n_linears + 2, done = 0;
  auto tick = [&](const std::string& what) {
    ++done;
    if (opt.progress) opt.progress(done, planned, what);
  };

  SensitivityResult r;
  SensitivityProbe probe(model, cfg, task, opt.prompts > 0 ? opt.prompts : cfg.prompts_per_step);
  tick("reference (all BF16)");
  const GroupRollouts& batch = probe.batch();
  r.prompts = static_cast<int64_t>(batch.examples.size());
  r.group_size = cfg.group_size;
  r.sequences = static_cast<int64_t>(batch.train.size());
  r.response_tokens = probe.response_tokens();
  r.vocab_size = model.config().vocab_size;
  r.temperature = cfg.sampling.temperature;
  r.mean_reward = batch.rewards.empty()
                      ? 0.0
                      : std::accumulate(batch.rewards.begin(), batch.rewards.end(), 0.0) /
                            static_cast<double>(batch.rewards.size());
  r.reference = probe.reference();

  const PrecisionMap all_bf16 = uniform_precision(model.config(), Precision::bf16),
                     all_fp8 = uniform_precision(model.config(), Precision::fp8);
  r.all_fp8 = probe.measure(all_fp8, Precision::bf16, true);
  tick("all FP8");
  r.all_fp8_lm_head_fp8 = probe.measure(all_fp8, Precision::fp8, true);
  tick("all FP8 with the lm_head");

  // Every decoder linear, the routers and each expert's too (the all-FP8 map keeps routers in
  // BF16, their default: "only the router in FP8" is then measured against it).
  for (const LinearSlot& slot : all_bf16.linears()) {
    ModuleSensitivity ms;
    ms.linear = LinearRef{false, slot};
    PrecisionMap only = all_bf16;
    only.set(slot, Precision::fp8);
    ms.only_fp8 = probe.measure(only, Precision::bf16, true);
    tick("only " + ms.linear.name() + " in FP8");
    PrecisionMap but = all_fp8;
    but.set(slot, slot.router ? Precision::fp8 : Precision::bf16);
    ms.all_fp8_but_kl = probe.measure(but, Precision::bf16, false).kl;
    tick((slot.router ? "all FP8 with " : "all FP8 but ") + ms.linear.name());
    r.ranking.push_back(ms);
  }
  {
    ModuleSensitivity head;
    head.linear = LinearRef{true, {}};
    head.only_fp8 = probe.measure(all_bf16, Precision::fp8, true);
    head.all_fp8_but_kl = r.all_fp8.kl;
    tick("only the lm_head in FP8");
    r.ranking.push_back(head);
  }
  // Ties keep the model's order (layer, then module, then the lm_head).
  std::stable_sort(r.ranking.begin(), r.ranking.end(),
                   [](const ModuleSensitivity& a, const ModuleSensitivity& b) {
                     return a.only_fp8.kl > b.only_fp8.kl;
                   });

  r.budget_is_default = !opt.budget.has_value();
  r.budget = opt.budget ? *opt.budget : r.all_fp8.kl / 2;

  // Greedy: decoder linears by the KL their BF16 removes from the all-FP8 model (largest
  // first), re-measured with the set applied after each addition, until under the budget.
  std::vector<const ModuleSensitivity*> candidates;
  for (const auto& ms : r.ranking)
    if (!ms.linear.lm_head && !ms.linear.slot.router) candidates.push_back(&ms);
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const ModuleSensitivity* a, const ModuleSensitivity* b) {
                     return a->all_fp8_but_kl < b->all_fp8_but_kl;
                   });
  PrecisionMap rec = all_fp8;
  r.overrides.push_back(PrecisionOverride{std::nullopt, std::nullopt, Precision::fp8}.to_string());
  double kl = r.all_fp8.kl;
  for (const ModuleSensitivity* c : candidates) {
    if (kl <= r.budget) break;
    r.keep_bf16.push_back(c->linear);
    r.overrides.push_back(c->linear.bf16_override());
    rec.set(c->linear.slot, Precision::bf16);
    ++planned;
    kl = probe.measure(rec, Precision::bf16, false).kl;
    r.kl_after_each.push_back(kl);
    tick("all FP8 but " + std::to_string(r.keep_bf16.size()) + " kept in BF16");
  }
  r.recommended = r.keep_bf16.empty() ? r.all_fp8 : probe.measure(rec, Precision::bf16, true);
  tick("the recommendation");
  r.meets_budget = r.recommended.kl <= r.budget;
  r.recommended_lm_head_fp8_kl = probe.measure(rec, Precision::fp8, false).kl;
  r.keep_lm_head_bf16 = r.recommended_lm_head_fp8_kl > r.budget;
  tick("the recommendation with the lm_head in FP8");
  r.batch = probe.batch();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string overrides_assignment(const std::vector<std::string>& overrides) {
  std::string s = "precision.overrides=[";
  for (size_t i = 0; i < overrides.size(); ++i) s += (i ? ", \"" : "\"") + overrides[i] + "\"";
  return s + "]";
}

namespace {

Json measure_json(const SensitivityMeasure& m) {
  Json j;
  j["kl"] = m.kl;
  j["abs_dlogp"] = m.abs_dlogp;
  j["token_mult_prob_error"] = m.token_mult_prob_error;
  if (m.has_loss) {
    j["loss"] = m.loss;
    j["delta_loss"] = m.delta_loss;
    j["grad_norm"] = m.grad_norm;
    j["delta_grad_norm"] = m.delta_grad_norm;
  }
  return j;
}

}  // namespace

Json sensitivity_json(const SensitivityResult& r) {
  Json j;
  j["batch"] = Json(Json::Object{{"prompts", r.prompts},
                                 {"group_size", r.group_size},
                                 {"sequences", r.sequences},
                                 {"response_tokens", r.response_tokens},
                                 {"vocab_size", r.vocab_size},
                                 {"temperature", r.temperature},
                                 {"mean_reward", r.mean_reward}});
  j["reference"] = measure_json(r.reference);
  j["all_fp8"] = measure_json(r.all_fp8);
  j["all_fp8_lm_head_fp8"] = measure_json(r.all_fp8_lm_head_fp8);
  Json::Array ranking;
  for (size_t i = 0; i < r.ranking.size(); ++i) {
    const ModuleSensitivity& ms = r.ranking[i];
    Json e;
    e["rank"] = static_cast<int64_t>(i + 1);
    e["module"] = ms.linear.name();
    e["layer"] = ms.linear.lm_head ? Json() : Json(ms.linear.slot.layer);
    e["only_fp8"] = measure_json(ms.only_fp8);
    e["all_fp8_but_kl"] = ms.all_fp8_but_kl;
    ranking.push_back(e);
  }
  j["ranking"] = Json(std::move(ranking));
  j["budget"] = r.budget;
  j["budget_is_default"] = r.budget_is_default;
  Json rec;
  Json::Array keep, ovr, steps;
  for (const auto& o : r.overrides) ovr.push_back(Json(o));
  for (size_t i = 0; i < r.keep_bf16.size(); ++i) {
    keep.push_back(Json(r.keep_bf16[i].name()));
    Json st;
    st["module"] = r.keep_bf16[i].name();
    st["kl"] = r.kl_after_each[i];
    steps.push_back(st);
  }
  rec["keep_bf16"] = Json(std::move(keep));
  rec["overrides"] = Json(std::move(ovr));
  rec["override_setting"] = overrides_assignment(r.overrides);
  rec["steps"] = Json(std::move(steps));
  rec["measure"] = measure_json(r.recommended);
  rec["kl"] = r.recommended.kl;
  rec["meets_budget"] = r.meets_budget;
  rec["lm_head_fp8_kl"] = r.recommended_lm_head_fp8_kl;
  rec["keep_lm_head_bf16"] = r.keep_lm_head_bf16;
  rec["lm_head"] = precision_name(r.recommended_lm_head());
  j["recommendation"] = rec;
  j["seconds"] = r.seconds;
  return j;
}

}  // namespace fp8rl
