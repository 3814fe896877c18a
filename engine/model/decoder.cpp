#include "model/decoder.hpp"

#include <cmath>
#include <optional>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "model/fused_linears.hpp"
#include "model/mla.hpp"
#include "model/moe.hpp"

namespace fp8rl {

struct DecoderModel::Layer {
  Param in_norm, post_norm, q_norm, k_norm;
  // A layer with experts has no gate, up, down here; one with latent attention no q … o.
  std::unique_ptr<Linear> lin[kModules];
  std::unique_ptr<LatentAttention> mla;  // multi-head latent attention (DeepSeek-V3)
  // q, k and v as one GEMM in generation's steps (forward_cached_step); null with latent
  // attention. Gate and up likewise; null with experts.
  std::unique_ptr<FusedLinears> qkv, gate_up;
  std::unique_ptr<MoeBlock> moe;  // the experts and router of a mixture-of-experts layer
  // Its linears (dense ones or latent attention's, then the router, each expert's and the
  // shared expert's), with the module each reports as and the precision the map gives it.
  template <class F>
  void for_each_linear(int64_t l, const PrecisionMap* pm, F f) {
    for (int mi = 0; mi < kModules; ++mi) {
      Linear* x = lin[mi] ? lin[mi].get() : mla ? mla->linear(Module(mi)) : nullptr;
      if (x) f(*x, Module(mi), pm ? pm->at(l, Module(mi)) : Precision::fp32);
    }
    if (!moe) return;
    f(moe->router(), Module::gate, pm ? pm->router(l) : Precision::fp32);
    for (int64_t e = 0; e < moe->num_experts(); ++e)
      for (Module m : {Module::gate, Module::up, Module::down})
        f(moe->expert(e, m), m, pm ? pm->expert(l, e, m) : Precision::fp32);
    if (moe->has_shared())
      for (Module m : {Module::gate, Module::up, Module::down})
        f(moe->shared(m), m, pm ? pm->shared(l, m) : Precision::fp32);
  }
};

namespace {

// What one layer keeps from forward for backward.
struct LayerActs {
  Tensor x_in, rstd1, h1;
  LinearInput in1;  // h1 → q, k, v
  Tensor q_raw, k_raw, rstd_q, rstd_k, q, k, v, o, lse;
  LinearInput in_o;  // o → o_proj
  Tensor x_mid, rstd2, h2;
  LinearInput in2;  // h2 → gate, up
  Tensor gate, up, mlp;
  LinearInput in_down;  // mlp → down
};

// An input of rows x cols in dtype ad for linears that may take it as FP8 operands made by its
// producer: y is allocated unless every one of `readers` takes it so (then the producer does
// not write it: its Matrix has null data), with for_backward as for LinearInput.
struct ProducedInput {
  LinearInput in;
  Linear* first = nullptr;  // the reader whose input options the producer quantizes with
};
ProducedInput produced_input(Backend& be, int64_t rows, int64_t cols, DType ad, Tensor& y,
                             bool for_backward, std::initializer_list<Linear*> readers) {
  const LinearInput probe(Matrix{nullptr, rows, cols, ad}, for_backward);
  Linear* first = produced_reader(readers, probe);
  if (!first || !all_take_produced(readers, probe)) y = Tensor::make(be, rows, cols, ad);
  return {LinearInput(y.buf.data() ? y.m() : Matrix{nullptr, rows, cols, ad}, for_backward), first};
}

// Runs the op that produces in's tensor: plain() when no reader takes FP8 operands from it
// (first null), else fp8(operands, opt) — the op that also makes in's FP8 operands in the same
// pass, quantized with the input options of `first`, a reader that takes them so.
template <class Plain, class Fp8>
void produce_into(Backend& be, LinearInput& in, Linear* first, Plain plain, Fp8 fp8) {
  if (!first) {
    plain();
    return;
  }
  const QuantOptions opt = first->input_options();
  fp8(in.produce(be, opt), opt);
}

// RMSNorm(x) (rstd saved) into in's tensor (when it has data), as produce_into runs it.
void rmsnorm_into(Backend& be, const Matrix& x, const Matrix& w, float eps, float* rstd,
                  LinearInput& in, Linear* first) {
  produce_into(
      be, in, first, [&] { be.rmsnorm_forward(x, w, eps, in.x(), rstd); },
      [&](const Fp8Operands& out, const QuantOptions& opt) {
        be.rmsnorm_forward_fp8(x, w, eps, in.x(), rstd, out, opt);
      });
}

// x += r, then RMSNorm(x) into in as rmsnorm_into does — in one pass (Backend::add_rmsnorm_forward:
// the residual stream's add and the next norm of a generation step). r null: no add.
void add_rmsnorm_into(Backend& be, const Matrix& x, const Matrix* r, const Matrix& w, float eps,
                      float* rstd, LinearInput& in, Linear* first) {
  if (!r) {
    rmsnorm_into(be, x, w, eps, rstd, in, first);
    return;
  }
  produce_into(
      be, in, first, [&] { be.add_rmsnorm_forward(x, *r, w, eps, in.x(), rstd); },
      [&](const Fp8Operands& out, const QuantOptions& opt) {
        be.add_rmsnorm_forward_fp8(x, *r, w, eps, in.x(), rstd, out, opt);
      });
}

// SwiGLU of the stacked gate/up projection gu [M, 2I] into in, as produce_into runs it.
void swiglu_stacked_into(Backend& be, const Matrix& gu, LinearInput& in, Linear* first) {
  produce_into(
      be, in, first, [&] { be.swiglu_forward_stacked(gu, in.x()); },
      [&](const Fp8Operands& out, const QuantOptions& opt) {
        be.swiglu_forward_stacked_fp8(gu, in.x(), out, opt);
      });
}

// SwiGLU(gate, up) into in, as produce_into runs it.
void swiglu_into(Backend& be, const Matrix& gate, const Matrix& up, LinearInput& in,
                 Linear* first) {
  produce_into(
      be, in, first, [&] { be.swiglu_forward(gate, up, in.x()); },
      [&](const Fp8Operands& out, const QuantOptions& opt) {
        be.swiglu_forward_fp8(gate, up, in.x(), out, opt);
      });
}

// y = RMSNorm(x) (rstd saved) as the input of `readers` (null entries: a layer whose latent
// attention or experts read y themselves), y existing only if some reader needs it.
LinearInput norm_input(Backend& be, const Matrix& x, const Matrix& w, float eps, DType ad,
                       Tensor& y, float* rstd, bool for_backward,
                       std::initializer_list<Linear*> readers) {
  ProducedInput p = produced_input(be, x.rows, x.cols, ad, y, for_backward, readers);
  rmsnorm_into(be, x, w, eps, rstd, p.in, p.first);
  return std::move(p.in);
}

// h = SwiGLU(gate, up) as the input of `down`, made as for norm_input.
LinearInput swiglu_input(Backend& be, const Matrix& gate, const Matrix& up, DType ad, Tensor& h,
                         bool for_backward, Linear& down) {
  ProducedInput p = produced_input(be, gate.rows, gate.cols, ad, h, for_backward, {&down});
  swiglu_into(be, gate, up, p.in, p.first);
  return std::move(p.in);
}

// [rows·heads, D] view of a [rows, heads·D] tensor (per-head norms).
Matrix heads_view(const Tensor& t, int64_t heads) {
  return Matrix{t.buf.data(), t.rows * heads, t.cols / heads, t.dtype};
}

// Latent attention's norm weights as the ops read them (norm_weight: the decoder's BF16 copy or
// the master).
template <class NormWeight>
LatentAttention::NormWeights mla_norm_weights(LatentAttention& a, NormWeight norm_weight) {
  const std::vector<Param*> ns = a.norms();
  LatentAttention::NormWeights w;
  w.kv_a = norm_weight(*ns.back());
  if (ns.size() == 2) w.q_a = norm_weight(*ns.front());
  return w;
}

Tensor upload_ids(Backend& be, const std::vector<int32_t>& v) {
  Tensor t;
  t.buf = be.alloc(v.size() * 4);
  t.rows = static_cast<int64_t>(v.size());
  t.cols = 1;
  t.dtype = DType::f32;  // raw int32 storage; read through ids()
  be.upload(t.buf.data(), v.data(), v.size() * 4);
  return t;
}
const int32_t* ids(const Tensor& t) {
  return t.buf.as<const int32_t>();
}

}  // namespace

struct DecoderModel::Saved {
  int64_t B = 0, T = 0;
  float inv_t = 1.0f;
  Tensor ids, targets, positions;
  std::vector<LayerActs> layers;
  Tensor x_final, rstd_f, xf, xf32;  // xf32: xf widened for an fp32 lm_head
  LinearInput in_head;
  Tensor logits;
};

DecoderModel::~DecoderModel() = default;

DecoderModel::DecoderModel(Backend& be, const ModelConfig& cfg, const PrecisionMap& precision,
                           uint64_t seed, double init_std, QuantOptions qopt)
    : be_(be), cfg_(cfg), precision_(precision), qopt_(qopt) {
  cfg_.validate();
  check(precision_.layers() == cfg_.num_hidden_layers,
        "precision map has " + std::to_string(precision_.layers()) + " layers, the model " +
            std::to_string(cfg_.num_hidden_layers));
  precision_.validate();
  act_dtype_ = precision_.all_fp32() ? DType::f32 : DType::bf16;
  const int64_t H = cfg_.hidden_size, D = cfg_.head_dim, I = cfg_.intermediate_size;
  const int64_t Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;

  embed_ = Param::make(be, "model.embed_tokens.weight", cfg_.vocab_size, H, true);
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    auto layer = std::make_unique<Layer>();
    const std::string p = "model.layers." + std::to_string(l) + ".";
    layer->in_norm = Param::make(be, p + "input_layernorm.weight", 1, H, false);
    layer->post_norm = Param::make(be, p + "post_attention_layernorm.weight", 1, H, false);
    if (cfg_.qk_norm) {
      layer->q_norm = Param::make(be, p + "self_attn.q_norm.weight", 1, D, false);
      layer->k_norm = Param::make(be, p + "self_attn.k_norm.weight", 1, D, false);
    }
    const int64_t shapes[7][2] = {{Hq * D, H}, {Hkv * D, H}, {Hkv * D, H}, {H, Hq * D},
                                  {I, H},      {I, H},       {H, I}};
    const bool experts = cfg_.moe.layer_has_experts(l);
    if (cfg_.mla.enabled())
      layer->mla = std::make_unique<LatentAttention>(be, p + "self_attn.", cfg_);
    for (int mi = 0; mi < 7; ++mi) {
      if (experts && mi >= 4) break;       // the MLP is the experts'
      if (layer->mla && mi < 4) continue;  // the attention is latent attention's
      std::string name = linear_weight_name(l, Module(mi));
      name.resize(name.size() - 7);  // the Linear adds ".weight"
      layer->lin[mi] = std::make_unique<Linear>(be, name, shapes[mi][0], shapes[mi][1]);
    }
    if (!layer->mla)
      layer->qkv = std::make_unique<FusedLinears>(
          be, std::vector<Linear*>{layer->lin[0].get(), layer->lin[1].get(), layer->lin[2].get()});
    if (!experts)
      layer->gate_up = std::make_unique<FusedLinears>(
          be, std::vector<Linear*>{layer->lin[4].get(), layer->lin[5].get()});
    if (experts) layer->moe = std::make_unique<MoeBlock>(be, p + "mlp.", H, cfg_.moe);
    layers_.push_back(std::move(layer));
  }
  final_norm_ = Param::make(be, "model.norm.weight", 1, H, false);
  lm_head_ = cfg_.tie_word_embeddings ? std::make_unique<Linear>(be, &embed_)
                                      : std::make_unique<Linear>(be, "lm_head", cfg_.vocab_size, H);

  // Initialise: normal(0, init_std) matrices, unit norm weights. Element i of a matrix takes
  // the generator's draws 2i and 2i + 1 after the matrix's start, so chunks fill in parallel
  // with the values of one sequential pass (a Qwen3-0.6B shape is 6·10^8 draws).
  Rng rng(seed);
  for (Param* prm : parameters()) {
    std::vector<float> v(static_cast<size_t>(prm->master.size()));
    if (prm->decay) {
      const Rng start = rng;
      parallel_for(static_cast<int64_t>(v.size()), int64_t{1} << 16, [&](int64_t b, int64_t e) {
        Rng r = start.ahead(2 * static_cast<uint64_t>(b));
        for (int64_t i = b; i < e; ++i)
          v[static_cast<size_t>(i)] = static_cast<float>(r.normal() * init_std);
      });
      rng = rng.ahead(2 * static_cast<uint64_t>(v.size()));
    } else {
      std::fill(v.begin(), v.end(), 1.0f);
    }
    upload_floats(be, prm->master, v);
  }
  // The score-correction biases start at zero (transformers' DeepseekV3TopkRouter buffer).
  for (auto& layer : layers_)
    if (layer->moe && layer->moe->score_bias()) {
      Param& b = *layer->moe->score_bias();
      be.zero(b.master.buf.data(), b.master.buf.bytes());
    }
  zero_grad();
  set_precision(precision_);
}

void DecoderModel::set_lm_head_precision(Precision p) {
  check(!saved_, "cannot change the lm_head precision with saved activations");
  lm_head_wanted_ = p;
  lm_head_->set_precision(act_dtype_ == DType::f32 ? Precision::fp32 : p, qopt_);
}

LinearInput DecoderModel::head_input(const Tensor& xf, Tensor& widened, bool training) {
  if (lm_head_->precision() != Precision::fp32 || xf.m().dtype == DType::f32)
    return LinearInput(xf.m(), training);
  widened = Tensor::make(be_, xf.m().rows, xf.m().cols, DType::f32);
  be_.convert(xf.m(), widened.m());  // exact: every BF16 value is an FP32 value
  return LinearInput(widened.m(), training);
}

void DecoderModel::set_precision(const PrecisionMap& p) {
  check(p.layers() == cfg_.num_hidden_layers, "precision map layer count differs from the model");
  p.validate();
  const DType ad = p.all_fp32() ? DType::f32 : DType::bf16;
  check(ad == act_dtype_ || !saved_,
        "cannot switch between fp32 and bf16/fp8 with saved activations");
  precision_ = p;
  act_dtype_ = ad;
  const std::vector<LayerShape> shapes = cfg_.layer_shapes();
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    check(p.experts(l) == (layers_[l]->moe ? layers_[l]->moe->num_experts() : 0),
          "precision map: layer " + std::to_string(l) + " has " + std::to_string(p.experts(l)) +
              " experts, the model's " +
              std::to_string(layers_[l]->moe ? layers_[l]->moe->num_experts() : 0));
    check(p.shape(l) == shapes[static_cast<size_t>(l)],
          "precision map: layer " + std::to_string(l) +
              " lists other linears than the model has (latent attention or shared experts)");
    layers_[l]->for_each_linear(
        l, &precision_, [&](Linear& lin, Module, Precision pr) { lin.set_precision(pr, qopt_); });
  }
  lm_head_->set_precision(ad == DType::f32 ? Precision::fp32 : lm_head_wanted_, qopt_);
  // BF16 copies of the embedding and norm weights (the BF16 parts of the recipe).
  bf16_copies_.clear();
  if (ad == DType::bf16) {
    std::vector<Param*> ps = {&embed_, &final_norm_};
    for (auto& layer : layers_) {
      ps.push_back(&layer->in_norm);
      ps.push_back(&layer->post_norm);
      if (cfg_.qk_norm) {
        ps.push_back(&layer->q_norm);
        ps.push_back(&layer->k_norm);
      }
      if (layer->mla)
        for (Param* n : layer->mla->norms()) ps.push_back(n);
    }
    for (Param* q : ps)
      bf16_copies_.emplace_back(q, Tensor::make(be_, q->master.rows, q->master.cols, DType::bf16));
  }
  // The linears made their compute copies in set_precision; not refresh(), which would drop
  // FP8 tiles given by a checkpoint although the masters did not change.
  for (auto& [q, copy] : bf16_copies_) be_.convert(q->master.m(), copy.m());
  refresh_decode_weights();
}

void DecoderModel::refresh_decode_weights() {
  for (auto& layer : layers_) {
    if (layer->mla) layer->mla->refresh_decode_weight(act_dtype_);
    for (FusedLinears* f : {layer->qkv.get(), layer->gate_up.get()})
      if (f) f->refresh();
  }
}

StackedLayers DecoderModel::stacked_layers() const {
  StackedLayers n;
  for (const auto& layer : layers_) {
    n.qkv += layer->qkv && layer->qkv->stacked() ? 1 : 0;
    n.gate_up += layer->gate_up && layer->gate_up->stacked() ? 1 : 0;
  }
  return n;
}

std::string DecoderModel::linear_weight_name(int64_t layer, Module m) {
  return "model.layers." + std::to_string(layer) +
         (is_attention_module(m) ? ".self_attn." : ".mlp.") + module_name(m) + ".weight";
}

std::vector<Param*> DecoderModel::parameters() {
  std::vector<Param*> out = {&embed_};
  for (auto& layer : layers_) {
    out.push_back(&layer->in_norm);
    if (layer->mla)
      layer->mla->parameters(out);
    else
      for (int mi = 0; mi < 4; ++mi) out.push_back(&layer->lin[mi]->weight());
    if (cfg_.qk_norm) {
      out.push_back(&layer->q_norm);
      out.push_back(&layer->k_norm);
    }
    out.push_back(&layer->post_norm);
    if (layer->moe)
      layer->moe->parameters(out);
    else
      for (int mi = 4; mi < 7; ++mi) out.push_back(&layer->lin[mi]->weight());
  }
  out.push_back(&final_norm_);
  if (!cfg_.tie_word_embeddings) out.push_back(&lm_head_->weight());
  return out;
}

Param* DecoderModel::find(const std::string& name) {
  for (Param* p : parameters())
    if (p->name == name) return p;
  return nullptr;
}

void DecoderModel::set_kv_calibrator(KvScaleCalibrator* c) {
  if (calibrator_ && !pending_amax_.empty()) {
    const size_t L = static_cast<size_t>(cfg_.num_hidden_layers);
    std::vector<std::array<float, 3>> amax(L);
    for (const Buffer& b : pending_amax_) {
      be_.download(amax.data(), b.data(), L * sizeof amax[0]);
      calibrator_->add(amax);
    }
  }
  pending_amax_.clear();
  calibrator_ = c;
}

void DecoderModel::set_quant_observer(QuantObserver* o) {
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l)
    layers_[l]->for_each_linear(
        l, nullptr, [&](Linear& lin, Module m, Precision) { lin.set_observer(o, l, m); });
}

std::vector<Module> DecoderModel::input_sharers(Module m) {
  switch (m) {
    case Module::q:
    case Module::k:
    case Module::v:
    case Module::q_a:
    case Module::kv_a:  // latent attention: q or q_a and kv_a read the normed hidden state
      return {Module::q, Module::k, Module::v, Module::q_a, Module::kv_a};
    case Module::gate:
    case Module::up:
      return {Module::gate, Module::up};
    case Module::q_b:
    case Module::kv_b:
    case Module::o:
    case Module::down:
      break;
  }
  return {m};
}

std::vector<int64_t> DecoderModel::inject_outlier_channels(int64_t layer, double scale) {
  check(layer >= 0 && layer < cfg_.num_hidden_layers,
        "outliers: layer " + std::to_string(layer) + " is beyond the model's " +
            std::to_string(cfg_.num_hidden_layers) + " layers");
  check(!layers_[static_cast<size_t>(layer)]->moe,
        "outliers: layer " + std::to_string(layer) + " has experts (dense MLPs only)");
  check(std::isfinite(scale) && scale >= 1, "outliers: the scale must be a finite number ≥ 1");
  Linear& gate = linear(layer, Module::gate);
  Linear& up = linear(layer, Module::up);
  Linear& down = linear(layer, Module::down);
  const int64_t inter = down.in_features(), hidden = down.out_features();
  std::vector<float> g = download_floats(be_, gate.weight().master),
                     u = download_floats(be_, up.weight().master),
                     d = download_floats(be_, down.weight().master);
  float largest = 0;
  for (float w : d) largest = std::max(largest, std::fabs(w));
  std::vector<int64_t> channels;
  for (int64_t j = 0; j < inter; j += kBlock) {
    channels.push_back(j);
    for (int64_t c = 0; c < hidden; ++c) {  // gate and up are [inter, hidden]: row j
      g[static_cast<size_t>(j * hidden + c)] = 0.0f;
      u[static_cast<size_t>(j * hidden + c)] = 0.0f;
    }
    for (int64_t r = 0; r < hidden; ++r) {  // down is [hidden, inter]: column j
      float& w = d[static_cast<size_t>(r * inter + j)];
      w = static_cast<float>((w < 0 ? -scale : scale) * largest);
    }
  }
  upload_floats(be_, gate.weight().master, g);
  upload_floats(be_, up.weight().master, u);
  upload_floats(be_, down.weight().master, d);
  for (Linear* lin : {&gate, &up, &down}) lin->refresh();
  return channels;
}

Linear& DecoderModel::linear(int64_t layer, Module m) {
  check(layer >= 0 && layer < cfg_.num_hidden_layers, "layer index out of range");
  Layer& L = *layers_[layer];
  Linear* lin = L.lin[static_cast<int>(m)].get();
  if (!lin && L.mla) lin = L.mla->linear(m);
  check(lin != nullptr, "layer " + std::to_string(layer) + " has no " + module_short(m) +
                            " linear" +
                            (L.moe && !is_attention_module(m) ? " (its MLP is experts)" : ""));
  return *lin;
}

Linear& DecoderModel::linear(const LinearSlot& s) {
  if (!s.router && !s.shared && s.expert < 0) return linear(s.layer, s.module);
  MoeBlock* block = moe(s.layer);
  check(block != nullptr,
        "layer " + std::to_string(s.layer) + " has no experts (" + s.name() + ")");
  if (s.shared) return block->shared(s.module);
  return s.router ? block->router() : block->expert(s.expert, s.module);
}

std::string DecoderModel::weight_name(const LinearSlot& s) {
  if (!s.router && !s.shared && s.expert < 0) return linear_weight_name(s.layer, s.module);
  const std::string p = "model.layers." + std::to_string(s.layer) + ".mlp.";
  if (s.router) return p + "gate.weight";
  if (s.shared) return p + "shared_experts." + module_name(s.module) + ".weight";
  return p + "experts." + std::to_string(s.expert) + "." + module_name(s.module) + ".weight";
}

void DecoderModel::zero_grad() {
  for (Param* p : parameters()) be_.zero(p->grad.buf.data(), p->grad.buf.bytes());
}

void DecoderModel::refresh() {
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l)
    layers_[l]->for_each_linear(l, nullptr, [&](Linear& lin, Module, Precision) { lin.refresh(); });
  lm_head_->refresh();
  for (auto& [p, copy] : bf16_copies_) be_.convert(p->master.m(), copy.m());
  refresh_decode_weights();
}

Matrix DecoderModel::norm_weight(Param& p) {
  for (auto& [q, copy] : bf16_copies_)
    if (q == &p) return copy.m();
  return p.master.m();
}

void DecoderModel::clear_activations() {
  saved_.reset();
  for (auto& layer : layers_) {
    if (layer->moe) layer->moe->clear();
    if (layer->mla) layer->mla->clear();
  }
}

bool DecoderModel::has_experts() const {
  return cfg_.moe.enabled();
}

void DecoderModel::begin_routing(int64_t rows) {
  last_routing_.assign(layers_.size(), {});
  routing_rows_ = rows;
}

void DecoderModel::moe_forward(int64_t l, LinearInput& in, const Matrix& out, bool training,
                               std::vector<char>* differing) {
  MoeBlock& moe = *layers_[static_cast<size_t>(l)]->moe;
  const int32_t* ref = nullptr;
  if (reference_ && static_cast<size_t>(l) < reference_->size() &&
      !(*reference_)[static_cast<size_t>(l)].empty()) {
    const auto& r = (*reference_)[static_cast<size_t>(l)];
    check(static_cast<int64_t>(r.size()) == routing_rows_ * moe.top_k(),
          "routing replay: layer " + std::to_string(l) + " has " + std::to_string(r.size()) +
              " expert ids for " + std::to_string(routing_rows_) + " rows × " +
              std::to_string(moe.top_k()));
    ref = r.data();
  }
  RoutingStats* stats = nullptr;
  if (collect_routing_ && training) {
    auto& t = routing_telemetry_;
    if (t.stats.size() != layers_.size()) t.stats.assign(layers_.size(), {});
    stats = &t.stats[static_cast<size_t>(l)];
  }
  moe.forward(in, out, training, ref, replay_, &last_routing_[static_cast<size_t>(l)], stats,
              differing);
}

void DecoderModel::set_routing_reference(const Routing* reference, bool replay) {
  reference_ = reference;
  replay_ = replay && reference != nullptr;
}

DecoderModel::RoutingTelemetry DecoderModel::take_routing_telemetry() {
  RoutingTelemetry t = std::move(routing_telemetry_);
  routing_telemetry_ = RoutingTelemetry{};
  return t;
}

void DecoderModel::set_router_aux_loss_coef(double c) {
  for (auto& layer : layers_)
    if (layer->moe) layer->moe->set_aux_loss_coef(c);
}

MoeBlock* DecoderModel::moe(int64_t layer) {
  check(layer >= 0 && layer < cfg_.num_hidden_layers, "layer index out of range");
  return layers_[static_cast<size_t>(layer)]->moe.get();
}

Tensor DecoderModel::run(const std::vector<int32_t>& tokens, int64_t B, int64_t T, bool training) {
  check(B > 0 && T > 0 && static_cast<int64_t>(tokens.size()) == B * T,
        "forward: " + std::to_string(tokens.size()) + " token ids for B=" + std::to_string(B) +
            ", T=" + std::to_string(T));
  check(T <= cfg_.max_position_embeddings, "forward: sequence length " + std::to_string(T) +
                                               " exceeds max_position_embeddings " +
                                               std::to_string(cfg_.max_position_embeddings));
  for (int32_t id : tokens)
    check(id >= 0 && id < cfg_.vocab_size, "forward: token id " + std::to_string(id) +
                                               " outside the vocabulary of " +
                                               std::to_string(cfg_.vocab_size));
  const int64_t M = B * T, H = cfg_.hidden_size, D = cfg_.head_dim, I = cfg_.intermediate_size;
  const int64_t Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const Rope rope = cfg_.rope();
  const DType ad = act_dtype_;
  auto S = std::make_unique<Saved>();
  S->B = B;
  S->T = T;
  S->ids = upload_ids(be_, tokens);
  std::vector<int32_t> pos(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) pos[static_cast<size_t>(m)] = static_cast<int32_t>(m % T);
  S->positions = upload_ids(be_, pos);

  Tensor x = Tensor::make(be_, M, H, ad);
  be_.embedding_forward(ids(S->ids), norm_weight(embed_), x.m());
  // KV calibration: (q, k, v) per layer in backend memory, read when the calibrator is unset.
  float* amax = nullptr;
  if (calibrator_) {
    pending_amax_.push_back(be_.alloc(static_cast<size_t>(cfg_.num_hidden_layers) * 3 * 4));
    amax = static_cast<float*>(pending_amax_.back().data());
  }
  begin_routing(M);
  std::vector<char> differing(static_cast<size_t>(M), 0);  // tokens routed otherwise than the
                                                           // reference in some layer
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    Layer& L = *layers_[l];
    LayerActs a;
    a.x_in = std::move(x);
    a.rstd1 = Tensor::make(be_, M, 1, DType::f32);
    // Latent attention (no lin[0..2]) reads h1 itself.
    a.in1 = norm_input(be_, a.x_in.m(), norm_weight(L.in_norm), eps, ad, a.h1, a.rstd1.f32(),
                       training, {L.lin[0].get(), L.lin[1].get(), L.lin[2].get()});
    Tensor attn_out = Tensor::make(be_, M, H, ad);
    if (L.mla) {
      L.mla->forward(a.in1, ids(S->positions), B, T,
                     mla_norm_weights(*L.mla, [&](Param& p) { return norm_weight(p); }),
                     attn_out.m(), training, amax ? amax + 3 * l : nullptr);
    } else {
      a.q_raw = Tensor::make(be_, M, Hq * D, ad);
      a.k_raw = Tensor::make(be_, M, Hkv * D, ad);
      a.v = Tensor::make(be_, M, Hkv * D, ad);
      L.lin[0]->forward(a.in1, a.q_raw.m());
      L.lin[1]->forward(a.in1, a.k_raw.m());
      L.lin[2]->forward(a.in1, a.v.m());
      if (cfg_.qk_norm) {
        a.rstd_q = Tensor::make(be_, M * Hq, 1, DType::f32);
        a.rstd_k = Tensor::make(be_, M * Hkv, 1, DType::f32);
        a.q = Tensor::make(be_, M, Hq * D, ad);
        a.k = Tensor::make(be_, M, Hkv * D, ad);
        be_.rmsnorm_forward(heads_view(a.q_raw, Hq), norm_weight(L.q_norm), eps,
                            heads_view(a.q, Hq), a.rstd_q.f32());
        be_.rmsnorm_forward(heads_view(a.k_raw, Hkv), norm_weight(L.k_norm), eps,
                            heads_view(a.k, Hkv), a.rstd_k.f32());
      } else {  // RoPE rotates q and k in place: the projections' outputs are not needed again
        a.q = std::move(a.q_raw);
        a.k = std::move(a.k_raw);
      }
      be_.rope(a.q.m(), Hq, ids(S->positions), rope, false);
      be_.rope(a.k.m(), Hkv, ids(S->positions), rope, false);
      if (amax) {
        be_.amax_into(a.q.m(), amax + 3 * l);
        be_.amax_into(a.k.m(), amax + 3 * l + 1);
        be_.amax_into(a.v.m(), amax + 3 * l + 2);
      }
      a.o = Tensor::make(be_, M, Hq * D, ad);
      a.lse = Tensor::make(be_, B * Hq, T, DType::f32);
      be_.attention_forward(a.q.m(), a.k.m(), a.v.m(), B, T, Hq, Hkv, a.o.m(), a.lse.f32());
      a.in_o = LinearInput(a.o.m(), training);
      L.lin[3]->forward(a.in_o, attn_out.m());
    }
    a.x_mid = Tensor::make(be_, M, H, ad);
    be_.add(a.x_in.m(), attn_out.m(), a.x_mid.m());
    a.rstd2 = Tensor::make(be_, M, 1, DType::f32);
    // The experts (no lin[4..6]) read h2 itself, gathered by expert.
    a.in2 = norm_input(be_, a.x_mid.m(), norm_weight(L.post_norm), eps, ad, a.h2, a.rstd2.f32(),
                       training, {L.lin[4].get(), L.lin[5].get()});
    Tensor mlp_out = Tensor::make(be_, M, H, ad);
    if (L.moe) {
      moe_forward(l, a.in2, mlp_out.m(), training, &differing);
    } else {
      a.gate = Tensor::make(be_, M, I, ad);
      a.up = Tensor::make(be_, M, I, ad);
      L.lin[4]->forward(a.in2, a.gate.m());
      L.lin[5]->forward(a.in2, a.up.m());
      a.in_down = swiglu_input(be_, a.gate.m(), a.up.m(), ad, a.mlp, training, *L.lin[6]);
      L.lin[6]->forward(a.in_down, mlp_out.m());
    }
    x = Tensor::make(be_, M, H, ad);
    be_.add(a.x_mid.m(), mlp_out.m(), x.m());
    if (training) S->layers.push_back(std::move(a));
  }
  if (collect_routing_ && has_experts()) {
    routing_telemetry_.tokens += M;
    for (char d : differing) routing_telemetry_.tokens_differing += d;
  }
  S->rstd_f = Tensor::make(be_, M, 1, DType::f32);
  S->xf = Tensor::make(be_, M, H, ad);
  be_.rmsnorm_forward(x.m(), norm_weight(final_norm_), eps, S->xf.m(), S->rstd_f.f32());
  S->x_final = std::move(x);
  S->in_head = head_input(S->xf, S->xf32, training);
  S->logits = Tensor::make(be_, M, cfg_.vocab_size, DType::f32);
  lm_head_->forward(S->in_head, S->logits.m());
  Tensor logits = Tensor::make(be_, M, cfg_.vocab_size, DType::f32);
  be_.copy(logits.buf.data(), S->logits.buf.data(), logits.buf.bytes());
  if (training)
    saved_ = std::move(S);
  else
    saved_.reset();
  return logits;
}

ForwardResult DecoderModel::forward(const std::vector<int32_t>& tokens,
                                    const std::vector<int32_t>& targets, int64_t B, int64_t T,
                                    float inv_temperature, bool training, bool want_entropy) {
  check(targets.size() == tokens.size(), "forward: targets and tokens differ in length");
  for (int32_t t : targets)
    check(t >= 0 && t < cfg_.vocab_size,
          "forward: target id " + std::to_string(t) + " outside the vocabulary");
  const Tensor logits = run(tokens, B, T, training);
  const int64_t M = B * T;
  Tensor tg = upload_ids(be_, targets);
  Tensor lp = Tensor::make(be_, M, 1, DType::f32), ent;
  if (want_entropy) ent = Tensor::make(be_, M, 1, DType::f32);
  be_.token_logprobs(logits.m(), ids(tg), inv_temperature, lp.f32(),
                     want_entropy ? ent.f32() : nullptr);
  ForwardResult r;
  r.logp = download_floats(be_, lp);
  if (want_entropy) r.entropy = download_floats(be_, ent);
  if (training) {
    saved_->targets = std::move(tg);
    saved_->inv_t = inv_temperature;
  }
  return r;
}

std::vector<float> DecoderModel::logits(const std::vector<int32_t>& tokens, int64_t B, int64_t T) {
  return download_floats(be_, run(tokens, B, T, false));
}

void DecoderModel::backward(const std::vector<float>& dlogp) {
  check(saved_ != nullptr,
        "backward: no training forward to differentiate (call forward with training = true)");
  Saved& S = *saved_;
  const int64_t B = S.B, T = S.T, M = B * T, H = cfg_.hidden_size, D = cfg_.head_dim;
  const int64_t I = cfg_.intermediate_size, Hq = cfg_.num_attention_heads,
                Hkv = cfg_.num_key_value_heads;
  const Rope rope = cfg_.rope();
  const DType ad = act_dtype_;
  check(static_cast<int64_t>(dlogp.size()) == M, "backward: dlogp has " +
                                                     std::to_string(dlogp.size()) +
                                                     " entries, expected " + std::to_string(M));
  Tensor dl = Tensor::make(be_, M, 1, DType::f32);
  upload_floats(be_, dl, dlogp);
  // An fp32 head takes its output gradient in FP32 too.
  const DType dlogits_dtype = lm_head_->precision() == Precision::fp32 ? DType::f32 : ad;
  Tensor dlogits = Tensor::make(be_, M, cfg_.vocab_size, dlogits_dtype);
  be_.token_logprobs_backward(S.logits.m(), ids(S.targets), S.inv_t, dl.f32(), dlogits.m());
  Tensor dxf = Tensor::make(be_, M, H, ad);
  lm_head_->backward(S.in_head, dlogits.m(), dxf.m());
  dlogits = Tensor{};
  Tensor tmp_h = Tensor::make(be_, M, H, ad);
  // The residual stream's gradient out = residual + the norm's input gradient (no residual
  // below the final norm). When an FP8 linear reads it (a dense layer's down_proj or o_proj),
  // the norm's backward quantizes it for that linear in the same pass: its operands returned.
  auto norm_backward = [&](Linear* reader, const Matrix& dy, const Matrix& x, Param& norm,
                           const float* rstd, const Matrix& residual,
                           const Matrix& out) -> std::optional<Fp8Gradient> {
    if (reader && reader->precision() == Precision::fp8) {
      const QuantOptions opt = reader->grad_options();
      Fp8Gradient g = Fp8Gradient::make(be_, M, H, opt.format);
      be_.rmsnorm_backward_fp8(dy, x, norm_weight(norm), rstd, residual, out, norm.grad.m(),
                               g.operands(), opt);
      return g;
    }
    if (!residual.data) {
      be_.rmsnorm_backward(dy, x, norm_weight(norm), rstd, out, norm.grad.m());
    } else {
      be_.rmsnorm_backward(dy, x, norm_weight(norm), rstd, tmp_h.m(), norm.grad.m());
      be_.add(residual, tmp_h.m(), out);
    }
    return std::nullopt;
  };
  // The dense down_proj of layer l, the reader of the gradient below it (null for MoE layers).
  auto down_of = [&](int64_t l) { return layers_[l]->moe ? nullptr : layers_[l]->lin[6].get(); };
  const Matrix no_residual{nullptr, M, H, ad};
  const int64_t last = cfg_.num_hidden_layers - 1;
  Tensor dx = Tensor::make(be_, M, H, ad);
  std::optional<Fp8Gradient> dx_fp8 =
      norm_backward(last >= 0 ? down_of(last) : nullptr, dxf.m(), S.x_final.m(), final_norm_,
                    S.rstd_f.f32(), no_residual, dx.m());

  for (int64_t l = last; l >= 0; --l) {
    Layer& L = *layers_[l];
    LayerActs& a = S.layers[static_cast<size_t>(l)];
    // MLP
    Tensor dh2 = Tensor::make(be_, M, H, ad);
    if (L.moe) {
      L.moe->backward(a.in2, dx.m(), dh2.m());
    } else {
      Tensor dmlp = Tensor::make(be_, M, I, ad);
      if (dx_fp8) {
        L.lin[6]->backward(a.in_down, *dx_fp8, dmlp.m());
      } else {
        L.lin[6]->backward(a.in_down, dx.m(), dmlp.m());
      }
      Linear &gate = *L.lin[4], &up = *L.lin[5];
      if (gate.precision() == Precision::fp8 && up.precision() == Precision::fp8) {
        // SwiGLU's backward quantizes the gradients for the FP8 gate and up projections as it
        // computes them; dgate and dup themselves are never written.
        const QuantOptions og = gate.grad_options(), ou = up.grad_options();
        const Fp8Gradient gg = Fp8Gradient::make(be_, M, I, og.format),
                          gu = Fp8Gradient::make(be_, M, I, ou.format);
        const Matrix none{nullptr, M, I, ad};
        be_.swiglu_backward_fp8(dmlp.m(), a.gate.m(), a.up.m(), none, none, gg.operands(), og,
                                gu.operands(), ou);
        gate.backward(a.in2, gg, dh2.m());
        up.backward(a.in2, gu, tmp_h.m());
      } else {
        Tensor dgate = Tensor::make(be_, M, I, ad), dup = Tensor::make(be_, M, I, ad);
        be_.swiglu_backward(dmlp.m(), a.gate.m(), a.up.m(), dgate.m(), dup.m());
        gate.backward(a.in2, dgate.m(), dh2.m());
        up.backward(a.in2, dup.m(), tmp_h.m());
      }
      be_.add(dh2.m(), tmp_h.m(), dh2.m());
    }
    Tensor dx_mid = Tensor::make(be_, M, H, ad);
    const std::optional<Fp8Gradient> dx_mid_fp8 =
        norm_backward(L.mla ? nullptr : L.lin[3].get(), dh2.m(), a.x_mid.m(), L.post_norm,
                      a.rstd2.f32(), dx.m(), dx_mid.m());
    // Attention
    Tensor dh1 = Tensor::make(be_, M, H, ad);
    if (L.mla) {
      L.mla->backward(a.in1, dx_mid.m(),
                      mla_norm_weights(*L.mla, [&](Param& p) { return norm_weight(p); }), dh1.m());
    } else {
      Tensor dattn = Tensor::make(be_, M, Hq * D, ad);
      if (dx_mid_fp8) {
        L.lin[3]->backward(a.in_o, *dx_mid_fp8, dattn.m());
      } else {
        L.lin[3]->backward(a.in_o, dx_mid.m(), dattn.m());
      }
      Tensor dq = Tensor::make(be_, M, Hq * D, ad), dk = Tensor::make(be_, M, Hkv * D, ad),
             dv = Tensor::make(be_, M, Hkv * D, ad);
      be_.attention_backward(dattn.m(), a.q.m(), a.k.m(), a.v.m(), a.o.m(), a.lse.f32(), B, T, Hq,
                             Hkv, dq.m(), dk.m(), dv.m());
      // A rotation's adjoint is the opposite rotation.
      be_.rope(dq.m(), Hq, ids(S.positions), rope, true);
      be_.rope(dk.m(), Hkv, ids(S.positions), rope, true);
      // q_proj's and k_proj's backward from dq and dk through the per-head norms; an FP8
      // projection takes its gradient's operands from the norm's backward (the raw gradient is
      // never written).
      auto qk_backward = [&](Linear& lin, const Tensor& d, const Tensor& raw, int64_t heads,
                             Param& norm, const Tensor& rstd, const Matrix& dx_out) {
        if (!cfg_.qk_norm) {
          lin.backward(a.in1, d.m(), dx_out);
          return;
        }
        if (lin.precision() == Precision::fp8) {
          const QuantOptions opt = lin.grad_options();
          const Fp8Gradient g = Fp8Gradient::make(be_, M, heads * D, opt.format);
          const Matrix unwritten{nullptr, M * heads, D, ad};
          be_.rmsnorm_backward_fp8(heads_view(d, heads), heads_view(raw, heads), norm_weight(norm),
                                   rstd.f32(), unwritten, unwritten, norm.grad.m(), g.operands(),
                                   opt);
          lin.backward(a.in1, g, dx_out);
          return;
        }
        const Tensor d_raw = Tensor::make(be_, M, heads * D, ad);
        be_.rmsnorm_backward(heads_view(d, heads), heads_view(raw, heads), norm_weight(norm),
                             rstd.f32(), heads_view(d_raw, heads), norm.grad.m());
        lin.backward(a.in1, d_raw.m(), dx_out);
      };
      qk_backward(*L.lin[0], dq, a.q_raw, Hq, L.q_norm, a.rstd_q, dh1.m());
      qk_backward(*L.lin[1], dk, a.k_raw, Hkv, L.k_norm, a.rstd_k, tmp_h.m());
      be_.add(dh1.m(), tmp_h.m(), dh1.m());
      L.lin[2]->backward(a.in1, dv.m(), tmp_h.m());
      be_.add(dh1.m(), tmp_h.m(), dh1.m());
    }
    dx_fp8 = norm_backward(l > 0 ? down_of(l - 1) : nullptr, dh1.m(), a.x_in.m(), L.in_norm,
                           a.rstd1.f32(), dx_mid.m(), dx.m());
    a = LayerActs{};  // release this layer's activations early
  }
  be_.embedding_backward(ids(S.ids), dx.m(), embed_.grad.m());
  saved_.reset();
}

}  // namespace fp8rl

namespace fp8rl {

std::vector<float> DecoderModel::forward_cached(const std::vector<int32_t>& tokens,
                                                const std::vector<int32_t>& slots,
                                                const std::vector<int32_t>& positions,
                                                const std::vector<int32_t>& output_rows,
                                                KvCache& cache) {
  const Tensor logits = forward_cached_device(tokens, slots, positions, output_rows, cache);
  if (logits.empty()) return {};
  return download_floats(be_, logits);
}

Tensor DecoderModel::forward_cached_device(const std::vector<int32_t>& tokens,
                                           const std::vector<int32_t>& slots,
                                           const std::vector<int32_t>& positions,
                                           const std::vector<int32_t>& output_rows,
                                           KvCache& cache) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  check(n > 0 && slots.size() == tokens.size() && positions.size() == tokens.size(),
        "forward_cached: tokens, slots and positions must have the same, non-zero length");
  for (int64_t i = 0; i < n; ++i) {
    check(tokens[i] >= 0 && tokens[i] < cfg_.vocab_size,
          "forward_cached: token id " + std::to_string(tokens[i]) + " outside the vocabulary");
    check(positions[i] >= 0 && positions[i] < cache.max_len() &&
              positions[i] < cfg_.max_position_embeddings,
          "forward_cached: position " + std::to_string(positions[i]) + " beyond the cache (" +
              std::to_string(cache.max_len()) + ") or max_position_embeddings");
    check(slots[i] >= 0 && slots[i] < cache.num_slots(), "forward_cached: slot out of range");
  }
  for (int32_t r : output_rows) check(r >= 0 && r < n, "forward_cached: output row out of range");
  if (output_rows.empty()) return Tensor{};
  std::vector<int32_t> lengths(positions.size());
  for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = positions[i] + 1;
  const Tensor tok = upload_ids(be_, tokens), slot = upload_ids(be_, slots),
               pos = upload_ids(be_, positions), len = upload_ids(be_, lengths),
               rows = upload_ids(be_, output_rows);
  return forward_cached_step({ids(tok), ids(slot), ids(pos), ids(len), ids(rows), n,
                              static_cast<int64_t>(output_rows.size())},
                             cache);
}

Tensor DecoderModel::forward_cached_step(const CachedStepInputs& in, KvCache& cache) {
  if (in.r == 0) return Tensor{};
  const int64_t n = in.n, r = in.r;
  const int64_t H = cfg_.hidden_size, D = cfg_.head_dim, I = cfg_.intermediate_size;
  const int64_t Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const Rope rope = cfg_.rope();
  const DType ad = act_dtype_;

  begin_routing(n);
  Tensor x = Tensor::make(be_, n, H, ad), h = Tensor::make(be_, n, H, ad);
  Tensor q = Tensor::make(be_, n, Hq * D, ad), k = Tensor::make(be_, n, Hkv * D, ad);
  Tensor v = Tensor::make(be_, n, Hkv * D, ad), o = Tensor::make(be_, n, Hq * D, ad);
  Tensor out = Tensor::make(be_, n, H, ad), mlp = Tensor::make(be_, n, I, ad);
  // The stacked projections' outputs, and what a layer that does not stack writes instead: made
  // on first use, once a step.
  Tensor qkv, gu, q_raw, k_raw, gate, up;
  auto made = [&](Tensor& t, int64_t cols) {
    if (t.empty()) t = Tensor::make(be_, n, cols, ad);
    return t.m();
  };
  Tensor rstd = Tensor::make(be_, n * std::max(Hq, int64_t{1}), 1, DType::f32);
  be_.embedding_forward(in.tokens, norm_weight(embed_), x.m());
  // Each residual add (x += out) happens in the next norm's pass; the last layer's before the
  // final norm's row gather.
  const Matrix residual = out.m();
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    Layer& L = *layers_[l];
    // h stays written (shared by the layers); prefill rows (more than a fused decode GEMM
    // takes) are quantized as the norm writes h.
    LinearInput in1(h.m(), false);
    add_rmsnorm_into(be_, x.m(), l > 0 ? &residual : nullptr, norm_weight(L.in_norm), eps,
                     rstd.f32(), in1,
                     produced_reader({L.lin[0].get(), L.lin[1].get(), L.lin[2].get()}, in1));
    if (L.mla) {
      L.mla->forward_cached(in1, in.positions, in.slot_ids, in.lengths,
                            mla_norm_weights(*L.mla, [&](Param& p) { return norm_weight(p); }),
                            cache.layer(l), out.m());
    } else {
      // q, k and v: one GEMM where their weights stack (FusedLinears), then one op for the
      // heads (Backend::qkv_heads: split, QK-norm, RoPE); otherwise each projection and the
      // ops one by one (without QK-norm the projections write q and k directly). The same
      // bits on the CPU either way.
      const Matrix qn = cfg_.qk_norm ? norm_weight(L.q_norm) : Matrix{},
                   kn = cfg_.qk_norm ? norm_weight(L.k_norm) : Matrix{};
      if (L.qkv->runs_stacked(in1)) {
        L.qkv->forward_stacked(in1, made(qkv, (Hq + 2 * Hkv) * D));
        be_.qkv_heads(qkv.m(), Hq, Hkv, qn, kn, eps, in.positions, rope, q.m(), k.m(), v.m());
      } else {
        L.qkv->forward(in1, {cfg_.qk_norm ? made(q_raw, Hq * D) : q.m(),
                             cfg_.qk_norm ? made(k_raw, Hkv * D) : k.m(), v.m()});
        if (cfg_.qk_norm) {
          be_.rmsnorm_forward(heads_view(q_raw, Hq), qn, eps, heads_view(q, Hq), rstd.f32());
          be_.rmsnorm_forward(heads_view(k_raw, Hkv), kn, eps, heads_view(k, Hkv), rstd.f32());
        }
        be_.rope(q.m(), Hq, in.positions, rope, false);
        be_.rope(k.m(), Hkv, in.positions, rope, false);
      }
      const KvCacheView view = cache.layer(l);
      be_.kv_write(k.m(), v.m(), in.slot_ids, in.positions, view);
      // o_proj's FP8 operand made as the attention writes o, unless its decode GEMM quantizes
      // o itself (a few rows: Backend::linear_fp8).
      LinearInput in_o(o.m(), false);
      produce_into(
          be_, in_o, produced_reader({L.lin[3].get()}, in_o),
          [&] { be_.attention_cached(q.m(), view, in.slot_ids, in.lengths, Hq, Hkv, o.m()); },
          [&](const Fp8Operands& out8, const QuantOptions& opt) {
            be_.attention_cached_fp8(q.m(), view, in.slot_ids, in.lengths, Hq, Hkv, o.m(), out8,
                                     opt);
          });
      L.lin[3]->forward(in_o, out.m());
    }
    LinearInput in2(h.m(), false);
    add_rmsnorm_into(be_, x.m(), &residual, norm_weight(L.post_norm), eps, rstd.f32(), in2,
                     produced_reader({L.lin[4].get(), L.lin[5].get()}, in2));
    if (L.moe) {
      moe_forward(l, in2, out.m(), false, nullptr);
    } else {
      // Gate and up: one GEMM where they stack, SwiGLU reading its halves in place.
      LinearInput in_down(mlp.m(), false);
      Linear* down_reader = produced_reader({L.lin[6].get()}, in_down);
      if (L.gate_up->runs_stacked(in2)) {
        L.gate_up->forward_stacked(in2, made(gu, 2 * I));
        swiglu_stacked_into(be_, gu.m(), in_down, down_reader);
      } else {
        L.lin[4]->forward(in2, made(gate, I));
        L.lin[5]->forward(in2, made(up, I));
        swiglu_into(be_, gate.m(), up.m(), in_down, down_reader);
      }
      L.lin[6]->forward(in_down, out.m());
    }
  }
  if (cfg_.num_hidden_layers > 0) be_.add(x.m(), out.m(), x.m());
  // Only the requested rows go through the final norm and lm_head (a row gather is an
  // embedding lookup into x).
  Tensor xr = Tensor::make(be_, r, H, ad), xf = Tensor::make(be_, r, H, ad);
  be_.embedding_forward(in.output_rows, x.m(), xr.m());
  be_.rmsnorm_forward(xr.m(), norm_weight(final_norm_), eps, xf.m(), rstd.f32());
  Tensor xf32;
  LinearInput in_head = head_input(xf, xf32, false);
  Tensor logits = Tensor::make(be_, r, cfg_.vocab_size, DType::f32);
  lm_head_->forward(in_head, logits.m());
  return logits;
}

}  // namespace fp8rl
