#include "contract/histogram.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

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

}  // namespace fp8rl
