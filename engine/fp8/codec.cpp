#include "fp8/codec.hpp"

#include <array>
#include <bit>
#include <cmath>

namespace fp8rl {
namespace {

// One encoder for both formats. E4M3: 3 mantissa bits, bias 7, max code 0x7e (448), no inf.
// E5M2: 2 mantissa bits, bias 15, max finite code 0x7b (57344). The code of a finite
// magnitude is monotonic and contiguous across the subnormal/normal boundary, so a mantissa
// carry simply increments the exponent field.
template <int kMant, int kBias, uint32_t kMaxCode>
uint8_t encode(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0x7f;  // NaN (any sign) → canonical NaN code
  const uint32_t sign = (u >> 24) & 0x80u;
  const int exp = static_cast<int>(abs >> 23) - 127;
  uint32_t code;
  constexpr int kMinNormalExp = 1 - kBias;
  if (abs >= 0x7f800000u) {
    code = kMaxCode;  // ±inf saturates
  } else if (exp < kMinNormalExp) {
    // Subnormal range: a multiple of 2^(kMinNormalExp - kMant); the scaling is exact and
    // nearbyint rounds to nearest even.
    const float q = std::nearbyint(std::ldexp(std::bit_cast<float>(abs), kMant - kMinNormalExp));
    code = static_cast<uint32_t>(q);
  } else {
    const uint32_t mant = abs & 0x7fffffu;
    constexpr int kDrop = 23 - kMant;
    code = (static_cast<uint32_t>(exp + kBias) << kMant) | (mant >> kDrop);
    const uint32_t rest = mant & ((1u << kDrop) - 1u), half = 1u << (kDrop - 1);
    if (rest > half || (rest == half && (code & 1u))) ++code;
    if (code > kMaxCode) code = kMaxCode;
  }
  return static_cast<uint8_t>(sign | code);
}

template <int kMant, int kBias, bool kHasInf>
float decode(uint8_t c) {
  const bool neg = c & 0x80u;
  const int e = (c & 0x7f) >> kMant, m = c & ((1 << kMant) - 1);
  float v;
  if (kHasInf && e == (1 << (7 - kMant)) - 1) {
    v = m == 0 ? INFINITY : NAN;
  } else if (!kHasInf && (c & 0x7f) == 0x7f) {
    v = NAN;
  } else if (e == 0) {
    v = std::ldexp(static_cast<float>(m), 1 - kBias - kMant);
  } else {
    v = std::ldexp(static_cast<float>((1 << kMant) | m), e - kBias - kMant);
  }
  return neg ? -v : v;
}

template <int kMant, int kBias, bool kHasInf>
std::array<float, 256> make_table() {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = decode<kMant, kBias, kHasInf>(static_cast<uint8_t>(c));
  return t;
}

}  // namespace

uint8_t float_to_e4m3(float x) { return encode<3, 7, 0x7e>(x); }
uint8_t float_to_e5m2(float x) { return encode<2, 15, 0x7b>(x); }

const float* e4m3_table() {
  static const auto t = make_table<3, 7, false>();
  return t.data();
}
const float* e5m2_table() {
  static const auto t = make_table<2, 15, true>();
  return t.data();
}

float e4m3_to_float(uint8_t code) { return e4m3_table()[code]; }
float e5m2_to_float(uint8_t code) { return e5m2_table()[code]; }

}  // namespace fp8rl
