#include "model/kv_cache.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.hpp"

namespace fp8rl {

// The cache's element types are named as the precisions (same enum order).
static_assert(int(KvDType::fp32) == int(Precision::fp32) &&
              int(KvDType::bf16) == int(Precision::bf16) &&
              int(KvDType::fp8) == int(Precision::fp8));

const char* kv_dtype_name(KvDType d) {
  return precision_name(static_cast<Precision>(d));
}

KvDType parse_kv_dtype(const std::string& s) {
  try {
    return static_cast<KvDType>(parse_precision(s));
  } catch (const Error&) {
    throw Error("unknown KV cache precision '" + s + "' (allowed: fp32, bf16, fp8)");
  }
}

namespace {
size_t elem_size(KvDType d) {
  return d == KvDType::fp32 ? 4 : d == KvDType::bf16 ? 2 : 1;
}
}  // namespace

int64_t KvCache::bytes_needed(const ModelConfig& cfg, int64_t num_slots, int64_t max_len,
                              KvDType d) {
  // Latent attention keeps one row per token: the latent and the RoPE key.
  if (cfg.mla.enabled())
    return cfg.num_hidden_layers * num_slots * max_len *
           (cfg.mla.kv_lora_rank + cfg.mla.qk_rope_head_dim) * static_cast<int64_t>(elem_size(d));
  return cfg.num_hidden_layers * 2 * num_slots * max_len * cfg.num_key_value_heads * cfg.head_dim *
         static_cast<int64_t>(elem_size(d));
}

KvCache::KvCache(Backend& be, const ModelConfig& cfg, int64_t num_slots, int64_t max_len, KvDType d)
    : be_(be),
      dtype_(d),
      num_slots_(num_slots),
      max_len_(max_len),
      width_(cfg.mla.enabled() ? cfg.mla.kv_lora_rank + cfg.mla.qk_rope_head_dim
                               : cfg.num_key_value_heads * cfg.head_dim) {
  check(num_slots > 0 && max_len > 0, "KV cache: needs at least one slot and one position");
  const size_t bytes = static_cast<size_t>(num_slots * max_len * width_) * elem_size(d);
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    k_.push_back(be.alloc(bytes));
    v_.push_back(cfg.mla.enabled() ? Buffer() : be.alloc(bytes));  // latent rows: no v
  }
  scale_buf_ = be.alloc(static_cast<size_t>(cfg.num_hidden_layers) * 2 * sizeof(float));
}

KvCacheView KvCache::layer(int64_t l) const {
  KvCacheView v;
  v.k = k_.at(static_cast<size_t>(l)).data();
  v.v = v_.at(static_cast<size_t>(l)).data();
  v.num_slots = num_slots_;
  v.max_len = max_len_;
  v.width = width_;
  v.dtype = dtype_ == KvDType::fp32   ? DType::f32
            : dtype_ == KvDType::bf16 ? DType::bf16
                                      : DType::fp8;
  if (dtype_ == KvDType::fp8) {
    check(has_scales(), "FP8 KV cache used before its scales were calibrated");
    v.k_scale_inv = scale_buf_.as<float>() + 2 * l;
    v.v_scale_inv = scale_buf_.as<float>() + 2 * l + 1;
  }
  return v;
}

void KvCache::set_scales(const std::vector<std::pair<float, float>>& s) {
  check(static_cast<int64_t>(s.size()) == static_cast<int64_t>(k_.size()),
        "KV cache: " + std::to_string(s.size()) + " scale pairs for " + std::to_string(k_.size()) +
            " layers");
  std::vector<float> flat;
  for (auto [k, v] : s) {
    check(k > 0 && std::isfinite(k) && v > 0 && std::isfinite(v),
          "KV cache: scales must be positive and finite");
    flat.push_back(k);
    flat.push_back(v);
  }
  be_.upload(scale_buf_.data(), flat.data(), flat.size() * sizeof(float));
  scales_ = s;
}

void KvScaleCalibrator::add(const std::vector<std::array<float, 3>>& amax_per_layer) {
  check(samples_.empty() || samples_.front().size() == amax_per_layer.size(),
        "KV calibration: layer count changed between micro-batches");
  samples_.push_back(amax_per_layer);
}

std::vector<std::pair<float, float>> KvScaleCalibrator::scales(int64_t* degenerate) const {
  check(!samples_.empty(), "KV calibration: no micro-batch amax recorded yet");
  const size_t layers = samples_.front().size();
  std::vector<std::pair<float, float>> out(layers);
  int64_t bad = 0;
  for (size_t l = 0; l < layers; ++l) {
    float s[2];
    for (int which = 0; which < 2; ++which) {  // k = index 1, v = index 2 of (q, k, v)
      std::vector<float> xs;
      for (const auto& mb : samples_) xs.push_back(mb[l][1 + which]);
      std::sort(xs.begin(), xs.end());
      // Nearest-rank percentile over micro-batches.
      const size_t rank =
          static_cast<size_t>(std::ceil(percentile_ / 100.0 * static_cast<double>(xs.size())));
      const float a = xs[std::min(xs.size() - 1, rank == 0 ? 0 : rank - 1)];
      if (!(a > 0) || !std::isfinite(a)) {
        ++bad;
        s[which] = 1.0f;
      } else {
        s[which] = static_cast<float>(a * margin_ / 448.0);
      }
    }
    out[l] = {s[0], s[1]};
  }
  if (degenerate) *degenerate = bad;
  return out;
}

}  // namespace fp8rl
