// The decode GEMM for up to 8 rows as one weight stream (linear_fp8_stream.cu), behind the kernel
// option linear_fp8_kernel = 3 (CudaBackend::linear_fp8 chooses).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace fp8rl::cuda {

// Rows of x the kernel takes at most.
inline constexpr int64_t kStreamMaxRows = 8;

// y [M, N] = dequant(q(x)) · dequant(w)ᵀ with x's 1x128 quantization (quantize()'s bits, E4M3,
// pow2 scales when asked) done in the kernel: Backend::linear_fp8's contract.
struct StreamGemmArgs {
  const uint16_t* x = nullptr;  // [M, K] BF16
  const uint8_t* w = nullptr;   // [N, K] E4M3 codes
  const float* ws = nullptr;    // 128x128 tile scales: ws[(n / 128)·ws_stride + k / 128]
  void* y = nullptr;            // [M, N] f32 or BF16
  bool y_bf16 = true;
  int64_t M = 0, N = 0, K = 0, ws_stride = 0;
  bool pow2 = false;
  int warps = 4;  // warps of a CTA, each a contiguous share of K: 4 or 8
};

// Why the kernel cannot take these operands, "" when it can: 1 ≤ M ≤ 8, K a multiple of 16,
// x and w 16-byte aligned, 4 or 8 warps.
std::string stream_gemm_problem(const StreamGemmArgs& a);

// One launch on `stream` (a CTA per 16 weight rows), no host synchronisation, no scratch.
// Needs stream_gemm_problem(a) == "".
void linear_fp8_stream(const StreamGemmArgs& a, cudaStream_t stream);

}  // namespace fp8rl::cuda
