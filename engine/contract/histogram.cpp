#include "contract/histogram.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace fp8rl {

Histogram log_histogram(const std::vector<double>& values, double lo, double hi, int bins) {
  Histogram h;
  for (int i = 0; i <= bins; ++i) h.edges.push_back(std::pow(10.0, lo + (hi - lo) * i / bins));
  h.counts.assign(static_cast<size_t>(bins + 2), 0);
  for (double v : values) {
    if (!(v > 0) || v < h.edges.front()) {
      ++h.counts.front();
    } else if (v >= h.edges.back()) {
      ++h.counts.back();
    } else {
      const int b = std::min(bins - 1, static_cast<int>((std::log10(v) - lo) / (hi - lo) * bins));
      ++h.counts[static_cast<size_t>(b + 1)];
    }
  }
  return h;
}

Histogram linear_histogram(const std::vector<double>& values, double lo, double hi, int bins) {
  Histogram h;
  for (int i = 0; i <= bins; ++i) h.edges.push_back(lo + (hi - lo) * i / bins);
  h.counts.assign(static_cast<size_t>(bins + 2), 0);
  for (double v : values) {
    if (std::isnan(v) || v < lo) {
      ++h.counts.front();
    } else if (v >= hi) {
      ++h.counts.back();
    } else {
      const int b = std::min(bins - 1, static_cast<int>((v - lo) / (hi - lo) * bins));
      ++h.counts[static_cast<size_t>(b + 1)];
    }
  }
  return h;
}

size_t log2_bin(float v, int lo, int hi) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  const uint32_t exp = (bits >> 23) & 0xff;
  const size_t over = static_cast<size_t>(hi - lo) + 1;
  if (bits >> 31 || exp == 0) return 0;  // ≤ 0, NaN with the sign set, below 2^-126
  if (exp == 0xff) return (bits & 0x7fffff) ? 0 : over;  // NaN under, +inf over
  const int e = static_cast<int>(exp) - 127;             // floor(log2 v)
  if (e < lo) return 0;
  if (e >= hi) return over;
  return static_cast<size_t>(e - lo + 1);
}

}  // namespace fp8rl
