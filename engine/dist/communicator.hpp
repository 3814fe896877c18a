// Collectives between the ranks of a data-parallel run (docs/distributed.md). A Communicator
// connects `size()` processes; every rank calls the same collectives in the same order. Three
// implementations: one process (every collective is the identity), MPI over host buffers
// (Open MPI; the ranks mpirun starts), and NCCL over device buffers (the CUDA module, bootstrapped
// through an MPI communicator).
//
// Results are identical on every rank, bit for bit (the sums are reduced on rank 0 and
// broadcast), so ranks that apply the same optimizer step to the same gradients keep identical
// weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace fp8rl {

// Another rank is gone (it exited, was killed, or the launcher is ending the job): thrown by a
// collective that can no longer complete. The run that sees it ends as crashed.
class PeerLost : public Error {
 public:
  // Spelled out rather than inherited: nvcc 13.0 fails on an inherited constructor with a
  // std::source_location default argument (internal error in compare_expressions).
  PeerLost(std::string what, std::string status = {},
           std::source_location where = std::source_location::current())
      : Error(std::move(what), std::move(status), where) {}
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "single", "mpi" or "nccl".
  virtual std::string name() const = 0;
  // Whether the buffers the collectives take are device memory (NCCL) rather than host memory.
  virtual bool device_buffers() const { return false; }

  // data[0, n) ← the element-wise sum over ranks of every rank's data[0, n) (in place).
  virtual void all_reduce_sum(float* data, size_t n) = 0;
  virtual void all_reduce_sum(double* data, size_t n) = 0;
  // data[0, n) ← the element-wise maximum over ranks (in place).
  virtual void all_reduce_max(double* data, size_t n) = 0;
  // data[0, bytes) ← root's data[0, bytes) on every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // recv[r·bytes, (r+1)·bytes) ← rank r's send[0, bytes); recv holds size() × bytes.
  virtual void all_gather(const void* send, size_t bytes, void* recv) = 0;
  virtual void barrier() = 0;
  // Whether the job is ending (a rank was lost): the next collective would throw PeerLost. A
  // rank that waits for something else (rank 0 while paused) polls it.
  virtual bool job_ending() const { return false; }

  // Payload bytes this rank has passed to collectives so far (the figure docs/distributed.md
  // derives per step).
  uint64_t bytes_communicated() const { return bytes_; }

 protected:
  uint64_t bytes_ = 0;
};

// One process: rank 0 of 1; every collective leaves its buffers as they are.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "single"; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_sum(double*, size_t) override {}
  void all_reduce_max(double*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
  void all_gather(const void* send, size_t bytes, void* recv) override;
  void barrier() override {}
};

// --- Built on the collectives (host communicators only).

// root's string on every rank.
std::string broadcast_string(Communicator& comm, const std::string& s, int root = 0);
// Every rank's string, in rank order, on every rank.
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& s);
// Every rank's values concatenated in rank order, on every rank.
std::vector<float> all_gather_floats(Communicator& comm, const std::vector<float>& v);

// [begin, end) of rank's share of n items split as evenly as possible over size ranks (the
// first n mod size ranks get one more).
std::pair<int64_t, int64_t> share_of(int64_t n, int rank, int size);

// --- The ranks this process belongs to.

// How many ranks the launcher started (OMPI_COMM_WORLD_SIZE, PMI_SIZE; 1 without a launcher).
int launched_ranks();

// The MPI library this build uses ("Open MPI v4.1.4, …", first line), or "" without MPI.
std::string mpi_library();

// This process's communicator: MPI when a launcher started several ranks (MPI is initialised
// on the first call), else SingleProcess. Throws fp8rl::Error when launched as several ranks
// by a build without MPI.
Communicator& world();

// Ends this process's part in the job: MPI_Finalize after success; after a failure, MPI_Abort
// (so that the launcher ends the other ranks instead of leaving them waiting). Without MPI,
// nothing. Call once, at the end of main.
void end_world(bool success);

}  // namespace fp8rl
