#include "fp8/codec.hpp"

#include <array>
#include <bit>
#include <cmath>

namespace fp8rl {
namespace {

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

const float* e4m3_table() {
  static const auto t = make_table<3, 7, false>();
  return t.data();
}
const float* e5m2_table() {
  static const auto t = make_table<2, 15, true>();
  return t.data();
}

float e4m3_to_float(uint8_t code) {
  return e4m3_table()[code];
}
float e5m2_to_float(uint8_t code) {
  return e5m2_table()[code];
}

}  // namespace fp8rl
