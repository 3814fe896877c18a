// Stands in for kernels/cuda_check.hpp in the emulated build of a kernel file: there is no CUDA
// runtime to check.
#pragma once
#define FP8RL_CUDA_CHECK(call) ((void)(call))
namespace fp8rl::cuda {
inline void check_launch(const char*) {}
}  // namespace fp8rl::cuda
