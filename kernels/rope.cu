// Rotary position embedding in place, Hugging Face rotate_half layout (mirrors
// engine/backend/cpu/rope.cpp). Shapes: x [M, heads·D], positions [M] int32 (device).
// For head h and i < D/2 the pair (x[i], x[i + D/2]) rotates by angle = positions[m] · inv_freq,
// inv_freq = rope_inv_freq(rope, i, D) in FP32 (backend/rope_rules.hpp: theta^(−2i/D), Llama 3's
// scaling when asked); inverse rotates by −angle (the backward pass). The
// device's powf and sincosf (full range reduction: no fast math) are within a few ulp of the
// CPU's; the rotation itself is spelled with _rn intrinsics so nvcc cannot contract it into FMAs.
#include <cuda_runtime.h>

#include <climits>
#include <string>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"

namespace fp8rl {
namespace {

using cuda::Out;

constexpr int kThreads = 128;

// One block per row (grid-stride). The angle of pair i (powf, sincosf: most of the kernel's
// instructions) is the same in every head of the row, so a thread makes it once and rotates pair
// i of a share of the heads: groups = kThreads / half threads per pair index (1 when half is
// larger), thread (i, g) taking heads g, g + groups, ... Each pair is read and written by one
// thread only, so the update in place is race-free; the arithmetic per pair is unchanged.
__global__ void __launch_bounds__(kThreads)
    rope_kernel(Out x, int64_t M, int64_t cols, int half, int heads,
                const int32_t* __restrict__ pos, Rope rope, bool inverse) {
  const int groups = max(1, kThreads / half);
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const float p = static_cast<float>(pos[m]);
    for (int t = threadIdx.x; t < half * groups; t += kThreads) {
      const int i = t % half, g = t / half;
      const float inv_freq = rope_inv_freq(rope, i, 2 * half);
      float angle = p * inv_freq;
      if (inverse) angle = -angle;
      float s, c;
      sincosf(angle, &s, &c);
      for (int head = g; head < heads; head += groups) {
        const int64_t a = m * cols + static_cast<int64_t>(head) * 2 * half + i, b = a + half;
        const float x1 = x.load(a), x2 = x.load(b);
        x.store(a, __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
        x.store(b, __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
      }
    }
  }
}

}  // namespace

void CudaBackend::rope(const Matrix& x, int64_t heads, const int32_t* positions, const Rope& rope,
                       bool inverse) {
  const OpScope scope(*this, "rope");
  cuda::check_activation("rope", "x", x);
  check(heads > 0 && x.cols % heads == 0, "rope: width of " + cuda::shape_of("x", x) +
                                              " is not a multiple of heads " +
                                              std::to_string(heads));
  const int64_t D = x.cols / heads;
  check(D % 2 == 0, "rope: head dim must be even, got " + std::to_string(D) + " (" +
                        cuda::shape_of("x", x) + ", " + std::to_string(heads) + " heads)");
  const int64_t M = x.rows;
  if (M == 0 || D == 0) return;
  check(x.cols / 2 <= INT_MAX && heads <= INT_MAX,
        "rope: " + cuda::shape_of("x", x) + " is too wide");
  cuda::check_data("rope", "x", x.data);
  cuda::check_data("rope", "positions", positions);
  make_current();
  rope_kernel<<<cuda::grid_for(M, 1, int64_t{64} * sm_count_), kThreads, 0, stream_>>>(
      cuda::out_of(x), M, x.cols, static_cast<int>(D / 2), static_cast<int>(heads), positions, rope,
      inverse);
  cuda::check_launch("rope_kernel");
}

}  // namespace fp8rl
