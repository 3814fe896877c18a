// CPU reference: causal grouped-query attention, forward and backward, in FP32.
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

namespace {

// The rows of one (sequence, kv head) of k or v as FP32: rows[j][e] (and, when cols is given,
// cols[e][j]: the same values transposed, so that a loop over keys reads them in order).
void gather_head(const Matrix& x, int64_t b, int64_t T, int64_t kvh, int64_t D, float* rows,
                 float* cols) {
  for (int64_t j = 0; j < T; ++j) {
    const int64_t r = (b * T + j) * x.cols + kvh * D;
    for (int64_t e = 0; e < D; ++e) {
      const float v = ld(x, r + e);
      rows[j * D + e] = v;
      if (cols) cols[e * T + j] = v;
    }
  }
}

}  // namespace

// Both passes keep the scalar reference's order of operations for every value: a dot product
// over the head dimension sums e = 0 … D−1 from 0, a sum over keys j = 0 … in order. Vectors
// run across independent values (the keys of a query's dot products, the elements of an
// accumulated row), never along a sum, so they change the speed only.
void CpuBackend::attention_forward(const Matrix& q, const Matrix& k, const Matrix& v, int64_t B,
                                   int64_t T, int64_t Hq, int64_t Hkv, const Matrix& o,
                                   float* lse) {
  const Dims d = check_dims(q, k, v, B, T, Hq, Hkv, "attention_forward");
  expect(o, B * T, Hq * d.D, "attention_forward", "o");
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.D));
  const int64_t D = d.D;
  // One task per (sequence, kv head): its keys and values are read once for the group.
  parallel_for(B * Hkv, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> kt(static_cast<size_t>(D * T)), kr(static_cast<size_t>(T * D)),
        vr(static_cast<size_t>(T * D)), s(static_cast<size_t>(T)), qf(static_cast<size_t>(D)),
        acc(static_cast<size_t>(D));
    for (int64_t bk = i0; bk < i1; ++bk) {
      const int64_t b = bk / Hkv, kvh = bk % Hkv;
      gather_head(k, b, T, kvh, D, kr.data(), kt.data());
      gather_head(v, b, T, kvh, D, vr.data(), nullptr);
      for (int64_t h = kvh * d.group; h < (kvh + 1) * d.group; ++h)
        for (int64_t t = 0; t < T; ++t) {
          const int64_t qrow = (b * T + t) * q.cols + h * D;
          for (int64_t e = 0; e < D; ++e) qf[static_cast<size_t>(e)] = ld(q, qrow + e);
          // s[j] = Σ_e q[e]·k[j][e] for the keys j ≤ t, all at once.
          float* sp = s.data();
          std::fill(sp, sp + t + 1, 0.0f);
          for (int64_t e = 0; e < D; ++e) {
            const float qe = qf[static_cast<size_t>(e)];
            const float* kte = kt.data() + e * T;
            for (int64_t j = 0; j <= t; ++j) sp[j] += qe * kte[j];
          }
          float mx = -INFINITY;
          for (int64_t j = 0; j <= t; ++j) {
            sp[j] = sp[j] * scale;
            mx = std::max(mx, sp[j]);
          }
          float sum = 0.0f;
          for (int64_t j = 0; j <= t; ++j) sum += std::exp(sp[j] - mx);
          const float l = mx + std::log(sum);
          lse[(b * Hq + h) * T + t] = l;
          float* ap = acc.data();
          std::fill(ap, ap + D, 0.0f);
          for (int64_t j = 0; j <= t; ++j) {
            const float p = std::exp(sp[j] - l);
            const float* vj = vr.data() + j * D;
            for (int64_t e = 0; e < D; ++e) ap[e] += p * vj[e];
          }
          for (int64_t e = 0; e < D; ++e) st(o, qrow + e, ap[e]);
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
  const int64_t D = d.D;
  // One task per (sequence, kv head): it owns the dk/dv rows of that head, so no races; the
  // query heads of its group are visited in order (deterministic sums).
  parallel_for(B * Hkv, 1, [&](int64_t i0, int64_t i1) {
    const size_t td = static_cast<size_t>(T * D);
    std::vector<float> dk_acc(td), dv_acc(td), kr(td), kt(td), vt(td), vr(td),
        dq_acc(static_cast<size_t>(D)), qf(static_cast<size_t>(D)), gf(static_cast<size_t>(D)),
        dots(static_cast<size_t>(T)), dps(static_cast<size_t>(T));
    for (int64_t bk = i0; bk < i1; ++bk) {
      const int64_t b = bk / Hkv, kvh = bk % Hkv;
      std::fill(dk_acc.begin(), dk_acc.end(), 0.0f);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.0f);
      gather_head(k, b, T, kvh, D, kr.data(), kt.data());
      gather_head(v, b, T, kvh, D, vr.data(), vt.data());
      for (int64_t h = kvh * d.group; h < (kvh + 1) * d.group; ++h)
        for (int64_t t = 0; t < T; ++t) {
          const int64_t qrow = (b * T + t) * q.cols + h * D;
          const float l = lse[(b * Hq + h) * T + t];
          float di = 0.0f;  // Σ_e dO·O
          for (int64_t e = 0; e < D; ++e) {
            qf[static_cast<size_t>(e)] = ld(q, qrow + e);
            gf[static_cast<size_t>(e)] = ld(dout, qrow + e);
            di += gf[static_cast<size_t>(e)] * ld(o, qrow + e);
          }
          // dots[j] = Σ_e q·k[j], dps[j] = Σ_e dO·v[j] for the keys j ≤ t, all at once.
          float* dt = dots.data();
          float* dp = dps.data();
          std::fill(dt, dt + t + 1, 0.0f);
          std::fill(dp, dp + t + 1, 0.0f);
          for (int64_t e = 0; e < D; ++e) {
            const float qe = qf[static_cast<size_t>(e)], ge = gf[static_cast<size_t>(e)];
            const float* kte = kt.data() + e * T;
            const float* vte = vt.data() + e * T;
            for (int64_t j = 0; j <= t; ++j) {
              dt[j] += qe * kte[j];
              dp[j] += ge * vte[j];
            }
          }
          float* dqa = dq_acc.data();
          std::fill(dqa, dqa + D, 0.0f);
          for (int64_t j = 0; j <= t; ++j) {
            const float pj = std::exp(dt[j] * scale - l);
            const float ds = pj * (dp[j] - di);
            const float sds = scale * ds;
            const float* kj = kr.data() + j * D;
            float* dkj = dk_acc.data() + j * D;
            float* dvj = dv_acc.data() + j * D;
            for (int64_t e = 0; e < D; ++e) {
              dqa[e] += sds * kj[e];
              dkj[e] += sds * qf[static_cast<size_t>(e)];
              dvj[e] += pj * gf[static_cast<size_t>(e)];
            }
          }
          for (int64_t e = 0; e < D; ++e) st(dq, qrow + e, dqa[e]);
        }
      for (int64_t j = 0; j < T; ++j)
        for (int64_t e = 0; e < D; ++e) {
          const int64_t idx = (b * T + j) * k.cols + kvh * D + e;
          st(dk, idx, dk_acc[static_cast<size_t>(j * D + e)]);
          st(dv, idx, dv_acc[static_cast<size_t>(j * D + e)]);
        }
    }
  });
}

}  // namespace fp8rl
