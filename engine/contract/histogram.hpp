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

}  // namespace fp8rl
