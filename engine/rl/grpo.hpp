// GRPO with truncated importance sampling: advantages, the clipped surrogate with importance
// weights, its gradient with respect to the current log-probs, and the mismatch diagnostics.
// Pure functions on host vectors (no model): the tests check them on hand-computed cases.
//
// Per response token: g = generation log-prob, p = trainer log-prob under the same weights,
// c = current log-prob, ref = frozen reference log-prob (KL only).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "contract/histogram.hpp"

namespace fp8rl {

enum class AdvantageMode { mean_std, leave_one_out };
enum class ImportanceMode { tis, icepop, off };

AdvantageMode parse_advantage_mode(const std::string& s);
ImportanceMode parse_importance_mode(const std::string& s);

// Per-response advantages from rewards laid out as consecutive groups of group_size:
// A_i = (R_i − b_i) / (σ_group + 1e-6); b_i the group mean (mean_std) or the mean of the
// others (leave_one_out); σ the group's standard deviation; 0 where σ = 0.
std::vector<double> compute_advantages(const std::vector<double>& rewards, int64_t group_size,
                                       AdvantageMode mode);

struct LossConfig {
  double clip_low = 0.2, clip_high = 0.2;  // ratio clipped to [1 − low, 1 + high]
  ImportanceMode importance = ImportanceMode::tis;
  double is_min = 0.0, is_max = 2.0;  // [C_min, C]
  double kl_beta = 0.0;               // β of k3(c ‖ ref)
};

// Importance weight w = exp(p − g) (NaN/inf → 0), then tis: clamp to [C_min, C]; icepop: w
// when inside [C_min, C] else 0; off: 1.
double importance_weight(double p, double g, const LossConfig& cfg);

struct TokenLossSums {
  double loss = 0;  // Σ over tokens of the per-token loss
  int64_t tokens = 0;
  int64_t clipped = 0;  // tokens where the clipped branch was taken (no gradient)
  double kl = 0;        // Σ k3(c ‖ ref) (when β > 0)
};

// Adds tokens of one response with advantage A: per token
//   loss = w̃ · max(−A·r, −A·clip(r)) + β·k3,  r = exp(c − p),  k3 = e^(ref−c) − (ref−c) − 1,
// and writes d loss/d c per token into dc (before dividing by the global token count, which the
// caller does for token-level aggregation). ref may be empty when β = 0.
void add_token_loss(const LossConfig& cfg, double advantage, const float* c, const float* p,
                    const float* g, const float* ref, int64_t n, float* dc, TokenLossSums& sums);

// Mismatch diagnostics of p against g over all response tokens of a step.
struct MismatchStats {
  double token_mult_prob_error = 0;  // mean exp(|p − g|)
  double gen_kl_error = 0;           // mean exp(p−g) − (p−g) − 1
  double mean_weight = 0;            // mean w (before truncation)
  double out_of_bounds = 0;          // fraction of w outside [C_min, C]
  double effective_sample_size = 0;  // (Σw)² / (N Σw²)
  std::vector<double> weights;       // every w, for the histogram
};
MismatchStats mismatch_stats(const std::vector<float>& p, const std::vector<float>& g,
                             const LossConfig& cfg);

}  // namespace fp8rl
