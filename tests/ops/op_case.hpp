// The op-test registry: every op case runs on every backend present against the CPU reference,
// on fresh random data. Qt-free so it builds and runs on GPU machines without Qt.
//
// A case gets the reference backend (CPU) and the backend under test. When the backend under
// test IS the CPU, cases check the CPU against independent FP64 / brute-force references, so
// the registry means something on machines without a GPU too.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/rng.hpp"
#include "model/config.hpp"

namespace fp8rl::optest {

enum class Outcome { pass, fail, skip };

struct Result {
  Outcome outcome = Outcome::pass;
  std::string detail;  // failure or skip reason, or a measurement worth printing
};

struct OpCase {
  std::string name;
  // Runs the case; `test` is the backend under test, `ref` the CPU reference.
  std::function<Result(Backend& ref, Backend& test, Rng& rng)> run;
};

using Registry = std::vector<OpCase>;

void add_quantize_cases(Registry& r);
void add_gemm_cases(Registry& r);
void add_gemm_grouped_cases(Registry& r);
void add_model_cases(Registry& r);
void add_kv_cases(Registry& r);
void add_sampling_cases(Registry& r);
void add_generation_cases(Registry& r);
void add_moe_cases(Registry& r);
void add_mla_cases(Registry& r);
void add_fused_cases(Registry& r);

// ---- helpers shared by the case files

// A host array mirrored in a backend's memory with guard bytes on both sides: the op may only
// write inside [0, bytes); the guards must still hold their pattern afterwards.
class Guarded {
 public:
  static constexpr size_t kGuard = 256;
  static constexpr uint8_t kPattern = 0xa5;

  Guarded(Backend& be, size_t bytes);
  // Uploads host data into the payload (guards keep their pattern).
  void upload(const void* host);
  // Downloads the payload into host memory; returns false when a guard byte changed.
  bool download(void* host) const;
  void* data() const { return static_cast<uint8_t*>(buf_.data()) + kGuard; }
  size_t bytes() const { return bytes_; }

 private:
  Backend& be_;
  size_t bytes_;
  Buffer buf_;
};

// Random matrix data: normal values scaled per row with occasional outliers, so blocks have
// different amax (scales that vary are what a real activation looks like).
std::vector<float> random_matrix(Rng& rng, int64_t rows, int64_t cols, double outlier_rate = 0.01);

// The decoder of the model-level cases: 2 layers, hidden 256, 4/2 heads of 64, intermediate
// 512 (dense Qwen3); vocab_size and max_position_embeddings for the case to set.
ModelConfig small_decoder(int64_t vocab_size, int64_t max_positions);

// Global similarity of DeepGEMM: 1 − 2⟨x,y⟩/(‖x‖²+‖y‖²); 0 for identical vectors.
double global_difference(const std::vector<double>& x, const std::vector<double>& y);
// ‖x − y‖ / ‖y‖ (0 when both are zero).
double relative_error(const std::vector<double>& x, const std::vector<double>& y);

// Runs body once with the backend's defaults, then once with each value of a kernel option the
// backend has (the CPU has none: once), setting the option back to its default after each; the
// first result that is not a pass is returned, else a pass joining the details, labelled by
// "option=value".
Result with_kernel_option(Backend& be, const std::string& option,
                          const std::vector<int64_t>& values, const std::function<Result()>& body);

// Runs body with every way the CUDA backend quantizes 128x128 tiles with a transposed copy: its
// defaults (whole tiles from registers), then the 16-bit staging of BF16 edge tiles, then every
// tile staged (quantize_tile_kernel 1) as FP32 and as 16-bit patterns. The CPU: once.
Result with_tile_kernels(Backend& be, const std::function<Result()>& body);

std::string shape_str(int64_t r, int64_t c);

// Formats with printf syntax.
std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));

inline Result pass(std::string d = {}) {
  return {Outcome::pass, std::move(d)};
}
inline Result fail(std::string d) {
  return {Outcome::fail, std::move(d)};
}
inline Result skip(std::string d) {
  return {Outcome::skip, std::move(d)};
}

}  // namespace fp8rl::optest
