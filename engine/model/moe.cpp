#include "model/moe.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <numeric>

#include "backend/sampling_rules.hpp"
#include "core/error.hpp"

namespace fp8rl {
namespace {

constexpr Module kExpertModules[3] = {Module::gate, Module::up, Module::down};

// Rows [first, first + n) of t.
Matrix rows_of(const Tensor& t, int64_t first, int64_t n) {
  return Matrix{static_cast<uint8_t*>(t.buf.data()) +
                    static_cast<size_t>(first * t.cols) * dtype_size(t.dtype),
                n, t.cols, t.dtype};
}

Tensor upload_ints(Backend& be, const std::vector<int32_t>& v) {
  Tensor t;
  t.buf = be.alloc(std::max<size_t>(v.size(), 1) * 4);
  t.rows = static_cast<int64_t>(v.size());
  t.cols = 1;
  if (!v.empty()) be.upload(t.buf.data(), v.data(), v.size() * 4);
  return t;
}

Tensor upload_f32(Backend& be, const std::vector<float>& v) {
  Tensor t = Tensor::make(be, static_cast<int64_t>(v.size()), 1, DType::f32);
  if (!v.empty()) be.upload(t.buf.data(), v.data(), v.size() * 4);
  return t;
}

}  // namespace

void RoutingStats::add(const RoutingStats& o) {
  if (load.size() < o.load.size()) load.resize(o.load.size(), 0);
  for (size_t e = 0; e < o.load.size(); ++e) load[e] += o.load[e];
  tokens += o.tokens;
  compared += o.compared;
  differing += o.differing;
  entropy += o.entropy;
  aux_loss += o.aux_loss;
}

struct MoeBlock::Saved {
  int64_t M = 0;
  std::vector<float> probs;           // [M, E] router softmax (FP32)
  std::vector<int32_t> chosen;        // [M·k] expert ids
  std::vector<float> weights;         // [M·k]
  std::vector<int64_t> first, count;  // each expert's rows of X
  Tensor pos, w;                      // device [M·k]: row of (token, choice); its weight
  Tensor x, g, u, a, y;               // [M·k, H], [M·k, I] ×3, [M·k, H]
  GroupedLinearInput in_x, in_a;      // x and a, each expert's rows in turn
  std::vector<float> aux_grad;        // [E]: d(aux loss)/dP_e · (1/M), added to each token's dp
  Tensor sg, su, sa;                  // the shared expert's gate, up, SwiGLU output [M, Is]
  LinearInput in_sa;
};

MoeBlock::MoeBlock(Backend& be, const std::string& prefix, int64_t hidden, const MoeConfig& cfg)
    : be_(be),
      hidden_(hidden),
      inter_(cfg.intermediate_size),
      k_(cfg.experts_per_token),
      norm_topk_(cfg.norm_topk_prob),
      scoring_(cfg.scoring),
      n_group_(cfg.n_group),
      topk_group_(cfg.topk_group),
      scaling_(static_cast<float>(cfg.routed_scaling_factor)) {
  router_ = std::make_unique<Linear>(be, prefix + "gate", cfg.num_experts, hidden);
  if (cfg.score_correction_bias)
    bias_ = Param::make(be, prefix + "gate.e_score_correction_bias", 1, cfg.num_experts, false);
  experts_.resize(static_cast<size_t>(cfg.num_experts));
  for (int64_t e = 0; e < cfg.num_experts; ++e) {
    const std::string p = prefix + "experts." + std::to_string(e) + ".";
    auto& ex = experts_[static_cast<size_t>(e)];
    ex[0] = std::make_unique<Linear>(be, p + "gate_proj", inter_, hidden);
    ex[1] = std::make_unique<Linear>(be, p + "up_proj", inter_, hidden);
    ex[2] = std::make_unique<Linear>(be, p + "down_proj", hidden, inter_);
    for (size_t i = 0; i < 3; ++i) by_module_[i].push_back(ex[i].get());
  }
  if (cfg.shared_experts > 0) {
    const int64_t I = cfg.intermediate_size * cfg.shared_experts;
    shared_[0] = std::make_unique<Linear>(be, prefix + "shared_experts.gate_proj", I, hidden);
    shared_[1] = std::make_unique<Linear>(be, prefix + "shared_experts.up_proj", I, hidden);
    shared_[2] = std::make_unique<Linear>(be, prefix + "shared_experts.down_proj", hidden, I);
  }
}

void MoeBlock::set_aux_loss_coef(double c) {
  check(c == 0 || scoring_ == RouterScoring::softmax,
        "moe.router_aux_loss_coef: the load-balancing loss is for softmax routers (Qwen3-MoE); "
        "sigmoid routers (DeepSeek-V3) balance with their score-correction bias");
  aux_coef_ = c;
}

Linear& MoeBlock::shared(Module m) {
  check(has_shared(), "this mixture of experts has no shared expert");
  for (int i = 0; i < 3; ++i)
    if (kExpertModules[i] == m) return *shared_[static_cast<size_t>(i)];
  throw Error(std::string("the shared expert has gate, up and down, not ") + module_short(m));
}

void MoeBlock::choose(const float* p, const float* bias, int32_t* live) const {
  const int64_t E = num_experts(), k = k_;
  std::vector<int32_t> order(static_cast<size_t>(E));
  std::iota(order.begin(), order.end(), 0);
  if (scoring_ == RouterScoring::softmax) {
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    std::copy(order.begin(), order.begin() + k, live);
    return;
  }
  // Sigmoid scores: the choice reads score + bias; groups keep their topk_group best by the sum
  // of their two best; experts of the other groups are never chosen (DeepSeek's -inf mask).
  std::vector<float> c(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) c[static_cast<size_t>(e)] = p[e] + (bias ? bias[e] : 0.0f);
  std::vector<char> allowed(static_cast<size_t>(E), 1);
  if (n_group_ > 1) {
    const int64_t per = E / n_group_;
    std::vector<float> gs(static_cast<size_t>(n_group_));
    for (int64_t g = 0; g < n_group_; ++g) {
      float a = -INFINITY, b = -INFINITY;  // the group's best two
      for (int64_t e = g * per; e < (g + 1) * per; ++e) {
        const float v = c[static_cast<size_t>(e)];
        if (v > a) {
          b = a;
          a = v;
        } else if (v > b) {
          b = v;
        }
      }
      gs[static_cast<size_t>(g)] = a + b;
    }
    std::vector<int32_t> groups(static_cast<size_t>(n_group_));
    std::iota(groups.begin(), groups.end(), 0);
    std::partial_sort(groups.begin(), groups.begin() + topk_group_, groups.end(),
                      [&](int32_t a, int32_t b) {
                        return gs[static_cast<size_t>(a)] > gs[static_cast<size_t>(b)] ||
                               (gs[static_cast<size_t>(a)] == gs[static_cast<size_t>(b)] && a < b);
                      });
    std::fill(allowed.begin(), allowed.end(), 0);
    for (int64_t i = 0; i < topk_group_; ++i)
      for (int64_t e = groups[static_cast<size_t>(i)] * per;
           e < (groups[static_cast<size_t>(i)] + 1) * per; ++e)
        allowed[static_cast<size_t>(e)] = 1;
  }
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    const size_t ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    if (allowed[ua] != allowed[ub]) return allowed[ua] > allowed[ub];
    return c[ua] > c[ub] || (c[ua] == c[ub] && a < b);
  });
  std::copy(order.begin(), order.begin() + k, live);
}

double MoeBlock::choice_margin(const float* c) const {
  const int64_t E = num_experts(), k = k_;
  // The two best of c[first, last).
  auto best_two = [&](int64_t first, int64_t last) {
    float a = -INFINITY, b = -INFINITY;
    for (int64_t e = first; e < last; ++e) {
      const float v = c[e];
      if (v > a) {
        b = a;
        a = v;
      } else if (v > b) {
        b = v;
      }
    }
    return std::pair{a, b};
  };
  double margin = INFINITY;
  std::vector<char> allowed(static_cast<size_t>(E), 1);
  if (scoring_ == RouterScoring::sigmoid && n_group_ > 1 && topk_group_ < n_group_) {
    const int64_t per = E / n_group_;
    std::vector<float> gs;
    for (int64_t g = 0; g < n_group_; ++g) {
      const auto [a, b] = best_two(g * per, (g + 1) * per);
      gs.push_back(a + b);
    }
    std::vector<float> sorted = gs;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    margin = static_cast<double>(sorted[static_cast<size_t>(topk_group_ - 1)]) -
             sorted[static_cast<size_t>(topk_group_)];
    // The kept groups: the topk_group best (ties to the lower index, as choose()).
    std::vector<int32_t> groups(static_cast<size_t>(n_group_));
    std::iota(groups.begin(), groups.end(), 0);
    std::stable_sort(groups.begin(), groups.end(), [&](int32_t a, int32_t b) {
      return gs[static_cast<size_t>(a)] > gs[static_cast<size_t>(b)];
    });
    std::fill(allowed.begin(), allowed.end(), 0);
    for (int64_t i = 0; i < topk_group_; ++i)
      std::fill_n(allowed.begin() + groups[static_cast<size_t>(i)] * per, per, 1);
  }
  // The k-th best allowed expert over the (k+1)-th.
  std::vector<float> v;
  for (int64_t e = 0; e < E; ++e)
    if (allowed[static_cast<size_t>(e)]) v.push_back(c[e]);
  if (static_cast<int64_t>(v.size()) > k) {
    std::sort(v.begin(), v.end(), std::greater<>());
    margin = std::min(
        margin, static_cast<double>(v[static_cast<size_t>(k - 1)]) - v[static_cast<size_t>(k)]);
  }
  return margin;
}

MoeBlock::~MoeBlock() = default;

Linear& MoeBlock::expert(int64_t e, Module m) {
  check(e >= 0 && e < num_experts(),
        "expert " + std::to_string(e) + " of " + std::to_string(num_experts()));
  for (int i = 0; i < 3; ++i)
    if (kExpertModules[i] == m) return *experts_[static_cast<size_t>(e)][static_cast<size_t>(i)];
  throw Error(std::string("an expert has gate, up and down, not ") + module_short(m));
}

void MoeBlock::parameters(std::vector<Param*>& out) {
  out.push_back(&router_->weight());
  if (bias_) out.push_back(&*bias_);
  for (auto& ex : experts_)
    for (auto& lin : ex) out.push_back(&lin->weight());
  if (has_shared())
    for (auto& lin : shared_) out.push_back(&lin->weight());
}

void MoeBlock::clear() {
  saved_.reset();
}

void MoeBlock::forward(LinearInput& h, const Matrix& out, bool training, const int32_t* reference,
                       bool replay, std::vector<int32_t>* choices, RoutingStats* stats,
                       std::vector<char>* differing) {
  const int64_t M = h.x().rows, H = hidden_, E = num_experts(), k = k_;
  check(h.x().cols == H && out.rows == M && out.cols == H, "moe: shapes of h and out differ");
  const DType ad = out.dtype;
  auto S = std::make_unique<Saved>();
  S->M = M;

  // 1. Router logits → FP32 softmax over all experts (host).
  Tensor logits = Tensor::make(be_, M, E, ad);
  router_->forward(h, logits.m());
  std::vector<float> z(static_cast<size_t>(M * E));
  if (ad == DType::f32) {
    be_.download(z.data(), logits.buf.data(), z.size() * 4);
  } else {
    Tensor l32 = Tensor::make(be_, M, E, DType::f32);
    be_.convert(logits.m(), l32.m());
    be_.download(z.data(), l32.buf.data(), z.size() * 4);
  }
  S->probs.resize(z.size());
  if (scoring_ == RouterScoring::sigmoid) {
    for (size_t i = 0; i < z.size(); ++i) S->probs[i] = 1.0f / (1.0f + std::exp(-z[i]));
  } else {
    for (int64_t m = 0; m < M; ++m) {
      float sum = 0;
      float* p = S->probs.data() + m * E;
      softmax_exps(z.data() + m * E, E, 1.0f, p, &sum);
      for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    }
  }
  std::vector<float> bias;
  if (bias_) bias = download_floats(be_, bias_->master);
  last_scores_.clear();
  last_own_.clear();
  if (keep_scores_) {
    last_scores_ = S->probs;
    if (!bias.empty())
      for (size_t i = 0; i < last_scores_.size(); ++i) last_scores_[i] += bias[i % bias.size()];
  }

  // 2. Each token's experts: the router's choice (ties to the lower index), or the replayed
  // ones; weights from the full scores, divided by their sum when norm_topk_prob, scaled.
  S->chosen.resize(static_cast<size_t>(M * k));
  S->weights.resize(static_cast<size_t>(M * k));
  RoutingStats st;
  st.load.assign(static_cast<size_t>(E), 0);
  st.tokens = M;
  std::vector<int32_t> live(static_cast<size_t>(k));
  const bool sigmoid = scoring_ == RouterScoring::sigmoid;
  for (int64_t m = 0; m < M; ++m) {
    const float* p = S->probs.data() + m * E;
    choose(p, bias.empty() ? nullptr : bias.data(), live.data());
    if (keep_scores_) last_own_.insert(last_own_.end(), live.begin(), live.end());
    int32_t* c = S->chosen.data() + m * k;
    const bool known = reference && reference[m * k] >= 0;
    const bool replayed = known && replay;
    for (int64_t j = 0; j < k; ++j) {
      c[j] = replayed ? reference[m * k + j] : live[static_cast<size_t>(j)];
      check(c[j] >= 0 && c[j] < E, "routing replay: expert id " + std::to_string(c[j]) +
                                       " of a layer with " + std::to_string(E) + " experts");
    }
    if (known) {
      ++st.compared;
      std::vector<int32_t> a(reference + m * k, reference + (m + 1) * k), b(live);
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      if (a != b) {
        ++st.differing;
        if (differing) (*differing)[static_cast<size_t>(m)] = 1;
      }
    }
    float total = 0;
    for (int64_t j = 0; j < k; ++j) total += p[c[j]];
    if (sigmoid) total += 1e-20f;  // DeepseekV3TopkRouter's denominator
    for (int64_t j = 0; j < k; ++j) {
      float w = norm_topk_ ? p[c[j]] / total : p[c[j]];
      if (sigmoid) w *= scaling_;
      S->weights[static_cast<size_t>(m * k + j)] = w;
    }
    // The entropy of the scores as a distribution (sigmoid scores normalised to sum 1).
    double ent = 0, norm = 1;
    if (sigmoid) {
      norm = 0;
      for (int64_t e = 0; e < E; ++e) norm += p[e];
    }
    for (int64_t e = 0; e < E; ++e)
      if (p[e] > 0) {
        const double q = static_cast<double>(p[e]) / norm;
        ent -= q * std::log(q);
      }
    st.entropy += ent;
    for (int64_t j = 0; j < k; ++j) ++st.load[static_cast<size_t>(c[j])];
  }
  if (choices) *choices = S->chosen;
  // The load-balancing loss coef·E·Σ_e f_e·P_e and its gradient with respect to P_e (f fixed).
  if (aux_coef_ > 0 && M > 0) {
    S->aux_grad.assign(static_cast<size_t>(E), 0.0f);
    double loss = 0;
    for (int64_t e = 0; e < E; ++e) {
      const double f =
          static_cast<double>(st.load[static_cast<size_t>(e)]) / static_cast<double>(M * k);
      double P = 0;
      for (int64_t m = 0; m < M; ++m) P += S->probs[static_cast<size_t>(m * E + e)];
      P /= static_cast<double>(M);
      loss += aux_coef_ * static_cast<double>(E) * f * P;
      S->aux_grad[static_cast<size_t>(e)] =
          static_cast<float>(aux_coef_ * static_cast<double>(E) * f / static_cast<double>(M));
    }
    st.aux_loss = loss;
  }
  if (stats) stats->add(st);

  // 3. Dispatch: (token, choice) pairs sorted by expert, then token; row r of X is pair
  // token_of[r]; pos[m·k + j] is the pair's row.
  std::vector<int32_t> token_of(static_cast<size_t>(M * k)), pos(static_cast<size_t>(M * k));
  S->first.assign(static_cast<size_t>(E), 0);
  S->count.assign(static_cast<size_t>(E), 0);
  for (int32_t c : S->chosen) ++S->count[static_cast<size_t>(c)];
  for (int64_t e = 1; e < E; ++e)
    S->first[static_cast<size_t>(e)] =
        S->first[static_cast<size_t>(e - 1)] + S->count[static_cast<size_t>(e - 1)];
  std::vector<int64_t> next(S->first);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = next[static_cast<size_t>(S->chosen[static_cast<size_t>(m * k + j)])]++;
      token_of[static_cast<size_t>(r)] = static_cast<int32_t>(m);
      pos[static_cast<size_t>(m * k + j)] = static_cast<int32_t>(r);
    }
  S->pos = upload_ints(be_, pos);
  S->w = upload_f32(be_, S->weights);
  const Tensor tok = upload_ints(be_, token_of);
  S->x = Tensor::make(be_, M * k, H, ad);
  if (M > 0) be_.embedding_forward(tok.buf.as<const int32_t>(), h.x(), S->x.m());

  // 4. Each expert on its rows: down(silu(gate(x))·up(x)), each linear one grouped GEMM over all
  // experts (Linear::forward_grouped), the SwiGLU one call over all rows.
  S->g = Tensor::make(be_, M * k, inter_, ad);
  S->u = Tensor::make(be_, M * k, inter_, ad);
  S->a = Tensor::make(be_, M * k, inter_, ad);
  S->y = Tensor::make(be_, M * k, H, ad);
  S->in_x = GroupedLinearInput(S->x.m(), S->count, training);
  S->in_a = GroupedLinearInput(S->a.m(), S->count, training);
  if (M > 0) {
    Linear::forward_grouped(by_module_[0], S->in_x, S->g.m());
    Linear::forward_grouped(by_module_[1], S->in_x, S->u.m());
    be_.swiglu_forward(S->g.m(), S->u.m(), S->a.m());
    Linear::forward_grouped(by_module_[2], S->in_a, S->y.m());
  }

  // 5. Back to the tokens, weighted.
  if (M > 0) be_.moe_combine(S->y.m(), S->pos.buf.as<const int32_t>(), S->w.f32(), k, out);
  // 6. The shared expert, on every token, added.
  if (has_shared() && M > 0) {
    const int64_t Is = shared_[0]->out_features();
    S->sg = Tensor::make(be_, M, Is, ad);
    S->su = Tensor::make(be_, M, Is, ad);
    S->sa = Tensor::make(be_, M, Is, ad);
    shared_[0]->forward(h, S->sg.m());
    shared_[1]->forward(h, S->su.m());
    be_.swiglu_forward(S->sg.m(), S->su.m(), S->sa.m());
    S->in_sa = LinearInput(S->sa.m(), training);
    Tensor ys = Tensor::make(be_, M, H, ad);
    shared_[2]->forward(S->in_sa, ys.m());
    be_.add(out, ys.m(), out);
  }
  if (training)
    saved_ = std::move(S);
  else
    saved_.reset();
}

void MoeBlock::backward(LinearInput& h, const Matrix& dout, const Matrix& dh) {
  check(saved_ != nullptr, "moe backward: no training forward to differentiate");
  Saved& S = *saved_;
  const int64_t M = S.M, H = hidden_, E = num_experts(), k = k_;
  const DType ad = S.x.dtype;
  check(dout.rows == M && dout.cols == H && dh.rows == M && dh.cols == H,
        "moe backward: dout and dh must be [M, H] of the forward");
  if (M == 0) {
    saved_.reset();
    return;
  }
  // 1. Through the combine: each pair's output gradient, and each weight's.
  Tensor dy = Tensor::make(be_, M * k, H, ad);
  Tensor dw = Tensor::make(be_, M * k, 1, DType::f32);
  be_.moe_combine_backward(dout, S.y.m(), S.pos.buf.as<const int32_t>(), S.w.f32(), k, dy.m(),
                           dw.f32());
  // 2. Through the experts, each linear's backward one grouped call over all experts.
  Tensor dx = Tensor::make(be_, M * k, H, ad), tmp = Tensor::make(be_, M * k, H, ad);
  Tensor da = Tensor::make(be_, M * k, inter_, ad), dg = Tensor::make(be_, M * k, inter_, ad),
         du = Tensor::make(be_, M * k, inter_, ad);
  Linear::backward_grouped(by_module_[2], S.in_a, dy.m(), da.m());
  be_.swiglu_backward(da.m(), S.g.m(), S.u.m(), dg.m(), du.m());
  Linear::backward_grouped(by_module_[0], S.in_x, dg.m(), dx.m());
  Linear::backward_grouped(by_module_[1], S.in_x, du.m(), tmp.m());
  be_.add(dx.m(), tmp.m(), dx.m());
  // 3. The experts' input gradients summed back to their tokens.
  const Tensor ones = upload_f32(be_, std::vector<float>(static_cast<size_t>(M * k), 1.0f));
  be_.moe_combine(dx.m(), S.pos.buf.as<const int32_t>(), ones.f32(), k, dh);
  // 4. The router: d weights → d probabilities (through the renormalisation) → d logits
  // (through the softmax), on the host in FP32; then the router linear's backward.
  std::vector<float> dwh(static_cast<size_t>(M * k));
  be_.download(dwh.data(), dw.buf.data(), dwh.size() * 4);
  std::vector<float> dz(static_cast<size_t>(M * E), 0.0f), dp(static_cast<size_t>(E));
  const bool sigmoid = scoring_ == RouterScoring::sigmoid;
  for (int64_t m = 0; m < M; ++m) {
    const float* p = S.probs.data() + m * E;
    const int32_t* c = S.chosen.data() + m * k;
    const float* w = S.weights.data() + m * k;
    const float* g = dwh.data() + m * k;
    std::fill(dp.begin(), dp.end(), 0.0f);
    if (sigmoid) {
      // w_j = f·s_j / (Σ s + 1e-20) (or f·s_j): ds_i = (f·g_i − Σ_j g_j·w_j) / total (or f·g_i);
      // then through the sigmoid, dz = ds·s·(1 − s).
      if (norm_topk_) {
        float total = 0, gw = 0;
        for (int64_t j = 0; j < k; ++j) {
          total += p[c[j]];
          gw += g[j] * w[j];
        }
        total += 1e-20f;
        for (int64_t j = 0; j < k; ++j)
          dp[static_cast<size_t>(c[j])] += (scaling_ * g[j] - gw) / total;
      } else {
        for (int64_t j = 0; j < k; ++j) dp[static_cast<size_t>(c[j])] += scaling_ * g[j];
      }
      for (int64_t e = 0; e < E; ++e)
        dz[static_cast<size_t>(m * E + e)] = dp[static_cast<size_t>(e)] * p[e] * (1.0f - p[e]);
      continue;
    }
    if (norm_topk_) {
      float total = 0, gw = 0;
      for (int64_t j = 0; j < k; ++j) {
        total += p[c[j]];
        gw += g[j] * w[j];
      }
      for (int64_t j = 0; j < k; ++j) dp[static_cast<size_t>(c[j])] += (g[j] - gw) / total;
    } else {
      for (int64_t j = 0; j < k; ++j) dp[static_cast<size_t>(c[j])] += g[j];
    }
    if (!S.aux_grad.empty())
      for (int64_t e = 0; e < E; ++e)
        dp[static_cast<size_t>(e)] += S.aux_grad[static_cast<size_t>(e)];
    float dot = 0;
    for (int64_t e = 0; e < E; ++e) dot += dp[static_cast<size_t>(e)] * p[e];
    for (int64_t e = 0; e < E; ++e)
      dz[static_cast<size_t>(m * E + e)] = p[e] * (dp[static_cast<size_t>(e)] - dot);
  }
  Tensor dlogits = Tensor::make(be_, M, E, ad);
  if (ad == DType::f32) {
    be_.upload(dlogits.buf.data(), dz.data(), dz.size() * 4);
  } else {
    const Tensor d32 = upload_f32(be_, dz);
    be_.convert(Matrix{d32.buf.data(), M, E, DType::f32}, dlogits.m());
  }
  router_->backward(h, dlogits.m(), rows_of(tmp, 0, M));
  be_.add(dh, rows_of(tmp, 0, M), dh);
  // 5. The shared expert: its input gradient added to dh.
  if (has_shared()) {
    const int64_t Is = shared_[0]->out_features();
    Tensor dsa = Tensor::make(be_, M, Is, ad), dsg = Tensor::make(be_, M, Is, ad),
           dsu = Tensor::make(be_, M, Is, ad);
    shared_[2]->backward(S.in_sa, dout, dsa.m());
    be_.swiglu_backward(dsa.m(), S.sg.m(), S.su.m(), dsg.m(), dsu.m());
    shared_[0]->backward(h, dsg.m(), rows_of(tmp, 0, M));
    be_.add(dh, rows_of(tmp, 0, M), dh);
    shared_[1]->backward(h, dsu.m(), rows_of(tmp, 0, M));
    be_.add(dh, rows_of(tmp, 0, M), dh);
  }
  saved_.reset();
}

}  // namespace fp8rl
