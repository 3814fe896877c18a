// CPU reference: the ops of multi-head latent attention (DeepSeek-V3) — column copies, rotary
// embedding on a column range, causal attention over the per-head no-RoPE keys and the shared
// RoPE key (forward and backward), and the latent KV cache with attention in the absorbed form.
// FP32 arithmetic; every sum in a fixed order (dot products over features ascending, sums over
// keys ascending, the heads' sum of the shared key's gradient in head order).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/access.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/parallel.hpp"
#include "fp8/codec.hpp"

namespace fp8rl {
using cpu::expect;
using cpu::ld;
using cpu::st;

namespace {

void check_dims(const MlaDims& d, const char* op) {
  check(d.heads > 0 && d.nope >= 0 && d.rope >= 0 && d.v > 0 && d.qk() > 0,
        std::string(op) + ": heads and head sizes must be positive");
}

// Reads cache element e of row `row` (latent part e < latent, rope part after) as float.
float latent_ld(const KvCacheView& c, int64_t row, int64_t e, int64_t latent) {
  const int64_t i = row * c.width + e;
  if (c.dtype == DType::fp8)
    return e4m3_to_float(static_cast<const uint8_t*>(c.k)[i]) *
           *(e < latent ? c.k_scale_inv : c.v_scale_inv);
  return ld(Matrix{c.k, 0, 0, c.dtype}, i);
}

void check_latent_cache(const KvCacheView& c, const MlaDims& d, const char* op) {
  check(c.k && c.num_slots > 0 && c.max_len > 0, std::string(op) + ": empty latent cache");
  check(c.width == d.latent + d.rope, std::string(op) + ": the cache rows hold " +
                                          std::to_string(c.width) + " features, expected latent " +
                                          std::to_string(d.latent) + " + rope " +
                                          std::to_string(d.rope));
  check(c.dtype != DType::fp8 || (c.k_scale_inv && c.v_scale_inv),
        std::string(op) + ": an fp8 latent cache needs its two scales");
}

}  // namespace

void CpuBackend::copy_columns(const Matrix& x, int64_t x_col, const Matrix& out, int64_t out_col,
                              int64_t cols) {
  expect(x, x.rows, x.cols, "copy_columns", "x");
  expect(out, x.rows, out.cols, "copy_columns", "out");
  check(cols >= 0 && x_col >= 0 && out_col >= 0 && x_col + cols <= x.cols &&
            out_col + cols <= out.cols,
        "copy_columns: columns [" + std::to_string(x_col) + ", " + std::to_string(x_col + cols) +
            ") of " + cpu::shape(x) + " into [" + std::to_string(out_col) + ", " +
            std::to_string(out_col + cols) + ") of " + cpu::shape(out) + " are out of range");
  parallel_for(x.rows, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c)
        st(out, r * out.cols + out_col + c, ld(x, r * x.cols + x_col + c));
  });
}

void CpuBackend::rope_columns(const Matrix& x, int64_t heads, int64_t head_width, int64_t first,
                              int64_t dims, const int32_t* positions, const Rope& rope,
                              bool inverse) {
  expect(x, x.rows, heads * head_width, "rope_columns", "x");
  check(heads > 0 && dims > 0 && dims % 2 == 0 && first >= 0 && first + dims <= head_width,
        "rope_columns: an even range of " + std::to_string(dims) + " columns from " +
            std::to_string(first) + " must lie inside each head of " + std::to_string(head_width));
  const int64_t half = dims / 2;
  // cos and sin of each position present (the rows of a batch repeat a few positions), as
  // rope.cpp makes them, times the attention factor.
  int64_t lo = 0, hi = -1;
  if (x.rows > 0) {
    lo = hi = positions[0];
    for (int64_t m = 1; m < x.rows; ++m) {
      lo = std::min<int64_t>(lo, positions[m]);
      hi = std::max<int64_t>(hi, positions[m]);
    }
  }
  std::vector<float> cs(static_cast<size_t>((hi - lo + 1) * 2 * half));
  for (int64_t p = lo; p <= hi; ++p)
    for (int64_t i = 0; i < half; ++i) {
      float angle = static_cast<float>(p) * rope_inv_freq(rope, i, dims);
      if (inverse) angle = -angle;
      cs[static_cast<size_t>((p - lo) * 2 * half + 2 * i)] =
          std::cos(angle) * rope.attention_factor;
      cs[static_cast<size_t>((p - lo) * 2 * half + 2 * i + 1)] =
          std::sin(angle) * rope.attention_factor;
    }
  parallel_for(x.rows, 16, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const float* row_cs = cs.data() + (positions[m] - lo) * 2 * half;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = m * x.cols + h * head_width + first;
        for (int64_t i = 0; i < half; ++i) {
          const float c = row_cs[2 * i], s = row_cs[2 * i + 1];
          const int64_t a = base + (rope.interleaved ? 2 * i : i);
          const int64_t b = base + (rope.interleaved ? 2 * i + 1 : i + half);
          const float x1 = ld(x, a), x2 = ld(x, b);
          st(x, a, x1 * c - x2 * s);
          st(x, b, x2 * c + x1 * s);
        }
      }
    }
  });
}

namespace {

// Head h of sequence b: its keys as FP32, kt[e·T + j] (transposed: a loop over keys reads them
// in order), and its values vr[j·dv + e] (and transposed into vt when given).
void gather_mla_head(const Matrix& kv, const Matrix& k_rope, int64_t b, int64_t T, int64_t h,
                     const MlaDims& d, float* kt, float* kr, float* vr, float* vt) {
  const int64_t dqk = d.qk(), width = d.nope + d.v;
  for (int64_t j = 0; j < T; ++j) {
    const int64_t row = b * T + j;
    for (int64_t e = 0; e < d.nope; ++e) {
      const float v = ld(kv, row * kv.cols + h * width + e);
      kt[e * T + j] = v;
      if (kr) kr[j * dqk + e] = v;
    }
    for (int64_t e = 0; e < d.rope; ++e) {
      const float v = ld(k_rope, row * k_rope.cols + e);
      kt[(d.nope + e) * T + j] = v;
      if (kr) kr[j * dqk + d.nope + e] = v;
    }
    for (int64_t e = 0; e < d.v; ++e) {
      const float v = ld(kv, row * kv.cols + h * width + d.nope + e);
      vr[j * d.v + e] = v;
      if (vt) vt[e * T + j] = v;
    }
  }
}

}  // namespace

void CpuBackend::mla_attention_forward(const Matrix& q, const Matrix& kv, const Matrix& k_rope,
                                       int64_t B, int64_t T, const MlaDims& d, float scale,
                                       const Matrix& o, float* lse) {
  check_dims(d, "mla_attention_forward");
  const int64_t M = B * T, H = d.heads, dqk = d.qk();
  expect(q, M, H * dqk, "mla_attention_forward", "q");
  expect(kv, M, H * (d.nope + d.v), "mla_attention_forward", "kv");
  expect(k_rope, M, d.rope, "mla_attention_forward", "k_rope");
  expect(o, M, H * d.v, "mla_attention_forward", "o");
  parallel_for(B * H, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> kt(static_cast<size_t>(dqk * T)), vr(static_cast<size_t>(T * d.v)),
        s(static_cast<size_t>(T)), qf(static_cast<size_t>(dqk)), acc(static_cast<size_t>(d.v));
    for (int64_t bh = i0; bh < i1; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      gather_mla_head(kv, k_rope, b, T, h, d, kt.data(), nullptr, vr.data(), nullptr);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t qrow = (b * T + t) * q.cols + h * dqk;
        for (int64_t e = 0; e < dqk; ++e) qf[static_cast<size_t>(e)] = ld(q, qrow + e);
        float* sp = s.data();
        std::fill(sp, sp + t + 1, 0.0f);
        for (int64_t e = 0; e < dqk; ++e) {
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
        lse[(b * H + h) * T + t] = l;
        float* ap = acc.data();
        std::fill(ap, ap + d.v, 0.0f);
        for (int64_t j = 0; j <= t; ++j) {
          const float p = std::exp(sp[j] - l);
          const float* vj = vr.data() + j * d.v;
          for (int64_t e = 0; e < d.v; ++e) ap[e] += p * vj[e];
        }
        const int64_t orow = (b * T + t) * o.cols + h * d.v;
        for (int64_t e = 0; e < d.v; ++e) st(o, orow + e, ap[e]);
      }
    }
  });
}

void CpuBackend::mla_attention_backward(const Matrix& dout, const Matrix& q, const Matrix& kv,
                                        const Matrix& k_rope, const Matrix& o, const float* lse,
                                        int64_t B, int64_t T, const MlaDims& d, float scale,
                                        const Matrix& dq, const Matrix& dkv,
                                        const Matrix& dk_rope) {
  check_dims(d, "mla_attention_backward");
  const int64_t M = B * T, H = d.heads, dqk = d.qk(), width = d.nope + d.v;
  expect(q, M, H * dqk, "mla_attention_backward", "q");
  expect(kv, M, H * width, "mla_attention_backward", "kv");
  expect(k_rope, M, d.rope, "mla_attention_backward", "k_rope");
  expect(o, M, H * d.v, "mla_attention_backward", "o");
  expect(dout, M, H * d.v, "mla_attention_backward", "dout");
  expect(dq, M, H * dqk, "mla_attention_backward", "dq");
  expect(dkv, M, H * width, "mla_attention_backward", "dkv");
  expect(dk_rope, M, d.rope, "mla_attention_backward", "dk_rope");
  // Each (sequence, head) task owns its dq and dkv entries; the shared key's gradient of each
  // head goes to its own rows of `part` and is summed over the heads in order afterwards.
  std::vector<float> part(static_cast<size_t>(B * H * T * d.rope));
  parallel_for(B * H, 1, [&](int64_t i0, int64_t i1) {
    const size_t tk = static_cast<size_t>(T * dqk), tv = static_cast<size_t>(T * d.v);
    std::vector<float> dk_acc(tk), dv_acc(tv), kt(tk), kr(tk), vr(tv), vt(tv),
        dq_acc(static_cast<size_t>(dqk)), qf(static_cast<size_t>(dqk)),
        gf(static_cast<size_t>(d.v)), dots(static_cast<size_t>(T)), dps(static_cast<size_t>(T));
    for (int64_t bh = i0; bh < i1; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      std::fill(dk_acc.begin(), dk_acc.end(), 0.0f);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.0f);
      gather_mla_head(kv, k_rope, b, T, h, d, kt.data(), kr.data(), vr.data(), vt.data());
      for (int64_t t = 0; t < T; ++t) {
        const int64_t qrow = (b * T + t) * q.cols + h * dqk;
        const int64_t orow = (b * T + t) * o.cols + h * d.v;
        const float l = lse[(b * H + h) * T + t];
        float di = 0.0f;  // Σ_e dO·O
        for (int64_t e = 0; e < dqk; ++e) qf[static_cast<size_t>(e)] = ld(q, qrow + e);
        for (int64_t e = 0; e < d.v; ++e) {
          gf[static_cast<size_t>(e)] = ld(dout, orow + e);
          di += gf[static_cast<size_t>(e)] * ld(o, orow + e);
        }
        float* dt = dots.data();
        float* dp = dps.data();
        std::fill(dt, dt + t + 1, 0.0f);
        std::fill(dp, dp + t + 1, 0.0f);
        for (int64_t e = 0; e < dqk; ++e) {
          const float qe = qf[static_cast<size_t>(e)];
          const float* kte = kt.data() + e * T;
          for (int64_t j = 0; j <= t; ++j) dt[j] += qe * kte[j];
        }
        for (int64_t e = 0; e < d.v; ++e) {
          const float ge = gf[static_cast<size_t>(e)];
          const float* vte = vt.data() + e * T;
          for (int64_t j = 0; j <= t; ++j) dp[j] += ge * vte[j];
        }
        float* dqa = dq_acc.data();
        std::fill(dqa, dqa + dqk, 0.0f);
        for (int64_t j = 0; j <= t; ++j) {
          const float pj = std::exp(dt[j] * scale - l);
          const float sds = scale * (pj * (dp[j] - di));
          const float* kj = kr.data() + j * dqk;
          float* dkj = dk_acc.data() + j * dqk;
          float* dvj = dv_acc.data() + j * d.v;
          for (int64_t e = 0; e < dqk; ++e) {
            dqa[e] += sds * kj[e];
            dkj[e] += sds * qf[static_cast<size_t>(e)];
          }
          for (int64_t e = 0; e < d.v; ++e) dvj[e] += pj * gf[static_cast<size_t>(e)];
        }
        for (int64_t e = 0; e < dqk; ++e) st(dq, qrow + e, dqa[e]);
      }
      for (int64_t j = 0; j < T; ++j) {
        const int64_t row = (b * T + j) * dkv.cols + h * width;
        for (int64_t e = 0; e < d.nope; ++e)
          st(dkv, row + e, dk_acc[static_cast<size_t>(j * dqk + e)]);
        for (int64_t e = 0; e < d.v; ++e)
          st(dkv, row + d.nope + e, dv_acc[static_cast<size_t>(j * d.v + e)]);
        float* pr = part.data() + ((b * H + h) * T + j) * d.rope;
        for (int64_t e = 0; e < d.rope; ++e)
          pr[e] = dk_acc[static_cast<size_t>(j * dqk + d.nope + e)];
      }
    }
  });
  parallel_for(M, 16, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const int64_t b = m / T, j = m % T;
      for (int64_t e = 0; e < d.rope; ++e) {
        float sum = 0.0f;
        for (int64_t h = 0; h < H; ++h)
          sum += part[static_cast<size_t>(((b * H + h) * T + j) * d.rope + e)];
        st(dk_rope, m * dk_rope.cols + e, sum);
      }
    }
  });
}

void CpuBackend::mla_cache_write(const Matrix& latent, const Matrix& k_rope,
                                 const int32_t* slot_ids, const int32_t* positions,
                                 const MlaDims& d, const KvCacheView& cache) {
  check_latent_cache(cache, d, "mla_cache_write");
  expect(latent, latent.rows, d.latent, "mla_cache_write", "latent");
  expect(k_rope, latent.rows, d.rope, "mla_cache_write", "k_rope");
  const bool fp8 = cache.dtype == DType::fp8;
  const float ls = fp8 ? 1.0f / *cache.k_scale_inv : 1.0f;
  const float rs = fp8 ? 1.0f / *cache.v_scale_inv : 1.0f;
  const Matrix dst{cache.k, 0, 0, cache.dtype};
  for (int64_t i = 0; i < latent.rows; ++i) {
    check(slot_ids[i] >= 0 && slot_ids[i] < cache.num_slots && positions[i] >= 0 &&
              positions[i] < cache.max_len,
          "mla_cache_write: row " + std::to_string(i) + " targets slot " +
              std::to_string(slot_ids[i]) + ", position " + std::to_string(positions[i]) +
              " outside the cache (" + std::to_string(cache.num_slots) + " slots × " +
              std::to_string(cache.max_len) + ")");
    const int64_t row =
        (static_cast<int64_t>(slot_ids[i]) * cache.max_len + positions[i]) * cache.width;
    for (int64_t e = 0; e < cache.width; ++e) {
      const float x = e < d.latent ? ld(latent, i * latent.cols + e)
                                   : ld(k_rope, i * k_rope.cols + e - d.latent);
      if (fp8)
        static_cast<uint8_t*>(cache.k)[row + e] = float_to_e4m3(x * (e < d.latent ? ls : rs));
      else
        st(dst, row + e, x);
    }
  }
}

void CpuBackend::mla_attention_cached(const Matrix& q, const Matrix& w_kv_b,
                                      const KvCacheView& cache, const int32_t* slot_ids,
                                      const int32_t* lengths, const MlaDims& d, float scale,
                                      const Matrix& o) {
  check_dims(d, "mla_attention_cached");
  check_latent_cache(cache, d, "mla_attention_cached");
  const int64_t H = d.heads, dqk = d.qk(), R = d.latent, width = d.nope + d.v;
  expect(q, q.rows, H * dqk, "mla_attention_cached", "q");
  expect(o, q.rows, H * d.v, "mla_attention_cached", "o");
  expect(w_kv_b, H * width, R, "mla_attention_cached", "w_kv_b");
  for (int64_t i = 0; i < q.rows; ++i)
    check(slot_ids[i] >= 0 && slot_ids[i] < cache.num_slots && lengths[i] >= 1 &&
              lengths[i] <= cache.max_len,
          "mla_attention_cached: row " + std::to_string(i) + " has slot " +
              std::to_string(slot_ids[i]) + " and length " + std::to_string(lengths[i]) +
              " outside the cache");
  // One task per query row: its cached rows are dequantized once and shared by its heads.
  parallel_for(q.rows, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> rows, s, qlat(static_cast<size_t>(R)), lat(static_cast<size_t>(R));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t len = lengths[i], base = static_cast<int64_t>(slot_ids[i]) * cache.max_len;
      rows.resize(static_cast<size_t>(len * cache.width));
      for (int64_t j = 0; j < len; ++j)
        for (int64_t e = 0; e < cache.width; ++e)
          rows[static_cast<size_t>(j * cache.width + e)] = latent_ld(cache, base + j, e, R);
      s.resize(static_cast<size_t>(len));
      for (int64_t h = 0; h < H; ++h) {
        const int64_t qrow = i * q.cols + h * dqk, wrow = h * width;
        // q_lat[r] = Σ_n q_nope[n]·W[wrow + n, r] (n ascending).
        std::fill(qlat.begin(), qlat.end(), 0.0f);
        for (int64_t n = 0; n < d.nope; ++n) {
          const float qn = ld(q, qrow + n);
          for (int64_t r = 0; r < R; ++r)
            qlat[static_cast<size_t>(r)] += qn * ld(w_kv_b, (wrow + n) * R + r);
        }
        float mx = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          const float* c = rows.data() + j * cache.width;
          float dot = 0.0f;
          for (int64_t r = 0; r < R; ++r) dot += qlat[static_cast<size_t>(r)] * c[r];
          for (int64_t e = 0; e < d.rope; ++e) dot += ld(q, qrow + d.nope + e) * c[R + e];
          s[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < len; ++j) sum += std::exp(s[static_cast<size_t>(j)] - mx);
        const float l = mx + std::log(sum);
        std::fill(lat.begin(), lat.end(), 0.0f);
        for (int64_t j = 0; j < len; ++j) {
          const float p = std::exp(s[static_cast<size_t>(j)] - l);
          const float* c = rows.data() + j * cache.width;
          for (int64_t r = 0; r < R; ++r) lat[static_cast<size_t>(r)] += p * c[r];
        }
        for (int64_t e = 0; e < d.v; ++e) {
          float acc = 0.0f;
          for (int64_t r = 0; r < R; ++r)
            acc += ld(w_kv_b, (wrow + d.nope + e) * R + r) * lat[static_cast<size_t>(r)];
          st(o, i * o.cols + h * d.v + e, acc);
        }
      }
    }
  });
}

}  // namespace fp8rl
