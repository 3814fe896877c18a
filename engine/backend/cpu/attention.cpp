// CPU reference: causal grouped-query attention, forward and backward, in FP32.
#include <cmath>
#include <vector>

#include "backend/cpu/access.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
using cpu::expect;
using cpu::ld;
using cpu::st;

namespace {

struct Dims {
  int64_t B, T, Hq, Hkv, D, group;
};

Dims check_dims(const Matrix& q, const Matrix& k, const Matrix& v, int64_t B, int64_t T, int64_t Hq,
                int64_t Hkv, const char* op) {
  check(B >= 0 && T >= 0 && Hq > 0 && Hkv > 0 && Hq % Hkv == 0,
        std::string(op) + ": query heads " + std::to_string(Hq) +
            " must be a positive multiple of kv heads " + std::to_string(Hkv));
  check(q.cols % Hq == 0, std::string(op) + ": q width is not a multiple of the query heads");
  const int64_t D = q.cols / Hq;
  expect(q, B * T, Hq * D, op, "q");
  expect(k, B * T, Hkv * D, op, "k");
  expect(v, B * T, Hkv * D, op, "v");
  return {B, T, Hq, Hkv, D, Hq / Hkv};
}

}  // namespace

void CpuBackend::attention_forward(const Matrix& q, const Matrix& k, const Matrix& v, int64_t B,
                                   int64_t T, int64_t Hq, int64_t Hkv, const Matrix& o,
                                   float* lse) {
  const Dims d = check_dims(q, k, v, B, T, Hq, Hkv, "attention_forward");
  expect(o, B * T, Hq * d.D, "attention_forward", "o");
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.D));
  parallel_for(B * Hq, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> s(static_cast<size_t>(T)), acc(static_cast<size_t>(d.D));
    for (int64_t bh = i0; bh < i1; ++bh) {
      const int64_t b = bh / Hq, h = bh % Hq, kvh = h / d.group;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t qrow = (b * T + t) * q.cols + h * d.D;
        float mx = -INFINITY;
        for (int64_t j = 0; j <= t; ++j) {
          const int64_t krow = (b * T + j) * k.cols + kvh * d.D;
          float dot = 0.0f;
          for (int64_t e = 0; e < d.D; ++e) dot += ld(q, qrow + e) * ld(k, krow + e);
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        float sum = 0.0f;
        for (int64_t j = 0; j <= t; ++j) sum += std::exp(s[j] - mx);
        const float l = mx + std::log(sum);
        lse[(b * Hq + h) * T + t] = l;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = 0; j <= t; ++j) {
          const float p = std::exp(s[j] - l);
          const int64_t vrow = (b * T + j) * v.cols + kvh * d.D;
          for (int64_t e = 0; e < d.D; ++e) acc[e] += p * ld(v, vrow + e);
        }
        for (int64_t e = 0; e < d.D; ++e) st(o, qrow + e, acc[e]);
      }
    }
  });
}

void CpuBackend::attention_backward(const Matrix& dout, const Matrix& q, const Matrix& k,
                                    const Matrix& v, const Matrix& o, const float* lse, int64_t B,
                                    int64_t T, int64_t Hq, int64_t Hkv, const Matrix& dq,
                                    const Matrix& dk, const Matrix& dv) {
  const Dims d = check_dims(q, k, v, B, T, Hq, Hkv, "attention_backward");
  expect(dout, q.rows, q.cols, "attention_backward", "dout");
  expect(o, q.rows, q.cols, "attention_backward", "o");
  expect(dq, q.rows, q.cols, "attention_backward", "dq");
  expect(dk, k.rows, k.cols, "attention_backward", "dk");
  expect(dv, v.rows, v.cols, "attention_backward", "dv");
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.D));
  // One task per (sequence, kv head): it owns the dk/dv rows of that head, so no races; the
  // query heads of its group are visited in order (deterministic sums).
  parallel_for(B * Hkv, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> dk_acc(static_cast<size_t>(T * d.D)), dv_acc(static_cast<size_t>(T * d.D)),
        dq_acc(static_cast<size_t>(d.D)), p(static_cast<size_t>(T));
    for (int64_t bk = i0; bk < i1; ++bk) {
      const int64_t b = bk / Hkv, kvh = bk % Hkv;
      std::fill(dk_acc.begin(), dk_acc.end(), 0.0f);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.0f);
      for (int64_t h = kvh * d.group; h < (kvh + 1) * d.group; ++h)
        for (int64_t t = 0; t < T; ++t) {
          const int64_t qrow = (b * T + t) * q.cols + h * d.D;
          const float l = lse[(b * Hq + h) * T + t];
          float di = 0.0f;  // Σ_e dO·O
          for (int64_t e = 0; e < d.D; ++e) di += ld(dout, qrow + e) * ld(o, qrow + e);
          std::fill(dq_acc.begin(), dq_acc.end(), 0.0f);
          for (int64_t j = 0; j <= t; ++j) {
            const int64_t krow = (b * T + j) * k.cols + kvh * d.D;
            float dot = 0.0f, dp = 0.0f;
            for (int64_t e = 0; e < d.D; ++e) {
              dot += ld(q, qrow + e) * ld(k, krow + e);
              dp += ld(dout, qrow + e) * ld(v, krow + e);
            }
            const float pj = std::exp(dot * scale - l);
            const float ds = pj * (dp - di);
            for (int64_t e = 0; e < d.D; ++e) {
              dq_acc[e] += scale * ds * ld(k, krow + e);
              dk_acc[j * d.D + e] += scale * ds * ld(q, qrow + e);
              dv_acc[j * d.D + e] += pj * ld(dout, qrow + e);
            }
          }
          for (int64_t e = 0; e < d.D; ++e) st(dq, qrow + e, dq_acc[e]);
        }
      for (int64_t j = 0; j < T; ++j)
        for (int64_t e = 0; e < d.D; ++e) {
          const int64_t idx = (b * T + j) * k.cols + kvh * d.D + e;
          st(dk, idx, dk_acc[j * d.D + e]);
          st(dv, idx, dv_acc[j * d.D + e]);
        }
    }
  });
}

}  // namespace fp8rl
