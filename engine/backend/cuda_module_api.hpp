// The C entry points of the CUDA backend module (libfp8rl_cuda.so), loaded with dlopen so that
// no executable links a CUDA library. Shared by the loader (backend_registry.cpp) and the
// module (kernels/cuda_module.cpp). Bump kFp8rlCudaAbi when anything here or in Backend changes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fp8rl {
class Backend;
}

inline constexpr int kFp8rlCudaAbi = 17;

extern "C" {

struct Fp8rlCudaInfo {
  int abi = 0;              // kFp8rlCudaAbi of the module
  int driver_version = 0;   // cudaDriverGetVersion (e.g. 13000); 0 when no driver
  int runtime_version = 0;  // cudaRuntimeGetVersion
  int device_count = 0;
  char device_name[256] = {};
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  uint64_t total_memory = 0, free_memory = 0;
  size_t cublaslt_version = 0;  // cublasLtGetVersion (e.g. 130100)
  int nccl_version = 0;         // ncclGetVersion; 0 when NCCL is not available
  char problem[512] = {};       // why no device is usable; empty when device 0 is usable
  // Why NCCL is not available (it is loaded at run time, and needed only for more than one
  // rank); empty when nccl_version is set.
  char nccl_problem[512] = {};
};

// Fills info and returns 1 when device 0 can run the backend (device present, compute
// capability 9.0, cuBLASLt initialises); 0 otherwise with info->problem set. Never throws.
typedef int (*Fp8rlCudaProbeFn)(Fp8rlCudaInfo* info);

// Creates the backend on a device; returns null and writes the reason into err on failure.
typedef fp8rl::Backend* (*Fp8rlCudaCreateFn)(int device, char* err, size_t err_len);

}  // extern "C"
