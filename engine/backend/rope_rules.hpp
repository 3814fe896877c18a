// Rotary position embedding's frequencies: the rule every backend's rope follows (CPU reference:
// backend/cpu/rope.cpp; CUDA: kernels/rope.cu), so both rotate by the same angles. Part of the
// backend interface, not of any backend; compiled for the host and, by nvcc, for the device.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FP8RL_HOST_DEVICE __host__ __device__
#else
#define FP8RL_HOST_DEVICE
#endif

namespace fp8rl {

// Hugging Face's rope_scaling of config.json: none (plain theta^(−2i/D)), Llama 3's
// ("rope_type": "llama3": wavelengths above original_max_positions / low_freq_factor slowed by
// factor, below original_max_positions / high_freq_factor kept, smoothly blended between) or
// YaRN's (DeepSeek-V3: "type": "yarn": pairs below yarn_low keep their frequency, pairs above
// yarn_high are slowed by factor, linearly blended between; cos and sin scaled by
// attention_factor).
enum class RopeScalingType : int32_t { none, llama3, yarn };

struct Rope {
  float theta = 1e6f;
  RopeScalingType scaling = RopeScalingType::none;
  float factor = 1.0f, low_freq_factor = 1.0f, high_freq_factor = 4.0f;
  float original_max_positions = 8192.0f;
  // YaRN: the correction range of pair indices (Hugging Face's find_correction_range, made on
  // the host from beta_fast, beta_slow and original_max_positions) and the factor cos and sin
  // are multiplied by (1 without YaRN).
  float yarn_low = 0.0f, yarn_high = 0.0f;
  float attention_factor = 1.0f;
  // Rotary pairs (2i, 2i + 1) instead of (i, i + D/2): DeepSeek-V3's rope_interleave, whose
  // published weights put a head's rotary features pairwise (Backend::rope_columns only).
  bool interleaved = false;
};

// The inverse frequency of rotary pair i (< D/2) of a head of D, in FP32, as Hugging Face's
// _compute_default_rope_parameters / _compute_llama3_parameters / _compute_yarn_parameters
// make it.
FP8RL_HOST_DEVICE inline float rope_inv_freq(const Rope& r, int64_t i, int64_t D) {
  const float e = -2.0f * static_cast<float>(i) / static_cast<float>(D);
#if defined(__CUDA_ARCH__)
  float f = powf(r.theta, e);
#else
  float f = std::pow(r.theta, e);
#endif
  if (r.scaling == RopeScalingType::llama3) {
    const float wavelen = 6.283185307179586f / f;  // 2π / f
    const float low_wavelen = r.original_max_positions / r.low_freq_factor;
    const float high_wavelen = r.original_max_positions / r.high_freq_factor;
    if (wavelen > low_wavelen) {
      f = f / r.factor;
    } else if (!(wavelen < high_wavelen)) {
      const float s = (r.original_max_positions / wavelen - r.low_freq_factor) /
                      (r.high_freq_factor - r.low_freq_factor);
      f = (1.0f - s) * f / r.factor + s * f;
    }
  }
  if (r.scaling == RopeScalingType::yarn) {
    // The extrapolated frequency f, the interpolated f / factor, mixed by a ramp over i.
    const float high = r.yarn_high == r.yarn_low ? r.yarn_high + 0.001f : r.yarn_high;
    float ramp = (static_cast<float>(i) - r.yarn_low) / (high - r.yarn_low);
    ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
    const float extrapolation = 1.0f - ramp;
    f = (f / r.factor) * (1.0f - extrapolation) + f * extrapolation;
  }
  return f;
}

// YaRN's correction range of pair indices for a head of D rotary features (Hugging Face's
// find_correction_range with truncation): [floor(dim(beta_fast)), ceil(dim(beta_slow))] within
// [0, D − 1], dim(n) = D·ln(original / (n·2π)) / (2·ln theta). Host code (double precision).
inline void yarn_correction_range(double theta, int64_t D, double beta_fast, double beta_slow,
                                  double original_max_positions, float* low, float* high) {
  auto dim = [&](double rotations) {
    return static_cast<double>(D) *
           std::log(original_max_positions / (rotations * 2.0 * 3.141592653589793)) /
           (2.0 * std::log(theta));
  };
  const double lo = std::floor(dim(beta_fast)), hi = std::ceil(dim(beta_slow));
  *low = static_cast<float>(lo < 0 ? 0 : lo);
  *high = static_cast<float>(hi > static_cast<double>(D - 1) ? static_cast<double>(D - 1) : hi);
}

// YaRN's magnitude correction 0.1·mscale·ln(scale) + 1 (1 for scale ≤ 1).
inline double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

}  // namespace fp8rl
