// The decoder of every model family (model/family.hpp: Qwen3, Llama 3.1, Qwen3-MoE), run from
// the ModelConfig's fields: token embedding; per layer RMSNorm → attention (q, k, v
// projections; per-head RMSNorm on q and k when qk_norm (Qwen3); RoPE, with Llama 3's scaling
// when configured; grouped-query causal attention; o projection) → residual → RMSNorm → MLP: a
// dense SwiGLU (gate, up, down), or in a layer with experts a router and its experts
// (model/moe.hpp) → residual; final RMSNorm; lm_head (tied or untied).
//
// Precision: each linear of each layer fp32, bf16 or fp8 (PrecisionMap). Embeddings, norms,
// attention, non-linearities and lm_head run in BF16 (FP32 arithmetic, BF16 activations), or all
// in FP32 when the whole map is fp32 (the CPU reference). Parameters are FP32 masters.
//
// Shapes: B sequences × T tokens (M = B·T rows), H hidden, V vocabulary, Hq/Hkv heads of D.
#pragma once

#include <memory>
#include <vector>

#include "model/config.hpp"
#include "model/kv_cache.hpp"
#include "model/linear.hpp"
#include "model/moe.hpp"

namespace fp8rl {

struct ForwardResult {
  std::vector<float> logp;     // [B·T]: log p(targets[m] | tokens up to m), at 1/temperature
  std::vector<float> entropy;  // [B·T] when requested
};

// How many layers stack their projections in generation (DecoderModel::stacked_layers).
struct StackedLayers {
  int64_t qkv = 0, gate_up = 0;
};

class DecoderModel {
 public:
  // Random initialisation (normal(0, init_std) matrices, unit norms), seeded.
  DecoderModel(Backend& be, const ModelConfig& cfg, const PrecisionMap& precision, uint64_t seed,
               double init_std = 0.02, QuantOptions qopt = {});

  const ModelConfig& config() const { return cfg_; }
  const PrecisionMap& precision() const { return precision_; }
  // The FP8 quantizer settings of the linears (format, power-of-two scales).
  const QuantOptions& quant_options() const { return qopt_; }
  Backend& backend() { return be_; }
  DType activation_dtype() const { return act_dtype_; }

  // Changes layer precisions (the next forward uses them); re-makes compute copies (FP8 tiles
  // given by a checkpoint stay in use: see Linear::set_fp8_weight).
  void set_precision(const PrecisionMap& p);
  // The lm_head's precision: bf16 (the recipe: BF16 weights and activations, FP32
  // accumulation), fp32 (FP32 weights and the final norm's output widened to FP32: logits and
  // log-softmax without BF16 rounding of the head) or fp8 (block-scaled, as the decoder
  // linears; for sensitivity measurements). An all-fp32 map runs it in fp32 whatever is set.
  void set_lm_head_precision(Precision p);
  Precision lm_head_precision() const { return lm_head_->precision(); }
  // What set_lm_head_precision was last given (lm_head_precision() is what runs: fp32 under an
  // all-fp32 map whatever is set); restoring it and then the map restores the head.
  Precision lm_head_setting() const { return lm_head_wanted_; }

  // Every parameter once, in Hugging Face order (tied lm_head not repeated).
  std::vector<Param*> parameters();
  Param* find(const std::string& name);

  // Runs B sequences of T tokens (ids, row-major [B, T]); position t of sequence b predicts
  // targets[b·T + t]. training = true keeps the activations for backward().
  ForwardResult forward(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets,
                        int64_t B, int64_t T, float inv_temperature, bool training,
                        bool want_entropy = false);
  // Accumulates parameter gradients of Σ dlogp[m]·logp[m] for the last training forward.
  void backward(const std::vector<float>& dlogp);
  // Releases the saved activations.
  void clear_activations();

  // Full logits [B·T, V] (f32, host) of a forward without targets (for tests and scoring).
  std::vector<float> logits(const std::vector<int32_t>& ids, int64_t B, int64_t T);

  // Generation step over a KV cache: row i is token tokens[i] of the sequence in cache slot
  // slots[i] at position positions[i]; its K/V are written to the cache and it attends to
  // positions 0 … positions[i] of its slot (a prompt's rows may come together: prefill).
  // Returns logits [output_rows.size(), V] (f32, host) of the listed rows.
  std::vector<float> forward_cached(const std::vector<int32_t>& tokens,
                                    const std::vector<int32_t>& slots,
                                    const std::vector<int32_t>& positions,
                                    const std::vector<int32_t>& output_rows, KvCache& cache);
  // The same step, leaving the logits [output_rows.size(), V] (f32) in backend memory (for
  // sampling on the device: Backend::sample_tokens); an empty tensor when no row is listed.
  Tensor forward_cached_device(const std::vector<int32_t>& tokens,
                               const std::vector<int32_t>& slots,
                               const std::vector<int32_t>& positions,
                               const std::vector<int32_t>& output_rows, KvCache& cache);

  // The inputs of a generation step already in backend memory (int32): n rows of tokens, cache
  // slots (slot_ids), positions and attention lengths (position + 1), and r output rows (each < n).
  struct CachedStepInputs {
    const int32_t* tokens = nullptr;
    const int32_t* slot_ids = nullptr;
    const int32_t* positions = nullptr;
    const int32_t* lengths = nullptr;
    const int32_t* output_rows = nullptr;
    int64_t n = 0, r = 0;
  };
  // forward_cached_device on inputs in backend memory, with no host work: no checks (the caller
  // vouches for ids, slots and positions, as forward_cached_device checks them), no uploads and
  // no synchronisation, so it can be recorded as a graph (Backend::capture) and replayed on new
  // inputs. Returns logits [r, V] (f32) in backend memory; r = 0 gives an empty tensor.
  Tensor forward_cached_step(const CachedStepInputs& in, KvCache& cache);

  // --- Mixture of experts (model/moe.hpp)
  bool has_experts() const;
  // Layer l's experts and router, or null for a dense layer.
  MoeBlock* moe(int64_t layer);
  // Expert ids per (row, choice) for each layer: [layer][rows·k], empty for dense layers; −1 for
  // a row nobody routed.
  using Routing = std::vector<std::vector<int32_t>>;
  // The routing another forward chose for the next forwards' rows (the generator's, for the
  // trainer): compared with the routers' own choices (routing telemetry) and, with replay,
  // routed by. null: none.
  void set_routing_reference(const Routing* reference, bool replay);
  // The expert ids the last forward or generation step used, per layer ([rows·k]).
  const Routing& last_routing() const { return last_routing_; }
  // What the training forwards' routing looked like since the last take, per layer (empty
  // stats for dense layers), and how many tokens were routed otherwise than the reference in
  // at least one layer.
  struct RoutingTelemetry {
    std::vector<RoutingStats> stats;
    int64_t tokens = 0, tokens_differing = 0;
  };
  void collect_routing(bool on) { collect_routing_ = on; }
  RoutingTelemetry take_routing_telemetry();
  // The load-balancing loss's weight in every layer with experts (0: off, the RL default).
  void set_router_aux_loss_coef(double c);

  // While set, every forward records per layer the amax of q, k and v after RoPE and QK-norm
  // (one entry per forward call = micro-batch) for the FP8 KV-cache scales. They stay in
  // backend memory until the calibrator is replaced or unset: then one read per forward
  // hands them to it (the host does not wait on the device three times a layer).
  void set_kv_calibrator(KvScaleCalibrator* c);
  // Forgets the amax recorded for the current calibrator (after a failed forward).
  void drop_kv_amax() { pending_amax_.clear(); }
  // Reports FP8 quantizations (weights at refresh, activations and gradients while set).
  void set_quant_observer(QuantObserver* o);

  void zero_grad();
  // Re-makes the weights only generation reads: latent attention's absorbed decode weights
  // from the weights kv_b computes with, and the stacked q/k/v copies (FusedLinears) from the
  // projections' compute copies (refresh() and set_precision() do it; call it after giving a
  // linear checkpoint tiles). A stacked copy left stale is not read: q, k and v then run alone.
  void refresh_decode_weights();
  // Layers whose q, k and v, and whose gate and up, run as one GEMM each in generation's steps
  // (FusedLinears::stacked).
  StackedLayers stacked_layers() const;
  // Re-makes every compute copy from the master weights (after an optimizer step; FP8 tiles
  // given by a checkpoint are dropped). FP8 weights are reported to the quant observer.
  void refresh();

  // The modules of a layer reading one input: q, k, v, or latent attention's q or q_a and kv_a
  // (the normed hidden state), gate, up (the second norm's output); o, down, q_b and kv_b read
  // their own. The input's FP8 operands are made once,
  // by the first of them in FP8, so its quantization statistics are reported for that one.
  static std::vector<Module> input_sharers(Module m);

  // For demonstrations of FP8 failing (outliers.linears): gives dense layer `layer` a dead MLP
  // channel per 128 columns of down_proj — the channel's gate_proj and up_proj rows set to
  // zero, so it carries silu(0)·0 = 0 whatever the input and its weights never receive a
  // gradient — whose down_proj column is set to `scale` × down_proj's largest weight (with the
  // column's signs). BF16 computes what it computed before (the column multiplies zeros); FP8
  // puts the column into the amax of its 128×128 tiles, so the other weights of those tiles
  // flush to zero or keep a bit or two. Returns the channels. Throws for a layer with experts.
  std::vector<int64_t> inject_outlier_channels(int64_t layer, double scale);

  Linear& linear(int64_t layer, Module m);
  // Any decoder linear: a dense module, a router or an expert's module.
  Linear& linear(const LinearSlot& s);
  // Every decoder linear of this model, in the precision map's order.
  std::vector<LinearSlot> linear_slots() const { return precision_.linears(); }
  // Hugging Face name of a linear's weight ("model.layers.3.mlp.experts.5.up_proj.weight",
  // "model.layers.3.mlp.gate.weight" for a router).
  static std::string weight_name(const LinearSlot& s);
  // Hugging Face name of a decoder linear's weight, e.g. "model.layers.3.mlp.down_proj.weight".
  static std::string linear_weight_name(int64_t layer, Module m);

  struct Layer;  // defined in qwen3.cpp
  ~DecoderModel();

 private:
  struct Saved;
  Matrix norm_weight(Param& p);  // the weight as the norm reads it (bf16 copy or f32 master)
  Tensor run(const std::vector<int32_t>& ids, int64_t B, int64_t T, bool training);

  Backend& be_;
  ModelConfig cfg_;
  PrecisionMap precision_;
  QuantOptions qopt_;
  DType act_dtype_;
  Param embed_;
  std::vector<std::unique_ptr<Layer>> layers_;
  Param final_norm_;
  std::unique_ptr<Linear> lm_head_;
  Precision lm_head_wanted_ = Precision::bf16;  // set_lm_head_precision (fp32 maps: fp32)
  // The lm_head's input: the final norm's output, widened to FP32 for an fp32 head on bf16
  // activations (training keeps it for backward in Saved).
  LinearInput head_input(const Tensor& xf, Tensor& widened, bool training);
  std::vector<std::pair<Param*, Tensor>> bf16_copies_;  // embedding and norm weights
  std::unique_ptr<Saved> saved_;
  KvScaleCalibrator* calibrator_ = nullptr;
  std::vector<Buffer> pending_amax_;  // per forward since set_kv_calibrator: [layers][q, k, v]
  // Routing of the layers with experts.
  void begin_routing(int64_t rows);
  void moe_forward(int64_t layer, LinearInput& in, const Matrix& out, bool training,
                   std::vector<char>* differing);
  const Routing* reference_ = nullptr;
  bool replay_ = false;
  Routing last_routing_;
  int64_t routing_rows_ = 0;
  bool collect_routing_ = false;
  RoutingTelemetry routing_telemetry_;
};

}  // namespace fp8rl
