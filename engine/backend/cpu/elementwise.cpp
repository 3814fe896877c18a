// CPU reference: convert, transpose, add, and the optimizer's vector ops (sum of squares, scale,
// AdamW).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/access.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
using cpu::expect;
using cpu::ld;
using cpu::st;

void CpuBackend::convert(const Matrix& x, const Matrix& out) {
  expect(out, x.rows, x.cols, "convert", "out");
  expect(x, x.rows, x.cols, "convert", "x");
  parallel_for(x.rows * x.cols, 1 << 15, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) st(out, i, ld(x, i));
  });
}

namespace {

inline float widen(float x) {
  return x;
}
inline float widen(bf16 x) {
  return bf16_to_float(x);
}
inline void store(float* p, float v) {
  *p = v;
}
inline void store(bf16* p, float v) {
  *p = float_to_bf16(v);
}

// out[c][r] = x[r][c] for elements of type T, in 32×32 tiles (rows of x read and columns of
// out written a tile at a time, so both stay in cache).
template <class T>
void transpose_tiles(const T* x, int64_t rows, int64_t cols, T* out) {
  constexpr int64_t kTile = 32;
  parallel_for((rows + kTile - 1) / kTile, std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)),
               [&](int64_t b0, int64_t b1) {
                 for (int64_t r0 = b0 * kTile; r0 < std::min(rows, b1 * kTile); r0 += kTile) {
                   const int64_t r1 = std::min(rows, r0 + kTile);
                   for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
                     const int64_t c1 = std::min(cols, c0 + kTile);
                     for (int64_t c = c0; c < c1; ++c)
                       for (int64_t r = r0; r < r1; ++r) out[c * rows + r] = x[r * cols + c];
                   }
                 }
               });
}

}  // namespace

void CpuBackend::transpose(const Matrix& x, const Matrix& out) {
  expect(out, x.cols, x.rows, "transpose", "out");
  check(out.dtype == x.dtype, "transpose: input and output dtypes differ");
  if (x.dtype == DType::f32)
    transpose_tiles(static_cast<const float*>(x.data), x.rows, x.cols,
                    static_cast<float*>(out.data));
  else
    transpose_tiles(static_cast<const uint16_t*>(x.data), x.rows, x.cols,
                    static_cast<uint16_t*>(out.data));
}

void CpuBackend::add(const Matrix& a, const Matrix& b, const Matrix& out) {
  expect(b, a.rows, a.cols, "add", "b");
  expect(out, a.rows, a.cols, "add", "out");
  auto run = [&](auto* o, const auto* x, const auto* y) {  // one dtype per operand, no branches
    parallel_for(a.rows * a.cols, 1 << 15, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) store(o + i, widen(x[i]) + widen(y[i]));
    });
  };
  const bool f = a.dtype == DType::f32, g = b.dtype == DType::f32, h = out.dtype == DType::f32;
  if (f && g && h)
    run(static_cast<float*>(out.data), static_cast<const float*>(a.data),
        static_cast<const float*>(b.data));
  else if (!f && !g && !h)
    run(static_cast<bf16*>(out.data), static_cast<const bf16*>(a.data),
        static_cast<const bf16*>(b.data));
  else if (f && !g && f == h)
    run(static_cast<float*>(out.data), static_cast<const float*>(a.data),
        static_cast<const bf16*>(b.data));
  else
    parallel_for(a.rows * a.cols, 1 << 15, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) st(out, i, ld(a, i) + ld(b, i));
    });
}

namespace {
double squares(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}
}  // namespace

double CpuBackend::sum_squares(const float* x, int64_t n) {
  count_host_sync();
  return squares(x, n);
}

double CpuBackend::sum_squares(const std::vector<FloatSpan>& xs) {
  count_host_sync();
  double s = 0;
  for (const FloatSpan& x : xs) s += squares(x.data, x.n);
  return s;
}

void CpuBackend::scale(const std::vector<FloatSpan>& xs, float s) {
  for (const FloatSpan& x : xs) scale(x.data, x.n, s);
}

void CpuBackend::adamw(const std::vector<AdamWParam>& params, float lr, float beta1, float beta2,
                       float eps, int64_t t) {
  for (const AdamWParam& q : params)
    adamw(q.p, q.g, q.m, q.v, q.n, lr, beta1, beta2, eps, q.weight_decay, t);
}

void CpuBackend::scale(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void CpuBackend::adamw(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int64_t t) {
  check(t >= 1, "adamw: step must be ≥ 1");
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), t));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), t));
  parallel_for(n, 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
      v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
      const float mhat = m[i] / bc1, vhat = v[i] / bc2;
      p[i] = p[i] - lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * p[i]);
    }
  });
}

}  // namespace fp8rl
