// NCCL loaded at run time (see nccl_library.hpp).
#include "nccl_library.hpp"

#include <dlfcn.h>

#include "core/error.hpp"

namespace fp8rl::nccl {
namespace {

struct Loaded {
  Api api;
  std::string problem;  // why NCCL is not usable; empty when it is
};

// Resolves one entry point into `slot`; false (with the problem recorded) when it is missing.
template <class Fn>
bool resolve(void* handle, const char* name, Fn& slot, std::string& problem, bool required) {
  dlerror();
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (slot || !required) return true;
  const char* e = dlerror();
  problem = std::string(kLibrary) + " lacks " + name + (e ? std::string(" (") + e + ")" : "") +
            ": an NCCL older than this build supports";
  return false;
}

Loaded load() {
  Loaded l;
  void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    l.problem = std::string("cannot load ") + kLibrary + ": " + (e ? e : "unknown dlopen error") +
                " (NCCL is needed only for runs of more than one rank; install it, e.g. the "
                "CUDA toolkit's or the nvidia-nccl Python wheel's, and put its folder on "
                "LD_LIBRARY_PATH)";
    return l;
  }
  Api& a = l.api;
  std::string& p = l.problem;
  const bool ok = resolve(handle, "ncclGetVersion", a.get_version, p, true) &&
                  resolve(handle, "ncclGetUniqueId", a.get_unique_id, p, true) &&
                  resolve(handle, "ncclCommInitRank", a.comm_init_rank, p, true) &&
                  resolve(handle, "ncclCommDestroy", a.comm_destroy, p, true) &&
                  resolve(handle, "ncclCommAbort", a.comm_abort, p, true) &&
                  resolve(handle, "ncclCommGetAsyncError", a.comm_get_async_error, p, true) &&
                  resolve(handle, "ncclGetErrorString", a.get_error_string, p, true) &&
                  resolve(handle, "ncclGetLastError", a.last_error, p, false) &&
                  resolve(handle, "ncclReduce", a.reduce, p, true) &&
                  resolve(handle, "ncclBroadcast", a.broadcast, p, true) &&
                  resolve(handle, "ncclAllReduce", a.all_reduce, p, true) &&
                  resolve(handle, "ncclAllGather", a.all_gather, p, true);
  // Kept loaded either way: a half-resolved table is never handed out (problem is set).
  if (!ok) l.api = Api{};
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const Api& api() {
  const Loaded& l = loaded();
  if (!l.problem.empty()) throw Error("NCCL: " + l.problem);
  return l.api;
}

int version(std::string* why) noexcept {
  try {
    const Loaded& l = loaded();
    if (!l.problem.empty()) {
      if (why) *why = l.problem;
      return 0;
    }
    int v = 0;
    if (l.api.get_version(&v) != ncclSuccess) {
      if (why) *why = "ncclGetVersion failed";
      return 0;
    }
    return v;
  } catch (...) {  // std::bad_alloc while recording a problem: nothing more to say
  }
  return 0;
}

}  // namespace fp8rl::nccl
