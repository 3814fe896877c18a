#include "dist/mpi_communicator.hpp"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace fp8rl {
namespace {

// SIGTERM is how mpirun ends a job when one of its ranks exits early (or the job is
// interrupted): a rank waiting in a collective notices and throws PeerLost.
std::atomic<bool> g_job_ending{false};
extern "C" void on_job_ending(int) {
  g_job_ending = true;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

void check_mpi(int code, const char* call) {
  if (code != MPI_SUCCESS) throw PeerLost(std::string(call) + " failed: " + mpi_error(code));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      int provided = 0;
      // Serialized: the run's thread makes the calls, other threads (a worker's serving thread)
      // none while it does.
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        throw Error("MPI_Init_thread failed");
      check(provided >= MPI_THREAD_SERIALIZED,
            "this MPI library does not support MPI_THREAD_SERIALIZED");
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    // Errors come back as codes (and become PeerLost) instead of aborting inside MPI.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    std::signal(SIGTERM, on_job_ending);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void all_reduce_sum(float* data, size_t n) override { reduce(data, n, MPI_FLOAT, MPI_SUM); }
  void all_reduce_sum(double* data, size_t n) override { reduce(data, n, MPI_DOUBLE, MPI_SUM); }
  void all_reduce_max(double* data, size_t n) override { reduce(data, n, MPI_DOUBLE, MPI_MAX); }

  void broadcast(void* data, size_t bytes, int root) override {
    for (size_t at = 0; at < bytes; at += kChunk) {
      const int n = static_cast<int>(std::min(kChunk, bytes - at));
      MPI_Request req;
      check_mpi(MPI_Ibcast(static_cast<char*>(data) + at, n, MPI_BYTE, root, comm_, &req),
                "MPI_Ibcast");
      wait(req, "a broadcast");
    }
    bytes_ += bytes;
  }

  void all_gather(const void* send, size_t bytes, void* recv) override {
    check(bytes <= kChunk, "all_gather: more than 1 GiB per rank");
    MPI_Request req;
    check_mpi(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes),
                             MPI_BYTE, comm_, &req),
              "MPI_Iallgather");
    wait(req, "an all-gather");
    bytes_ += bytes;
  }

  bool job_ending() const override { return g_job_ending; }

  void barrier() override {
    MPI_Request req;
    check_mpi(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
    wait(req, "a barrier");
  }

  void finish(bool success) {
    if (!success) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Comm_free(&comm_);
    MPI_Finalize();
  }

 private:
  static constexpr size_t kChunk = size_t{1} << 30;

  // Sum or max reduced on rank 0 and broadcast: the same bits on every rank (an all-reduce may
  // associate the sum differently on different ranks).
  void reduce(void* data, size_t n, MPI_Datatype type, MPI_Op op) {
    int esize = 0;
    MPI_Type_size(type, &esize);
    const size_t chunk = kChunk / static_cast<size_t>(esize);
    for (size_t at = 0; at < n; at += chunk) {
      const int count = static_cast<int>(std::min(chunk, n - at));
      char* p = static_cast<char*>(data) + at * static_cast<size_t>(esize);
      MPI_Request req;
      check_mpi(MPI_Ireduce(rank_ == 0 ? MPI_IN_PLACE : p, rank_ == 0 ? p : nullptr, count, type,
                            op, 0, comm_, &req),
                "MPI_Ireduce");
      wait(req, "a reduction");
      check_mpi(MPI_Ibcast(p, count, type, 0, comm_, &req), "MPI_Ibcast");
      wait(req, "a reduction's broadcast");
    }
    bytes_ += n * static_cast<size_t>(esize);
  }

  // Polls the request: spins briefly (collectives of a step are quick), then sleeps between
  // tests so a rank that waits long — the others paused, or generating more — leaves its core.
  void wait(MPI_Request& req, const char* what) {
    int done = 0;
    for (int64_t polls = 0;; ++polls) {
      check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      if (g_job_ending)
        throw PeerLost("rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                       ": the MPI job is ending while waiting for " + what +
                       " (SIGTERM from the launcher: another rank exited or the job was "
                       "interrupted)");
      if (polls > 2000)
        std::this_thread::sleep_for(std::chrono::microseconds(polls > 20000 ? 2000 : 100));
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

MpiCommunicator* g_world = nullptr;

}  // namespace

std::unique_ptr<Communicator> make_mpi_world() {
  // Ranks sharing a machine share its cores: unless told otherwise, each takes its part.
  if (!std::getenv("FP8RL_THREADS"))
    if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) {
      const unsigned n = static_cast<unsigned>(std::max(1, std::atoi(local)));
      const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      setenv("FP8RL_THREADS", std::to_string(std::max(1u, cores / n)).c_str(), 0);
    }
  auto w = std::make_unique<MpiCommunicator>();
  g_world = w.get();
  return w;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "MPI (version unknown)";
  std::string v(text, static_cast<size_t>(len));
  v = v.substr(0, v.find_first_of("\n,"));
  return v;
}

void end_mpi_world(bool success) {
  if (g_world) g_world->finish(success);
  g_world = nullptr;
}

}  // namespace fp8rl
