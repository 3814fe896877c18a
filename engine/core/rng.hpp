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
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller).
  double normal() {
    const double u1 = uniform() + 0x1.0p-54, u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace fp8rl
