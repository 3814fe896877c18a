// NcclCommunicator (see nccl_communicator.hpp). Compiled only when the module is built with NCCL's
// header (kernels/CMakeLists.txt adds it with FP8RL_HAVE_NCCL); NCCL itself is loaded at run time
// (nccl_library.hpp) by the first communicator.
#include "nccl_communicator.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_check.hpp"
#include "nccl_library.hpp"

namespace fp8rl {
namespace {

// The enumerator's name, like cudaGetErrorName (the status of the Errors thrown here).
const char* nccl_status_name(ncclResult_t r) {
  static const std::pair<ncclResult_t, const char*> names[] = {
      {ncclSuccess, "ncclSuccess"},
      {ncclUnhandledCudaError, "ncclUnhandledCudaError"},
      {ncclSystemError, "ncclSystemError"},
      {ncclInternalError, "ncclInternalError"},
      {ncclInvalidArgument, "ncclInvalidArgument"},
      {ncclInvalidUsage, "ncclInvalidUsage"},
      {ncclRemoteError, "ncclRemoteError"},
      {ncclInProgress, "ncclInProgress"}};
  for (const auto& [code, name] : names)
    if (code == r) return name;
  return "ncclUnknownResult";
}

// "<call>: <NCCL's error string> (<ncclGetLastError>)"; comm may be null.
std::string nccl_message(const nccl::Api& api, ncclResult_t r, const char* call, ncclComm_t comm) {
  std::string m = std::string(call) + ": " + api.get_error_string(r);
  const char* last = api.last_error ? api.last_error(comm) : nullptr;
  if (last && *last) m += std::string(" (") + last + ")";
  return m;
}

// A fixed-size C string from s (truncated, always terminated).
template <size_t N>
void copy_text(char (&dst)[N], const std::string& s) {
  std::snprintf(dst, N, "%s", s.c_str());
}

// One rank's GPU, gathered over the host communicator before NCCL is initialised.
struct DeviceIdentity {
  int32_t ok = 0;       // 1 when this rank's local setup succeeded; else `problem` says why
  int32_t device = -1;  // CUDA ordinal in that process
  unsigned char uuid[16] = {};
  char bus_id[32] = {};  // "0000:1b:00.0"
  char host[64] = {};
  char problem[448] = {};
};
static_assert(std::is_trivially_copyable_v<DeviceIdentity>);

bool has_uuid(const DeviceIdentity& d) {
  for (unsigned char b : d.uuid)
    if (b) return true;
  return false;
}

// Whether a and b are the same physical GPU: by UUID (unique across machines), or by host name
// and PCI bus id when either has no UUID.
bool same_gpu(const DeviceIdentity& a, const DeviceIdentity& b) {
  if (has_uuid(a) && has_uuid(b)) return std::memcmp(a.uuid, b.uuid, sizeof a.uuid) == 0;
  return std::strcmp(a.host, b.host) == 0 && std::strcmp(a.bus_id, b.bus_id) == 0;
}

// Rank 0's NCCL unique id and whether ncclGetUniqueId succeeded.
struct Bootstrap {
  int32_t result = ncclSuccess;
  ncclUniqueId id{};
};
static_assert(std::is_trivially_copyable_v<Bootstrap>);

// One rank's outcome of ncclCommInitRank.
struct InitOutcome {
  int32_t result = ncclSuccess;
  char problem[252] = {};
};
static_assert(std::is_trivially_copyable_v<InitOutcome>);

}  // namespace

NcclCommunicator::NcclCommunicator(Communicator& host, int device, cudaStream_t stream)
    : rank_(host.rank()), size_(host.size()), device_(device), stream_(stream) {
  try {
    // 1. Local setup: the device, its identity, the barrier's scratch value and the NCCL library
    // (loaded here, by the first communicator). A failure here is reported through the gather
    // below, so that every rank throws.
    DeviceIdentity mine;
    mine.device = device;
    try {
      FP8RL_CUDA_CHECK(cudaSetDevice(device));
      cudaDeviceProp prop{};
      FP8RL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
      static_assert(sizeof prop.uuid.bytes == sizeof mine.uuid);
      std::memcpy(mine.uuid, prop.uuid.bytes, sizeof mine.uuid);
      FP8RL_CUDA_CHECK(
          cudaDeviceGetPCIBusId(mine.bus_id, static_cast<int>(sizeof mine.bus_id), device));
      if (gethostname(mine.host, sizeof mine.host - 1) != 0) mine.host[0] = '\0';
      FP8RL_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
      FP8RL_CUDA_CHECK(cudaMemsetAsync(scratch_, 0, sizeof(float), stream_));
      FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
      api_ = &nccl::api();  // loads NCCL on first use; throws naming what failed
      mine.ok = 1;
    } catch (const std::exception& e) {
      copy_text(mine.problem, e.what());
    }

    // 2. Every rank's GPU: all usable, and no two ranks on one GPU.
    std::vector<DeviceIdentity> all(static_cast<size_t>(size_));
    host.all_gather(&mine, sizeof mine, all.data());
    std::string failed;
    for (int r = 0; r < size_; ++r)
      if (!all[r].ok)
        failed += (failed.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " +
                  all[r].problem;
    if (!failed.empty()) throw Error("NCCL communicator: setup failed on " + failed);
    std::string shared;
    for (int a = 0; a < size_; ++a)
      for (int b = a + 1; b < size_; ++b)
        if (same_gpu(all[a], all[b])) {
          if (!shared.empty()) shared += ", ";
          shared += "ranks " + std::to_string(a) + " and " + std::to_string(b) + " on GPU " +
                    all[a].bus_id + (all[a].host[0] ? std::string(" of ") + all[a].host : "");
        }
    if (!shared.empty())
      throw Error("NCCL communicator: " + shared +
                  ": NCCL cannot put two ranks of one communicator on the same GPU "
                  "(ncclCommInitRank: \"Duplicate GPU detected\"); the caller reduces through "
                  "host memory instead");

    // 3. Rank 0's unique id, with whether it could make one.
    Bootstrap boot;
    std::string boot_problem;
    if (rank_ == 0) {
      const ncclResult_t r = api_->get_unique_id(&boot.id);
      boot.result = r;
      if (r != ncclSuccess) boot_problem = nccl_message(*api_, r, "ncclGetUniqueId", nullptr);
    }
    host.broadcast(&boot, sizeof boot, 0);
    if (boot.result != ncclSuccess) {
      const auto r = static_cast<ncclResult_t>(boot.result);
      throw Error(
          "NCCL communicator: " + (rank_ == 0 ? boot_problem
                                              : std::string("ncclGetUniqueId failed on rank 0: ") +
                                                    api_->get_error_string(r)),
          nccl_status_name(r));
    }

    // 4. The communicator, and the ranks' agreement on the outcome.
    InitOutcome outcome;
    (void)cudaSetDevice(device_);  // current since step 1; ncclCommInitRank takes the current one
    const ncclResult_t r = api_->comm_init_rank(&comm_, size_, boot.id, rank_);
    outcome.result = r;
    if (r != ncclSuccess) {
      copy_text(outcome.problem, nccl_message(*api_, r, "ncclCommInitRank", comm_));
      // A communicator whose initialisation failed is still allocated: abort frees it.
      if (comm_) (void)api_->comm_abort(comm_);
      comm_ = nullptr;
    }
    std::vector<InitOutcome> outcomes(static_cast<size_t>(size_));
    host.all_gather(&outcome, sizeof outcome, outcomes.data());
    std::string init_failed;
    ncclResult_t first = ncclSuccess;
    for (int q = 0; q < size_; ++q)
      if (outcomes[q].result != ncclSuccess) {
        if (first == ncclSuccess) first = static_cast<ncclResult_t>(outcomes[q].result);
        init_failed += (init_failed.empty() ? "" : "; ") + std::string("rank ") +
                       std::to_string(q) + ": " + outcomes[q].problem;
      }
    if (!init_failed.empty())
      throw Error("NCCL communicator: initialisation failed on " + init_failed,
                  nccl_status_name(first));
  } catch (...) {
    release(/*abort=*/true);
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  release(/*abort=*/false);
}

void NcclCommunicator::release(bool abort) noexcept {
  (void)cudaSetDevice(device_);
  if (comm_) {
    ncclResult_t async = ncclSuccess;
    // Destroy flushes the communicator's work; after an error that may never finish: abort.
    if (abort || api_->comm_get_async_error(comm_, &async) != ncclSuccess || async != ncclSuccess)
      (void)api_->comm_abort(comm_);
    else
      (void)api_->comm_destroy(comm_);
    comm_ = nullptr;
  }
  if (scratch_) (void)cudaFree(scratch_);
  scratch_ = nullptr;
  (void)cudaGetLastError();
}

std::string NcclCommunicator::who() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(size_);
}

void NcclCommunicator::abort_comm(const std::string& why, bool lost) {
  if (comm_) (void)api_->comm_abort(comm_);
  comm_ = nullptr;
  lost_ = lost;
  dead_why_ = why.empty() ? "unknown failure" : why;
}

void NcclCommunicator::begin() {
  if (!dead_why_.empty()) {
    const std::string m =
        who() + ": the NCCL communicator was aborted after an earlier failure: " + dead_why_;
    if (lost_) throw PeerLost(m);
    throw Error(m);
  }
  check(comm_ != nullptr, who() + ": NCCL communicator not initialised");
  int current = -1;
  FP8RL_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device_) FP8RL_CUDA_CHECK(cudaSetDevice(device_));
}

void NcclCommunicator::check_nccl(ncclResult_t r, const char* call, std::source_location where) {
  if (r == ncclSuccess) return;
  // The last-error text first: the communicator is gone after the abort.
  const std::string m = who() + ": " + nccl_message(*api_, r, call, comm_);
  const bool lost = r == ncclRemoteError;
  abort_comm(m, lost);
  if (lost) throw PeerLost(m + ": another rank exited or its connection failed", {}, where);
  throw Error(m, nccl_status_name(r), where);
}

void NcclCommunicator::wait(const char* what) {
  using Clock = std::chrono::steady_clock;
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  const auto start = Clock::now();
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      (void)cudaGetLastError();
      const std::string m =
          who() + ": cudaStreamQuery while waiting for " + what + ": " + cudaGetErrorString(e);
      abort_comm(m, false);
      throw Error(m, cudaGetErrorName(e));
    }
    // "Not ready" is no failure: keep it out of the runtime's last-error slot, where the next
    // check_launch would find it.
    if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();

    ncclResult_t async = ncclSuccess;
    check_nccl(api_->comm_get_async_error(comm_, &async), "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress) {
      const std::string m = who() + ": NCCL asynchronous error while waiting for " + what + ": " +
                            nccl_message(*api_, async, nccl_status_name(async), comm_) +
                            "; another rank exited or its connection failed";
      abort_comm(m, true);
      throw PeerLost(m);
    }

    // Spin for the first millisecond (the collectives of a step are quick), then sleep between
    // polls so that a rank waiting for slower ones leaves its core.
    const auto waited = Clock::now() - start;
    if (waited < milliseconds(1))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(waited < milliseconds(100) ? microseconds(100)
                                                             : microseconds(1000));
  }
}

void NcclCommunicator::reduce_sum(void* data, size_t n, ncclDataType_t type, size_t element_bytes) {
  if (n == 0) return;
  check(data != nullptr, "all_reduce_sum: null buffer");
  begin();
  // Reduced once, on rank 0, then broadcast: every rank gets the same bits. The broadcast is
  // ordered after the reduction by the stream (no group: it depends on the reduction's result).
  check_nccl(api_->reduce(data, data, n, type, ncclSum, 0, comm_, stream_), "ncclReduce");
  check_nccl(api_->broadcast(data, data, n, type, 0, comm_, stream_), "ncclBroadcast");
  wait("a sum");
  bytes_ += n * element_bytes;
}

void NcclCommunicator::all_reduce_sum(float* data, size_t n) {
  reduce_sum(data, n, ncclFloat32, sizeof(float));
}

void NcclCommunicator::all_reduce_sum(double* data, size_t n) {
  reduce_sum(data, n, ncclFloat64, sizeof(double));
}

void NcclCommunicator::all_reduce_max(double* data, size_t n) {
  if (n == 0) return;
  check(data != nullptr, "all_reduce_max: null buffer");
  begin();
  // The maximum is exact, and each element is computed once and passed on: the same everywhere.
  check_nccl(api_->all_reduce(data, data, n, ncclFloat64, ncclMax, comm_, stream_),
             "ncclAllReduce");
  wait("a maximum");
  bytes_ += n * sizeof(double);
}

void NcclCommunicator::broadcast(void* data, size_t bytes, int root) {
  check(root >= 0 && root < size_,
        "broadcast: root " + std::to_string(root) + " is not a rank of " + std::to_string(size_));
  if (bytes == 0) return;
  check(data != nullptr, "broadcast: null buffer");
  begin();
  check_nccl(api_->broadcast(data, data, bytes, ncclUint8, root, comm_, stream_), "ncclBroadcast");
  wait("a broadcast");
  bytes_ += bytes;
}

void NcclCommunicator::all_gather(const void* send, size_t bytes, void* recv) {
  if (bytes == 0) return;
  check(send != nullptr && recv != nullptr, "all_gather: null buffer");
  begin();
  check_nccl(api_->all_gather(send, recv, bytes, ncclUint8, comm_, stream_), "ncclAllGather");
  wait("an all-gather");
  bytes_ += bytes;
}

void NcclCommunicator::barrier() {
  begin();
  check_nccl(api_->all_reduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_),
             "ncclAllReduce");
  wait("a barrier");
}

}  // namespace fp8rl
