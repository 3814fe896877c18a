// The CUDA backend (Hopper, sm_90a): FP8 quantization kernels, cuBLASLt GEMMs and the model ops
// (FP32-compute kernels), built into the run-time loaded module libfp8rl_cuda.so (see
// engine/backend/cuda_module_api.hpp).
//
// Every op is asynchronous on the backend's one stream, except download() and the ops that return
// statistics, which synchronise it. Numerics match the CPU reference (engine/backend/cpu/) bit for
// bit for quantize/dequantize/transpose; GEMMs agree up to FP32 summation order.
//
// Files: cuda_backend.cu (life cycle, memory, device_communicator), nccl_communicator.cpp (the
// NCCL communicator of data-parallel runs; built with NCCL's header only) and nccl_library.cpp
// (NCCL loaded at run time), quantize.cu (quantize,
// quantize_with_transpose, dequantize, transpose_fp8), gemm.cu (gemm, gemm_fp8,
// gemm_fp8_unsupported), and the model ops with the CPU reference's stems: elementwise.cu
// (convert, transpose, add, scale, sum_squares, adamw), embedding.cu, rmsnorm.cu, rope.cu,
// attention.cu, swiglu.cu, logprobs.cu, sampling.cu (sample_tokens), mla.cu (latent attention),
// kv_cache.cu (amax, kv_write, attention_cached); shared device helpers in ops_common.cuh. The
// model ops compute in FP32 and round each output once to its dtype, like the CPU; they agree with
// it up to FP32 summation order and the device's exp/log/pow/sin/cos (a few ulp), except AdamW,
// scale, convert, transpose and add, which are bit-exact.
//
// Device-side index checks: ids and targets are in device memory, so they are not checked
// before launch (that would cost a synchronisation). An id outside the table gives a NaN
// embedding row (forward) and is skipped (backward); a target outside the vocabulary gives a NaN
// log-probability and a gradient without the one-hot term. kv_write skips rows whose slot or
// position lies outside the cache; attention_cached writes zeros for rows whose slot lies outside
// the cache or whose length is not in 1..max_len (the CPU reference throws in both cases).
//
// One backend serves one thread at a time (the stream, the scratch buffer and the statistics
// buffers are shared by all calls); only the GEMM plan cache is locked, so that
// gemm_fp8_unsupported() may be asked from another thread.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/lru_cache.hpp"

namespace fp8rl {

namespace quant {
struct TileChoice;  // quantize.cuh
}  // namespace quant

// Statistics accumulated on the device by the quantize kernels (atomics), one per quantized
// output; copied back and converted to QuantStats, or added to a caller's QuantStatsSum.
using DeviceQuantStats = QuantStatsSum;

namespace cuda {

// What a cuBLASLt matmul plan depends on. Sizes are cuBLAS's column-major m, n, k (m = our N,
// n = our M, k = K) after any padding. Alignments are those of the device pointers the call will
// pass (largest power of two dividing the address, capped at 256): cuBLASLt's heuristic assumes
// 256 unless told otherwise.
struct GemmKey {
  int64_t m = 0, n = 0, k = 0;
  int32_t a_type = 0, b_type = 0, d_type = 0;    // cudaDataType_t of cuBLAS A, B and C = D
  int32_t a_scale_mode = -1, b_scale_mode = -1;  // cublasLtMatmulMatrixScale_t; -1: no scales
  bool accumulate = false;                       // beta != 0
  uint32_t align_a = 256, align_b = 256, align_d = 256;
  uint32_t align_a_scale = 256, align_b_scale = 256;
  int32_t algo = 0;  // which of the heuristic's results (0: its first; the gemm_algo option)
  // cuBLAS's NT form (gemm_wgrad: A = x, B = dy, both as stored) instead of TN.
  bool nt = false;
  auto operator<=>(const GemmKey&) const = default;
};

// A cached matmul: the descriptor, the layouts of A, B, C and D and the heuristic's algorithm
// for the backend's fixed workspace. Owns the cuBLASLt objects.
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::optional<std::string> unsupported;  // why cuBLASLt cannot run it (no algorithm)

  GemmPlan() = default;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  ~GemmPlan();
};

// Largest power of two dividing the address of p, at most 256 (256 for null).
uint32_t pointer_alignment(const void* p);

// gemm_grouped.cu: destroys a cuBLAS handle (cublasHandle_t; null: nothing).
void destroy_cublas_handle(void* handle) noexcept;

}  // namespace cuda

class CudaBackend final : public Backend {
 public:
  // Makes device `device` current, creates the stream, the cuBLASLt handle, the 32 MiB GEMM
  // workspace and the statistics buffers. Throws Error when any of it fails.
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  // e.g. "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)"
  std::string device() const override { return device_desc_; }
  // cuda_backend.cu: cudaMemGetInfo's free bytes plus the pool's reserved but unused ones.
  int64_t memory_available() override;

  // Memory: alloc() takes from the backend's stream-ordered pool (cudaMallocFromPoolAsync on
  // the stream; graph memory while recording, see capture) and freeing returns a block with
  // cudaFreeAsync, so neither waits for the device.
  // When the device is full, the pool's cached free blocks are released and the allocation
  // tried once more before it fails.

  // Host <-> device copies on the stream. upload may return before the copy ran (the runtime
  // stages pageable memory, so host_src may be reused at once); download waits for it.
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void synchronize() override;
  // Device-to-device copy on the stream (asynchronous).
  void copy(void* dst, const void* src, size_t bytes) override;
  // cudaMemsetAsync to 0 on the stream (asynchronous).
  void zero(void* dst, size_t bytes) override;
  // One pass of 16-byte loads where both pointers allow it (bytes otherwise) that raises a
  // device flag on the first difference; synchronises to read it.
  bool equal_bytes(const void* a, const void* b, size_t bytes) override;
  std::vector<bool> equal_bytes(const std::vector<BytesPair>& pairs) override;

  // quantize.cu. Shapes and semantics: Backend. The outputs' formats must equal opt.format.
  // Asynchronous, except that requesting statistics synchronises the stream.
  void quantize(const Matrix& x, const Fp8Matrix& out, const QuantOptions& opt,
                QuantStats* stats) override;
  void quantize_with_transpose(const Matrix& x, const Fp8Matrix& along, const Fp8Matrix& transposed,
                               const QuantOptions& opt, QuantStats* stats_along,
                               QuantStats* stats_transposed) override;
  void dequantize(const Fp8Matrix& q, const Matrix& out) override;
  void transpose_fp8(const Fp8Matrix& w, const Fp8Matrix& wt) override;
  void scale_log2_histogram(const Fp8Matrix& q, int lo, int hi, int64_t* counts) override;

  // gemm.cu. Shapes and semantics: Backend. gemm_fp8 pads shapes cuBLASLt rejects (K % 16,
  // M % 8, N % 8) through the scratch buffer.
  void gemm(const Matrix& a, const Matrix& b, const Matrix& c, float beta) override;
  void gemm_fp8(const Fp8Matrix& a, const Fp8Matrix& b, const Matrix& c, float beta) override;
  std::optional<std::string> gemm_fp8_unsupported(const Fp8Matrix& a, const Fp8Matrix& b,
                                                  const Matrix& c) const override;

  // gemm_grouped.cu: the grouped GEMMs of the experts (Backend: shapes and semantics).
  // gemm_grouped: one cublasGemmGroupedBatchedEx call (cuBLAS, loaded at run time) for bf16 →
  // bf16 and f32 → f32, else, or when cuBLAS is missing or has no kernel, one cuBLASLt matmul per
  // group. gemm_fp8_grouped and the weight-gradient forms: one cuBLASLt matmul per non-empty
  // group, all queued from the one call (no host synchronisation). group_scales: one kernel per
  // 256 groups.
  void gemm_grouped(const Matrix& a, const std::vector<Matrix>& b, const Matrix& c,
                    const std::vector<int64_t>& rows, float beta) override;
  void gemm_fp8_grouped(const Fp8Matrix& a, const std::vector<Fp8Matrix>& b, const Matrix& c,
                        const std::vector<int64_t>& rows, float beta) override;
  void group_scales(const Fp8Matrix& q, const std::vector<int64_t>& rows, float* out) override;
  void gemm_wgrad(const Matrix& dy, const Matrix& x, const Matrix& c, float beta) override;
  void gemm_wgrad_grouped(const Matrix& dy, const Matrix& x, const std::vector<Matrix>& c,
                          const std::vector<int64_t>& rows) override;
  void gemm_fp8_wgrad_grouped(const std::vector<Fp8Matrix>& a, const std::vector<Fp8Matrix>& b,
                              const std::vector<Matrix>& c) override;

  // linear_fp8.cu: the decode GEMMs. Up to linear_fp8_max_rows rows (option
  // "linear_fp8_max_rows", default 8), for E4M3, K % 16 == 0 and 16-byte aligned weight codes:
  // for bf16 x the one-stream kernel (linear_fp8_stream.cu, a CTA per 16 weight rows over all of
  // K, x quantized in registers); else the split-K kernel, which quantizes x's 1x128 blocks into
  // shared memory (the codes and scales of quantize()) and multiplies them with the weight tiles
  // on the tensor cores (mma.sync m16n8k32 E4M3, FP32 sums per 128-block, scaled and added in
  // FP32: cuBLASLt's bound), streaming each weight byte once per 128 rows, K split over CTAs to
  // fill the device, the last CTA of a tile adding the splits in order (deterministic). Otherwise
  // Backend::linear_fp8 (quantize + cuBLASLt). On an H100 (docs/benchmarks.md, 2026-11-28) a
  // Qwen3-8B layer's seven linears took 154 us on the one-stream kernel at 1 and 8 rows, 150 and
  // 177 us split-K, 160 us quantize + cuBLASLt at 8 rows; at 16 rows split-K took 54 us for
  // gate/up against cuBLASLt's 29.
  void linear_fp8(const Matrix& x, const Fp8Matrix& w, const Matrix& y,
                  const QuantOptions& opt) override;
  int64_t linear_fp8_max_rows() const override {
    return options_.linear_fp8_kernel != 2 ? options_.linear_fp8_max_rows : 0;
  }

  // Kernel options (Backend::set_kernel_option; 0 restores an option's default):
  //   linear_fp8_kernel      1: the split-K decode GEMM up to linear_fp8_max_rows rows;
  //                          2: never (quantize once per input, cuBLASLt: the earlier path);
  //                          3: up to 8 rows of bf16 x the one-stream kernel
  //                          (linear_fp8_stream.cu: a CTA per 16 weight rows over all of K, no
  //                          split partials), else as 1 (default)
  //   linear_fp8_max_rows    rows up to which linear_fp8 runs a decode GEMM (default 8)
  //   linear_fp8_splits      K splits of the decode GEMM (default: enough CTAs for
  //                          linear_fp8_ctas_per_sm per SM)
  //   linear_fp8_ctas_per_sm the decode GEMM's CTA target per SM (default 2)
  //   attention_kernel       1: attention_cached's FP32 split decode kernel where it applies
  //                          (attention_decode.cu; the default until round 5);
  //                          2: its first kernel (warps over key tiles, no splits) everywhere;
  //                          3: for an fp8 or bf16 cache at head dim 128 with bf16 q, the
  //                          tensor-core decode kernel (attention_decode_mma.cu), elsewhere as 1
  //                          (default: 1.3-1.9x kernel 1 at 64-512 rows on an H100, FP8 cache
  //                          2-4.7x; docs/benchmarks.md, 2026-11-28)
  //   attention_splits       sequence splits of the decode kernel (flash-decoding; 1: none;
  //                          default: enough CTAs for attention_ctas_per_sm per SM)
  //   attention_ctas_per_sm  the decode kernel's CTA target per SM (default 4)
  //   gemm_grouped_kernel    1: gemm_grouped through cublasGemmGroupedBatchedEx where it
  //                          applies, gemm_fp8_grouped in one launch of the tensor-core kernel
  //                          (gemm_grouped_mma.cu) when the groups average ≤ 384 rows, else one
  //                          cuBLASLt matmul per group (default); 2: one cuBLASLt matmul per
  //                          group; 3: FP8 groups always in one launch (BF16 as 1)
  //   gemm_algo              n: every cuBLASLt matmul runs the n-th algorithm of the
  //                          heuristic's list (default 1, its choice); a plan whose list is
  //                          shorter is unsupported. For sweeps (bench decode): round 5 found
  //                          FP8 matmuls of 64 rows taking 15-40 us for 4-50 MB of weights
  //   attention_mma          1: attention_forward and _backward on the tensor cores
  //                          (attention_mma.cu) for BF16 operands at head dims 64 and 128
  //                          (default: 10-15x the FP32 kernels on an H200, its op cases
  //                          passed); 2: the FP32 kernels everywhere
  //   quantize_stage_bf16    1: quantize_with_transpose and the fused producers stage BF16
  //                          tiles as 16-bit patterns (33 KB, twice the blocks per SM);
  //                          2: as FP32 values (66 KB; default: on an H200 the two were
  //                          within a few percent of each other, either way)
  //   quantize_tile_kernel   1: quantize_with_transpose and the fused producers stage every
  //                          128x128 tile in shared memory and quantize its rows and columns a
  //                          warp per 1x128 line (before 2026-11-28: 28-45 % of the copy
  //                          bandwidth on an H100, instruction-bound); 2: whole tiles from
  //                          registers (a thread 8x8 values, a scale per line made once), the
  //                          edges staged (default; not yet timed: bench quant compares both)
  bool set_kernel_option(const std::string& name, int64_t value) override;
  std::vector<std::pair<std::string, int64_t>> kernel_options() const override;

  // --- Model ops. Shapes and semantics: Backend. All asynchronous except sum_squares and amax.

  // elementwise.cu. convert with equal dtypes is a device copy; transpose needs distinct
  // buffers; add reads each input in its own dtype (out may alias a or b).
  void convert(const Matrix& x, const Matrix& out) override;
  void transpose(const Matrix& x, const Matrix& out) override;
  void add(const Matrix& a, const Matrix& b, const Matrix& out) override;
  // Σ x² with FP64 partial sums in a fixed order (deterministic); synchronises the stream.
  double sum_squares(const float* x, int64_t n) override;
  void scale(float* x, int64_t n, float s) override;
  double sum_squares(const std::vector<FloatSpan>& xs) override;
  void scale(const std::vector<FloatSpan>& xs, float s) override;
  void adamw(const std::vector<AdamWParam>& params, float lr, float beta1, float beta2, float eps,
             int64_t t) override;
  // Bias corrections are computed on the host in FP64, as on the CPU; the update uses the CPU's
  // expression order with no contraction, so it matches the reference bit for bit wherever the
  // CPU build does not contract into FMAs (the default x86-64 target).
  void adamw(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
             float beta2, float eps, float weight_decay, int64_t t) override;

  // embedding.cu. Backward scatters with FP32 atomics (repeated ids add in any order).
  void embedding_forward(const int32_t* ids, const Matrix& table, const Matrix& out) override;
  void embedding_backward(const int32_t* ids, const Matrix& dout, const Matrix& dtable) override;

  // rmsnorm.cu. Backward: dx per row, dw by column sums with one atomic per column per block.
  void rmsnorm_forward(const Matrix& x, const Matrix& w, float eps, const Matrix& y,
                       float* rstd) override;
  void rmsnorm_backward(const Matrix& dy, const Matrix& x, const Matrix& w, const float* rstd,
                        const Matrix& dx, const Matrix& dw) override;
  // An rstd pass, then one pass over 128x128 tiles that normalizes, writes y (when it has
  // data) and quantizes the tile's rows and columns (quantize.cuh: quantize_produced_kernel);
  // forward-only operands of whole 1x128 blocks skip the staging (a half-warp per block).
  void rmsnorm_backward_fp8(const Matrix& dy, const Matrix& x, const Matrix& w, const float* rstd,
                            const Matrix& residual, const Matrix& dx, const Matrix& dw,
                            const Fp8Operands& out, const QuantOptions& opt) override;
  void rmsnorm_forward_fp8(const Matrix& x, const Matrix& w, float eps, const Matrix& y,
                           float* rstd, const Fp8Operands& out, const QuantOptions& opt) override;

  // rope.cu.
  void moe_combine(const Matrix& y, const int32_t* pos, const float* w, int64_t k,
                   const Matrix& out) override;
  void moe_combine_backward(const Matrix& dout, const Matrix& y, const int32_t* pos, const float* w,
                            int64_t k, const Matrix& dy, float* dw) override;
  void qkv_heads(const Matrix& qkv, int64_t hq, int64_t hkv, const Matrix& q_norm,
                 const Matrix& k_norm, float eps, const int32_t* positions, const Rope& rope,
                 const Matrix& q, const Matrix& k, const Matrix& v) override;
  void rope(const Matrix& x, int64_t heads, const int32_t* positions, const Rope& rope,
            bool inverse) override;

  // attention.cu. FP32 tiled attention with online softmax (D ≤ 256). Backward recomputes the
  // probabilities from lse; dq and dk/dv come from two kernels that each own their outputs
  // (deterministic, no atomics); rowsum(dO ⊙ O) goes through the scratch buffer. With the
  // option attention_mma = 1, BF16 attention at head dims 64 and 128 runs on the tensor cores
  // (attention_mma.cu: P and dS rounded to BF16 for the products, FP32 sums).
  void attention_forward(const Matrix& q, const Matrix& k, const Matrix& v, int64_t B, int64_t T,
                         int64_t Hq, int64_t Hkv, const Matrix& o, float* lse) override;
  void attention_backward(const Matrix& dout, const Matrix& q, const Matrix& k, const Matrix& v,
                          const Matrix& o, const float* lse, int64_t B, int64_t T, int64_t Hq,
                          int64_t Hkv, const Matrix& dq, const Matrix& dk,
                          const Matrix& dv) override;

  // swiglu.cu.
  void swiglu_forward(const Matrix& gate, const Matrix& up, const Matrix& h) override;
  void swiglu_backward(const Matrix& dh, const Matrix& gate, const Matrix& up, const Matrix& dgate,
                       const Matrix& dup) override;
  // One pass over 128x128 tiles that computes, writes (when it has data) and quantizes the
  // output(s): the backward stages dgate's tile, then dup's (one kernel, one format).
  void swiglu_forward_fp8(const Matrix& gate, const Matrix& up, const Matrix& h,
                          const Fp8Operands& out, const QuantOptions& opt) override;
  void add_rmsnorm_forward(const Matrix& x, const Matrix& r, const Matrix& w, float eps,
                           const Matrix& y, float* rstd) override;
  void add_rmsnorm_forward_fp8(const Matrix& x, const Matrix& r, const Matrix& w, float eps,
                               const Matrix& y, float* rstd, const Fp8Operands& out,
                               const QuantOptions& opt) override;
  void swiglu_forward_stacked(const Matrix& gu, const Matrix& h) override;
  void swiglu_forward_stacked_fp8(const Matrix& gu, const Matrix& h, const Fp8Operands& out,
                                  const QuantOptions& opt) override;
  void swiglu_backward_fp8(const Matrix& dh, const Matrix& gate, const Matrix& up,
                           const Matrix& dgate, const Matrix& dup, const Fp8Operands& out_gate,
                           const QuantOptions& opt_gate, const Fp8Operands& out_up,
                           const QuantOptions& opt_up) override;

  // logprobs.cu. One block per row, one read of the row for the softmax statistics.
  void token_logprobs(const Matrix& logits, const int32_t* targets, float inv_temperature,
                      float* logp, float* entropy) override;
  void token_logprobs_backward(const Matrix& logits, const int32_t* targets, float inv_temperature,
                               const float* dlogp, const Matrix& dlogits) override;

  // sampling.cu. One block per row: the softmax statistics of token_logprobs (so the same
  // log-probabilities), per-thread contiguous chunks summed in FP64, a chained scan of the chunk
  // sums and a walk of the one chunk holding u·Σ e (deterministic, no atomics). Greedy (uniforms
  // null) is a strided argmax. Agrees with the CPU up to summation order and expf: a different
  // token only where u·Σ e lies within rounding of a cumulative-sum boundary.
  void sample_tokens(const Matrix& logits, float inv_temperature, const double* uniforms,
                     int32_t* tokens, float* logprobs) override;

  // kv_cache.cu. amax is exact (NaN when any element is NaN) and synchronises the stream; it
  // uses the sum_squares reduction buffer. kv_write is bit-exact with the CPU (values rounded
  // to the cache dtype; FP8 codes e4m3(x · (1/scale_inv)), both IEEE, the scales read on the
  // device); rows that target the same cache row in one call land in an unspecified order.
  // attention_cached: one CTA per (query row, kv head, up to 8 of its query heads), so a cached
  // K/V row is read once for the group; its warps split the keys in 32-key tiles with an online
  // softmax each and merge in warp order (deterministic). Head dim D ≤ 256; 16-byte loads (8 for
  // fp8) when D and the cache pointers allow, element loads otherwise. o may alias q exactly
  // (same dtype). Agrees with the CPU up to FP32 summation order and expf.
  float amax(const Matrix& x) override;
  void amax_into(const Matrix& x, float* out) override;
  void kv_write(const Matrix& k, const Matrix& v, const int32_t* slot_ids, const int32_t* positions,
                const KvCacheView& cache) override;
  void attention_cached(const Matrix& q, const KvCacheView& cache, const int32_t* slot_ids,
                        const int32_t* lengths, int64_t Hq, int64_t Hkv, const Matrix& o) override;
  // The tensor-core decode kernel quantizes o's blocks as it writes them where it runs and opt
  // sums no statistics; elsewhere the two ops.
  void attention_cached_fp8(const Matrix& q, const KvCacheView& cache, const int32_t* slot_ids,
                            const int32_t* lengths, int64_t Hq, int64_t Hkv, const Matrix& o,
                            const Fp8Operands& out, const QuantOptions& opt) override;

  // mla.cu: multi-head latent attention (DeepSeek-V3). copy_columns and mla_cache_write are
  // bit-exact with the CPU; rope_columns as rope; the attention kernels compute every dot product
  // in the reference's order in FP32 and differ from it by the order of their block reductions
  // and expf (deterministic: one CTA per query row, per key row for dk/dv, heads summed in order
  // for the shared RoPE key; no atomics). mla_attention_cached: one CTA per (query row, head),
  // absorbed form; rows whose slot or length lies outside the cache get zeros.
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

  // cuda_backend.cu: CUDA graphs by stream capture (relaxed mode). While recording, alloc()
  // takes graph memory (cudaMallocAsync captured as an allocation node; the frees inside work
  // become free nodes, so the graph can be replayed any number of times) and scratch() gives a
  // fresh graph allocation per call, freed at the end of the recording (the shared scratch
  // buffer may move later; a graph must not hold it). Ops that synchronise fail the recording,
  // which is then reported in why_not. Replays run on the backend's stream.
  std::unique_ptr<BackendGraph> capture(const std::function<void()>& work,
                                        std::string& why_not) override;

  // cuda_backend.cu: an NcclCommunicator (nccl_communicator.hpp) on this device and stream when
  // the module was built with NCCL's header and host has more than one rank, else null (the
  // caller then stages through host memory). NCCL is loaded then, not before. Collective over
  // host; throws Error on every rank when NCCL cannot join them (e.g. two ranks on one GPU, or
  // libnccl.so.2 not found). It must be destroyed before the backend.
  std::unique_ptr<Communicator> device_communicator(Communicator& host) override;

  // cuda_backend.cu: op timing (Backend::set_op_timing). Each op's device time is the time
  // between two events recorded around the work it queues; the events are read in batches
  // (every 4,096 ops and in op_timings()), so timing adds no synchronisation per op. An op
  // called inside another (gemm_fp8's padding copies) counts in the outer one only; ops queued
  // while a graph is recorded are not timed, and a graph's replay is timed as "graph_replay".
  bool set_op_timing(bool on) override;
  std::vector<OpTiming> op_timings() override;

  // quantize.cu: "" when this build's kernels can run on the current device, else why not
  // (e.g. no kernel image for the device's architecture). Used by the module's probe.
  static std::string kernel_image_problem();

  // cuda_backend.cu: launches a recorded graph on the stream (BackendGraph::replay of a graph
  // this backend recorded).
  void launch_graph(cudaGraphExec_t exec);

  // The kernel options' values (0 in an option means its default; see set_kernel_option).
  struct KernelOptions {
    int64_t linear_fp8_kernel = 3;
    int64_t linear_fp8_max_rows = 8;
    int64_t linear_fp8_splits = 0;
    int64_t linear_fp8_ctas_per_sm = 2;
    int64_t attention_splits = 0;
    int64_t attention_ctas_per_sm = 4;
    int64_t attention_kernel = 3;
    int64_t gemm_grouped_kernel = 1;
    int64_t attention_mma = 1;
    int64_t quantize_stage_bf16 = 2;
    int64_t quantize_tile_kernel = 2;
    int64_t gemm_algo = 1;
  };
  // Tiles the decode GEMM's split-K counters cover (one unsigned each, zero between launches).
  static constexpr int64_t kSplitCounters = int64_t{1} << 16;

  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  // Blocks of the first sum_squares pass (one FP64 partial sum each).
  static constexpr int kReduceBlocks = 1024;

 protected:
  void* raw_alloc(size_t bytes) override;
  void raw_free(void* p) noexcept override;

 private:
  // Times the op it is made in while op timing is on (see set_op_timing); does nothing
  // otherwise, inside another op's scope, or while a graph is recorded.
  class OpScope {
   public:
    OpScope(CudaBackend& be, const char* op);
    ~OpScope();
    OpScope(const OpScope&) = delete;
    OpScope& operator=(const OpScope&) = delete;

   private:
    CudaBackend* depth_of_ = nullptr;  // whose op depth this scope counts in
    CudaBackend* be_ = nullptr;        // null: not timing
    const char* op_ = nullptr;
    cudaEvent_t start_ = nullptr;
    double t0_ = 0;
  };
  struct PendingOp {
    const char* op;
    cudaEvent_t start, end;
    double host_seconds;
  };
  // Reads the pending events into op_totals_ (waits for the last one) and recycles them.
  void harvest_op_events() noexcept;
  cudaEvent_t take_op_event() noexcept;

  // Makes device_ current on the calling thread (the runtime's current device is per thread).
  void make_current() const;
  // Frees everything; safe on a partly constructed backend.
  void release() noexcept;
  // Device scratch of at least `bytes`, reused across calls (stream order keeps uses apart).
  // Growing it synchronises the stream and reallocates.
  void* scratch(size_t bytes);

  // Zeroes the two device statistics records and returns them.
  DeviceQuantStats* begin_stats();
  // Copies the records back (synchronises) into the non-null outputs.
  void finish_stats(QuantStats* first, QuantStats* second);
  // Adds the first record to sum (backend memory), on the stream: no synchronisation.
  void add_stats(QuantStatsSum* sum);

  // attention_decode.cu: attention_cached through the decode kernel (sequence splits, staged
  // K/V; see there) when it applies — f32, bf16 or fp8 cache, D ≤ 256 and a multiple of 8, rows
  // of 16-byte multiples, 16-byte aligned cache — returning false otherwise (attention_cached
  // then runs its first kernel). Operands checked by attention_cached.
  bool attention_decode(const Matrix& q, const KvCacheView& cache, const int32_t* slot_ids,
                        const int32_t* lengths, int64_t Hq, int64_t Hkv, const Matrix& o);
  // attention_decode.cu, under attention_kernel = 3 (default): the tensor-core decode kernel
  // (attention_decode_mma.cu) for an fp8 or bf16 cache at head dim 128 with bf16 q and o, false
  // where it does not apply (attention_decode's kernel then runs). With fp8 (a [n, Hq·128]
  // 1x128 operand) and opt (no statistics sum), o's blocks are quantized as o is written (the
  // kernel's epilogue, or the split combine).
  bool attention_decode_mma(const Matrix& q, const KvCacheView& cache, const int32_t* slot_ids,
                            const int32_t* lengths, int64_t Hq, int64_t Hkv, const Matrix& o,
                            const Fp8Matrix* fp8 = nullptr, const QuantOptions* opt = nullptr);
  // attention_cached's checks of its operands (kv_cache.cu), op naming the caller.
  void check_attention_cached(const char* op, const Matrix& q, const KvCacheView& cache,
                              const int32_t* slot_ids, const int32_t* lengths, int64_t Hq,
                              int64_t Hkv, const Matrix& o) const;

  // gemm.cu: the cached plan for key with the algorithm the gemm_algo option names (built on
  // first use; rebuilt only after the least recently used plans were evicted, see plans_). The
  // reference is valid until the next plan() call.
  const cuda::GemmPlan& plan(const cuda::GemmKey& key) const;
  // Runs a planned matmul D = A·op + beta·C with C = D; scale pointers only for FP8 plans.
  void run_plan(const cuda::GemmPlan& plan, const void* a, const void* b, void* d, float beta,
                const float* a_scale, const float* b_scale);
  // Start of gemm and gemm_fp8 (op names it in errors) for c [M, N] = a [M, K]·b [N, K]ᵀ +
  // beta·c: false when nothing is left to do, i.e. M or N is 0, or K is 0 (then c = beta·c, or 0
  // for beta == 0, as done here); otherwise makes the device current and returns true. Throws on a
  // null c.
  bool begin_product(const char* op, int64_t M, int64_t N, int64_t K, const Matrix& c, float beta);
  // quantize.cu: how the tile kernels quantize a tensor with a transposed copy under the kernel
  // options quantize_tile_kernel and quantize_stage_bf16, for values that are BF16 (bf16) or not.
  quant::TileChoice tile_choice(bool bf16) const;
  // An f32 / bf16 matmul into c (cuBLAS's m x n column-major, ldc = m): cuBLAS A = a, B = b in
  // the TN form (nt false: A stored k x m, B k x n) or the NT form (A m x k, B n x k), inputs of
  // dtype `in`; an f32 product into a bf16 c through f32 scratch and a rounding (cuBLASLt has no
  // f32 x f32 → bf16). False, nothing run, when cuBLASLt has no algorithm (*why: its reason).
  bool run_matmul(bool nt, int64_t m, int64_t n, int64_t k, const void* a, const void* b, DType in,
                  const Matrix& c, float beta, std::string* why);

  int device_ = 0;
  int sm_count_ = 0;
  std::string device_desc_;
  cudaStream_t stream_ = nullptr;
  // Stream-ordered pool behind alloc(): the model makes and drops its activations op by op
  // (dozens per layer and step); cudaMalloc/cudaFree would cost a driver call and a device-wide
  // synchronisation each. Freed blocks return to the pool in stream order and are reused by the
  // next allocations on the same stream; the pool keeps what it has (no release threshold).
  cudaMemPool_t pool_ = nullptr;
  bool capturing_ = false;              // inside capture(): allocations are graph memory
  std::vector<void*> capture_scratch_;  // scratch() taken while recording, freed at its end
  cublasLtHandle_t lt_ = nullptr;
  void* cublas_ = nullptr;              // cublasHandle_t of gemm_grouped, made on first use
  std::string grouped_cublas_problem_;  // why gemm_grouped stopped using cuBLAS ("" : it does)
  void* workspace_ = nullptr;           // kWorkspaceBytes, from cudaMalloc (256-byte aligned)
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  DeviceQuantStats* stats_dev_ = nullptr;   // 2 records
  DeviceQuantStats* stats_host_ = nullptr;  // 2 records, pinned
  double* reduce_dev_ = nullptr;     // kReduceBlocks partial sums + the result (sum_squares; amax
                                     // keeps its 32-bit result in the result slot)
  double* reduce_host_ = nullptr;    // 1 value, pinned (also amax's result bits)
  unsigned* differ_dev_ = nullptr;   // equal_bytes' flag
  unsigned* differ_host_ = nullptr;  // pinned
  KernelOptions options_;
  unsigned* split_counters_ = nullptr;  // kSplitCounters, zeroed once; each split-K launch's
                                        // last CTA per tile resets its counter
  bool op_timing_ = false;
  int op_depth_ = 0;                           // nesting of OpScopes
  std::vector<PendingOp> op_pending_;          // events not read yet
  std::vector<cudaEvent_t> op_event_pool_;     // read events, for reuse
  std::map<std::string, OpTiming> op_totals_;  // by op name
  mutable std::mutex plans_mutex_;
  // At most kMaxPlans plans: an MoE layer's experts bring new row counts every step.
  static constexpr size_t kMaxPlans = 4096;
  mutable LruCache<cuda::GemmKey, std::unique_ptr<cuda::GemmPlan>> plans_{kMaxPlans};
};

}  // namespace fp8rl
