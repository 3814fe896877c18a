// The KV cache of generation: per layer, K and V of up to num_slots sequences × max_len
// positions, in bf16 (or f32 for the fp32 reference) or FP8 E4M3 with one scale for K and one
// for V per layer (the recipe's FP8 KV cache). Memory is planned up front. Latent attention
// (DeepSeek-V3) keeps one row per token instead: its normalised latent and RoPE key
// (kv_lora_rank + qk_rope_head_dim features, in the K buffer; FP8: the "K" scale for the latent,
// the "V" scale for the RoPE key).
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "model/config.hpp"
#include "model/tensor.hpp"

namespace fp8rl {

// Element type of the cache, named as the precisions are (contract/precision.hpp).
enum class KvDType { fp32, bf16, fp8 };
const char* kv_dtype_name(KvDType d);
KvDType parse_kv_dtype(const std::string& s);  // "fp32" | "bf16" | "fp8"

class KvCache {
 public:
  // Bytes a cache of these dimensions needs.
  static int64_t bytes_needed(const ModelConfig& cfg, int64_t num_slots, int64_t max_len,
                              KvDType d);

  KvCache(Backend& be, const ModelConfig& cfg, int64_t num_slots, int64_t max_len, KvDType d);

  KvDType dtype() const { return dtype_; }
  int64_t num_slots() const { return num_slots_; }
  int64_t max_len() const { return max_len_; }
  KvCacheView layer(int64_t l) const;

  // FP8 dequantization scales (amax·margin/448) of K and V per layer, as the generator holds
  // them; set_scales uploads them. bf16/f32 caches hold no scales.
  void set_scales(const std::vector<std::pair<float, float>>& k_v_scale_inv);
  const std::vector<std::pair<float, float>>& scales() const { return scales_; }
  bool has_scales() const { return !scales_.empty(); }

 private:
  Backend& be_;
  KvDType dtype_;
  int64_t num_slots_, max_len_, width_;
  std::vector<Buffer> k_, v_;
  Buffer scale_buf_;  // [layers, 2] floats
  std::vector<std::pair<float, float>> scales_;
};

// Turns per-micro-batch amax of K and V (after RoPE and QK-norm) into the cache's scales:
// per layer the 99.9th percentile over micro-batches × margin / 448 (NeMo RL's recipe).
class KvScaleCalibrator {
 public:
  explicit KvScaleCalibrator(double margin = 1.05, double percentile = 99.9)
      : margin_(margin), percentile_(percentile) {}
  // amax of one micro-batch: per layer (q, k, v).
  void add(const std::vector<std::array<float, 3>>& amax_per_layer);
  bool empty() const { return samples_.empty(); }
  void clear() { samples_.clear(); }
  // The recorded amax, [micro-batch][layer] (q, k, v): what data-parallel ranks exchange.
  const std::vector<std::vector<std::array<float, 3>>>& samples() const { return samples_; }
  // Per layer (k_scale_inv, v_scale_inv); an amax of 0 or non-finite gives scale 1 (counted).
  std::vector<std::pair<float, float>> scales(int64_t* degenerate = nullptr) const;

 private:
  double margin_, percentile_;
  std::vector<std::vector<std::array<float, 3>>> samples_;  // [micro-batch][layer]
};

}  // namespace fp8rl
