// CPU reference: rotary position embedding (Hugging Face rotate_half layout), in place.
#include <cmath>

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
  parallel_for(x.rows, 16, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t i = 0; i < half; ++i) {
        const float inv_freq = rope_inv_freq(rope, i, D);
        float angle = static_cast<float>(positions[m]) * inv_freq;
        if (inverse) angle = -angle;
        const float c = std::cos(angle), s = std::sin(angle);
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t a = m * x.cols + h * D + i, b = a + half;
          const float x1 = ld(x, a), x2 = ld(x, b);
          st(x, a, x1 * c - x2 * s);
          st(x, b, x2 * c + x1 * s);
        }
      }
  });
}

}  // namespace fp8rl
