#include "backend/backend_registry.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/error.hpp"

namespace fp8rl {
namespace {

std::filesystem::path executable_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path(".") : exe.parent_path();
}

std::vector<std::filesystem::path> module_candidates() {
  if (const char* env = std::getenv("FP8RL_CUDA_MODULE"); env && *env) return {env};
  const auto dir = executable_dir();
  return {dir / "../lib/libfp8rl_cuda.so", dir / "../lib/fp8rl/libfp8rl_cuda.so",
          dir / "libfp8rl_cuda.so"};
}

CudaModuleStatus load_cuda_module() {
  CudaModuleStatus st;
  std::filesystem::path found;
  std::string searched;
  for (const auto& p : module_candidates()) {
    searched += (searched.empty() ? "" : ", ") + p.lexically_normal().string();
    if (std::filesystem::exists(p)) {
      found = p.lexically_normal();
      break;
    }
  }
  if (found.empty()) {
    st.path = searched;
    st.load_error = "CUDA backend module not found (built without CUDA?); searched " + searched;
    return st;
  }
  st.path = found.string();
  // Kept open for the life of the process: backends created by it hold its code.
  void* handle = dlopen(st.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    st.load_error = std::string("cannot load ") + st.path + ": " + (e ? e : "unknown dlopen error");
    return st;
  }
  auto probe = reinterpret_cast<Fp8rlCudaProbeFn>(dlsym(handle, "fp8rl_cuda_probe"));
  if (!probe || !dlsym(handle, "fp8rl_cuda_create")) {
    st.load_error = st.path + " does not export fp8rl_cuda_probe/fp8rl_cuda_create";
    return st;
  }
  st.loaded = true;
  st.handle = handle;
  st.usable = probe(&st.info) == 1;
  if (st.info.abi != kFp8rlCudaAbi) {
    st.usable = false;
    st.load_error = "module ABI " + std::to_string(st.info.abi) + " differs from the engine's " +
                    std::to_string(kFp8rlCudaAbi) + " (stale build?)";
  }
  return st;
}

}  // namespace

std::string CudaModuleStatus::why_not() const {
  if (usable) return {};
  if (!load_error.empty()) return load_error;
  return info.problem[0] ? std::string(info.problem) : "CUDA backend not usable (no reason given)";
}

const CudaModuleStatus& cuda_module_status() {
  static const CudaModuleStatus status = load_cuda_module();
  return status;
}

BackendChoice parse_backend_choice(const std::string& s) {
  if (s == "auto") return BackendChoice::automatic;
  if (s == "cpu") return BackendChoice::cpu;
  if (s == "cuda") return BackendChoice::cuda;
  throw Error("unknown backend '" + s + "' (allowed: auto, cpu, cuda)");
}

BackendSelection make_backend(BackendChoice choice) {
  BackendSelection sel;
  if (choice == BackendChoice::cpu) {
    sel.backend = make_cpu_backend();
    return sel;
  }
  const auto& st = cuda_module_status();
  if (st.usable) {
    char err[512] = {};
    auto create = reinterpret_cast<Fp8rlCudaCreateFn>(dlsym(st.handle, "fp8rl_cuda_create"));
    // Data-parallel ranks on one machine take one GPU each (docs/distributed.md): the local
    // rank mpirun gives, modulo the devices this process sees.
    int device = 0;
    if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"))
      device = std::max(0, std::atoi(local)) % std::max(1, st.info.device_count);
    Backend* b = create ? create(device, err, sizeof err) : nullptr;
    if (b) {
      sel.backend.reset(b);
      if (const char* spec = std::getenv("FP8RL_KERNEL_OPTIONS"))
        apply_kernel_options(*sel.backend, spec);
      return sel;
    }
    if (choice == BackendChoice::cuda)
      throw Error(std::string("CUDA backend failed to start: ") + err);
    sel.fallback_reason = std::string("CUDA backend failed to start: ") + err;
  } else {
    if (choice == BackendChoice::cuda) throw Error("CUDA backend not usable: " + st.why_not());
    sel.fallback_reason = st.why_not();
  }
  sel.backend = make_cpu_backend();
  return sel;
}

void apply_kernel_options(Backend& be, const std::string& spec) {
  const auto known = be.kernel_options();
  std::string names;
  for (const auto& [name, value] : known) names += (names.empty() ? "" : ", ") + name;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t end = std::min(spec.find(',', pos), spec.size());
    const std::string entry = spec.substr(pos, end - pos);
    pos = end + 1;
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    long long value = 0;
    char* stop = nullptr;
    if (eq != std::string::npos && eq + 1 < entry.size())
      value = std::strtoll(entry.c_str() + eq + 1, &stop, 10);
    check(eq != std::string::npos && eq > 0 && stop && *stop == '\0',
          "FP8RL_KERNEL_OPTIONS: '" + entry + "' is not name=integer");
    if (known.empty()) continue;  // a backend without kernel options (the CPU)
    const std::string name = entry.substr(0, eq);
    check(be.set_kernel_option(name, value),
          "FP8RL_KERNEL_OPTIONS: unknown kernel option '" + name + "' (" + names + ")");
  }
}

}  // namespace fp8rl
