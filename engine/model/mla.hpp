// Multi-head latent attention (DeepSeek-V2/V3, Moonlight; Hugging Face DeepseekV3Attention),
// forward and backward, and its generation step over a latent KV cache:
//
//   q    = q_proj(h), or q_b_proj(RMSNorm(q_a_proj(h)))          [M, heads·(nope + rope)]
//   ckv  = kv_a_proj_with_mqa(h) = [c | k_rope]                     [M, latent + rope]
//   kv   = kv_b_proj(RMSNorm(c)) = per head [k_nope | v]            [M, heads·(nope + v)]
//   RoPE on each head's q rope part and on k_rope (shared by the heads), YaRN-scaled and
//   interleaved as config.json says; causal attention with softmax(scale·q·[k_nope | k_rope]);
//   o_proj of the heads' outputs [M, heads·v].
//
// The two low-rank norms use Hugging Face's default epsilon (MlaConfig::kNormEps), not
// rms_norm_eps. Generation keeps, per token, only the normalised latent and the rotated RoPE
// key (latent + rope features, not per head) and attends in the absorbed form
// (Backend::mla_attention_cached: kv_b's weight folded into the query and the output).
//
// Shapes: h, out, dh, dout [M, H]; M = B·T rows in training (sequence-major).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/linear.hpp"

namespace fp8rl {

class LatentAttention {
 public:
  // prefix: "model.layers.3.self_attn." (the Hugging Face names of its linears and norms).
  LatentAttention(Backend& be, const std::string& prefix, const ModelConfig& cfg);
  ~LatentAttention();

  const MlaDims& dims() const { return dims_; }
  // Its linear m (q, q_a, q_b, kv_a, kv_b or o), or null when it has none.
  Linear* linear(Module m);
  // Parameters in Hugging Face order: q_proj or q_a_proj, q_a_layernorm, q_b_proj; then
  // kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj.
  void parameters(std::vector<Param*>& out);
  // Its norm weights (q_a_layernorm when q is compressed, kv_a_layernorm).
  std::vector<Param*> norms();

  // The norms' weights as the ops read them (the decoder's BF16 copies, or the masters).
  struct NormWeights {
    Matrix q_a, kv_a;
  };
  // out [M, H] (written) = attention of h over B sequences of T tokens (positions: int32 [M],
  // backend memory). training keeps what backward() needs. amax (when given: 3 floats in
  // backend memory) receives the amax of q, of the normalised latent and of the rotated RoPE
  // key (FP8 cache calibration; Backend::amax_into, no synchronisation).
  void forward(LinearInput& h, const int32_t* positions, int64_t B, int64_t T, const NormWeights& w,
               const Matrix& out, bool training, float* amax);
  // dh [M, H] (written) for dout [M, H]; weight and norm gradients accumulate. Needs a training
  // forward first and h as it gave it.
  void backward(LinearInput& h, const Matrix& dout, const NormWeights& w, const Matrix& dh);
  void clear();

  // Generation: row i of h (n rows) at positions[i] of slot slot_ids[i]; its latent and RoPE key
  // are written to the cache (one layer's view) and it attends to positions 0 … lengths[i] − 1
  // of its slot. out [n, H] (written). Inputs in backend memory; no host work (graph capture).
  void forward_cached(LinearInput& h, const int32_t* positions, const int32_t* slot_ids,
                      const int32_t* lengths, const NormWeights& w, const KvCacheView& cache,
                      const Matrix& out);
  // Makes the absorbed form's copy of kv_b's weight (in dtype, f32 or bf16; FP32 for FP8 tiles,
  // whose dequantized values BF16 cannot hold) from the weight kv_b computes with (its FP8 tiles
  // dequantized, its BF16 copy, or the FP32 masters). Called whenever those change (precision,
  // refresh, a checkpoint's tiles). With an FP8 kv_b the cached latent is the one its FP8 GEMM
  // reads in training (quantized in 1x128 blocks, dequantized), so the two sides attend over the
  // same values.
  void refresh_decode_weight(DType dtype);

 private:
  struct Saved;
  Backend& be_;
  MlaDims dims_;
  int64_t q_lora_, hidden_;
  float scale_;
  Rope rope_;
  std::unique_ptr<Linear> q_, q_a_, q_b_, kv_a_, kv_b_, o_;
  Param q_a_norm_, kv_a_norm_;
  Tensor decode_w_;  // kv_b's weight for the absorbed form
  std::unique_ptr<Saved> saved_;
};

}  // namespace fp8rl
