// CPU reference: KV-cache writes (bf16 / f32 values or E4M3 codes with per-layer scales) and
// attention of queries over their sequence's cached keys and values.
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

void check_cache(const KvCacheView& c, const char* op) {
  check(c.k && c.v && c.num_slots > 0 && c.max_len > 0 && c.width > 0,
        std::string(op) + ": empty KV cache");
  check(c.dtype != DType::fp8 || (c.k_scale_inv && c.v_scale_inv),
        std::string(op) + ": an fp8 KV cache needs its K and V scales");
}

// Reads element e of cache row `row` of k (which = 0) or v (which = 1) as float.
float cache_ld(const KvCacheView& c, int which, int64_t row, int64_t e) {
  const void* base = which == 0 ? c.k : c.v;
  const int64_t i = row * c.width + e;
  if (c.dtype == DType::fp8)
    return e4m3_to_float(static_cast<const uint8_t*>(base)[i]) *
           *(which == 0 ? c.k_scale_inv : c.v_scale_inv);
  return ld(Matrix{const_cast<void*>(base), 0, 0, c.dtype}, i);
}

}  // namespace

float CpuBackend::amax(const Matrix& x) {
  count_host_sync();
  float m;
  amax_into(x, &m);
  return m;
}

void CpuBackend::amax_into(const Matrix& x, float* out) {
  check(out != nullptr, "amax_into: null output");
  float m = 0.0f;
  bool nan = false;
  for (int64_t i = 0; i < x.rows * x.cols; ++i) {
    const float a = std::fabs(ld(x, i));
    nan |= a != a;
    m = a > m ? a : m;
  }
  *out = nan ? NAN : m;
}

void CpuBackend::kv_write(const Matrix& k, const Matrix& v, const int32_t* slot_ids,
                          const int32_t* positions, const KvCacheView& cache) {
  check_cache(cache, "kv_write");
  expect(k, k.rows, cache.width, "kv_write", "k");
  expect(v, k.rows, cache.width, "kv_write", "v");
  const float ks = cache.dtype == DType::fp8 ? 1.0f / *cache.k_scale_inv : 1.0f;
  const float vs = cache.dtype == DType::fp8 ? 1.0f / *cache.v_scale_inv : 1.0f;
  for (int64_t i = 0; i < k.rows; ++i) {
    check(slot_ids[i] >= 0 && slot_ids[i] < cache.num_slots && positions[i] >= 0 &&
              positions[i] < cache.max_len,
          "kv_write: row " + std::to_string(i) + " targets slot " + std::to_string(slot_ids[i]) +
              ", position " + std::to_string(positions[i]) + " outside the cache (" +
              std::to_string(cache.num_slots) + " slots × " + std::to_string(cache.max_len) + ")");
    const int64_t row = slot_ids[i] * cache.max_len + positions[i];
    for (int64_t e = 0; e < cache.width; ++e) {
      const int64_t dst = row * cache.width + e;
      if (cache.dtype == DType::fp8) {
        static_cast<uint8_t*>(cache.k)[dst] = float_to_e4m3(ld(k, i * k.cols + e) * ks);
        static_cast<uint8_t*>(cache.v)[dst] = float_to_e4m3(ld(v, i * v.cols + e) * vs);
      } else {
        st(Matrix{cache.k, 0, 0, cache.dtype}, dst, ld(k, i * k.cols + e));
        st(Matrix{cache.v, 0, 0, cache.dtype}, dst, ld(v, i * v.cols + e));
      }
    }
  }
}

void CpuBackend::attention_cached(const Matrix& q, const KvCacheView& cache,
                                  const int32_t* slot_ids, const int32_t* lengths, int64_t Hq,
                                  int64_t Hkv, const Matrix& o) {
  check_cache(cache, "attention_cached");
  check(Hq > 0 && Hkv > 0 && Hq % Hkv == 0 && cache.width % Hkv == 0,
        "attention_cached: heads do not divide the widths");
  const int64_t D = cache.width / Hkv, group = Hq / Hkv;
  expect(q, q.rows, Hq * D, "attention_cached", "q");
  expect(o, q.rows, Hq * D, "attention_cached", "o");
  for (int64_t i = 0; i < q.rows; ++i)
    check(slot_ids[i] >= 0 && slot_ids[i] < cache.num_slots && lengths[i] >= 1 &&
              lengths[i] <= cache.max_len,
          "attention_cached: row " + std::to_string(i) + " has slot " +
              std::to_string(slot_ids[i]) + " and length " + std::to_string(lengths[i]) +
              " outside the cache");
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // One task per (query row, kv head): its cached K and V rows are dequantized once into FP32
  // scratch and shared by the query heads of the group.
  parallel_for(q.rows * Hkv, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> s, acc(static_cast<size_t>(D)), kf, vf;
    for (int64_t ik = i0; ik < i1; ++ik) {
      const int64_t i = ik / Hkv, kvh = ik % Hkv, len = lengths[i];
      const int64_t base = static_cast<int64_t>(slot_ids[i]) * cache.max_len;
      kf.resize(static_cast<size_t>(len * D));
      vf.resize(static_cast<size_t>(len * D));
      for (int64_t j = 0; j < len; ++j)
        for (int64_t e = 0; e < D; ++e) {
          kf[j * D + e] = cache_ld(cache, 0, base + j, kvh * D + e);
          vf[j * D + e] = cache_ld(cache, 1, base + j, kvh * D + e);
        }
      s.resize(static_cast<size_t>(len));
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        float mx = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          float dot = 0.0f;
          for (int64_t e = 0; e < D; ++e) dot += ld(q, i * q.cols + h * D + e) * kf[j * D + e];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < len; ++j) sum += std::exp(s[j] - mx);
        const float l = mx + std::log(sum);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = 0; j < len; ++j) {
          const float p = std::exp(s[j] - l);
          for (int64_t e = 0; e < D; ++e) acc[e] += p * vf[j * D + e];
        }
        for (int64_t e = 0; e < D; ++e) st(o, i * o.cols + h * D + e, acc[e]);
      }
    }
  });
}

}  // namespace fp8rl
