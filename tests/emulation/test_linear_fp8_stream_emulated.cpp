// The one-stream decode GEMM (kernels/linear_fp8_stream.cu) on the CPU through the CUDA
// emulation (cuda_emulation.hpp: fibers for threads, mma.sync m16n8k32 E4M3 by the PTX ISA's
// fragment tables, shuffles as warp barriers), against the CPU backend's linear_fp8 (quantize x
// 1x128, then gemm_fp8: the reference) on the same BF16 x and E4M3 weight tiles. What it checks
// without a GPU: the in-register quantization of x (quantize()'s codes and scales: amax over a
// row's four lanes, pow2 scales), the permuted K order shared by both operands, the x-row scale
// exchange, each warp's share of K (a partial last block, warps without blocks), weight rows
// past N, x rows 1..8, 4 and 8 warps, f32 and BF16 y, and the deterministic sum of the warps.
// Bound: 1e-5 of the sum of the terms' magnitudes per element (BF16 y: plus 2^-8 of the value).
// What it cannot check: timing, and the tensor core's own summation inside a block.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_registry.hpp"
#include "fp8/format.hpp"
#include "linear_fp8_stream.hpp"

namespace {

using namespace fp8rl;

struct Case {
  int64_t M, N, K;
  int warps;
  bool y_bf16, pow2;
};

uint8_t random_code(std::mt19937& rng) {
  for (;;) {
    const auto c = static_cast<uint8_t>(rng() & 0xffu);
    if ((c & 0x7f) != 0x7f) return c;  // not NaN
  }
}

bool run(const Case& cs, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> log_scale(-6.0f, 2.0f);
  const int64_t M = cs.M, N = cs.N, K = cs.K;
  // x: BF16 with a different magnitude per 128-block, so the blocks' scales differ.
  std::vector<uint16_t> x(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const float mag = std::exp2(static_cast<float>((m * 7 + k / 128 * 3) % 11) - 5.0f);
      x[m * K + k] = static_cast<uint16_t>(__float_as_uint(normal(rng) * mag) >> 16);
    }
  std::vector<uint8_t> w(static_cast<size_t>(N * K));
  for (auto& c : w) c = random_code(rng);
  std::vector<float> ws(static_cast<size_t>(scale_count(ScaleBlock::tile128x128, N, K)));
  for (auto& s : ws) s = std::exp2(log_scale(rng));

  std::vector<float> y32(static_cast<size_t>(M * N), NAN);
  std::vector<uint16_t> y16(y32.size(), 0xffff);
  cuda::StreamGemmArgs a;
  a.x = x.data();
  a.w = w.data();
  a.ws = ws.data();
  a.y = cs.y_bf16 ? static_cast<void*>(y16.data()) : y32.data();
  a.y_bf16 = cs.y_bf16;
  a.M = M;
  a.N = N;
  a.K = K;
  a.ws_stride = tile_scale_stride(K);
  a.pow2 = cs.pow2;
  a.warps = cs.warps;
  const std::string problem = cuda::stream_gemm_problem(a);
  if (!problem.empty()) {
    std::printf("FAIL the kernel refuses the case: %s\n", problem.c_str());
    return false;
  }
  cuda::linear_fp8_stream(a, nullptr);

  // The reference: the CPU backend's linear_fp8 (f32 y), and the terms' magnitudes from the
  // dequantized weight and x (|q(x)/s| is x within FP8's rounding: a loose but fair scale).
  const auto cpu = make_cpu_backend();
  std::vector<float> ref(y32.size());
  QuantOptions opt;
  opt.pow2_scales = cs.pow2;
  cpu->linear_fp8(Matrix{x.data(), M, K, DType::bf16},
                  Fp8Matrix{w.data(), ws.data(), N, K, ScaleBlock::tile128x128, Fp8Format::e4m3},
                  Matrix{ref.data(), M, N, DType::f32}, opt);
  int bad = 0;
  double worst = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double mag = 0;
      for (int64_t k = 0; k < K; ++k)
        mag += std::fabs(
            static_cast<double>(__uint_as_float(static_cast<unsigned>(x[m * K + k]) << 16)) *
            emu::fp8_value(w[n * K + k], true) *
            ws[scale_index(ScaleBlock::tile128x128, N, K, n, k)]);
      const size_t i = static_cast<size_t>(m * N + n);
      const double got = cs.y_bf16 ? __uint_as_float(static_cast<unsigned>(y16[i]) << 16) : y32[i];
      const double bound =
          1.1e-5 * mag + (cs.y_bf16 ? std::ldexp(std::fabs(ref[i]), -8) : 0.0) + 1e-30;
      const double e = std::fabs(got - ref[i]);
      if (mag > 0) worst = std::max(worst, e / mag);
      if (!(e <= bound) && bad++ < 3)
        std::printf("  y[%lld, %lld]: kernel %.9g, CPU %.9g (bound %.3g)\n",
                    static_cast<long long>(m), static_cast<long long>(n), got, ref[i], bound);
    }
  std::printf(
      "%s stream GEMM M%lld N%lld K%lld, %d warps, %s%s: worst %.1e of the terms' "
      "magnitudes\n",
      bad ? "FAIL" : "PASS", static_cast<long long>(M), static_cast<long long>(N),
      static_cast<long long>(K), cs.warps, cs.y_bf16 ? "bf16" : "f32",
      cs.pow2 ? ", pow2 scales" : "", worst);
  return bad == 0;
}

}  // namespace

int main() {
  // 1 row; 8 rows; 3 rows; N past a 16-row CTA and a 128-row scale tile; K with a partial last
  // block; fewer blocks than warps (warps without blocks); 8 and 4 blocks per warp (the
  // prefetch's rotation).
  const std::vector<Case> cases = {
      {1, 64, 512, 4, true, false},   {8, 40, 1024, 8, false, false}, {3, 136, 272, 4, false, true},
      {5, 16, 160, 8, true, false},   {2, 33, 1280, 4, false, false}, {7, 24, 64, 8, false, false},
      {1, 32, 4096, 4, false, false}, {4, 16, 2048, 8, true, true},
  };
  int failed = 0;
  unsigned seed = 500;
  for (const Case& cs : cases) failed += run(cs, seed++) ? 0 : 1;
  std::printf("%d of %zu cases failed\n", failed, cases.size());
  return failed == 0 ? 0 : 1;
}
