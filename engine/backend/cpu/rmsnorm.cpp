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

// Rows are independent: a group of kGroup rows is walked together, so that their sums (each in
// its own order, h = 0 … H−1 from 0) run side by side instead of one after the other.
constexpr int64_t kGroup = 8;

void CpuBackend::rmsnorm_forward(const Matrix& x, const Matrix& w, float eps, const Matrix& y,
                                 float* rstd) {
  const int64_t H = x.cols;
  expect(w, 1, H, "rmsnorm_forward", "w");
  expect(y, x.rows, H, "rmsnorm_forward", "y");
  parallel_for((x.rows + kGroup - 1) / kGroup, 2, [&](int64_t g0, int64_t g1) {
    for (int64_t m0 = g0 * kGroup; m0 < std::min(x.rows, g1 * kGroup); m0 += kGroup) {
      const int64_t n = std::min(kGroup, x.rows - m0);
      float ss[kGroup] = {};
      for (int64_t h = 0; h < H; ++h)
        for (int64_t l = 0; l < n; ++l) {
          const float v = ld(x, (m0 + l) * H + h);
          ss[l] += v * v;
        }
      for (int64_t l = 0; l < n; ++l) {
        const int64_t m = m0 + l;
        const float r = 1.0f / std::sqrt(ss[l] / static_cast<float>(H) + eps);
        rstd[m] = r;
        for (int64_t h = 0; h < H; ++h) st(y, m * H + h, ld(x, m * H + h) * r * ld(w, h));
      }
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
      const int64_t end = std::min(M, (b + 1) * kRows);
      for (int64_t m0 = b * kRows; m0 < end; m0 += kGroup) {
        const int64_t n = std::min(kGroup, end - m0);
        float dot[kGroup] = {};  // Σ_h w·dy·x̂, per row
        // dwp[h] takes the rows in order, as one row after the other would add them.
        for (int64_t h = 0; h < H; ++h) {
          const float wh = ld(w, h);
          for (int64_t l = 0; l < n; ++l) {
            const int64_t m = m0 + l;
            const float xh = ld(x, m * H + h) * rstd[m], g = ld(dy, m * H + h);
            dot[l] += wh * g * xh;
            dwp[h] += g * xh;
          }
        }
        for (int64_t l = 0; l < n; ++l) {
          const int64_t m = m0 + l;
          const float r = rstd[m], mean = dot[l] / static_cast<float>(H);
          for (int64_t h = 0; h < H; ++h) {
            const float xh = ld(x, m * H + h) * r;
            st(dx, m * H + h, r * (ld(w, h) * ld(dy, m * H + h) - xh * mean));
          }
        }
      }
    }
  });
  float* d = static_cast<float*>(dw.data);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t h = 0; h < H; ++h) d[h] += partial[static_cast<size_t>(b * H + h)];
}

}  // namespace fp8rl
