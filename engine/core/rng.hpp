// Deterministic, platform-independent random numbers (std:: distributions differ between
// standard libraries, so tests and benchmarks use these).
#pragma once

#include <cmath>
#include <cstdint>

namespace fp8rl {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  // SplitMix64: 64 random bits.
  uint64_t next() {
    uint64_t z = (state_ += kStep);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // The generator as it will be after `draws` calls of next(), without making them: the state
  // is a counter, so a stream can be cut into pieces that fill in parallel.
  Rng ahead(uint64_t draws) const {
    Rng r(*this);
    r.state_ += draws * kStep;
    return r;
  }
  // Standard normal (Box-Muller); two calls of next().
  double normal() {
    const double u1 = uniform() + 0x1.0p-54, u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  static constexpr uint64_t kStep = 0x9e3779b97f4a7c15ull;
  uint64_t state_;
};

}  // namespace fp8rl
