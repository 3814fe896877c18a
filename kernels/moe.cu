// Mixture-of-experts combine and its backward (mirrors engine/backend/cpu/moe.cpp). Shapes:
// y, dy [N, H] (one row per (token, choice)), out, dout [M, H], pos (int32), w, dw (f32) [M·k].
//   out[m][h] = Σ_{j<k} w[m·k + j]·y[pos[m·k + j]][h]   (j ascending, FP32)
//   dy[pos[i]][h] = w[i]·dout[i / k][h],  dw[i] = Σ_h dout[i / k][h]·y[pos[i]][h]
// Every output element is written by one thread in the reference's order of operations, except
// dw's sum over h, which a warp reduces (lanes own h ≡ lane mod 32; then xor-shuffles): the
// order differs from the CPU's, within FP32 rounding (the op tests' bound), and is the same
// run to run. No atomics: each row of dy belongs to one (token, choice).
#include <cuda_runtime.h>

#include <string>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"

namespace fp8rl {
namespace {

using cuda::In, cuda::Out;

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    moe_combine_kernel(In y, const int32_t* __restrict__ pos, const float* __restrict__ w,
                       int64_t k, Out out, int64_t M, int64_t H) {
  cuda::for_each_index<kThreads>(M * H, [&](int64_t e) {
    const int64_t m = e / H, h = e - m * H;
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j)
      acc =
          __fadd_rn(acc, __fmul_rn(w[m * k + j], y[static_cast<int64_t>(pos[m * k + j]) * H + h]));
    out.store(e, acc);
  });
}

__global__ void __launch_bounds__(kThreads)
    moe_scatter_kernel(In dout, const int32_t* __restrict__ pos, const float* __restrict__ w,
                       int64_t k, Out dy, int64_t n, int64_t H) {
  cuda::for_each_index<kThreads>(n * H, [&](int64_t e) {
    const int64_t i = e / H, h = e - i * H;
    dy.store(static_cast<int64_t>(pos[i]) * H + h, __fmul_rn(w[i], dout[(i / k) * H + h]));
  });
}

// One warp per (token, choice).
__global__ void __launch_bounds__(kThreads)
    moe_weight_grad_kernel(In dout, In y, const int32_t* __restrict__ pos, int64_t k,
                           float* __restrict__ dw, int64_t n, int64_t H) {
  const int lane = threadIdx.x & 31;
  const int64_t step = static_cast<int64_t>(gridDim.x) * (kThreads / 32);
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) >> 5; i < n;
       i += step) {  // warp-uniform
    const int64_t m = i / k, r = pos[i];
    float acc = 0.0f;
    for (int64_t h = lane; h < H; h += 32)
      acc = __fadd_rn(acc, __fmul_rn(dout[m * H + h], y[r * H + h]));
    acc = cuda::warp_sum(acc);
    if (lane == 0) dw[i] = acc;
  }
}

}  // namespace

void CudaBackend::moe_combine(const Matrix& y, const int32_t* pos, const float* w, int64_t k,
                              const Matrix& out) {
  const OpScope scope(*this, "moe_combine");
  cuda::check_activation("moe_combine", "y", y);
  cuda::check_activation("moe_combine", "out", out);
  check(k > 0 && y.cols == out.cols, "moe_combine: k must be positive and " +
                                         cuda::shape_of("y", y) + ", " +
                                         cuda::shape_of("out", out) + " as wide");
  if (out.rows == 0 || out.cols == 0) return;
  for (const auto& [name, p] : {std::pair<const char*, const void*>{"y", y.data},
                                {"out", out.data},
                                {"pos", pos},
                                {"w", w}})
    cuda::check_data("moe_combine", name, p);
  make_current();
  moe_combine_kernel<<<cuda::grid_for(out.rows * out.cols, kThreads, int64_t{32} * sm_count_),
                       kThreads, 0, stream_>>>(cuda::in_of(y), pos, w, k, cuda::out_of(out),
                                               out.rows, out.cols);
  cuda::check_launch("moe_combine_kernel");
}

void CudaBackend::moe_combine_backward(const Matrix& dout, const Matrix& y, const int32_t* pos,
                                       const float* w, int64_t k, const Matrix& dy, float* dw) {
  const OpScope scope(*this, "moe_combine_backward");
  cuda::check_activation("moe_combine_backward", "dout", dout);
  cuda::check_activation("moe_combine_backward", "y", y);
  cuda::check_activation("moe_combine_backward", "dy", dy, y.rows, y.cols);
  check(k > 0 && y.cols == dout.cols, "moe_combine_backward: k must be positive and " +
                                          cuda::shape_of("dout", dout) + ", " +
                                          cuda::shape_of("y", y) + " as wide");
  const int64_t n = dout.rows * k, H = dout.cols;
  if (n == 0) return;
  for (const auto& [name, p] : {std::pair<const char*, const void*>{"dout", dout.data},
                                {"y", y.data},
                                {"dy", dy.data},
                                {"pos", pos},
                                {"w", w},
                                {"dw", dw}})
    cuda::check_data("moe_combine_backward", name, p);
  make_current();
  if (H > 0)
    moe_scatter_kernel<<<cuda::grid_for(n * H, kThreads, int64_t{32} * sm_count_), kThreads, 0,
                         stream_>>>(cuda::in_of(dout), pos, w, k, cuda::out_of(dy), n, H);
  cuda::check_launch("moe_scatter_kernel");
  moe_weight_grad_kernel<<<cuda::grid_for(n, kThreads / 32, int64_t{32} * sm_count_), kThreads, 0,
                           stream_>>>(cuda::in_of(dout), cuda::in_of(y), pos, k, dw, n, H);
  cuda::check_launch("moe_weight_grad_kernel");
}

}  // namespace fp8rl
