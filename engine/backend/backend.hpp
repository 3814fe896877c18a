// The backend interface: memory and the numeric ops every backend implements.
// The CPU backend (cpu/) is the exact reference; the CUDA backend is a module loaded at run
// time (kernels/, see cuda_module_api.hpp). All matrices are row-major and contiguous.
//
// Shape legend: M tokens (rows of activations), N output features, K input features.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/rope_rules.hpp"
#include "dist/communicator.hpp"
#include "fp8/format.hpp"

namespace fp8rl {

enum class DType : uint8_t { f32, bf16, fp8 };

inline size_t dtype_size(DType t) {
  return t == DType::f32 ? 4 : t == DType::bf16 ? 2 : 1;
}
inline const char* dtype_name(DType t) {
  return t == DType::f32 ? "f32" : t == DType::bf16 ? "bf16" : "fp8";
}

class Backend;

// The head sizes of multi-head latent attention (DeepSeek-V3; model/config.hpp: MlaConfig):
// `heads` query heads, each with a no-RoPE part of `nope` and a RoPE part of `rope` features
// (query and key) and a value of `v`; keys and values come from a per-token latent of
// `latent` features.
struct MlaDims {
  int64_t heads = 0, nope = 0, rope = 0, v = 0, latent = 0;
  int64_t qk() const { return nope + rope; }
};

// One layer's KV cache in a backend's memory (see Backend::kv_write). Latent attention's cache
// (Backend::mla_cache_write) keeps one row per token in k, [latent | rope key] (width = their
// sum), no v, and with fp8 one scale for the latent part (k_scale_inv) and one for the rope
// part (v_scale_inv).
struct KvCacheView {
  void* k = nullptr;  // [num_slots·max_len, width] values (f32/bf16) or E4M3 codes (fp8)
  void* v = nullptr;
  int64_t num_slots = 0, max_len = 0, width = 0;
  DType dtype = DType::bf16;
  const float* k_scale_inv = nullptr;  // fp8: one float in backend memory (dequantization scale)
  const float* v_scale_inv = nullptr;
};

// Memory owned by a backend: host memory on the CPU, device memory on CUDA. Move-only.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* owner, void* data, size_t bytes) : owner_(owner), data_(data), bytes_(bytes) {}
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void reset();
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A dense row-major [rows, cols] matrix in a backend's memory.
struct Matrix {
  void* data = nullptr;
  int64_t rows = 0, cols = 0;
  DType dtype = DType::f32;
};

// A block-quantized FP8 matrix [rows, cols] in a backend's memory: one code byte per element
// (row-major) and FP32 dequantization scales (1/s) in the layout of fp8/format.hpp.
// row1x128 blocks run along cols (the contracted dimension of the GEMMs below).
struct Fp8Matrix {
  uint8_t* codes = nullptr;
  float* scale_inv = nullptr;
  int64_t rows = 0, cols = 0;
  ScaleBlock block = ScaleBlock::row1x128;
  Fp8Format format = Fp8Format::e4m3;
};

// What one quantization did, for telemetry (scale histograms are taken from the scales).
struct QuantStats {
  int64_t elements = 0;
  int64_t blocks = 0;
  int64_t saturated = 0;          // |x·s| above the format's max: clamped
  int64_t flushed_to_zero = 0;    // x ≠ 0 whose code is ±0
  int64_t degenerate_blocks = 0;  // amax 0, inf or NaN: scale 1 used
  double err_sq = 0.0;            // Σ (x − dequant(q))² over finite x
  double ref_sq = 0.0;            // Σ x² over finite x
  double relative_error() const;  // sqrt(err_sq / ref_sq), 0 when ref_sq is 0
  QuantStats& operator+=(const QuantStats& o);
};

// Quantization statistics summed in a backend's memory (QuantOptions::stats_sum): QuantStats'
// fields, laid out for device atomics. Zero it (Backend::zero) before summing and download it to
// read it.
struct QuantStatsSum {
  unsigned long long elements = 0, blocks = 0, saturated = 0, flushed_to_zero = 0,
                     degenerate_blocks = 0;
  double err_sq = 0.0, ref_sq = 0.0;
  QuantStats stats() const;
  QuantStatsSum& operator+=(const QuantStats& s);
};

struct QuantOptions {
  Fp8Format format = Fp8Format::e4m3;
  bool pow2_scales = false;  // round scales down to powers of two
  // When set (a record in the backend's memory), the statistics of the quantization — of
  // `along` for quantize_with_transpose — are added there, without the synchronisation that
  // a QuantStats result costs on a device: a run sums its per-linear FP8 error signal this way
  // every step and downloads it once.
  QuantStatsSum* stats_sum = nullptr;
};

// The FP8 operands of a tensor that linears read, made by the op that produces the tensor (an
// RMSNorm, a SwiGLU) while it writes it, instead of a separate quantization pass: `along` [M, K]
// 1x128 along K (fprop), and `transposed` [K, M] 1x128 along M (wgrad) unless its codes are
// null (a forward-only input). Both in the options' format.
struct Fp8Operands {
  Fp8Matrix along;
  Fp8Matrix transposed;
};

// A recorded sequence of a backend's ops (a CUDA graph), replayed with the pointers, sizes and
// scalar arguments it was recorded with (see Backend::capture). Destroying it waits for its last
// replay and frees the memory the recording allocated.
class BackendGraph {
 public:
  virtual ~BackendGraph() = default;
  // Queues one run of the recorded ops on the backend (asynchronous, like the ops themselves).
  virtual void replay() = 0;
};

// The time one backend op took over the calls since op timing was turned on.
struct OpTiming {
  std::string op;  // "gemm_fp8", "quantize_with_transpose", ...
  int64_t calls = 0;
  double host_seconds = 0;     // in the op's call (launch overhead, host work, waits)
  double device_seconds = -1;  // between the events around its queued work; −1: not measured
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;    // "cpu" or "cuda"
  virtual std::string device() const = 0;  // e.g. "2 threads, OpenBLAS 0.3.21" or "NVIDIA H100"

  // --- memory
  Buffer alloc(size_t bytes) { return Buffer(this, raw_alloc(bytes), bytes); }
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() = 0;
  // Copies bytes within this backend's memory (device to device on CUDA); the bandwidth
  // baseline of the quantization benchmarks.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // Sets bytes to zero (fresh allocations are uninitialised).
  virtual void zero(void* dst, size_t bytes) = 0;
  // Bytes alloc() can still hand out (on CUDA the device's free memory plus what the
  // allocator's pool holds unused), or -1 where the backend does not limit them (the CPU's
  // host memory). What the generator sizes its waves of sequences by.
  virtual int64_t memory_available() { return -1; }
  // Whether the `bytes` bytes at a and at b (both in this backend's memory) are the same bits,
  // compared where they live (the layer audit's check of the rollout weights, without copying
  // them to the host). Synchronises.
  virtual bool equal_bytes(const void* a, const void* b, size_t bytes) = 0;
  struct BytesPair {
    const void* a;
    const void* b;
    size_t bytes;
  };
  // equal_bytes for each pair, all compared in one synchronisation (the layer audit's check
  // of a layer's weights at once).
  virtual std::vector<bool> equal_bytes(const std::vector<BytesPair>& pairs) = 0;

  // --- FP8 numerics
  // Quantizes x (f32 or bf16, [rows, cols]) into out (same shape; out.block chooses 1x128
  // along cols or 128x128 tiles). stats, when given, receives the statistics (costs a sync
  // on devices); opt.stats_sum, when set, has them added (no sync).
  virtual void quantize(const Matrix& x, const Fp8Matrix& out, const QuantOptions& opt,
                        QuantStats* stats) = 0;

  // One pass over x [M, K]: along = x quantized 1x128 along K ([M, K]) and transposed = xᵀ
  // quantized 1x128 along M ([K, M]) — the two operands a linear layer needs (fprop/dgrad
  // use x, wgrad uses xᵀ). Codes and scales equal those of quantize() on x and on xᵀ.
  // opt.stats_sum, when set, has the statistics of `along` added.
  virtual void quantize_with_transpose(const Matrix& x, const Fp8Matrix& along,
                                       const Fp8Matrix& transposed, const QuantOptions& opt,
                                       QuantStats* stats_along, QuantStats* stats_transposed) = 0;

  // out [rows, cols] (f32 or bf16) = codes · scale_inv.
  virtual void dequantize(const Fp8Matrix& q, const Matrix& out) = 0;

  // wt = wᵀ for a 128x128-tile matrix: codes transposed and the scale grid transposed
  // (a tile survives a transpose, so this is exact; dgrad uses it).
  virtual void transpose_fp8(const Fp8Matrix& w, const Fp8Matrix& wt) = 0;

  // Adds to counts (hi − lo + 2 counters in this backend's memory: underflow, one per power of
  // two from 2^lo to 2^hi, overflow) one count per block of q — each 1x128 block or 128x128
  // tile, not the padding entries of a tile grid — in the bin scale_log2_bin(1/s, lo, hi)
  // (fp8/format.hpp) of its 1/s. Asynchronous, no synchronisation: the FP8 telemetry sums its
  // scale histograms where the scales live and reads them once per step. lo < hi, hi − lo ≤ 256.
  virtual void scale_log2_histogram(const Fp8Matrix& q, int lo, int hi, int64_t* counts) = 0;

  // c [M, N] = a [M, K] · b [N, K]ᵀ + beta · c. a, b: f32 or bf16 (same dtype); c: f32 or
  // bf16 (beta must be 0 for bf16). FP32 accumulation.
  virtual void gemm(const Matrix& a, const Matrix& b, const Matrix& c, float beta) = 0;

  // c [M, N] = dequant(a [M, K]) · dequant(b [N, K])ᵀ + beta · c, FP32 accumulation.
  // fprop: a = X 1x128, b = W tiles. dgrad: a = dY 1x128, b = Wᵀ tiles. wgrad: a = dYᵀ 1x128,
  // b = Xᵀ 1x128, c = dW f32 with beta = 1.
  virtual void gemm_fp8(const Fp8Matrix& a, const Fp8Matrix& b, const Matrix& c, float beta) = 0;

  // Why gemm_fp8 cannot run these operands here (nullopt when it can).
  virtual std::optional<std::string> gemm_fp8_unsupported(const Fp8Matrix& a, const Fp8Matrix& b,
                                                          const Matrix& c) const = 0;

  // A forward-only FP8 linear in one call: y [M, N] = dequant(q(x)) · dequant(w)ᵀ, where q(x) is
  // x [M, K] (f32 or bf16) quantized 1x128 along K with opt — the codes and scales quantize()
  // makes — and w [N, K] holds 128x128 tiles in opt.format; y f32 or bf16, written. This
  // default (the CPU's: the reference) quantizes into a temporary and calls gemm_fp8; a device
  // fuses the quantization into a GEMM for few rows (decode: one launch, x read once, no FP8 copy
  // of it) and may sum in another order (within gemm_fp8's bound).
  virtual void linear_fp8(const Matrix& x, const Fp8Matrix& w, const Matrix& y,
                          const QuantOptions& opt);
  // The most rows M for which one linear_fp8 per linear beats quantizing a shared input once and
  // calling gemm_fp8 per linear (q, k and v read one input); 0: never.
  virtual int64_t linear_fp8_max_rows() const { return 0; }

  // --- Grouped GEMMs: one call for one linear of every expert of a mixture-of-experts layer,
  // over the experts' tokens sorted by expert (the contiguous layout: expert g owns rows
  // [first_g, first_g + rows[g]) of the row-stacked operands, first_g = Σ_{h<g} rows[h]). rows
  // is a host vector of G ≥ 1 counts ≥ 0 (empty groups allowed) summing to the stacked row
  // count. The defaults (the CPU's: the reference) call gemm / gemm_fp8 once per non-empty
  // group, so their results are exactly those of the per-group calls; a device may run all
  // groups in fewer launches and sum in another order (within the single op's bound).

  // c [ΣM_g, N] = per group g: a_g [M_g, K] · b[g] [N, K]ᵀ + beta · c_g, where a_g and c_g are
  // group g's rows of a [ΣM_g, K] and c. gemm's operand rules (a and every b[g] the same
  // dtype, f32 or bf16; c f32 or bf16, beta 0 for bf16). fprop: b[g] = W_g; dgrad: b[g] = W_gᵀ.
  virtual void gemm_grouped(const Matrix& a, const std::vector<Matrix>& b, const Matrix& c,
                            const std::vector<int64_t>& rows, float beta);

  // c [ΣM_g, N] = per group g: dequant(a_g) · dequant(b[g] [N, K])ᵀ + beta · c_g, FP32
  // accumulation. a [ΣM_g, K] holds 1x128 codes and scales in the grouped layout: group g's codes
  // are rows [first_g, first_g + M_g) and its scales, [KB, M_g] as a standalone 1x128 matrix
  // lays them (s[cb·M_g + r], KB = ceil(K/128)), start at a.scale_inv + KB·first_g — what
  // quantizing each group's rows on their own writes there, and what group_scales makes of one
  // quantize() of all rows. b[g]: 128x128 tiles (fprop W_g, dgrad W_gᵀ); c f32 or bf16.
  virtual void gemm_fp8_grouped(const Fp8Matrix& a, const std::vector<Fp8Matrix>& b,
                                const Matrix& c, const std::vector<int64_t>& rows, float beta);

  // The grouped layout of gemm_fp8_grouped from quantize()'s: q [ΣM_g, K] 1x128 as one quantize()
  // of all rows wrote it (s[cb·ΣM + r]); out (scale_count(row1x128, ΣM, K) floats, not
  // q.scale_inv) receives the same scales with each group's [KB, M_g] block at KB·first_g. The
  // codes need nothing: 1x128 blocks lie within a row, so one quantization of all rows gives each
  // group's codes and scales exactly as a quantization of its rows alone would.
  virtual void group_scales(const Fp8Matrix& q, const std::vector<int64_t>& rows, float* out);

  // A weight gradient c [N, K] = dyᵀ · x + beta·c: dy [M, N] and x [M, K] (f32 or bf16, one
  // dtype), c f32 or bf16; FP32 accumulation. The default transposes dy and x and calls gemm
  // (the CPU: its bits); a device multiplies the stored operands with transposed reads, as a
  // BF16 trainer does (CUDA: cuBLASLt's NT form; without an algorithm for the shape, the
  // default).
  virtual void gemm_wgrad(const Matrix& dy, const Matrix& x, const Matrix& c, float beta);
  // Weight gradients, one per group: c[g] [N, K] (f32) += dy_gᵀ · x_g, dy [ΣM_g, N] and
  // x [ΣM_g, K] (f32 or bf16, the same dtype) in the contiguous layout. The default is what
  // Linear's backward does per linear: gemm_wgrad with beta 1 per group.
  virtual void gemm_wgrad_grouped(const Matrix& dy, const Matrix& x, const std::vector<Matrix>& c,
                                  const std::vector<int64_t>& rows);

  // FP8 weight gradients, one per group: c[g] [N, K] (f32) += dequant(a[g] [N, M_g]) ·
  // dequant(b[g] [K, M_g])ᵀ with a[g] = dY_gᵀ and b[g] = X_gᵀ quantized 1x128 along M_g (each
  // group's own quantize_with_transpose: a 1x128 block along M must not span two groups).
  // Groups with M_g = 0 add nothing. The default calls gemm_fp8 with beta 1 per group.
  virtual void gemm_fp8_wgrad_grouped(const std::vector<Fp8Matrix>& a,
                                      const std::vector<Fp8Matrix>& b,
                                      const std::vector<Matrix>& c);

  // --- Model ops (forward beside backward). Tensors are f32 or bf16 ("activation dtype");
  // arithmetic is FP32 and each output is rounded once to its dtype (nearest even), so the CPU
  // and CUDA round at the same points. Parameter gradients are f32 and ACCUMULATED (+=);
  // activation gradients are written (=). Shapes: M rows (tokens), H hidden, V vocabulary,
  // B sequences of T tokens (M = B·T), Hq query heads, Hkv key/value heads, D head dim.

  // out = x converted to out.dtype (same shape).
  virtual void convert(const Matrix& x, const Matrix& out) = 0;
  // out [cols, rows] = xᵀ (same dtype).
  virtual void transpose(const Matrix& x, const Matrix& out) = 0;
  // out = a + b (all the same shape; out may alias a).
  virtual void add(const Matrix& a, const Matrix& b, const Matrix& out) = 0;

  // out [M, H] = table [V, H] rows ids[M] (ids: int32 in this backend's memory; each < V).
  virtual void embedding_forward(const int32_t* ids, const Matrix& table, const Matrix& out) = 0;
  // dtable [V, H] (f32) += scatter of dout [M, H] rows into rows ids[M].
  virtual void embedding_backward(const int32_t* ids, const Matrix& dout, const Matrix& dtable) = 0;

  // Mixture-of-experts combine: out [M, H] = Σ_{j<k} w[m·k + j] · y[pos[m·k + j]] (j ascending,
  // FP32 sums), where y [N, H] holds the experts' outputs, one row per (token, choice), and
  // pos (int32), w (f32) [M·k] live in backend memory. With w all 1 it sums rows back to their
  // tokens (the experts' input gradients).
  virtual void moe_combine(const Matrix& y, const int32_t* pos, const float* w, int64_t k,
                           const Matrix& out) = 0;
  // Its backward: dy[pos[i]] = w[i]·dout[i / k] (rows of dy no pos names are left as they are)
  // and dw[i] = Σ_h dout[i / k][h]·y[pos[i]][h] (f32, h ascending), for i < M·k.
  virtual void moe_combine_backward(const Matrix& dout, const Matrix& y, const int32_t* pos,
                                    const float* w, int64_t k, const Matrix& dy, float* dw) = 0;

  // Row-wise RMSNorm: y [M, H] = x · rstd · w, rstd[m] = 1/sqrt(mean_h x² + eps) (f32, saved).
  // w: [1, H] f32 or bf16. Per-head norms call it with x viewed as [M·heads, D].
  virtual void rmsnorm_forward(const Matrix& x, const Matrix& w, float eps, const Matrix& y,
                               float* rstd) = 0;
  // The residual stream's add and the next norm in one pass: x += r (rounded to x's dtype, in
  // place; r [M, H]), then rmsnorm_forward(x, w, eps, y, rstd); _fp8 then as rmsnorm_forward_fp8
  // (y's FP8 operands into out). The defaults run add and the norm (the CPU: their bits); CUDA
  // reads x once (the FP8 one: forward-only operands of rows up to 4,096).
  virtual void add_rmsnorm_forward(const Matrix& x, const Matrix& r, const Matrix& w, float eps,
                                   const Matrix& y, float* rstd);
  virtual void add_rmsnorm_forward_fp8(const Matrix& x, const Matrix& r, const Matrix& w, float eps,
                                       const Matrix& y, float* rstd, const Fp8Operands& out,
                                       const QuantOptions& opt);
  // dx [M, H] = rstd·(w·dy − x̂·mean_h(w·dy·x̂)) with x̂ = x·rstd; dw [1, H] (f32) += Σ_m dy·x̂.
  virtual void rmsnorm_backward(const Matrix& dy, const Matrix& x, const Matrix& w,
                                const float* rstd, const Matrix& dx, const Matrix& dw) = 0;

  // Rotary embedding in place on x [M, heads·D], Hugging Face "rotate_half" layout: for each
  // head, pairs (i, i + D/2), i < D/2, rotate by angle positions[m] · rope_inv_freq(rope, i, D)
  // (backend/rope_rules.hpp: theta^(−2i/D), Llama 3's scaling when asked). inverse = true
  // rotates by −angle (the backward pass). positions: int32, backend memory.
  virtual void rope(const Matrix& x, int64_t heads, const int32_t* positions, const Rope& rope,
                    bool inverse) = 0;

  // A generation step's q, k and v from the stacked q/k/v projection qkv [M, (hq + 2·hkv)·D]
  // (FusedLinears): q [M, hq·D] and k [M, hkv·D] its first columns, each head normalized when
  // q_norm / k_norm ([1, D]) are given (Qwen3's QK-norm, as rmsnorm_forward of the heads) and
  // rotated (rope, not inverse); v [M, hkv·D] its last columns. All of qkv's dtype. The default
  // runs copy_columns, rmsnorm_forward and rope one after the other (the CPU: their bits); a
  // device does it in one pass with the same arithmetic (CUDA: head dims 64, 128 and 256).
  virtual void qkv_heads(const Matrix& qkv, int64_t hq, int64_t hkv, const Matrix& q_norm,
                         const Matrix& k_norm, float eps, const int32_t* positions,
                         const Rope& rope, const Matrix& q, const Matrix& k, const Matrix& v);

  // Causal grouped-query attention over B sequences of T tokens. q [B·T, Hq·D], k, v
  // [B·T, Hkv·D] (query head h reads kv head h / (Hq/Hkv)), o [B·T, Hq·D], scale 1/sqrt(D).
  // lse [B, Hq, T] (f32): log-sum-exp of each query's scaled scores, saved for backward.
  virtual void attention_forward(const Matrix& q, const Matrix& k, const Matrix& v, int64_t B,
                                 int64_t T, int64_t Hq, int64_t Hkv, const Matrix& o,
                                 float* lse) = 0;
  // Gradients of attention_forward: dq, dk, dv (written, same shapes as q, k, v).
  virtual void attention_backward(const Matrix& dout, const Matrix& q, const Matrix& k,
                                  const Matrix& v, const Matrix& o, const float* lse, int64_t B,
                                  int64_t T, int64_t Hq, int64_t Hkv, const Matrix& dq,
                                  const Matrix& dk, const Matrix& dv) = 0;

  // SwiGLU: h [M, I] = silu(gate) · up, silu(g) = g / (1 + e^−g).
  virtual void swiglu_forward(const Matrix& gate, const Matrix& up, const Matrix& h) = 0;
  virtual void swiglu_backward(const Matrix& dh, const Matrix& gate, const Matrix& up,
                               const Matrix& dgate, const Matrix& dup) = 0;

  // --- Producers that quantize what they write (the FP8 operands of the linears reading it).
  // Each gives, bit for bit, its op followed by quantize() (forward-only operands) or
  // quantize_with_transpose() of the output as rounded to its dtype, with opt (opt.stats_sum:
  // the statistics of `along` added). An output whose data is null is not written (its dtype
  // still says how the values are rounded before quantization): when only FP8 linears read it,
  // the tensor itself need not exist. These defaults (the CPU's: the reference) run the op and
  // the quantization one after the other; a device does both in one pass over the data.

  // rmsnorm_forward(x, w, eps, y, rstd), then y's FP8 operands into out.
  virtual void rmsnorm_forward_fp8(const Matrix& x, const Matrix& w, float eps, const Matrix& y,
                                   float* rstd, const Fp8Operands& out, const QuantOptions& opt);
  // The residual stream's gradient through a pre-norm block and its FP8 operands:
  // rmsnorm_backward(dy, x, w, rstd, d, dw) into d of dx's dtype, then dx = residual + d (add;
  // residual of dx's shape and any dtype, skipped when its data is null), then dx's FP8
  // operands into out. dx must not alias dy, x or residual. What a linear reading the gradient
  // (o_proj, down_proj) takes in place of quantizing it. The operands [M, K] may view dx [R, D]
  // as M rows of K = heads·D (R = M·heads): a per-head norm's gradient (Qwen3's q/k norms,
  // called with [M·heads, D] views as rmsnorm_backward is) quantized for q_proj / k_proj.
  virtual void rmsnorm_backward_fp8(const Matrix& dy, const Matrix& x, const Matrix& w,
                                    const float* rstd, const Matrix& residual, const Matrix& dx,
                                    const Matrix& dw, const Fp8Operands& out,
                                    const QuantOptions& opt);
  // swiglu_forward(gate, up, h), then h's FP8 operands into out.
  virtual void swiglu_forward_fp8(const Matrix& gate, const Matrix& up, const Matrix& h,
                                  const Fp8Operands& out, const QuantOptions& opt);
  // The same from the stacked gate/up projection gu [M, 2I] (FusedLinears: gate's I columns, then
  // up's): h [M, I] = swiglu_forward of the two halves; _fp8 also h's FP8 operands into out, as
  // swiglu_forward_fp8 (h's data may be null there). The defaults copy the halves out and call
  // those (the CPU: their bits); a device reads the halves in place.
  virtual void swiglu_forward_stacked(const Matrix& gu, const Matrix& h);
  virtual void swiglu_forward_stacked_fp8(const Matrix& gu, const Matrix& h, const Fp8Operands& out,
                                          const QuantOptions& opt);
  // swiglu_backward(dh, gate, up, dgate, dup), then dgate's FP8 operands into out_gate (with
  // opt_gate) and dup's into out_up (with opt_up): the gradients the gate and up projections'
  // backward reads. Both outputs need `transposed` (wgrad).
  virtual void swiglu_backward_fp8(const Matrix& dh, const Matrix& gate, const Matrix& up,
                                   const Matrix& dgate, const Matrix& dup,
                                   const Fp8Operands& out_gate, const QuantOptions& opt_gate,
                                   const Fp8Operands& out_up, const QuantOptions& opt_up);

  // Token log-probabilities of logits [M, V] scaled by inv_temperature: logp[m] =
  // log_softmax(logits[m]·inv_t)[targets[m]] (f32); entropy[m] of that distribution when
  // entropy is not null. targets: int32 in backend memory.
  virtual void token_logprobs(const Matrix& logits, const int32_t* targets, float inv_temperature,
                              float* logp, float* entropy) = 0;
  // dlogits [M, V] = dlogp[m] · inv_t · (onehot(targets[m]) − softmax(logits[m]·inv_t)).
  virtual void token_logprobs_backward(const Matrix& logits, const int32_t* targets,
                                       float inv_temperature, const float* dlogp,
                                       const Matrix& dlogits) = 0;

  // Samples one token per row of logits [M, V] (f32 or bf16) from softmax(z), z = logits[m]·inv_t
  // (inv_temperature > 0 and finite). With e_j = exp(z_j − max z) and u = uniforms[m]:
  // tokens[m] = the smallest j (index order) with Σ_{i≤j} e_i > u·Σ_i e_i — a u below 0 (or NaN)
  // counts as 0; when no j qualifies (u ≥ 1) the last j with e_j > 0. The uniforms are FP64, as
  // host sampling draws them (Rng::uniform), so both compare the same u. uniforms == nullptr:
  // greedy, tokens[m] = the first index of the row's largest logit (log-prob still at inv_t;
  // the generator passes 1, as host greedy decoding does). logprobs[m] = z_j − lse(z) of the
  // chosen j, in the FP32 steps of this backend's token_logprobs (the trainer's p for the same
  // row). A row whose Σ e is not finite (a NaN or +inf logit, or every logit −inf) draws no
  // token: tokens[m] = −1, logprobs[m] = NaN. uniforms (f64), tokens (int32), logprobs (f32):
  // M values each in backend memory. The CPU sums e in FP64 in index order (host sampling,
  // rollout/sampling.cpp, uses the same code); other backends agree up to summation order, so
  // their token can differ where u·Σ e falls within rounding of a cumulative-sum boundary.
  virtual void sample_tokens(const Matrix& logits, float inv_temperature, const double* uniforms,
                             int32_t* tokens, float* logprobs) = 0;

  // Largest |x| over all elements (NaN if any element is NaN); synchronous. Used to calibrate
  // the FP8 KV-cache scales.
  virtual float amax(const Matrix& x) = 0;
  // amax(x) written to *out, one float in this backend's memory, without waiting for it: the
  // training forwards record the KV amax of every layer this way and the host reads them once
  // a step (DecoderModel::set_kv_calibrator), not three synchronisations per layer.
  virtual void amax_into(const Matrix& x, float* out) = 0;

  // --- KV cache (generation). One layer's cache holds K and V for `num_slots` sequences of up to
  // `max_len` positions: row (slot, pos) = slot·max_len + pos of a [num_slots·max_len, width]
  // matrix, width = Hkv·D. dtype f32 (fp32 reference), bf16, or fp8 (E4M3 codes with one
  // dequantization scale for K and one for V per layer: x ≈ code · scale_inv).
  // Writes row i of k and v [n, width] to cache row (slot_ids[i], positions[i]); fp8 quantizes
  // with code = e4m3(x · (1/scale_inv)), saturating. slots/positions: int32, backend memory.
  virtual void kv_write(const Matrix& k, const Matrix& v, const int32_t* slot_ids,
                        const int32_t* positions, const KvCacheView& cache) = 0;
  // o [n, Hq·D]: query row i (q [n, Hq·D]) attends to cache rows (slot_ids[i], 0 … lengths[i]−1)
  // of its kv head (GQA as in attention_forward), scale 1/sqrt(D), FP32 arithmetic on the
  // dequantized cache. A prompt's prefill is n = its length rows with lengths pos + 1.
  virtual void attention_cached(const Matrix& q, const KvCacheView& cache, const int32_t* slot_ids,
                                const int32_t* lengths, int64_t Hq, int64_t Hkv,
                                const Matrix& o) = 0;
  // attention_cached, and o quantized as the forward-only input of an FP8 linear (o_proj of a
  // generation step): out.along [n, Hq·D] 1x128 in opt's format, as quantize(o, out.along, opt)
  // makes it; out.transposed must be null, o is written. The default runs the two ops; a
  // backend may quantize each head's block as its attention writes it (CUDA: the tensor-core
  // decode kernel's epilogue or its split combine, where opt sums no statistics).
  virtual void attention_cached_fp8(const Matrix& q, const KvCacheView& cache,
                                    const int32_t* slot_ids, const int32_t* lengths, int64_t Hq,
                                    int64_t Hkv, const Matrix& o, const Fp8Operands& out,
                                    const QuantOptions& opt);

  // --- Multi-head latent attention (DeepSeek-V3). Not every backend has these: the defaults
  // throw naming the op and the backend. Shapes: q [M, heads·(nope + rope)], each head's no-RoPE
  // part then its RoPE part; kv [M, heads·(nope + v)] (kv_b's output), each head's no-RoPE key
  // then its value; k_rope [M, rope], the RoPE key every head shares; o [M, heads·v].

  // out[:, out_col + c] = x[:, x_col + c] for c < cols, every row (x, out: same rows, f32 or
  // bf16, converted). Splits kv_a's output into the latent and the RoPE key, joins their
  // gradients; splits the stacked q/k/v GEMM's output (FusedLinears).
  virtual void copy_columns(const Matrix& x, int64_t x_col, const Matrix& out, int64_t out_col,
                            int64_t cols);
  // Rotary embedding in place on columns [first, first + dims) of each of `heads` groups of
  // head_width columns of x [M, heads·head_width]: pairs (i, i + dims/2), or (2i, 2i + 1) with
  // rope.interleaved, rotate by positions[m]·rope_inv_freq(rope, i, dims), cos and sin ×
  // rope.attention_factor. inverse: the adjoint (−angle, the same factor: backward).
  virtual void rope_columns(const Matrix& x, int64_t heads, int64_t head_width, int64_t first,
                            int64_t dims, const int32_t* positions, const Rope& rope, bool inverse);
  // Causal attention over B sequences of T tokens: head h's query [q_nope | q_rope] attends to
  // keys [kv_nope_h | k_rope] with softmax(scale·q·k) (scale: MlaConfig's, not 1/sqrt(D)),
  // summing the values kv_v_h. lse [B, heads, T] (f32) saved for backward. FP32 arithmetic, the
  // score a dot product over the nope then the rope features in order.
  virtual void mla_attention_forward(const Matrix& q, const Matrix& kv, const Matrix& k_rope,
                                     int64_t B, int64_t T, const MlaDims& d, float scale,
                                     const Matrix& o, float* lse);
  // Its gradients dq, dkv, dk_rope (written; dk_rope sums the heads, in head order).
  virtual void mla_attention_backward(const Matrix& dout, const Matrix& q, const Matrix& kv,
                                      const Matrix& k_rope, const Matrix& o, const float* lse,
                                      int64_t B, int64_t T, const MlaDims& d, float scale,
                                      const Matrix& dq, const Matrix& dkv, const Matrix& dk_rope);
  // The latent cache (generation): writes row i of latent [n, d.latent] and k_rope [n, d.rope]
  // to cache row (slot_ids[i], positions[i]) = [latent | k_rope] (fp8: each part quantized with
  // its scale: code = e4m3(x / scale_inv), saturating).
  virtual void mla_cache_write(const Matrix& latent, const Matrix& k_rope, const int32_t* slot_ids,
                               const int32_t* positions, const MlaDims& d,
                               const KvCacheView& cache);
  // Attention of query row i (q [n, heads·(nope + rope)]) over cache rows (slot_ids[i],
  // 0 … lengths[i] − 1) in the absorbed form: kv_b's weight w_kv_b [heads·(nope + v), latent]
  // (f32 or bf16) folded into the query and the output. Per head: q_lat = W_UKᵀ·q_nope (W_UK
  // the head's nope rows), score_j = scale·(q_lat·c_j + q_rope·r_j) with c_j, r_j the cached
  // latent and rope key (dequantized), p = softmax, o = W_UV·Σ_j p_j c_j (W_UV the head's v
  // rows). FP32 arithmetic; o [n, heads·v] rounded once.
  virtual void mla_attention_cached(const Matrix& q, const Matrix& w_kv_b, const KvCacheView& cache,
                                    const int32_t* slot_ids, const int32_t* lengths,
                                    const MlaDims& d, float scale, const Matrix& o);

  // --- Graphs
  // Records the ops `work` issues on this backend into a graph instead of running them: nothing
  // is computed until replay(). Memory that work allocates belongs to the graph (fixed
  // addresses, freed with it; freeing it inside work is a no-op), so work must not keep such
  // buffers past the call. work must not synchronise (download, amax, sum_squares, statistics)
  // nor upload from the host: its inputs are device buffers filled before each replay. Whatever
  // the recording reads (weights, caches, scratch inputs) must stay at its address while the
  // graph lives. Returns null, with the reason in why_not, when this backend has no graphs (the
  // CPU) or the recording failed (work's exceptions included); the backend is usable either way.
  virtual std::unique_ptr<BackendGraph> capture(const std::function<void()>& work,
                                                std::string& why_not);

  // --- Optimizer (f32 vectors of n elements in backend memory)
  // Σ x² in FP64 accumulation (gradient norms).
  virtual double sum_squares(const float* x, int64_t n) = 0;
  // x *= s.
  virtual void scale(float* x, int64_t n, float s) = 0;
  // Decoupled AdamW step t ≥ 1: m = β1 m + (1−β1) g; v = β2 v + (1−β2) g²;
  // p −= lr · (m̂ / (sqrt(v̂) + eps) + wd · p) with m̂ = m/(1−β1^t), v̂ = v/(1−β2^t).
  virtual void adamw(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                     float beta2, float eps, float weight_decay, int64_t t) = 0;
  // The same over many vectors at once (a model's parameters), one launch and, for the sum, one
  // synchronisation on a device instead of one per vector. Each vector's result is the
  // single-vector op's; the CPU adds the vectors' sums of squares in order, so its global sum is
  // the one a loop of sum_squares gives.
  struct FloatSpan {
    float* data;
    int64_t n;
  };
  virtual double sum_squares(const std::vector<FloatSpan>& xs) = 0;
  virtual void scale(const std::vector<FloatSpan>& xs, float s) = 0;
  struct AdamWParam {
    float* p;
    const float* g;
    float* m;
    float* v;
    int64_t n;
    float weight_decay;  // per vector: norm weights decay not
  };
  virtual void adamw(const std::vector<AdamWParam>& params, float lr, float beta1, float beta2,
                     float eps, int64_t t) = 0;

  // --- Op timing (where the time of a step goes: `fp8rl bench step --op-times`)
  // Turns op timing on or off; returns false when this backend cannot time its ops (the CPU
  // backend: a profiler such as perf sees its threads directly). While on, every op records
  // the host time of its call and, on a device, the device time between two events around the
  // work it queued (no synchronisation per op). Turning it on clears what was recorded.
  virtual bool set_op_timing(bool on) {
    (void)on;
    return false;
  }
  // What was recorded since op timing was turned on, one row per op name, most device time
  // first; synchronises. Empty when op timing is off or unsupported.
  virtual std::vector<OpTiming> op_timings() { return {}; }

  // --- Kernel options: launch parameters only a measurement on the device can choose (split
  // counts, row thresholds), swept by the benchmarks. set_kernel_option sets one (0: its default
  // again) and returns true, or returns false when this backend has no option of that name (the
  // CPU has none). Options change speed only: every choice computes within the op's bound.
  virtual bool set_kernel_option(const std::string& name, int64_t value) {
    (void)name;
    (void)value;
    return false;
  }
  // Each option's current value, by name (empty when the backend has none).
  virtual std::vector<std::pair<std::string, int64_t>> kernel_options() const { return {}; }

  // --- Data parallelism
  // A communicator over this backend's memory joining the same ranks as `host` (NCCL on the
  // CUDA backend, bootstrapped with host's broadcast), or null when the backend has none: the
  // caller then stages gradients through host memory and reduces them with `host`. The CPU
  // backend's memory is host memory, so it needs none.
  virtual std::unique_ptr<Communicator> device_communicator(Communicator& host) {
    (void)host;
    return nullptr;
  }

  // --- Synchronisation
  // How often the host has waited for this backend since it was made: every call that returns
  // what the host reads at once — download, synchronize, equal_bytes, amax, sum_squares, a
  // quantization with statistics, op_timings. The CPU backend counts the same calls, so a CPU
  // run states what a step costs a device in synchronisations (test_audit compares modes).
  int64_t host_syncs() const { return host_syncs_; }

 protected:
  // Backends call this in each of the calls above.
  void count_host_sync() { ++host_syncs_; }

  friend class Buffer;
  virtual void* raw_alloc(size_t bytes) = 0;
  virtual void raw_free(void* p) noexcept = 0;

 private:
  int64_t host_syncs_ = 0;
};

// Checks that the operands of Backend::gemm / gemm_fp8 agree in shape and dtype; throws an
// Error naming the mismatch. Backends call these first.
void check_gemm_operands(const Matrix& a, const Matrix& b, const Matrix& c, float beta);
void check_gemm_fp8_operands(const Fp8Matrix& a, const Fp8Matrix& b, const Matrix& c, float beta);
void check_gemm_wgrad_operands(const Matrix& dy, const Matrix& x, const Matrix& c, float beta);
void check_qkv_heads_operands(const Matrix& qkv, int64_t hq, int64_t hkv, const Matrix& q_norm,
                              const Matrix& k_norm, const Matrix& q, const Matrix& k,
                              const Matrix& v);
void check_quantize_operands(const Matrix& x, const Fp8Matrix& out);
// Checks the operands of the grouped GEMMs (Backend::gemm_grouped, gemm_fp8_grouped,
// gemm_wgrad_grouped: the row counts against the stacked operands, one b or c per group; each
// group's product is checked by the single op's rules where it runs); throws an Error naming
// the op and the mismatch. Returns the stacked row count.
int64_t check_grouped_rows(const char* op, const std::vector<int64_t>& rows, int64_t stacked_rows,
                           size_t per_group);

}  // namespace fp8rl
