// Backend selection: cpu, cuda, or auto (CUDA when the module loads, a device exists and
// cuBLASLt initialises; otherwise the CPU, with the reason).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "backend/cuda_module_api.hpp"

namespace fp8rl {

enum class BackendChoice { automatic, cpu, cuda };

// Parses "auto", "cpu" or "cuda"; throws an Error naming the allowed values otherwise.
BackendChoice parse_backend_choice(const std::string& s);

struct CudaModuleStatus {
  bool loaded = false;     // the module was found and dlopen succeeded
  std::string path;        // where it was found (or the places searched)
  std::string load_error;  // why it did not load
  bool usable = false;     // probe said a device can run the backend
  Fp8rlCudaInfo info;      // filled when loaded
  void* handle = nullptr;  // dlopen handle, kept open for the life of the process
  // One line explaining why CUDA cannot be used ("" when usable).
  std::string why_not() const;
};

// Loads the CUDA module once (cached) and probes it.
const CudaModuleStatus& cuda_module_status();

struct BackendSelection {
  std::unique_ptr<Backend> backend;
  std::string fallback_reason;  // non-empty when auto fell back to the CPU
};

// Makes the chosen backend. cuda throws an Error with the reason when CUDA is not usable. A
// device backend then takes the kernel options of $FP8RL_KERNEL_OPTIONS (apply_kernel_options).
BackendSelection make_backend(BackendChoice choice);

// Sets the kernel options of spec, "name=value[,name=value...]" (Backend::set_kernel_option),
// on a backend that has kernel options; on one without (the CPU) a well-formed spec does
// nothing. Throws an Error naming the entry for a malformed one, an unknown name or a value the
// option does not take.
void apply_kernel_options(Backend& be, const std::string& spec);

// The CPU reference backend.
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace fp8rl
