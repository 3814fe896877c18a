// BF16 storage type and conversions (round to nearest even, NaN kept quiet), matching
// CUDA's __float2bfloat16_rn and __bfloat162float bit for bit.
#pragma once

#include <bit>
#include <cstdint>

namespace fp8rl {

struct bf16 {
  uint16_t bits = 0;
};

inline bf16 float_to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{0x7fff};  // canonical NaN, as CUDA
  u += 0x7fffu + ((u >> 16) & 1u);                           // round to nearest even
  return bf16{static_cast<uint16_t>(u >> 16)};
}

inline float bf16_to_float(bf16 x) {
  return std::bit_cast<float>(uint32_t{x.bits} << 16);
}

// Rounds a float to the nearest BF16 value and returns it as a float.
inline float round_to_bf16(float x) {
  return bf16_to_float(float_to_bf16(x));
}

}  // namespace fp8rl
