// CPU reference: SwiGLU h = silu(gate) · up, forward and backward.
#include <cmath>

#include "backend/cpu/access.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
using cpu::expect;
using cpu::ld;
using cpu::st;

void CpuBackend::swiglu_forward(const Matrix& gate, const Matrix& up, const Matrix& h) {
  expect(up, gate.rows, gate.cols, "swiglu_forward", "up");
  expect(h, gate.rows, gate.cols, "swiglu_forward", "h");
  parallel_for(gate.rows * gate.cols, 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float g = ld(gate, i);
      st(h, i, g / (1.0f + std::exp(-g)) * ld(up, i));
    }
  });
}

void CpuBackend::swiglu_backward(const Matrix& dh, const Matrix& gate, const Matrix& up,
                                 const Matrix& dgate, const Matrix& dup) {
  for (const Matrix* m : {&dh, &up, &dgate, &dup})
    expect(*m, gate.rows, gate.cols, "swiglu_backward", "operand");
  parallel_for(gate.rows * gate.cols, 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float g = ld(gate, i), u = ld(up, i), d = ld(dh, i);
      const float sig = 1.0f / (1.0f + std::exp(-g));
      st(dgate, i, d * u * sig * (1.0f + g * (1.0f - sig)));
      st(dup, i, d * (g * sig));
    }
  });
}

}  // namespace fp8rl
