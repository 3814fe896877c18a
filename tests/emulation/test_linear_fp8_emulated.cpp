// The decode GEMM kernels of CudaBackend::linear_fp8 on the CPU through the CUDA emulation
// (cuda_emulation.hpp: fibers for threads, mma.sync m16n8k32 E4M3 by the PTX ISA's fragment
// tables, shuffles as warp barriers, CTAs one after another), against the CPU backend's
// linear_fp8 (quantize x 1x128, then gemm_fp8: the reference) on the same x and E4M3 weight
// tiles:
//  - the split-K kernel (kernels/linear_fp8.cuh, the default up to linear_fp8_max_rows rows),
//    with the host's own plan (plan_decode_gemm): x quantized into shared memory in batches of
//    tasks, m tiles (M > 8·nt), K splits with FP32 partials, the tile counters and the last
//    CTA's sum in split order, f32 and BF16 x;
//  - the one-stream kernel for 1-8 rows (kernels/linear_fp8_stream.cu): x quantized in
//    registers, the x-row scale exchange, each warp's share of K (a partial last block, warps
//    without blocks, the prefetch's rotation over many blocks), 4 and 8 warps.
// Both: quantize()'s codes and scales (pow2 scales too), the permuted K order shared by both
// operands, weight rows past N and past a 128-row scale tile, f32 and BF16 y. Bound: 1e-5 of the
// sum of the terms' magnitudes per element (BF16 y: plus 2^-8 of the value). What it cannot
// check: timing, and the tensor core's own summation inside a block.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_registry.hpp"
#include "fp8/format.hpp"
#include "linear_fp8.cuh"
#include "linear_fp8_stream.hpp"

namespace {

using namespace fp8rl;

struct Case {
  int64_t M, N, K;
  bool stream;          // the one-stream kernel, else the split-K one
  int warps_or_splits;  // stream: 4 or 8 warps; split-K: K splits (0: the plan's for 264 CTAs)
  bool x_bf16, y_bf16, pow2;
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
  // x with a different magnitude per 128-block, so the blocks' scales differ; BF16 values
  // either way (xv), stored as BF16 bits or as floats.
  std::vector<float> xv(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const float mag = std::exp2(static_cast<float>((m * 7 + k / 128 * 3) % 11) - 5.0f);
      xv[m * K + k] = __uint_as_float(__float_as_uint(normal(rng) * mag) & 0xffff0000u);
    }
  std::vector<uint16_t> x16(xv.size());
  for (size_t i = 0; i < xv.size(); ++i)
    x16[i] = static_cast<uint16_t>(__float_as_uint(xv[i]) >> 16);
  std::vector<uint8_t> w(static_cast<size_t>(N * K));
  for (auto& c : w) c = random_code(rng);
  std::vector<float> ws(static_cast<size_t>(scale_count(ScaleBlock::tile128x128, N, K)));
  for (auto& s : ws) s = std::exp2(log_scale(rng));

  std::vector<float> y32(static_cast<size_t>(M * N), NAN);  // every element must be written
  std::vector<uint16_t> y16(y32.size(), 0xffff);
  void* y = cs.y_bf16 ? static_cast<void*>(y16.data()) : y32.data();
  std::string what;
  if (cs.stream) {
    cuda::StreamGemmArgs a;
    a.x = x16.data();
    a.w = w.data();
    a.ws = ws.data();
    a.y = y;
    a.y_bf16 = cs.y_bf16;
    a.M = M;
    a.N = N;
    a.K = K;
    a.ws_stride = tile_scale_stride(K);
    a.pow2 = cs.pow2;
    a.warps = cs.warps_or_splits;
    const std::string problem = cuda::stream_gemm_problem(a);
    if (!problem.empty()) {
      std::printf("FAIL the kernel refuses the case: %s\n", problem.c_str());
      return false;
    }
    cuda::linear_fp8_stream(a, nullptr);
    what = "one-stream, " + std::to_string(cs.warps_or_splits) + " warps";
  } else {
    const decode_gemm::Plan plan = decode_gemm::plan_decode_gemm(M, N, K, cs.warps_or_splits, 264);
    std::vector<unsigned> counters(static_cast<size_t>(plan.tiles), 0u);
    std::vector<float> partial(static_cast<size_t>(plan.splits * M * N), NAN);
    decode_gemm::DecodeGemmArgs a{};
    a.x = cs.x_bf16 ? cuda::In{x16.data(), true} : cuda::In{xv.data(), false};
    a.w = w.data();
    a.ws = ws.data();
    a.y = cuda::Out{y, cs.y_bf16};
    a.partial = partial.data();
    a.counters = counters.data();
    a.M = M;
    a.N = N;
    a.K = K;
    a.ws_stride = tile_scale_stride(K);
    a.pow2 = cs.pow2;
    decode_gemm::launch(a, plan, 0, nullptr);
    for (unsigned c : counters)
      if (c != 0) {
        std::printf("FAIL a tile counter left at %u (the next launch would misread it)\n", c);
        return false;
      }
    what = "split-K, nt " + std::to_string(plan.nt) + ", " + std::to_string(plan.splits) +
           " splits of " + std::to_string(plan.kb_per) + " blocks";
  }

  // The reference: the CPU backend's linear_fp8 (f32 y), and the terms' magnitudes from x and
  // the dequantized weight (|q(x)/s| is x within FP8's rounding: a loose but fair scale).
  const auto cpu = make_cpu_backend();
  std::vector<float> ref(y32.size());
  QuantOptions opt;
  opt.pow2_scales = cs.pow2;
  cpu->linear_fp8(
      cs.x_bf16 ? Matrix{x16.data(), M, K, DType::bf16} : Matrix{xv.data(), M, K, DType::f32},
      Fp8Matrix{w.data(), ws.data(), N, K, ScaleBlock::tile128x128, Fp8Format::e4m3},
      Matrix{ref.data(), M, N, DType::f32}, opt);
  int bad = 0;
  double worst = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double mag = 0;
      for (int64_t k = 0; k < K; ++k)
        mag += std::fabs(static_cast<double>(xv[m * K + k]) * emu::fp8_value(w[n * K + k], true) *
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
  std::printf("%s M%lld N%lld K%lld, %s, x %s, y %s%s: worst %.1e of the terms' magnitudes\n",
              bad ? "FAIL" : "PASS", static_cast<long long>(M), static_cast<long long>(N),
              static_cast<long long>(K), what.c_str(), cs.x_bf16 ? "bf16" : "f32",
              cs.y_bf16 ? "bf16" : "f32", cs.pow2 ? ", pow2 scales" : "", worst);
  return bad == 0;
}

}  // namespace

int main() {
  const std::vector<Case> cases = {
      // The one-stream kernel: 1 row; 8 rows; 3 rows; N past a 16-row CTA and a 128-row scale
      // tile; K with a partial last block; fewer blocks than warps (warps without blocks); 8 and
      // 4 blocks per warp (the prefetch's rotation).
      {1, 64, 512, true, 4, true, true, false},
      {8, 40, 1024, true, 8, true, false, false},
      {3, 136, 272, true, 4, true, false, true},
      {5, 16, 160, true, 8, true, true, false},
      {2, 33, 1280, true, 4, true, false, false},
      {7, 24, 64, true, 8, true, false, false},
      {1, 32, 4096, true, 4, true, false, false},
      {4, 16, 2048, true, 8, true, true, true},
      // The split-K kernel: the plan's splits at 1 row; 64 rows in one split (nt 8, 4 blocks:
      // 32 tasks a warp, 4 batches); 3 splits with a partial last block; 1 split with N past a
      // tile; 33 rows (rows past M in the staging); 130 rows (two m tiles); f32 x.
      {1, 136, 4096, false, 0, true, true, false},
      {64, 128, 512, false, 1, true, false, false},
      {3, 257, 1008, false, 3, true, true, true},
      {8, 200, 384, false, 1, true, false, false},
      {33, 128, 640, false, 2, false, false, false},
      {130, 64, 256, false, 0, true, false, false},
  };
  int failed = 0;
  unsigned seed = 500;
  for (const Case& cs : cases) failed += run(cs, seed++) ? 0 : 1;
  std::printf("%d of %zu cases failed\n", failed, cases.size());
  return failed == 0 ? 0 : 1;
}
