// CPU GEMMs: FP8 against FP64 of the dequantized inputs (the same math: ≤ 1e-6) and against FP64
// of the unquantized inputs (within a bound derived from E4M3's precision); BF16 and errors.
#include <QtTest>

#include <cmath>
#include <vector>

#include "backend/backend_registry.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "fp8/codec.hpp"

using namespace fp8rl;

namespace {

struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  Fp8Matrix m;
};

Quantized quantize(Backend& be, std::vector<float>& x, int64_t rows, int64_t cols, ScaleBlock b) {
  Quantized q;
  q.codes.resize(rows * cols);
  q.scales.resize(scale_count(b, rows, cols));
  q.m = Fp8Matrix{q.codes.data(), q.scales.data(), rows, cols, b};
  be.quantize(Matrix{x.data(), rows, cols, DType::f32}, q.m, {}, nullptr);
  return q;
}

double deq(const Fp8Matrix& q, int64_t r, int64_t c) {
  return double(e4m3_to_float(q.codes[r * q.cols + c])) *
         q.scale_inv[scale_index(q.block, q.rows, q.cols, r, c)];
}

std::vector<float> random(Rng& rng, int64_t n) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(rng.normal() * (rng.uniform() < 0.01 ? 20 : 1));
  return v;
}

}  // namespace

class TestGemmCpu : public QObject {
  Q_OBJECT
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();

 private slots:
  void fp8FpropAgainstFp64() {
    Rng rng(3);
    const int64_t M = 96, N = 80, K = 515;  // K not a multiple of 128
    auto x = random(rng, M * K), w = random(rng, N * K);
    const auto qx = quantize(*cpu_, x, M, K, ScaleBlock::row1x128);
    const auto qw = quantize(*cpu_, w, N, K, ScaleBlock::tile128x128);
    std::vector<float> y(M * N);
    cpu_->gemm_fp8(qx.m, qw.m, Matrix{y.data(), M, N, DType::f32}, 0.0f);

    double num = 0, den = 0;
    const double u = 0x1p-4;  // E4M3 unit roundoff (3 mantissa bits)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double same = 0, exact = 0, bound = 0, abs_sum = 0;
        for (int64_t k = 0; k < K; ++k) {
          same += deq(qx.m, i, k) * deq(qw.m, j, k);
          exact += double(x[i * K + k]) * w[j * K + k];
          // |x − x̂| ≤ max(u·|x|, half the smallest subnormal step scaled back) per operand.
          const double ax = std::fabs(x[i * K + k]), aw = std::fabs(w[j * K + k]);
          const double ex =
              std::max(u * ax, 0x1p-10 * qx.m.scale_inv[scale_index(qx.m.block, M, K, i, k)]);
          const double ew =
              std::max(u * aw, 0x1p-10 * qw.m.scale_inv[scale_index(qw.m.block, N, K, j, k)]);
          bound += (ax + ex) * (aw + ew) - ax * aw;
          abs_sum += std::fabs(deq(qx.m, i, k) * deq(qw.m, j, k));
        }
        const double got = y[i * N + j];
        num += (got - same) * (got - same);
        den += same * same;
        // FP8 vs the unquantized product: within the bound E4M3 implies (+ FP32 accumulation).
        const double fp32_acc = double(K) * 0x1p-24 * abs_sum;
        QVERIFY2(
            std::fabs(got - exact) <= bound + fp32_acc,
            qPrintable(
                QString("(%1,%2): |%3 - %4| > %5").arg(i).arg(j).arg(got).arg(exact).arg(bound)));
      }
    // Same math as FP64 of the dequantized inputs.
    QVERIFY2(std::sqrt(num / den) <= 1e-6, qPrintable(QString::number(std::sqrt(num / den))));
  }

  void wgradAccumulates() {
    Rng rng(5);
    const int64_t N = 24, K = 40, M = 300;  // dW[N,K] += dYᵀ[N,M] · Xᵀ[K,M]ᵀ
    auto dyt = random(rng, N * M), xt = random(rng, K * M);
    const auto a = quantize(*cpu_, dyt, N, M, ScaleBlock::row1x128);
    const auto b = quantize(*cpu_, xt, K, M, ScaleBlock::row1x128);
    std::vector<float> dw(N * K, 1.5f);
    cpu_->gemm_fp8(a.m, b.m, Matrix{dw.data(), N, K, DType::f32}, 1.0f);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < K; ++j) {
        double want = 1.5;
        for (int64_t k = 0; k < M; ++k) want += deq(a.m, i, k) * deq(b.m, j, k);
        QVERIFY(std::fabs(dw[i * K + j] - want) <= 1e-5 * (1 + std::fabs(want)));
      }
  }

  void bf16GemmRoundsOutputOnce() {
    Rng rng(9);
    const int64_t M = 17, N = 33, K = 70;
    std::vector<bf16> a(M * K), b(N * K), c(M * N);
    for (auto& v : a) v = float_to_bf16(float(rng.normal()));
    for (auto& v : b) v = float_to_bf16(float(rng.normal()));
    cpu_->gemm(Matrix{a.data(), M, K, DType::bf16}, Matrix{b.data(), N, K, DType::bf16},
               Matrix{c.data(), M, N, DType::bf16}, 0.0f);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double want = 0;
        for (int64_t k = 0; k < K; ++k)
          want += double(bf16_to_float(a[i * K + k])) * bf16_to_float(b[j * K + k]);
        // One BF16 rounding (2^-9 relative) plus FP32 accumulation.
        QVERIFY(std::fabs(bf16_to_float(c[i * N + j]) - want) <= 0x1p-8 * std::fabs(want) + 1e-5);
      }
  }

  void mismatchedShapesAreErrors() {
    std::vector<float> a(6), b(8), c(4);
    try {
      cpu_->gemm(Matrix{a.data(), 2, 3, DType::f32}, Matrix{b.data(), 2, 4, DType::f32},
                 Matrix{c.data(), 2, 2, DType::f32}, 0.0f);
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(QString(e.what()).contains("contracted sizes differ"), e.what());
    }
    QVERIFY_THROWS_EXCEPTION(
        Error, cpu_->gemm(Matrix{a.data(), 2, 3, DType::f32}, Matrix{a.data(), 2, 3, DType::f32},
                          Matrix{c.data(), 2, 2, DType::bf16}, 1.0f));
  }
};

QTEST_APPLESS_MAIN(TestGemmCpu)
#include "test_gemm_cpu.moc"
