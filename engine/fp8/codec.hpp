// FP8 element codecs (E4M3 and E5M2): round to nearest even, saturate to the finite maximum
// (±inf too), NaN → 0x7f. Bit-exact with cuda_fp8.h's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ·)
// and the hardware cvt.rn.satfinite instruction.
#pragma once

#include <bit>
#include <cstdint>

#include "fp8/format.hpp"

namespace fp8rl {

namespace detail {
// One encoder for both formats. E4M3: 3 mantissa bits, bias 7, max code 0x7e (448), no inf.
// E5M2: 2 mantissa bits, bias 15, max finite code 0x7b (57344). The code of a finite
// magnitude is monotonic and contiguous across the subnormal/normal boundary, so a mantissa
// carry simply increments the exponent field.
//
// Written without branches — both roundings are computed and the right one selected — so that
// a loop over many values compiles to vector instructions (the CPU quantizer's inner loop);
// every selected value is what the obvious branching code computes, bit for bit.
template <int kMant, int kBias, uint32_t kMaxCode>
inline uint8_t encode(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t abs = u & 0x7fffffffu;
  const uint32_t sign = (u >> 24) & 0x80u;
  constexpr int kMinNormalExp = 1 - kBias;  // exponent of the smallest normal value
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + kMinNormalExp) << 23;
  const bool subnormal = abs < kMinNormalBits;
  // Subnormal range: a multiple of 2^(kMinNormalExp - kMant). Scaling by a power of two is
  // exact; adding and removing 2^23 rounds to an integer, to nearest even (the FPU's default
  // mode), without a libm call. (Computed on 0 for other magnitudes, which cannot overflow.)
  constexpr float kSubScale = static_cast<float>(1u << (kMant - kMinNormalExp));
  const float scaled = std::bit_cast<float>(subnormal ? abs : 0u) * kSubScale;
  const uint32_t sub = static_cast<uint32_t>(static_cast<int32_t>((scaled + 0x1p23f) - 0x1p23f));
  // Normal range: round the float's bits to kMant mantissa bits, to nearest even, then re-bias
  // the exponent; past the largest finite code (also ±inf) saturate.
  constexpr int kDrop = 23 - kMant;
  const uint32_t lsb = (abs >> kDrop) & 1u;
  uint32_t normal = ((abs + ((1u << (kDrop - 1)) - 1u) + lsb) >> kDrop) -
                    (static_cast<uint32_t>(127 - kBias) << kMant);
  normal = normal > kMaxCode ? kMaxCode : normal;
  uint32_t code = sign | (subnormal ? sub : abs >= 0x7f800000u ? kMaxCode : normal);
  code = abs > 0x7f800000u ? 0x7fu : code;  // NaN (any sign) → canonical NaN code
  return static_cast<uint8_t>(code);
}

}  // namespace detail

inline uint8_t float_to_e4m3(float x) {
  return detail::encode<3, 7, 0x7e>(x);
}
inline uint8_t float_to_e5m2(float x) {
  return detail::encode<2, 15, 0x7b>(x);
}
float e4m3_to_float(uint8_t code);
float e5m2_to_float(uint8_t code);

inline uint8_t float_to_fp8(float x, Fp8Format f) {
  return f == Fp8Format::e4m3 ? float_to_e4m3(x) : float_to_e5m2(x);
}
inline float fp8_to_float(uint8_t code, Fp8Format f) {
  return f == Fp8Format::e4m3 ? e4m3_to_float(code) : e5m2_to_float(code);
}

// Decoding tables: all 256 codes as floats.
const float* e4m3_table();
const float* e5m2_table();
inline const float* fp8_table(Fp8Format f) {
  return f == Fp8Format::e4m3 ? e4m3_table() : e5m2_table();
}

}  // namespace fp8rl
