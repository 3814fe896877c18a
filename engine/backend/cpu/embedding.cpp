// CPU reference: token embedding lookup and its gradient.
#include "backend/cpu/access.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
using cpu::expect;
using cpu::ld;
using cpu::st;

void CpuBackend::embedding_forward(const int32_t* ids, const Matrix& table, const Matrix& out) {
  expect(out, out.rows, table.cols, "embedding_forward", "out");
  const int64_t H = table.cols;
  for (int64_t m = 0; m < out.rows; ++m)
    check(ids[m] >= 0 && ids[m] < table.rows,
          "embedding_forward: token id " + std::to_string(ids[m]) + " at position " +
              std::to_string(m) + " is outside the vocabulary of " + std::to_string(table.rows));
  parallel_for(out.rows, 16, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t h = 0; h < H; ++h) st(out, m * H + h, ld(table, ids[m] * H + h));
  });
}

void CpuBackend::embedding_backward(const int32_t* ids, const Matrix& dout, const Matrix& dtable) {
  cpu::expect_f32(dtable, "embedding_backward", "dtable");
  check(dout.cols == dtable.cols, "embedding_backward: dout and dtable widths differ");
  const int64_t H = dtable.cols;
  float* dt = static_cast<float*>(dtable.data);
  // Serial over tokens: repeated ids accumulate in a fixed order (deterministic).
  for (int64_t m = 0; m < dout.rows; ++m) {
    check(ids[m] >= 0 && ids[m] < dtable.rows, "embedding_backward: token id out of range");
    for (int64_t h = 0; h < H; ++h) dt[ids[m] * H + h] += ld(dout, m * H + h);
  }
}

}  // namespace fp8rl
