#include "core/parallel.hpp"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace fp8rl {

int cpu_threads() {
  static const int n = [] {
    if (const char* env = std::getenv("FP8RL_THREADS")) {
      const int v = std::atoi(env);
      check(v > 0, "FP8RL_THREADS must be a positive integer, got '" + std::string(env) + "'");
      return v;
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return n;
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = std::min<int64_t>(cpu_threads(), (n + grain - 1) / grain);
  if (chunks <= 1) {
    body(0, n);
    return;
  }
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto run = [&](int64_t c) {
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    try {
      body(begin, end);
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::jthread> threads;
  threads.reserve(static_cast<size_t>(chunks - 1));
  for (int64_t c = 1; c < chunks; ++c) threads.emplace_back(run, c);
  run(0);
  threads.clear();  // joins
  if (failure) std::rethrow_exception(failure);
}

}  // namespace fp8rl
