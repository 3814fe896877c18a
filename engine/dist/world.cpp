#include <cstdlib>

#include "dist/communicator.hpp"
#if defined(FP8RL_HAVE_MPI)
#include "dist/mpi_communicator.hpp"
#endif

namespace fp8rl {

int launched_ranks() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  return 1;
}

std::string mpi_library() {
#if defined(FP8RL_HAVE_MPI)
  return mpi_library_version();
#else
  return "";
#endif
}

namespace {
std::unique_ptr<Communicator>& world_slot() {
  static std::unique_ptr<Communicator> w;
  return w;
}
}  // namespace

Communicator& world() {
  auto& w = world_slot();
  if (w) return *w;
  const int n = launched_ranks();
  if (n == 1) {
    w = std::make_unique<SingleProcess>();
    return *w;
  }
#if defined(FP8RL_HAVE_MPI)
  w = make_mpi_world();
#else
  throw Error("launched as " + std::to_string(n) +
              " ranks, but this build of fp8rl has no MPI (install libopenmpi-dev and rebuild)");
#endif
  return *w;
}

void end_world(bool success) {
  auto& w = world_slot();
  if (!w || w->size() == 1) return;
#if defined(FP8RL_HAVE_MPI)
  end_mpi_world(success);
#else
  (void)success;
#endif
}

}  // namespace fp8rl
