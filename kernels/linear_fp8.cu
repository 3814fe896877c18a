// CudaBackend::linear_fp8: the decode GEMM for few rows (the kernel: linear_fp8.cuh; for 1-8 rows
// under linear_fp8_kernel = 3 the one-stream kernel, linear_fp8_stream.cu), else quantize +
// cuBLASLt. The CPU reference is Backend::linear_fp8 (quantize, then gemm_fp8).
#include <algorithm>
#include <climits>
#include <string>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "fp8/format.hpp"
#include "linear_fp8.cuh"
#include "linear_fp8_stream.hpp"
#include "ops_common.cuh"

namespace fp8rl {

void CudaBackend::linear_fp8(const Matrix& x, const Fp8Matrix& w, const Matrix& y,
                             const QuantOptions& opt) {
  using namespace decode_gemm;
  const OpScope scope(*this, "linear_fp8");
  const char* op = "linear_fp8";
  cuda::check_activation(op, "x", x);
  cuda::check_activation(op, "y", y, x.rows, w.rows);
  check(w.cols == x.cols, std::string(op) + ": weight [" + std::to_string(w.rows) + ", " +
                              std::to_string(w.cols) + "] does not take " + cuda::shape_of("x", x));
  check(w.block == ScaleBlock::tile128x128, std::string(op) + ": the weight must be 128x128 tiles");
  check(w.format == opt.format, std::string(op) + ": the weight's FP8 format differs from opt's");
  const int64_t M = x.rows, N = w.rows, K = x.cols;
  if (M == 0 || N == 0) return;
  const bool fused = options_.linear_fp8_kernel != 2 && M <= options_.linear_fp8_max_rows &&
                     opt.format == Fp8Format::e4m3 && K > 0 && K % 16 == 0 &&
                     cuda::pointer_alignment(w.codes) >= 16 && K / kBlockK < INT_MAX &&
                     N / kTileRows < 65535;
  if (!fused) {
    Backend::linear_fp8(x, w, y,
                        opt);  // quantize + cuBLASLt (its own scopes count inside this one)
    return;
  }
  cuda::check_data(op,
                   {{"x", x.data}, {"w codes", w.codes}, {"w scales", w.scale_inv}, {"y", y.data}});
  // CTAs write y while others still read x.
  check(y.data != x.data, std::string(op) + ": y must not alias x");
  make_current();

  if (options_.linear_fp8_kernel == 3 && M <= cuda::kStreamMaxRows && x.dtype == DType::bf16) {
    // The one-stream kernel (linear_fp8_stream.cu): 8 warps a CTA where 4 would leave the SMs
    // with fewer than two CTAs each.
    cuda::StreamGemmArgs s;
    s.x = static_cast<const uint16_t*>(x.data);
    s.w = w.codes;
    s.ws = w.scale_inv;
    s.y = y.data;
    s.y_bf16 = y.dtype == DType::bf16;
    s.M = M;
    s.N = N;
    s.K = K;
    s.ws_stride = tile_scale_stride(K);
    s.pow2 = opt.pow2_scales;
    s.warps = (N + 15) / 16 < 2 * std::max(sm_count_, 1) ? 8 : 4;
    if (cuda::stream_gemm_problem(s).empty()) {
      cuda::linear_fp8_stream(s, stream_);
      return;
    }
  }
  const Plan plan = plan_decode_gemm(M, N, K, options_.linear_fp8_splits,
                                     options_.linear_fp8_ctas_per_sm * std::max(sm_count_, 1));
  if (plan.splits > 1 && plan.tiles > kSplitCounters) {
    // More tiles than counters (M > 128 with a very wide weight): the unfused path.
    Backend::linear_fp8(x, w, y, opt);
    return;
  }
  DecodeGemmArgs a{};
  a.x = cuda::in_of(x);
  a.w = w.codes;
  a.ws = w.scale_inv;
  a.y = cuda::out_of(y);
  a.counters = split_counters_;
  a.M = M;
  a.N = N;
  a.K = K;
  a.ws_stride = tile_scale_stride(K);
  a.pow2 = opt.pow2_scales;
  if (plan.splits > 1)
    a.partial =
        static_cast<float*>(scratch(static_cast<size_t>(plan.splits) * M * N * sizeof(float)));
  launch(a, plan, device_, stream_);
}

}  // namespace fp8rl
