// The MPI communicator (Open MPI, host buffers): the ranks mpirun started (docs/distributed.md).
// Internal to engine/dist: the rest of the engine asks world().
#pragma once

#include <memory>

#include "dist/communicator.hpp"

namespace fp8rl {

// Initialises MPI (threads: serialized — the run's thread makes the calls) and returns
// MPI_COMM_WORLD's ranks. Collectives poll rather than block, so a rank that waits (for a
// paused rank 0, say) sleeps instead of spinning, and one whose job is ending — SIGTERM, which
// mpirun sends to every rank when one exits — throws PeerLost instead of hanging.
std::unique_ptr<Communicator> make_mpi_world();

// MPI_Finalize on success; MPI_Abort after a failure.
void end_mpi_world(bool success);

// MPI_Get_library_version's first line (callable before MPI is initialised).
std::string mpi_library_version();

}  // namespace fp8rl
