// The CPU backend: the exact reference every other backend is tested against.
// Quantization follows the spec in fp8/format.hpp element by element; GEMMs read FP8 and BF16
// operands as the FP32 values they stand for inside the backend's own FP32 GEMM (sgemm.hpp),
// multi-threaded, the same bits on every CPU.
#pragma once

#include <map>
#include <mutex>
#include <unordered_map>

#include "backend/backend.hpp"

namespace fp8rl {

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  ~CpuBackend() override;
  std::string name() const override { return "cpu"; }
  std::string device() const override;

  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void synchronize() override { count_host_sync(); }
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* dst, size_t bytes) override;
  bool equal_bytes(const void* a, const void* b, size_t bytes) override;
  std::vector<bool> equal_bytes(const std::vector<BytesPair>& pairs) override;

  void quantize(const Matrix& x, const Fp8Matrix& out, const QuantOptions& opt,
                QuantStats* stats) override;
  void quantize_with_transpose(const Matrix& x, const Fp8Matrix& along, const Fp8Matrix& transposed,
                               const QuantOptions& opt, QuantStats* stats_along,
                               QuantStats* stats_transposed) override;
  void dequantize(const Fp8Matrix& q, const Matrix& out) override;
  void transpose_fp8(const Fp8Matrix& w, const Fp8Matrix& wt) override;
  void scale_log2_histogram(const Fp8Matrix& q, int lo, int hi, int64_t* counts) override;
  void gemm(const Matrix& a, const Matrix& b, const Matrix& c, float beta) override;
  void gemm_fp8(const Fp8Matrix& a, const Fp8Matrix& b, const Matrix& c, float beta) override;
  std::optional<std::string> gemm_fp8_unsupported(const Fp8Matrix&, const Fp8Matrix&,
                                                  const Matrix&) const override {
    return std::nullopt;  // the reference runs every combination
  }
  // linear_fp8 is Backend's (quantize, then gemm_fp8: the reference). Taken per linear up to
  // the device's row count too: the same bits as quantizing a shared input once (quantization is
  // per row), a negligible O(M·K) more work per linear, and the CPU's tests then run the decode
  // path a device takes.
  int64_t linear_fp8_max_rows() const override { return 256; }

  void convert(const Matrix& x, const Matrix& out) override;
  void transpose(const Matrix& x, const Matrix& out) override;
  void add(const Matrix& a, const Matrix& b, const Matrix& out) override;
  void embedding_forward(const int32_t* ids, const Matrix& table, const Matrix& out) override;
  void embedding_backward(const int32_t* ids, const Matrix& dout, const Matrix& dtable) override;
  void rmsnorm_forward(const Matrix& x, const Matrix& w, float eps, const Matrix& y,
                       float* rstd) override;
  void rmsnorm_backward(const Matrix& dy, const Matrix& x, const Matrix& w, const float* rstd,
                        const Matrix& dx, const Matrix& dw) override;
  void moe_combine(const Matrix& y, const int32_t* pos, const float* w, int64_t k,
                   const Matrix& out) override;
  void moe_combine_backward(const Matrix& dout, const Matrix& y, const int32_t* pos, const float* w,
                            int64_t k, const Matrix& dy, float* dw) override;
  void rope(const Matrix& x, int64_t heads, const int32_t* positions, const Rope& rope,
            bool inverse) override;
  void attention_forward(const Matrix& q, const Matrix& k, const Matrix& v, int64_t B, int64_t T,
                         int64_t Hq, int64_t Hkv, const Matrix& o, float* lse) override;
  void attention_backward(const Matrix& dout, const Matrix& q, const Matrix& k, const Matrix& v,
                          const Matrix& o, const float* lse, int64_t B, int64_t T, int64_t Hq,
                          int64_t Hkv, const Matrix& dq, const Matrix& dk,
                          const Matrix& dv) override;
  void swiglu_forward(const Matrix& gate, const Matrix& up, const Matrix& h) override;
  void swiglu_backward(const Matrix& dh, const Matrix& gate, const Matrix& up, const Matrix& dgate,
                       const Matrix& dup) override;
  void token_logprobs(const Matrix& logits, const int32_t* targets, float inv_temperature,
                      float* logp, float* entropy) override;
  void token_logprobs_backward(const Matrix& logits, const int32_t* targets, float inv_temperature,
                               const float* dlogp, const Matrix& dlogits) override;
  void sample_tokens(const Matrix& logits, float inv_temperature, const double* uniforms,
                     int32_t* tokens, float* logprobs) override;
  float amax(const Matrix& x) override;
  void amax_into(const Matrix& x, float* out) override;
  void kv_write(const Matrix& k, const Matrix& v, const int32_t* slot_ids, const int32_t* positions,
                const KvCacheView& cache) override;
  void attention_cached(const Matrix& q, const KvCacheView& cache, const int32_t* slot_ids,
                        const int32_t* lengths, int64_t Hq, int64_t Hkv, const Matrix& o) override;
  void copy_columns(const Matrix& x, int64_t x_col, const Matrix& out, int64_t out_col,
                    int64_t cols) override;
  void rope_columns(const Matrix& x, int64_t heads, int64_t head_width, int64_t first, int64_t dims,
                    const int32_t* positions, const Rope& rope, bool inverse) override;
  void mla_attention_forward(const Matrix& q, const Matrix& kv, const Matrix& k_rope, int64_t B,
                             int64_t T, const MlaDims& d, float scale, const Matrix& o,
                             float* lse) override;
  void mla_attention_backward(const Matrix& dout, const Matrix& q, const Matrix& kv,
                              const Matrix& k_rope, const Matrix& o, const float* lse, int64_t B,
                              int64_t T, const MlaDims& d, float scale, const Matrix& dq,
                              const Matrix& dkv, const Matrix& dk_rope) override;
  void mla_cache_write(const Matrix& latent, const Matrix& k_rope, const int32_t* slot_ids,
                       const int32_t* positions, const MlaDims& d,
                       const KvCacheView& cache) override;
  void mla_attention_cached(const Matrix& q, const Matrix& w_kv_b, const KvCacheView& cache,
                            const int32_t* slot_ids, const int32_t* lengths, const MlaDims& d,
                            float scale, const Matrix& o) override;
  double sum_squares(const float* x, int64_t n) override;
  void scale(float* x, int64_t n, float s) override;
  double sum_squares(const std::vector<FloatSpan>& xs) override;
  void scale(const std::vector<FloatSpan>& xs, float s) override;
  void adamw(const std::vector<AdamWParam>& params, float lr, float beta1, float beta2, float eps,
             int64_t t) override;
  void adamw(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
             float beta2, float eps, float weight_decay, int64_t t) override;

 protected:
  void* raw_alloc(size_t bytes) override;
  void raw_free(void* p) noexcept override;

 private:
  // Freed blocks of 64 KiB and more are kept for the next request of the same size (a step
  // allocates the same activations every time; fresh pages from the OS cost a page fault
  // each, ~5 % of a demo step), up to kCacheLimit bytes.
  static constexpr size_t kCachedMin = 64 << 10, kCacheLimit = size_t{512} << 20;
  std::mutex cache_mutex_;
  std::unordered_map<void*, size_t> sizes_;  // blocks of kCachedMin and more: their size
  std::multimap<size_t, void*> cached_;      // free blocks by size
  size_t cached_bytes_ = 0;
};

// The FP32 GEMM the CPU backend runs: its instruction-set path and the ones this CPU offers.
std::string cpu_gemm_description();

}  // namespace fp8rl
