#include "rl/grpo.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace fp8rl {

AdvantageMode parse_advantage_mode(const std::string& s) {
  if (s == "mean_std") return AdvantageMode::mean_std;
  if (s == "leave_one_out") return AdvantageMode::leave_one_out;
  throw Error("grpo.advantage '" + s + "' is not one of: mean_std, leave_one_out");
}

ImportanceMode parse_importance_mode(const std::string& s) {
  if (s == "tis") return ImportanceMode::tis;
  if (s == "icepop") return ImportanceMode::icepop;
  if (s == "off") return ImportanceMode::off;
  throw Error("grpo.importance '" + s + "' is not one of: tis, icepop, off");
}

std::vector<double> compute_advantages(const std::vector<double>& rewards, int64_t G,
                                       AdvantageMode mode) {
  check(G >= 1 && static_cast<int64_t>(rewards.size()) % G == 0,
        "advantages: " + std::to_string(rewards.size()) + " rewards do not form groups of " +
            std::to_string(G));
  std::vector<double> adv(rewards.size(), 0.0);
  for (size_t g0 = 0; g0 < rewards.size(); g0 += static_cast<size_t>(G)) {
    double sum = 0;
    for (int64_t i = 0; i < G; ++i) sum += rewards[g0 + i];
    const double mean = sum / static_cast<double>(G);
    double var = 0;
    for (int64_t i = 0; i < G; ++i) var += (rewards[g0 + i] - mean) * (rewards[g0 + i] - mean);
    const double sd = G > 1 ? std::sqrt(var / static_cast<double>(G - 1)) : 0.0;
    if (sd == 0) continue;  // no signal in this group
    for (int64_t i = 0; i < G; ++i) {
      const double base = mode == AdvantageMode::mean_std || G == 1
                              ? mean
                              : (sum - rewards[g0 + i]) / static_cast<double>(G - 1);
      adv[g0 + i] = (rewards[g0 + i] - base) / (sd + 1e-6);
    }
  }
  return adv;
}

double importance_weight(double p, double g, const LossConfig& cfg) {
  double w = std::exp(p - g);
  if (!std::isfinite(w)) w = 0.0;
  switch (cfg.importance) {
    case ImportanceMode::tis:
      return std::clamp(w, cfg.is_min, cfg.is_max);
    case ImportanceMode::icepop:
      return (w >= cfg.is_min && w <= cfg.is_max) ? w : 0.0;
    case ImportanceMode::off:
      return 1.0;
  }
  return 1.0;
}

void add_token_loss(const LossConfig& cfg, double A, const float* c, const float* p, const float* g,
                    const float* ref, int64_t n, float* dc, TokenLossSums& sums) {
  for (int64_t t = 0; t < n; ++t) {
    const double w = importance_weight(p[t], g[t], cfg);
    const double r = std::exp(static_cast<double>(c[t]) - p[t]);
    const double rc = std::clamp(r, 1.0 - cfg.clip_low, 1.0 + cfg.clip_high);
    const double unclipped = -A * r, clipped = -A * rc;
    double loss, grad;
    if (clipped > unclipped) {  // the clipped branch: constant in c, no gradient
      loss = w * clipped;
      grad = 0.0;
      ++sums.clipped;
    } else {
      loss = w * unclipped;
      grad = -A * r * w;  // d(−A·e^(c−p))/dc
    }
    if (cfg.kl_beta > 0) {
      const double d = static_cast<double>(ref[t]) - c[t];
      const double k3 = std::exp(d) - d - 1.0;
      loss += cfg.kl_beta * k3;
      grad += cfg.kl_beta * (1.0 - std::exp(d));
      sums.kl += k3;
    }
    sums.loss += loss;
    dc[t] = static_cast<float>(grad);
  }
  sums.tokens += n;
}

MismatchStats mismatch_stats(const std::vector<float>& p, const std::vector<float>& g,
                             const LossConfig& cfg) {
  check(p.size() == g.size(), "mismatch stats: p and g differ in length");
  MismatchStats s;
  const size_t n = p.size();
  if (n == 0) return s;
  double sw = 0, sw2 = 0;
  int64_t oob = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(p[i]) - g[i];
    s.token_mult_prob_error += std::exp(std::fabs(d));
    s.gen_kl_error += std::exp(d) - d - 1.0;
    double w = std::exp(d);
    if (!std::isfinite(w)) w = 0;
    s.weights.push_back(w);
    sw += w;
    sw2 += w * w;
    oob += w < cfg.is_min || w > cfg.is_max;
  }
  s.token_mult_prob_error /= static_cast<double>(n);
  s.gen_kl_error /= static_cast<double>(n);
  s.mean_weight = sw / static_cast<double>(n);
  s.out_of_bounds = static_cast<double>(oob) / static_cast<double>(n);
  s.effective_sample_size = sw2 > 0 ? sw * sw / (static_cast<double>(n) * sw2) : 0.0;
  return s;
}

}  // namespace fp8rl
