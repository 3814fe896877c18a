// The mixture-of-experts MLP, forward and backward: a bias-free router linear (mlp.gate,
// [E, H]) scoring every expert in FP32, each token's k experts, and the weighted sum of their
// SwiGLU outputs (mlp.experts.{e}.{gate,up,down}_proj). Every token reaches its experts (no
// capacity limit). Two routing rules (model/config.hpp: MoeConfig):
//   Qwen3-MoE (Qwen3MoeSparseMoeBlock): softmax over all E experts → top k → their
//   probabilities divided by their sum (norm_topk_prob).
//   DeepSeekMoE (DeepseekV3MoE): sigmoid scores; the choice adds the score-correction bias
//   (mlp.gate.e_score_correction_bias, not trained: it has no gradient) and keeps the
//   topk_group of n_group groups with the largest sums of their two best scores, then the top
//   k of those (experts of other groups never chosen); weights the chosen sigmoid scores,
//   divided by their sum + 1e-20 (norm_topk_prob), × routed_scaling_factor. Beside the
//   experts a shared SwiGLU MLP (mlp.shared_experts.*) of every token, added.
//
// Dispatch: the (token, choice) pairs are sorted by expert, so each expert's rows are contiguous
// and each linear (gate, up, down) of all experts is one grouped GEMM over them
// (Linear::forward_grouped / backward_grouped: Backend::gemm_grouped, gemm_fp8_grouped and the
// weight-gradient forms; FP8 with per-expert 128x128 weight tiles and 1x128 activation blocks,
// or BF16). Experts whose linears differ in precision (a per-expert override) run one by one,
// each in its own; either way each expert's rows get the numbers of its own linear. The rows go
// back to their tokens with Backend::moe_combine. Routing (softmax, top-k) runs on the host in
// FP32, with softmax_exps (backend/sampling_rules.hpp), the same on every backend.
//
// Routing replay: given expert ids per (token, choice) — the generator's — the block routes by
// them instead of its router's top k, with weights gathered from its own full softmax and
// renormalised, so the router keeps its gradient (rollout routing replay, arXiv 2510.11370).
// An id of −1 routes that token by the router.
//
// Shapes: h, out, dh, dout [M, H]; E experts of intermediate size I; k choices per token.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/linear.hpp"

namespace fp8rl {

// What a forward's routing looked like, accumulated over forwards (telemetry).
struct RoutingStats {
  std::vector<int64_t> load;  // (token, choice) pairs per expert
  int64_t tokens = 0;         // tokens routed
  int64_t compared = 0;       // tokens with a reference routing (the generator's)
  int64_t differing = 0;      // of those, tokens whose reference experts (as a set) differ from
                              // the router's own top k
  double entropy = 0;         // Σ over tokens of the router softmax's entropy (nats)
  double aux_loss = 0;        // Σ over forwards of the load-balancing loss (when its weight > 0)
  void add(const RoutingStats& o);
};

class MoeBlock {
 public:
  // prefix: "model.layers.3.mlp." (the Hugging Face names of the router and experts follow).
  MoeBlock(Backend& be, const std::string& prefix, int64_t hidden, const MoeConfig& cfg);
  ~MoeBlock();

  int64_t num_experts() const { return static_cast<int64_t>(experts_.size()); }
  int64_t top_k() const { return k_; }
  Linear& router() { return *router_; }
  // An expert's gate, up or down.
  Linear& expert(int64_t e, Module m);
  // The shared expert's gate, up or down (has_shared() only).
  bool has_shared() const { return shared_[0] != nullptr; }
  Linear& shared(Module m);
  // The score-correction bias [1, E] (DeepSeekMoE), or null.
  Param* score_bias() { return bias_ ? &*bias_ : nullptr; }
  // Parameters in Hugging Face order: the router, its score-correction bias, each expert's
  // gate, up, down, then the shared expert's.
  void parameters(std::vector<Param*>& out);

  // The load-balancing loss's weight (0: none): coef·E·Σ_e f_e·P_e over a forward's tokens, f_e
  // the share of choices that went to e, P_e the mean router probability of e (Switch
  // Transformer); its gradient reaches the router through P. Softmax routers only (throws for
  // sigmoid scores, which DeepSeek balances with the score-correction bias instead).
  void set_aux_loss_coef(double c);

  // out [M, H] (written) = the block of h [M, H]. reference: [M·k] expert ids another forward
  // chose (the generator's; −1 for a token it did not route) or null; with replay the block
  // routes by them, else it only compares. choices (may be null) receives the ids used, [M·k],
  // each token's by descending weight. training keeps what backward() needs. stats (may be
  // null) accumulates the routing; differing[m] (when given, size M) is set for tokens whose
  // reference experts differ (as a set) from the router's own top k.
  void forward(LinearInput& h, const Matrix& out, bool training, const int32_t* reference,
               bool replay, std::vector<int32_t>* choices, RoutingStats* stats,
               std::vector<char>* differing);
  // A token's k experts (live, by descending score; ties to the lower index) from its scores p
  // [E] (softmax probabilities or sigmoid scores) and, for sigmoid scores, the
  // score-correction bias [E] (or null): the router's own choice.
  void choose(const float* p, const float* bias, int32_t* live) const;
  // While set, forward keeps on the host the scores its choices read, [M, E]: the softmax
  // probabilities, or the sigmoid scores plus the score-correction bias (off by default: at a
  // training micro-batch that is M·E floats per layer).
  // With them, the router's own top k of each token, [M·k] (also under replay, which routes by
  // the reference instead).
  void keep_choice_scores(bool on) { keep_scores_ = on; }
  const std::vector<float>& last_choice_scores() const { return last_scores_; }
  const std::vector<int32_t>& last_own_choices() const { return last_own_; }
  // How close a token's choice is to another one: the smallest gap at a decision choose()
  // makes from its scores c [E] (last_choice_scores' rows) — the k-th chosen expert over the
  // best unchosen one of the kept groups and, with groups, the last kept group over the best
  // dropped one by the sum of their two best. A choice that differs between two computations
  // of the same scores must have had a margin within their difference.
  double choice_margin(const float* c) const;
  // dh [M, H] (written) = the input gradient for dout [M, H]; the router's and experts' weight
  // gradients accumulate. Needs a training forward first, and h as it gave it.
  void backward(LinearInput& h, const Matrix& dout, const Matrix& dh);
  // Releases what forward kept.
  void clear();

 private:
  struct Saved;

  Backend& be_;
  int64_t hidden_, inter_, k_;
  bool norm_topk_;
  RouterScoring scoring_;
  int64_t n_group_, topk_group_;
  float scaling_;
  double aux_coef_ = 0;
  std::unique_ptr<Linear> router_;
  std::optional<Param> bias_;
  std::vector<std::array<std::unique_ptr<Linear>, 3>> experts_;  // gate, up, down
  std::array<std::vector<Linear*>, 3> by_module_;                // every expert's gate, up, down
  std::array<std::unique_ptr<Linear>, 3> shared_;                // the shared expert's
  std::unique_ptr<Saved> saved_;
  bool keep_scores_ = false;
  std::vector<float> last_scores_;
  std::vector<int32_t> last_own_;
};

}  // namespace fp8rl
