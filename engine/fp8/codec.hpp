// FP8 element codecs (E4M3 and E5M2): round to nearest even, saturate to the finite maximum
// (±inf too), NaN → 0x7f. Bit-exact with cuda_fp8.h's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ·)
// and the hardware cvt.rn.satfinite instruction.
#pragma once

#include <cstdint>

#include "fp8/format.hpp"

namespace fp8rl {

uint8_t float_to_e4m3(float x);
uint8_t float_to_e5m2(float x);
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
