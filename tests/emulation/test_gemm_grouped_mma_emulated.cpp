// The single-launch FP8 grouped GEMM (kernels/gemm_grouped_mma.cu) on the CPU through the CUDA
// emulation (cuda_emulation.hpp: fibers for threads, ldmatrix and mma.sync m16n8k32 FP8 by the
// PTX ISA's fragment tables, deferred or eager cp.async), against an FP64 statement of
// Backend::gemm_fp8_grouped over the same codes and scales, and against the CPU backend's
// gemm_fp8_grouped (the reference). What it checks without a GPU: the fragment layouts, the
// ldmatrix addresses, the CTA → (group, row tile, column tile) map, empty groups, rows past a
// group's end, columns past N, a partial last K block, the grouped scale layout, the promotion
// of each K step with its scales, beta, a bf16 output, more groups than one launch takes, both
// FP8 formats, and that no unwritten shared memory is read (it starts as NaN
// bytes). Bound: 1e-5 of the sum of the terms' magnitudes per element (2^-8 for bf16). What it
// cannot check: timing, bank conflicts, the hardware's summation inside an mma, and races the
// round-robin schedule does not expose.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_registry.hpp"
#include "fp8/format.hpp"
#include "gemm_grouped_mma.hpp"

namespace {

using namespace fp8rl;

struct Case {
  std::vector<int64_t> rows;
  int64_t N, K;
  bool e4m3, c_bf16;
  float beta;
};

double code_value(uint8_t c, bool e4m3) {
  return emu::fp8_value(c, e4m3);
}

// A random finite FP8 code of the format.
uint8_t random_code(std::mt19937& rng, bool e4m3) {
  for (;;) {
    const auto c = static_cast<uint8_t>(rng() & 0xffu);
    if (std::isfinite(code_value(c, e4m3))) return c;
  }
}

bool run(const Case& cs, unsigned seed, bool eager) {
  emu::eager_copies = eager;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> log_scale(-4.0f, 4.0f);
  const int64_t N = cs.N, K = cs.K, kb = blocks_of(K);
  const size_t G = cs.rows.size();
  std::vector<int64_t> first(G + 1, 0);
  for (size_t g = 0; g < G; ++g) first[g + 1] = first[g] + cs.rows[g];
  const int64_t M = first[G];

  // a [M, K] codes and its scales in the grouped layout; per group b [N, K] with tile scales.
  std::vector<uint8_t> a(static_cast<size_t>(M * K));
  for (auto& c : a) c = random_code(rng, cs.e4m3);
  std::vector<float> sa(static_cast<size_t>(kb * M));
  for (auto& s : sa) s = std::exp2(log_scale(rng));
  std::vector<std::vector<uint8_t>> b(G);
  std::vector<std::vector<float>> sb(G);
  for (size_t g = 0; g < G; ++g) {
    b[g].resize(static_cast<size_t>(N * K));
    for (auto& c : b[g]) c = random_code(rng, cs.e4m3);
    sb[g].resize(static_cast<size_t>(scale_count(ScaleBlock::tile128x128, N, K)));
    for (auto& s : sb[g]) s = std::exp2(log_scale(rng));
  }
  std::vector<float> c0(static_cast<size_t>(M * N));
  std::normal_distribution<float> normal;
  for (auto& v : c0) v = cs.c_bf16 ? 0.0f : normal(rng);

  // FP64: want = Σ_k a·b·sa·sb (+ beta·c0), mag = Σ_k |a·b·sa·sb| (+ |beta·c0|).
  std::vector<double> want(static_cast<size_t>(M * N)), mag(want.size());
  for (size_t g = 0; g < G; ++g)
    for (int64_t r = 0; r < cs.rows[g]; ++r)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0, m = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double t = code_value(a[(first[g] + r) * K + k], cs.e4m3) *
                           code_value(b[g][n * K + k], cs.e4m3) *
                           sa[kb * first[g] + (k / 128) * cs.rows[g] + r] *
                           sb[g][scale_index(ScaleBlock::tile128x128, N, K, n, k)];
          s += t;
          m += std::fabs(t);
        }
        const size_t i = static_cast<size_t>((first[g] + r) * N + n);
        want[i] = s + cs.beta * c0[i];
        mag[i] = m + std::fabs(cs.beta * c0[i]);
      }

  // The kernel; a bf16 output starts as NaN, an f32 one as c0 (beta reads it).
  std::vector<float> c32 = c0;
  std::vector<uint16_t> c16(static_cast<size_t>(M * N), 0xffff);
  cuda::GroupedMmaArgs args;
  args.a = a.data();
  args.a_scales = sa.data();
  for (size_t g = 0; g < G; ++g) {
    args.b.push_back(b[g].data());
    args.b_scales.push_back(sb[g].data());
  }
  args.rows = cs.rows;
  args.c = cs.c_bf16 ? static_cast<void*>(c16.data()) : c32.data();
  args.c_bf16 = cs.c_bf16;
  args.N = N;
  args.K = K;
  args.beta = cs.beta;
  args.e4m3 = cs.e4m3;
  const std::string problem = cuda::grouped_mma_problem(args);
  if (!problem.empty()) {
    std::printf("FAIL the kernel refuses the case: %s\n", problem.c_str());
    return false;
  }
  cuda::gemm_fp8_grouped_mma(args, nullptr);

  // The CPU backend's gemm_fp8_grouped on the same operands.
  const auto cpu = make_cpu_backend();
  std::vector<Fp8Matrix> bm;
  for (size_t g = 0; g < G; ++g)
    bm.push_back(Fp8Matrix{b[g].data(), sb[g].data(), N, K, ScaleBlock::tile128x128,
                           cs.e4m3 ? Fp8Format::e4m3 : Fp8Format::e5m2});
  std::vector<float> ref32 = c0;
  std::vector<uint16_t> ref16(c16.size(), 0);
  const Fp8Matrix am{
      a.data(), sa.data(), M, K, ScaleBlock::row1x128, cs.e4m3 ? Fp8Format::e4m3 : Fp8Format::e5m2};
  cpu->gemm_fp8_grouped(am, bm,
                        Matrix{cs.c_bf16 ? static_cast<void*>(ref16.data()) : ref32.data(), M, N,
                               cs.c_bf16 ? DType::bf16 : DType::f32},
                        cs.rows, cs.beta);

  int bad = 0;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double got = cs.c_bf16 ? emu_bf2f(c16[i]) : c32[i];
    const double ref = cs.c_bf16 ? emu_bf2f(ref16[i]) : ref32[i];
    const double bound =
        cs.c_bf16 ? std::ldexp(std::fabs(want[i]), -8) + 1e-5 * mag[i] : 1e-5 * mag[i] + 1e-30;
    const double e = std::fabs(got - want[i]);
    if (mag[i] > 0) worst = std::max(worst, e / mag[i]);
    if (!(e <= bound) || !(std::fabs(ref - want[i]) <= bound)) {
      if (bad++ < 3)
        std::printf("  element %zu (row %zu col %zu): kernel %.9g, CPU %.9g, FP64 %.9g\n", i,
                    i / static_cast<size_t>(N), i % static_cast<size_t>(N), got, ref, want[i]);
    }
  }
  std::string groups;
  for (size_t g = 0; g < G && g < 8; ++g) groups += (g ? "," : "") + std::to_string(cs.rows[g]);
  if (G > 8) groups += ",… (" + std::to_string(G) + " groups)";
  std::printf(
      "%s grouped FP8 mma rows {%s} N%lld K%lld %s -> %s%s, cp.async %s: worst "
      "%.1e of the terms' magnitudes\n",
      bad ? "FAIL" : "PASS", groups.c_str(), static_cast<long long>(N), static_cast<long long>(K),
      cs.e4m3 ? "e4m3" : "e5m2", cs.c_bf16 ? "bf16" : "f32", cs.beta != 0 ? " beta=1" : "",
      eager ? "eager" : "deferred", worst);
  return bad == 0;
}

}  // namespace

int main() {
  std::vector<int64_t> many(130);
  for (size_t g = 0; g < many.size(); ++g) many[g] = static_cast<int64_t>(g % 5);  // empty too
  // Empty groups first, between and last; a single row; rows past a tile; K with a partial last
  // block; N past a column tile; more groups than a launch takes.
  const std::vector<Case> cases = {
      {{0, 1, 130, 7, 256, 0}, 200, 384, true, false, 0.0f},
      {{3, 129}, 128, 272, true, true, 0.0f},
      {{64}, 72, 128, true, false, 1.0f},
      {{17, 0, 40}, 136, 160, false, false, 0.0f},
      {many, 64, 128, true, true, 0.0f},
  };
  int failed = 0, runs = 0;
  for (size_t i = 0; i < cases.size(); ++i)
    for (bool eager : {false, true}) {
      failed += run(cases[i], 300 + static_cast<unsigned>(i), eager) ? 0 : 1;
      ++runs;
    }
  std::printf("%d of %d runs failed\n", failed, runs);
  return failed == 0 ? 0 : 1;
}
