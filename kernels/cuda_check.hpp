// Status checks for the CUDA runtime and cuBLASLt: a failing call throws fp8rl::Error carrying
// the library's status name, the call text and the caller's file and line. Host code only.
//
//   FP8RL_CUDA_CHECK(cudaMalloc(&p, n));        // throws Error("cudaMalloc(&p, n): ...")
//   FP8RL_CUBLAS_CHECK(cublasLtCreate(&handle));
//   check_launch("quantize_1x128");               // after a <<<...>>> launch
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <source_location>
#include <string>

#include "core/error.hpp"

namespace fp8rl::cuda {

// Throws when e is not cudaSuccess. Clears the runtime's last-error slot so a later check does
// not report this failure again (sticky errors, such as a kernel fault, stay sticky anyway).
inline void check_cuda(cudaError_t e, const char* what,
                       std::source_location where = std::source_location::current()) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw Error(std::string(what) + ": " + cudaGetErrorString(e), cudaGetErrorName(e), where);
}

// Throws when s is not CUBLAS_STATUS_SUCCESS.
inline void check_cublas(cublasStatus_t s, const char* what,
                         std::source_location where = std::source_location::current()) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw Error(std::string(what) + ": " + cublasLtGetStatusString(s), cublasLtGetStatusName(s),
              where);
}

// Checks that the kernel launch just issued was accepted (bad configuration, missing kernel
// image, ...). Faults inside the kernel surface later, at the next synchronising call.
inline void check_launch(const char* kernel,
                         std::source_location where = std::source_location::current()) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return;
  throw Error(std::string("launch of ") + kernel + " failed: " + cudaGetErrorString(e),
              cudaGetErrorName(e), where);
}

}  // namespace fp8rl::cuda

// The macros record the call text; the location is the macro's use (default argument).
#define FP8RL_CUDA_CHECK(call) ::fp8rl::cuda::check_cuda((call), #call)
#define FP8RL_CUBLAS_CHECK(call) ::fp8rl::cuda::check_cublas((call), #call)
