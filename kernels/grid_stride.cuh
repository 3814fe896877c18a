// The grid-stride loop of the element-wise kernels: one place for its index arithmetic (64-bit,
// so n may exceed 2³¹ elements).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace fp8rl::cuda {

// Calls f(i) for every i in [0, n) that falls to this thread: thread t of block b takes
// i = b·kThreads + t, then steps by the whole grid (gridDim.x · kThreads). kThreads must be the
// launch's block size.
template <int kThreads, class F>
__device__ __forceinline__ void for_each_index(int64_t n, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += step)
    f(i);
}

}  // namespace fp8rl::cuda
