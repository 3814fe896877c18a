#include "core/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
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

namespace {

// cpu_threads() − 1 workers that live as long as the process and run the chunks of one
// parallel_for at a time (the caller runs chunk 0). Starting threads per call cost tens of
// microseconds each, more than many of the small ops of a decode step take.
class Pool {
 public:
  explicit Pool(int workers) {
    for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { work(w + 1); });
  }
  ~Pool() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  // Runs chunks 1 … chunks−1 of `run` on the workers, chunk 0 on the caller; returns when all
  // are done. False (nothing run) when another parallel_for holds the pool.
  bool try_run(int64_t chunks, const std::function<void(int64_t)>& run) {
    std::unique_lock busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard lock(m_);
      run_ = &run;
      chunks_ = chunks;
      pending_ = chunks - 1;
      ++generation_;
    }
    wake_.notify_all();
    in_worker() = true;
    run(0);
    in_worker() = false;
    std::unique_lock lock(m_);
    done_.wait(lock, [&] { return pending_ == 0; });
    run_ = nullptr;
    return true;
  }

  // True on a pool worker, and on the caller while it runs its own chunk: a parallel_for
  // nested inside a chunk runs its chunks where it is.
  static bool& in_worker() {
    thread_local bool inside = false;
    return inside;
  }

 private:
  void work(int index) {
    in_worker() = true;
    uint64_t seen = 0;
    std::unique_lock lock(m_);
    while (true) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= chunks_) continue;
      const auto* run = run_;
      lock.unlock();
      (*run)(index);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex busy_;  // held by the parallel_for that owns the workers
  std::mutex m_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t)>* run_ = nullptr;
  int64_t chunks_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

Pool& pool() {
  // Never destroyed: workers may still be parked when static destructors run.
  static Pool* p = new Pool(cpu_threads() - 1);
  return *p;
}

}  // namespace

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = std::min<int64_t>(cpu_threads(), (n + grain - 1) / grain);
  if (chunks <= 1) {
    body(0, n);
    return;
  }
  // The chunks are the same whoever runs them: [n·c/chunks, n·(c+1)/chunks).
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const std::function<void(int64_t)> run = [&](int64_t c) {
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    try {
      body(begin, end);
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  if (Pool::in_worker() || !pool().try_run(chunks, run))
    for (int64_t c = 0; c < chunks; ++c) run(c);  // nested, or the pool is busy elsewhere
  if (failure) std::rethrow_exception(failure);
}

}  // namespace fp8rl
