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

// Hugging Face's rope_scaling of config.json: none (plain theta^(−2i/D)) or Llama 3's
// ("rope_type": "llama3": wavelengths above original_max_positions / low_freq_factor slowed by
// factor, below original_max_positions / high_freq_factor kept, smoothly blended between).
enum class RopeScalingType : int32_t { none, llama3 };

struct Rope {
  float theta = 1e6f;
  RopeScalingType scaling = RopeScalingType::none;
  float factor = 1.0f, low_freq_factor = 1.0f, high_freq_factor = 4.0f;
  float original_max_positions = 8192.0f;
};

// The inverse frequency of rotary pair i (< D/2) of a head of D, in FP32, as Hugging Face's
// _compute_default_rope_parameters / _compute_llama3_parameters make it.
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
  return f;
}

}  // namespace fp8rl
