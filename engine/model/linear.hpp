// A linear layer y = x·Wᵀ with W [out, in], in fp32, bf16 or block-scaled fp8 (the recipe:
// weights 128x128 tiles, activations and gradients 1x128, FP32 scales; fprop, dgrad and wgrad
// all in FP8). FP32 master weights; compute copies are refreshed after every optimizer step.
#pragma once

#include <initializer_list>
#include <optional>
#include <vector>

#include "model/config.hpp"
#include "model/tensor.hpp"

namespace fp8rl {

// Receives the FP8 quantizations of a model's linears (weights after each refresh, activations
// and gradients during forward/backward) for telemetry: scale histograms, saturation, error.
class QuantObserver {
 public:
  virtual ~QuantObserver() = default;
  // Whether observe() wants quantizations now (their scales: the telemetry's histograms).
  virtual bool active() const { return true; }
  // kind: "weight", "activation" or "gradient"; q lives in backend memory. Its statistics go to
  // stats_sum(), not here: read on the host one by one they would cost a synchronisation each.
  virtual void observe(int64_t layer, Module module, const char* kind, const Fp8Matrix& q) = 0;
  // Where the statistics of a linear's quantizations are summed in backend memory
  // (QuantOptions::stats_sum, no synchronisation), or null for none. kind: "weight",
  // "activation" or "gradient".
  virtual QuantStatsSum* stats_sum(int64_t layer, Module module, const char* kind) {
    (void)layer;
    (void)module;
    (void)kind;
    return nullptr;
  }
};

// An activation X [M, K] feeding one or more linears. Its FP8 operands (X along K for fprop,
// Xᵀ along M for wgrad) are made once, by the first FP8 consumer, and shared (q/k/v share one
// input, gate/up another). A forward-only input (generation, the log-prob pass) makes only X
// along K: the transposed operand is for backward.
class LinearInput {
 public:
  LinearInput() = default;
  explicit LinearInput(Matrix x, bool for_backward = true) : x_(x), for_backward_(for_backward) {}
  const Matrix& x() const { return x_; }
  // The FP8 operands of x, quantized on first use. transposed() needs for_backward.
  const Fp8Tensor& along(Backend& be, const QuantOptions& opt);
  const Fp8Tensor& transposed(Backend& be, const QuantOptions& opt);
  // Whether a linear should run on this input through Backend::linear_fp8 (quantization fused
  // into its GEMM): a forward-only input not quantized yet, of at most the backend's
  // linear_fp8_max_rows rows (decode steps).
  bool fuses_quantization(const Backend& be) const {
    return !for_backward_ && !along_ && x_.rows <= be.linear_fp8_max_rows();
  }
  // Quantizes with statistics (first call only) and reports them once to the observer.
  void observe(Backend& be, const QuantOptions& opt, QuantObserver& o, int64_t layer, Module m);

  // For the op that produces x and quantizes it in the same pass (Backend::rmsnorm_forward_fp8,
  // swiglu_forward_fp8): the operands' storage it must fill, as quantize() would with opt (the
  // transposed codes null for a forward-only input). From then on they count as made with opt.
  // x's data may be null when that op does not write x: then only FP8 linears may read this
  // input (a BF16 or fused-decode read throws).
  Fp8Operands produce(Backend& be, const QuantOptions& opt);

 private:
  void quantize(Backend& be, const QuantOptions& opt, QuantStats* stats = nullptr);
  Matrix x_;
  bool for_backward_ = true;
  std::optional<Fp8Tensor> along_, transposed_;
  // The statistics sum the operands were made with: an observer summing into the same one
  // needs no second quantization.
  QuantStatsSum* made_sum_ = nullptr;
  bool observed_ = false;
};

// The FP8 operands of a gradient dY [M, N] a linear's backward reads: dY 1x128 along N (dgrad)
// and dYᵀ 1x128 along M (wgrad).
struct Fp8Gradient {
  Fp8Tensor along, transposed;
  static Fp8Gradient make(Backend& be, int64_t M, int64_t N, Fp8Format f);
  Fp8Operands operands() const { return {along.q, transposed.q}; }
};

class Linear;

// The first of `readers` (null entries skipped) that takes its input from the producer
// (Linear::takes_produced), or null: the producer of x quantizes with its input_options().
Linear* produced_reader(std::initializer_list<Linear*> readers, const LinearInput& x);
// Whether every one of `readers` takes x from the producer: then x itself need not be written.
bool all_take_produced(std::initializer_list<Linear*> readers, const LinearInput& x);

// An expert-sorted activation X [ΣM_e, K] feeding one linear of every expert of a
// mixture-of-experts layer (x feeds the experts' gate and up, the SwiGLU output their down):
// expert e's rows[e] rows follow expert e − 1's (the contiguous layout of the grouped GEMMs,
// Backend::gemm_grouped). The grouped form of LinearInput: its FP8 operands are made once, by
// the first FP8 consumer, and shared — X along K for all experts in the grouped 1x128 layout of
// Backend::gemm_fp8_grouped and, for backward, each expert's X_eᵀ along M_e.
//
// How they are quantized. Along K, 1x128 blocks lie within a row, so one quantize() of all rows
// gives every expert's codes and scales exactly as a quantization of its rows alone; a
// forward-only input is quantized that way (one call and one group_scales). An input for
// backward also needs X_eᵀ quantized along M_e, whose 128-blocks must not span two experts: it
// is quantized per expert (quantize_with_transpose of its rows, writing X_e along K into its
// place in the grouped layout), as the linears did one by one. Padding each expert's rows to a
// multiple of 128 (DeepGEMM's contiguous layout) would let one call make both operands, but it
// needs a padded copy of X and of every expert-sorted activation, and the padding rows would
// enter the quantization statistics as degenerate blocks; the per-expert calls keep the
// numbers and the telemetry of the per-expert path bit for bit.
class GroupedLinearInput {
 public:
  GroupedLinearInput() = default;
  GroupedLinearInput(Matrix x, std::vector<int64_t> rows, bool for_backward = true);
  const Matrix& x() const { return x_; }
  const std::vector<int64_t>& rows() const { return rows_; }
  // Expert e's rows as a LinearInput, for linears that run one expert at a time.
  LinearInput& expert(int64_t e);
  // The FP8 operands, quantized on first use: X along K [ΣM_e, K] in the grouped layout, and
  // per expert X_eᵀ [K, M_e] along M_e (for_backward only; empty for experts without rows).
  const Fp8Tensor& along(Backend& be, const QuantOptions& opt);
  const std::vector<Fp8Tensor>& transposed(Backend& be, const QuantOptions& opt);
  // Whether FP8 linears should run one expert at a time through Backend::linear_fp8 (decode
  // steps: a forward-only input of at most linear_fp8_max_rows rows, not quantized yet).
  bool fuses_quantization(const Backend& be) const {
    return !for_backward_ && !along_ && x_.rows <= be.linear_fp8_max_rows();
  }
  // Quantizes (first call only) and reports X along K once to the observer.
  void observe(Backend& be, const QuantOptions& opt, QuantObserver& o, int64_t layer, Module m);

 private:
  void quantize(Backend& be, const QuantOptions& opt);
  Matrix x_;
  std::vector<int64_t> rows_;
  bool for_backward_ = true;
  std::optional<Fp8Tensor> along_;
  std::vector<Fp8Tensor> transposed_;
  std::vector<LinearInput> experts_;
  std::vector<char> expert_made_;
  bool observed_ = false;
};

class Linear {
 public:
  // An owned weight [out, in] named `name` (Hugging Face name without ".weight").
  Linear(Backend& be, std::string name, int64_t out, int64_t in);
  // A linear reading another layer's parameter (tied lm_head).
  Linear(Backend& be, Param* shared);

  Param& weight() { return *w_; }
  const Param& weight() const { return *w_; }
  int64_t out_features() const { return w_->master.rows; }
  int64_t in_features() const { return w_->master.cols; }
  Precision precision() const { return precision_; }

  // Reports this linear's quantizations to `o` (null: none) as `layer`/`module`.
  void set_observer(QuantObserver* o, int64_t layer, Module module) {
    observer_ = o;
    layer_ = layer;
    module_ = module;
  }

  // Chooses the precision and remakes the compute copies from the masters (or from the tiles
  // given by set_fp8_weight, which a change of precision keeps: the masters are unchanged).
  void set_precision(Precision p, const QuantOptions& opt);
  // The master weights changed (an optimizer step): drops tiles given by set_fp8_weight and
  // recomputes the compute copies (bf16 W and Wᵀ, or FP8 W tiles and their transpose) from the
  // masters (an fp8 weight's quantization is reported to the observer, when one is active).
  void refresh();
  // The weight scales of the last fp8 refresh (1/s per 128x128 tile), for scale histograms: the
  // FP8 tiles of W the GEMMs read (null when the precision has none).
  const Fp8Matrix* fp8_weight() const { return fp8_w_.codes ? &fp8_w_ : nullptr; }
  // The compute copies the GEMMs read, for the layer audit: FP8 tiles of Wᵀ (dgrad), and the
  // BF16 copy of W; null when the precision has none.
  const Fp8Tensor* fp8_weight_transposed() const { return fp8_wt_ ? &*fp8_wt_ : nullptr; }
  const Matrix* bf16_weight() const { return bf16_w_.data ? &bf16_w_ : nullptr; }
  // Keeps the compute copy of W (a bf16 [out, in] at bf16_at, or FP8 128x128 tiles [out, in] at
  // fp8_at, for the linear's precision) in storage its caller owns — rows of a larger buffer
  // (FusedLinears: its members' copies one above the other) — and remakes it there; the copy of
  // the precision not held is ignored; null data in both: the linear owns its copies again.
  // Until the precision changes: then it owns them again too. The storage must outlive its use
  // by this linear.
  void place_weight(const Matrix& bf16_at, const Fp8Matrix& fp8_at);
  const QuantOptions& quant_options() const { return qopt_; }

  // Gives this linear FP8 tiles of its weight, read from a checkpoint whose dequantization the
  // masters hold: codes [out, in] row-major and scale_inv in the 128x128-tile layout of
  // fp8/format.hpp (scale_count floats), host memory. While the masters stay as loaded (until
  // the next refresh()), an fp8 linear of the same format computes with exactly these tiles
  // (and their tile-wise transpose for dgrad) instead of a re-quantization of the masters,
  // which could differ in the last bit of a scale. Kept whatever the precision, for export.
  // scale_dtype (f32 or bf16) records how the checkpoint stored the scales, so that an export
  // writes them back unchanged (the values are held in FP32 either way).
  void set_fp8_weight(const std::vector<uint8_t>& codes, const std::vector<float>& scale_inv,
                      Fp8Format format, DType scale_dtype = DType::f32);
  // The tiles given by set_fp8_weight while they are current (null after refresh()).
  const Fp8Tensor* given_fp8_weight() const { return given_ ? &*given_ : nullptr; }
  DType given_scale_dtype() const { return given_scale_dtype_; }

  // y [M, out] = x·Wᵀ; y may be f32 or bf16 (fp8 and bf16 GEMMs accumulate in FP32).
  void forward(LinearInput& x, const Matrix& y);
  // The same computation with another weight of this linear's precision and input width: a
  // bf16 [N, in] (bf16) or FP8 128x128 tiles [N, in] (fp8); y [M, N]. For FusedLinears, whose
  // weight is its members' compute copies one above the other.
  void forward_with(LinearInput& x, const Matrix* bf16_w, const Fp8Matrix* fp8_w, const Matrix& y);
  // Whether an observer wants this linear's quantizations now or sums their statistics: then
  // its input must go through forward() (FusedLinears falls back to it).
  bool observed() const {
    return observing() || (observer_ && observer_->stats_sum(layer_, module_, "activation"));
  }
  // --- The experts of a mixture-of-experts layer: one linear (gate, up or down) of every expert
  // (experts[e], all of one shape) on an expert-sorted input. When the experts share a precision
  // (and, for fp8, a format and scale rule: groupable) each pass is one grouped GEMM; otherwise
  // (and for decode steps, see GroupedLinearInput::fuses_quantization) the experts run one by one
  // through forward/backward. Either way each expert's rows get what forward/backward gives them.
  static bool groupable(const std::vector<Linear*>& experts);
  // y [ΣM_e, out]: expert e's rows = x_e·W_eᵀ.
  static void forward_grouped(const std::vector<Linear*>& experts, GroupedLinearInput& x,
                              const Matrix& y);
  // dx [ΣM_e, in]: expert e's rows = dy_e·W_e (written; skipped when dx.data is null), and each
  // W_e.grad += dy_eᵀ·x_e. dy [ΣM_e, out]; FP8 statistics and observations of dy as backward's.
  static void backward_grouped(const std::vector<Linear*>& experts, GroupedLinearInput& x,
                               const Matrix& dy, const Matrix& dx);

  // dx [M, in] = dy·W (written; skipped when dx.data is null) and W.grad += dyᵀ·x.
  // dy_stats, when given, receives the quantization statistics of dy (fp8).
  void backward(LinearInput& x, const Matrix& dy, const Matrix& dx, QuantStats* dy_stats = nullptr);
  // The same for an fp8 linear whose gradient's operands dy's producer made with
  // grad_options() (Backend::swiglu_backward_fp8).
  void backward(LinearInput& x, const Fp8Gradient& dy, const Matrix& dx);

  // Whether this linear reads x through FP8 operands made by x's producer (LinearInput::produce):
  // fp8, and x not one it quantizes inside its own GEMM (decode rows, Backend::linear_fp8).
  bool takes_produced(const LinearInput& x) const;
  // The options this linear quantizes its input / its output gradient with (the observer's
  // statistics sums included): what a producer making those operands must use.
  QuantOptions input_options() const;
  QuantOptions grad_options() const;

 private:
  Backend& be_;
  std::optional<Param> owned_;
  Param* w_ = nullptr;
  Precision precision_ = Precision::fp32;
  QuantOptions qopt_;
  // Compute copies: bf16 W and fp8 tiles of W (views of their own storage below or of storage
  // given by place_weight); Wᵀ for dgrad (bf16, or f32 for the fp32 reference) and fp8 tiles of
  // Wᵀ.
  Matrix bf16_w_{};
  Fp8Matrix fp8_w_{};
  std::optional<Tensor> bf16_own_, wt_;
  std::optional<Fp8Tensor> fp8_own_, fp8_wt_;
  Matrix bf16_at_{};  // place_weight's storage (null data: none)
  Fp8Matrix fp8_at_{};
  std::optional<Fp8Tensor> given_;  // tiles from a checkpoint (set_fp8_weight)
  DType given_scale_dtype_ = DType::f32;

  // Forgets the copies of W (bf16 and FP8 views, and the storage they own) so that rebuild()
  // makes them anew, where bf16_at_ / fp8_at_ say.
  void drop_weight_copies();
  // Makes the compute copies for the current precision (from given_ when it serves).
  void rebuild();
  // The observer when it wants quantizations now (null otherwise).
  QuantObserver* observing() const {
    return observer_ && observer_->active() ? observer_ : nullptr;
  }
  QuantObserver* observer_ = nullptr;
  int64_t layer_ = 0;
  Module module_ = Module::q;
};

}  // namespace fp8rl
