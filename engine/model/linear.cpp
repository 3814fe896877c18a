#include "model/linear.hpp"

#include "core/error.hpp"

namespace fp8rl {

void LinearInput::quantize(Backend& be, const QuantOptions& opt, QuantStats* stats) {
  if (along_) return;
  check(x_.data || x_.rows == 0 || x_.cols == 0,
        "linear input: quantizing an input its producer did not write");
  made_sum_ = opt.stats_sum;
  along_ = Fp8Tensor::make(be, x_.rows, x_.cols, ScaleBlock::row1x128, opt.format);
  if (!for_backward_) {
    be.quantize(x_, along_->q, opt, stats);
    return;
  }
  transposed_ = Fp8Tensor::make(be, x_.cols, x_.rows, ScaleBlock::row1x128, opt.format);
  be.quantize_with_transpose(x_, along_->q, transposed_->q, opt, stats, nullptr);
}

void LinearInput::observe(Backend& be, const QuantOptions& opt, QuantObserver& o, int64_t layer,
                          Module m) {
  if (observed_) return;
  observed_ = true;
  if (along_ && made_sum_ != opt.stats_sum) {
    // Already quantized without the observer: measure on a fresh quantization (opt carries
    // the observer's sum).
    Fp8Tensor a = Fp8Tensor::make(be, x_.rows, x_.cols, ScaleBlock::row1x128, opt.format);
    be.quantize(x_, a.q, opt, nullptr);
    o.observe(layer, m, "activation", a.q);
    return;
  }
  quantize(be, opt);
  o.observe(layer, m, "activation", along_->q);
}

Fp8Operands LinearInput::produce(Backend& be, const QuantOptions& opt) {
  check(!along_, "linear input: its FP8 operands were already made");
  made_sum_ = opt.stats_sum;
  along_ = Fp8Tensor::make(be, x_.rows, x_.cols, ScaleBlock::row1x128, opt.format);
  Fp8Operands out{along_->q, {}};
  if (for_backward_) {
    transposed_ = Fp8Tensor::make(be, x_.cols, x_.rows, ScaleBlock::row1x128, opt.format);
    out.transposed = transposed_->q;
  }
  return out;
}

Fp8Gradient Fp8Gradient::make(Backend& be, int64_t M, int64_t N, Fp8Format f) {
  return {Fp8Tensor::make(be, M, N, ScaleBlock::row1x128, f),
          Fp8Tensor::make(be, N, M, ScaleBlock::row1x128, f)};
}

Linear* produced_reader(std::initializer_list<Linear*> readers, const LinearInput& x) {
  for (Linear* r : readers)
    if (r && r->takes_produced(x)) return r;
  return nullptr;
}

bool all_take_produced(std::initializer_list<Linear*> readers, const LinearInput& x) {
  for (Linear* r : readers)
    if (!r || !r->takes_produced(x)) return false;
  return readers.size() > 0;
}

const Fp8Tensor& LinearInput::along(Backend& be, const QuantOptions& opt) {
  quantize(be, opt);
  return *along_;
}

const Fp8Tensor& LinearInput::transposed(Backend& be, const QuantOptions& opt) {
  check(for_backward_, "linear: backward through an input made for forward only");
  quantize(be, opt);
  return *transposed_;
}

Linear::Linear(Backend& be, std::string name, int64_t out, int64_t in) : be_(be) {
  owned_ = Param::make(be, std::move(name) + ".weight", out, in, true);
  w_ = &*owned_;
}

Linear::Linear(Backend& be, Param* shared) : be_(be), w_(shared) {}

void Linear::set_precision(Precision p, const QuantOptions& opt) {
  precision_ = p;
  qopt_ = opt;
  drop_weight_copies();
  wt_.reset();
  fp8_wt_.reset();
  bf16_at_ = Matrix{};
  fp8_at_ = Fp8Matrix{};
  rebuild();
}

void Linear::drop_weight_copies() {
  bf16_w_ = Matrix{};
  fp8_w_ = Fp8Matrix{};
  bf16_own_.reset();
  fp8_own_.reset();
}

void Linear::place_weight(const Matrix& bf16_at, const Fp8Matrix& fp8_at) {
  const int64_t N = out_features(), K = in_features();
  check(!bf16_at.data || (bf16_at.rows == N && bf16_at.cols == K && bf16_at.dtype == DType::bf16),
        "linear " + w_->name + ": placed bf16 storage is not [" + std::to_string(N) + ", " +
            std::to_string(K) + "] bf16");
  check(!fp8_at.codes || (fp8_at.rows == N && fp8_at.cols == K &&
                          fp8_at.block == ScaleBlock::tile128x128 && fp8_at.format == qopt_.format),
        "linear " + w_->name + ": placed FP8 storage is not [" + std::to_string(N) + ", " +
            std::to_string(K) + "] 128x128 tiles in its format");
  bf16_at_ = bf16_at;
  fp8_at_ = fp8_at;
  drop_weight_copies();  // the copies move there: remade in place below
  rebuild();
}

void Linear::set_fp8_weight(const std::vector<uint8_t>& codes, const std::vector<float>& scale_inv,
                            Fp8Format format, DType scale_dtype) {
  const int64_t N = out_features(), K = in_features();
  check(static_cast<int64_t>(codes.size()) == N * K &&
            static_cast<int64_t>(scale_inv.size()) == scale_count(ScaleBlock::tile128x128, N, K),
        "linear " + w_->name + ": FP8 tiles of the wrong size for [" + std::to_string(N) + ", " +
            std::to_string(K) + "]");
  check(scale_dtype == DType::f32 || scale_dtype == DType::bf16,
        "linear " + w_->name + ": FP8 tile scales are stored as f32 or bf16");
  given_ = Fp8Tensor::make(be_, N, K, ScaleBlock::tile128x128, format);
  given_scale_dtype_ = scale_dtype;
  be_.upload(given_->q.codes, codes.data(), codes.size());
  be_.upload(given_->q.scale_inv, scale_inv.data(), scale_inv.size() * 4);
  if (precision_ == Precision::fp8) rebuild();
}

void Linear::refresh() {
  given_.reset();
  rebuild();
}

void Linear::rebuild() {
  const int64_t N = out_features(), K = in_features();
  if (precision_ == Precision::fp32) {
    // dgrad's Wᵀ, made once per weight update rather than in every backward.
    if (!wt_) wt_ = Tensor::make(be_, K, N, DType::f32);
    be_.transpose(w_->master.m(), wt_->m());
  } else if (precision_ == Precision::bf16) {
    if (!bf16_w_.data) {
      if (!bf16_at_.data) bf16_own_ = Tensor::make(be_, N, K, DType::bf16);
      bf16_w_ = bf16_at_.data ? bf16_at_ : bf16_own_->m();
    }
    if (!wt_) wt_ = Tensor::make(be_, K, N, DType::bf16);
    be_.convert(w_->master.m(), bf16_w_);
    be_.transpose(bf16_w_, wt_->m());
  } else if (precision_ == Precision::fp8) {
    if (!fp8_w_.codes) {
      if (!fp8_at_.codes)
        fp8_own_ = Fp8Tensor::make(be_, N, K, ScaleBlock::tile128x128, qopt_.format);
      fp8_w_ = fp8_at_.codes ? fp8_at_ : fp8_own_->q;
    }
    if (!fp8_wt_) fp8_wt_ = Fp8Tensor::make(be_, K, N, ScaleBlock::tile128x128, qopt_.format);
    if (given_ && given_->q.format == qopt_.format) {
      // A checkpoint's own tiles: generation uses exactly the file's bytes.
      be_.copy(fp8_w_.codes, given_->q.codes, static_cast<size_t>(N * K));
      be_.copy(fp8_w_.scale_inv, given_->q.scale_inv,
               static_cast<size_t>(scale_count(ScaleBlock::tile128x128, N, K)) * 4);
      be_.transpose_fp8(fp8_w_, fp8_wt_->q);
      return;
    }
    // The same quantizer serves the trainer and the rollout: both read these tiles. Statistics
    // only when observed: on a device they cost a pass and a synchronisation per linear.
    // Otherwise they may be summed where they are, without a synchronisation (the observer's
    // per-linear error signal).
    QuantOptions opt = qopt_;
    if (observer_) opt.stats_sum = observer_->stats_sum(layer_, module_, "weight");
    be_.quantize(w_->master.m(), fp8_w_, opt, nullptr);
    be_.transpose_fp8(fp8_w_, fp8_wt_->q);
    if (QuantObserver* o = observing()) o->observe(layer_, module_, "weight", fp8_w_);
  }
}

QuantOptions Linear::input_options() const {
  QuantOptions opt = qopt_;  // with the observer's sum, when it keeps one
  if (observer_) opt.stats_sum = observer_->stats_sum(layer_, module_, "activation");
  return opt;
}

QuantOptions Linear::grad_options() const {
  QuantOptions opt = qopt_;
  if (observer_) opt.stats_sum = observer_->stats_sum(layer_, module_, "gradient");
  return opt;
}

bool Linear::takes_produced(const LinearInput& x) const {
  return precision_ == Precision::fp8 &&
         !(input_options().stats_sum == nullptr && x.fuses_quantization(be_));
}

void Linear::forward(LinearInput& x, const Matrix& y) {
  forward_with(x, bf16_weight(), fp8_weight(), y);
}

void Linear::forward_with(LinearInput& x, const Matrix* bf16_w, const Fp8Matrix* fp8_w,
                          const Matrix& y) {
  check(precision_ == Precision::fp8 || x.x().data || x.x().rows == 0 || x.x().cols == 0,
        "linear " + w_->name + ": its input was made only as FP8 operands (a " +
            precision_name(precision_) + " linear reads the tensor itself)");
  switch (precision_) {
    case Precision::fp32:
      check(x.x().dtype == DType::f32, "linear " + w_->name + ": fp32 needs f32 activations");
      be_.gemm(x.x(), w_->master.m(), y, 0.0f);
      break;
    case Precision::bf16:
      check(bf16_w && bf16_w->cols == in_features(),
            "linear " + w_->name + ": a bf16 weight of its input width is needed");
      be_.gemm(x.x(), *bf16_w, y, 0.0f);
      break;
    case Precision::fp8: {
      check(fp8_w && fp8_w->cols == in_features() && fp8_w->format == qopt_.format,
            "linear " + w_->name + ": FP8 weight tiles of its input width and format are needed");
      const QuantOptions opt = input_options();
      if (QuantObserver* o = observing()) x.observe(be_, opt, *o, layer_, module_);
      // Decode: one pass per linear (see LinearInput); the fused kernel sums no statistics.
      if (!opt.stats_sum && x.fuses_quantization(be_)) {
        be_.linear_fp8(x.x(), *fp8_w, y, opt);
        break;
      }
      be_.gemm_fp8(x.along(be_, opt).q, *fp8_w, y, 0.0f);
      break;
    }
  }
}

void Linear::backward(LinearInput& x, const Matrix& dy, const Matrix& dx, QuantStats* dy_stats) {
  const int64_t M = dy.rows, N = dy.cols;
  const Matrix dw = w_->grad.m();
  if (precision_ == Precision::fp8) {
    Fp8Gradient g = Fp8Gradient::make(be_, M, N, qopt_.format);
    be_.quantize_with_transpose(dy, g.along.q, g.transposed.q, grad_options(), dy_stats, nullptr);
    backward(x, g, dx);
    return;
  }
  // fp32 / bf16: dgrad with the transposed copy of W, wgrad from dy and x as they are.
  if (dx.data) be_.gemm(dy, wt_->m(), dx, 0.0f);
  be_.gemm_wgrad(dy, x.x(), dw, 1.0f);
}

void Linear::backward(LinearInput& x, const Fp8Gradient& dy, const Matrix& dx) {
  check(precision_ == Precision::fp8, "linear " + w_->name + ": FP8 gradient operands for a " +
                                          precision_name(precision_) + " linear");
  check(dy.along.q.cols == out_features() && dy.along.q.format == qopt_.format,
        "linear " + w_->name + ": FP8 gradient operands of another shape or format");
  if (QuantObserver* o = observing()) o->observe(layer_, module_, "gradient", dy.along.q);
  if (dx.data) be_.gemm_fp8(dy.along.q, fp8_wt_->q, dx, 0.0f);                    // dgrad: dY · W
  be_.gemm_fp8(dy.transposed.q, x.transposed(be_, qopt_).q, w_->grad.m(), 1.0f);  // wgrad
}

}  // namespace fp8rl

namespace fp8rl {
namespace {

// Rows [first, first + n) of x.
Matrix rows_view(const Matrix& x, int64_t first, int64_t n) {
  return Matrix{
      static_cast<uint8_t*>(x.data) + static_cast<size_t>(first * x.cols) * dtype_size(x.dtype), n,
      x.cols, x.dtype};
}

// Expert e's rows of a [ΣM_e, K] 1x128 operand in the grouped layout (a standalone 1x128
// matrix of its own).
Fp8Matrix grouped_rows(const Fp8Matrix& q, int64_t first, int64_t n) {
  return Fp8Matrix{q.codes + first * q.cols,
                   q.scale_inv + blocks_of(q.cols) * first,
                   n,
                   q.cols,
                   ScaleBlock::row1x128,
                   q.format};
}

}  // namespace

GroupedLinearInput::GroupedLinearInput(Matrix x, std::vector<int64_t> rows, bool for_backward)
    : x_(x), rows_(std::move(rows)), for_backward_(for_backward) {
  check_grouped_rows("grouped linear input", rows_, x_.rows, rows_.size());
  experts_.resize(rows_.size());
  expert_made_.assign(rows_.size(), 0);
}

LinearInput& GroupedLinearInput::expert(int64_t e) {
  const size_t i = static_cast<size_t>(e);
  check(e >= 0 && i < rows_.size(), "grouped linear input: expert " + std::to_string(e) + " of " +
                                        std::to_string(rows_.size()));
  if (!expert_made_[i]) {
    int64_t first = 0;
    for (size_t g = 0; g < i; ++g) first += rows_[g];
    experts_[i] = LinearInput(rows_view(x_, first, rows_[i]), for_backward_);
    expert_made_[i] = 1;
  }
  return experts_[i];
}

void GroupedLinearInput::quantize(Backend& be, const QuantOptions& opt) {
  if (along_) return;
  const int64_t M = x_.rows, K = x_.cols;
  along_ = Fp8Tensor::make(be, M, K, ScaleBlock::row1x128, opt.format);
  if (M == 0) return;
  if (!for_backward_) {
    // One quantization of all rows (the codes are already in place), its scales re-laid per expert.
    const Buffer scales =
        be.alloc(static_cast<size_t>(scale_count(ScaleBlock::row1x128, M, K)) * sizeof(float));
    const Fp8Matrix whole{along_->q.codes,      scales.as<float>(), M, K,
                          ScaleBlock::row1x128, opt.format};
    be.quantize(x_, whole, opt, nullptr);
    be.group_scales(whole, rows_, along_->q.scale_inv);
    return;
  }
  transposed_.resize(rows_.size());
  int64_t first = 0;
  for (size_t e = 0; e < rows_.size(); ++e) {
    const int64_t n = rows_[e];
    if (n > 0) {
      transposed_[e] = Fp8Tensor::make(be, K, n, ScaleBlock::row1x128, opt.format);
      be.quantize_with_transpose(rows_view(x_, first, n), grouped_rows(along_->q, first, n),
                                 transposed_[e].q, opt, nullptr, nullptr);
    }
    first += n;
  }
}

const Fp8Tensor& GroupedLinearInput::along(Backend& be, const QuantOptions& opt) {
  quantize(be, opt);
  return *along_;
}

const std::vector<Fp8Tensor>& GroupedLinearInput::transposed(Backend& be, const QuantOptions& opt) {
  check(for_backward_, "linear: backward through an input made for forward only");
  quantize(be, opt);
  return transposed_;
}

void GroupedLinearInput::observe(Backend& be, const QuantOptions& opt, QuantObserver& o,
                                 int64_t layer, Module m) {
  if (observed_) return;
  observed_ = true;
  if (along_) {
    // Already quantized without the observer: measure on a fresh quantization (opt carries the
    // observer's sum). The scale histogram does not depend on the scales' order.
    Fp8Tensor a = Fp8Tensor::make(be, x_.rows, x_.cols, ScaleBlock::row1x128, opt.format);
    if (x_.rows > 0) be.quantize(x_, a.q, opt, nullptr);
    o.observe(layer, m, "activation", a.q);
    return;
  }
  quantize(be, opt);
  o.observe(layer, m, "activation", along_->q);
}

bool Linear::groupable(const std::vector<Linear*>& experts) {
  check(!experts.empty(), "grouped linear: no experts");
  const Linear& a = *experts[0];
  for (const Linear* l : experts) {
    if (l->precision_ != a.precision_ || l->in_features() != a.in_features() ||
        l->out_features() != a.out_features())
      return false;
    if (a.precision_ == Precision::fp8 &&
        (l->qopt_.format != a.qopt_.format || l->qopt_.pow2_scales != a.qopt_.pow2_scales))
      return false;
  }
  return true;
}

void Linear::forward_grouped(const std::vector<Linear*>& experts, GroupedLinearInput& x,
                             const Matrix& y) {
  const std::vector<int64_t>& rows = x.rows();
  check(rows.size() == experts.size(), "grouped linear: " + std::to_string(experts.size()) +
                                           " experts, " + std::to_string(rows.size()) +
                                           " groups of rows");
  check(y.rows == x.x().rows, "grouped linear: output rows differ from the input's");
  if (x.x().rows == 0) return;
  Linear& l0 = *experts[0];
  Backend& be = l0.be_;
  // Decode steps keep one fused linear_fp8 per expert, as forward() chooses it (no statistics
  // summed then).
  const bool fused =
      l0.precision_ == Precision::fp8 && x.fuses_quantization(be) &&
      !(l0.observer_ && l0.observer_->stats_sum(l0.layer_, l0.module_, "activation"));
  if (fused || !groupable(experts)) {
    int64_t first = 0;
    for (size_t e = 0; e < experts.size(); ++e) {
      const int64_t n = rows[e];
      if (n > 0) experts[e]->forward(x.expert(static_cast<int64_t>(e)), rows_view(y, first, n));
      first += n;
    }
    return;
  }
  std::vector<Matrix> w;
  w.reserve(experts.size());
  switch (l0.precision_) {
    case Precision::fp32:
      check(x.x().dtype == DType::f32, "linear " + l0.w_->name + ": fp32 needs f32 activations");
      for (Linear* l : experts) w.push_back(l->w_->master.m());
      be.gemm_grouped(x.x(), w, y, rows, 0.0f);
      break;
    case Precision::bf16:
      for (Linear* l : experts) w.push_back(l->bf16_w_);
      be.gemm_grouped(x.x(), w, y, rows, 0.0f);
      break;
    case Precision::fp8: {
      QuantOptions opt = l0.qopt_;  // with the observer's sum, when it keeps one
      if (l0.observer_)
        opt.stats_sum = l0.observer_->stats_sum(l0.layer_, l0.module_, "activation");
      if (QuantObserver* o = l0.observing()) x.observe(be, opt, *o, l0.layer_, l0.module_);
      std::vector<Fp8Matrix> wq;
      wq.reserve(experts.size());
      for (Linear* l : experts) wq.push_back(l->fp8_w_);
      be.gemm_fp8_grouped(x.along(be, opt).q, wq, y, rows, 0.0f);
      break;
    }
  }
}

void Linear::backward_grouped(const std::vector<Linear*>& experts, GroupedLinearInput& x,
                              const Matrix& dy, const Matrix& dx) {
  const std::vector<int64_t>& rows = x.rows();
  check(rows.size() == experts.size(), "grouped linear: " + std::to_string(experts.size()) +
                                           " experts, " + std::to_string(rows.size()) +
                                           " groups of rows");
  check(dy.rows == x.x().rows, "grouped linear: dy's rows differ from the input's");
  if (dy.rows == 0) return;
  if (!groupable(experts)) {
    int64_t first = 0;
    for (size_t e = 0; e < experts.size(); ++e) {
      const int64_t n = rows[e];
      if (n > 0)
        experts[e]->backward(x.expert(static_cast<int64_t>(e)), rows_view(dy, first, n),
                             dx.data ? rows_view(dx, first, n) : Matrix{});
      first += n;
    }
    return;
  }
  Linear& l0 = *experts[0];
  Backend& be = l0.be_;
  const int64_t M = dy.rows, N = dy.cols;
  std::vector<Matrix> dw;
  dw.reserve(experts.size());
  for (Linear* l : experts) dw.push_back(l->w_->grad.m());
  if (l0.precision_ == Precision::fp8) {
    // dY along N in the grouped layout and each expert's dY_eᵀ along M_e, one
    // quantize_with_transpose per expert (as backward() per expert: the same codes, scales and
    // statistics).
    QuantOptions opt = l0.qopt_;
    if (l0.observer_) opt.stats_sum = l0.observer_->stats_sum(l0.layer_, l0.module_, "gradient");
    Fp8Tensor dyq = Fp8Tensor::make(be, M, N, ScaleBlock::row1x128, opt.format);
    std::vector<Fp8Tensor> dytq(experts.size());
    int64_t first = 0;
    for (size_t e = 0; e < experts.size(); ++e) {
      const int64_t n = rows[e];
      if (n > 0) {
        dytq[e] = Fp8Tensor::make(be, N, n, ScaleBlock::row1x128, opt.format);
        be.quantize_with_transpose(rows_view(dy, first, n), grouped_rows(dyq.q, first, n),
                                   dytq[e].q, opt, nullptr, nullptr);
      }
      first += n;
    }
    if (QuantObserver* o = l0.observing()) o->observe(l0.layer_, l0.module_, "gradient", dyq.q);
    if (dx.data) {  // dgrad: dY_e · W_e
      std::vector<Fp8Matrix> wt;
      wt.reserve(experts.size());
      for (Linear* l : experts) wt.push_back(l->fp8_wt_->q);
      be.gemm_fp8_grouped(dyq.q, wt, dx, rows, 0.0f);
    }
    // wgrad: dW_e += dY_eᵀ · X_e
    const std::vector<Fp8Tensor>& xt = x.transposed(be, l0.qopt_);
    std::vector<Fp8Matrix> a, b;
    std::vector<Matrix> c;
    for (size_t e = 0; e < experts.size(); ++e)
      if (rows[e] > 0) {
        a.push_back(dytq[e].q);
        b.push_back(xt[e].q);
        c.push_back(dw[e]);
      }
    be.gemm_fp8_wgrad_grouped(a, b, c);
    return;
  }
  // fp32 / bf16: dgrad with the transposed copies, wgrad as backward() per expert.
  if (dx.data) {
    std::vector<Matrix> wt;
    wt.reserve(experts.size());
    for (Linear* l : experts) wt.push_back(l->wt_->m());
    be.gemm_grouped(dy, wt, dx, rows, 0.0f);
  }
  be.gemm_wgrad_grouped(dy, x.x(), dw, rows);
}

}  // namespace fp8rl
