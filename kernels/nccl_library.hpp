// NCCL, loaded at run time. The CUDA module does not link NCCL: loading the module (and every
// run of one rank) needs only the driver, the CUDA runtime (linked in) and cuBLASLt. NCCL is
// dlopen'ed ("libnccl.so.2", found like any library: LD_LIBRARY_PATH, the system's library
// folders) the first time a communicator for more than one rank asks for it, and by the module's
// probe, which reports its version (or why it is absent) without failing.
//
// The entry points used by nccl_communicator.cpp are resolved by dlsym into one table; their
// types come from nccl.h, which is still needed at compile time. The library stays loaded for
// the life of the process (communicators hold its code).
#pragma once

#include <nccl.h>

#include <string>

namespace fp8rl::nccl {

// The NCCL entry points the module calls. last_error is null for an NCCL too old to have
// ncclGetLastError (2.13); every other entry is always set.
struct Api {
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&::ncclGetErrorString) get_error_string = nullptr;
  decltype(&::ncclGetLastError) last_error = nullptr;
  decltype(&::ncclReduce) reduce = nullptr;
  decltype(&::ncclBroadcast) broadcast = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
};

// The library's file name as dlopen'ed.
inline constexpr const char* kLibrary = "libnccl.so.2";

// Loads NCCL once (thread-safe) and returns its entry points. Throws fp8rl::Error naming the
// library and what failed (dlopen's message, or the missing entry point) when it cannot be
// loaded; later calls throw the same again.
const Api& api();

// NCCL's version (ncclGetVersion, e.g. 22805) when it can be loaded, else 0 with the reason in
// *why (when given). Never throws.
int version(std::string* why = nullptr) noexcept;

}  // namespace fp8rl::nccl
