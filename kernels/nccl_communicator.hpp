// The NCCL communicator: the collectives of a data-parallel run (engine/dist/communicator.hpp)
// over device memory, for the CUDA backend. CudaBackend::device_communicator() makes one when the
// module was built with NCCL's header (FP8RL_HAVE_NCCL) and the run has more than one rank; the run
// loop then all-reduces its gradients where they lie instead of staging them through host memory.
//
// Buffers: every pointer passed to the collectives is device memory on the backend's device
// (device_buffers() is true). The collectives run on the backend's stream, so they are ordered
// after the work already queued on it, and each ends by waiting for that stream: the results can
// be read (or downloaded) as soon as the call returns.
//
// NCCL is loaded at run time by the first communicator (nccl_library.hpp); when it cannot be
// loaded on some rank, the constructor throws fp8rl::Error on every rank, naming what failed.
//
// Bootstrap: the host communicator (MPI) joins the same ranks. The constructor first gathers every
// rank's GPU identity over it, then rank 0 creates the NCCL unique id and broadcasts it, then every
// rank calls ncclCommInitRank(size, id, rank) and the ranks agree over the host communicator on
// the outcome. Each step's failure is made known to every rank, so the constructor either returns
// on every rank or throws on every rank (a caller that falls back to host staging on Error does so
// everywhere, and the ranks keep calling the same collectives). A PeerLost from the host
// communicator passes through.
//
// Shared device (the limitation): NCCL cannot put two ranks of one communicator on the same GPU
// (ncclCommInitRank fails with ncclInvalidUsage, "Duplicate GPU detected", or hangs). Two ranks on
// one GPU are legitimate here (a correctness check of a data-parallel run on a one-GPU machine),
// so the constructor detects them first, by the devices' UUIDs (PCI bus id and host name when a
// UUID is unavailable), and throws fp8rl::Error naming the ranks and the GPU; the run loop then
// reduces through host memory with the host communicator. Nothing is created in that case.
//
// Results are bit-identical on every rank: sums are ncclReduce to rank 0 followed by ncclBroadcast
// from rank 0 (in place, issued one after the other on the stream; an all-reduce may associate the
// sum differently on different ranks), the maximum is an ncclAllReduce (exact).
//
// Failures: every NCCL call is checked; a failure throws fp8rl::Error with the call, NCCL's error
// string and ncclGetLastError's text. While a collective runs, the wait polls the stream and
// ncclCommGetAsyncError (spinning for the first millisecond, then sleeping 100 µs, then 1 ms
// between polls): an asynchronous error (a peer that exited, a broken connection) aborts the
// communicator (ncclCommAbort, which also stops its kernels) and throws fp8rl::PeerLost, so a dead
// peer ends the run instead of hanging it. After any failure the communicator is aborted and every
// later collective throws. A peer that dies without NCCL noticing (no asynchronous error) still
// leaves the wait polling until the launcher ends the job.
//
// Threads and lifetime: like the backend, one thread at a time. The communicator uses the backend's
// stream and must be destroyed before the backend. Not for use inside CudaBackend::capture().
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <source_location>
#include <string>

#include "dist/communicator.hpp"
#include "nccl_library.hpp"

namespace fp8rl {

class NcclCommunicator final : public Communicator {
 public:
  // Joins host's ranks on `device` (the backend's device), running the collectives on `stream`
  // (the backend's stream). Collective over host: every rank of host must call it. Throws
  // fp8rl::Error (on every rank) when two ranks share a GPU or NCCL cannot be set up.
  NcclCommunicator(Communicator& host, int device, cudaStream_t stream);
  // ncclCommDestroy; ncclCommAbort after an asynchronous error. Never throws.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }
  bool device_buffers() const override { return true; }

  void all_reduce_sum(float* data, size_t n) override;
  void all_reduce_sum(double* data, size_t n) override;
  void all_reduce_max(double* data, size_t n) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void all_gather(const void* send, size_t bytes, void* recv) override;
  // A one-element all-reduce on a device scratch value, waited for.
  void barrier() override;

 private:
  // ncclReduce (sum) to rank 0, then ncclBroadcast from rank 0, in place; then waits.
  void reduce_sum(void* data, size_t n, ncclDataType_t type, size_t element_bytes);
  // Before a collective: throws when the communicator was aborted; makes device_ current.
  void begin();
  // Throws (and aborts the communicator) when r is not ncclSuccess; ncclRemoteError (a peer
  // gone) becomes PeerLost.
  void check_nccl(ncclResult_t r, const char* call,
                  std::source_location where = std::source_location::current());
  // Waits for the stream, polling for NCCL's asynchronous errors (see the header comment).
  void wait(const char* what);
  // Aborts the communicator (once); later collectives throw `why` (PeerLost when lost).
  void abort_comm(const std::string& why, bool lost);
  // Destroys (or, with abort or after an asynchronous error, aborts) the communicator and frees
  // the scratch value. Never throws.
  void release(bool abort) noexcept;
  // "rank r of n"
  std::string who() const;

  int rank_ = 0, size_ = 1;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  const nccl::Api* api_ = nullptr;  // NCCL's entry points, set once the library is loaded
  ncclComm_t comm_ = nullptr;
  float* scratch_ = nullptr;  // one float on the device, 0 (barrier)
  std::string dead_why_;      // why the communicator was aborted ("" while alive)
  bool lost_ = false;         // it was aborted because a peer was lost
};

}  // namespace fp8rl
