// CPU reference: rotary position embedding (Hugging Face rotate_half layout), in place.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/access.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
using cpu::ld;
using cpu::st;

void CpuBackend::rope(const Matrix& x, int64_t heads, const int32_t* positions, const Rope& rope,
                      bool inverse) {
  check(heads > 0 && x.cols % heads == 0, "rope: width " + std::to_string(x.cols) +
                                              " is not a multiple of heads " +
                                              std::to_string(heads));
  const int64_t D = x.cols / heads, half = D / 2;
  check(D % 2 == 0, "rope: head dim must be even, got " + std::to_string(D));
  // cos and sin of each (position, frequency) pair, computed once per call for the positions
  // present (a training batch repeats the same few positions in every sequence) with exactly
  // the expressions of the per-row loop, so the same values.
  int64_t lo = 0, hi = -1;
  if (x.rows > 0) {
    lo = hi = positions[0];
    for (int64_t m = 1; m < x.rows; ++m) {
      lo = std::min<int64_t>(lo, positions[m]);
      hi = std::max<int64_t>(hi, positions[m]);
    }
  }
  auto angles = [&](int64_t pos, float* cs) {  // cs[2i] = cos, cs[2i + 1] = sin
    for (int64_t i = 0; i < half; ++i) {
      const float inv_freq = rope_inv_freq(rope, i, D);
      float angle = static_cast<float>(pos) * inv_freq;
      if (inverse) angle = -angle;
      cs[2 * i] = std::cos(angle);
      cs[2 * i + 1] = std::sin(angle);
    }
  };
  const bool table = hi - lo + 1 <= x.rows;
  std::vector<float> cs(table ? static_cast<size_t>((hi - lo + 1) * 2 * half) : 0);
  if (table)
    for (int64_t p = lo; p <= hi; ++p) angles(p, cs.data() + (p - lo) * 2 * half);
  parallel_for(x.rows, 16, [&](int64_t m0, int64_t m1) {
    std::vector<float> own(table ? 0 : static_cast<size_t>(2 * half));
    for (int64_t m = m0; m < m1; ++m) {
      const float* row_cs = cs.data() + (positions[m] - lo) * 2 * half;
      if (!table) {
        angles(positions[m], own.data());
        row_cs = own.data();
      }
      for (int64_t i = 0; i < half; ++i) {
        const float c = row_cs[2 * i], s = row_cs[2 * i + 1];
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t a = m * x.cols + h * D + i, b = a + half;
          const float x1 = ld(x, a), x2 = ld(x, b);
          st(x, a, x1 * c - x2 * s);
          st(x, b, x2 * c + x1 * s);
        }
      }
    }
  });
}

}  // namespace fp8rl
