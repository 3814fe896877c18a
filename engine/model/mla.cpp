#include "model/mla.hpp"

#include "core/error.hpp"

namespace fp8rl {

struct LatentAttention::Saved {
  int64_t B = 0, T = 0;
  const int32_t* positions = nullptr;  // the decoder's, alive until its backward ends
  Tensor qa, rstd_qa, qa_n;            // compressed query, its norm
  LinearInput in_qa;
  Tensor q;               // [M, heads·qk], RoPE applied
  Tensor c, rstd_c, c_n;  // latent, its norm
  LinearInput in_c;
  Tensor kv, k_rope;  // kv_b's output; the shared RoPE key (rotated)
  Tensor o, lse;
  LinearInput in_o;
};

LatentAttention::~LatentAttention() = default;

LatentAttention::LatentAttention(Backend& be, const std::string& prefix, const ModelConfig& cfg)
    : be_(be), q_lora_(cfg.mla.q_lora_rank), hidden_(cfg.hidden_size) {
  const MlaConfig& a = cfg.mla;
  dims_ = MlaDims{cfg.num_attention_heads, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim,
                  a.kv_lora_rank};
  scale_ = static_cast<float>(cfg.attention_scale());
  rope_ = cfg.rope();
  const int64_t H = hidden_, Hq = dims_.heads;
  if (q_lora_ > 0) {
    q_a_ = std::make_unique<Linear>(be, prefix + "q_a_proj", q_lora_, H);
    q_a_norm_ = Param::make(be, prefix + "q_a_layernorm.weight", 1, q_lora_, false);
    q_b_ = std::make_unique<Linear>(be, prefix + "q_b_proj", Hq * dims_.qk(), q_lora_);
  } else {
    q_ = std::make_unique<Linear>(be, prefix + "q_proj", Hq * dims_.qk(), H);
  }
  kv_a_ = std::make_unique<Linear>(be, prefix + "kv_a_proj_with_mqa", dims_.latent + dims_.rope, H);
  kv_a_norm_ = Param::make(be, prefix + "kv_a_layernorm.weight", 1, dims_.latent, false);
  kv_b_ =
      std::make_unique<Linear>(be, prefix + "kv_b_proj", Hq * (dims_.nope + dims_.v), dims_.latent);
  o_ = std::make_unique<Linear>(be, prefix + "o_proj", H, Hq * dims_.v);
}

Linear* LatentAttention::linear(Module m) {
  switch (m) {
    case Module::q:
      return q_.get();
    case Module::q_a:
      return q_a_.get();
    case Module::q_b:
      return q_b_.get();
    case Module::kv_a:
      return kv_a_.get();
    case Module::kv_b:
      return kv_b_.get();
    case Module::o:
      return o_.get();
    default:
      return nullptr;
  }
}

void LatentAttention::parameters(std::vector<Param*>& out) {
  if (q_lora_ > 0) {
    out.push_back(&q_a_->weight());
    out.push_back(&q_a_norm_);
    out.push_back(&q_b_->weight());
  } else {
    out.push_back(&q_->weight());
  }
  out.push_back(&kv_a_->weight());
  out.push_back(&kv_a_norm_);
  out.push_back(&kv_b_->weight());
  out.push_back(&o_->weight());
}

std::vector<Param*> LatentAttention::norms() {
  if (q_lora_ > 0) return {&q_a_norm_, &kv_a_norm_};
  return {&kv_a_norm_};
}

void LatentAttention::clear() {
  saved_.reset();
}

void LatentAttention::forward(LinearInput& h, const int32_t* positions, int64_t B, int64_t T,
                              const NormWeights& w, const Matrix& out, bool training, float* amax) {
  const int64_t M = h.x().rows, Hq = dims_.heads, R = dims_.latent, dr = dims_.rope;
  check(M == B * T && out.rows == M && out.cols == hidden_,
        "latent attention: h and out must be [B·T, hidden]");
  const DType ad = out.dtype;
  const float eps = static_cast<float>(MlaConfig::kNormEps);
  auto S = std::make_unique<Saved>();
  S->B = B;
  S->T = T;
  S->positions = positions;
  // The query.
  S->q = Tensor::make(be_, M, Hq * dims_.qk(), ad);
  if (q_lora_ > 0) {
    S->qa = Tensor::make(be_, M, q_lora_, ad);
    q_a_->forward(h, S->qa.m());
    S->rstd_qa = Tensor::make(be_, M, 1, DType::f32);
    S->qa_n = Tensor::make(be_, M, q_lora_, ad);
    be_.rmsnorm_forward(S->qa.m(), w.q_a, eps, S->qa_n.m(), S->rstd_qa.f32());
    S->in_qa = LinearInput(S->qa_n.m(), training);
    q_b_->forward(S->in_qa, S->q.m());
  } else {
    q_->forward(h, S->q.m());
  }
  // The latent and the shared RoPE key, the per-head keys and values.
  Tensor ckv = Tensor::make(be_, M, R + dr, ad);
  kv_a_->forward(h, ckv.m());
  S->c = Tensor::make(be_, M, R, ad);
  S->k_rope = Tensor::make(be_, M, dr, ad);
  be_.copy_columns(ckv.m(), 0, S->c.m(), 0, R);
  be_.copy_columns(ckv.m(), R, S->k_rope.m(), 0, dr);
  S->rstd_c = Tensor::make(be_, M, 1, DType::f32);
  S->c_n = Tensor::make(be_, M, R, ad);
  be_.rmsnorm_forward(S->c.m(), w.kv_a, eps, S->c_n.m(), S->rstd_c.f32());
  S->in_c = LinearInput(S->c_n.m(), training);
  S->kv = Tensor::make(be_, M, Hq * (dims_.nope + dims_.v), ad);
  kv_b_->forward(S->in_c, S->kv.m());
  be_.rope_columns(S->q.m(), Hq, dims_.qk(), dims_.nope, dr, positions, rope_, false);
  be_.rope_columns(S->k_rope.m(), 1, dr, 0, dr, positions, rope_, false);
  if (amax) {
    be_.amax_into(S->q.m(), amax);
    be_.amax_into(S->c_n.m(), amax + 1);
    be_.amax_into(S->k_rope.m(), amax + 2);
  }
  S->o = Tensor::make(be_, M, Hq * dims_.v, ad);
  S->lse = Tensor::make(be_, B * Hq, T, DType::f32);
  be_.mla_attention_forward(S->q.m(), S->kv.m(), S->k_rope.m(), B, T, dims_, scale_, S->o.m(),
                            S->lse.f32());
  S->in_o = LinearInput(S->o.m(), training);
  o_->forward(S->in_o, out);
  if (training)
    saved_ = std::move(S);
  else
    saved_.reset();
}

void LatentAttention::backward(LinearInput& h, const Matrix& dout, const NormWeights& w,
                               const Matrix& dh) {
  check(saved_ != nullptr, "latent attention backward: no training forward to differentiate");
  Saved& S = *saved_;
  const int64_t M = S.B * S.T, Hq = dims_.heads, R = dims_.latent, dr = dims_.rope;
  const DType ad = S.q.dtype;
  Tensor d_o = Tensor::make(be_, M, Hq * dims_.v, ad);
  o_->backward(S.in_o, dout, d_o.m());
  Tensor dq = Tensor::make(be_, M, Hq * dims_.qk(), ad);
  Tensor dkv = Tensor::make(be_, M, Hq * (dims_.nope + dims_.v), ad);
  Tensor dkr = Tensor::make(be_, M, dr, ad);
  be_.mla_attention_backward(d_o.m(), S.q.m(), S.kv.m(), S.k_rope.m(), S.o.m(), S.lse.f32(), S.B,
                             S.T, dims_, scale_, dq.m(), dkv.m(), dkr.m());
  // A rotation's adjoint is the opposite rotation (the attention factor stays).
  be_.rope_columns(dq.m(), Hq, dims_.qk(), dims_.nope, dr, S.positions, rope_, true);
  be_.rope_columns(dkr.m(), 1, dr, 0, dr, S.positions, rope_, true);
  Tensor dcn = Tensor::make(be_, M, R, ad), dc = Tensor::make(be_, M, R, ad);
  kv_b_->backward(S.in_c, dkv.m(), dcn.m());
  be_.rmsnorm_backward(dcn.m(), S.c.m(), w.kv_a, S.rstd_c.f32(), dc.m(), kv_a_norm_.grad.m());
  Tensor dckv = Tensor::make(be_, M, R + dr, ad);
  be_.copy_columns(dc.m(), 0, dckv.m(), 0, R);
  be_.copy_columns(dkr.m(), 0, dckv.m(), R, dr);
  kv_a_->backward(h, dckv.m(), dh);
  Tensor tmp = Tensor::make(be_, M, hidden_, ad);
  if (q_lora_ > 0) {
    Tensor dqan = Tensor::make(be_, M, q_lora_, ad), dqa = Tensor::make(be_, M, q_lora_, ad);
    q_b_->backward(S.in_qa, dq.m(), dqan.m());
    be_.rmsnorm_backward(dqan.m(), S.qa.m(), w.q_a, S.rstd_qa.f32(), dqa.m(), q_a_norm_.grad.m());
    q_a_->backward(h, dqa.m(), tmp.m());
  } else {
    q_->backward(h, dq.m(), tmp.m());
  }
  be_.add(dh, tmp.m(), dh);
  saved_.reset();
}

void LatentAttention::forward_cached(LinearInput& h, const int32_t* positions,
                                     const int32_t* slot_ids, const int32_t* lengths,
                                     const NormWeights& w, const KvCacheView& cache,
                                     const Matrix& out) {
  const int64_t n = h.x().rows, Hq = dims_.heads, R = dims_.latent, dr = dims_.rope;
  const DType ad = out.dtype;
  const float eps = static_cast<float>(MlaConfig::kNormEps);
  check(!decode_w_.empty(), "latent attention: generation before the decode weight was made");
  Tensor rstd = Tensor::make(be_, n, 1, DType::f32);
  Tensor q = Tensor::make(be_, n, Hq * dims_.qk(), ad);
  Tensor qa, qa_n;
  if (q_lora_ > 0) {
    qa = Tensor::make(be_, n, q_lora_, ad);
    qa_n = Tensor::make(be_, n, q_lora_, ad);
    q_a_->forward(h, qa.m());
    be_.rmsnorm_forward(qa.m(), w.q_a, eps, qa_n.m(), rstd.f32());
    LinearInput in_qa(qa_n.m(), false);
    q_b_->forward(in_qa, q.m());
  } else {
    q_->forward(h, q.m());
  }
  Tensor ckv = Tensor::make(be_, n, R + dr, ad), c = Tensor::make(be_, n, R, ad),
         c_n = Tensor::make(be_, n, R, ad), k_rope = Tensor::make(be_, n, dr, ad);
  kv_a_->forward(h, ckv.m());
  be_.copy_columns(ckv.m(), 0, c.m(), 0, R);
  be_.copy_columns(ckv.m(), R, k_rope.m(), 0, dr);
  be_.rmsnorm_forward(c.m(), w.kv_a, eps, c_n.m(), rstd.f32());
  if (kv_b_->precision() == Precision::fp8) {
    // The latent as the trainer's FP8 kv_b reads it: quantized in 1x128 blocks along the latent
    // (each token's own blocks, so a decode step quantizes it exactly as the training forward
    // does) and dequantized.
    LinearInput in_c(c_n.m(), false);
    be_.dequantize(in_c.along(be_, kv_b_->quant_options()).q, c_n.m());
  }
  be_.rope_columns(q.m(), Hq, dims_.qk(), dims_.nope, dr, positions, rope_, false);
  be_.rope_columns(k_rope.m(), 1, dr, 0, dr, positions, rope_, false);
  be_.mla_cache_write(c_n.m(), k_rope.m(), slot_ids, positions, dims_, cache);
  Tensor o = Tensor::make(be_, n, Hq * dims_.v, ad);
  be_.mla_attention_cached(q.m(), decode_w_.m(), cache, slot_ids, lengths, dims_, scale_, o.m());
  LinearInput in_o(o.m(), false);
  o_->forward(in_o, out);
}

void LatentAttention::refresh_decode_weight(DType dtype) {
  const Linear& kvb = *kv_b_;
  const int64_t N = kvb.out_features(), K = kvb.in_features();
  // FP8 tiles dequantize exactly into FP32 (code · scale has more bits than BF16 holds).
  if (kvb.precision() == Precision::fp8) dtype = DType::f32;
  if (decode_w_.empty() || decode_w_.dtype != dtype) decode_w_ = Tensor::make(be_, N, K, dtype);
  if (kvb.precision() == Precision::fp8 && kvb.fp8_weight())
    be_.dequantize(*kvb.fp8_weight(), decode_w_.m());
  else  // fp32 masters, or the BF16 copy (the masters rounded once, as here)
    be_.convert(kvb.weight().master.m(), decode_w_.m());
}

}  // namespace fp8rl
