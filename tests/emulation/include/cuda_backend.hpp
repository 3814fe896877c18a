// Stands in for kernels/cuda_backend.hpp in the emulated build of a kernel file: the names the
// quantize kernels take from it (the device's statistics record and pointer_alignment, as
// kernels/cuda_backend.hpp and cuda_backend.cu define them); no CudaBackend.
#pragma once
#include <cstdint>

#include "backend/backend.hpp"

namespace fp8rl {

using DeviceQuantStats = QuantStatsSum;

namespace cuda {
// The largest power of two (up to 256) that divides p's address.
inline uint32_t pointer_alignment(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 1;
  while (a < 256 && (u & a) == 0) a <<= 1;
  return a;
}
}  // namespace cuda

}  // namespace fp8rl
