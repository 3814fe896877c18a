// The result of `fp8rl sensitivity --json` as the studio reads it (plain C++, no Qt): how far
// each linear in FP8 moves the policy from its BF16 reference (only that linear in FP8, and
// every linear in FP8 but that one), the lm_head's, and the recommendation of which linears to
// keep in BF16 as precision overrides. Also the command's progress lines on stderr.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "contract/precision.hpp"
#include "core/json.hpp"

namespace fp8rl::ui {

// One measurement against the BF16 reference on the same batch.
struct SensitivityMeasure {
  double kl = 0, abs_dlogp = 0, token_mult_prob_error = 1;  // of the policy
  double loss = 0, delta_loss = 0;                          // of the GRPO loss
  double grad_norm = 0, delta_grad_norm = 0;                // of its gradient

  // "kl 1.2e-05 · |Δlogp| 0.003 · token_mult_prob_error 1.004 · …"
  std::string describe() const;
};

// One entry of the ranking: a linear of a layer (a router, an expert's), or the lm_head (layer
// and linear unset).
struct SensitivityEntry {
  int64_t rank = 0;
  std::string module;  // "L1.down", "L1.router", "L1.e5.up", "L1.shared.up", "lm_head"
  std::optional<int64_t> layer;
  std::optional<Module> linear;  // gate/up/down for an expert's, unset for a router
  std::optional<int64_t> expert;
  bool router = false;
  bool shared = false;          // the shared expert's gate/up/down
  SensitivityMeasure only_fp8;  // only this linear in FP8
  double all_fp8_but_kl = 0;    // KL with every linear in FP8 but this one
};

struct SensitivityRecommendation {
  std::vector<std::string> keep_bf16;        // "L1.down", …
  std::vector<PrecisionOverride> overrides;  // "1.down=bf16", … parsed
  std::string override_setting;              // precision.overrides=[…] for a config
  SensitivityMeasure measure;                // all FP8 but keep_bf16
  double kl = 0;
  bool meets_budget = false;
  double lm_head_fp8_kl = 0;
  bool keep_lm_head_bf16 = true;

  // The overrides as text ("1.down=bf16"), in order.
  std::vector<std::string> overrideTexts() const;
};

struct SensitivityReport {
  struct Batch {
    int64_t prompts = 0, group_size = 0, sequences = 0, response_tokens = 0, vocab_size = 0;
    double temperature = 1, mean_reward = 0;
  } batch;
  SensitivityMeasure reference, all_fp8, all_fp8_lm_head_fp8;
  std::vector<SensitivityEntry> ranking;  // most sensitive first
  int64_t layers = 0;                     // 1 + the highest layer ranked
  double budget = 0;
  bool budget_is_default = true;
  SensitivityRecommendation recommendation;
  double seconds = 0;

  // Parses the command's JSON; throws Error("sensitivity report: …") naming the missing or
  // malformed key by its path ("recommendation.kl", "ranking[3].only_fp8.loss").
  static SensitivityReport parse(const std::string& text);
  static SensitivityReport fromJson(const Json& doc);

  // The entry of a layer's linear / of the lm_head, or nullptr when the ranking lacks it.
  const SensitivityEntry* find(int64_t layer, Module m) const;
  const SensitivityEntry* lmHead() const;
  // Whether the recommendation keeps this linear / the lm_head in BF16.
  bool recommended(const SensitivityEntry& e) const;
  // Every measure of an entry, several lines ("L1.down (rank 1 of 15)\nonly L1.down in FP8: …").
  std::string describe(const SensitivityEntry& e) const;
};

// Which KL a heatmap cell shows.
enum class SensitivityValue { only_fp8_kl, all_fp8_but_kl };
double sensitivityValue(const SensitivityEntry& e, SensitivityValue which);

// A report as a heatmap: columns are the modules its ranking has (Module order: q … down for a
// standard model; q or q_a, q_b, kv_a, kv_b, o, gate, up, down with latent attention), rows the
// layers (row l is layer l) and, last, the lm_head (its value in every column). Cell (c, r) is
// at c * rows + r (HeatmapData's layout).
struct SensitivityGrid {
  int rows = 0;
  int cols = 0;
  std::vector<Module> columns;  // the module of each column
  // log10 of the chosen KL; a KL <= 0 (no measurable change) takes the lowest positive KL's
  // value, so it reads as "least sensitive"; NaN where the ranking lacks the cell.
  std::vector<double> values;
  std::vector<char> recommended;                 // kept in BF16 by the recommendation
  std::vector<const SensitivityEntry*> entries;  // nullptr where the ranking lacks the cell
};
SensitivityGrid sensitivityGrid(const SensitivityReport& report, SensitivityValue which);

// A progress line of the command ("[####......] 12/120 only L0.q in FP8").
struct SensitivityProgress {
  int64_t done = 0, planned = 0;
  std::string what;
};
// nullopt when the line is not a progress line.
std::optional<SensitivityProgress> parseSensitivityProgress(const std::string& line);

}  // namespace fp8rl::ui
