#include "op_case.hpp"
#include "test_models.hpp"

#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace fp8rl::optest {

Guarded::Guarded(Backend& be, size_t bytes)
    : be_(be), bytes_(bytes), buf_(be.alloc(bytes + 2 * kGuard)) {
  std::vector<uint8_t> pattern(bytes + 2 * kGuard, kPattern);
  be_.upload(buf_.data(), pattern.data(), pattern.size());
}

void Guarded::upload(const void* host) {
  if (bytes_) be_.upload(data(), host, bytes_);
}

bool Guarded::download(void* host) const {
  std::vector<uint8_t> all(bytes_ + 2 * kGuard);
  be_.download(all.data(), buf_.data(), all.size());
  if (bytes_) std::memcpy(host, all.data() + kGuard, bytes_);
  for (size_t i = 0; i < kGuard; ++i)
    if (all[i] != kPattern || all[kGuard + bytes_ + i] != kPattern) return false;
  return true;
}

std::vector<float> random_matrix(Rng& rng, int64_t rows, int64_t cols, double outlier_rate) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const double row_scale = std::exp2(rng.uniform() * 8.0 - 4.0);  // 2^-4 .. 2^4
    for (int64_t c = 0; c < cols; ++c) {
      double x = rng.normal() * row_scale;
      if (rng.uniform() < outlier_rate) x *= 30.0;
      v[static_cast<size_t>(r * cols + c)] = static_cast<float>(x);
    }
  }
  return v;
}

ModelConfig small_decoder(int64_t vocab_size, int64_t max_positions) {
  return testing::test_decoder(256, 64, 512, vocab_size, max_positions);
}

double global_difference(const std::vector<double>& x, const std::vector<double>& y) {
  double xy = 0, xx = 0, yy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    xy += x[i] * y[i];
    xx += x[i] * x[i];
    yy += y[i] * y[i];
  }
  return xx + yy == 0 ? 0.0 : 1.0 - 2.0 * xy / (xx + yy);
}

Result with_kernel_option(Backend& be, const std::string& option,
                          const std::vector<int64_t>& values, const std::function<Result()>& body) {
  Result r = body();
  if (r.outcome != Outcome::pass) return r;
  std::string detail = r.detail;
  for (int64_t v : values) {
    if (!be.set_kernel_option(option, v)) break;
    try {
      r = body();
    } catch (...) {
      be.set_kernel_option(option, 0);
      throw;
    }
    be.set_kernel_option(option, 0);
    const std::string label = option + "=" + std::to_string(v);
    if (r.outcome != Outcome::pass) return Result{r.outcome, label + ": " + r.detail};
    detail += "; " + label + ": " + r.detail;
  }
  return pass(detail);
}

Result with_tile_kernels(Backend& be, const std::function<Result()>& body) {
  return with_kernel_option(be, "quantize_tile_kernel", {1}, [&] {
    return with_kernel_option(be, "quantize_stage_bf16", {1}, body);
  });
}

double relative_error(const std::vector<double>& x, const std::vector<double>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  if (den == 0) return num == 0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

std::string shape_str(int64_t r, int64_t c) {
  return "[" + std::to_string(r) + "," + std::to_string(c) + "]";
}

std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

}  // namespace fp8rl::optest
