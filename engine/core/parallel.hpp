// A minimal fork-join parallel loop for the CPU backend.
#pragma once

#include <cstdint>
#include <functional>

namespace fp8rl {

// Number of worker threads the CPU backend uses (FP8RL_THREADS, else hardware concurrency).
int cpu_threads();

// Calls body(begin, end) on disjoint chunks covering [0, n), in parallel, chunks of at least
// `grain` items; returns when all are done. Exceptions from a chunk are rethrown here.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace fp8rl
