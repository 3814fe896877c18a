// CPU reference: the mixture-of-experts combine (weighted sum of each token's experts' rows) and
// its backward. Fixed order: j ascending per output element, h ascending per weight gradient.
#include "backend/cpu/access.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
using cpu::ld;
using cpu::st;

void CpuBackend::moe_combine(const Matrix& y, const int32_t* pos, const float* w, int64_t k,
                             const Matrix& out) {
  check(k > 0 && y.cols == out.cols, "moe_combine: k must be positive and y, out as wide");
  const int64_t H = out.cols;
  for (int64_t i = 0; i < out.rows * k; ++i)
    check(pos[i] >= 0 && pos[i] < y.rows, "moe_combine: pos[" + std::to_string(i) +
                                              "] = " + std::to_string(pos[i]) + " outside y's " +
                                              std::to_string(y.rows) + " rows");
  parallel_for(out.rows, 8, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t h = 0; h < H; ++h) {
        float acc = 0.0f;
        for (int64_t j = 0; j < k; ++j)
          acc += w[m * k + j] * ld(y, static_cast<int64_t>(pos[m * k + j]) * H + h);
        st(out, m * H + h, acc);
      }
  });
}

void CpuBackend::moe_combine_backward(const Matrix& dout, const Matrix& y, const int32_t* pos,
                                      const float* w, int64_t k, const Matrix& dy, float* dw) {
  check(k > 0 && y.cols == dout.cols && dy.cols == dout.cols && dy.rows == y.rows,
        "moe_combine_backward: dout, y, dy must be as wide, dy as tall as y");
  const int64_t H = dout.cols, n = dout.rows * k;
  for (int64_t i = 0; i < n; ++i)
    check(pos[i] >= 0 && pos[i] < y.rows, "moe_combine_backward: pos out of range");
  parallel_for(n, 8, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t m = i / k, r = pos[i];
      float acc = 0.0f;
      for (int64_t h = 0; h < H; ++h) {
        const float d = ld(dout, m * H + h);
        acc += d * ld(y, r * H + h);
        st(dy, r * H + h, w[i] * d);
      }
      dw[i] = acc;
    }
  });
}

}  // namespace fp8rl
