// CPU reference: RMSNorm forward and backward (rows of x; also per-head norms on [M·heads, D]).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/access.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
using cpu::expect;
using cpu::ld;
using cpu::st;

void CpuBackend::rmsnorm_forward(const Matrix& x, const Matrix& w, float eps, const Matrix& y,
                                 float* rstd) {
  const int64_t H = x.cols;
  expect(w, 1, H, "rmsnorm_forward", "w");
  expect(y, x.rows, H, "rmsnorm_forward", "y");
  parallel_for(x.rows, 16, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      float ss = 0.0f;
      for (int64_t h = 0; h < H; ++h) {
        const float v = ld(x, m * H + h);
        ss += v * v;
      }
      const float r = 1.0f / std::sqrt(ss / static_cast<float>(H) + eps);
      rstd[m] = r;
      for (int64_t h = 0; h < H; ++h) st(y, m * H + h, ld(x, m * H + h) * r * ld(w, h));
    }
  });
}

void CpuBackend::rmsnorm_backward(const Matrix& dy, const Matrix& x, const Matrix& w,
                                  const float* rstd, const Matrix& dx, const Matrix& dw) {
  const int64_t M = x.rows, H = x.cols;
  expect(dy, M, H, "rmsnorm_backward", "dy");
  expect(dx, M, H, "rmsnorm_backward", "dx");
  expect(w, 1, H, "rmsnorm_backward", "w");
  expect(dw, 1, H, "rmsnorm_backward", "dw");
  cpu::expect_f32(dw, "rmsnorm_backward", "dw");
  // dw partial sums per fixed block of rows, added in block order: the same bits for any
  // thread count (chunks of parallel_for depend on it; these blocks do not).
  constexpr int64_t kRows = 32;
  const int64_t blocks = (M + kRows - 1) / kRows;
  std::vector<float> partial(static_cast<size_t>(blocks * H), 0.0f);
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float* dwp = partial.data() + b * H;
      for (int64_t m = b * kRows; m < std::min(M, (b + 1) * kRows); ++m) {
        const float r = rstd[m];
        float dot = 0.0f;  // Σ_h w·dy·x̂
        for (int64_t h = 0; h < H; ++h) {
          const float xh = ld(x, m * H + h) * r, g = ld(dy, m * H + h);
          dot += ld(w, h) * g * xh;
          dwp[h] += g * xh;
        }
        const float mean = dot / static_cast<float>(H);
        for (int64_t h = 0; h < H; ++h) {
          const float xh = ld(x, m * H + h) * r;
          st(dx, m * H + h, r * (ld(w, h) * ld(dy, m * H + h) - xh * mean));
        }
      }
    }
  });
  float* d = static_cast<float*>(dw.data);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t h = 0; h < H; ++h) d[h] += partial[static_cast<size_t>(b * H + h)];
}

}  // namespace fp8rl
