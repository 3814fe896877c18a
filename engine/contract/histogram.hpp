// Histograms as runs record them: bin edges and counts with an underflow and an overflow bin,
// and the two binnings the run loop uses. Plain data and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fp8rl {

// counts = [underflow, one per bin…, overflow]: edges.size() ≥ 2 and
// counts.size() == edges.size() + 1.
struct Histogram {
  std::vector<double> edges;
  std::vector<int64_t> counts;
};

// Log-spaced histogram of positive values: `bins` bins between 10^lo and 10^hi, plus an
// underflow (includes 0) and an overflow bin. Returns {edges (bins + 1), counts (bins + 2)}.
Histogram log_histogram(const std::vector<double>& values, double lo_exp10, double hi_exp10,
                        int bins);
// Linear bins over [lo, hi] with underflow/overflow (e.g. log2 of FP8 scales).
Histogram linear_histogram(const std::vector<double>& values, double lo, double hi, int bins);

// The index in linear_histogram(values, lo, hi, hi − lo)'s counts (one bin per power of two;
// 0 underflow, hi − lo + 1 overflow) of log2(v), read off the float's exponent bits: exact
// for every float (v ≤ 0 and NaN fall under, +inf over), and cheap enough for the millions of
// activation scales a step observes. lo < hi.
size_t log2_bin(float v, int lo, int hi);

}  // namespace fp8rl
