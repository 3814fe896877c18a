// The module's C entry points (engine/backend/cuda_module_api.hpp): probe and create. These are
// the only symbols the module exports; neither lets an exception escape.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <exception>
#include <string>

#include "backend/cuda_module_api.hpp"
#include "cuda_backend.hpp"

#if FP8RL_HAVE_NCCL
#include "nccl_library.hpp"
#endif

#define FP8RL_EXPORT __attribute__((visibility("default")))

namespace {

void set_problem(Fp8rlCudaInfo* info, const std::string& what) {
  std::snprintf(info->problem, sizeof info->problem, "%s", what.c_str());
}

std::string cuda_error(const char* call, cudaError_t e) {
  return std::string(call) + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
}

// Fills info; returns whether device 0 can run the backend. May throw (std::bad_alloc).
bool probe(Fp8rlCudaInfo* info) {
  // Versions first: they need no device and are useful in every report.
  int v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess) info->driver_version = v;
  v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) info->runtime_version = v;
  info->cublaslt_version = cublasLtGetVersion();
#if FP8RL_HAVE_NCCL
  // Loaded here only to report it (a missing NCCL fails nothing: one rank never needs it).
  std::string nccl_why;
  info->nccl_version = fp8rl::nccl::version(&nccl_why);
  if (info->nccl_version == 0)
    std::snprintf(info->nccl_problem, sizeof info->nccl_problem, "%s", nccl_why.c_str());
#else
  std::snprintf(info->nccl_problem, sizeof info->nccl_problem,
                "this CUDA module was built without NCCL's header (nccl.h)");
#endif
  (void)cudaGetLastError();

  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    (void)cudaGetLastError();
    set_problem(info, cuda_error("cudaGetDeviceCount", e));
    return false;
  }
  info->device_count = count;
  if (count == 0) {
    set_problem(info, "no CUDA device found");
    return false;
  }

  cudaDeviceProp prop{};
  if (const cudaError_t e = cudaGetDeviceProperties(&prop, 0); e != cudaSuccess) {
    (void)cudaGetLastError();
    set_problem(info, cuda_error("cudaGetDeviceProperties(0)", e));
    return false;
  }
  std::snprintf(info->device_name, sizeof info->device_name, "%s", prop.name);
  info->cc_major = prop.major;
  info->cc_minor = prop.minor;
  info->sm_count = prop.multiProcessorCount;
  info->total_memory = prop.totalGlobalMem;
  if (prop.major != 9 || prop.minor != 0) {
    set_problem(info, "device 0 is sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
                          "; this build targets sm_90a (Hopper)");
    return false;
  }

  if (const cudaError_t e = cudaSetDevice(0); e != cudaSuccess) {
    (void)cudaGetLastError();
    set_problem(info, cuda_error("cudaSetDevice(0)", e));
    return false;
  }
  size_t free_bytes = 0, total_bytes = 0;
  if (const cudaError_t e = cudaMemGetInfo(&free_bytes, &total_bytes); e != cudaSuccess) {
    (void)cudaGetLastError();
    set_problem(info, cuda_error("cudaMemGetInfo", e));
    return false;
  }
  info->free_memory = free_bytes;
  info->total_memory = total_bytes;

  if (const std::string why = fp8rl::CudaBackend::kernel_image_problem(); !why.empty()) {
    set_problem(info, why);
    return false;
  }

  cublasLtHandle_t lt = nullptr;
  if (const cublasStatus_t s = cublasLtCreate(&lt); s != CUBLAS_STATUS_SUCCESS) {
    set_problem(info, std::string("cublasLtCreate failed: ") + cublasLtGetStatusName(s) + ": " +
                          cublasLtGetStatusString(s));
    (void)cudaGetLastError();
    return false;
  }
  if (const cublasStatus_t s = cublasLtDestroy(lt); s != CUBLAS_STATUS_SUCCESS) {
    set_problem(info, std::string("cublasLtDestroy failed: ") + cublasLtGetStatusName(s));
    return false;
  }
  info->problem[0] = '\0';
  return true;
}

}  // namespace

extern "C" {

FP8RL_EXPORT int fp8rl_cuda_probe(Fp8rlCudaInfo* info) {
  if (!info) return 0;
  *info = Fp8rlCudaInfo{};
  info->abi = kFp8rlCudaAbi;
  try {
    return probe(info) ? 1 : 0;
  } catch (const std::exception& e) {
    std::snprintf(info->problem, sizeof info->problem, "CUDA probe failed: %s", e.what());
  } catch (...) {
    std::snprintf(info->problem, sizeof info->problem, "CUDA probe failed: unknown exception");
  }
  return 0;
}

FP8RL_EXPORT fp8rl::Backend* fp8rl_cuda_create(int device, char* err, size_t err_len) {
  // snprintf straight from what(): nothing in a handler may throw again.
  try {
    return new fp8rl::CudaBackend(device);
  } catch (const std::exception& e) {
    if (err && err_len > 0) std::snprintf(err, err_len, "%s", e.what());
  } catch (...) {
    if (err && err_len > 0) std::snprintf(err, err_len, "unknown exception");
  }
  return nullptr;
}

}  // extern "C"
