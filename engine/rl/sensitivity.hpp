// Layer sensitivity: which linear modules need BF16. One GRPO batch of rollouts is generated
// by the all-BF16 model (the reference: every decoder linear and the lm_head in BF16); then, on
// those same tokens, configurations that put some linears in FP8 are compared with the
// reference: the KL of the next-token distributions, the change of the sampled tokens'
// log-probs, and the GRPO loss and gradient norm. Each module M (every layer × the seven
// decoder linears, plus the lm_head) is measured alone in FP8 ("only M in FP8", the rest BF16)
// and alone in BF16 ("all FP8 but M": every other decoder linear FP8, the lm_head BF16). The
// recommendation is the smallest set of decoder linears found greedily whose BF16 brings the
// all-FP8 model (decoder linears FP8, lm_head BF16 as a run has it by default) under a KL budget;
// the lm_head (precision.lm_head) is then tried in FP8 on top of it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "contract/precision.hpp"
#include "model/decoder.hpp"
#include "rl/group_rollouts.hpp"
#include "rl/run_config.hpp"

namespace fp8rl {

// A decoder linear (layer, module) or the lm_head.
struct LinearRef {
  bool lm_head = false;
  LinearSlot slot;  // a decoder linear: a dense module, a router or an expert's module

  // "L3.down", "L3.router", "L3.e5.up" (LinearSlot::name) or "lm_head".
  std::string name() const;
  // The precision override that keeps a decoder linear in BF16 ("3.down=bf16",
  // "3.experts.5.up=bf16"); the lm_head has none (the override grammar covers decoder linears
  // only): throws for it.
  std::string bf16_override() const;
};

// One configuration against the reference, over the response tokens of the batch (the rows
// that predict them). Distributions are the log-softmax of logits / temperature, in FP64.
struct SensitivityMeasure {
  double kl = 0;                     // mean per token of KL(p_ref ‖ p) over the vocabulary
  double abs_dlogp = 0;              // mean |log p(x) − log p_ref(x)|, x the sampled token
  double token_mult_prob_error = 1;  // mean exp(|log p(x) − log p_ref(x)|)
  // The GRPO loss and its gradient (only where measured): the run's token-level loss with the
  // reference's log-probs as the old policy (ratio exp(c − p_ref), clipped as configured),
  // importance weights 1, the reference as the KL anchor when grpo.kl_beta > 0; grad_norm is
  // the global L2 norm of its gradient over every parameter (before clipping).
  bool has_loss = false;
  double loss = 0, grad_norm = 0;
  double delta_loss = 0, delta_grad_norm = 0;  // minus the reference's
};

// One module's sensitivity.
struct ModuleSensitivity {
  LinearRef linear;
  SensitivityMeasure only_fp8;  // the module in FP8, everything else BF16 (with the loss)
  // KL with the module in BF16, every other decoder linear in FP8 and the lm_head in BF16 (for
  // the lm_head this is the all-FP8 model itself).
  double all_fp8_but_kl = 0;
};

struct SensitivityOptions {
  int64_t prompts = 0;           // prompts of the batch (each × group_size); 0: the config's
  std::optional<double> budget;  // the KL budget (nats per token); none: half the all-FP8 KL
  // Called after each measurement with the measurements done, those planned so far (the
  // greedy search adds its own as it goes) and what was measured.
  std::function<void(int64_t done, int64_t planned, const std::string& what)> progress;
};

struct SensitivityResult {
  // The batch: prompts × group_size responses of the reference model (step 1's draw).
  int64_t prompts = 0, group_size = 0, sequences = 0, response_tokens = 0, vocab_size = 0;
  double temperature = 1, mean_reward = 0;
  GroupRollouts batch;

  SensitivityMeasure reference;  // all BF16: KL 0, Δ 0 (its loss and grad_norm are the base)
  SensitivityMeasure all_fp8;    // every decoder linear FP8, the lm_head BF16
  SensitivityMeasure all_fp8_lm_head_fp8;  // every linear and the lm_head FP8
  std::vector<ModuleSensitivity> ranking;  // by only_fp8.kl, most sensitive first

  double budget = 0;
  bool budget_is_default = false;  // half the all-FP8 KL
  // The recommendation: decoder linears to keep in BF16, in the order the greedy search added
  // them (largest all-FP8-but-M reduction first), with the KL measured after each addition.
  std::vector<LinearRef> keep_bf16;
  std::vector<double> kl_after_each;
  // The recommendation as precision overrides, whatever the map they are applied to:
  // "*.*=fp8", then "3.down=bf16" per kept linear (a config's precision.overrides, `--set`, or
  // a live run's set_precision).
  std::vector<std::string> overrides;
  SensitivityMeasure recommended;  // all FP8 with keep_bf16 in BF16, lm_head BF16
  bool meets_budget = false;
  // The recommendation with the lm_head in FP8 too: within the budget precision.lm_head may be
  // fp8, above it the lm_head stays in BF16 (precision.lm_head: bf16, the default).
  double recommended_lm_head_fp8_kl = 0;
  bool keep_lm_head_bf16 = false;
  Precision recommended_lm_head() const {
    return keep_lm_head_bf16 ? Precision::bf16 : Precision::fp8;
  }
  double seconds = 0;
};

// The measurements of one batch against its reference. Construction generates the rollouts with
// the model in all-BF16 (the caller's precision map and lm_head setting are restored by the
// destructor) and records the
// reference's logits of the response rows (response tokens × vocabulary floats: refused above
// 4 GiB, naming the size).
class SensitivityProbe {
 public:
  SensitivityProbe(DecoderModel& model, const RunConfig& cfg, const Task& task, int64_t prompts);
  // The same on sequences already generated (a run's micro-batch, whoever generated them): the
  // reference's logits of their response rows, without its loss (reference().has_loss false;
  // measure() with_loss then has no reference to compare with).
  SensitivityProbe(DecoderModel& model, const RunConfig& cfg, std::vector<TrainSeq> sequences);
  ~SensitivityProbe();
  SensitivityProbe(const SensitivityProbe&) = delete;
  SensitivityProbe& operator=(const SensitivityProbe&) = delete;

  const GroupRollouts& batch() const { return batch_; }
  int64_t response_tokens() const { return tokens_; }
  // Measures a configuration: decoder linears as `pm`, the lm_head in `lm_head` (bf16 or fp8);
  // with_loss adds the GRPO loss and its gradient norm (a training forward and backward).
  SensitivityMeasure measure(const PrecisionMap& pm, Precision lm_head, bool with_loss);
  // The reference (all BF16), with its loss: the deltas of later measures are against it.
  const SensitivityMeasure& reference() const { return ref_; }

 private:
  DecoderModel& model_;
  PrecisionMap saved_map_;
  Precision saved_head_;  // the lm_head setting (DecoderModel::lm_head_setting)
  LossConfig loss_;
  float inv_t_;
  // Makes the model all BF16 and records the reference's logits of batch_'s response rows.
  void record_reference();
  size_t micro_batch_;
  GroupRollouts batch_;
  int64_t tokens_ = 0;
  std::vector<float> ref_logits_;             // [tokens, V], response rows in batch order
  std::vector<std::vector<float>> ref_logp_;  // per sequence: the reference's c (training pass)
  SensitivityMeasure ref_;
  bool without_loss_ = false;  // built from given sequences: no reference loss

  // Runs the model as set over the batch (no-grad logits) and calls f(the row's logits [V], the
  // sampled token) for every response token, in batch order.
  void for_each_response_row(const std::function<void(const float*, int32_t)>& f);
};

// The whole analysis on `model` (its precision map and lm_head setting are restored afterwards;
// its gradients are left zeroed). Throws for a negative or non-finite budget, naming it.
SensitivityResult analyse_sensitivity(DecoderModel& model, const RunConfig& cfg, const Task& task,
                                      const SensitivityOptions& opt);

// The `--set` form of a precision override list: precision.overrides=["*.*=fp8", "3.down=bf16"]
// (pastes into a config's precision section as overrides: [...] as well).
std::string overrides_assignment(const std::vector<std::string>& overrides);

// The result as one JSON object (the keys of docs/training.md, "Layer sensitivity").
Json sensitivity_json(const SensitivityResult& r);

}  // namespace fp8rl
